"""``/memory [gm|players|<player>]``: GM: the campaign memory's most active chunks and strongest
associations, as one lens's history built them."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.lens import GM, PLAYERS, Lens

__all__ = ["command"]


def _parse(arg: str) -> dict[str, OptionValue]:
    return {"lens": arg} if arg else {}


async def run(request: Request, scope: Scope) -> Reply:
    names = {
        x.strip().lower() for x in request.string("lens").replace(",", " ").split() if x.strip()
    } or {PLAYERS}
    of = Lens({GM}) if GM in names else Lens(names | {PLAYERS})
    text = await scope.services.engine.memory_report(scope.config.slug, of)
    return Reply(text=text, title="Memory")


command = Command(
    name="memory",
    description="GM: the campaign memory's most active chunks and strongest associations",
    run=run,
    options=(
        Option(
            "lens", "string", "Whose history: players (default), gm, or one player's name", high=100
        ),
    ),
    usage=(
        "`/memory [gm|players|<player>]` — GM: the campaign memory's most active chunks and associations",
    ),
    example="/memory players",
    gm_only=True,
    private=True,
    parse=_parse,
    group="gm",
)
