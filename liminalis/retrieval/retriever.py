"""The retrieval stack: pins → dense + lexical recall → weighted RRF → rerank → render.

Every stage is lens-filtered: the vector store filters inside its query, the lexical index is
built only from what the lens may see, pins resolve through the lens-scoped catalog, and
:meth:`Retriever.retrieve` re-checks every hit against :func:`liminalis.lens.visible` before
rendering. Stage timings and an explain trace come back with the bundle.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from liminalis.ports import Embedder, Reranker, VectorHit, VectorStore
from liminalis.retrieval.catalog import Catalog, PassageInfo
from liminalis.retrieval.fusion import dedupe_ranking, rrf
from liminalis.retrieval.learned import DocumentRanker, Signals, doc_features
from liminalis.retrieval.pins import Pin, resolve_pins, strip_mentions
from liminalis.retrieval.render import RenderParams, fallback_passages, render_document
from liminalis.retrieval.rerank import rerank_hits
from liminalis.store.sqlite import Database
from liminalis.text import Tokenizer
from liminalis.types import Bundle, Document, Hit, RenderedDocument, StageTrace
from liminalis.workers import run_cpu

__all__ = [
    "RetrievalParams",
    "Retriever",
    "Trace",
    "RERANK_BUSY_NOTE",
    "RERANK_FAILED_NOTE",
    "SKIPPED_STAGE_NOTES",
]

_log = logging.getLogger(__name__)
#: Bundle notes of a question that kept the fused order because the reranker did not run:
#: busy (the wait for its turn ran out) or failing (an error, a timeout). Replies show them.
RERANK_BUSY_NOTE = "reranker busy: skipped, fused order kept"
RERANK_FAILED_NOTE = "reranker unavailable: fused order kept"
SKIPPED_STAGE_NOTES = (RERANK_BUSY_NOTE, RERANK_FAILED_NOTE)
_STAGES = ("pins", "dense", "lexical", "doc_lexical", "fusion", "learned", "rerank", "render")


@dataclass(frozen=True, slots=True)
class RetrievalParams:
    """Tunable knobs; defaults are the values chosen by the dev-set sweep (bench/)."""

    dense_enabled: bool = True
    lexical_enabled: bool = True
    rerank_enabled: bool = True
    #: The learned document ranker (liminalis.retrieval.learned), when one is loaded.
    learned_enabled: bool = True
    named_keys: bool = True
    dense_top_k: int = 20
    lexical_top_k: int = 120
    dense_floor: float = 0.05
    rrf_k: float = 5.0
    w_dense: float = 0.05
    w_lexical: float = 1.0
    #: The document-level lexical arm (whole documents as BM25 units; see Catalog.doc_lexical).
    doc_lexical_enabled: bool = True
    w_doc: float = 1.0
    doc_top_k: int = 60
    doc_k1: float = 0.6
    doc_b: float = 0.3
    pool: int = 40
    rerank_keep: int = 8
    #: Candidates (from the top of the pool) the cross-encoder scores; the rest keep their order.
    #: After the learned ranker the pool leads with each document's best passage, so 8 means the
    #: cross-encoder re-orders the learned top 8 *documents*. With the 27-feature ranker, depth
    #: 8 gave the best recall@5 on both dev sets of {5, 6, 7, 8, 10} (fqa R@5 0.917 → 0.929
    #: from depth 5, crd3 0.956 → 0.959); 10 reads the same recall and MRR within 0.0004, for
    #: two more candidates. With the 26-feature ranker depth 6 had pushed relevant documents
    #: out of the top 5 as often as it pulled them in, so 5 was shipped then. The model costs
    #: ~20 ms a candidate on a fast 2-core machine, fp32 (bench/results/rerank-depth27.json).
    rerank_depth: int = 8
    #: Weight of the reranker's standardised score added to the learned ranker's score (or to the
    #: fused log-rank when no learned ranker ran); None: the reranker's order alone. 0.5: with the
    #: ranker's hidden layer its scores spread wider, and the grid {1/32 … 0.5} × depth {6, 8, 10,
    #: 12} peaked at depth 8, mix 0.5 on the mean of the four target metrics (fqa / crd3 MRR and
    #: recall@5; bench/results/rerank-grid-h16.json). 0.375 ties the linear ranker's recall on both
    #: sets; 0.5 trades crd3 MRR 0.945 → 0.941 for fqa recall@5 0.929 → 0.936.
    rerank_mix: float | None = 0.5
    max_documents: int = 8
    #: Further pool passages per rendered document handed to tiering as ``related`` spans.
    related_per_doc: int = 4
    #: The strongest recalled documents (this many) also render their related passages: with the
    #: document-level arm, the kept hits spread over more documents, one passage each, and the
    #: top documents' evidence usually spans several passages.
    render_related_docs: int = 1
    #: The most one scoring call may take (a hung model); past it the fused order is kept.
    rerank_timeout_s: float = 5.0
    #: The most a question waits for its turn at the reranker, which scores one question at a
    #: time: under a burst of questions they queue for it rather than each racing the timeout
    #: above (most then lost it). Past this wait the question keeps the fused order, and its
    #: bundle carries :data:`RERANK_BUSY_NOTE`, which the reply shows.
    rerank_wait_s: float = 30.0
    render: RenderParams = field(default_factory=RenderParams)


@dataclass(slots=True)
class Trace:
    """Per-arm rankings for explain mode (document level, 1-based)."""

    pins: list[Pin] = field(default_factory=list)
    dense_docs: list[str] = field(default_factory=list)
    lexical_docs: list[str] = field(default_factory=list)
    document_docs: list[str] = field(default_factory=list)
    fused_docs: list[str] = field(default_factory=list)
    learned_docs: list[str] = field(default_factory=list)
    reranked_docs: list[str] = field(default_factory=list)
    rendered_docs: list[str] = field(default_factory=list)
    reranked: bool = False
    #: Set to collect the learned ranker's candidates and features (training, bench/train_ranker).
    collect_features: bool = False
    candidates: list[str] = field(default_factory=list)
    #: The learned ranker's score of each pool document (the rerank stage's prior), when it ran.
    learned_scores: dict[str, float] = field(default_factory=dict)
    features: np.ndarray | None = None

    def stage(self, doc_id: str) -> StageTrace:
        def rank(xs: list[str]) -> int | None:
            return xs.index(doc_id) + 1 if doc_id in xs else None

        pin = next((p.reason for p in self.pins if p.doc_id == doc_id), None)
        return StageTrace(
            doc_id=doc_id,
            pinned=pin,
            dense_rank=rank(self.dense_docs),
            lexical_rank=rank(self.lexical_docs),
            document_rank=rank(self.document_docs),
            fused_rank=rank(self.fused_docs),
            learned_rank=rank(self.learned_docs) if self.learned_docs else None,
            reranked_rank=rank(self.reranked_docs) if self.reranked else None,
            rendered=doc_id in self.rendered_docs,
        )


def _visible_row(cat: Catalog, hit: VectorHit, lens: frozenset[str]) -> str | None:
    """The passage a vector row stands for (a title row: the document's first passage), when it
    is in the current snapshot and ``lens`` may see it; else None. Stale vectors from an
    interrupted ingest and anything the lens may not see stop here (the second wall)."""
    pid = (
        hit.passage_id if hit.kind != "title" else (cat.first_passage(hit.doc_id) or hit.passage_id)
    )
    return pid if pid in cat.passages and cat.visible_passage(pid, lens) else None


@dataclass(slots=True)
class _Request:
    """One retrieval's inputs and the stage timings measured so far, handed down the stages of
    :meth:`Retriever.retrieve` (the way httpx hands one request down its chain)."""

    campaign: str
    query: str
    lens: frozenset[str]
    p: RetrievalParams
    cat: Catalog
    #: The query without mentions: what the arms and the reranker read.
    search_query: str
    sig: Signals
    always: Sequence[str]
    pinned: Sequence[str]
    forced: Sequence[str]
    trace: Trace | None
    t0: float
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class _Recalled:
    """What the recall stage found: pins and each arm's passage ranking."""

    pins: list[Pin]
    dense: list[str]
    lexical: list[str]
    documents: list[str]


@dataclass(slots=True)
class _Ranking:
    """The passage order as fusion, the learned ranker and the reranker leave it."""

    fused_pairs: list[tuple[str, float]]
    fused_scores: dict[str, float]
    #: The fused order before the learned ranker (the explain trace's fused rung).
    fused_order: list[str]
    #: The order after the learned ranker, when it ran; else the fused order.
    fused: list[str]
    learned: bool = False
    doc_scores: dict[str, float] | None = None
    pool: list[Hit] = field(default_factory=list)
    reranked: bool = False
    busy: bool = False


@dataclass(frozen=True, slots=True)
class _Layout:
    """Which documents a bundle renders, in order, and which passages each shows."""

    kept: list[Hit]
    doc_order: list[str]
    matched: dict[str, list[str]]
    related: dict[str, list[str]]
    best: dict[str, float]
    pin_reason: dict[str, str]


def _lay_out(p: RetrievalParams, ranked_hits: list[Hit], shown: list[Pin]) -> _Layout:
    """The document order (pins first, then up to ``p.max_documents`` recalled documents by
    their best kept hit), each document's matched passages (its hits in the first
    ``p.rerank_keep``) and related ones (its hits further down the pool)."""
    pinned_ids = [pin.doc_id for pin in shown]
    kept = ranked_hits[: p.rerank_keep]
    doc_order = dedupe_ranking(pinned_ids + [h.doc_id for h in kept])
    doc_order = (
        pinned_ids + [d for d in doc_order if d not in pinned_ids][: max(0, p.max_documents)]
    )
    matched: dict[str, list[str]] = {}
    for h in kept:
        matched.setdefault(h.doc_id, []).append(h.passage_id)
    related: dict[str, list[str]] = {}
    for h in ranked_hits[p.rerank_keep : p.pool]:
        if h.doc_id in doc_order and len(rel := related.setdefault(h.doc_id, [])) < (
            p.related_per_doc
        ):
            rel.append(h.passage_id)
    best: dict[str, float] = {}
    for h in ranked_hits:
        best.setdefault(h.doc_id, h.score)
    pin_reason = {pin.doc_id: pin.reason for pin in shown}
    return _Layout(kept, doc_order, matched, related, best, pin_reason)


def _render_layout(
    cat: Catalog, layout: _Layout, p: RetrievalParams, query_tokens: Sequence[str]
) -> list[RenderedDocument]:
    """Each laid-out document rendered: its matched passages (a pin nothing matched in: its
    :func:`fallback_passages`), the first ``p.render_related_docs`` recalled documents with
    their related passages merged in, the others with them as related spans."""
    rendered: list[RenderedDocument] = []
    recalled = [d for d in layout.doc_order if d not in layout.pin_reason]
    for doc_id in layout.doc_order:
        pids = layout.matched.get(doc_id) or fallback_passages(cat, doc_id, query_tokens)
        extra = layout.related.get(doc_id, [])
        if doc_id in recalled[: p.render_related_docs]:
            pids, extra = [*pids, *extra], []
        rendered.append(
            render_document(
                cat,
                doc_id,
                pids,
                pinned=doc_id in layout.pin_reason,
                score=layout.best.get(doc_id, 0.0),
                params=p.render,
                related=extra,
            )
        )
    return rendered


def _bundle_hits(cat: Catalog, layout: _Layout, shown: list[Pin]) -> tuple[Hit, ...]:
    """The bundle's hits: one per shown pin (its first matched passage, else its first
    passage), then the kept hits of documents not pinned."""
    pin_hits = [
        Hit(
            (layout.matched.get(pin.doc_id) or [cat.first_passage(pin.doc_id) or ""])[0],
            pin.doc_id,
            0.0,
            True,
            pin.reason,
        )
        for pin in shown
    ]
    return tuple(pin_hits) + tuple(h for h in layout.kept if h.doc_id not in layout.pin_reason)


def _doc_ranking(cat: Catalog, pids: Iterable[str]) -> list[str]:
    """A passage ranking as a document ranking (each document at its best passage)."""
    return dedupe_ranking(cat.passages[x].doc_id for x in pids)


def _fill_trace(
    trace: Trace,
    cat: Catalog,
    recalled: _Recalled,
    ranking: _Ranking,
    shown: list[Pin],
    rendered: list[RenderedDocument],
) -> None:
    """Each stage's document ranking into the explain trace."""
    docs = functools.partial(_doc_ranking, cat)
    trace.pins = shown
    trace.dense_docs = docs(recalled.dense)
    trace.lexical_docs = docs(recalled.lexical)
    trace.document_docs = docs(recalled.documents)
    trace.fused_docs = docs(ranking.fused_order)
    trace.learned_docs = docs(ranking.fused) if ranking.learned else []
    trace.reranked_docs = dedupe_ranking(h.doc_id for h in ranking.pool) if ranking.reranked else []
    trace.reranked = ranking.reranked
    trace.rendered_docs = [d.doc_id for d in rendered]


class Retriever:
    """Builds a :class:`Bundle` for (campaign, lens, query)."""

    def __init__(
        self,
        db: Database,
        store: VectorStore,
        embedder: Embedder | None,
        reranker: Reranker | None = None,
        *,
        tokenizer: Tokenizer = Tokenizer(),
        params: RetrievalParams = RetrievalParams(),
        k1: float = 0.6,
        b: float = 0.4,
        ranker: DocumentRanker | None = None,
        rerank_slots: int = 1,
    ) -> None:
        self.db = db
        # Questions scored by the reranker at once: its adapter scores on one worker thread,
        # so more would only queue there, out of reach of the wait deadline.
        self._rerank_turns = asyncio.Semaphore(rerank_slots)
        self.ranker = ranker
        self._ranker_warned: set[int] = set()
        self.store = store
        self.embedder = embedder
        #: slug → the embedder of its serving generation (``None``: ``embedder``).
        self.embedder_for: Callable[[str], Embedder | None] | None = None
        self.reranker = reranker
        self.tokenizer = tokenizer
        self.params = params
        self.k1 = k1
        self.b = b
        self._catalogs: dict[str, Catalog] = {}
        self._catalog_locks: dict[str, asyncio.Lock] = {}

    async def catalog(self, campaign: str) -> Catalog:
        """The campaign's snapshot, rebuilt when its generation moved. One question builds it
        while any others asking at the same time wait for it (a burst of questions after a
        start or an ingest would otherwise build one each); the build runs in a worker thread."""
        gen = await self.db.campaigns.generation(campaign)
        cat = self._catalogs.get(campaign)
        if cat is not None and cat.generation == gen:
            return cat
        async with self._catalog_locks.setdefault(campaign, asyncio.Lock()):
            gen = await self.db.campaigns.generation(campaign)
            cat = self._catalogs.get(campaign)
            if cat is not None and cat.generation == gen:
                return cat
            if cat is not None:
                # The campaign changed since the last snapshot, maybe by another process writing
                # to a shared Milvus: the store's cached rows may be stale too.
                await self.store.invalidate(campaign)
            documents = await self.db.documents.all(campaign)
            rows = await self.db.documents.passages(campaign)
            cat = await run_cpu(self._build_catalog, campaign, gen, documents, rows)
            self._catalogs[campaign] = cat
            return cat

    async def prewarm(self, campaign: str, lenses: Iterable[frozenset[str]]) -> None:
        """Build the campaign's snapshot and ``lenses``' BM25 indexes now (after an ingest that
        changed the campaign), so the next question does not wait for them: on a campaign of
        thousands of documents they take seconds, and every edit moves the generation."""
        cat = await self.catalog(campaign)
        p = self.params

        def build(lens: frozenset[str]) -> None:
            cat.lexical(lens)
            cat.doc_lexical(lens, k1=p.doc_k1, b=p.doc_b)

        for lens in lenses:
            await run_cpu(build, lens)

    def _build_catalog(
        self, campaign: str, gen: int, documents: Sequence[Document], rows: Sequence[Any]
    ) -> Catalog:
        docs = {d.doc_id: d for d in documents}
        passages: dict[str, PassageInfo] = {}
        by_doc: dict[str, list[str]] = {}
        # One object per distinct token and per distinct visibility, shared by every passage
        # of the snapshot: passages repeat the words of a far smaller vocabulary, and a handful
        # of visibilities. Each separate object is memory, and freeing a replaced snapshot frees
        # each one, holding the GIL. (A dict, not sys.intern: on Python 3.12 interned strings
        # are immortal, and every token ever indexed would stay.)
        shared: dict[frozenset[str], frozenset[str]] = {}
        words: dict[str, str] = {}
        for r in rows:
            toks = r.tokens.split()
            info = PassageInfo(
                passage_id=r.passage_id,
                doc_id=r.doc_id,
                ordinal=r.ordinal,
                start=r.start,
                end=r.end,
                heading=r.heading,
                visibility=shared.setdefault(r.visibility, r.visibility),
                tokens=tuple(map(words.setdefault, toks, toks)),
                prev_id=r.prev_id,
                next_id=r.next_id,
            )
            passages[info.passage_id] = info
            by_doc.setdefault(info.doc_id, []).append(info.passage_id)
        return Catalog(
            campaign=campaign,
            generation=gen,
            documents=docs,
            passages=passages,
            by_doc=by_doc,
            tokenizer=self.tokenizer,
            k1=self.k1,
            b=self.b,
        )

    async def _dense(
        self, cat: Catalog, query: str, lens: frozenset[str], p: RetrievalParams, sig: Signals
    ) -> list[str]:
        embedder = (self.embedder_for(cat.campaign) if self.embedder_for else None) or self.embedder
        assert embedder is not None
        vec = await embedder.embed_query(query)
        sig.query_vector = vec
        hits = await self.store.search(
            cat.campaign, vec, lens=lens, top_k=p.dense_top_k, visibilities=cat.visibilities
        )
        ranking: list[str] = []
        for h in hits:
            if h.score < p.dense_floor:
                continue
            if pid := _visible_row(cat, h, lens):
                ranking.append(pid)
                sig.dense.setdefault(pid, h.score)
        return dedupe_ranking(ranking)

    def _doc_lexical(
        self,
        cat: Catalog,
        lens: frozenset[str],
        p: RetrievalParams,
        lexical: Sequence[str],
        sig: Signals,
    ) -> list[str]:
        """The document-level ranking, each document stood for by its best passage (its first
        in the passage-level ``lexical`` ranking, else its first passage), so fusion stays at
        passage level and a document's arms meet on the same passage."""
        index = cat.doc_lexical(lens, k1=p.doc_k1, b=p.doc_b)
        best: dict[str, str] = {}
        for pid in lexical:
            best.setdefault(cat.passages[pid].doc_id, pid)
        ranking: list[str] = []
        for doc_id, score in index.search(sig.query_tokens, top_k=p.doc_top_k):
            found = best.get(doc_id) or cat.first_passage(doc_id)
            if found and cat.visible_passage(found, lens):
                ranking.append(found)
                sig.documents[doc_id] = score
        return ranking

    def _lexical(
        self, cat: Catalog, lens: frozenset[str], p: RetrievalParams, sig: Signals
    ) -> list[str]:
        index = cat.lexical(lens)
        sig.idf = index.idf
        sig.passage_scores = index.scores(sig.query_tokens) if sig.query_tokens else None
        ranking: list[str] = []
        for entry, score in index.search(
            sig.query_tokens, top_k=p.lexical_top_k, scores=sig.passage_scores
        ):
            pid = cat.first_passage(entry[6:]) if entry.startswith("title:") else entry
            if pid and cat.visible_passage(pid, lens):
                ranking.append(pid)
                sig.lexical.setdefault(pid, score)
        return dedupe_ranking(ranking)

    async def _candidate_dense(
        self, cat: Catalog, lens: frozenset[str], docs: Sequence[str], sig: Signals
    ) -> None:
        """Each candidate document's best cosine over all its rows (one search restricted to
        the candidates). Rows the lens may not see are filtered by the store and re-checked."""
        if sig.query_vector is None or not docs:
            return
        # Every row of the candidates (a passage has a vector and may have several windows):
        # any limit could cut off a whole document whose rows all score low, behind a few
        # multi-megabyte candidates. A restricted search is exact (scored by the store, not an
        # index), so no server search limit applies.
        hits = await self.store.search(
            cat.campaign,
            sig.query_vector,
            lens=lens,
            top_k=sys.maxsize,
            visibilities=cat.visibilities,
            doc_ids=list(docs),
        )
        wanted = set(docs)
        for h in hits:
            if (
                h.doc_id in wanted
                and h.doc_id not in sig.candidate_dense
                and _visible_row(cat, h, lens)
            ):
                sig.candidate_dense[h.doc_id] = h.score

    async def _learned(
        self,
        cat: Catalog,
        lens: frozenset[str],
        p: RetrievalParams,
        sig: Signals,
        fused_pairs: Sequence[tuple[str, float]],
        trace: Trace | None,
    ) -> tuple[list[str], dict[str, float]] | None:
        """The fused ranking with the pool's documents re-ordered by the learned ranker: each
        document's best passage in the new document order, then the pool's other passages and
        the tail in fused order; with each pool document's learned score (the rerank stage's
        prior). None when no ranker is loaded or it fails (fused order kept)."""
        collect = trace is not None and trace.collect_features
        if not fused_pairs or not (collect or (self.ranker is not None and p.learned_enabled)):
            return None
        pool = list(fused_pairs[: p.pool])
        heads: dict[str, str] = {}  # each pool document's best passage, in fused order
        for pid, _ in pool:
            heads.setdefault(cat.passages[pid].doc_id, pid)
        docs = list(heads)
        ranker = self.ranker if p.learned_enabled else None

        def score() -> tuple[np.ndarray, np.ndarray | None]:
            features = doc_features(cat, lens, sig, pool, docs)
            return features, (ranker.score(features) if ranker is not None else None)

        try:
            await self._candidate_dense(cat, lens, docs, sig)
            # Feature collection walks every candidate's tokens: milliseconds of Python a
            # question, which many questions at once would hold the event loop for.
            features, scores = await run_cpu(score)
            if trace is not None and collect:
                trace.candidates, trace.features = docs, features
            if scores is None:
                return None
        except Exception as exc:  # fail-soft: a broken model keeps the fused order, logged once
            if id(self.ranker) not in self._ranker_warned:
                self._ranker_warned.add(id(self.ranker))
                _log.warning(
                    "learned ranker %s failed (%s); keeping the fused order",
                    getattr(self.ranker, "model_id", "?"),
                    exc,
                )
            return None
        order = sorted(range(len(docs)), key=lambda i: (-float(scores[i]), i))
        lead = [heads[docs[i]] for i in order]
        chosen = set(lead)
        return lead + [pid for pid, _ in fused_pairs if pid not in chosen], {
            d: float(x) for d, x in zip(docs, scores)
        }

    async def retrieve(
        self,
        campaign: str,
        query: str,
        lens: frozenset[str],
        *,
        always: Sequence[str] = (),
        pinned: Sequence[str] = (),
        forced: Sequence[str] = (),
        params: RetrievalParams | None = None,
        trace: Trace | None = None,
        catalog: Catalog | None = None,
    ) -> Bundle:
        """Retrieve for ``lens`` from ``catalog`` (the request's snapshot; default: the current one).

        A chain of named stages over one :class:`_Request`, in the module docstring's order:
        :meth:`_recall` (pins, dense and lexical arms) → :meth:`_fuse` (weighted RRF) →
        :meth:`_rank` (learned document ranker) → :meth:`_rerank_pool` (cross-encoder) →
        :meth:`_assemble` (second wall, document order, rendering)."""
        t0 = time.perf_counter()
        cat = (
            catalog
            if catalog is not None and catalog.campaign == campaign
            else await self.catalog(campaign)
        )
        search_query = strip_mentions(query)
        request = _Request(
            campaign=campaign,
            query=query,
            lens=frozenset(lens),
            p=params or self.params,
            cat=cat,
            search_query=search_query,
            sig=Signals(query_tokens=self.tokenizer(search_query)),
            always=always,
            pinned=pinned,
            forced=forced,
            trace=trace,
            t0=t0,
        )
        recalled = await self._recall(request)
        ranking = self._fuse(request, recalled)
        await self._rank(request, ranking)
        await self._rerank_pool(request, ranking)
        return await run_cpu(self._assemble, request, recalled, ranking)

    async def _recall(self, q: _Request) -> _Recalled:
        """The arms at once: the dense arm waits on the embedder and the store while pins and
        the lexical arms run in a worker thread. The arms write to separate fields of ``sig``;
        the fusion reads them in the fixed order dense, lexical, document, so running them at
        once changes no ranking."""
        dense, (pins, lexical, documents) = await asyncio.gather(
            self._dense_arm(q), run_cpu(self._lexical_arms, q)
        )
        return _Recalled(pins=pins, dense=dense, lexical=lexical, documents=documents)

    def _lexical_arms(self, q: _Request) -> tuple[list[Pin], list[str], list[str]]:
        """Pins and the lexical arms: BM25 over the lens's index (built on first use), in a
        worker thread while the dense arm waits on the embedder and the store."""
        p, cat, lens = q.p, q.cat, q.lens
        pins = resolve_pins(
            cat,
            q.query,
            lens,
            always=q.always,
            pinned=q.pinned,
            forced=q.forced,
            named_keys=p.named_keys,
        )
        q.timings["pins"] = (time.perf_counter() - q.t0) * 1000
        lexical: list[str] = []
        documents: list[str] = []
        if p.lexical_enabled:
            t = time.perf_counter()
            lexical = self._lexical(cat, lens, p, q.sig)
            q.timings["lexical"] = (time.perf_counter() - t) * 1000
            if p.doc_lexical_enabled and p.w_doc > 0:
                t = time.perf_counter()
                documents = self._doc_lexical(cat, lens, p, lexical, q.sig)
                q.timings["doc_lexical"] = (time.perf_counter() - t) * 1000
        return pins, lexical, documents

    async def _dense_arm(self, q: _Request) -> list[str]:
        """The dense arm's passage ranking; empty when it is off or no embedder is loaded."""
        if not (q.p.dense_enabled and self.embedder is not None):
            return []
        t = time.perf_counter()
        found = await self._dense(q.cat, q.search_query, q.lens, q.p, q.sig)
        q.timings["dense"] = (time.perf_counter() - t) * 1000
        return found

    def _fuse(self, q: _Request, recalled: _Recalled) -> _Ranking:
        """Weighted RRF over the arms that ran: ``score(d) = Σ_i w_i / (rrf_k + rank_i(d))``
        (:func:`~liminalis.retrieval.fusion.rrf`), arms in the fixed order dense, lexical,
        document."""
        p = q.p
        rankings: list[list[str]] = []
        weights: list[float] = []
        if p.dense_enabled and self.embedder is not None:
            rankings.append(recalled.dense)
            weights.append(p.w_dense)
        if p.lexical_enabled:
            rankings.append(recalled.lexical)
            weights.append(p.w_lexical)
            if p.doc_lexical_enabled and p.w_doc > 0:
                rankings.append(recalled.documents)
                weights.append(p.w_doc)
        t = time.perf_counter()
        fused_pairs = rrf(*rankings, rrf_k=p.rrf_k, weights=weights) if rankings else []
        fused = [pid for pid, _ in fused_pairs]
        q.timings["fusion"] = (time.perf_counter() - t) * 1000
        return _Ranking(
            fused_pairs=fused_pairs, fused_scores=dict(fused_pairs), fused_order=fused, fused=fused
        )

    async def _rank(self, q: _Request, ranking: _Ranking) -> None:
        """The pool's documents re-ordered by the learned ranker, when one runs
        (:meth:`_learned`); its scores become the rerank stage's prior."""
        t = time.perf_counter()
        learned = await self._learned(q.cat, q.lens, q.p, q.sig, ranking.fused_pairs, q.trace)
        if learned is not None:
            ranking.learned = True
            ranking.fused, ranking.doc_scores = learned
            if q.trace is not None:
                q.trace.learned_scores = ranking.doc_scores
            q.timings["learned"] = (time.perf_counter() - t) * 1000

    async def _rerank_pool(self, q: _Request, ranking: _Ranking) -> None:
        """The pool (the first ``p.pool`` passages), its head re-scored by the cross-encoder
        when one is loaded and enabled (:meth:`_rerank`)."""
        p, cat = q.p, q.cat
        ranking.pool = [
            Hit(pid, cat.passages[pid].doc_id, ranking.fused_scores[pid])
            for pid in ranking.fused[: p.pool]
        ]
        pool = ranking.pool
        if not (p.rerank_enabled and self.reranker is not None and pool):
            return
        t = time.perf_counter()
        head, rest = pool[: p.rerank_depth], pool[p.rerank_depth :]
        texts = [cat.passage_text(h.passage_id) for h in head]
        # The prior: the learned ranker's score of each candidate's document, when it ran.
        prior = None
        doc_scores = ranking.doc_scores
        if doc_scores:
            floor = min(doc_scores.values()) - 1.0  # (every pool document has a score)
            prior = [doc_scores.get(h.doc_id, floor) for h in head]
        head, ranking.reranked, ranking.busy = await self._rerank(
            q.search_query, head, texts, p, prior
        )
        ranking.pool = head + rest
        q.timings["rerank"] = (time.perf_counter() - t) * 1000

    def _assemble(self, q: _Request, recalled: _Recalled, ranking: _Ranking) -> Bundle:
        """The lens re-check, the document order and the rendering of each document's
        spans: string work over whole documents, in a worker thread."""
        p, cat, lens = q.p, q.cat, q.lens
        tail = [
            Hit(pid, cat.passages[pid].doc_id, ranking.fused_scores[pid])
            for pid in ranking.fused[p.pool :]
        ]
        # Second wall: re-check every hit and pin against the lens before rendering.
        ranked_hits = [h for h in ranking.pool + tail if cat.visible_passage(h.passage_id, lens)]
        shown = [pin for pin in recalled.pins if cat.visible_doc(pin.doc_id, lens)]
        t = time.perf_counter()
        layout = _lay_out(p, ranked_hits, shown)
        rendered = _render_layout(cat, layout, p, q.sig.query_tokens)
        q.timings["render"] = (time.perf_counter() - t) * 1000
        non_always = [pin.doc_id for pin in shown if pin.reason != "always"]
        ranked_docs = dedupe_ranking(non_always + [h.doc_id for h in ranked_hits])
        if q.trace is not None:
            _fill_trace(q.trace, cat, recalled, ranking, shown, rendered)
        notes = []
        if p.rerank_enabled and self.reranker is not None and not ranking.reranked:
            notes.append(RERANK_BUSY_NOTE if ranking.busy else RERANK_FAILED_NOTE)
        # The arms ran at once and wrote their timings as they finished: list them in stage order.
        ordered = {k: q.timings[k] for k in _STAGES if k in q.timings}
        return Bundle(
            campaign=q.campaign,
            query=q.query,
            lens=lens,
            hits=_bundle_hits(cat, layout, shown),
            documents=tuple(rendered),
            ranked_doc_ids=tuple(ranked_docs),
            timings_ms=ordered,
            notes=tuple(notes),
        )

    async def _rerank(
        self,
        query: str,
        head: list[Hit],
        texts: list[str],
        p: RetrievalParams,
        prior: list[float] | None,
    ) -> tuple[list[Hit], bool, bool]:
        """``rerank_hits`` in turn: ``(hits, reranked, busy)``, ``busy`` when the wait for the
        reranker's turn ran past ``p.rerank_wait_s`` (the fused order is kept, said in notes).

        A turn ends when the model's worker is done, not when this question stops waiting for
        it: a scoring call past ``rerank_timeout_s`` still occupies the worker, and the next
        question's call would only queue behind it there, its own timeout running."""
        reranker = self.reranker
        assert reranker is not None
        try:
            async with asyncio.timeout(p.rerank_wait_s):
                await self._rerank_turns.acquire()
        except TimeoutError:
            _log.info(
                "reranker busy for %.0f s: fused order kept for one question", p.rerank_wait_s
            )
            return head, False, True
        started = False

        def score(q: str, passages: list[str]) -> Awaitable[list[float]]:
            nonlocal started
            task = asyncio.ensure_future(reranker.score(q, passages))
            task.add_done_callback(self._end_turn)
            started = True
            return asyncio.shield(task)

        try:
            hits, reranked = await rerank_hits(
                reranker,
                query,
                head,
                texts,
                timeout_s=p.rerank_timeout_s,
                mix=p.rerank_mix,
                prior=prior,
                score=score,
            )
        finally:
            if not started:
                self._rerank_turns.release()
        return hits, reranked, False

    def _end_turn(self, task: asyncio.Future[list[float]]) -> None:
        self._rerank_turns.release()
        if not task.cancelled():
            task.exception()  # retrieved: rerank_hits logged it, or timed out before it came
