"""The seams of the engine, as structural ``typing.Protocol`` types.

Implementations are named after their technology (``SentenceTransformerEmbedder``,
``MilvusVectorStore``, ``CrossEncoderReranker``, ``AnthropicModel``) and live in
``liminalis/adapters/``; small real fakes for tests live in ``liminalis/testing.py``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from liminalis.types import Document

__all__ = [
    "Embedder",
    "Reranker",
    "VectorRecord",
    "VectorHit",
    "VectorStore",
    "LexicalIndex",
    "Message",
    "Completion",
    "Usage",
    "LanguageModel",
    "Clock",
    "Heap",
    "BaseLevelModel",
    "EntitySource",
]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised vectors. ``model_id`` names the weights exactly."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...

    async def embed_query(self, text: str) -> np.ndarray: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs; higher is more relevant."""

    @property
    def model_id(self) -> str: ...

    async def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True, slots=True)
class VectorRecord:
    id: str
    passage_id: str
    doc_id: str
    kind: str  # "passage" | "window" | "title"
    visibility: frozenset[str]
    vector: np.ndarray


@dataclass(frozen=True, slots=True)
class VectorHit:
    id: str
    passage_id: str
    doc_id: str
    kind: str
    score: float


class VectorStore(Protocol):
    """A per-campaign vector collection. Every search filters by lens inside the store."""

    async def ensure(self, campaign: str, *, dim: int, model_id: str) -> bool:
        """Create or open the campaign's collection; ``True`` when it was created empty."""
        ...

    async def upsert(self, campaign: str, records: Sequence[VectorRecord]) -> None: ...

    async def delete(self, campaign: str, ids: Sequence[str]) -> None: ...

    async def ids(self, campaign: str) -> set[str]: ...

    async def count(self, campaign: str) -> int:
        """Rows the campaign's collection holds, exactly, without reading them: the tick checks
        it against SQLite instead of reading every id of a large campaign."""
        ...

    async def search(
        self,
        campaign: str,
        vector: np.ndarray,
        *,
        lens: frozenset[str],
        top_k: int,
        visibilities: Iterable[frozenset[str]] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        """Nearest rows ``lens`` may see. ``visibilities`` (the campaign's distinct document
        visibility sets) lets a store filter on a scalar key instead of the array field;
        ``doc_ids`` restricts the search to those documents' rows, and makes it exact."""
        ...

    async def flush(self, campaign: str) -> None: ...

    async def invalidate(self, campaign: str) -> None:
        """Forget anything cached about the campaign's rows: another process changed them (the
        engine calls this when the campaign's SQLite generation moved)."""
        ...

    async def drop(self, campaign: str) -> None: ...

    async def close(self) -> None: ...


class LexicalIndex(Protocol):
    """A per-campaign lexical index over passages and title entries."""

    def search(
        self, query: str, *, allowed: set[str] | None, top_k: int
    ) -> list[tuple[str, float]]: ...


@dataclass(frozen=True, slots=True)
class Message:
    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = ""


class LanguageModel(Protocol):
    """A chat model. ``system`` is a list of blocks; the first ``cache_upto`` form the stable half.

    ``role`` names the job (``reply``, ``summarize``, … see :mod:`liminalis.routing.roles`);
    ``model``, when given, is the model to use, overriding the one the role would pick (the
    router resolves roles and per-chat overrides; a bare model uses its own table)."""

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> Completion: ...

    def stream(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> AsyncIterator[str]: ...


class Clock(Protocol):
    def now(self) -> dt.datetime: ...


class Heap(Protocol):
    """The process's garbage-collection policy, told when long-lived objects are about to be
    rebuilt and when they have settled (a campaign's snapshot and indexes): :mod:`liminalis.heap`."""

    def prepare(self) -> None: ...

    def settle(self) -> None: ...


class BaseLevelModel(Protocol):
    """A chunk's base-level activation ``B = ln Σ_j t_j^(−d)`` from an opaque state of floats
    (:mod:`liminalis.memory.activation`: the exact event log, the O(1) leaky integrator)."""

    name: str

    def empty(self) -> tuple[float, ...]: ...

    def record(
        self, state: Sequence[float], t: float, *, weight: float = 1.0
    ) -> tuple[float, ...]: ...

    def value(self, state: Sequence[float], t: float, d: float) -> float: ...


class EntitySource(Protocol):
    """Entities of a campaign for the memory graph (:mod:`liminalis.memory.entities`)."""

    def vocabulary(self, docs: Iterable[Document]) -> dict[str, str]:
        """Every entity key with its type."""
        ...

    def defined(self, doc: Document) -> list[tuple[str, str]]:
        """``(key, type)`` of the entities ``doc`` defines or belongs to."""
        ...

    def mentions(self, text: str, vocabulary: dict[str, str]) -> list[str]: ...

    def named_in_question(self, question: str, vocabulary: dict[str, str]) -> list[str]: ...
