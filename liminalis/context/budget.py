"""Fit a turn's documents into a token budget, degrading in order of least damage.

Over budget (``reserved + Σ tokens(doc) > budget``), in this order:

1. **Drop** the weakest recalled documents (last in retrieval rank first) while more than
   ``doc_floor`` recalled documents remain. Pinned documents are never dropped.
2. **Clip** documents down to ``max(clip_floor, tokens − excess)``, repeating while still over:
   by default the weakest recalled first (by rank; pins last), else (``clip_weakest_first``
   off) the largest first. Measured on the first 120 CRD3-dev queries at 6k tokens, clipping the
   weakest first keeps context detail recall at 0.900 where largest-first gave 0.800: the largest
   document is usually the strongest hit, read whole. Clipping keeps the contiguous run of units
   (paragraphs, or sentences of an over-long paragraph) that shares most terms with the
   question, then other matching units while room is left, and marks every cut with a clip
   segment (the prompt says ``[… clipped: 1,204 tokens omitted to fit the budget …]``).
3. If the floors still bind, the result is **over budget** and says so in ``notes``: an
   unreasonably small budget yields more than asked rather than an empty context.

Tokens are counted with :func:`liminalis.context.tokens.default_counter`, the one counter.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from liminalis.context.material import ContextDoc, count_blocks
from liminalis.context.tokens import TokenCounter, default_counter
from liminalis.text import Tokenizer, split_sentences
from liminalis.types import CLIP, GAP, SUMMARY, TEXT, Segment, Span, segments_text

__all__ = [
    "BudgetParams",
    "Fitted",
    "fit_budget",
    "clip_segments",
    "clip_text",
    "clip_marker",
    "CLIP_MARKER",
]

_log = logging.getLogger(__name__)
#: How a clip reads in the prompt (for tests and benchmarks that read prompts; the engine passes
#: clips as segments).
CLIP_MARKER = re.compile(r"\[… clipped: [\d,]+ tokens omitted to fit the budget …\]")
_TOKENIZER = Tokenizer()


@dataclass(frozen=True, slots=True)
class BudgetParams:
    """Floors of the degrade order: recalled documents kept, tokens a clipped document keeps."""

    #: Recalled documents never dropped. The default keeps every document retrieval hands over
    #: (``max_documents``), so a budget never moves recall@5 or MRR; lower it to drop outright.
    doc_floor: int = 8
    #: Tokens a clipped document keeps at least: its best-matching exchange or paragraph. Lower
    #: floors leave more of a tight budget to the strongest hits. On crd3-dev (bench.context, all
    #: 389 queries, 600-character widening) detail recall at 6k / 3k tokens: 0.910 / 0.779 at 250
    #: with summaries kept; with summaries dropped first 0.913 at 250 and 200, 0.918 / 0.807 at
    #: 150, 0.918 / 0.825 at 100.
    clip_floor: int = 100
    unit_tokens: int = 120
    contiguous: bool = True
    clip_weakest_first: bool = True


@dataclass(frozen=True, slots=True)
class Fitted:
    """What fit: the documents (in input order), their token total, and what was degraded."""

    documents: tuple[ContextDoc, ...]
    tokens: int
    budget: int
    reserved: int
    dropped: tuple[str, ...] = ()
    clipped: tuple[str, ...] = ()
    over_budget: bool = False
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.tokens + self.reserved


def clip_marker(tokens: int) -> str:
    return segments_text([Segment(CLIP, size=tokens)])


def _units(
    segments: Sequence[Segment], unit_tokens: int, counter: TokenCounter
) -> tuple[list[str], list[int], list[str]]:
    """Paragraphs, with over-long ones split into sentences; earlier omissions (gaps, clips) an
    empty unit. With each unit's token count (a paragraph is counted once, not again) and kind
    (a summary's paragraph stays a summary)."""
    out: list[str] = []
    sizes: list[int] = []
    kinds: list[str] = []
    for seg in segments:
        if seg.kind in (GAP, CLIP):
            out.append("")  # a gap that already existed stays a gap
            sizes.append(0)
            kinds.append(TEXT)
            continue
        text = segments_text([seg])
        for para in re.split(r"\n{2,}", text):
            para = para.strip()
            if not para:
                continue
            n = counter.count(para)
            if n <= unit_tokens:
                out.append(para)
                sizes.append(n)
                kinds.append(seg.kind)
                continue
            sents = [" ".join(para[s:e].split()) for s, e, _ in split_sentences(para)]
            out.extend(sents)
            sizes.extend(counter.count(u) if u else 0 for u in sents)
            kinds.extend(TEXT for _ in sents)
    return out, sizes, kinds


def _best_window(
    units: Sequence[str], sizes: Sequence[int], overlap: Sequence[int], room: int
) -> set[int]:
    """Indices of the contiguous run of units fitting ``room`` with the most overlap (then the
    largest such run, then the earliest); empty when no unit matches or none fits."""
    best: tuple[int, int, int] = (0, 0, 0)  # (overlap, size, -start)
    best_span = (0, 0)
    j = 0
    size = score = 0
    n = len(units)
    for i in range(n):
        if j < i:
            j, size, score = i, 0, 0
        while j < n and size + sizes[j] <= room:
            size += sizes[j]
            score += overlap[j]
            j += 1
        key = (score, size, -i)
        if score > 0 and key > best:
            best, best_span = key, (i, j)
        if j > i:
            size -= sizes[i]
            score -= overlap[i]
    return {k for k in range(*best_span) if units[k]}


#: What a unit holding matched text scores above any overlap with the question's words.
_MATCHED_BONUS = 1000


def _probes(passages: Sequence[str], *, size: int = 60) -> set[str]:
    """Pieces of ``passages`` to find them by in a document's units: the start of each line or
    sentence long enough to be distinctive (a unit boundary may fall anywhere in a passage)."""
    out: set[str] = set()
    for p in passages:
        for piece in re.split(r"(?<=[.!?])\s+|\n+", p):
            piece = piece.strip()
            if len(piece) >= 30:
                out.add(piece[:size])
    return out


def clip_text(
    text: str,
    target: int,
    *,
    query: str = "",
    unit_tokens: int = 120,
    contiguous: bool = True,
    counter: TokenCounter | None = None,
    prefer: Sequence[str] = (),
) -> tuple[str, int]:
    """:func:`clip_segments` of a plain text, as text."""
    segments, n = clip_segments(
        (Segment(TEXT, text),),
        target,
        query=query,
        unit_tokens=unit_tokens,
        contiguous=contiguous,
        counter=counter,
        prefer=prefer,
    )
    return segments_text(segments), n


def clip_segments(
    segments: Sequence[Segment],
    target: int,
    *,
    query: str = "",
    unit_tokens: int = 120,
    contiguous: bool = True,
    counter: TokenCounter | None = None,
    prefer: Sequence[str] = (),
) -> tuple[tuple[Segment, ...], int]:
    """Cut ``segments`` to about ``target`` tokens, keeping the units closest to ``query``.

    With ``contiguous`` (the default) the kept text is first the run of neighbouring units with
    the most query-term overlap that fits, then any other units by overlap while room is left.
    Units holding text of a ``prefer`` passage (what retrieval matched) come before any that only
    share words with the question: evidence found by meaning (the dense arm, the reranker) shares
    few words with it, and was cut for the document's first paragraphs.

    Returns the clipped segments (a clip at every cut) and their token count as text. The best
    unit is always kept, even when it alone exceeds ``target``.
    """
    c = counter or default_counter()
    units, sizes, kinds = _units(segments, unit_tokens, c)
    q = set(_TOKENIZER(query))
    # No query terms (a standing document, clipped head-first): nothing to overlap with.
    overlap = [len(q & set(_TOKENIZER(u))) if u and q else 0 for u in units]
    probes = _probes(prefer)
    if probes:
        overlap = [
            o + (_MATCHED_BONUS if u and any(pr in u for pr in probes) else 0)
            for o, u in zip(overlap, units, strict=True)
        ]
    marker_cost = 20
    # The densest contiguous run first: what a question asks about usually spans neighbouring
    # paragraphs (a scene, an exchange), and scattered best-matching lines lose the connective
    # text between them. Then, with room left, the best-matching units elsewhere.
    keep = _best_window(units, sizes, overlap, target - 2 * marker_cost) if contiguous else set()
    used = sum(sizes[i] for i in keep) + (2 * marker_cost if keep else 0)
    order = sorted(
        (i for i, u in enumerate(units) if u and i not in keep), key=lambda i: (-overlap[i], i)
    )
    for i in order:
        if keep and used + sizes[i] + marker_cost > target:
            continue
        keep.add(i)
        used += sizes[i] + marker_cost
    parts: list[Segment] = []
    gap = 0
    for i, u in enumerate(units):
        if i in keep:
            if gap or (parts and not u):
                parts.append(Segment(CLIP, size=gap))
            parts.append(
                Segment(SUMMARY, u.removeprefix("Summary: "))
                if kinds[i] == SUMMARY and u.startswith("Summary: ")
                else Segment(TEXT, u)
            )
            gap = 0
        else:
            gap += sizes[i]
    if gap or (units and not units[-1]):
        parts.append(Segment(CLIP, size=gap))
    return tuple(parts), c.count(segments_text(parts))


def fit_budget(
    docs: Sequence[ContextDoc],
    budget: int,
    *,
    reserved: int = 0,
    query: str = "",
    params: BudgetParams = BudgetParams(),
    counter: TokenCounter | None = None,
    texts: Mapping[str, str] | None = None,
    matched: Mapping[str, Sequence[Span]] | None = None,
) -> Fitted:
    """Degrade ``docs`` until ``reserved`` plus their blocks fit ``budget`` (or the floors bind).

    Two stages, cheapest loss first: drop the weakest recalled documents down to
    ``doc_floor`` (:func:`_drop_weakest`), then clip documents one at a time down to
    ``clip_floor`` (:func:`_clip_until_fit`).

    Args:
        docs: documents in retrieval order (pins first); their ``rank`` orders weakness.
        budget: total tokens for the turn, including ``reserved``.
        reserved: tokens already spent outside these documents (system prompt, history, question).
        query: the question, which decides what clipping keeps.
        texts, matched: documents' full texts and, by id, the spans retrieval matched in them:
            clipping keeps those passages first (read only for a document being clipped).
    """
    c = counter or default_counter()
    current = list(docs)
    f = _Fitting(
        current=current,
        sizes=count_blocks(current, c),
        alive=[True] * len(current),
        budget=budget,
        reserved=reserved,
    )
    _drop_weakest(f, params)
    _clip_until_fit(f, params, c, query=query, texts=texts or {}, matched=matched or {})
    return _fitted(f)


@dataclass(slots=True)
class _Fitting:
    """The documents as fitting leaves them: each one's block size, whether it is still in,
    and what was dropped and clipped."""

    current: list[ContextDoc]
    sizes: list[int]
    alive: list[bool]
    budget: int
    reserved: int
    dropped: list[str] = field(default_factory=list)
    clipped: list[str] = field(default_factory=list)

    def total(self) -> int:
        """Tokens the turn spends now: ``reserved + Σ sizes``."""
        return self.reserved + sum(self.sizes)


def _drop_weakest(f: _Fitting, params: BudgetParams) -> None:
    """Drop recalled documents, weakest rank first, while over budget and more than
    ``doc_floor`` remain; pins are never dropped."""
    current = f.current
    recalled = sorted(
        (i for i, d in enumerate(current) if not d.pinned), key=lambda i: current[i].rank
    )
    while f.total() > f.budget and len(recalled) > params.doc_floor:
        weakest = recalled.pop()
        f.alive[weakest] = False
        f.dropped.append(current[weakest].doc_id)
        f.sizes[weakest] = 0


def _clip_until_fit(
    f: _Fitting,
    params: BudgetParams,
    c: TokenCounter,
    *,
    query: str,
    texts: Mapping[str, str],
    matched: Mapping[str, Sequence[Span]],
) -> None:
    """Clip one document at a time (the weakest, or the largest) by what the turn is over,
    never below ``clip_floor``, until it fits or nothing more can be cut."""
    current, sizes = f.current, f.sizes
    stuck: set[int] = set()
    while f.total() > f.budget:
        cands = [
            i
            for i in range(len(current))
            if f.alive[i] and i not in stuck and sizes[i] > params.clip_floor
        ]
        if not cands:
            break
        if params.clip_weakest_first:
            i = max(cands, key=lambda j: (not current[j].pinned, current[j].rank, sizes[j]))
        else:
            i = max(cands, key=lambda j: (sizes[j], -j))
        target = max(params.clip_floor, sizes[i] - (f.total() - f.budget))
        new = _clip_one(current[i], target, params, c, query=query, texts=texts, matched=matched)
        new_size = c.count(new.block())
        if new_size >= sizes[i]:
            stuck.add(i)  # one indivisible unit left: nothing more to cut here
            continue
        current[i] = new
        sizes[i] = new_size
        if new.doc_id not in f.clipped:
            f.clipped.append(new.doc_id)


def _clip_one(
    doc: ContextDoc,
    target: int,
    params: BudgetParams,
    c: TokenCounter,
    *,
    query: str,
    texts: Mapping[str, str],
    matched: Mapping[str, Sequence[Span]],
) -> ContextDoc:
    """``doc`` clipped so its block takes about ``target`` tokens (its heading's share kept
    aside), the passages retrieval matched in it kept first."""
    head = c.count(doc.block()) - c.count(doc.text.strip())
    full = texts.get(doc.doc_id, "")
    prefer = [full[sp.start : sp.end] for sp in matched.get(doc.doc_id, ())] if full else []
    cut, _ = clip_segments(
        doc.segments,
        max(1, target - head),
        query=query,
        unit_tokens=params.unit_tokens,
        contiguous=params.contiguous,
        counter=c,
        prefer=prefer,
    )
    return doc.with_segments(cut, "clipped")


def _fitted(f: _Fitting) -> Fitted:
    """The outcome, with notes that say what was dropped or clipped, or that the floors bind."""
    budget, reserved = f.budget, f.reserved
    kept = tuple(d for d, a in zip(f.current, f.alive, strict=True) if a)
    tokens = sum(s for s, a in zip(f.sizes, f.alive, strict=True) if a)
    over = reserved + tokens > budget
    notes: list[str] = []
    if f.dropped:
        notes.append(f"budget: dropped {len(f.dropped)} weaker document(s)")
    if f.clipped:
        notes.append(f"budget: clipped {len(f.clipped)} document(s)")
    if over:
        notes.append(
            f"budget of {budget:,} tokens is below the floors; the context uses {reserved + tokens:,} tokens"
        )
        _log.info("context over budget: %d > %d", reserved + tokens, budget)
    return Fitted(
        documents=kept,
        tokens=tokens,
        budget=budget,
        reserved=reserved,
        dropped=tuple(f.dropped),
        clipped=tuple(f.clipped),
        over_budget=over,
        notes=tuple(notes),
    )
