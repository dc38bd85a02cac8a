"""``/recap [sessions]``: "previously on…" from the latest session notes' summaries (players-
visible only; written by the language model when one is configured and today's budget allows);
``/recap schedule <cron>|off``: GM: post one in this channel on a schedule."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.answer import Source
from liminalis.engine import Engine
from liminalis.errors import InvalidInput
from liminalis.routing import RoutedModel

if TYPE_CHECKING:
    from liminalis.answer import Responder

__all__ = ["command", "recap_text"]

_USAGE = "Usage: `/recap [sessions 1-10]`"


async def recap_text(
    engine: Engine,
    slug: str,
    sessions: int = 1,
    *,
    responder: Responder | None = None,
    foreground: bool = True,
) -> tuple[str, tuple[Source, ...]]:
    """The players-lens "previously on…" (:meth:`Engine.recap`) with its sources: written by the
    ``summarize`` role through ``responder``'s router when it has one (booked, logged, refused
    past the day's budget or, for a scheduled post, a campaign's credits), else offline."""
    router = responder.router if responder is not None else None
    model = RoutedModel(router, slug, foreground=foreground) if router is not None else None
    recap = await engine.recap(slug, sessions, model=model)
    return recap.text, tuple(Source(doc_id, title) for doc_id, title in recap.sources)


def _parse(arg: str) -> dict[str, OptionValue]:
    if arg.lower().startswith("schedule"):
        return {"schedule": arg[len("schedule") :].strip()}  # "" asks for the schedule in force
    if not arg:
        return {}
    # ASCII digits, few of them: "²".isdigit() is true and int() refuses it; int() of thousands
    # of digits raises too.
    if not re.fullmatch(r"[0-9]{1,3}", arg):
        raise InvalidInput("bad recap", user_message=_USAGE)
    return {"sessions": int(arg)}


def _schedules(request: Request) -> bool:
    return "schedule" in request.options


async def run(request: Request, scope: Scope) -> Reply:
    cfg, services = scope.config, scope.services
    if _schedules(request):
        return await _schedule(request, scope, request.string("schedule"))
    sessions = request.integer("sessions")
    sessions = 1 if sessions is None else sessions
    if not 1 <= sessions <= 10:
        raise InvalidInput("bad recap", user_message=_USAGE)
    text, sources = await recap_text(
        services.engine, cfg.slug, sessions, responder=services.responder
    )
    return Reply(text=text, sources=sources, title=f"Previously on {cfg.name}")


async def _schedule(request: Request, scope: Scope, spec: str) -> Reply:
    cfg, scheduler, msg = scope.config, scope.services.scheduler, request.msg
    if scheduler is None:
        raise InvalidInput(
            "no scheduler", user_message="Scheduled recaps are not running on this bot."
        )
    if not spec:
        return Reply(text=await scheduler.describe(cfg.slug))
    if msg.platform == "console":
        raise InvalidInput(
            "console schedule", user_message="Schedule recaps from a Discord or Slack channel."
        )
    if spec.lower() in {"off", "none", "stop"}:
        removed = await scheduler.remove_schedule(cfg.slug)
        return Reply(text="Recap schedule removed." if removed else "No recap schedule was set.")
    when = await scheduler.set_schedule(
        cfg.slug,
        cron=spec,
        platform=msg.platform,
        channel_id=msg.channel_id,
        parent_id=msg.parent_id,
    )
    return Reply(text=f"Recaps of **{cfg.name}** will be posted in this channel {when}.")


command = Command(
    name="recap",
    description='"Previously on…" from the latest session notes',
    run=run,
    options=(
        Option("sessions", "integer", "How many sessions (1-10)", low=1, high=10),
        Option(
            "schedule",
            "string",
            "GM: when to post a recap here (cron, UTC), or off",
            autocomplete="crons",
            low=1,
            high=100,
        ),
    ),
    usage=(
        '`/recap [sessions]` — "previously on…" from the latest session notes',
        "`/recap schedule <cron>|off` — GM: post a recap here on a schedule (5-field cron, UTC)",
    ),
    example="/recap schedule 0 18 * * 5",
    gm_only=lambda request: bool(request.string("schedule")),
    private=lambda request, scope: _schedules(request),
    parse=_parse,
)
