"""``/timeline [entity]``: the sessions and dated events the asker may read, in order, as a
picture and as text."""

from __future__ import annotations

import asyncio

from bot.commands._base import Command, Option, Request, Scope, private_in_shared
from bot.commands.entities import NOT_BUILT, parse_entity, picture_filename, unknown_name
from bot.messages import Attachment, Reply
from liminalis.adapters.timeline_png import render_png

__all__ = ["command"]

_LISTED = 30


async def run(request: Request, scope: Scope) -> Reply:
    cfg, engine = scope.config, scope.services.engine
    entity = request.string("entity") or None
    knowledge = engine.knowledge
    if not await knowledge.built(cfg.slug):
        return Reply(text=NOT_BUILT)
    timeline = await knowledge.timeline(cfg.slug, scope.lens, entity=entity)
    if timeline is None:
        raise unknown_name(entity, scope.lens)
    title = f"{cfg.name}: timeline" + (f" of {timeline.entity}" if timeline.entity else "")
    if not timeline.sessions and not timeline.events:
        return Reply(
            text="The documents you can read hold no sessions or dated events yet.", title=title
        )
    # Drawing is blocking (matplotlib): off the event loop.
    png = await asyncio.to_thread(render_png, timeline, title=title)
    lines = timeline.lines()
    listed = "\n".join(lines[:_LISTED])
    if len(lines) > _LISTED:
        listed += f"\n… {len(lines) - _LISTED} more"
    return Reply(
        text=listed,
        title=title,
        lens=scope.lens.describe(),
        files=(Attachment(picture_filename(cfg.slug, "timeline", timeline.entity), png),),
    )


command = Command(
    name="timeline",
    description="Sessions and dated events in campaign order, as a picture",
    run=run,
    options=(
        Option(
            "entity",
            "string",
            "Only what concerns this one",
            autocomplete="entities",
            low=1,
            high=200,
        ),
    ),
    usage=("`/timeline [entity]` — sessions and dated events in order (about one if named)",),
    example="/timeline Tobin",
    private=private_in_shared,
    parse=parse_entity,
)
