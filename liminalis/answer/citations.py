"""What an answer cites: its sources, and which documents of the prompt a model's text names.

The prompt labels each document with a ``## Title — Section`` heading and asks the model to cite
by that label in square brackets; the sources a user sees are read back from the brackets it
wrote. A citation is kept only when it names a document that was in the prompt for the asker's
lens, so a model cannot lend an answer a source it never read, and an answer whose brackets name
nothing it read has no sources at all: it is then said plainly that the notes do not cover the
question (:data:`NOT_COVERED`) and the question log counts it unanswered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from liminalis.context.material import ContextDoc
from liminalis.ports import Usage
from liminalis.types import Bundle

__all__ = [
    "NOT_COVERED",
    "Source",
    "Answer",
    "bundle_sources",
    "cited_sources",
    "source_of_doc",
    "with_not_covered",
]

#: The line an answer that cites no document ends with: what a player reads instead of Sources.
NOT_COVERED = "The campaign's notes don't cover this: no document of them was cited."


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
    #: The nearest documents of an answer the notes do not cover: shown as "closest notes",
    #: never as sources, since nothing in them answered the question.
    closest: tuple[Source, ...] = ()

    @property
    def answered(self) -> bool:
        """Whether a document backs the answer: it cites one (what the question log records)."""
        return bool(self.sources)


def bundle_sources(bundle: Bundle) -> tuple[Source, ...]:
    return tuple(
        Source(d.doc_id, d.title, d.headings[0] if d.headings else "") for d in bundle.documents
    )


def source_of_doc(d: ContextDoc) -> Source:
    return Source(d.doc_id, d.title, d.section)


_BRACKETED = re.compile(r"\[([^\]\n]+)\]")


def _cited_index(inner: str, titled: Sequence[tuple[str, int]]) -> int | None:
    """The prompt document one citation names: the longest title the citation starts with,
    followed by its end or a separator ("[Session 31 — Finale]" is not "Session 3")."""
    return next(
        (i for t, i in titled if inner.startswith(t) and not inner[len(t) : len(t) + 1].isalnum()),
        None,
    )


def cited_sources(text: str, documents: Sequence[ContextDoc]) -> tuple[Source, ...]:
    """The prompt ``documents`` the answer's bracketed citations name, in citation order.

    Each bracket (or each ``;``-separated part of one) names the document whose title it starts
    with, the longest such title: the section "The Drowned Bell" of "[Session 3 — The Drowned
    Bell]" is not the document of that title. A bracket that names no document of the prompt
    (a title the model made up, or one outside the asker's lens) is dropped; prose that merely
    mentions a title is not a citation. No citation, no sources.
    """
    titled = sorted(
        ((d.title.lower(), i) for i, d in enumerate(documents) if d.title), key=lambda t: -len(t[0])
    )
    hits: list[int] = []
    for m in _BRACKETED.finditer(text.lower()):
        for part in m.group(1).split(";"):
            found = _cited_index(part.strip(), titled)
            if found is not None:
                hits.append(found)
    return tuple(dict.fromkeys(source_of_doc(documents[i]) for i in hits))


def with_not_covered(answer: Answer) -> Answer:
    """``answer`` as a player reads it: one that cites nothing ends with :data:`NOT_COVERED`."""
    if answer.answered or not answer.text.strip():
        return answer
    return replace(
        answer,
        text=f"{answer.text.rstrip()}\n\n_{NOT_COVERED}_",
        notes=(*answer.notes, "cites no document: not covered"),
    )
