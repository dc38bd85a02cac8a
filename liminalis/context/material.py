"""One document as it enters the prompt: the unit that tiering shapes and the budget fits.

A :class:`ContextDoc` is built from a retrieved :class:`~liminalis.types.RenderedDocument` and
then replaced (never mutated) by tiering and budgeting; ``tier`` records what happened to it
so notes, benchmarks and tests can tell a summarized or clipped document from a rendered one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from liminalis.context.tokens import TokenCounter, default_counter
from liminalis.types import RenderedDocument

__all__ = ["ContextDoc", "from_rendered", "count_blocks", "section_of"]


@dataclass(frozen=True, slots=True)
class ContextDoc:
    """A document's prompt block: heading line plus (possibly tiered or clipped) text.

    ``tier`` is one of ``rendered`` (as retrieval rendered it), ``whole`` (full text, stable
    half), ``tiered`` (summary plus matched passages) or ``clipped`` (cut to fit the budget).
    ``rank`` is the position in the bundle; ``pin`` the pin reason (empty for recalled).
    """

    doc_id: str
    title: str
    type: str
    text: str
    section: str = ""
    pin: str = ""
    score: float = 0.0
    rank: int = 0
    tier: str = "rendered"

    @property
    def pinned(self) -> bool:
        return bool(self.pin)

    def label(self) -> str:
        return f"{self.title} — {self.section}" if self.section else self.title

    def block(self) -> str:
        """The text the model reads for this document (what the budget counts)."""
        return f"## {self.label()}\n\n{self.text.strip()}"

    def with_text(self, text: str, tier: str) -> ContextDoc:
        return replace(self, text=text, tier=tier)


def section_of(title: str, heading: str) -> str:
    """A passage heading path without the document title it usually starts with."""
    if heading == title:
        return ""
    return heading[len(title) + 3 :] if heading.startswith(f"{title} > ") else heading


def from_rendered(doc: RenderedDocument, *, rank: int, pin: str = "") -> ContextDoc:
    return ContextDoc(
        doc_id=doc.doc_id, title=doc.title, type=doc.type, text=doc.text,
        section=section_of(doc.title, doc.headings[0]) if doc.headings else "",
        pin=pin or ("pinned" if doc.pinned else ""),
        score=doc.score, rank=rank,
    )


def count_blocks(docs: list[ContextDoc], counter: TokenCounter | None = None) -> list[int]:
    """Token count of each document's block with the one shared counter."""
    c = counter or default_counter()
    many = getattr(c, "count_many", None)
    blocks = [d.block() for d in docs]
    return list(many(blocks)) if many else [c.count(b) for b in blocks]
