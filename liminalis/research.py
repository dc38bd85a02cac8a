"""The engine's inside, opened for the bench's research harnesses, in one place.

Why a module: sweeps, training-data dumps and cost probes need what no user-facing call should
offer (the catalog snapshot with every passage's text, the dense arm alone, retrieval without
pins, every stored vector). Reaching into ``engine.retriever`` from ``bench/`` spread that
knowledge over a dozen scripts, so a change inside the engine broke them one by one; here it is
one seam, typed, and ``tests/test_imports.py`` keeps ``bench/`` and ``bot/`` off the engine's
attributes. Nothing in the product calls this module.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from liminalis.campaign import validate_slug
from liminalis.engine import Engine
from liminalis.ports import VectorHit
from liminalis.retrieval.catalog import Catalog
from liminalis.retrieval.learned import Signals
from liminalis.retrieval.retriever import RetrievalParams, Trace
from liminalis.types import Bundle

__all__ = [
    "catalog",
    "dense_ranking",
    "retrieve_unpinned",
    "stored_vectors",
    "vector_search",
]


async def catalog(engine: Engine, slug: str) -> Catalog:
    """The campaign's current snapshot: documents, passages and their texts, every lens's."""
    return await engine.retriever.catalog(validate_slug(slug))


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
