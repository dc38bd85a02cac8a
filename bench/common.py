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
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from liminalis.campaign import CampaignConfig
from liminalis.engine import Engine
from liminalis.ingest.indexer import IngestOptions
from liminalis.ports import Embedder, Reranker
from liminalis.store.sqlite import Database
from liminalis.text import clean_text

__all__ = [
    "unique_label",
    "BenchSet",
    "load_set",
    "bench_engine",
    "doc_metrics",
    "detail_hit",
    "percentile",
    "CACHE_DIR",
    "mean",
]

CACHE_DIR = Path(__file__).resolve().parent / ".cache"


def add_embedder_arg(ap: Any) -> None:
    """``--embedder``, as every bench reads it (default: what the product uses)."""
    ap.add_argument(
        "--embedder",
        default="auto",
        help="auto (as the product: models/embedder, else the bundled MiniLM), or a sentence-transformers name/path",
    )


_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class BenchSet:
    name: str
    root: Path
    corpus: Path
    queries: list[dict[str, Any]] = field(default_factory=list)


def load_set(path: Path | str, *, limit: int | None = None) -> BenchSet:
    """A set in shared/bench/README.md's format. Forgiving where a new set may differ: a UTF-8
    byte-order mark, ``relevant`` / ``answers`` / ``passages`` given as one string rather than a
    list, ids that are numbers. Relevant ids with no document in ``corpus/`` are counted and
    reported (each is a miss no system can avoid), never silently dropped."""
    root = Path(path).resolve()
    corpus = root / "corpus"
    if not corpus.is_dir() or not (root / "queries.jsonl").exists():
        raise SystemExit(f"{root}: expected corpus/ and queries.jsonl")
    queries = []
    for n, line in enumerate(
        (root / "queries.jsonl").read_text(encoding="utf-8-sig").splitlines(), 1
    ):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{root / 'queries.jsonl'}:{n}: not JSON ({exc.msg})") from None
        queries.append(_normalise_query(q))
    if limit:
        queries = queries[:limit]
    ids = {
        f.relative_to(corpus).with_suffix("").as_posix() for f in corpus.rglob("*") if f.is_file()
    }
    missing = sum(d not in ids for q in queries for d in q["relevant"])
    if missing:
        print(
            f"[{root.name}] {missing} relevant ids name no file in corpus/ (counted as misses)",
            file=sys.stderr,
        )
    return BenchSet(name=root.name, root=root, corpus=corpus, queries=queries)


def unique_label(bench: BenchSet, taken: Any) -> str:
    """The set's name in a results table, with its parent folder's when the name is taken
    (``fqa/test`` and ``crd3/test`` must not overwrite each other's rows)."""
    if bench.name not in taken:
        return bench.name
    label = f"{bench.root.parent.name}/{bench.name}"
    n = 2
    while label in taken:
        label, n = f"{bench.root.parent.name}/{bench.name}#{n}", n + 1
    return label


def _normalise_query(q: dict[str, Any]) -> dict[str, Any]:
    def strings(value: Any) -> list[str]:
        if value is None:
            return []
        items = value if isinstance(value, list) else [value]
        return [str(v) for v in items if str(v).strip()]

    return {
        **q,
        "query": str(q.get("query") or ""),
        "relevant": strings(q.get("relevant")),
        "answers": strings(q.get("answers")),
        "passages": strings(q.get("passages")),
    }


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
            db=db,
            store=MilvusVectorStore(str(data / f"milvus-{variant}.db")),
            embedder=embedder,
            reranker=reranker,
            campaigns_dir=data / "none",
            ingest_options=IngestOptions(contextual=contextual),
            **engine_kw,
        )
        config = CampaignConfig(
            slug=slug, name=bench.name, root=bench.corpus, gm_paths=(), always_include=()
        )
        await engine.register(config)
        report = await engine.ingest(config)
        if report.skipped:  # a skipped relevant document is a miss: say so
            print(
                f"[{bench.name}] {len(report.skipped)} corpus files not ingested: "
                + "; ".join(f"{s.path} ({s.reason})" for s in report.skipped[:5]),
                file=sys.stderr,
            )
        try:
            yield engine, slug
        finally:
            await engine.close(models=False)


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
    """As the product reads text (NFC, no control characters: liminalis.text.clean_text), one
    space for any run of white space, lower case."""
    return _WS.sub(" ", clean_text(text)).strip().lower()


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
