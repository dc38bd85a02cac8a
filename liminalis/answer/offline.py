"""The offline answerer: the default without an API key, and the fallback when the model is out.

It quotes the sentences of the prompt's documents that share the most question terms, weighted
by idf over the material's sentences, plainly labelled as quotes and each with its source:

    score(s) = Σ_{t ∈ q ∩ s} ln(1 + n / df_t) / (1 + 0.1·rank(doc)) · (1.15 if recalled else 1)

where ``n`` is the number of candidate sentences and ``df_t`` the sentences holding term ``t``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from liminalis.answer.citations import Answer, Source, source_of_doc
from liminalis.context.material import ContextDoc
from liminalis.text import Tokenizer, split_sentences
from liminalis.types import SUMMARY, TEXT

__all__ = ["OfflineAnswerer"]


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
