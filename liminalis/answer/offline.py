"""The offline answerer: the default without an API key, and the fallback when the model is out.

It quotes the sentences of the prompt's documents that share the most question terms, weighted
by idf over the material's sentences, plainly labelled as quotes and each with its source:

    score(s) = Σ_{t ∈ q ∩ s} ln(1 + n / df_t) / (1 + 0.1·rank(doc)) · (1.15 if recalled else 1)

where ``n`` is the number of candidate sentences and ``df_t`` the sentences holding term ``t``.

A question that names a time ("what happened last session?") shares few terms with the notes it
means, so :meth:`OfflineAnswerer.sessions` answers it with those sessions' summaries, in session
order, then the sentences of those notes that share the question's other terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from liminalis.answer.citations import Answer, Source, source_of_doc
from liminalis.context.material import ContextDoc
from liminalis.text import Tokenizer, split_sentences
from liminalis.types import SUMMARY, TEXT

__all__ = ["OfflineAnswerer"]

#: What a time question says of time, not of its topic (as the tokenizer folds them).
_TIME_TERMS = frozenset(
    Tokenizer()(
        "last latest previous previously recent session sessions time times far whole campaign "
        "first second third before happened happen happening game week"
    )
)


class OfflineAnswerer:
    """Extractive answer: the sentences of the material that share most terms with the question."""

    name = "offline"

    def __init__(self, *, max_quotes: int = 4, tokenizer: Tokenizer = Tokenizer()) -> None:
        self.max_quotes = max_quotes
        self.tokenizer = tokenizer

    def answer(
        self, question: str, documents: Sequence[ContextDoc], *, lens: frozenset[str] = frozenset()
    ) -> Answer:
        q = set(self.tokenizer(question))
        candidates: list[tuple[str, set[str], ContextDoc]] = []
        for doc in documents:
            # Quotes come from the text the document holds: an omission only parts it, and a
            # summary reads as its own words.
            text = "\n\n".join(
                s.text if s.kind in (TEXT, SUMMARY) else "\n\n" for s in doc.segments
            )
            for s, e, _ in split_sentences(text):
                sent = " ".join(text[s:e].split())
                if len(sent) < 12 or sent.startswith(("#", "|")):
                    continue
                candidates.append((sent, set(self.tokenizer(sent)), doc))
        # idf over the material's sentences: a rare shared term says more than a common one.
        n = len(candidates)
        df: dict[str, int] = {}
        for _, toks, _ in candidates:
            for t in toks & q:
                df[t] = df.get(t, 0) + 1
        scored: list[tuple[float, int, str, ContextDoc]] = []
        seen: set[str] = set()
        for order, (sent, toks, doc) in enumerate(candidates):
            shared = toks & q
            if not shared or sent in seen:
                continue
            seen.add(sent)
            weight = sum(math.log(1 + n / df[t]) for t in shared)
            # Recalled material outranks standing documents; earlier ranks outrank later.
            score = weight / (1 + 0.1 * doc.rank) * (1.15 if not doc.pinned else 1.0)
            scored.append((score, order, sent, doc))
        if not scored:
            return Answer(
                text="I found nothing in this campaign's documents that answers that.",
                sources=(),
                notes=("no matching passages",),
                lens=lens,
            )
        best = sorted(scored, key=lambda x: (-x[0], x[1]))[: self.max_quotes]
        lines = ["Here is what the campaign's documents say (quoted, not paraphrased):", ""]
        used: list[Source] = []
        for _, _, sent, doc in best:
            src = source_of_doc(doc)
            lines.append(f"> {sent}")
            lines.append(f"— *{src.label()}*")
            if src not in used:
                used.append(src)
        return Answer(text="\n".join(lines), sources=tuple(used), lens=lens)

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
        shown = list(notes)[-self.max_quotes :]
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
        quoted = OfflineAnswerer(max_quotes=2, tokenizer=self.tokenizer).answer(rest, docs)
        if rest and quoted.sources:
            lines += ["From the notes themselves:", *quoted.text.splitlines()[2:]]
            sources += [s for s in quoted.sources if s not in sources]
        return Answer(text="\n".join(lines).rstrip(), sources=tuple(sources), lens=lens)
