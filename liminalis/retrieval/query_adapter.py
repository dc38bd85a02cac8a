"""A learned linear map on query vectors: the dense arm adapted to campaign questions.

Why the query side only: the bundled embedder was trained on web pairs, and on narrative text
it loses badly to BM25. Fine-tuning the whole bi-encoder is the stronger lever, but it needs a
GPU to train (about 30 s a step on 2 CPU cores) and it changes every passage vector, so every
campaign must be re-embedded. A matrix ``W`` applied to the query vector, ``q' = norm(q W)``,
trains in about a minute on a CPU against the passage vectors already stored, and it leaves
those vectors, the collection and the embedding cache exactly as they are: the embedder's
``model_id`` does not change, so nothing is re-embedded and no collection ever mixes vectors.

The adapter records the embedder ``model_id`` it was fit against; with any other embedder it
is not applied (a log line says so once), because a map learned for one vector space means
nothing in another. Trained by ``bench/train_query_adapter.py``; numpy only at run time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from liminalis.ports import Embedder

__all__ = ["QueryAdapter", "AdaptedEmbedder", "ADAPTER_FILE", "load_query_adapter", "adapt"]

_log = logging.getLogger(__name__)
ADAPTER_FILE = "query_adapter.npz"


@dataclass(frozen=True, eq=False)
class QueryAdapter:
    """``q' = normalize(q @ matrix)``, fit for the embedder named ``base_model``."""

    matrix: np.ndarray
    base_model: str

    def __post_init__(self) -> None:
        m = self.matrix
        if m.ndim != 2 or m.shape[0] != m.shape[1] or not np.isfinite(m).all():
            raise ValueError(f"a query adapter is a finite square matrix, not {m.shape}")
        # float32 once here, not a 384x384 copy on every query
        object.__setattr__(self, "matrix", np.ascontiguousarray(m, dtype=np.float32))

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[0])

    def apply(self, vec: np.ndarray) -> np.ndarray:
        out = np.asarray(vec, dtype=np.float32) @ self.matrix
        norm = float(np.linalg.norm(out))
        result: np.ndarray = (out / norm if norm > 0 else out).astype(np.float32)
        return result

    def save(self, path: str | Path, **meta: object) -> Path:
        p = Path(path)
        if p.suffix != ".npz":
            p.mkdir(parents=True, exist_ok=True)
            p = p / ADAPTER_FILE
        info = json.dumps({"base_model": self.base_model, **meta}, sort_keys=True, default=str)
        np.savez_compressed(p, matrix=self.matrix, meta=np.asarray(info))
        return p

    @classmethod
    def load(cls, path: str | Path) -> QueryAdapter:
        p = Path(path)
        if p.is_dir():
            p = p / ADAPTER_FILE
        with np.load(p, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            return cls(matrix=np.array(z["matrix"]), base_model=str(meta["base_model"]))


def load_query_adapter(path: str | Path | None) -> QueryAdapter | None:
    """The adapter at ``path`` (a folder or an .npz), or ``None`` with one log line when it is
    missing or unreadable: the dense arm then uses the plain query vector."""
    if path is None:
        return None
    try:
        return QueryAdapter.load(path)
    except FileNotFoundError:
        _log.info("no query adapter at %s: plain query vectors", path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _log.warning("query adapter %s unreadable (%s): plain query vectors", path, exc)
    return None


class AdaptedEmbedder:
    """An :class:`Embedder` whose query vectors go through a :class:`QueryAdapter`; passages,
    ``model_id`` and ``dim`` are the inner embedder's, so stored vectors stay valid."""

    def __init__(self, inner: Embedder, adapter: QueryAdapter) -> None:
        self.inner = inner
        self.adapter = adapter

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        return self.adapter.apply(await self.inner.embed_query(text))

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


def adapt(embedder: Embedder, adapter: QueryAdapter | None) -> Embedder:
    """``embedder`` with ``adapter`` on its queries, when the adapter was fit for it."""
    if adapter is None:
        return embedder
    if adapter.base_model != embedder.model_id:
        _log.warning(
            "query adapter fit for %s, not %s: plain query vectors",
            adapter.base_model,
            embedder.model_id,
        )
        return embedder
    return AdaptedEmbedder(embedder, adapter)
