"""Retrieval benchmark: the ladder of configurations on any bench folder.

    python -m bench.retrieval DIR [DIR ...] [--config NAME ...] [--out results.json] [--limit N]

Rungs: ``bm25`` (the passage-level lexical arm alone), ``lexical`` (passage + document-level
lexical arms), ``dense``, ``dense+contextual``, ``hybrid``, ``hybrid+contextual``,
``learned`` (hybrid + contextual + the learned document ranker), ``hybrid+rerank``, ``full``
(hybrid + contextual + learned ranker + cross-encoder rerank). A rung may carry overrides of
:class:`~liminalis.retrieval.retriever.RetrievalParams`, e.g.
``hybrid+contextual:rrf_k=20,w_dense=0.4``. Rerank rungs are skipped with a clear line when no
reranker is configured (``--reranker PATH`` or the shipped model), the ``learned`` rung when no
learned ranker is (``--ranker PATH`` or the shipped ``models/ranker``).

Metrics are document-level over the de-duplicated ranked documents (always-include pins
excluded), with rendered tokens (the project's one token counter), context detail recall and
query latency (p50/p95 ms, ingest excluded).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import (
    BenchSet,
    add_embedder_arg,
    answerable,
    bench_engine,
    detail_hit,
    doc_metrics,
    load_set,
    mean,
    percentile,
    unique_label,
)
from liminalis.context.tokens import count_tokens
from liminalis.errors import LiminalisError
from liminalis.retrieval.retriever import RetrievalParams

__all__ = ["LADDER", "parse_config", "run", "main"]

LADDER = [
    "bm25",
    "lexical",
    "dense",
    "dense+contextual",
    "hybrid",
    "hybrid+contextual",
    "learned",
    "hybrid+rerank",
    "full",
]
COLUMNS = [
    "recall@5",
    "recall@10",
    "hit@1",
    "hit@10",
    "mrr",
    "tokens",
    "detail_recall",
    "p50_ms",
    "p95_ms",
]


def parse_config(spec: str) -> tuple[str, bool, bool, dict[str, Any]]:
    """``name[:k=v,...]`` → (name, contextual, rerank, RetrievalParams overrides)."""
    name, _, over = spec.partition(":")
    base = {
        "bm25": (
            False,
            dict(
                dense_enabled=False,
                lexical_enabled=True,
                doc_lexical_enabled=False,
                rerank_enabled=False,
                learned_enabled=False,
            ),
        ),
        "lexical": (
            False,
            dict(
                dense_enabled=False,
                lexical_enabled=True,
                rerank_enabled=False,
                learned_enabled=False,
            ),
        ),
        "dense": (
            False,
            dict(
                dense_enabled=True,
                lexical_enabled=False,
                rerank_enabled=False,
                learned_enabled=False,
            ),
        ),
        "dense+contextual": (
            True,
            dict(
                dense_enabled=True,
                lexical_enabled=False,
                rerank_enabled=False,
                learned_enabled=False,
            ),
        ),
        "hybrid": (False, dict(rerank_enabled=False, learned_enabled=False)),
        "hybrid+contextual": (True, dict(rerank_enabled=False, learned_enabled=False)),
        "learned": (True, dict(rerank_enabled=False, learned_enabled=True)),
        "hybrid+rerank": (False, dict(rerank_enabled=True, learned_enabled=False)),
        "full": (True, dict(rerank_enabled=True, learned_enabled=True)),
    }
    if name not in base:
        raise SystemExit(f"unknown config {name!r}; choose from {', '.join(LADDER)}")
    contextual, params = base[name]
    fields = {f.name: f.type for f in dataclasses.fields(RetrievalParams)}
    for item in filter(None, over.split(",")):
        k, _, v = item.partition("=")
        if k not in fields:
            raise SystemExit(f"unknown parameter {k!r}")
        if v.lower() == "none" and "None" in str(fields[k]):
            params[k] = None
        else:
            params[k] = (
                (v.lower() in {"1", "true", "yes"})
                if fields[k] == "bool"
                else (int(v) if fields[k] == "int" else float(v))
            )
    return name, contextual, bool(params.get("rerank_enabled")), params


async def _run_config(
    engine: Any, slug: str, bench: BenchSet, params: RetrievalParams, progress: bool
) -> dict[str, float]:
    rows: list[dict[str, float]] = []
    tokens: list[int] = []
    details: list[float] = []
    lat: list[float] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(bench.queries), desc="queries", unit="q", file=sys.stderr, leave=False)
    refused = 0
    for q in bench.queries:
        t = time.perf_counter()
        try:
            bundle = await engine.retrieve(slug, q["query"], frozenset({"players"}), params=params)
        except LiminalisError:  # an empty or over-long query: the product refuses it; a miss here
            refused += 1
            rows.append(doc_metrics([], q["relevant"]))
            if answerable(q):
                details.append(0.0)
            continue
        lat.append((time.perf_counter() - t) * 1000)
        rows.append(doc_metrics(bundle.ranked_doc_ids, q["relevant"]))
        text = bundle.text
        tokens.append(count_tokens(text))
        if answerable(q):
            details.append(float(detail_hit(q, text)))
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    if refused:
        print(
            f"[{bench.name}] {refused} queries refused by the engine (empty or too long): counted as misses",
            file=sys.stderr,
        )
    out = {k: mean([r[k] for r in rows]) for k in rows[0]} if rows else {}
    out.update(
        tokens=mean(tokens),
        detail_recall=mean(details),
        p50_ms=percentile(lat, 50),
        p95_ms=percentile(lat, 95),
    )
    return out


async def run(
    dirs: list[Path],
    configs: list[str],
    *,
    limit: int | None = None,
    reranker_spec: str = "auto",
    ranker_spec: str = "auto",
    progress: bool = True,
    embedder: Any = None,
    cache_dir: Path | None = None,
    reranker_int8: bool = False,
    query_adapter_spec: str = "auto",
    embedder_spec: str = "auto",
) -> dict[str, dict[str, dict[str, float]]]:
    if embedder is None:
        from liminalis.models import load_embedder

        embedder = load_embedder(embedder_spec, adapter=query_adapter_spec)
    reranker = None
    if any(parse_config(c)[2] for c in configs):
        from liminalis.models import load_reranker

        reranker = load_reranker(reranker_spec, int8=reranker_int8)
    ranker = None
    if any(parse_config(c)[3].get("learned_enabled") for c in configs):
        from liminalis.models import load_learned_ranker

        ranker = load_learned_ranker(ranker_spec)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for d in dirs:
        bench = load_set(d, limit=limit)
        label = unique_label(bench, results)
        results[label] = {}
        for contextual in (False, True):
            chosen = [c for c in configs if parse_config(c)[1] == contextual]
            if not chosen:
                continue
            kw: dict[str, Any] = {"cache_dir": cache_dir} if cache_dir else {}
            async with bench_engine(
                bench,
                embedder=embedder,
                contextual=contextual,
                reranker=reranker,
                progress=progress,
                ranker=ranker,
                **kw,
            ) as (engine, slug):
                await engine.retrieve(slug, "warm up", frozenset({"players"}))
                for spec in chosen:
                    _, _, rerank, over = parse_config(spec)
                    if rerank and reranker is None:
                        print(
                            f"[{bench.name}] {spec}: skipped — no reranker configured (train one: liminalis train-reranker)",
                            file=sys.stderr,
                        )
                        continue
                    if over.get("learned_enabled") and ranker is None and not rerank:
                        print(
                            f"[{bench.name}] {spec}: skipped — no learned ranker (python -m bench.train_ranker)",
                            file=sys.stderr,
                        )
                        continue
                    params = dataclasses.replace(engine.retrieval_params, **over)
                    results[label][spec] = await _run_config(engine, slug, bench, params, progress)
    return results


def print_table(results: dict[str, dict[str, dict[str, float]]]) -> None:
    for name, rows in results.items():
        print(f"\n{name}")
        width = max([len(c) for c in rows] + [10])
        print(f"{'config':<{width}}  " + "  ".join(f"{c:>13}" for c in COLUMNS))
        for cfg, m in rows.items():
            cells = []
            for c in COLUMNS:
                v = m.get(c, 0.0)
                cells.append(
                    f"{v:>13.1f}" if c in {"tokens", "p50_ms", "p95_ms"} else f"{v:>13.3f}"
                )
            print(f"{cfg:<{width}}  " + "  ".join(cells))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.retrieval", description=__doc__.split("\n")[0]
    )
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument(
        "--config", action="append", default=None, help="a rung, optionally name:k=v,..."
    )
    ap.add_argument("--out", type=Path)
    ap.add_argument("--limit", type=int, default=None, help="first N queries per set")
    ap.add_argument("--reranker", default="auto")
    ap.add_argument(
        "--reranker-int8", action="store_true", help="score with int8 dynamic quantization"
    )
    ap.add_argument(
        "--ranker",
        default="auto",
        help="learned ranker: auto (models/ranker), none, or a ranker.json",
    )
    ap.add_argument(
        "--query-adapter",
        default="auto",
        help="dense-arm query adapter: auto (models/query-adapter), none, or a path",
    )
    add_embedder_arg(ap)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    configs = args.config or LADDER
    results = asyncio.run(
        run(
            args.dirs,
            configs,
            limit=args.limit,
            reranker_spec=args.reranker,
            ranker_spec=args.ranker,
            progress=not args.no_progress,
            reranker_int8=args.reranker_int8,
            query_adapter_spec=args.query_adapter,
            embedder_spec=args.embedder,
        )
    )
    print_table(results)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
