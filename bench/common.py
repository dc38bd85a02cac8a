"""Shared bench plumbing: read a bench folder, ingest it into a cached campaign, score queries.

A bench folder holds ``corpus/<doc_id>.md`` (``# title`` first line) and ``queries.jsonl``
(shared/bench/README.md). Each (folder, variant) becomes a campaign in a persistent cache
under ``bench/.cache/`` so re-runs reuse embeddings and skip unchanged ingest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from liminalis.campaign import CampaignConfig
from liminalis.engine import Engine
from liminalis.ingest.indexer import IngestOptions
from liminalis.ports import Embedder, Reranker
from liminalis.store.sqlite import Database

__all__ = ["BenchSet", "load_set", "bench_engine", "doc_metrics", "detail_hit", "percentile", "CACHE_DIR", "mean"]

CACHE_DIR = Path(__file__).resolve().parent / ".cache"


def add_embedder_arg(ap: Any) -> None:
    """``--embedder``, as every bench reads it (default: what the product uses)."""
    ap.add_argument("--embedder", default="auto",
                    help="auto (as the product: models/embedder, else the bundled MiniLM), or a sentence-transformers name/path")
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class BenchSet:
    name: str
    root: Path
    corpus: Path
    queries: list[dict[str, Any]] = field(default_factory=list)


def load_set(path: Path | str, *, limit: int | None = None) -> BenchSet:
    root = Path(path).resolve()
    corpus = root / "corpus"
    if not corpus.is_dir() or not (root / "queries.jsonl").exists():
        raise SystemExit(f"{root}: expected corpus/ and queries.jsonl")
    queries = [json.loads(line) for line in (root / "queries.jsonl").read_text().splitlines() if line.strip()]
    if limit:
        queries = queries[:limit]
    return BenchSet(name=root.name, root=root, corpus=corpus, queries=queries)


def _slug(name: str, variant: str) -> str:
    base = re.sub(r"[^a-z0-9_]", "_", name.lower())[:30]
    tag = hashlib.blake2b(f"{name}\x1f{variant}".encode(), digest_size=3).hexdigest()
    return f"b_{base}_{variant}_{tag}"[:60]


@contextlib.asynccontextmanager
async def bench_engine(
    bench: BenchSet,
    *,
    embedder: Embedder,
    contextual: bool = True,
    reranker: Reranker | None = None,
    cache_dir: Path = CACHE_DIR,
    progress: bool = True,
    **engine_kw: Any,
) -> AsyncIterator[tuple[Engine, str]]:
    """An engine with ``bench`` ingested as a campaign (cached across runs)."""
    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    key = hashlib.blake2b(str(bench.corpus).encode(), digest_size=4).hexdigest()
    data = cache_dir / f"{bench.name}-{key}"
    data.mkdir(parents=True, exist_ok=True)
    from liminalis.adapters.milvus import MilvusVectorStore

    variant = "ctx" if contextual else "plain"
    slug = _slug(bench.name, variant)
    async with Database(data / "bench.sqlite3") as db:
        engine = Engine(
            db=db, store=MilvusVectorStore(str(data / f"milvus-{variant}.db")), embedder=embedder, reranker=reranker,
            campaigns_dir=data / "none", ingest_options=IngestOptions(contextual=contextual, progress=progress),
            **engine_kw,
        )
        config = CampaignConfig(slug=slug, name=bench.name, root=bench.corpus, gm_paths=(), always_include=())
        await engine.register(config)
        await engine.indexer.ingest(config)
        try:
            yield engine, slug
        finally:
            await engine.store.close()


def doc_metrics(ranked: Sequence[str], relevant: Sequence[str]) -> dict[str, float]:
    rel = set(relevant)
    first = next((i + 1 for i, d in enumerate(ranked) if d in rel), None)
    return {
        "recall@5": len(rel & set(ranked[:5])) / len(rel) if rel else 0.0,
        "recall@10": len(rel & set(ranked[:10])) / len(rel) if rel else 0.0,
        "hit@1": float(first == 1),
        "hit@10": float(first is not None and first <= 10),
        "mrr": 1.0 / first if first else 0.0,
    }


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip().lower()


def answerable(query: dict[str, Any]) -> bool:
    if query.get("answers") and query.get("answer_in_passage"):
        return True
    return not query.get("answers") and bool(query.get("passages"))


def detail_hit(query: dict[str, Any], context: str) -> bool:
    """Did the answer string (or, without one, most of the evidence) survive into ``context``?"""
    ctx = _norm(context)
    if query.get("answers") and query.get("answer_in_passage"):
        return any(_norm(a) in ctx for a in query["answers"] if a.strip())
    ev = [_norm(p) for p in query.get("passages", []) if p.strip()]
    if not ev:
        return False
    return sum(p in ctx for p in ev) >= max(1, (len(ev) + 1) // 2)


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * (len(s) - 1)))))
    return s[k]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
