"""A "previously on…" for the table: the latest session notes, through the players lens only.

A recap is posted in a shared channel, so it is built from what every player may read and from
nothing else: the shared view of each session note (hidden sections cut out), never a GM's.
"""

from __future__ import annotations

from dataclasses import dataclass

from liminalis.lens import players_lens
from liminalis.retrieval.catalog import Catalog
from liminalis.text import natural_key, split_sentences

__all__ = ["Recap", "build_recap"]


@dataclass(frozen=True, slots=True)
class Recap:
    """The recap's text, and the session notes it was drawn from as ``(doc_id, title)``."""

    text: str
    sources: tuple[tuple[str, str], ...] = ()


def build_recap(catalog: Catalog, sessions: int = 1) -> Recap:
    """An extractive recap of the latest ``sessions`` session notes players may read."""
    lens = players_lens()
    notes = [
        d
        for d in catalog.documents.values()
        if d.type == "session" and catalog.visible_doc(d.doc_id, lens)
    ]
    # By file name, numbers by value (session-10 after session-9; an upload of session-8 after
    # sessions/session-07), then by path.
    notes.sort(key=lambda d: (natural_key(d.doc_id.rsplit("/", 1)[-1]), natural_key(d.doc_id)))
    latest = notes[-sessions:]
    if not latest:
        return Recap("No session notes yet.")
    parts = []
    for d in latest:
        sents = [
            d.text[s:e]
            for s, e, _ in split_sentences(d.text)
            if not d.text[s:e].lstrip().startswith(("#", "|"))
        ]
        parts.append(f"**{d.title}**\n" + " ".join(" ".join(x.split()) for x in sents[:4]))
    return Recap("\n\n".join(parts), tuple((d.doc_id, d.title) for d in latest))
