"""The offline answerer: the default without an API key, and the fallback when the model is out.

It quotes the sentences of the prompt's documents that share the most question terms, weighted
by idf over the material's sentences, plainly labelled as quotes and each with its source:

    score(s) = Σ_{t ∈ q ∩ s} idf_t / (1 + rank_decay·rank(doc)) · (recalled_boost if recalled else 1)
    idf_t    = ln(1 + n / df_t)

where ``n`` is the number of candidate sentences and ``df_t`` the sentences holding term ``t``.

Quoting the best sentences of any material would answer every question, including one the notes
are silent on ("What is the name of the dragon's favourite teacup?" drew six sentences about a
founder's name). So before quoting, the answerer asks how much of the question the best sentence
covers, by the same idf weights:

    evidence = max_s Σ_{t ∈ q ∩ (s ∪ h_s)} idf_t / Σ_{t ∈ q} idf_t,    idf_t = ln(1 + n) for a term in no sentence

where ``h_s`` is the title and section of the sentence's document (a sentence of "Baron Aldric"
speaks of him) and ``q`` leaves out words that only ask ("tell me about"). A question term the
material never holds weighs as the rarest term can. Below ``min_evidence``
the answer says the notes do not cover the question, names the nearest documents as "closest
notes" and cites nothing, so the question log counts it unanswered. The threshold and the
scoring weights are swept on the dev sets by ``python -m bench.answers --sweep``
(bench/RESULTS.md, "Answers").

A question that names a time ("what happened last session?") shares few terms with the notes it
means, so :meth:`OfflineAnswerer.sessions` answers it with those sessions' summaries, in session
order, then the sentences of those notes that share the question's other terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from liminalis.answer.citations import Answer, Source, source_of_doc
from liminalis.context.material import ContextDoc
from liminalis.text import Tokenizer, split_sentences
from liminalis.types import SUMMARY, TEXT

__all__ = ["NOTES_SILENT", "OfflineAnswerer", "OfflineParams", "Prepared"]

#: What the offline answer to a question the notes do not cover begins with.
NOTES_SILENT = "The campaign's notes don't cover that: I found nothing in them that answers it."

#: Words that ask rather than name what is asked about ("tell me about…", "what do you know of…").
_ASK_TERMS = frozenset(
    Tokenizer()("tell know explain describe information info anything something")
)

#: What a time question says of time, not of its topic (as the tokenizer folds them).
_TIME_TERMS = frozenset(
    Tokenizer()(
        "last latest previous previously recent session sessions time times far whole campaign "
        "first second third before happened happen happening game week"
    )
)


@dataclass(frozen=True, slots=True)
class OfflineParams:
    """The offline answerer's settings (defaults: the dev-set sweep's choice, bench/RESULTS.md
    "Answers": rank_decay 0.3 wins at every quote count; three quotes keep FairytaleQA's gold
    answers within 0.01 of four while citing more precisely; the evidence threshold is the
    highest that still answers 0.8 of the answerable questions on *both* dev sets: a player
    told "the notes don't cover that" when they do loses what the GM wrote, so the threshold
    serves answerable questions first and silences the clearly unrelated)."""

    #: The most sentences quoted.
    max_quotes: int = 3
    #: How much each rank down the bundle discounts a document's sentences.
    rank_decay: float = 0.3
    #: How much recalled material outranks standing documents.
    recalled_boost: float = 1.15
    #: The least share of the question's idf mass one sentence must cover to be quoted as an answer.
    min_evidence: float = 0.2
    #: The most documents listed as closest notes when the notes do not cover a question.
    closest: int = 3


@dataclass(frozen=True, slots=True)
class _Candidate:
    order: int
    sentence: str
    terms: frozenset[str]
    doc: ContextDoc
    #: The terms of the document's title and section: a sentence of "Baron Aldric" speaks of
    #: him whether or not it repeats his name (evidence counts them; ranking does not).
    heading: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Prepared:
    """A question and its material, ready to answer under any :class:`OfflineParams`."""

    terms: frozenset[str]
    candidates: tuple[_Candidate, ...]
    idf: dict[str, float]
    #: The largest share of the question's idf mass one sentence covers (0 to 1).
    evidence: float


class OfflineAnswerer:
    """Extractive answer: the sentences of the material that share most terms with the question."""

    name = "offline"

    def __init__(
        self,
        *,
        max_quotes: int | None = None,
        tokenizer: Tokenizer = Tokenizer(),
        params: OfflineParams = OfflineParams(),
    ) -> None:
        if max_quotes is not None:
            params = OfflineParams(
                max_quotes=max_quotes,
                rank_decay=params.rank_decay,
                recalled_boost=params.recalled_boost,
                min_evidence=params.min_evidence,
                closest=params.closest,
            )
        self.params = params
        self.max_quotes = params.max_quotes
        self.tokenizer = tokenizer

    def answer(
        self, question: str, documents: Sequence[ContextDoc], *, lens: frozenset[str] = frozenset()
    ) -> Answer:
        return self.answer_prepared(self.prepare(question, documents), lens=lens)

    def prepare(self, question: str, documents: Sequence[ContextDoc]) -> Prepared:
        """The question's terms and the material's sentences with their idf: what answering
        costs, and none of it depends on the settings (a sweep prepares each prompt once)."""
        q = frozenset(self.tokenizer(question))
        candidates = self._candidates(documents)
        idf = _idf(q, candidates)
        # "Tell me about…" asks, it names no topic the notes must hold.
        asked = (q - _ASK_TERMS) or q
        return Prepared(q, tuple(candidates), idf, _evidence(asked, candidates, idf))

    def answer_prepared(self, prepared: Prepared, *, lens: frozenset[str] = frozenset()) -> Answer:
        """The answer from prepared material, under these settings."""
        scored = self._scored(prepared.terms, prepared.candidates, prepared.idf)
        if not scored:
            return Answer(text=NOTES_SILENT, sources=(), notes=("no matching passages",), lens=lens)
        if prepared.evidence < self.params.min_evidence:
            return self._silent(scored, lens)
        best = scored[: self.params.max_quotes]
        lines = ["Here is what the campaign's documents say (quoted, not paraphrased):", ""]
        used: list[Source] = []
        for _, c in best:
            src = source_of_doc(c.doc)
            lines += [f"> {c.sentence}", f"— *{src.label()}*"]
            if src not in used:
                used.append(src)
        return Answer(text="\n".join(lines), sources=tuple(used), lens=lens)

    def _candidates(self, documents: Sequence[ContextDoc]) -> list[_Candidate]:
        """Every quotable sentence of the material, once, in prompt order."""
        out: list[_Candidate] = []
        seen: set[str] = set()
        for doc in documents:
            heading = frozenset(self.tokenizer(doc.label()))
            # Quotes come from the text the document holds: an omission only parts it, and a
            # summary reads as its own words.
            text = "\n\n".join(
                s.text if s.kind in (TEXT, SUMMARY) else "\n\n" for s in doc.segments
            )
            for s, e, _ in split_sentences(text):
                sent = " ".join(text[s:e].split())
                if len(sent) < 12 or sent.startswith(("#", "|")) or sent in seen:
                    continue
                seen.add(sent)
                terms = frozenset(self.tokenizer(sent))
                out.append(_Candidate(len(out), sent, terms, doc, heading))
        return out

    def _scored(
        self, q: frozenset[str], candidates: Sequence[_Candidate], idf: dict[str, float]
    ) -> list[tuple[float, _Candidate]]:
        """The sentences sharing a question term, best first (earlier first on a tie)."""
        p = self.params
        scored: list[tuple[float, _Candidate]] = []
        for c in candidates:
            shared = c.terms & q
            if not shared:
                continue
            weight = sum(idf[t] for t in shared)
            boost = p.recalled_boost if not c.doc.pinned else 1.0
            scored.append((weight / (1 + p.rank_decay * c.doc.rank) * boost, c))
        return sorted(scored, key=lambda x: (-x[0], x[1].order))

    def _silent(self, scored: Sequence[tuple[float, _Candidate]], lens: frozenset[str]) -> Answer:
        """The notes do not cover it: say so, and name the nearest documents, not as sources."""
        closest = list(dict.fromkeys(source_of_doc(c.doc) for _, c in scored).keys())[
            : self.params.closest
        ]
        names = "; ".join(f"*{s.label()}*" for s in closest)
        return Answer(
            text=f"{NOTES_SILENT}\n\nClosest notes (they do not answer it): {names}",
            sources=(),
            notes=("weak evidence: not covered",),
            lens=lens,
            closest=tuple(closest),
        )

    def sessions(
        self,
        question: str,
        notes: Sequence[tuple[str, str, str]],
        documents: Sequence[ContextDoc],
        *,
        lens: frozenset[str] = frozenset(),
    ) -> Answer:
        """The answer to a time question: the summaries of the session ``notes`` it names
        (``(doc_id, title, summary)`` in session order; the latest ``max_quotes`` when more),
        then what those notes' own sentences say to the question's other terms."""
        shown = list(notes)[-self.params.max_quotes :]
        if not shown:
            return self.answer(question, documents, lens=lens)
        head = "Here is what the session notes say (each note's summary)"
        if len(shown) < len(notes):
            head += f", the last {len(shown)} of {len(notes)} sessions"
        lines = [head + ":", ""]
        sources = [Source(doc_id, title) for doc_id, title, _ in shown]
        for _, title, summary in shown:
            lines += [f"**{title}**", f"> {summary}", ""]
        ids = {doc_id for doc_id, _, _ in notes}
        rest = " ".join(t for t in self.tokenizer(question) if t not in _TIME_TERMS)
        docs = [d for d in documents if d.doc_id in ids]
        quoted = OfflineAnswerer(max_quotes=2, tokenizer=self.tokenizer, params=self.params)
        found = quoted.answer(rest, docs)
        if rest and found.sources:
            lines += ["From the notes themselves:", *found.text.splitlines()[2:]]
            sources += [s for s in found.sources if s not in sources]
        return Answer(text="\n".join(lines).rstrip(), sources=tuple(sources), lens=lens)


def _idf(q: frozenset[str], candidates: Sequence[_Candidate]) -> dict[str, float]:
    """``ln(1 + n / df_t)`` of each question term; a term in no sentence weighs ``ln(1 + n)``."""
    n = len(candidates)
    df = dict.fromkeys(q, 0)
    for c in candidates:
        for t in c.terms & q:
            df[t] += 1
    return {t: math.log(1 + n / max(1, d)) for t, d in df.items()}


def _evidence(q: frozenset[str], candidates: Sequence[_Candidate], idf: dict[str, float]) -> float:
    """``max_s Σ_{t ∈ q ∩ s} idf_t / Σ_{t ∈ q} idf_t``: how much of the question one sentence
    covers at best (0 when the question has no terms or the material no sentence)."""
    total = sum(idf[t] for t in q)
    if total <= 0:
        return 0.0
    return max(
        (sum(idf[t] for t in (c.terms | c.heading) & q) / total for c in candidates), default=0.0
    )
