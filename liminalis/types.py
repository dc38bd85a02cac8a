"""Value objects shared across the engine. All frozen; none holds a platform payload."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "HeldBack",
    "Span",
    "Segment",
    "TEXT",
    "SUMMARY",
    "GAP",
    "CLIP",
    "segments_text",
    "Document",
    "Passage",
    "Window",
    "SkippedFile",
    "FileReport",
    "IngestReport",
    "Candidate",
    "Hit",
    "RenderedDocument",
    "Bundle",
    "StageTrace",
]


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open character range ``[start, end)`` into a document's normalized text."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


TEXT, SUMMARY, GAP, CLIP = "text", "summary", "gap", "clip"


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of a document as the answerer reads it: text, or a marked omission.

    ``kind`` is ``text``; ``summary`` (a summary standing in for text left out); ``gap`` (``size``
    characters that rendering left out); ``clip`` (``size`` tokens cut to fit the budget).
    Rendering, tiering and the budget pass segments to one another; only the prompt (and the
    offline answerer) turn them into text, with :func:`segments_text`.
    """

    kind: str
    text: str = ""
    size: int = 0


def segments_text(segments: Sequence[Segment]) -> str:
    """The text a model reads for ``segments``: each omission marked in words, blocks apart."""
    return "\n\n".join(_segment_text(s) for s in segments)


def _segment_text(s: Segment) -> str:
    if s.kind == GAP:
        return f"[… {s.size:,} characters omitted …]"
    if s.kind == CLIP:
        return f"[… clipped: {s.size:,} tokens omitted to fit the budget …]"
    if s.kind == SUMMARY:
        return f"Summary: {s.text}"
    return s.text


@dataclass(frozen=True, slots=True)
class Document:
    """One campaign document after loading and normalization."""

    doc_id: str
    path: str
    title: str
    text: str
    visibility: frozenset[str]
    type: str = "lore"
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    content_hash: str = ""
    synopsis: str = ""
    #: A PDF's pages: ``(offset in text where the page starts, its printed label)``, ascending.
    #: Structure, never markers in the text: chunking adds ``p. N`` to each passage's heading.
    pages: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Passage:
    """A content-defined chunk of a document."""

    passage_id: str
    doc_id: str
    ordinal: int
    start: int
    end: int
    text: str
    heading: str
    hash: str
    visibility: frozenset[str]
    prev_id: str | None = None
    next_id: str | None = None
    sentence_ends: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Window:
    """Overlapping sentence window inside a passage, for finer-grained vector search."""

    window_id: str
    passage_id: str
    doc_id: str
    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class SkippedFile:
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class HeldBack:
    """One thing the wall held back from players, as the ingest report and the GM's review
    show it: where (``line``), why (``rule``), what a decision is stored on (``digest``), whether
    it awaits the GM's review (held by habit, not by the documented syntax), and its opening
    words (GM-only text: for the GM's eyes alone)."""

    line: int
    rule: str
    digest: str
    reviewable: bool
    excerpt: str


@dataclass(slots=True)
class FileReport:
    """What one ingest did to one file (an upload's reply lists these).

    ``added``/``changed``/``removed`` count the passages of the file's whole text: a passage
    replaced by a new one is a change, the rest are additions or removals."""

    path: str
    doc_id: str
    visibility: frozenset[str]
    type: str
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    hidden_sections: int = 0
    warnings: tuple[str, ...] = ()
    #: What the wall held back from players in this file, and why (GM-only: the report is the
    #: GM's and the host's).
    held_back: tuple[HeldBack, ...] = ()


@dataclass(slots=True)
class IngestReport:
    """What one ingest run did (the ``--json`` output)."""

    documents: int = 0
    passages_added: int = 0
    passages_removed: int = 0
    passages_unchanged: int = 0
    embedded: int = 0
    windows_embedded: int = 0
    documents_removed: int = 0
    #: Hidden sections (secrets inside documents) in the files read this run.
    hidden_sections: int = 0
    #: Documents whose vectors the store had lost, refilled from the embedding cache.
    documents_repaired: int = 0
    skipped: list[SkippedFile] = field(default_factory=list)
    files: list[FileReport] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "documents": self.documents,
            "passages_added": self.passages_added,
            "passages_removed": self.passages_removed,
            "passages_unchanged": self.passages_unchanged,
            "embedded": self.embedded,
            "windows_embedded": self.windows_embedded,
            "documents_removed": self.documents_removed,
            "hidden_sections": self.hidden_sections,
            "documents_repaired": self.documents_repaired,
            "warnings": [{"path": f.path, "warning": w} for f in self.files for w in f.warnings],
            "held_back": [
                {
                    "document": f.path,
                    "line": h.line,
                    "rule": h.rule,
                    "review": h.reviewable,
                    "digest": h.digest,
                }
                for f in self.files
                for h in f.held_back
            ],
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, slots=True)
class Candidate:
    """A passage-level candidate from one recall arm."""

    passage_id: str
    doc_id: str
    score: float
    arm: str


@dataclass(frozen=True, slots=True)
class Hit:
    """A passage in the final ranked list handed to rendering."""

    passage_id: str
    doc_id: str
    score: float
    pinned: bool = False
    pin_reason: str = ""


@dataclass(frozen=True, slots=True)
class RenderedDocument:
    """One document as the answerer will read it."""

    doc_id: str
    title: str
    type: str
    segments: tuple[Segment, ...]
    pinned: bool
    score: float
    headings: tuple[str, ...] = ()
    matched: tuple[Span, ...] = ()
    whole: bool = False
    #: Spans of this document's further passages in the candidate pool (below the kept hits):
    #: not rendered here, but tiering shows them, since evidence often spans several passages.
    related: tuple[Span, ...] = ()

    @property
    def text(self) -> str:
        """The rendered document as text (for display and tests; the answer path reads segments)."""
        return segments_text(self.segments)


@dataclass(frozen=True, slots=True)
class StageTrace:
    """Where one document got to in the retrieval stack (explain mode)."""

    doc_id: str
    pinned: str | None = None
    dense_rank: int | None = None
    lexical_rank: int | None = None
    document_rank: int | None = None
    fused_rank: int | None = None
    learned_rank: int | None = None
    reranked_rank: int | None = None
    rendered: bool = False

    def verdict(self) -> str:
        if self.rendered:
            return "rendered"
        if self.pinned or self.fused_rank is not None:
            return "retrieved but cut"
        if (
            self.dense_rank is not None
            or self.lexical_rank is not None
            or self.document_rank is not None
        ):
            return "recalled but lost in fusion"
        return "never retrieved"


@dataclass(frozen=True, slots=True)
class Bundle:
    """What retrieval hands the answerer: ranked hits and their rendered documents."""

    campaign: str
    query: str
    lens: frozenset[str]
    hits: tuple[Hit, ...]
    documents: tuple[RenderedDocument, ...]
    ranked_doc_ids: tuple[str, ...] = ()
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "\n\n".join(f"## {d.title}\n\n{d.text}" for d in self.documents)
