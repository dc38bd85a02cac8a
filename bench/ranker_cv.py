"""Leave-one-group-out cross-validation of the learned ranker's features, on training data only.

    python -m bench.ranker_cv [--without F[,F...] ...] [--hidden UNITS ...] [--l2 0.001]

Each training group (bench.train_ranker's campaign-sized groups) is scored by a model fit on
the other groups, with the L2 weight fixed. Reported per corpus, over the held-out queries: MRR
and recall@5 of each query's pool documents (a query whose relevant documents are all outside
the pool counts 0, as in ``bench.train_ranker.evaluate``). Each ``--without`` variant drops
those features (their columns held constant, so the model cannot use them) and is compared with
the full set query by query: the mean difference and a 95% bootstrap interval (2,000 resamples
of the queries, seeded). This is how a feature earns its place without a dev set: a gain whose
interval stays above zero on one corpus and does not cost the other. ``--hidden`` variants
compare the model with a tanh hidden layer (``bench.train_ranker --hidden``) the same way.

Features come from the same per-group caches ``bench.train_ranker`` writes (collected on first
use: about 35 minutes for the five groups from scratch on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import CACHE_DIR
from bench.train_ranker import (
    HIDDEN_STEPS,
    add_group_args,
    fit_model,
    group_features,
    plain_embedder,
)
from liminalis.retrieval.learned import FEATURES

__all__ = ["held_out_scores", "compare", "main"]

Example = tuple[np.ndarray, np.ndarray]


def _metrics(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(reciprocal rank of the first relevant document, recall@5) of one query's pool."""
    order = np.lexsort((np.arange(len(labels)), -scores))
    ranked = labels[order] > 0
    hits = np.flatnonzero(ranked)
    if not len(hits):
        return 0.0, 0.0
    return 1.0 / (hits[0] + 1), float(ranked[:5].sum()) / float(ranked.sum())


def _mask(examples: Sequence[Example], drop: Sequence[int]) -> list[Example]:
    if not drop:
        return list(examples)
    out = []
    for x, y in examples:
        x = x.copy()
        x[:, list(drop)] = 0.0
        out.append((x, y))
    return out


def held_out_scores(
    data: dict[str, list[Example]],
    *,
    drop: Sequence[int] = (),
    l2: float = 1e-3,
    steps: int = 400,
    hidden: int = 0,
) -> dict[str, np.ndarray]:
    """group → (queries × 2) array of held-out (RR, recall@5), each group scored by a model fit
    on every other group."""
    out: dict[str, np.ndarray] = {}
    masked = {g: _mask(ex, drop) for g, ex in data.items()}
    for g, held in masked.items():
        model = fit_model(
            [e for h, ex in masked.items() if h != g for e in ex], l2=l2, steps=steps, hidden=hidden
        )
        out[g] = np.asarray([_metrics(model.score(x), y) for x, y in held]).reshape(len(held), 2)
    return out


def _corpus(group: str) -> str:
    return group.rsplit("-g", 1)[0]


def compare(
    base: dict[str, np.ndarray],
    variant: dict[str, np.ndarray],
    *,
    seed: int = 0,
    resamples: int = 2000,
) -> dict[str, dict[str, Any]]:
    """Per corpus: both sides' means and the paired difference (variant − base) with a 95%
    bootstrap interval, for MRR and recall@5."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, Any]] = {}
    for corpus in sorted({_corpus(g) for g in base}):
        a = np.concatenate([base[g] for g in base if _corpus(g) == corpus])
        b = np.concatenate([variant[g] for g in base if _corpus(g) == corpus])
        diff = b - a
        idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
        boot = diff[idx].mean(axis=1)
        lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
        out[corpus] = {
            "queries": len(a),
            **{f"{m}_base": round(float(a[:, k].mean()), 4) for k, m in enumerate(("mrr", "r5"))},
            **{f"{m}": round(float(b[:, k].mean()), 4) for k, m in enumerate(("mrr", "r5"))},
            **{
                f"{m}_diff": [
                    round(float(diff[:, k].mean()), 4),
                    round(float(lo[k]), 4),
                    round(float(hi[k]), 4),
                ]
                for k, m in enumerate(("mrr", "r5"))
            },
        }
    return out


def main(
    argv: Sequence[str] | None = None, *, embedder: Any = None, cache_dir: Path = CACHE_DIR
) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        prog="python -m bench.ranker_cv", description=__doc__.split("\n\n")[0]
    )
    add_group_args(ap)
    ap.add_argument("--limit", type=int, help="queries per group (a quick run)")
    ap.add_argument("--l2", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument(
        "--without", nargs="*", default=[], help="variants: comma-separated feature names to drop"
    )
    ap.add_argument(
        "--hidden",
        type=int,
        nargs="*",
        default=[],
        help="variants: a tanh hidden layer of these many units (on the reference's features)",
    )
    ap.add_argument(
        "--against",
        default="",
        help="comma-separated features the reference drops too (default: the full set is the reference)",
    )
    ap.add_argument("--out", type=Path, help="also write the report as JSON")
    ap.add_argument("--quiet", action="store_true")
    ap.set_defaults(query_adapter_folds=None)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    data, _ = group_features(args, embedder or plain_embedder(args.embedder), cache_dir=cache_dir)

    def columns(spec: str) -> list[int]:
        names = [n for n in spec.split(",") if n]
        unknown = [n for n in names if n not in FEATURES]
        if unknown:
            raise SystemExit(f"unknown features: {unknown}")
        return [FEATURES.index(n) for n in names]

    against = columns(args.against)
    base = held_out_scores(data, drop=against, l2=args.l2, steps=args.steps)
    reference = f"without {args.against}" if against else "all"
    report: dict[str, Any] = {
        "features": len(FEATURES),
        "groups": {g: len(v) for g, v in data.items()},
        reference: compare(base, base),
    }
    for variant in args.without:
        scores = held_out_scores(
            data, drop=sorted({*against, *columns(variant)}), l2=args.l2, steps=args.steps
        )
        report[f"without {variant}"] = compare(base, scores)
    for units in args.hidden:
        scores = held_out_scores(data, drop=against, l2=args.l2, steps=HIDDEN_STEPS, hidden=units)
        report[f"hidden {units}"] = compare(base, scores)
    for name, rows in report.items():
        if not isinstance(rows, dict) or name == "groups":
            continue
        for corpus, r in rows.items():
            line = f"{name:<40} {corpus:<18} MRR {r['mrr']:.4f} R@5 {r['r5']:.4f}"
            if name != reference:
                line += (
                    f"   ΔMRR {r['mrr_diff'][0]:+.4f} [{r['mrr_diff'][1]:+.4f}, {r['mrr_diff'][2]:+.4f}]"
                    f"   ΔR@5 {r['r5_diff'][0]:+.4f} [{r['r5_diff'][1]:+.4f}, {r['r5_diff'][2]:+.4f}]"
                )
            print(line)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
