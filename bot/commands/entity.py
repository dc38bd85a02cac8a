"""``/entity <name>``: what the documents the asker may read say of one person, place or thing."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope, private_in_shared
from bot.commands.entities import NOT_BUILT, unknown_name
from bot.messages import OptionValue, Reply
from liminalis.answer import Source
from liminalis.errors import InvalidInput
from liminalis.knowledge.confidence import DRAW_CONFIDENCE
from liminalis.knowledge.service import RelationInfo

__all__ = ["command"]

_MAX_RELATIONS = 12


def _parse(arg: str) -> dict[str, OptionValue]:
    return {"name": arg.strip()} if arg.strip() else {}


def _relation_line(r: RelationInfo) -> str:
    """One relation and where it stands: ``- A —ally-of→ B (Tobin Harrow, line 29)``; one the
    map does not draw (only a GM is listed those) says it is unsure."""
    where = f" ({r.title or r.doc_id}, line {r.line})" if r.line else f" ({r.title or r.doc_id})"
    unsure = " — unsure, not drawn" if r.confidence < DRAW_CONFIDENCE else ""
    return f"- {r.src} —{r.kind}→ {r.dst}{where}{unsure}"


async def run(request: Request, scope: Scope) -> Reply:
    cfg, engine = scope.config, scope.services.engine
    name = request.string("name")
    if not name:
        raise InvalidInput("no name", user_message="Usage: `/entity <name>`")
    knowledge = engine.knowledge
    if not await knowledge.built(cfg.slug):
        return Reply(text=NOT_BUILT)
    card = await knowledge.entity(cfg.slug, scope.lens, name)
    if card is None:
        # The same words whether the name is unknown or known only to others: an error must
        # never tell a player that a GM-only name exists.
        raise unknown_name(name, scope.lens)
    e = card.entity
    head = f"**{e.name}** ({e.type or 'other'})"
    if e.aliases:
        head += f" — also {', '.join(e.aliases[:6])}"
    head += f"\n{e.mentions} mention(s) in {len(e.documents)} document(s)."
    parts = [head]
    if card.lines:
        parts.append("\n".join(f"> {line}" for line in card.lines))
    if card.relations:
        rels = [_relation_line(r) for r in card.relations[:_MAX_RELATIONS]]
        if len(card.relations) > _MAX_RELATIONS:
            rels.append(f"- … {len(card.relations) - _MAX_RELATIONS} more")
        parts.append("**Relations**\n" + "\n".join(rels))
    return Reply(
        text="\n\n".join(parts),
        sources=tuple(Source(doc_id, title) for doc_id, title in card.sources[:10]),
        title=e.name,
        lens=scope.lens.describe(),
    )


command = Command(
    name="entity",
    description="What the documents say of one person, place, faction or thing",
    run=run,
    options=(
        Option(
            "name",
            "string",
            "A name, or any other name it goes by",
            required=True,
            autocomplete="entities",
            low=1,
            high=200,
        ),
    ),
    usage=("`/entity <name>` — what is known of one: type, other names, lines, relations",),
    example="/entity Mirel",
    private=private_in_shared,
    parse=_parse,
)
