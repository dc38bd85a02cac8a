"""The one place tests reach into an Engine's insides (its store, retriever and indexer).

Tests read what the facade does not show (rows, the catalogue, the index profile) to check what
it did; going through these accessors means a refactor of the engine's parts (a renamed
attribute, a sub-facade) changes this file, not a hundred tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from liminalis.engine import Engine
from liminalis.ingest.indexer import Indexer
from liminalis.retrieval.catalog import Catalog
from liminalis.retrieval.retriever import Retriever
from liminalis.store.sqlite import Database

__all__ = ["catalog", "db", "indexer", "profile", "retriever", "rows"]


def db(engine: Engine) -> Database:
    """The store the engine was built over."""
    return engine.db


def retriever(engine: Engine) -> Retriever:
    """The engine's retriever (its params, its vector store, its catalogue)."""
    return engine.retriever


def indexer(engine: Engine) -> Indexer:
    """The engine's indexer (its options, tokenizer and profile)."""
    return engine.indexer


async def catalog(engine: Engine, slug: str) -> Catalog:
    """The campaign's catalogue as retrieval sees it (every view, every visibility)."""
    return await engine.retriever.catalog(slug)


def profile(engine: Engine) -> str:
    """What the index was built with (chunking, models): equal before and after a no-op."""
    return engine.indexer.profile()


async def rows(engine: Engine, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """Rows of a query on the engine's store (tests may read the database directly)."""
    return await engine.db.fetchall(sql, params)
