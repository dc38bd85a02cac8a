"""``/log [days]`` (``/gm log`` where commands are grouped): GM: what players asked in the last
days, the documents they keep asking about and the gaps in the notes (:mod:`liminalis.questions`).

GM-only and private: the log holds every player's questions, and names GM-only documents."""

from __future__ import annotations

import re

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.errors import InvalidInput

__all__ = ["command", "DAYS"]

DAYS = 90  # the most a log reaches back
_USAGE = f"Usage: `/log [days 1-{DAYS}]`"


def _parse(arg: str) -> dict[str, OptionValue]:
    if not arg:
        return {}
    if not re.fullmatch(r"[0-9]{1,3}", arg.strip()):
        raise InvalidInput("bad log", user_message=_USAGE)
    return {"days": int(arg)}


async def run(request: Request, scope: Scope) -> Reply:
    cfg = scope.config
    days = request.integer("days") or 7
    if not 1 <= days <= DAYS:
        raise InvalidInput("bad log days", user_message=_USAGE)
    report = await scope.services.engine.question_report(cfg.slug, days=days)
    return Reply(text=report.render(name=cfg.name), title="What the table asked")


command = Command(
    name="log",
    group="gm",
    description="GM: what players asked, what the notes do not answer, what they keep asking about",
    run=run,
    options=(
        Option("days", "integer", f"How many days back (1-{DAYS}; default 7)", low=1, high=DAYS),
    ),
    usage=(
        "`/log [days]` — GM: what players asked, the gaps in your notes, the documents they ask about",
    ),
    example="/log 14",
    gm_only=True,
    private=True,
    parse=_parse,
)
