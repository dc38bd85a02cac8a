"""``/lens``: which view of the campaign the asker gets."""

from __future__ import annotations

from bot.commands._base import Command, Request, Scope
from bot.messages import Reply

__all__ = ["command"]


async def run(request: Request, scope: Scope) -> Reply:
    lens = scope.lens
    view = (
        "the GM view (everything, including GM-only notes)"
        if lens.is_gm
        else f"the {lens.describe()} view"
    )
    return Reply(text=f"In **{scope.config.name}** you see {view}.", lens=lens.describe())


command = Command(
    name="lens",
    description="Which view of the campaign you get",
    run=run,
    usage=("`/lens` — which view of the campaign you get",),
    example="/lens",
    private=True,
)
