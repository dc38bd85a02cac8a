"""``/help [command]``: every command, or one command's options and an example."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply

__all__ = ["command"]


def _parse(arg: str) -> dict[str, OptionValue]:
    # "/help gm upload" and "/help /pin" name a command as the platforms write it.
    return {"command": arg.strip()[:60]} if arg.strip() else {}


async def run(request: Request, scope: Scope) -> Reply:
    registry = scope.services.registry
    text = registry.help_text(request.string("command") or None, platform=request.msg.platform)
    return Reply(text=text, title="Help")


command = Command(
    name="help",
    description="What Liminalis can do, or one command with an example",
    run=run,
    options=(
        Option(
            "command",
            "string",
            "One command to explain, with an example",
            autocomplete="commands",
            high=60,
        ),
    ),
    usage=("`/help [command]` — this message, or one command's options and an example",),
    example="/help pin",
    private=True,
    need="none",
    parse=_parse,
)
