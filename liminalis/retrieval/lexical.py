"""Lexical recall: a per-campaign, per-lens BM25 index (rank-bm25, Okapi variant).

Okapi BM25 (Robertson & Zaragoza, 2009), as implemented by rank-bm25::

    score(q, d) = Σ_t IDF(t) · f(t,d)·(k1+1) / (f(t,d) + k1·(1 − b + b·|d|/avgdl))
    IDF(t)      = ln((N − n_t + 0.5) / (n_t + 0.5))   (negative values floored at ε·mean IDF)

Entries are passages plus one synthetic *title entry* per document (title, aliases, file name).

Tokens are computed once at ingest and stored with each passage in SQLite, so the index is
incremental on the expensive side and rebuilt from stored tokens (no re-tokenising) when the
campaign's generation changes or after a restart. The index is built per lens from only the
entries that lens may see, so GM-only text never even contributes term statistics to a players
query.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
from rank_bm25 import BM25Okapi

__all__ = ["BM25Index", "title_entry_id"]


def title_entry_id(doc_id: str) -> str:
    return f"title:{doc_id}"


class BM25Index:
    """BM25 over a fixed set of entries ``(entry_id, tokens)``.

    Statistics (IDF with rank-bm25's ε floor, document lengths, avgdl) come from rank-bm25's
    ``BM25Okapi``; scoring is compiled into per-term posting arrays, so a query costs
    O(postings of its terms) instead of rank-bm25's O(terms × entries) Python loop. Scores are
    identical to ``BM25Okapi.get_scores`` (a test checks it).
    """

    def __init__(
        self, entries: Sequence[tuple[str, list[str]]], *, k1: float = 0.6, b: float = 0.4
    ) -> None:
        self.ids = [e[0] for e in entries]
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        docs = [e[1] if e[1] else ["\x00"] for e in entries]
        self.bm25: BM25Okapi | None = BM25Okapi(docs, k1=k1, b=b) if docs else None
        if self.bm25 is None:
            return
        bm = self.bm25
        norm = k1 * (1 - b + b * np.asarray(bm.doc_len, dtype=np.float64) / bm.avgdl)
        acc: dict[str, tuple[list[int], list[float]]] = {}
        for i, freqs in enumerate(bm.doc_freqs):
            for term, tf in freqs.items():
                rows, tfs = acc.setdefault(term, ([], []))
                rows.append(i)
                tfs.append(tf)
        for term, (rows, tfs) in acc.items():
            r = np.asarray(rows, dtype=np.int32)
            f = np.asarray(tfs, dtype=np.float64)
            w = bm.idf.get(term, 0.0) * f * (k1 + 1) / (f + norm[r])
            self._postings[term] = (r, w)

    def __len__(self) -> int:
        return len(self.ids)

    @functools.cached_property
    def positions(self) -> dict[str, int]:
        """entry id → row of :meth:`scores`."""
        return {e: i for i, e in enumerate(self.ids)}

    @property
    def idf(self) -> Mapping[str, float]:
        """IDF by term (rank-bm25's, with its ε floor for very common terms)."""
        return self.bm25.idf if self.bm25 is not None else {}

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(self.ids), dtype=np.float64)
        for t in query_tokens:
            p = self._postings.get(t)
            if p is not None:
                np.add.at(out, p[0], p[1])
        return out

    def search(
        self,
        query_tokens: Sequence[str],
        *,
        top_k: int,
        scores: np.ndarray | None = None,
    ) -> list[tuple[str, float]]:
        """Return up to ``top_k`` ``(entry_id, score)`` with a positive score, best first
        (``scores``: this query's :meth:`scores`, when the caller already has them)."""
        if self.bm25 is None or not query_tokens:
            return []
        if scores is None:
            scores = self.scores(query_tokens)
        nz = np.flatnonzero(scores > 0)
        if len(nz) > top_k:
            kth = -np.partition(-scores[nz], top_k - 1)[top_k - 1]
            nz = nz[scores[nz] >= kth]  # keep ties at the cut so the order is deterministic
        nz = nz[np.lexsort((nz, -scores[nz]))][:top_k]
        return [(self.ids[i], float(scores[i])) for i in nz]
