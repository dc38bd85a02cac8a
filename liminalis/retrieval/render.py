"""Render a retrieved document for the answerer: what matched, never a head-slice.

* A document no longer than ``whole_chars`` renders entire.
* A longer one renders its matched passages, each expanded outward to paragraph edges (when the
  paragraph adds at most ``expand_chars`` on a side; otherwise the passage's own sentence
  edges), overlapping or nearly adjacent spans merged, and snapped to the document's start or
  end when within ``snap_chars`` of it.
* Every omission is a gap segment (:class:`~liminalis.types.Segment`), which the prompt marks
  in words: ``[… 3,120 characters omitted …]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from liminalis.retrieval.catalog import Catalog
from liminalis.types import GAP, TEXT, RenderedDocument, Segment, Span, segments_text

__all__ = [
    "RenderParams",
    "fallback_passages",
    "omission",
    "render_document",
    "render_segments",
    "render_spans",
    "select_spans",
]


@dataclass(frozen=True, slots=True)
class RenderParams:
    whole_chars: int = 2400
    expand_chars: int = 400
    merge_gap: int = 160
    snap_chars: int = 240


def omission(n: int) -> str:
    return segments_text([Segment(GAP, size=n)])


def _expand(text: str, span: Span, limit: int) -> Span:
    start, end = span.start, span.end
    para_start = text.rfind("\n\n", 0, start)
    para_start = 0 if para_start < 0 else para_start + 2
    if start - para_start <= limit:
        start = para_start
    para_end = text.find("\n\n", end)
    para_end = len(text) if para_end < 0 else para_end
    if para_end - end <= limit:
        end = para_end
    return Span(start, end)


def select_spans(
    text: str, matched: Sequence[Span], params: RenderParams = RenderParams()
) -> list[Span]:
    """The spans of ``text`` to show for ``matched`` passages (sorted, merged, snapped)."""
    n = len(text)
    if n <= params.whole_chars or not matched:
        return [Span(0, n)]
    spans = sorted((_expand(text, s, params.expand_chars) for s in matched), key=lambda s: s.start)
    merged: list[Span] = []
    for s in spans:
        if merged and s.start - merged[-1].end <= params.merge_gap:
            merged[-1] = Span(merged[-1].start, max(merged[-1].end, s.end))
        else:
            merged.append(s)
    if merged[0].start <= params.snap_chars:
        merged[0] = Span(0, merged[0].end)
    if n - merged[-1].end <= params.snap_chars:
        merged[-1] = Span(merged[-1].start, n)
    return merged


def render_segments(text: str, spans: Sequence[Span]) -> tuple[Segment, ...]:
    """``spans`` of ``text`` as segments, with a gap for every omission, including the ends."""
    parts: list[Segment] = []
    pos = 0
    for s in spans:
        if s.start > pos:
            parts.append(Segment(GAP, size=s.start - pos))
        parts.append(Segment(TEXT, text[s.start : s.end].strip("\n")))
        pos = s.end
    if pos < len(text):
        parts.append(Segment(GAP, size=len(text) - pos))
    return tuple(parts)


def render_spans(text: str, spans: Sequence[Span]) -> str:
    """:func:`render_segments` as text (for display and tests)."""
    return segments_text(render_segments(text, spans))


def fallback_passages(cat: Catalog, doc_id: str, query_tokens: Sequence[str]) -> list[str]:
    """For a document shown though nothing matched in it (a pin, a memory's candidate): its
    (up to two) passages sharing most query terms, earlier first on a tie; else its first."""
    pids = cat.by_doc.get(doc_id, [])
    q = set(query_tokens)
    scored = sorted(
        ((len(q & set(cat.passages[x].tokens)), -i, x) for i, x in enumerate(pids)),
        reverse=True,
    )
    chosen = [x for n, _, x in scored[:2] if n > 0]
    return chosen or pids[:1]


def render_document(
    cat: Catalog,
    doc_id: str,
    pids: Sequence[str],
    *,
    pinned: bool,
    score: float,
    params: RenderParams,
    related: Sequence[str] = (),
) -> RenderedDocument:
    """``doc_id`` of ``cat`` rendered around the passages ``pids`` (:func:`select_spans`, then
    :func:`render_segments`), with its headings, matched and ``related`` spans: what the
    retriever and the campaign memory both hand the answerer."""
    doc = cat.documents[doc_id]
    spans = [Span(cat.passages[x].start, cat.passages[x].end) for x in pids if x in cat.passages]
    chosen = select_spans(doc.text, spans, replace(params))
    whole = len(chosen) == 1 and chosen[0].start == 0 and chosen[0].end == len(doc.text)
    headings = tuple(
        dict.fromkeys(
            cat.passages[x].heading for x in pids if x in cat.passages and cat.passages[x].heading
        )
    )
    return RenderedDocument(
        doc_id=doc_id,
        title=doc.title,
        type=doc.type,
        segments=render_segments(doc.text, chosen),
        pinned=pinned,
        score=score,
        headings=headings,
        matched=tuple(spans),
        whole=whole,
        related=tuple(
            Span(cat.passages[x].start, cat.passages[x].end) for x in related if x in cat.passages
        ),
    )
