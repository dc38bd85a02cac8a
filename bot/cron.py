"""Crontab expressions as APScheduler triggers: a leaf module, so a command can check a cron
before the scheduler (which imports the service, which imports the commands) is loaded."""

from __future__ import annotations

import datetime as dt

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger

from liminalis.errors import InvalidInput

__all__ = ["parse_cron"]

_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _crontab_days(field: str) -> str:
    """Crontab day-of-week (0 or 7 = Sunday) → APScheduler day names.

    APScheduler 3's ``CronTrigger.from_crontab`` passes the field through unchanged, and its
    numbering starts at Monday = 0, so ``5`` would mean Saturday instead of crontab's Friday.
    Numbers, ranges, lists and steps are expanded to explicit names; names pass through.
    """
    if field == "*" or not any(ch.isdigit() for ch in field):
        return field
    days: list[int] = []
    for part in field.split(","):
        rng, _, step_s = part.partition("/")
        step = int(step_s) if step_s else 1
        if rng == "*":
            lo, hi = 0, 6
        elif "-" in rng:
            a, b = rng.split("-", 1)
            lo, hi = int(a), int(b)
        else:
            lo = int(rng)
            hi = 6 if step_s else lo
        if not (0 <= lo <= 7 and 0 <= hi <= 7 and lo <= hi and step >= 1):
            raise ValueError(f"bad day-of-week {part!r}")
        days.extend(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(_DAY_NAMES[d] for d in sorted(set(days)))


def parse_cron(expr: str) -> BaseTrigger:
    """A UTC trigger from a 5-field crontab expression; ``InvalidInput`` if malformed or if it
    can never fire (``0 0 31 2 *``: accepted, it would replace a working schedule with silence).

    Crontab's rule for the two day fields is kept: when both are restricted (neither starts with
    ``*``), either matching fires (``0 18 1 * 5`` is the 1st *and* every Friday). APScheduler's
    ``CronTrigger`` wants both, so that case is an ``OrTrigger`` of the two.
    """
    fields = (expr or "").split()
    if len(fields) != 5:
        raise InvalidInput(
            f"cron {expr!r}", user_message="Use a 5-field cron expression (UTC), e.g. `0 18 * * 5`."
        )
    minute, hour, day, month, dow = fields
    try:
        trigger: BaseTrigger
        if not day.startswith("*") and not dow.startswith("*"):
            trigger = OrTrigger(
                [
                    CronTrigger(minute=minute, hour=hour, day=day, month=month, timezone=dt.UTC),
                    CronTrigger(
                        minute=minute,
                        hour=hour,
                        month=month,
                        day_of_week=_crontab_days(dow),
                        timezone=dt.UTC,
                    ),
                ]
            )
        else:
            trigger = CronTrigger(
                minute=minute,
                hour=hour,
                day=day,
                month=month,
                day_of_week=_crontab_days(dow),
                timezone=dt.UTC,
            )
    except ValueError as exc:
        raise InvalidInput(
            f"cron {expr!r}: {exc}",
            user_message="That cron expression is not valid, e.g. `0 18 * * 5`.",
        ) from exc
    # Five fields have no year, so one that fires at all fires within any four years (29 February).
    if trigger.get_next_fire_time(None, dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) is None:
        raise InvalidInput(
            f"cron {expr!r} never fires",
            user_message="That schedule never fires (no such date); e.g. `0 18 * * 5` is Fridays 18:00 UTC.",
        )
    return trigger
