"""Answerers: turn a retrieved bundle into a cited answer.

``Responder`` is the one call adapters use for a question: retrieve for the chat's lens, then
answer from that bundle only. The offline answerer (default without an API key) quotes the
best-matching sentences with their sources, plainly labelled as quotes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from liminalis.ingest.sentences import split_sentences
from liminalis.ports import Usage
from liminalis.retrieval.lexical import Tokenizer
from liminalis.types import Bundle

__all__ = ["Source", "Answer", "OfflineAnswerer", "Responder"]

_log = logging.getLogger(__name__)
_OMIT = re.compile(r"\[… [\d,]+ characters omitted …\]")


@dataclass(frozen=True, slots=True)
class Source:
    doc_id: str
    title: str
    section: str = ""

    def label(self) -> str:
        return f"{self.title} — {self.section}" if self.section else self.title


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    sources: tuple[Source, ...]
    model: str = "offline"
    usage: Usage = field(default_factory=Usage)
    notes: tuple[str, ...] = ()
    lens: frozenset[str] = frozenset()


def bundle_sources(bundle: Bundle) -> tuple[Source, ...]:
    return tuple(Source(d.doc_id, d.title, d.headings[0] if d.headings else "") for d in bundle.documents)


class OfflineAnswerer:
    """Extractive answer: the sentences of the bundle that share most terms with the question."""

    name = "offline"

    def __init__(self, *, max_quotes: int = 4, tokenizer: Tokenizer = Tokenizer()) -> None:
        self.max_quotes = max_quotes
        self.tokenizer = tokenizer

    async def answer(self, question: str, bundle: Bundle) -> Answer:
        q = set(self.tokenizer(question))
        scored: list[tuple[float, int, str, str, str]] = []
        order = 0
        for rank, doc in enumerate(bundle.documents):
            text = _OMIT.sub("\n\n", doc.text)
            for s, e, _ in split_sentences(text):
                sent = " ".join(text[s:e].split())
                if len(sent) < 12 or sent.startswith("#"):
                    continue
                toks = set(self.tokenizer(sent))
                overlap = len(q & toks)
                if overlap == 0:
                    continue
                score = overlap / (1 + 0.15 * rank) + (0.3 if not doc.pinned else 0)
                scored.append((score, order, sent, doc.doc_id, doc.title))
                order += 1
        if not scored:
            return Answer(
                text="I found nothing in this campaign's documents that answers that.",
                sources=(), notes=("no matching passages",), lens=bundle.lens,
            )
        best = sorted(scored, key=lambda x: (-x[0], x[1]))[: self.max_quotes]
        lines = ["Here is what the campaign's documents say (quoted, not paraphrased):", ""]
        used: list[str] = []
        for _, _, sent, doc_id, title in best:
            lines.append(f"> {sent}")
            lines.append(f"— *{title}*")
            if doc_id not in used:
                used.append(doc_id)
        sources = tuple(s for s in bundle_sources(bundle) if s.doc_id in used)
        return Answer(text="\n".join(lines), sources=sources, lens=bundle.lens)


class Responder:
    """Retrieve for a lens, then answer from that bundle only (the path every adapter uses)."""

    def __init__(self, engine: object, answerer: OfflineAnswerer | None = None) -> None:
        from liminalis.engine import Engine

        assert isinstance(engine, Engine)
        self.engine = engine
        self.answerer = answerer or OfflineAnswerer()

    async def respond(
        self, campaign: str, question: str, lens: frozenset[str], *, chat: str | None = None,
        forced: Sequence[str] = (),
    ) -> Answer:
        bundle = await self.engine.retrieve(campaign, question, lens, chat=chat, forced=forced)
        return await self.answerer.answer(question, bundle)
