"""What an answer cites: its sources, and which documents of the prompt a model's text names.

The prompt asks the model for ``[Title — Section]`` citations; the sources a user sees are read
back from the text it wrote, so a citation can name only a document that was in the prompt for
the asker's lens.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from liminalis.context.material import ContextDoc
from liminalis.ports import Usage
from liminalis.types import Bundle

__all__ = ["Source", "Answer", "bundle_sources", "cited_sources", "source_of_doc"]


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
    #: The question log's id of this answer (``Engine.answer``; see ``liminalis.questions``):
    #: what a 👍/👎 on it is recorded against.
    question_id: int | None = None


def bundle_sources(bundle: Bundle) -> tuple[Source, ...]:
    return tuple(
        Source(d.doc_id, d.title, d.headings[0] if d.headings else "") for d in bundle.documents
    )


def source_of_doc(d: ContextDoc) -> Source:
    return Source(d.doc_id, d.title, d.section)


_BRACKETED = re.compile(r"\[([^\]\n]+)\]")


def cited_sources(
    text: str, documents: Sequence[ContextDoc], *, fallback: int = 3
) -> tuple[Source, ...]:
    """Documents the answer cites (in citation order); else the top ``fallback``; none for an
    empty answer.

    The prompt asks for ``[Title — Section]`` citations, so when the answer has bracketed ones,
    each names the document whose title it starts with (the longest such title): the section
    "The Drowned Bell" of "[Session 3 — The Drowned Bell]" is not the document of that title.
    Without brackets, titles named in the text count, longest first, one not inside another.
    """
    low = text.lower()
    if not low.strip():
        return ()
    titled = sorted(
        ((d.title.lower(), i) for i, d in enumerate(documents) if d.title), key=lambda t: -len(t[0])
    )
    hits: list[tuple[int, int]] = []
    for m in _BRACKETED.finditer(low):
        inner = m.group(1).lstrip()
        # The title, then the end or a separator: "[Session 31 — Finale]" is not "Session 3".
        match = next(
            (
                i
                for t, i in titled
                if inner.startswith(t) and not inner[len(t) : len(t) + 1].isalnum()
            ),
            None,
        )
        if match is not None:
            hits.append((m.start(), match))
    if not hits:
        taken: list[tuple[int, int]] = []
        for t, i in titled:
            pos = low.find(t)
            while pos != -1 and any(a <= pos < b for a, b in taken):
                pos = low.find(t, pos + 1)
            if pos != -1:
                taken.append((pos, pos + len(t)))
                hits.append((pos, i))
    if hits:
        return tuple(dict.fromkeys(source_of_doc(documents[i]) for _, i in sorted(hits)))
    recalled = [d for d in documents if d.pin not in {"always", "pinned"}] or list(documents)
    return tuple(dict.fromkeys(source_of_doc(d) for d in recalled[:fallback]))
