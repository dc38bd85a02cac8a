"""Scheduled passes: one APScheduler cron job per stored pass definition with a ``cron``.

Kept in line with the definitions by the scheduler's tick (a pass saved with ``liminalis pass
save`` in another process is armed within one tick; one deleted or without a cron any more is
disarmed). A job runs its pass with the ``scheduled`` trigger: a paused campaign's does not
start, and like every run it processes only the documents pending for that pass.
"""

from __future__ import annotations

import logging

from bot.cron import parse_cron
from bot.scheduler import RecapScheduler
from liminalis.errors import InvalidInput
from liminalis.passes import Passes

__all__ = ["PassJobs"]

_log = logging.getLogger(__name__)


class PassJobs:
    """The cron jobs of scheduled passes, on a running :class:`RecapScheduler`'s APScheduler."""

    def __init__(self, passes: Passes, scheduler: RecapScheduler) -> None:
        self.passes = passes
        self.scheduler = scheduler
        self._armed: dict[str, str] = {}  # job id → the cron it runs on

    @staticmethod
    def job_id(campaign: str, name: str) -> str:
        return f"pass:{campaign}:{name}"

    async def sync(self) -> None:
        """Arm a job per scheduled pass on its current cron; remove the jobs of passes gone."""
        aps = self.scheduler.aps
        if aps is None:
            return
        want = {
            self.job_id(c, d.name): (c, d.name, d.cron or "")
            for c, d in await self.passes.scheduled()
        }
        for job_id in [j for j in self._armed if j not in want]:
            if aps.get_job(job_id):
                aps.remove_job(job_id)
            del self._armed[job_id]
        for job_id, (campaign, name, cron) in want.items():
            if self._armed.get(job_id) == cron:
                continue
            try:
                trigger = parse_cron(cron)
            except InvalidInput:
                _log.warning(
                    "pass %s of %s: cron %r is invalid; not scheduled", name, campaign, cron
                )
                continue
            aps.add_job(
                self.fire,
                trigger,
                args=[campaign, name],
                id=job_id,
                replace_existing=True,
                coalesce=True,
                max_instances=1,
                misfire_grace_time=3600,
            )
            self._armed[job_id] = cron

    async def fire(self, campaign: str, name: str) -> None:
        """The job: run the pass (``scheduled``); a failure is logged, the next slot tries again."""
        try:
            result = await self.passes.run(campaign, name, trigger="scheduled")
        except Exception:
            _log.exception("scheduled pass %s of %s failed", name, campaign)
            return
        _log.info("scheduled pass %s of %s: %s %s", name, campaign, result.status, result.reason)
