"""Reading a campaign through a lens, the way a person browses it: documents that match some
words (each with the line that matched best), the richest view of a document a lens may read,
and the passage an answer cites.

Everything here reads the lens's own catalog entries: the lexical index built for the lens
(:meth:`Catalog.lexical`, only what the lens may see), :meth:`Catalog.views_of` (only views the
lens may see) and passages re-checked with :meth:`Catalog.visible_passage`. A document's hidden
sections are cut from the players' view by the loader, so its pages show a player none of them.

Search scores are BM25 over passages and title entries (:mod:`liminalis.retrieval.lexical`); a
document's score is its best entry's. The snippet is the line of that passage sharing the most
query terms with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from liminalis.retrieval.catalog import Catalog
from liminalis.retrieval.lexical import title_entry_id
from liminalis.text import Tokenizer

__all__ = ["Match", "cited_passage", "richest_view", "search_documents", "snippet"]

TITLE = title_entry_id("")
_MARKUP = re.compile(r"^[#>*\-\s]+|[*_`]+")
_LINES = re.compile(r"\n+|(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Match:
    """A document a search found: its id (the view the lens reads), title and best line."""

    doc_id: str
    title: str
    snippet: str
    score: float


def snippet(text: str, terms: set[str], tokenizer: Tokenizer, *, chars: int = 160) -> str:
    """The line (or sentence) of ``text`` sharing the most of ``terms``, without Markdown marks,
    cut to ``chars``; the first non-empty line when none shares any."""
    best, best_n = "", -1
    for raw in _LINES.split(text):
        line = _MARKUP.sub("", raw).strip()
        if not line:
            continue
        n = len(terms & set(tokenizer(line)))
        if n > best_n:
            best, best_n = line, n
    if len(best) > chars:
        best = best[: chars - 1].rstrip() + "…"
    return best


def search_documents(
    catalog: Catalog, tokenizer: Tokenizer, query: str, lens: frozenset[str], *, limit: int = 50
) -> list[Match]:
    """Documents ``lens`` may see that match ``query``, best first, at most ``limit``."""
    tokens = tokenizer(query)
    if not tokens:
        return []
    terms = set(tokens)
    hits = catalog.lexical(lens).search(tokens, top_k=max(limit * 8, 50))  # best first
    score: dict[str, float] = {}
    passage: dict[str, str] = {}  # the best passage of each document (a title hit has none)
    for entry, value in hits:
        pid: str | None = None
        if entry.startswith(TITLE):
            doc_id = entry.removeprefix(TITLE)
        else:
            info = catalog.passages.get(entry)
            if info is None or not catalog.visible_passage(entry, lens):
                continue
            doc_id, pid = info.doc_id, entry
        if not catalog.visible_doc(doc_id, lens):
            continue
        score.setdefault(doc_id, value)
        if pid is not None:
            passage.setdefault(doc_id, pid)
    out: list[Match] = []
    for doc_id in sorted(score, key=lambda d: (-score[d], d))[:limit]:
        doc = catalog.documents[doc_id]
        pid = passage.get(doc_id) or catalog.first_passage(doc_id)
        text = catalog.passage_text(pid) if pid is not None else doc.text
        out.append(Match(doc_id, doc.title, snippet(text, terms, tokenizer), score[doc_id]))
    return out


def richest_view(catalog: Catalog, doc_id: str, lens: frozenset[str]) -> str | None:
    """The view of ``doc_id``'s file that ``lens`` may read with the most text (the GM's whole
    text of a page with hidden sections, a player's cut view), or ``None``."""
    views = catalog.views_of(doc_id, lens)
    if not views:
        return None
    return max(views, key=lambda d: (len(catalog.documents[d].text), d == doc_id))


def cited_passage(
    catalog: Catalog,
    tokenizer: Tokenizer,
    doc_id: str,
    section: str,
    lens: frozenset[str],
    query: str,
    *,
    chars: int = 700,
) -> str | None:
    """The passage of ``doc_id`` an answer cited under ``section`` (else the one sharing the
    most terms with ``query``), cut to ``chars``; ``None`` when ``lens`` may not read it."""
    if not catalog.visible_doc(doc_id, lens):
        return None
    pids = [p for p in catalog.by_doc.get(doc_id, ()) if catalog.visible_passage(p, lens)]
    if not pids:
        return None
    want = section.strip().lower()
    chosen = next(
        (p for p in pids if want and catalog.passages[p].heading.strip().lower() == want), None
    )
    if chosen is None:
        terms = set(tokenizer(f"{section} {query}"))
        chosen = max(
            pids, key=lambda p: (len(terms & set(catalog.passages[p].tokens)), -pids.index(p))
        )
    text = catalog.passage_text(chosen).strip()
    if len(text) > chars:
        text = text[: chars - 1].rstrip() + "…"
    return text
