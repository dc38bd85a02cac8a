"""Sweep the rerank stage offline: candidate depth × mixing weight, on dev sets only.

    python -m bench.rerank_sweep DIR [DIR ...] [--reranker PATH] [--out sweep.json] [--limit N]
    python -m bench.rerank_sweep --pools POOLS_DIR --scores dev-scores.json [--out sweep.json]
    python -m bench.rerank_sweep --rows rows.json --depths 5 8 10 --mixes 0.125 0.25 none

The reranker scores the top 40 of each query's pool once (players lens, the shipped retrieval
settings and learned ranker); every (depth, mix) setting is then scored offline from those
scores, so the sweep costs one reranker pass per query. ``mix`` is the weight of the
standardised reranker score added to the product's prior, the learned ranker's document score
(:func:`liminalis.retrieval.rerank.mix_scores`); ``none`` is the reranker's order alone. Latency is the measured reranker time for 40 candidates scaled by
depth (scoring is linear in candidates); confirm the chosen point with ``bench.retrieval``.
Choose settings that win on *both* sets; never tune on single queries. ``--depths`` and
``--mixes`` set the grid; ``--save-rows`` keeps the reranker's scores so that ``--rows`` can
re-grid them later without a reranker pass.

The second form sweeps scores computed elsewhere (``bench.train_reranker --score`` on a GPU
machine) over the pools ``bench.rerank_data`` mined here. With ``--reranker PATH --latency N``
it also times that model here, on this CPU, scoring the first N pools of each set at every
depth (``--quantize``: int8 dynamic quantization), and fills the p50/p95 columns with those
times: the MRR-and-latency curve per model variant.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import bench_engine, doc_metrics, load_set, mean, percentile
from liminalis import research
from liminalis.retrieval.fusion import dedupe_ranking
from liminalis.retrieval.rerank import mix_scores
from liminalis.retrieval.retriever import Trace

__all__ = ["DEPTHS", "MIXES", "collect", "grid", "main"]

DEPTHS = (6, 10, 20, 40)
MIXES: tuple[float | None, ...] = (0.25, 0.5, 0.75, 1.0, 2.0, None)


class _Recorder:
    """A Reranker that scores through the real one and keeps what it saw."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = getattr(inner, "model_id", "?")
        self.last: tuple[list[str], list[float], float] | None = None

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        t = time.perf_counter()
        scores = await self.inner.score(query, passages)
        self.last = (list(passages), [float(s) for s in scores], (time.perf_counter() - t) * 1000)
        return scores


async def collect(
    path: Path,
    reranker: Any,
    *,
    embedder: Any,
    limit: int | None = None,
    progress: bool = True,
    cache_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """Per query: the fused pool's documents (top 40), their reranker scores and the time."""
    bench = load_set(path, limit=limit)
    rec = _Recorder(reranker)
    rows: list[dict[str, Any]] = []
    from liminalis.models import load_learned_ranker

    # The product's pool: contextual embeddings and the shipped learned ranker's order.
    kw: dict[str, Any] = {"ranker": load_learned_ranker("auto")}
    if cache_dir:
        kw["cache_dir"] = cache_dir
    async with bench_engine(bench, embedder=embedder, reranker=rec, progress=progress, **kw) as (
        engine,
        slug,
    ):
        cat = await research.catalog(engine, slug)
        by_text = {}
        for pid, p in cat.passages.items():
            by_text.setdefault(cat.passage_text(pid), p.doc_id)
        params = dataclasses.replace(
            engine.retrieval_params, rerank_depth=max(DEPTHS), pool=max(DEPTHS), rerank_mix=None
        )
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(
                total=len(bench.queries), desc=f"rerank {bench.name}", unit="q", file=sys.stderr
            )
        for q in bench.queries:
            rec.last = None
            trace = Trace()
            await engine.retrieve(
                slug, q["query"], frozenset({"players"}), params=params, trace=trace
            )
            if rec.last is None:
                raise SystemExit("the reranker failed (see the log): nothing to sweep")
            texts, scores, ms = rec.last
            rows.append(
                {
                    "docs": [by_text[t] for t in texts],
                    "scores": scores,
                    "ms": ms,
                    "relevant": q["relevant"],
                    "learned": trace.learned_scores,
                }
            )
            if bar:
                bar.update(1)
        if bar:
            bar.close()
    return rows


def grid(
    rows: Sequence[dict[str, Any]],
    depths: Sequence[int] = DEPTHS,
    mixes: Sequence[float | None] = MIXES,
) -> list[dict[str, Any]]:
    """Metrics for the fused order and every (depth, mix) setting (depths up to the 40 scored)."""
    out = []
    full_ms = [r["ms"] for r in rows]
    for depth, mix in [(0, None), *((d, m) for d in depths for m in mixes)]:
        metrics = []
        for r in rows:
            n = min(depth, len(r["docs"]))
            # The product's prior: the learned score of each candidate's document when the pool
            # came with them, else the log-rank of the pool order (liminalis.retrieval.rerank).
            learned = r.get("learned") or {}
            prior = (
                [learned.get(d, min(learned.values()) - 1.0) for d in r["docs"][:n]]
                if learned
                else None
            )
            head = mix_scores(r["scores"][:n], mix, prior) if n else []
            order = sorted(range(n), key=lambda i: (-head[i], i)) + list(range(n, len(r["docs"])))
            metrics.append(doc_metrics(dedupe_ranking(r["docs"][i] for i in order), r["relevant"]))
        scale = depth / max(DEPTHS)
        out.append(
            {
                "depth": depth,
                "mix": "none" if mix is None else mix,
                **{
                    k: round(mean([m[k] for m in metrics]), 4)
                    for k in ("mrr", "recall@5", "recall@10", "hit@1")
                },
                "rerank_p50_ms": round(percentile(full_ms, 50) * scale, 1),
                "rerank_p95_ms": round(percentile(full_ms, 95) * scale, 1),
            }
        )
    return out


def offline_rows(
    pools: Path, scores: dict[str, list[list[float]]]
) -> dict[str, list[dict[str, Any]]]:
    """Rows for :func:`grid` from mined pools and their precomputed scores (no timing)."""
    from bench.rerank_data import read

    out = {}
    for name, per_query in scores.items():
        rows, _ = read(pools / f"dev-{name}.jsonl.gz")
        if len(rows) != len(per_query):
            raise SystemExit(f"{name}: {len(per_query)} score lists for {len(rows)} pools")
        out[name] = [
            {
                "docs": r["docs"],
                "scores": s,
                "ms": 0.0,
                "relevant": r["relevant"],
                "learned": r.get("learned", {}),
            }
            for r, s in zip(rows, per_query)
        ]
    return out


async def latency(
    reranker: Any, pools: Path, name: str, n: int, depths: Sequence[int] = DEPTHS
) -> dict[int, list[float]]:
    """Milliseconds to score the top ``depth`` passages of the first ``n`` pools, per depth."""
    from bench.rerank_data import read

    rows, passages = read(pools / f"dev-{name}.jsonl.gz")
    await reranker.score(rows[0]["query"], [passages[rows[0]["pool"][0]]])  # load outside the clock
    out: dict[int, list[float]] = {d: [] for d in depths}
    for r in rows[:n]:
        for d in depths:
            t = time.perf_counter()
            await reranker.score(r["query"], [passages[k] for k in r["pool"][:d]])
            out[d].append((time.perf_counter() - t) * 1000)
    return out


def _with_latency(table: list[dict[str, Any]], ms: dict[int, list[float]]) -> list[dict[str, Any]]:
    for g in table:
        if g["depth"] in ms:
            g["rerank_p50_ms"] = round(percentile(ms[g["depth"]], 50), 1)
            g["rerank_p95_ms"] = round(percentile(ms[g["depth"]], 95), 1)
    return table


def _print(name: str, table: list[dict[str, Any]], n: int) -> None:
    print(f"\n{name} ({n} queries; depth 0 = fused order, no reranker)")
    print(
        f"{'depth':>5} {'mix':>5} {'MRR':>7} {'R@5':>7} {'R@10':>7} {'hit@1':>7} {'p50 ms':>7} {'p95 ms':>7}"
    )
    for g in table:
        print(
            f"{g['depth']:>5} {g['mix']!s:>5} {g['mrr']:>7.4f} {g['recall@5']:>7.4f} {g['recall@10']:>7.4f} "
            f"{g['hit@1']:>7.4f} {g['rerank_p50_ms']:>7.0f} {g['rerank_p95_ms']:>7.0f}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.rerank_sweep", description=__doc__.split("\n")[0]
    )
    ap.add_argument("dirs", nargs="*", type=Path)
    ap.add_argument("--pools", type=Path, help="a bench.rerank_data output folder (with --scores)")
    ap.add_argument(
        "--scores", type=Path, help="dev-scores.json written by bench.train_reranker --score"
    )
    ap.add_argument(
        "--latency",
        type=int,
        default=0,
        help="with --scores: time --reranker on this many pools per set",
    )
    ap.add_argument(
        "--quantize",
        action="store_true",
        help="int8 dynamic quantization of the reranker's linear layers",
    )
    ap.add_argument(
        "--reranker", default="auto", help="auto (the shipped model), or a CrossEncoder name/path"
    )
    ap.add_argument(
        "--depths",
        type=int,
        nargs="+",
        default=list(DEPTHS),
        help=f"candidates scored, each ≤ {max(DEPTHS)}",
    )
    ap.add_argument(
        "--mixes",
        nargs="+",
        default=[str(m).lower() for m in MIXES],
        help="reranker weights; 'none' is the reranker's order alone",
    )
    ap.add_argument(
        "--save-rows", type=Path, help="also keep the collected scores (JSON) for --rows"
    )
    ap.add_argument("--rows", type=Path, help="re-grid rows kept by --save-rows (no reranker pass)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument(
        "--query-adapter",
        default="auto",
        help="dense-arm query adapter: auto (models/query-adapter, as the product), none, or a path",
    )
    args = ap.parse_args(argv)
    if any(not 0 < d <= max(DEPTHS) for d in args.depths):
        ap.error(
            f"--depths: each between 1 and {max(DEPTHS)} (the reranker scores the top {max(DEPTHS)})"
        )
    try:
        mixes = [None if m == "none" else float(m) for m in args.mixes]
    except ValueError:
        ap.error("--mixes: numbers or 'none'")

    def table(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return grid(rows, args.depths, mixes)

    results: dict[str, Any] = {}
    if args.rows:
        for name, rows in json.loads(args.rows.read_text()).items():
            results[name] = table(rows)
            _print(name, results[name], len(rows))
        if args.out:
            args.out.write_text(json.dumps(results, indent=2))
        return 0
    if args.scores:
        if not args.pools:
            ap.error("--scores needs --pools")
        timer = None
        if args.latency:
            from liminalis.adapters.cross_encoder import CrossEncoderReranker

            if args.reranker in {"auto", "none"}:
                ap.error("--latency needs --reranker PATH (the model whose scores these are)")
            timer = CrossEncoderReranker(args.reranker, quantize=args.quantize)
        for name, rows in offline_rows(args.pools, json.loads(args.scores.read_text())).items():
            results[name] = table(rows)
            if timer is not None:
                _with_latency(
                    results[name],
                    asyncio.run(latency(timer, args.pools, name, args.latency, args.depths)),
                )
            _print(name, results[name], len(rows))
        if args.out:
            args.out.write_text(json.dumps(results, indent=2))
        return 0
    if not args.dirs:
        ap.error("give dev set folders, or --pools and --scores")
    from liminalis.models import load_embedder, load_reranker

    reranker = load_reranker(args.reranker)
    if reranker is None:
        print(
            "no reranker configured: train one (liminalis train-reranker) or pass --reranker PATH",
            file=sys.stderr,
        )
        return 2
    embedder = load_embedder(adapter=args.query_adapter)
    kept: dict[str, list[dict[str, Any]]] = {}
    for d in args.dirs:
        rows = kept[d.name] = asyncio.run(
            collect(d, reranker, embedder=embedder, limit=args.limit, progress=not args.no_progress)
        )
        results[d.name] = table(rows)
        _print(d.name, results[d.name], len(rows))
    if args.save_rows:
        args.save_rows.write_text(json.dumps(kept))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
