"""``/help [command]``: every command, or one command's options and an example."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply

__all__ = ["command"]

#: The commands ``/help`` offers as choices; the registry's names (checked by a test).
TOPICS = (
    "ask",
    "pin",
    "budget",
    "upload",
    "recap",
    "entities",
    "entity",
    "summary",
    "map",
    "explain",
    "memory",
    "log",
    "campaign",
    "lens",
    "help",
)


def _parse(arg: str) -> dict[str, OptionValue]:
    topic = arg.split()[0].lstrip("/").lower() if arg.split() else ""
    return {"command": topic} if topic in TOPICS else {}


async def run(request: Request, scope: Scope) -> Reply:
    return Reply(
        text=scope.services.registry.help_text(request.string("command") or None), title="Help"
    )


command = Command(
    name="help",
    description="What Liminalis can do",
    run=run,
    options=(
        Option("command", "string", "One command to explain, with an example", choices=TOPICS),
    ),
    usage=("`/help [command]` — this message, or one command's options and an example",),
    example="/help pin",
    private=True,
    need="none",
    parse=_parse,
)
