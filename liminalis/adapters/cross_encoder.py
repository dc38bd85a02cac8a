"""``Reranker`` backed by a sentence-transformers ``CrossEncoder``.

Loads any CrossEncoder name or local path (the project's trained model under ``models/``, or
``cross-encoder/ms-marco-MiniLM-L6-v2`` on a host with hub access). Scoring runs on one worker
thread. A model that fails to load raises on first use; the rerank stage turns that into the
fused order (fail-soft) and logs once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["CrossEncoderReranker"]

_log = logging.getLogger(__name__)


class CrossEncoderReranker:
    def __init__(self, model: str, *, max_length: int = 256, batch_size: int = 32, quantize: bool = False) -> None:
        self._name = model
        self._max_length = max_length
        self._batch_size = batch_size
        self._quantize = quantize
        self._model: Any = None
        self._failed: Exception | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rerank")

    @property
    def model_id(self) -> str:
        return self._name

    def load(self) -> None:
        if self._model is not None:
            return
        if self._failed is not None:
            raise self._failed
        try:
            from sentence_transformers import CrossEncoder

            model = CrossEncoder(self._name, max_length=self._max_length, device="cpu")
            if self._quantize:
                import torch

                model.model = torch.quantization.quantize_dynamic(model.model, {torch.nn.Linear}, dtype=torch.qint8)
            self._model = model
        except Exception as exc:
            self._failed = exc
            raise

    def _score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.load()
        scores = self._model.predict([(query, p) for p in passages], batch_size=self._batch_size, show_progress_bar=False)
        return [float(s) for s in scores]

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._score, query, list(passages))
