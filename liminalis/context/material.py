"""One document as it enters the prompt: the unit that tiering shapes and the budget fits.

A :class:`ContextDoc` is built from a retrieved :class:`~liminalis.types.RenderedDocument` and
then replaced (never mutated) by tiering and budgeting; ``tier`` records what happened to it
so notes, benchmarks and tests can tell a summarized or clipped document from a rendered one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from liminalis.context.tokens import TokenCounter, default_counter
from liminalis.types import TEXT, RenderedDocument, Segment, segments_text

__all__ = ["ContextDoc", "from_rendered", "count_blocks", "section_of", "plain"]


def plain(text: str) -> tuple[Segment, ...]:
    """A text with nothing left out, as segments."""
    return (Segment(TEXT, text),)


@dataclass(frozen=True, slots=True)
class ContextDoc:
    """A document's prompt block: heading line plus (possibly tiered or clipped) segments.

    ``tier`` is one of ``rendered`` (as retrieval rendered it), ``whole`` (full text, stable
    half), ``tiered`` (summary plus matched passages) or ``clipped`` (cut to fit the budget).
    ``rank`` is the position in the bundle; ``pin`` the pin reason (empty for recalled).
    """

    doc_id: str
    title: str
    type: str
    segments: tuple[Segment, ...] = ()
    section: str = ""
    pin: str = ""
    score: float = 0.0
    rank: int = 0
    tier: str = "rendered"

    @property
    def pinned(self) -> bool:
        return bool(self.pin)

    @property
    def text(self) -> str:
        """The segments as the model reads them."""
        return segments_text(self.segments)

    def label(self) -> str:
        return f"{self.title} — {self.section}" if self.section else self.title

    def block(self) -> str:
        """The text the model reads for this document (what the budget counts)."""
        return f"## {self.label()}\n\n{self.text.strip()}"

    def with_segments(self, segments: tuple[Segment, ...], tier: str) -> ContextDoc:
        return replace(self, segments=segments, tier=tier)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (chat memory keeps the last turn's material)."""
        return {
            "doc_id": self.doc_id,
            "title": self.title,
            "type": self.type,
            "section": self.section,
            "pin": self.pin,
            "score": self.score,
            "rank": self.rank,
            "tier": self.tier,
            "segments": [[s.kind, s.text, s.size] for s in self.segments],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ContextDoc:
        """Read :meth:`to_dict`'s form; a memory kept by an earlier version holds plain ``text``."""
        segments = (
            tuple(Segment(str(k), str(t), int(n)) for k, t, n in d["segments"])
            if "segments" in d
            else plain(str(d.get("text", "")))
        )
        return cls(
            doc_id=str(d["doc_id"]),
            title=str(d["title"]),
            type=str(d["type"]),
            segments=segments,
            section=str(d.get("section", "")),
            pin=str(d.get("pin", "")),
            score=float(d.get("score", 0.0)),
            rank=int(d.get("rank", 0)),
            tier=str(d.get("tier", "rendered")),
        )


def section_of(title: str, heading: str) -> str:
    """A passage heading path without the document title it usually starts with."""
    if heading == title:
        return ""
    return heading[len(title) + 3 :] if heading.startswith(f"{title} > ") else heading


def from_rendered(doc: RenderedDocument, *, rank: int, pin: str = "") -> ContextDoc:
    return ContextDoc(
        doc_id=doc.doc_id,
        title=doc.title,
        type=doc.type,
        segments=doc.segments,
        section=section_of(doc.title, doc.headings[0]) if doc.headings else "",
        pin=pin or ("pinned" if doc.pinned else ""),
        score=doc.score,
        rank=rank,
    )


def count_blocks(docs: list[ContextDoc], counter: TokenCounter | None = None) -> list[int]:
    """Token count of each document's block with the one shared counter."""
    c = counter or default_counter()
    many = getattr(c, "count_many", None)
    blocks = [d.block() for d in docs]
    return list(many(blocks)) if many else [c.count(b) for b in blocks]
