"""Sweep the rerank stage offline: candidate depth × mixing weight, on dev sets only.

    python -m bench.rerank_sweep DIR [DIR ...] [--reranker PATH] [--out sweep.json] [--limit N]

The reranker scores the top 40 of each query's fused pool once (players lens, the shipped
retrieval settings); every (depth, mix) setting is then scored offline from those scores, so
the sweep costs one reranker pass per query. ``mix`` is the weight of the standardised reranker
score against the fused log-rank prior (:func:`liminalis.retrieval.rerank.mix_scores`); ``none``
is the reranker's order alone. Latency is the measured reranker time for 40 candidates scaled by
depth (scoring is linear in candidates); confirm the chosen point with ``bench.retrieval``.
Choose settings that win on *both* sets; never tune on single queries.
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
from liminalis.retrieval.fusion import dedupe_ranking
from liminalis.retrieval.rerank import mix_scores

__all__ = ["DEPTHS", "MIXES", "collect", "grid", "main"]

DEPTHS = (10, 20, 40)
MIXES: tuple[float | None, ...] = (0.25, 0.5, 1.0, 2.0, None)


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


async def collect(path: Path, reranker: Any, *, embedder: Any, limit: int | None = None,
                  progress: bool = True, cache_dir: Path | None = None) -> list[dict[str, Any]]:
    """Per query: the fused pool's documents (top 40), their reranker scores and the time."""
    bench = load_set(path, limit=limit)
    rec = _Recorder(reranker)
    rows: list[dict[str, Any]] = []
    kw = {"cache_dir": cache_dir} if cache_dir else {}
    async with bench_engine(bench, embedder=embedder, contextual=False, reranker=rec, progress=progress, **kw) as (engine, slug):
        cat = await engine.retriever.catalog(slug)
        by_text = {}
        for pid, p in cat.passages.items():
            by_text.setdefault(cat.passage_text(pid), p.doc_id)
        params = dataclasses.replace(engine.retriever.params, rerank_depth=max(DEPTHS), pool=max(DEPTHS), rerank_mix=None)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(bench.queries), desc=f"rerank {bench.name}", unit="q", file=sys.stderr)
        for q in bench.queries:
            rec.last = None
            await engine.retrieve(slug, q["query"], frozenset({"players"}), params=params)
            if rec.last is None:
                raise SystemExit("the reranker failed (see the log): nothing to sweep")
            texts, scores, ms = rec.last
            rows.append({"docs": [by_text[t] for t in texts], "scores": scores, "ms": ms, "relevant": q["relevant"]})
            if bar:
                bar.update(1)
        if bar:
            bar.close()
    return rows


def grid(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metrics for the fused order and every (depth, mix) setting."""
    out = []
    full_ms = [r["ms"] for r in rows]
    for depth, mix in [(0, None), *((d, m) for d in DEPTHS for m in MIXES)]:
        metrics = []
        for r in rows:
            n = min(depth, len(r["docs"]))
            head = mix_scores(r["scores"][:n], mix) if n else []
            order = sorted(range(n), key=lambda i: (-head[i], i)) + list(range(n, len(r["docs"])))
            metrics.append(doc_metrics(dedupe_ranking(r["docs"][i] for i in order), r["relevant"]))
        scale = depth / max(DEPTHS)
        out.append({
            "depth": depth, "mix": "none" if mix is None else mix,
            **{k: round(mean([m[k] for m in metrics]), 4) for k in ("mrr", "recall@5", "recall@10", "hit@1")},
            "rerank_p50_ms": round(percentile(full_ms, 50) * scale, 1), "rerank_p95_ms": round(percentile(full_ms, 95) * scale, 1),
        })
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rerank_sweep", description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--reranker", default="auto", help="auto (the shipped model), or a CrossEncoder name/path")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    from bot.main import load_reranker
    from liminalis.adapters.sentence_transformers import SentenceTransformerEmbedder

    reranker = load_reranker(args.reranker)
    if reranker is None:
        print("no reranker configured: train one (liminalis train-reranker) or pass --reranker PATH", file=sys.stderr)
        return 2
    embedder = SentenceTransformerEmbedder()
    results: dict[str, Any] = {}
    for d in args.dirs:
        rows = asyncio.run(collect(d, reranker, embedder=embedder, limit=args.limit, progress=not args.no_progress))
        results[d.name] = grid(rows)
        print(f"\n{d.name} ({len(rows)} queries; depth 0 = fused order, no reranker)")
        print(f"{'depth':>5} {'mix':>5} {'MRR':>7} {'R@5':>7} {'R@10':>7} {'hit@1':>7} {'p50 ms':>7} {'p95 ms':>7}")
        for g in results[d.name]:
            print(f"{g['depth']:>5} {g['mix']!s:>5} {g['mrr']:>7.4f} {g['recall@5']:>7.4f} {g['recall@10']:>7.4f} "
                  f"{g['hit@1']:>7.4f} {g['rerank_p50_ms']:>7.0f} {g['rerank_p95_ms']:>7.0f}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
