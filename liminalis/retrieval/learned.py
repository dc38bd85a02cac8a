"""A learned document ranker over retrieval's own signals (learning to rank, listwise).

Fusion (weighted RRF) sees only each arm's *rank*. It cannot tell a document whose one passage
happens to be dense in query terms from one that covers the question across a whole scene, or
a confident arm from a barely-scoring one. This stage re-orders the documents of the fused
pool by a small model over features retrieval already computed, per (query, document):

* each arm's evidence: best passage BM25, document BM25, best dense cosine, their ranks, and
  the fused rank and score (scores relative to the query's best, so they compare across queries);
* how the document covers the question: the IDF-weighted share of query terms found in the
  document, in its best passage, in its best three-passage window and in its title; the share
  of the query's adjacent term pairs found adjacent in the document (phrases, names); the best
  window's BM25; its second-best passage; how many pool passages it holds; its length;
* two that tell candidates *of one pool* apart: coverage with query terms weighted by how few
  candidates hold them as well (a term every candidate shares, a story's hero, separates them
  little, however rare it is corpus-wide), and proximity, the IDF-weighted share of query terms
  found together within a span of about three sentences;
* every candidate's best dense cosine over *all* its rows (passages, windows, title), from one
  exact vector search restricted to the candidates: the dense arm's top 20 leaves about half
  the candidates without a dense score, which the features above can only mark as absent;
* how strongly the pool holds the document's neighbours (the files just before and after it in
  its numbered series, session-9 / session-10, among those the lens may see): sessions and a
  story's sections are written in order, and a scene a question asks about often runs across
  the boundary.

The model is linear in standardised features (:data:`FEATURES`), optionally plus a small hidden
layer (:class:`LearnedRanker`), trained listwise (softmax
cross-entropy over each query's candidates, Cao et al., ICML 2007, "ListNet" top-one) on the
training split in shared/bench/train (``python -m bench.train_ranker``), never on an evaluation
set. It ships as a few hundred bytes of JSON, costs a few milliseconds a query, and loads with
nothing but numpy. A MiniLM cross-encoder trained on a GPU from the same data ranks below it
on the dev sets on its own; the rerank stage therefore adds its score to this model's document
scores rather than replacing them (liminalis.retrieval.rerank).

Lens safety: every feature is computed from the lens's own indexes and the lens-visible
candidates that fusion produced; this stage only re-orders, it cannot add a document.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from liminalis.retrieval.catalog import Catalog

__all__ = ["FEATURES", "Signals", "DocumentRanker", "LearnedRanker", "doc_features", "load_ranker"]

_log = logging.getLogger(__name__)

FEATURES: tuple[str, ...] = (
    "fused_inv_rank",
    "fused_log_rank",
    "fused_rel",
    "lex_rel",
    "lex_log_rank",
    "lex_present",
    "doc_rel",
    "doc_log_rank",
    "doc_present",
    "dense_cos",
    "dense_gap",
    "dense_log_rank",
    "dense_present",
    "pool_count",
    "coverage",
    "window_coverage",
    "title_coverage",
    "window_rel",
    "second_rel",
    "log_length",
    "passage_coverage",
    "bigram_coverage",
    "cand_dense_gap",
    "cand_dense_log_rank",
    "pool_coverage",
    "span_coverage",
    "neighbour_rel",
)

#: Tokens (stop words already dropped) of the proximity feature's span: about three sentences.
#: Swept with 12 on the training groups; 36 helped more.
SPAN = 36


def _best_span(
    positions: Mapping[str, Sequence[int]], weight: Mapping[str, float], span: int
) -> float:
    """The largest total ``weight`` of distinct terms found together within ``span`` consecutive
    tokens (two pointers over the terms' merged positions)."""
    events = sorted((i, t) for t, ps in positions.items() if weight.get(t, 0.0) > 0 for i in ps)
    inside: dict[str, int] = {}
    total = best = 0.0
    left = 0
    for pos, term in events:
        while events[left][0] <= pos - span:
            gone = events[left][1]
            inside[gone] -= 1
            if not inside[gone]:
                del inside[gone]
                total -= weight[gone]
            left += 1
        if term not in inside:
            inside[term] = 0
            total += weight[term]
        inside[term] += 1
        best = max(best, total)
    return best


@dataclass(slots=True)
class Signals:
    """What the arms scored for one query (lens-scoped), kept for the learned stage."""

    query_tokens: list[str] = field(default_factory=list)
    dense: dict[str, float] = field(default_factory=dict)  # passage id → cosine, arm order
    lexical: dict[str, float] = field(default_factory=dict)  # passage id → BM25, arm order
    documents: dict[str, float] = field(default_factory=dict)  # doc id → document BM25, arm order
    passage_scores: np.ndarray | None = None  # BM25 of every entry of the lens's passage index
    idf: Mapping[str, float] = field(default_factory=dict)
    query_vector: np.ndarray | None = None
    #: doc id → best cosine over *all* of the candidate document's rows (passages, windows,
    #: title), from a second dense search restricted to the candidates: the dense arm's top 20
    #: leaves most candidates without a dense score.
    candidate_dense: dict[str, float] = field(default_factory=dict)


def _doc_ranks(
    cat: Catalog, scored: Mapping[str, float], *, by_doc: bool = False
) -> dict[str, tuple[int, float]]:
    """doc id → (1-based rank, best score) from a best-first passage (or document) mapping."""
    out: dict[str, tuple[int, float]] = {}
    for key, score in scored.items():
        doc = key if by_doc else cat.passages[key].doc_id
        if doc not in out:
            out[doc] = (len(out) + 1, score)
    return out


def doc_features(
    cat: Catalog,
    lens: frozenset[str],
    sig: Signals,
    fused: Sequence[tuple[str, float]],
    docs: Sequence[str],
) -> np.ndarray:
    """Feature matrix (len(docs) × len(FEATURES)) for the candidate ``docs`` of one query.

    ``fused`` is the fused passage ranking with scores (best first); ``docs`` its documents.
    What every row is measured against is read once (:func:`_pool_of`), then each candidate's
    row (:func:`_feature_row`).
    """
    pool = _pool_of(cat, lens, sig, fused, docs)
    rows = [_feature_row(pool, d) for d in docs]
    return np.asarray(rows, dtype=np.float64).reshape(len(docs), len(FEATURES))


@dataclass(frozen=True, slots=True)
class _Pool:
    """One query's candidate pool, as every feature row is measured against it: the query's
    terms and their weights, each arm's document ranks and top scores, each candidate's best
    window, and the pool-local term weights."""

    cat: Catalog
    lens: frozenset[str]
    q: list[str]
    w: dict[str, float]
    wsum: float
    fused_docs: dict[str, tuple[int, float]]
    lex: dict[str, tuple[int, float]]
    dense: dict[str, tuple[int, float]]
    docr: dict[str, tuple[int, float]]
    top_fused: float
    top_lex: float
    top_doc: float
    top_dense: float
    pool_count: dict[str, int]
    windows: dict[str, tuple[float, float, float, float]]
    pairs: set[tuple[str, str]]
    c: dict[str, float]
    csum: float
    top_window: float
    cd: dict[str, float]
    top_cd: float
    cd_rank: dict[str, int]
    in_pool: set[str]
    n_docs: int


def _pool_of(
    cat: Catalog,
    lens: frozenset[str],
    sig: Signals,
    fused: Sequence[tuple[str, float]],
    docs: Sequence[str],
) -> _Pool:
    """Read the pool once: query term weights ``w(t) = max(0, idf(t))``, each arm's document
    ranks and top scores, the candidates' windows (:func:`_windows`) and pool-local weights
    (:func:`_pool_weights`)."""
    q = list(dict.fromkeys(sig.query_tokens))
    w = {t: max(0.0, float(sig.idf.get(t, 0.0))) for t in q}
    wsum = sum(w.values()) or 1.0
    pool_count: dict[str, int] = {}
    for pid, _ in fused:
        d = cat.passages[pid].doc_id
        pool_count[d] = pool_count.get(d, 0) + 1
    windows = _windows(cat, lens, sig, docs, q=q, w=w, wsum=wsum)
    seq = list(sig.query_tokens)
    c, csum = _pool_weights(cat, lens, docs, q, w)
    cd = sig.candidate_dense
    return _Pool(
        cat=cat,
        lens=lens,
        q=q,
        w=w,
        wsum=wsum,
        fused_docs=_doc_ranks(cat, dict(fused)),
        lex=_doc_ranks(cat, sig.lexical),
        dense=_doc_ranks(cat, sig.dense),
        docr=_doc_ranks(cat, sig.documents, by_doc=True),
        top_fused=fused[0][1] if fused else 1.0,
        top_lex=max(sig.lexical.values(), default=0.0) or 1.0,
        top_doc=max(sig.documents.values(), default=0.0) or 1.0,
        top_dense=max(sig.dense.values(), default=0.0),
        pool_count=pool_count,
        windows=windows,
        pairs=set(zip(seq, seq[1:], strict=False)),
        c=c,
        csum=csum,
        top_window=max((v[0] for v in windows.values()), default=0.0) or 1.0,
        cd=cd,
        top_cd=max((cd[d] for d in docs if d in cd), default=0.0),
        cd_rank={
            d: i + 1
            for i, d in enumerate(sorted((d for d in docs if d in cd), key=lambda d: -cd[d]))
        },
        in_pool=set(docs),
        n_docs=len(docs),
    )


def _windows(
    cat: Catalog,
    lens: frozenset[str],
    sig: Signals,
    docs: Sequence[str],
    *,
    q: list[str],
    w: dict[str, float],
    wsum: float,
) -> dict[str, tuple[float, float, float, float]]:
    """Per candidate: its best three-passage window's BM25 sum, the query weight that window
    covers, its second-best passage's score, and the weight its best passage covers."""
    pos = cat.lexical(lens).positions
    scores = sig.passage_scores
    windows: dict[str, tuple[float, float, float, float]] = {}
    for d in docs:
        pids = cat.doc_view(d, lens)[0]
        ps = [float(scores[pos[p]]) if scores is not None and p in pos else 0.0 for p in pids]
        best_i, best_w = 0, -1.0
        for i in range(len(ps)):
            s = sum(ps[max(0, i - 1) : i + 2])
            if s > best_w:
                best_i, best_w = i, s
        terms: set[str] = set()
        for p in pids[max(0, best_i - 1) : best_i + 2]:
            terms.update(cat.passages[p].tokens)
        ranked = sorted(range(len(ps)), key=lambda i: -ps[i])
        second = ps[ranked[1]] if len(ps) > 1 else 0.0
        top_terms = set(cat.passages[pids[ranked[0]]].tokens) if pids else set()
        windows[d] = (
            max(best_w, 0.0),
            sum(w[t] for t in q if t in terms) / wsum,
            second,
            sum(w[t] for t in q if t in top_terms) / wsum,
        )
    return windows


def _pool_weights(
    cat: Catalog, lens: frozenset[str], docs: Sequence[str], q: list[str], w: dict[str, float]
) -> tuple[dict[str, float], float]:
    """Pool-local weights: a query term every candidate shares (a story's hero, the party's
    name) tells the candidates apart little, however rare it is corpus-wide:
    ``c(t) = w(t) · log(1 + N/df(t))`` over the ``N`` candidates; with their sum."""
    n_docs = len(docs)
    df = {t: sum(1 for d in docs if t in cat.doc_view(d, lens)[1]) for t in q}
    c = {t: w[t] * math.log1p(n_docs / df[t]) if df[t] else 0.0 for t in q}
    return c, sum(c.values()) or 1.0


def _feature_row(pool: _Pool, d: str) -> list[float]:
    """One candidate's features, in :data:`FEATURES` order.

    An arm that did not return a document ranks it one past its default depth (lexical 120,
    document 60, dense 20): the shipped model was trained against those depths."""
    cat, lens, q, w, wsum = pool.cat, pool.lens, pool.q, pool.w, pool.wsum
    fused_docs, top_fused, cd = pool.fused_docs, pool.top_fused, pool.cd
    fr, fs = fused_docs.get(d, (len(fused_docs) + 1, 0.0))
    lr, ls = pool.lex.get(d, (0, 0.0))
    dr, ds = pool.docr.get(d, (0, 0.0))
    nr, ns = pool.dense.get(d, (0, 0.0))
    _, doc_terms, length = cat.doc_view(d, lens)
    title = cat.title_terms(d)
    win, win_cov, second, top_cov = pool.windows[d]
    bigrams = cat.doc_bigrams(d, lens)
    pairs = pool.pairs
    return [
        1.0 / fr,
        math.log(fr),
        fs / top_fused if top_fused else 0.0,
        ls / pool.top_lex,
        math.log(lr or 121),
        float(lr > 0),
        ds / pool.top_doc,
        math.log(dr or 61),
        float(dr > 0),
        ns,
        (ns - pool.top_dense) if nr else -1.0,
        math.log(nr or 21),
        float(nr > 0),
        math.log1p(pool.pool_count.get(d, 0)),
        sum(w[t] for t in q if t in doc_terms) / wsum,
        win_cov,
        sum(w[t] for t in q if t in title) / wsum,
        win / pool.top_window,
        second / pool.top_lex,
        math.log1p(length),
        top_cov,
        sum(1 for x in pairs if x in bigrams) / len(pairs) if pairs else 0.0,
        (cd[d] - pool.top_cd) if d in cd else -1.0,
        math.log(pool.cd_rank.get(d, pool.n_docs + 1)),
        sum(pool.c[t] for t in q if t in doc_terms) / pool.csum,
        _best_span(cat.doc_positions(d, lens, set(q)), w, SPAN) / wsum,
        max(
            (
                fused_docs[n][1] / top_fused if top_fused else 0.0
                for n in cat.neighbours(d, lens)
                if n in pool.in_pool and n in fused_docs
            ),
            default=0.0,
        ),
    ]


class DocumentRanker(Protocol):
    """Scores the rows of a :func:`doc_features` matrix; higher ranks first."""

    @property
    def model_id(self) -> str: ...

    def score(self, x: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class LearnedRanker:
    """A scorer over standardised :data:`FEATURES` (weights, mean, scale from training): linear,
    plus, when trained with one, a small tanh hidden layer added to the linear score
    (``hidden``: ``w1`` features × units, ``b1`` and ``w2`` per unit). The layer lets features
    interact (a high coverage counts for more when the dense arm agrees) while the linear part
    keeps what a linear fit already knew; it costs two small matrix products a query."""

    weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    features: tuple[str, ...] = FEATURES
    model_id: str = "learned-ranker"
    #: ``model_id`` of the embedder whose dense scores it was fit on ("" if not recorded): its
    #: dense weights are calibrated to that model's scores.
    embedder: str = ""
    hidden: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def score(self, x: np.ndarray) -> np.ndarray:
        z = (x - self.mean) / self.scale
        out: np.ndarray = z @ self.weights
        if self.hidden is not None:
            w1, b1, w2 = self.hidden
            out = out + np.tanh(z @ w1 + b1) @ w2
        return out

    def to_json(self, **meta: object) -> str:
        hidden = (
            {}
            if self.hidden is None
            else {
                "hidden": {
                    k: a.round(6).tolist()
                    for k, a in zip(("w1", "b1", "w2"), self.hidden, strict=True)
                }
            }
        )
        return json.dumps(
            {
                "model_id": self.model_id,
                "embedder": self.embedder,
                "features": list(self.features),
                "weights": self.weights.round(6).tolist(),
                "mean": self.mean.round(6).tolist(),
                "scale": self.scale.round(6).tolist(),
                **hidden,
                **meta,
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> LearnedRanker:
        data = json.loads(text)
        feats = tuple(data["features"])
        if feats != FEATURES:
            raise ValueError(f"ranker features {feats} do not match this version's {FEATURES}")
        weights, mean, scale = (
            np.asarray(data[k], dtype=np.float64) for k in ("weights", "mean", "scale")
        )
        if any(a.shape != (len(FEATURES),) for a in (weights, mean, scale)):
            raise ValueError("ranker arrays do not match the feature count")
        hidden = None
        if data.get("hidden") is not None:
            w1, b1, w2 = (
                np.asarray(data["hidden"][k], dtype=np.float64) for k in ("w1", "b1", "w2")
            )
            if (
                w1.ndim != 2
                or w1.shape[0] != len(FEATURES)
                or b1.shape != (w1.shape[1],)
                or w2.shape != (w1.shape[1],)
            ):
                raise ValueError("ranker hidden layer does not match the feature count")
            hidden = (w1, b1, w2)
        return cls(
            weights,
            mean,
            scale,
            features=feats,
            model_id=str(data.get("model_id", "learned-ranker")),
            embedder=str(data.get("embedder", "")),
            hidden=hidden,
        )


def load_ranker(path: str | Path | None) -> LearnedRanker | None:
    """The ranker at ``path`` (a JSON file or a folder holding ``ranker.json``), or None.

    A missing or unreadable model logs once and returns None: retrieval then keeps the fused
    order (quality degrades, availability does not).
    """
    if not path:
        return None
    p = Path(path)
    if p.is_dir():
        p = p / "ranker.json"
    try:
        return LearnedRanker.from_json(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _log.warning("learned ranker at %s not loaded (%s); keeping the fused order", p, exc)
        return None
