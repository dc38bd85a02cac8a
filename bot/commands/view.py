"""``/view`` (also ``/lens``): what of the campaign the asker can see."""

from __future__ import annotations

from bot.cards import action_id
from bot.commands._base import Command, Request, Scope
from bot.messages import Action, Reply
from liminalis.lens import PLAYERS

__all__ = ["command"]


async def run(request: Request, scope: Scope) -> Reply:
    lens, name = scope.lens, scope.config.name
    own = sorted(lens - {PLAYERS})
    if lens.is_gm:
        text = f"In **{name}** you see everything: the GM view, GM-only notes included."
    elif own:
        text = (
            f"In **{name}** you see what every player sees (the players view), and the notes "
            f"kept for {' and '.join(own)}."
        )
    else:
        text = f"In **{name}** you see what every player sees (the players view)."
    # In a DM the campaign is the member's pick among those they play: they may change it.
    switch = request.msg.is_dm and request.msg.platform != "console"
    actions = (Action("Switch campaign", action_id("switch")),) if switch else ()
    return Reply(text=text, lens=lens.describe(), actions=actions)


command = Command(
    name="view",
    description="What of the campaign you can see",
    run=run,
    usage=("`/view` — what of the campaign you can see",),
    example="/view",
    private=True,
    aliases=("lens",),
)
