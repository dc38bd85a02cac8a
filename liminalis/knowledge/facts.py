"""What the knowledge layer extracts from one document view, as the store keeps it.

Every fact belongs to one view (``X``, ``X//gm``, ``X//lens:NAME``) and carries that view's
visibility, so a reader aggregates only the facts of views :func:`liminalis.lens.visible` lets
it see: an entity named only in GM material has no fact a player's lens can reach.
Keys are :func:`liminalis.knowledge.entities.name_key` forms of the text's own names; they are
resolved to entities at read time, over the facts the lens sees.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EntityDef", "Mention", "RelationFact", "Motif", "SessionMark", "ViewFacts"]


@dataclass(frozen=True, slots=True)
class EntityDef:
    """An entity a view defines through its front matter (``type: character`` and so on)."""

    key: str
    name: str
    type: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Mention:
    """A capitalised name in a view: ``[start, end)`` into its text, the passage holding it.

    ``initial``: the name opens a sentence (its capital proves nothing); ``hint``: the type the
    words around it suggest (``character``, ``place``, ``faction``, ``item``, or ``""``)."""

    key: str
    surface: str
    start: int
    end: int
    passage_id: str | None = None
    initial: bool = False
    hint: str = ""


@dataclass(frozen=True, slots=True)
class RelationFact:
    """A relation a sentence states: ``src`` —kind→ ``dst`` (name keys), with the sentence."""

    src: str
    kind: str
    dst: str
    start: int
    end: int
    evidence: str


@dataclass(frozen=True, slots=True)
class Motif:
    """A recurring theme word (``kind="theme"``) or an open thread (``kind="thread"``)."""

    kind: str
    text: str
    weight: float = 1.0
    start: int = 0


@dataclass(frozen=True, slots=True)
class SessionMark:
    """What makes a view a session note, and where it falls in the campaign."""

    number: int | None
    date: str = ""
    date_key: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ViewFacts:
    """Everything extracted from one view, stored and replaced together (by content hash)."""

    doc_id: str
    path: str
    title: str
    type: str
    visibility: frozenset[str]
    content_hash: str
    summary: str = ""
    summary_method: str = ""
    session: SessionMark | None = None
    entities: tuple[EntityDef, ...] = ()
    mentions: tuple[Mention, ...] = ()
    relations: tuple[RelationFact, ...] = ()
    motifs: tuple[Motif, ...] = ()
