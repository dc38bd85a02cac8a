"""Parameter sweep for the recall arms and fusion, on dev sets only.

    python -m bench.sweep DIR [DIR ...] [--out sweep.json]

Arm rankings are computed once per query, then fusion settings are scored offline, so the
sweep costs one retrieval pass per lexical setting. Prints, per set, the best lexical settings
(tokenizer × k1 × b) and the fusion grid (``rrf_k`` × dense weight × dense depth) by MRR with
recall@10. Choose settings that win on *both* sets; never tune on single queries.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from bench.common import bench_engine, doc_metrics, load_set, mean
from liminalis import research
from liminalis.retrieval.fusion import dedupe_ranking, rrf
from liminalis.retrieval.lexical import BM25Index, title_entry_id
from liminalis.retrieval.retriever import RetrievalParams
from liminalis.text import Tokenizer

LEX_GRID = [
    (stem, stop, k1, b)
    for stem, stop in [(False, False), (True, False), (True, True)]
    for k1 in (0.6, 0.9, 1.2)
    for b in (0.3, 0.4, 0.55, 0.75)
]
RRF_K = (2, 5, 10, 20, 40, 60)
W_DENSE = (0.0, 0.15, 0.25, 0.35, 0.5, 0.75, 1.0)
DEPTH = (10, 20, 40, 120)


def _docs(cat: Any, pids: list[str]) -> list[str]:
    return dedupe_ranking(cat.passages[p].doc_id for p in pids)


def score(rankings: list[list[str]], queries: list[dict[str, Any]]) -> dict[str, float]:
    rows = [doc_metrics(r, q["relevant"]) for r, q in zip(rankings, queries, strict=True)]
    return {k: mean([r[k] for r in rows]) for k in rows[0]}


async def sweep_set(path: Path, embedder: Any, cache_dir: Path | None = None) -> dict[str, Any]:
    bench = load_set(path)
    out: dict[str, Any] = {"lexical": [], "fusion": {}}
    lens = frozenset({"players"})
    for contextual in (False, True):
        kw = {"cache_dir": cache_dir} if cache_dir else {}
        async with bench_engine(
            bench, embedder=embedder, contextual=contextual, progress=cache_dir is None, **kw
        ) as (engine, slug):
            cat = await research.catalog(engine, slug)
            params = RetrievalParams(dense_top_k=120)
            dense = [
                await research.dense_ranking(engine, slug, q["query"], lens, params)
                for q in bench.queries
            ]
            if not contextual:
                texts = {pid: cat.passage_text(pid) for pid in cat.passages}
                token_cache: dict[tuple[bool, bool], list[tuple[str, list[str]]]] = {}
                by_config: dict[tuple[bool, bool, float, float], list[list[str]]] = {}
                for stem, stop, k1, b in LEX_GRID:
                    tok = Tokenizer(stem=stem, stop_words=stop)
                    if (stem, stop) not in token_cache:
                        entries = []
                        for doc_id, pids in cat.by_doc.items():
                            entries.append(
                                (title_entry_id(doc_id), tok(cat.documents[doc_id].title))
                            )
                            entries.extend((pid, tok(texts[pid])) for pid in pids)
                        token_cache[(stem, stop)] = entries
                    index = BM25Index(token_cache[(stem, stop)], k1=k1, b=b)
                    lex_rankings = []
                    for q in bench.queries:
                        hits = index.search(tok(q["query"]), top_k=120)
                        pids = [
                            cat.first_passage(e[6:]) if e.startswith("title:") else e
                            for e, _ in hits
                        ]
                        lex_rankings.append(dedupe_ranking(p for p in pids if p))
                    m = score([_docs(cat, r) for r in lex_rankings], bench.queries)
                    out["lexical"].append({"stem": stem, "stop": stop, "k1": k1, "b": b, **m})
                    by_config[(stem, stop, k1, b)] = lex_rankings
                # fuse with the shipped lexical setting so fusion numbers match the product
                out["_lex"] = by_config[(True, True, 0.9, 0.4)]
            lex = out["_lex"]
            variant = "contextual" if contextual else "plain"
            out["fusion"][variant] = []
            out["fusion"][variant].append(
                {
                    "rrf_k": 0,
                    "w_dense": "dense-only",
                    "depth": 120,
                    **score([_docs(cat, d) for d in dense], bench.queries),
                }
            )
            for k, w, depth in itertools.product(RRF_K, W_DENSE, DEPTH):
                fused = [
                    _docs(cat, [p for p, _ in rrf(d[:depth], lx, rrf_k=k, weights=[w, 1.0])])
                    for d, lx in zip(dense, lex, strict=True)
                ]
                out["fusion"][variant].append(
                    {"rrf_k": k, "w_dense": w, "depth": depth, **score(fused, bench.queries)}
                )
            # pool recall: does the dense arm add documents BM25's top-40 passages miss?
            for depth in (20, 40):
                add = []
                for d, lx, q in zip(dense, lex, bench.queries, strict=True):
                    rel = set(q["relevant"])
                    lex_docs = set(_docs(cat, lx[:40]))
                    both = lex_docs | set(_docs(cat, d[:depth]))
                    add.append(float(bool(rel & both)) - float(bool(rel & lex_docs)))
                out.setdefault("pool_gain", {})[f"{variant}@{depth}"] = mean(add)
    out.pop("_lex", None)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sweep")
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--query-adapter",
        default="auto",
        help="dense-arm query adapter: auto (models/query-adapter, as the product), none, or a path",
    )
    args = ap.parse_args(argv)
    from liminalis.models import load_embedder

    emb = load_embedder(adapter=args.query_adapter)
    results = {}
    for d in args.dirs:
        res = asyncio.run(sweep_set(d, emb))
        results[d.name] = res
        print(f"\n== {d.name}: lexical (top 8 by MRR)")
        for r in sorted(res["lexical"], key=lambda r: -r["mrr"])[:8]:
            print(
                f"  stem={r['stem']!s:5} stop={r['stop']!s:5} k1={r['k1']:<4} b={r['b']:<5} MRR {r['mrr']:.3f} R@10 {r['recall@10']:.3f} R@5 {r['recall@5']:.3f}"
            )
        for variant, rows in res["fusion"].items():
            print(
                f"== {d.name}: fusion ({variant}); dense-only MRR {rows[0]['mrr']:.3f} R@10 {rows[0]['recall@10']:.3f}"
            )
            for r in sorted(rows[1:], key=lambda r: -r["mrr"])[:8]:
                print(
                    f"  rrf_k={r['rrf_k']:<3} w_dense={r['w_dense']:<5} depth={r['depth']:<4} MRR {r['mrr']:.3f} R@10 {r['recall@10']:.3f} R@5 {r['recall@5']:.3f} hit@1 {r['hit@1']:.3f}"
                )
        print(
            "pool gain (share of queries whose relevant doc only dense adds to BM25 top-40):",
            res.get("pool_gain"),
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
