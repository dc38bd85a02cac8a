"""A "previously on…" for the table, from session summaries, through the players lens only.

A recap is posted in a shared channel, so it is built from what every player may read and from
nothing else: the shared view of each session note (hidden sections cut out), never a GM's or a
personal lens's. The last ``sessions`` notes are taken in session order
(:mod:`liminalis.knowledge.sessions`: by session number, else in-world date, else file name —
never file time), oldest first, each as its summary, then the open threads of the latest one.

The summaries are the stored ones when the summaries pass has run
(:meth:`liminalis.knowledge.service.Knowledge.recap_sessions`: model-written when a model is
configured), else made from the catalog on the spot
(:func:`liminalis.knowledge.summaries.summarize`: front-matter ``summary``, else its ``## Recap``
section, else extractive). :func:`build_model_recap` has a model write the recap from those same
players-visible summaries, and falls back to the offline recap.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from liminalis.errors import LiminalisError
from liminalis.knowledge.motifs import open_threads
from liminalis.knowledge.sessions import order_sessions, session_mark
from liminalis.knowledge.summaries import summarize
from liminalis.lens import players_lens, visible
from liminalis.ports import LanguageModel, Message, Usage
from liminalis.retrieval.catalog import Catalog
from liminalis.types import Document

__all__ = [
    "Recap",
    "RecapSession",
    "build_recap",
    "build_model_recap",
    "catalog_sessions",
    "recap_sessions",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Recap:
    """The recap's text, the session notes it was drawn from as ``(doc_id, title)``, and what a
    model spent writing it (nothing offline)."""

    text: str
    sources: tuple[tuple[str, str], ...] = ()
    usage: Usage = Usage()


@dataclass(frozen=True, slots=True)
class RecapSession:
    """One session note as a recap reads it: its players-visible summary and open threads."""

    doc_id: str
    title: str
    summary: str
    threads: tuple[str, ...] = ()


def recap_sessions(catalog: Catalog, sessions: int = 1) -> list[Document]:
    """The latest ``sessions`` session notes every player may read, in session order."""
    lens = players_lens()
    docs = {
        d.doc_id: d
        for d in catalog.documents.values()
        if visible(d.visibility, lens) and d.doc_id == d.doc_id.split("//", 1)[0]
    }
    marks = []
    for d in docs.values():
        mark = session_mark(d)
        if mark is not None:
            marks.append((d.doc_id, d.title, d.path, mark))
    ordered = order_sessions(marks)
    return [docs[s.doc_id] for s in ordered[-sessions:]] if sessions > 0 else []


def catalog_sessions(catalog: Catalog, sessions: int = 1) -> list[RecapSession]:
    """:func:`recap_sessions` summarised on the spot (before the summaries pass has run)."""
    return [
        RecapSession(d.doc_id, d.title, summarize(d).text, tuple(m.text for m in open_threads(d)))
        for d in recap_sessions(catalog, sessions)
    ]


def _latest(source: Catalog | Sequence[RecapSession], sessions: int) -> list[RecapSession]:
    if isinstance(source, Catalog):
        return catalog_sessions(source, sessions)
    return list(source)[-sessions:] if sessions > 0 else []


def build_recap(source: Catalog | Sequence[RecapSession], sessions: int = 1) -> Recap:
    """The offline recap of the latest ``sessions`` session notes players may read (from the
    catalog, or from :class:`RecapSession` s already drawn through the players lens)."""
    latest = _latest(source, sessions)
    if not latest:
        return Recap("No session notes yet.")
    parts = [f"**{s.title}**\n{s.summary}" for s in latest]
    threads = list(latest[-1].threads[:4])
    if threads:
        parts.append("**Open threads**\n" + "\n".join(f"- {t}" for t in threads))
    return Recap("\n\n".join(parts), tuple((s.doc_id, s.title) for s in latest))


_SYSTEM = (
    "You write the 'previously on…' recap a game master reads aloud at the start of a tabletop "
    "roleplaying session. Use only the session summaries given, oldest first; keep names exact; "
    "invent nothing; at most 8 sentences, then the open threads as a short list."
)


async def build_model_recap(
    source: Catalog | Sequence[RecapSession], model: LanguageModel, sessions: int = 1
) -> Recap:
    """A model-written recap (``role="summarize"``) from the players-visible summaries of the
    latest ``sessions`` notes; the offline recap when the model fails or says nothing."""
    latest = _latest(source, sessions)
    offline = build_recap(latest, sessions)
    if not latest:
        return offline
    material = "\n\n".join(f"## {s.title}\n{s.summary}" for s in latest)
    threads = list(latest[-1].threads[:4])
    if threads:
        material += "\n\n## Open threads\n" + "\n".join(f"- {t}" for t in threads)
    try:
        reply = await model.complete(
            system=[_SYSTEM], messages=[Message("user", material)], max_tokens=600, role="summarize"
        )
    except LiminalisError as exc:
        _log.warning("model recap failed (%s); the offline recap is posted", exc)
        return offline
    text = reply.text.strip()
    return Recap(text, offline.sources, reply.usage) if text else offline
