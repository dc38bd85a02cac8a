"""``/map [entity]``: a picture of how the people, places and factions the asker knows relate."""

from __future__ import annotations

import asyncio

from bot.commands._base import Command, Option, Request, Scope, private_in_shared
from bot.commands.entities import NOT_BUILT, parse_entity, picture_filename, unknown_name
from bot.messages import Attachment, Reply

__all__ = ["command"]

_LISTED = 25


async def run(request: Request, scope: Scope) -> Reply:
    from liminalis.adapters.relmap_png import render_png

    cfg, engine = scope.config, scope.services.engine
    centre = request.string("entity") or None
    knowledge = engine.knowledge
    if not await knowledge.built(cfg.slug):
        return Reply(text=NOT_BUILT)
    rel = await knowledge.relation_map(cfg.slug, scope.lens, centre=centre)
    if rel is None:
        raise unknown_name(centre, scope.lens)
    title = f"{cfg.name}: " + (f"around {rel.name(rel.centre)}" if rel.centre else "relations")
    if not rel.edges:
        return Reply(
            text="The documents you can read state no relations for that yet.", title=title
        )
    # Drawing is blocking (matplotlib): off the event loop.
    png = await asyncio.to_thread(render_png, rel, title=title)
    lines = rel.lines()
    listed = "\n".join(f"- {line}" for line in lines[:_LISTED])
    if len(lines) > _LISTED:
        listed += f"\n- … {len(lines) - _LISTED} more"
    text = f"{len(rel.nodes)} names, {len(rel.edges)} relations.\n\n{listed}"
    return Reply(
        text=text,
        title=title,
        lens=scope.lens.describe(),
        files=(
            Attachment(
                picture_filename(cfg.slug, "map", rel.name(rel.centre) if rel.centre else ""), png
            ),
        ),
    )


command = Command(
    name="map",
    description="A relationship map of who and what the documents name",
    run=run,
    options=(
        Option(
            "entity",
            "string",
            "Centre the map on this one",
            autocomplete="entities",
            low=1,
            high=200,
        ),
    ),
    usage=("`/map [entity]` — a picture of how they relate (centred on one if named)",),
    example="/map Mirel",
    private=private_in_shared,
    parse=parse_entity,
)
