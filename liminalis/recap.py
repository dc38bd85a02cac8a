"""A "previously on…" for the table, from session summaries, through the players lens only.

A recap is posted in a shared channel, so it is built from what every player may read and from
nothing else: the shared view of each session note (hidden sections cut out), never a GM's or a
personal lens's. The last ``sessions`` notes are taken in session order
(:mod:`liminalis.knowledge.sessions`: by session number, else in-world date, else file name —
never file time), oldest first, each as its summary (:func:`liminalis.knowledge.summaries.summarize`:
front-matter ``summary``, else its ``## Recap`` section, else extractive), then the open threads
of the latest one. :func:`build_model_recap` has a model write the recap from those same
players-visible summaries, and falls back to the offline recap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from liminalis.errors import LiminalisError
from liminalis.knowledge.motifs import open_threads
from liminalis.knowledge.sessions import order_sessions, session_mark
from liminalis.knowledge.summaries import summarize
from liminalis.lens import players_lens, visible
from liminalis.ports import LanguageModel, Message
from liminalis.retrieval.catalog import Catalog
from liminalis.types import Document

__all__ = ["Recap", "build_recap", "build_model_recap", "recap_sessions"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Recap:
    """The recap's text, and the session notes it was drawn from as ``(doc_id, title)``."""

    text: str
    sources: tuple[tuple[str, str], ...] = ()


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


def _threads(doc: Document, limit: int = 4) -> list[str]:
    return [m.text for m in open_threads(doc)][:limit]


def build_recap(catalog: Catalog, sessions: int = 1) -> Recap:
    """The offline recap of the latest ``sessions`` session notes players may read."""
    latest = recap_sessions(catalog, sessions)
    if not latest:
        return Recap("No session notes yet.")
    parts = [f"**{d.title}**\n{summarize(d).text}" for d in latest]
    threads = _threads(latest[-1])
    if threads:
        parts.append("**Open threads**\n" + "\n".join(f"- {t}" for t in threads))
    return Recap("\n\n".join(parts), tuple((d.doc_id, d.title) for d in latest))


_SYSTEM = (
    "You write the 'previously on…' recap a game master reads aloud at the start of a tabletop "
    "roleplaying session. Use only the session summaries given, oldest first; keep names exact; "
    "invent nothing; at most 8 sentences, then the open threads as a short list."
)


async def build_model_recap(catalog: Catalog, model: LanguageModel, sessions: int = 1) -> Recap:
    """A model-written recap (``role="summarize"``) from the players-visible summaries of the
    latest ``sessions`` notes; the offline recap when the model fails or says nothing."""
    offline = build_recap(catalog, sessions)
    latest = recap_sessions(catalog, sessions)
    if not latest:
        return offline
    material = "\n\n".join(f"## {d.title}\n{summarize(d).text}" for d in latest)
    threads = _threads(latest[-1])
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
    return Recap(text, offline.sources) if text else offline
