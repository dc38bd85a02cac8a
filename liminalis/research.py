"""The engine's inside, opened for the bench's research harnesses, in one place.

Why a module: sweeps, training-data dumps and cost probes need what no user-facing call should
offer (the catalog snapshot with every passage's text, the dense arm alone, retrieval without
pins, every stored vector). Reaching into ``engine.retriever`` from ``bench/`` spread that
knowledge over a dozen scripts, so a change inside the engine broke them one by one; here it is
one seam, typed, and ``tests/test_imports.py`` keeps ``bench/`` and ``bot/`` off the engine's
attributes. Nothing in the product calls this module.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from liminalis.campaign import validate_slug
from liminalis.engine import Engine
from liminalis.ports import VectorHit
from liminalis.retrieval.catalog import Catalog
from liminalis.retrieval.learned import Signals
from liminalis.retrieval.retriever import RetrievalParams, Trace
from liminalis.types import Bundle
from liminalis.workers import run_cpu

__all__ = [
    "snapshot_timings",
    "catalog",
    "dense_ranking",
    "retrieve_unpinned",
    "stored_vectors",
    "vector_search",
]


async def catalog(engine: Engine, slug: str) -> Catalog:
    """The campaign's current snapshot: documents, passages and their texts, every lens's."""
    return await engine.retriever.catalog(validate_slug(slug))


async def snapshot_timings(engine: Engine, slug: str, lens: Iterable[str]) -> dict[str, float]:
    """Seconds to build the campaign's snapshot afresh (rows read from SQLite, then the
    catalog) and ``lens``'s two BM25 indexes over it: what a question after an edit waits for
    when no background rebuild has run. Nothing is cached by this call."""
    slug = validate_slug(slug)
    retriever = engine.retriever
    t0 = time.perf_counter()
    gen = await engine.db.campaigns.generation(slug)
    documents = await engine.db.documents.all(slug)
    rows = await engine.db.documents.passages(slug)
    t1 = time.perf_counter()
    cat = await run_cpu(retriever._build_catalog, slug, gen, documents, rows)
    t2 = time.perf_counter()
    lens_set = frozenset(lens)
    p = retriever.params
    await run_cpu(lambda: cat.lexical(lens_set))
    t3 = time.perf_counter()
    await run_cpu(lambda: cat.doc_lexical(lens_set, k1=p.doc_k1, b=p.doc_b))
    t4 = time.perf_counter()
    return {
        "read_s": t1 - t0,
        "catalog_s": t2 - t1,
        "bm25_passages_s": t3 - t2,
        "bm25_documents_s": t4 - t3,
    }


async def dense_ranking(
    engine: Engine, slug: str, query: str, lens: Iterable[str], params: RetrievalParams
) -> list[str]:
    """The dense arm alone: passage ids by vector similarity, through ``lens``'s filter."""
    cat = await catalog(engine, slug)
    return await engine.retriever._dense(cat, query, frozenset(lens), params, Signals())


async def retrieve_unpinned(
    engine: Engine, slug: str, query: str, lens: Iterable[str], *, trace: Trace | None = None
) -> Bundle:
    """Retrieval as the ranker sees it: no campaign pins or always-included documents, no
    campaign memory, the engine's default parameters."""
    return await engine.retriever.retrieve(validate_slug(slug), query, frozenset(lens), trace=trace)


async def stored_vectors(engine: Engine, slug: str) -> list[tuple[str, np.ndarray]]:
    """Every passage vector the vector store holds for the campaign, as ``(doc_id, vector)``."""
    read = getattr(engine.store, "all_vectors", None)
    if read is None:
        raise TypeError(f"{type(engine.store).__name__} cannot list its vectors")
    rows: list[tuple[str, np.ndarray]] = await read(validate_slug(slug))
    return rows


async def vector_search(
    engine: Engine, slug: str, vector: np.ndarray, lens: Iterable[str], *, top_k: int
) -> list[VectorHit]:
    """One search of the campaign's serving collection, as the dense arm makes it (its lens
    filter and the catalog's visibility sets): what the vector store alone costs a question."""
    cat = await catalog(engine, slug)
    return await engine.store.search(
        cat.campaign, vector, lens=frozenset(lens), top_k=top_k, visibilities=cat.visibilities
    )
