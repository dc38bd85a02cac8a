"""Context benchmark: what tiering and token budgets cost in tokens, detail and rank.

    python -m bench.context DIR [DIR ...] [--out file.json] [--limit N] [--plain]

For every query the bundle is retrieved once (players lens), then laid out four ways:

* ``full``   — every retrieved document at full fidelity (its whole text), no budget;
* ``tiered`` — background documents as summary + matched passages, no budget;
* ``6k``/``3k`` — tiered, then fitted to a 6,000 / 3,000-token budget for the whole prompt.

Columns: ``tokens`` (mean tokens of the whole prompt — instructions, material, question — with
the one counter, :mod:`liminalis.context.tokens`), ``detail_recall`` (share of answerable
queries whose answer string, or most of the evidence, survives into the prompt text), and
``recall@5``/``mrr`` over the retrieval ranking restricted to the documents still in the prompt
(they move only if the budget drops a document that ranked in the top 5).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import (
    CACHE_DIR,
    BenchSet,
    add_embedder_arg,
    answerable,
    bench_engine,
    detail_hit,
    doc_metrics,
    load_set,
    mean,
    unique_label,
)
from liminalis import research
from liminalis.context.budget import BudgetParams
from liminalis.context.material import plain
from liminalis.context.prompt import build_prompt, instructions_for, split_bundle
from liminalis.context.tiering import TierParams
from liminalis.context.tokens import default_counter
from liminalis.errors import LiminalisError
from liminalis.ports import Embedder

__all__ = ["BUDGETS", "run_set", "main"]

_log = logging.getLogger(__name__)
PLAYERS = frozenset({"players"})
#: name → (tiering on, budget tokens or None)
BUDGETS: dict[str, tuple[bool, int | None]] = {
    "full": (False, None),
    "tiered": (True, None),
    "6k": (True, 6000),
    "3k": (True, 3000),
}


async def run_set(
    bench: BenchSet,
    *,
    embedder: Embedder,
    contextual: bool = True,
    cache_dir: Path = CACHE_DIR,
    tier: TierParams = TierParams(),
    budget_params: BudgetParams = BudgetParams(),
    progress: bool = True,
    ranker: Any = None,
    reranker: Any = None,
) -> dict[str, dict[str, float]]:
    """Per-budget means for one bench folder."""
    counter = default_counter()
    rows: dict[str, dict[str, list[float]]] = {
        b: {"tokens": [], "detail": [], "recall@5": [], "mrr": []} for b in BUDGETS
    }
    async with bench_engine(
        bench,
        embedder=embedder,
        contextual=contextual,
        cache_dir=cache_dir,
        progress=progress,
        ranker=ranker,
        reranker=reranker,
    ) as (engine, slug):
        catalog = await research.catalog(engine, slug)
        instructions = instructions_for(bench.name)
        t0 = time.perf_counter()
        for n, q in enumerate(bench.queries):
            try:
                bundle = await engine.retrieve(slug, q["query"], PLAYERS)
            except (
                LiminalisError
            ):  # an empty or over-long query: refused by the product, a miss here
                print(
                    f"[{bench.name}] query {q.get('id')} refused by the engine: counted as a miss",
                    file=sys.stderr,
                )
                for r in (
                    rows.values()
                ):  # (no tokens: as bench.retrieval, the means are over contexts built)
                    r["recall@5"].append(0.0)
                    r["mrr"].append(0.0)
                    if answerable(q):
                        r["detail"].append(0.0)
                continue
            texts = {d.doc_id: catalog.documents[d.doc_id].text for d in bundle.documents}
            stable, volatile, matched = split_bundle(bundle, texts, counter=counter)
            whole = [d.with_segments(plain(texts[d.doc_id]), "whole") for d in volatile]
            for name, (tiered, budget) in BUDGETS.items():
                prompt = build_prompt(
                    instructions=instructions,
                    stable=stable,
                    volatile=volatile if tiered else whole,
                    question=q["query"],
                    texts=texts,
                    matched=matched,
                    budget=budget,
                    tier=TierParams(**{**_fields(tier), "enabled": tiered}),
                    budget_params=budget_params,
                    counter=counter,
                )
                kept = {d.doc_id for d in prompt.all_documents}
                ranked = [d for d in bundle.ranked_doc_ids if d in kept]
                m = doc_metrics(ranked, q.get("relevant", []))
                r = rows[name]
                r["tokens"].append(prompt.tokens)
                r["recall@5"].append(m["recall@5"])
                r["mrr"].append(m["mrr"])
                if answerable(q):
                    r["detail"].append(float(detail_hit(q, prompt.text())))
            if progress and (n + 1) % 50 == 0:
                print(
                    f"  {bench.name}: {n + 1}/{len(bench.queries)} queries, {time.perf_counter() - t0:.0f}s",
                    file=sys.stderr,
                )
    return {
        name: {
            "tokens": round(mean(r["tokens"]), 1),
            "detail_recall": round(mean(r["detail"]), 4),
            "recall@5": round(mean(r["recall@5"]), 4),
            "mrr": round(mean(r["mrr"]), 4),
            "queries": len(r["mrr"]),
            "answerable": len(r["detail"]),
        }
        for name, r in rows.items()
    }


def _fields(tier: TierParams) -> dict[str, Any]:
    return {f: getattr(tier, f) for f in tier.__dataclass_fields__}


def _table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = [
        f"{'set':<22} {'budget':<7} {'tokens':>8} {'cut':>6} {'detail':>7} {'R@5':>6} {'MRR':>6}"
    ]
    for set_name, per in results.items():
        full = per["full"]["tokens"] or 1.0
        for name, r in per.items():
            cut = 1 - r["tokens"] / full
            lines.append(
                f"{set_name:<22} {name:<7} {r['tokens']:>8.0f} {cut:>6.1%} {r['detail_recall']:>7.3f} "
                f"{r['recall@5']:>6.3f} {r['mrr']:>6.3f}"
            )
    return "\n".join(lines)


async def _main(
    args: argparse.Namespace, embedder: Embedder | None, cache_dir: Path
) -> dict[str, Any]:
    from liminalis.models import load_embedder, load_learned_ranker, load_reranker

    if embedder is None:
        embedder = load_embedder(args.embedder, adapter=args.query_adapter)

    ranker = load_learned_ranker(args.ranker)
    reranker = load_reranker(args.reranker)
    results: dict[str, Any] = {}
    for d in args.dirs:
        bench = load_set(d, limit=args.limit)
        results[unique_label(bench, results)] = await run_set(
            bench,
            embedder=embedder,
            contextual=not args.plain,
            cache_dir=cache_dir,
            progress=not args.quiet,
            ranker=ranker,
            reranker=reranker,
        )
    return results


def main(
    argv: Sequence[str] | None = None,
    *,
    embedder: Embedder | None = None,
    cache_dir: Path = CACHE_DIR,
) -> dict[str, Any]:
    """Run the benchmark; ``embedder`` and ``cache_dir`` are injectable for the smoke test."""
    ap = argparse.ArgumentParser(
        prog="python -m bench.context", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--plain", action="store_true", help="index without contextual passage text")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument(
        "--ranker",
        default="auto",
        help="learned ranker: auto (models/ranker), none, or a ranker.json",
    )
    ap.add_argument(
        "--reranker", default="auto", help="cross-encoder: auto (models/reranker), none, or a path"
    )
    ap.add_argument(
        "--query-adapter", default="auto", help="dense-arm query adapter: auto, none, or a path"
    )
    add_embedder_arg(ap)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    results = asyncio.run(_main(args, embedder, cache_dir))
    print(_table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
