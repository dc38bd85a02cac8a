"""Lexical recall: a per-campaign, per-lens BM25 index (Okapi variant, scored as rank-bm25 does).

Okapi BM25 (Robertson & Zaragoza, 2009), as implemented by rank-bm25's ``BM25Okapi``::

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
import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["BM25Index", "EMPTY_TOKEN", "Vocabulary", "title_entry_id"]

#: What an entry without tokens is indexed as, so it still counts as an entry of length one.
EMPTY_TOKEN = "\x00"


def title_entry_id(doc_id: str) -> str:
    return f"title:{doc_id}"


class Vocabulary:
    """Terms ↔ integer ids, handed out in order of first sight.

    Encoding is the one step of an index build that touches every token in Python (a hash
    lookup each); a catalog encodes its stored tokens once and builds every lens's indexes from
    the ids. Not thread-safe: encode under the lock that guards the builds.
    """

    def __init__(self) -> None:
        self._ids: defaultdict[str, int] = defaultdict(itertools.count().__next__)

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """The ids of ``tokens`` (int32), new terms given the next ids."""
        return np.fromiter(map(self._ids.__getitem__, tokens), dtype=np.int32)

    def terms(self) -> list[str]:
        """Every term, by id."""
        return list(self._ids)


class BM25Index:
    """BM25 over a fixed set of entries ``(entry_id, tokens)``.

    Every edit to a campaign moves its generation and the next question rebuilds its lenses'
    indexes, so a build is array work over integer term ids, not a Python loop per
    (term, entry) pair: one sort of ``(term, token position)`` keys yields each term's postings
    and its first occurrence, and the postings are stored in CSR form (``indptr``, ``rows``,
    ``weights``) with each one's whole BM25 factor precomputed::

        w(t, d) = IDF(t) · (f(t,d)·(k1+1) / (f(t,d) + k1·(1 − b + b·|d|/avgdl)))

    A query then costs O(postings of its terms). Scores equal rank-bm25's
    ``BM25Okapi.get_scores`` bit for bit (a test checks it): the same operations in the same
    order, IDFs through :func:`math.log`, and the mean IDF behind the ε floor summed as
    rank-bm25 sums it, left to right over the terms in order of first occurrence.
    """

    def __init__(
        self,
        entries: Sequence[tuple[str, Sequence[str]]],
        *,
        k1: float = 0.6,
        b: float = 0.4,
        epsilon: float = 0.25,
    ) -> None:
        vocabulary = Vocabulary()
        encoded = [vocabulary.encode(e[1]) for e in entries]
        self._compile([e[0] for e in entries], encoded, vocabulary, k1, b, epsilon)

    @classmethod
    def from_encoded(
        cls,
        ids: list[str],
        tokens: Sequence[np.ndarray],
        vocabulary: Vocabulary,
        *,
        k1: float = 0.6,
        b: float = 0.4,
        epsilon: float = 0.25,
    ) -> BM25Index:
        """The index of entries ``ids[i]`` with tokens ``tokens[i]`` encoded by ``vocabulary``.

        Only the terms these entries hold have statistics, an IDF or postings, however many
        more ``vocabulary`` knows. An entry without tokens adds :data:`EMPTY_TOKEN` to it.
        """
        index = cls.__new__(cls)
        index._compile(ids, tokens, vocabulary, k1, b, epsilon)
        return index

    def _compile(
        self,
        ids: list[str],
        tokens: Sequence[np.ndarray],
        vocabulary: Vocabulary,
        k1: float,
        b: float,
        epsilon: float,
    ) -> None:
        self.ids = ids
        self._term_id: dict[str, int] = {}
        self._idf: dict[str, float] = {}
        self._indptr = np.zeros(1, dtype=np.int64)
        self._rows = np.zeros(0, dtype=np.int32)
        self._weights = np.zeros(0, dtype=np.float64)
        n = len(ids)
        if n == 0:
            return
        lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=n)
        if not lengths.all():
            empty = vocabulary.encode([EMPTY_TOKEN])
            tokens = [t if len(t) else empty for t in tokens]
            lengths = np.maximum(lengths, 1)
        terms = vocabulary.terms()
        size = int(lengths.sum())
        # Sorted (term, position) keys: each term's tokens in corpus order, so the runs of one
        # (term, entry) pair are adjacent and each term's run starts at its first occurrence.
        # Worked in place and dropped early: these arrays are a few times the corpus in size.
        term = np.concatenate(tokens).astype(np.int64)
        term *= size
        term += np.arange(size)
        term.sort()
        pos = term % size
        term //= size
        row = np.repeat(np.arange(n, dtype=np.int32), lengths)[pos]
        cut = np.empty(size, dtype=bool)
        cut[0] = True
        np.not_equal(term[1:], term[:-1], out=cut[1:])
        term_start = np.flatnonzero(cut)
        present, first_pos = term[term_start], pos[term_start]
        del term, pos
        cut[1:] |= row[1:] != row[:-1]
        pair_start = np.flatnonzero(cut)
        del cut
        pair_row = row[pair_start]
        del row
        tf = np.diff(pair_start, append=size)
        self._indptr = np.append(np.searchsorted(pair_start, term_start), len(pair_start))
        del pair_start
        df = np.diff(self._indptr)
        # math.log once per distinct document frequency, as rank-bm25 takes it per term.
        dfs, which = np.unique(df, return_inverse=True)
        raw = np.array([math.log(n - f + 0.5) - math.log(f + 0.5) for f in dfs.tolist()])[which]
        first_seen = np.argsort(first_pos, kind="stable")
        # accumulate adds left to right, like rank-bm25's loop (np.sum would add pairwise).
        mean_idf = float(np.add.accumulate(raw[first_seen])[-1]) / len(raw)
        idf = np.where(raw < 0, epsilon * mean_idf, raw)
        names = [terms[t] for t in present.tolist()]
        self._term_id = dict(zip(names, range(len(names)), strict=True))
        self._idf = {names[j]: float(idf[j]) for j in first_seen.tolist()}
        avgdl = size / n
        norm = k1 * (1 - b + b * lengths / avgdl)
        self._rows = pair_row
        self._weights = np.repeat(idf, df) * (tf * (k1 + 1) / (tf + norm[pair_row]))

    def __len__(self) -> int:
        return len(self.ids)

    @functools.cached_property
    def positions(self) -> dict[str, int]:
        """entry id → row of :meth:`scores`."""
        return {e: i for i, e in enumerate(self.ids)}

    @property
    def idf(self) -> Mapping[str, float]:
        """IDF by term (rank-bm25's, with its ε floor for very common terms)."""
        return self._idf

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every entry for the query, by row (``ids[i]`` scores ``[i]``).

        Each query term adds its postings' weights in query order, as rank-bm25 adds its terms.
        ``np.add.at`` rather than ``out[rows] += weights``: a term's postings name each row once,
        so both add the same, but since numpy 1.25 ``add.at`` runs one fused loop (outside the
        GIL) where the fancy-index form gathers, adds and scatters, and int32 rows (half the
        memory of intp) would cost it a conversion of the index array on every call as well.
        """
        out = np.zeros(len(self.ids), dtype=np.float64)
        for t in query_tokens:
            j = self._term_id.get(t)
            if j is not None:
                lo, hi = self._indptr[j], self._indptr[j + 1]
                np.add.at(out, self._rows[lo:hi], self._weights[lo:hi])
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
        if not self.ids or not query_tokens:
            return []
        if scores is None:
            scores = self.scores(query_tokens)
        nz = np.flatnonzero(scores > 0)
        if len(nz) > top_k:
            kth = -np.partition(-scores[nz], top_k - 1)[top_k - 1]
            nz = nz[scores[nz] >= kth]  # keep ties at the cut so the order is deterministic
        nz = nz[np.lexsort((nz, -scores[nz]))][:top_k]
        return [(self.ids[i], float(scores[i])) for i in nz]
