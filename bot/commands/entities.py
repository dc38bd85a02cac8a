"""``/entities [type]``: the people, places, factions and things the asker's lens knows of."""

from __future__ import annotations

import re

from bot.commands._base import Command, Option, Request, Scope, private_in_shared
from bot.messages import OptionValue, Reply
from liminalis.errors import InvalidInput, NotFound
from liminalis.lens import Lens

__all__ = [
    "command",
    "TYPES",
    "NOT_BUILT",
    "parse_entity",
    "picture_filename",
    "unknown_name",
]

TYPES = ("character", "place", "faction", "item", "deity", "creature", "event", "other")
#: Said while the knowledge passes have not run for the campaign yet.
NOT_BUILT = (
    "I have not read this campaign's documents for names yet (that runs after each ingest). "
    "Try again in a minute."
)


def parse_entity(arg: str) -> dict[str, OptionValue]:
    """The one optional ``entity`` of a picture command (``/map Mirel``, ``/timeline Tobin``)."""
    return {"entity": arg.strip()} if arg.strip() else {}


def picture_filename(slug: str, kind: str, name: str = "") -> str:
    """A picture's file name: ``greyhold-map-mirel.png``, ``greyhold-timeline.png``."""
    tail = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return f"{slug}-{kind}{'-' + tail if tail else ''}.png"


def unknown_name(name: str | None, lens: Lens) -> NotFound:
    """A name the asker's documents do not hold: the same words whether it is unknown or only
    the GM's, so the reply says nothing of what the asker cannot read."""
    return NotFound(
        f"no entity {name!r} for lens {sorted(lens)}",
        user_message="I know of nobody and nothing by that name in the documents you can read.",
    )


_PLURAL = {"character": "Characters", "deity": "Deities", "other": "Others"}
_PER_TYPE = 40


def _parse(arg: str) -> dict[str, OptionValue]:
    word = arg.strip().lower().rstrip("s") if arg.strip() else ""
    if not word:
        return {}
    word = {"deitie": "deity", "peopl": "character", "person": "character"}.get(word, word)
    if word not in TYPES:
        raise InvalidInput(
            "bad type", user_message=f"Usage: `/entities [type]`, a type of {', '.join(TYPES)}."
        )
    return {"type": word}


async def run(request: Request, scope: Scope) -> Reply:
    cfg, engine = scope.config, scope.services.engine
    kind = request.string("type") or None
    knowledge = engine.knowledge
    if not await knowledge.built(cfg.slug):
        return Reply(text=NOT_BUILT)
    found = await knowledge.entities(cfg.slug, scope.lens, kind)
    if not found:
        return Reply(text=f"No {kind} is named in the documents you can read." if kind else "None.")
    by_type: dict[str, list[str]] = {}
    for e in found:
        by_type.setdefault(e.type or "other", []).append(e.name)
    parts = []
    for t in sorted(by_type, key=lambda t: (TYPES.index(t) if t in TYPES else len(TYPES), t)):
        names = by_type[t]
        shown = ", ".join(names[:_PER_TYPE]) + (
            f", … ({len(names) - _PER_TYPE} more)" if len(names) > _PER_TYPE else ""
        )
        parts.append(f"**{_PLURAL.get(t, t.capitalize() + 's')}** ({len(names)}): {shown}")
    parts.append("_`/entity <name>` for what is known of one; `/map` for how they relate._")
    return Reply(
        text="\n\n".join(parts), title=f"Who and what {cfg.name} names", lens=scope.lens.describe()
    )


command = Command(
    name="entities",
    description="The people, places, factions and things the documents name",
    run=run,
    options=(Option("type", "string", "Only this type", choices=TYPES),),
    usage=("`/entities [type]` — who and what the documents name (most mentioned first)",),
    example="/entities faction",
    private=private_in_shared,
    parse=_parse,
)
