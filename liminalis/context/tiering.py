"""Tiered context: background documents render as a summary plus the passages that matched.

The strongest hits read in full fidelity; a background document (recalled, weaker) costs only
what it contributed: a short summary for orientation and the exact passages that matched, with
every gap marked. Four guards decide when *not* to tier:

1. **Matched passages are always kept** — a document with no matched span is left as rendered.
2. **Per-type exemption** — types in ``exempt_types`` (a character sheet, a stat block) are
   never summarized: their value is the table, not the gist. Prose types are tiered.
3. **Compression guard** — a summary larger than the text it replaces (the full text minus the
   matched passages) is refused, and so is a tiered block no smaller than the full text.
4. **Pins and the strongest hits** (the first ``keep_full`` recalled documents) are never tiered;
   the strongest hits read at full fidelity (their whole text, up to ``whole_cap_tokens``).

Full fidelity is the baseline: a background document costs its summary plus its matched
passages, each widened by ``context_chars`` on both sides to paragraph edges. Evidence in
narrative text runs across neighbouring passages (a scene spans several exchanges; CRD3-dev
evidence spans a median 1,760 characters), so a lone matched passage loses the detail a
question asks about; a little surrounding text recovers it far more cheaply than the whole.

Summaries come from the summarization pass when one is supplied (``summaries``), else from an
offline extractive summary: Luhn (1958) sentence significance, score(s) = Σ_{t∈s} f(t) / |s|
over content terms t with document frequency f(t) ≥ 2, the lead sentence always first, sentences
kept in document order within ``summary_tokens``.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from liminalis.context.material import ContextDoc, plain
from liminalis.context.tokens import TokenCounter, at_most, default_counter, word_floor
from liminalis.retrieval.render import render_segments
from liminalis.text import Tokenizer, split_sentences
from liminalis.types import SUMMARY, Segment, Span, segments_text

__all__ = ["TierParams", "TierReport", "tier_documents", "extractive_summary", "widen"]

_log = logging.getLogger(__name__)
_TOKENIZER = Tokenizer()


@dataclass(frozen=True, slots=True)
class TierParams:
    """Which documents may be tiered and how long their summaries are."""

    enabled: bool = True
    keep_full: int = 3
    strongest_whole: bool = True
    whole_cap_tokens: int = 4000
    exempt_types: frozenset[str] = frozenset({"sheet", "statblock", "stats", "table"})
    summary_tokens: int = 80
    #: Widening of each matched passage. 600 over 400: crd3-dev tiered detail 0.933 → 0.938
    #: (full 0.943) for 41% instead of 44% fewer tokens than full (bench.context, all queries).
    #: 900 over 600, with the learned ranker and reranker (full 0.938): tiered 0.933 → 0.936 for
    #: a 38.9% instead of 42.6% cut, and at 6k tokens 0.918 → 0.923 (3k 0.825 → 0.823).
    context_chars: int = 900
    min_full: int = 1
    #: Under a budget that tiering at ``min_full`` still exceeds, tier again without summaries:
    #: a summary orients, the matched passages hold the evidence, so it goes before any clip.
    drop_summaries_to_fit: bool = True


@dataclass(frozen=True, slots=True)
class TierReport:
    """Per-document decision, for notes, tests and the benchmark."""

    tiered: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()  # (doc_id, guard)


@functools.lru_cache(maxsize=1024)
def extractive_summary(text: str, max_tokens: int = 80) -> str:
    """The lead sentence plus the most significant sentences of ``text`` (Luhn), in order."""
    if max_tokens <= 0:
        return ""
    counter = default_counter()
    sents: list[tuple[int, str]] = []
    for s, e, _ in split_sentences(text):
        sent = " ".join(text[s:e].split())
        if len(sent) < 20 or sent.startswith(("#", "|", "[…")):
            continue
        sents.append((s, sent))
    if not sents:
        return ""
    toks = [_TOKENIZER(sent) for _, sent in sents]
    freq = Counter(t for ts in toks for t in set(ts))

    def significance(i: int) -> float:
        ts = toks[i]
        return sum(freq[t] for t in ts if freq[t] >= 2) / (len(ts) or 1)

    chosen = [0]
    used = counter.count(sents[0][1])
    for i in sorted(range(1, len(sents)), key=lambda j: (-significance(j), j)):
        n = counter.count(sents[i][1])
        if used + n > max_tokens:
            continue
        chosen.append(i)
        used += n
    out = " ".join(sents[i][1] for i in sorted(chosen))
    if used > max_tokens:  # the lead alone is over: cut it at a word edge
        words = out.split()
        while len(words) > 1 and counter.count(" ".join(words)) > max_tokens:
            words = words[: max(1, len(words) * 3 // 4)]
        out = " ".join(words) + " …"
    return out


def widen(text: str, span: Span, chars: int) -> Span:
    """``span`` grown by ``chars`` on each side, then out to the enclosing paragraph edges
    (or, inside a paragraph longer than ``chars`` again, to the nearest whitespace)."""
    n = len(text)
    start, end = max(0, span.start - chars), min(n, span.end + chars)
    para = text.rfind("\n\n", 0, start)
    para = 0 if para < 0 else para + 2
    if start - para <= chars:
        start = para
    elif (ws := text.rfind(" ", 0, start)) >= 0:
        start = ws + 1
    para = text.find("\n\n", end)
    para = n if para < 0 else para
    if para - end <= chars:
        end = para
    elif (ws := text.find(" ", end)) >= 0:
        end = ws
    return Span(min(start, span.start), max(end, span.end))


def _merge(spans: Sequence[Span]) -> list[Span]:
    out: list[Span] = []
    for s in sorted(spans, key=lambda x: x.start):
        if out and s.start <= out[-1].end:
            out[-1] = Span(out[-1].start, max(out[-1].end, s.end))
        else:
            out.append(s)
    return out


def tier_documents(
    docs: Sequence[ContextDoc],
    texts: Mapping[str, str],
    matched: Mapping[str, Sequence[Span]],
    *,
    summaries: Mapping[str, str] | None = None,
    params: TierParams = TierParams(),
    counter: TokenCounter | None = None,
) -> tuple[list[ContextDoc], TierReport]:
    """Tier the background documents of ``docs`` (retrieval order) under the four guards.

    Per document: :func:`_guard` says whether a guard keeps it as it is (or whole,
    :func:`_guarded`); otherwise :func:`_tier_one` replaces it by a summary and its matched
    passages, unless that saves nothing.

    Args:
        docs: the turn's documents as rendered.
        texts: full text of each document (``catalog.documents[doc_id].text``).
        matched: spans of the passages that matched, in full-text coordinates.
        summaries: summaries from the summarization pass, by doc id (else extractive).
    """
    if not params.enabled:
        return list(docs), TierReport()
    c = counter or default_counter()
    out: list[ContextDoc] = []
    tiered: list[str] = []
    refused: list[tuple[str, str]] = []
    strongest = [d.doc_id for d in sorted((d for d in docs if not d.pinned), key=lambda d: d.rank)][
        : params.keep_full
    ]
    for d in docs:
        full = texts.get(d.doc_id)
        spans = _merge([s for s in matched.get(d.doc_id, ()) if len(s) > 0])
        guard = _guard(d, full, spans, strongest, params)
        if guard:
            out.append(_guarded(d, full, guard, params, c))
            refused.append((d.doc_id, guard))
            continue
        assert full is not None
        summary = (summaries or {}).get(d.doc_id)
        doc, notes = _tier_one(d, full, spans, summary, params, c)
        out.append(doc)
        refused += notes
        if doc is not d:
            tiered.append(d.doc_id)
    return out, TierReport(tiered=tuple(tiered), refused=tuple(refused))


def _guard(
    d: ContextDoc,
    full: str | None,
    spans: list[Span],
    strongest: list[str],
    params: TierParams,
) -> str:
    """The guard that keeps ``d`` from being tiered ("" for none): pinned, among the
    strongest, of an exempt type, or without matched passages to keep."""
    if d.pinned:
        return "pinned"
    if d.doc_id in strongest:
        return "strongest"
    if d.type.lower() in params.exempt_types:
        return "exempt type"
    if full is None or not spans or any(s.end > len(full) for s in spans):
        return "no matched passages"
    return ""


def _guarded(
    d: ContextDoc, full: str | None, guard: str, params: TierParams, c: TokenCounter
) -> ContextDoc:
    """A guarded document as it goes in: full fidelity for the strongest hits (their whole
    text, when it is not huge), the others as rendered."""
    if (
        guard == "strongest"
        and params.strongest_whole
        and full is not None
        and d.tier == "rendered"
        and d.text != full
        and at_most(c, full, params.whole_cap_tokens)
    ):
        return d.with_segments(plain(full), "whole")
    return d


def _tier_one(
    d: ContextDoc,
    full: str,
    spans: list[Span],
    summary: str | None,
    params: TierParams,
    c: TokenCounter,
) -> tuple[ContextDoc, list[tuple[str, str]]]:
    """``d`` as a summary and its matched passages, with why any part was refused: the
    summary when it costs more than the text it replaces, the whole tiering when it saves
    nothing (``d`` itself comes back)."""
    refused: list[tuple[str, str]] = []
    # The matched passages widened by their surroundings (or, with no widening, as
    # retrieval rendered them; the exact spans when retrieval rendered the document whole).
    if params.context_chars > 0:
        passages = render_segments(
            full, _merge([widen(full, s, params.context_chars) for s in spans])
        )
    else:
        whole = d.text.strip() == full.strip()
        passages = render_segments(full, spans) if whole else d.segments
    summary = summary or extractive_summary(full, params.summary_tokens)
    # The whole text's count is compared, never used: its word count settles the comparison
    # for a long document without tokenizing all of it.
    floor = word_floor(full)
    passage_tokens = c.count(segments_text(passages))
    summary_tokens = c.count(summary)
    if summary and at_most(c, full, summary_tokens + passage_tokens, floor=floor):
        # The summary would cost more than the text it replaces: refuse it.
        refused.append((d.doc_id, "compression: summary"))
        summary = ""
    segments = ((Segment(SUMMARY, summary),) if summary else ()) + tuple(passages)
    text = segments_text(segments)
    if text == d.text or at_most(c, full, c.count(text), floor=floor):
        refused.append((d.doc_id, "compression"))
        return d, refused
    return d.with_segments(segments, "tiered"), refused
