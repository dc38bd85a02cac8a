"""Scheduled work: per-campaign recap posts and the periodic background tick.

Built on APScheduler 3.x (``AsyncIOScheduler``), but the decisions live here so they can be tested
with a frozen clock:

* **Slots.** A recap schedule is a 5-field cron expression (UTC) plus a ``platform:channel``
  target. The *slot* of a moment ``now`` is the latest cron fire time ``t`` with
  ``now - grace <= t <= now``. A slot is posted at least once and never twice once out: it is
  *claimed* in ``recap_posts`` (one insert that ignores a slot already there), *posted*, then
  *marked posted* with the platform's message id. A slot marked posted is never posted again;
  a slot only claimed (the process died while posting, or the post failed) is posted by the
  next run, unless this process is posting it right now (two overlapping ticks). A slot missed
  while the bot was down is posted at start-up if it is still within ``grace``. The one
  duplicate left possible: a process that dies after the platform took the post and before the
  mark (nothing stored says it went out). One process serves a data directory.
* **Persistence.** Schedules set with ``/recap schedule`` live in ``recap_schedules``; a
  campaign's ``campaign.toml`` ``[recap] cron``/``channel`` is the default when no row exists.
  APScheduler's own job store stays in memory: the jobs are rebuilt from the database on start,
  and the database, not APScheduler, remembers what was posted. A recap is posted only to a
  channel linked to its campaign at post time (a thread: its own link, else its parent's).
* **Tick.** Every ``tick_seconds`` the tick runs pending ingest for indexed campaigns (the
  indexer is incremental, so an unchanged campaign costs a scan of hashes), brings the recap jobs
  in line with the schedules (campaign.toml edits apply without a restart) and posts any slot
  still due, then any extra tasks plugged in later (analysis passes: ``bot.pass_jobs`` keeps a
  cron job per scheduled pass in line with the stored definitions).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.cron import parse_cron
from bot.service import BotService, Reply
from liminalis.clock import SystemClock
from liminalis.errors import InvalidInput, UnknownCampaign
from liminalis.ports import Clock
from liminalis.store.rows import ScheduleRow

__all__ = [
    "RecapSchedule",
    "RecapScheduler",
    "SystemClock",
    "Poster",
    "parse_target",
    "latest_slot",
]

_log = logging.getLogger(__name__)

#: Posts a reply to a channel id on one platform; returns the platform's id of the message (the
#: first, for a reply sent as several), ``None`` where the platform gives none.
Poster = Callable[[str, Reply], Awaitable[str | None]]
TickTask = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RecapSchedule:
    campaign: str
    cron: str
    platform: str
    channel_id: str
    source: str = "db"  # "db" (set by /recap schedule) or "config" (campaign.toml)
    parent_id: str | None = None  # the channel whose thread ``channel_id`` is (set in a thread)


def parse_target(spec: str) -> tuple[str, str] | None:
    """``"discord:123"`` → ``("discord", "123")``; anything else → ``None``."""
    platform, sep, channel = (spec or "").strip().partition(":")
    if not sep or platform not in {"discord", "slack"} or not channel.strip():
        return None
    return platform, channel.strip()


def latest_slot(trigger: BaseTrigger, now: dt.datetime, grace: dt.timedelta) -> dt.datetime | None:
    """The latest fire time of ``trigger`` in ``[now - grace, now]``, or ``None``."""
    t = trigger.get_next_fire_time(None, now - grace)
    last = None
    while t is not None and t <= now:
        last = t
        t = trigger.get_next_fire_time(t, t + dt.timedelta(seconds=1))
    return last


def _slot_key(slot: dt.datetime) -> str:
    return slot.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%MZ")


class RecapScheduler:
    """Recap schedules and the background tick over one ``BotService``.

    Args:
        service: the bot service (its engine's database holds schedules and posted slots).
        posters: platform name → coroutine posting a ``Reply`` to a channel id; a schedule for a
            platform without a poster waits (its slot is not claimed).
        clock: the time source (``liminalis.testing.FrozenClock`` in tests).
        grace: how late a missed slot may still be posted (default 6 hours).
        tick_seconds: period of the background tick; 0 disables it.
    """

    def __init__(
        self,
        service: BotService,
        *,
        posters: Mapping[str, Poster] | None = None,
        clock: Clock | None = None,
        grace: dt.timedelta = dt.timedelta(hours=6),
        tick_seconds: int = 300,
        tick_tasks: Sequence[TickTask] = (),
    ) -> None:
        self.service = service
        self.db = service.engine.db
        self.posters: dict[str, Poster] = dict(posters or {})
        self.clock: Clock = clock or SystemClock()
        self.grace = grace
        self.tick_seconds = tick_seconds
        self.tick_tasks: list[TickTask] = [self.ingest_pending, self.recaps, *tick_tasks]
        self._aps: AsyncIOScheduler | None = None
        self._armed: dict[str, str] = {}  # campaign → the cron its job runs on
        self._in_flight: set[tuple[str, str]] = set()  # (campaign, slot) being posted right now
        self._sync_lock = asyncio.Lock()
        self._tick_lock = asyncio.Lock()

    # -- schedules ---------------------------------------------------------------------------

    async def schedules(self) -> list[RecapSchedule]:
        """Every active schedule: database rows, else ``campaign.toml`` ``[recap]``."""
        out: dict[str, RecapSchedule] = {}
        for r in await self.db.schedules.all():
            try:  # one stored before parse_cron refused it (a date that never comes) is skipped
                parse_cron(r.cron)
            except InvalidInput:
                _log.warning(
                    "campaign %s: stored recap cron %r is invalid; no recap", r.campaign, r.cron
                )
                continue
            out[r.campaign] = RecapSchedule(
                r.campaign, r.cron, r.platform, r.channel_id, parent_id=r.parent_id
            )
        for slug in await self.service.engine.list_campaigns():
            if slug in out:
                continue
            try:
                cfg = await self.service.config(slug)
            except Exception:
                _log.warning(
                    "campaign %s: config unreadable; no recap schedule", slug, exc_info=True
                )
                continue
            if not cfg.recap_cron:
                continue
            target = parse_target(cfg.recap_channel)
            if target is None:
                if cfg.recap_channel:
                    _log.warning(
                        "campaign %s: [recap] channel %r is not platform:id; no recap",
                        slug,
                        cfg.recap_channel,
                    )
                continue
            try:
                parse_cron(cfg.recap_cron)
            except InvalidInput:
                _log.warning(
                    "campaign %s: [recap] cron %r is invalid; no recap", slug, cfg.recap_cron
                )
                continue
            out[slug] = RecapSchedule(slug, cfg.recap_cron, *target, source="config")
        return sorted(out.values(), key=lambda s: s.campaign)

    async def set_schedule(
        self,
        campaign: str,
        *,
        cron: str,
        platform: str,
        channel_id: str,
        parent_id: str | None = None,
    ) -> str:
        """Persist a schedule (replacing any) and (re)arm its job; returns a human description.

        ``parent_id``: the channel ``channel_id`` is a thread of, so that linking or unlinking
        that channel ends the schedule with it (``bot.directory``)."""
        trigger = parse_cron(cron)
        cron = " ".join(cron.split())
        await self.db.schedules.set(
            ScheduleRow(
                campaign=campaign,
                cron=cron,
                platform=platform,
                channel_id=str(channel_id),
                parent_id=str(parent_id) if parent_id else None,
            )
        )
        # Slots that already passed must not be "caught up" by the new schedule.
        slot = latest_slot(trigger, self.clock.now(), self.grace)
        if slot is not None:
            await self.settle(campaign, slot)
        await self.sync_jobs()
        nxt = trigger.get_next_fire_time(None, self.clock.now() + dt.timedelta(seconds=1))
        return f"on `{cron}` (UTC); next {nxt:%a %d %b %H:%M} UTC" if nxt else f"on `{cron}` (UTC)"

    async def remove_schedule(self, campaign: str) -> bool:
        had = await self.db.schedules.remove(campaign)
        await self.sync_jobs()  # campaign.toml's [recap], if any, applies again
        return had

    async def sync_jobs(self) -> None:
        """One cron job per schedule, on its current cron; jobs of schedules gone are removed."""
        if self._aps is None:
            return
        async with (
            self._sync_lock
        ):  # two at once: the one that read the schedules first must not undo the other
            want = {s.campaign: s for s in await self.schedules()}
            if self._aps is None:
                return
            for slug in [c for c in self._armed if c not in want]:
                if self._aps.get_job(f"recap:{slug}"):
                    self._aps.remove_job(f"recap:{slug}")
                del self._armed[slug]
            for slug, sched in want.items():
                if self._armed.get(slug) != sched.cron:
                    self._arm(sched)

    async def describe(self, campaign: str) -> str:
        for s in await self.schedules():
            if s.campaign == campaign:
                nxt = parse_cron(s.cron).get_next_fire_time(
                    None, self.clock.now() + dt.timedelta(seconds=1)
                )
                when = f"; next {nxt:%a %d %b %H:%M} UTC" if nxt else ""
                return f"Recaps are posted on `{s.cron}` (UTC) to a {s.platform} channel{when}."
        return "No recap schedule. A GM can set one with `/recap schedule <cron>`, e.g. `/recap schedule 0 18 * * 5`."

    # -- slots -------------------------------------------------------------------------------

    async def claim(self, campaign: str, slot: dt.datetime) -> bool:
        """Atomically claim ``slot`` for a post; ``True`` only for the one caller that claimed it."""
        return await self.db.schedules.claim(campaign, _slot_key(slot))

    async def settle(self, campaign: str, slot: dt.datetime) -> bool:
        """Settle ``slot`` with nothing to post; ``True`` only where this call settled it."""
        return await self.db.schedules.settle(campaign, _slot_key(slot))

    async def run_due(self, campaign: str | None = None) -> list[tuple[str, str]]:
        """Post every due slot not yet out (optionally for one campaign); returns the
        ``(campaign, slot)``s posted.

        A slot this process is posting right now is left to that post (``_in_flight``: a cron
        job and the tick may run at once); any other slot still only claimed is posted again."""
        now = self.clock.now()
        posted: list[tuple[str, str]] = []
        for sched in await self.schedules():
            if campaign is not None and sched.campaign != campaign:
                continue
            poster = self.posters.get(sched.platform)
            if poster is None:
                _log.debug("recap for %s waits: %s is not running", sched.campaign, sched.platform)
                continue
            slot = latest_slot(parse_cron(sched.cron), now, self.grace)
            if slot is None or (key := (sched.campaign, _slot_key(slot))) in self._in_flight:
                continue
            self._in_flight.add(key)
            try:
                if await self._deliver(sched, slot, poster):
                    posted.append(key)
            finally:
                self._in_flight.discard(key)
        return posted

    async def _deliver(self, sched: RecapSchedule, slot: dt.datetime, poster: Poster) -> bool:
        """Build, check, claim, post and mark one slot; whether it was posted.

        The recap is built before its slot is claimed: a failure to build it (a campaign.toml
        mid-edit, a database error) leaves the slot to the next tick, within the grace window."""
        state = await self.db.schedules.slot_state(sched.campaign, _slot_key(slot))
        if state is not None and state[0] != "claimed":
            return False  # out already, or settled with nothing to post
        built = await self._build(sched, slot)
        if built is None or not await self._linked(sched, slot):
            return False
        # A claim left by a process that died while posting (or by a post that failed) is this
        # run's to finish: nothing else in this process is posting it (``_in_flight``).
        if state is None and not await self.claim(sched.campaign, slot):
            return False
        return await self._post(sched, slot, poster, built)

    async def _build(self, sched: RecapSchedule, slot: dt.datetime) -> Reply | None:
        """The recap as it will be posted, or ``None`` (logged) when it cannot be built now."""
        try:
            cfg = await self.service.config(sched.campaign)
            text, sources = await self.service.recap(sched.campaign)
        except UnknownCampaign:  # its folder is gone: nothing to retry, said once per slot
            if await self.settle(sched.campaign, slot):
                _log.warning(
                    "recap of %s for slot %s skipped: no such campaign any more",
                    sched.campaign,
                    _slot_key(slot),
                )
            return None
        except Exception:
            _log.exception(
                "recap of %s for slot %s could not be built; the next tick tries again",
                sched.campaign,
                _slot_key(slot),
            )
            return None
        return Reply(text=text, sources=sources, title=f"Previously on {cfg.name}")

    async def _linked(self, sched: RecapSchedule, slot: dt.datetime) -> bool:
        """Only a channel linked to the campaign at post time gets its recaps: one linked to
        another campaign, or to none any more, may hold anyone, whether /recap schedule or
        campaign.toml named it. A slot refused is settled, so it is said once, not every tick."""
        linked = await self.service.directory.campaign_for(
            sched.platform, sched.channel_id, sched.parent_id
        )
        if linked == sched.campaign:
            return True
        if await self.settle(sched.campaign, slot):
            _log.warning(
                "recap of %s not posted: %s:%s is linked to %s",
                sched.campaign,
                sched.platform,
                sched.channel_id,
                linked or "no campaign",
            )
        return False

    async def _post(
        self, sched: RecapSchedule, slot: dt.datetime, poster: Poster, reply: Reply
    ) -> bool:
        """Post a claimed slot, then mark it posted with the platform's message id.

        A post that fails leaves the claim: the next run posts it again (at least once). The
        one duplicate left possible is a process dying after the platform took the post and
        before the mark: nothing stored says it went out."""
        key = _slot_key(slot)
        try:
            message_id = await poster(sched.channel_id, reply)
        except Exception:
            _log.exception(
                "recap of %s for slot %s failed; its slot stays claimed and the next tick posts it",
                sched.campaign,
                key,
            )
            return False
        try:
            await self.db.schedules.mark_posted(sched.campaign, key, message_id or "")
        except Exception:
            _log.exception(
                "recap of %s for slot %s was posted but not marked: the next tick may post it again",
                sched.campaign,
                key,
            )
        _log.info("posted recap of %s for slot %s (message %s)", sched.campaign, key, message_id)
        return True

    async def recaps(self) -> None:
        """The tick's recap task: arm the jobs the schedules now call for (a ``[recap]`` edited
        or added in campaign.toml, the config default back after ``/recap schedule off``, a
        campaign gone), and post any due slot a job missed."""
        await self.sync_jobs()
        await self.run_due()

    # -- tick --------------------------------------------------------------------------------

    async def ingest_pending(self) -> None:
        """Incrementally ingest every indexed campaign (new uploads, edited files), and re-index
        one built with an older embedder or options (after an upgrade that ships a new embedder,
        every campaign is re-embedded on the first tick, not only the default one)."""
        engine = self.service.engine
        for slug in await engine.list_campaigns():
            try:  # one broken campaign (a bad campaign.toml, an odd folder) must not stall the rest
                if not await engine.was_indexed(slug):
                    continue
                report = await engine.ingest(slug)
                # Served under an older profile this process can still serve: build the next
                # generation beside it and publish it (blue/green), answers go on meanwhile.
                upgraded = await engine.upgrade_index(slug)
                if upgraded is not None:
                    _log.info(
                        "tick re-index %s under %s: %s",
                        slug,
                        upgraded.profile,
                        "published" if upgraded.published else f"not published ({upgraded.note})",
                    )
            except Exception:
                _log.exception("tick ingest %s failed; the other campaigns go on", slug)
                continue
            if report.passages_added or report.passages_removed:
                _log.info(
                    "tick ingest %s: +%d -%d passages",
                    slug,
                    report.passages_added,
                    report.passages_removed,
                )

    async def tick(self) -> None:
        """Run every tick task once; one failing task does not stop the others, ticks never overlap."""
        if self._tick_lock.locked():
            _log.info("previous tick still running; skipping")
            return
        async with self._tick_lock:
            for task in self.tick_tasks:
                try:
                    await task()
                except Exception:
                    _log.exception("tick task %s failed", getattr(task, "__name__", task))

    async def _tick_job(self) -> None:
        """The tick as an APScheduler job. Shutdown cancels a tick still running (a re-embed can
        take minutes); that ends quietly: an interrupted rebuild stays marked, and the next
        start's first tick resumes it."""
        try:
            await self.tick()
        except asyncio.CancelledError:
            _log.info("tick cancelled by shutdown; the next start resumes it")

    # -- APScheduler -------------------------------------------------------------------------

    def _arm(self, sched: RecapSchedule) -> None:
        if self._aps is None:
            return
        self._armed[sched.campaign] = sched.cron
        self._aps.add_job(
            self._fire,
            parse_cron(sched.cron),
            args=[sched.campaign],
            id=f"recap:{sched.campaign}",
            replace_existing=True,
            coalesce=True,
            max_instances=1,
            misfire_grace_time=int(self.grace.total_seconds()),
        )

    async def _fire(self, campaign: str) -> None:
        try:
            await self.run_due(campaign)
        except Exception:
            _log.exception("recap job for %s failed", campaign)

    async def start(self) -> None:
        """Catch up missed slots, then arm one cron job per schedule and the tick."""
        self._aps = AsyncIOScheduler(timezone=dt.UTC)
        await self.run_due()
        await self.sync_jobs()
        if self.tick_seconds > 0:
            # The first tick runs at start: campaigns built with an older embedder are re-indexed
            # (and files changed while the bot was down picked up) now, not one period later.
            self._aps.add_job(
                self._tick_job,
                IntervalTrigger(seconds=self.tick_seconds),
                id="tick",
                coalesce=True,
                max_instances=1,
                replace_existing=True,
                next_run_time=dt.datetime.now(dt.UTC),
            )
        self._aps.start()
        _log.info(
            "scheduler: %d recap schedule(s), tick every %ss",
            len(self._aps.get_jobs()) - (self.tick_seconds > 0),
            self.tick_seconds,
        )

    @property
    def aps(self) -> AsyncIOScheduler | None:
        """The running APScheduler, for jobs other modules keep (``bot.pass_jobs``)."""
        return self._aps

    def jobs(self) -> list[str]:
        return [j.id for j in self._aps.get_jobs()] if self._aps else []

    async def close(self) -> None:
        if self._aps is not None and self._aps.running:
            self._aps.shutdown(wait=False)
        self._aps = None
        self._armed.clear()

    async def __aenter__(self) -> RecapScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
