"""Train the learned document ranker (liminalis.retrieval.learned) on the training split.

    python -m bench.train_ranker [--train-root ../shared/bench/train] [--out models/ranker]

The training split's corpora are far larger than a campaign (3,013 FairytaleQA sections,
1,918 CRD3 windows), and the features describe a query's candidates *within a campaign*, so
each corpus is cut into campaign-sized groups (whole stories / whole episodes, about the size
of a dev set): FairytaleQA into 5, CRD3 into 4. Each group is ingested like any campaign (the
product's chunking, contextual embeddings, both lexical arms; vectors cached under
bench/.cache), every query is retrieved, and the fused pool's documents with their features
become one listwise example. Groups listed in ``--valid`` are held out for choosing the L2
weight and reporting validation MRR; the final model is fit on all training groups.

Deterministic: full-batch gradient descent from zeros, no sampling. Never reads a dev or
evaluation set.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import pickle
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import CACHE_DIR, add_embedder_arg, load_set
from liminalis import research
from liminalis.retrieval.learned import FEATURES, LearnedRanker

__all__ = [
    "make_groups",
    "collect",
    "group_features",
    "fit",
    "fit_hidden",
    "fit_model",
    "evaluate",
    "main",
]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRAIN = ROOT.parent / "shared" / "bench" / "train"
#: corpus folder → (number of groups, the unit a group is made of, from a doc id)
GROUPING = {
    "fairytaleqa-train": (5, lambda d: re.sub(r"-s\d+$", "", d)),
    "crd3-train": (4, lambda d: d.split("_")[0]),
}
PLAYERS = frozenset({"players"})


def feature_key() -> str:
    """A hash of what decides a group's features: the feature list and the code of the modules
    that compute the candidates and their features. The code is hashed as its syntax tree without
    docstrings, so a docstring, a comment or a re-wrap does not recollect every group (about two
    minutes a group); any change to a statement does."""
    import hashlib

    import liminalis.retrieval.learned as learned

    h = hashlib.blake2b(",".join(FEATURES).encode(), digest_size=4)
    for name in ("learned", "retriever", "fusion", "lexical", "catalog"):
        h.update(
            _code_fingerprint((Path(learned.__file__).parent / f"{name}.py").read_text()).encode()
        )
    return h.hexdigest()


def _code_fingerprint(source: str) -> str:
    """The module's syntax tree with every docstring removed (comments are never in it)."""
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def make_groups(train_root: Path, out_root: Path) -> list[Path]:
    """Cut each training corpus into campaign-sized groups (a copy of the corpus files, since
    ingest never follows a link out of a campaign, plus the queries whose relevant documents all
    fall inside the group)."""
    out: list[Path] = []
    for name, (n, key) in GROUPING.items():
        src = train_root / name
        if not (src / "corpus").is_dir():
            continue
        corpus = sorted(p.stem for p in (src / "corpus").glob("*.md"))
        keys = sorted({key(d) for d in corpus})
        size = -(-len(keys) // n)
        queries = [
            json.loads(x) for x in (src / "queries.jsonl").read_text().splitlines() if x.strip()
        ]
        for g in range(n):
            ks = set(keys[g * size : (g + 1) * size])
            docs = {d for d in corpus if key(d) in ks}
            sel = [q for q in queries if q.get("relevant") and set(q["relevant"]) <= docs]
            if not sel:
                continue
            root = out_root / f"{name}-g{g}"
            (root / "corpus").mkdir(parents=True, exist_ok=True)
            for d in sorted(docs):
                dst = root / "corpus" / f"{d}.md"
                if not dst.exists():
                    shutil.copyfile(src / "corpus" / f"{d}.md", dst)
            (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in sel))
            out.append(root)
    return out


def add_group_args(ap: argparse.ArgumentParser) -> None:
    """The arguments of every tool that trains on the campaign-sized groups."""
    ap.add_argument("--train-root", type=Path, default=DEFAULT_TRAIN)
    ap.add_argument("--groups-dir", type=Path, default=CACHE_DIR / "train-groups")
    ap.add_argument("--valid", nargs="*", default=["fairytaleqa-train-g4", "crd3-train-g3"])
    ap.add_argument("--only", nargs="*", help="use only these groups")
    add_embedder_arg(ap)


def selected_groups(args: argparse.Namespace) -> list[Path]:
    groups = make_groups(args.train_root, args.groups_dir)
    return [g for g in groups if g.name in args.only] if args.only else groups


def plain_embedder(spec: str) -> Any:
    """The embedder without any query adapter: training tools choose adapters themselves."""
    from liminalis.adapters.sentence_transformers import SentenceTransformerEmbedder
    from liminalis.models import resolve_embedder

    return SentenceTransformerEmbedder(resolve_embedder(spec))


async def collect(
    folder: Path,
    *,
    embedder: Any,
    limit: int | None = None,
    progress: bool = True,
    cache_dir: Path = CACHE_DIR,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(features, labels) per query of one group: the fused pool's documents, label 1 if relevant."""
    from bench.common import bench_engine
    from liminalis.retrieval.retriever import Trace

    bench = load_set(folder, limit=limit)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    async with bench_engine(bench, embedder=embedder, progress=progress, cache_dir=cache_dir) as (
        engine,
        slug,
    ):
        t0 = time.perf_counter()
        for n, q in enumerate(bench.queries):
            trace = Trace(collect_features=True)
            await research.retrieve_unpinned(engine, slug, q["query"], PLAYERS, trace=trace)
            if trace.features is None or not trace.candidates:
                continue
            rel = set(q["relevant"])
            out.append((trace.features, np.asarray([float(d in rel) for d in trace.candidates])))
            if progress and (n + 1) % 200 == 0:
                print(
                    f"  {bench.name}: {n + 1}/{len(bench.queries)} queries, {time.perf_counter() - t0:.0f}s",
                    file=sys.stderr,
                )
    return out


def _stack(
    examples: Sequence[tuple[np.ndarray, np.ndarray]],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Only queries with a relevant candidate teach a listwise model anything."""
    return [(x, y) for x, y in examples if y.sum() > 0]


def _padded(
    examples: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Feature mean and scale, and the queries (those with a relevant candidate) standardised and
    padded into one array: features, target distribution, mask of real candidates."""
    data = _stack(examples)
    allx = np.concatenate([x for x, _ in data])
    mean = allx.mean(axis=0)
    scale = allx.std(axis=0)
    scale[scale < 1e-9] = 1.0
    n, width = len(data), max(len(y) for _, y in data)
    xb = np.zeros((n, width, len(FEATURES)))
    yb = np.zeros((n, width))
    mask = np.zeros((n, width), dtype=bool)
    for i, (x, y) in enumerate(data):
        xb[i, : len(y)] = (x - mean) / scale
        yb[i, : len(y)] = y / y.sum()
        mask[i, : len(y)] = True
    return mean, scale, xb, yb, mask


def fit(
    examples: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    l2: float = 1e-3,
    steps: int = 400,
    lr: float = 0.1,
) -> LearnedRanker:
    """Listwise softmax cross-entropy (ListNet top-one; relevant documents share the target mass),
    full-batch Adam from zero weights over the queries padded into one array: deterministic."""
    mean, scale, xb, yb, mask = _padded(examples)
    n = len(xb)
    w = np.zeros(len(FEATURES))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for step in range(1, steps + 1):
        s = np.where(mask, xb @ w, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        g = np.einsum("nlf,nl->f", xb, p - yb) / n + 2 * l2 * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= lr * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return LearnedRanker(weights=w, mean=mean, scale=scale)


HIDDEN_STEPS = 1500


def fit_hidden(
    examples: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    units: int,
    l2: float = 1e-2,
    steps: int = HIDDEN_STEPS,
    lr: float = 0.01,
    seed: int = 0,
) -> LearnedRanker:
    """The same listwise objective for the linear score plus a tanh hidden layer of ``units``
    (:class:`LearnedRanker`): full-batch Adam in torch from a seeded start (linear weights and
    the output layer near zero, so training starts from "no opinion"), L2 ``l2`` on every
    weight. Deterministic for a seed on CPU."""
    import torch

    mean, scale, xb, yb, mask = _padded(examples)
    f = len(FEATURES)
    xb, yb = xb.astype(np.float32), yb.astype(np.float32)
    x_t, y_t, m_t = torch.from_numpy(xb), torch.from_numpy(yb), torch.from_numpy(mask)
    gen = torch.Generator().manual_seed(seed)
    bound = 1.0 / np.sqrt(f)
    w = torch.zeros(f, requires_grad=True)
    w1 = ((torch.rand(f, units, generator=gen) * 2 - 1) * bound).requires_grad_()
    b1 = ((torch.rand(units, generator=gen) * 2 - 1) * bound).requires_grad_()
    w2 = (torch.randn(units, generator=gen) * 0.01).requires_grad_()
    opt = torch.optim.Adam([w, w1, b1, w2], lr=lr)
    for _ in range(steps):
        s = (x_t @ w + torch.tanh(x_t @ w1 + b1) @ w2).masked_fill(~m_t, -1e9)
        loss = -(y_t * torch.log_softmax(s, dim=1)).sum(dim=1).mean()
        loss = loss + l2 * (w.pow(2).sum() + w1.pow(2).sum() + w2.pow(2).sum())
        opt.zero_grad()
        loss.backward()
        opt.step()
    arr = [t.detach().numpy().astype(np.float64) for t in (w, w1, b1, w2)]
    return LearnedRanker(
        weights=arr[0],
        mean=mean,
        scale=scale,
        hidden=(arr[1], arr[2], arr[3]),
        model_id=f"learned-ranker-h{units}",
    )


def fit_model(
    examples: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    l2: float,
    steps: int,
    hidden: int = 0,
) -> LearnedRanker:
    """:func:`fit` (linear), or :func:`fit_hidden` with ``hidden`` units."""
    return (
        fit_hidden(examples, units=hidden, l2=l2, steps=steps)
        if hidden
        else fit(examples, l2=l2, steps=steps)
    )


def evaluate(
    model: LearnedRanker | None, examples: Sequence[tuple[np.ndarray, np.ndarray]]
) -> float:
    """MRR over the candidates (queries whose relevant documents are all outside the pool count 0);
    ``model=None`` gives the fused order's MRR."""
    total = 0.0
    for x, y in examples:
        order = (
            np.arange(len(y)) if model is None else np.lexsort((np.arange(len(y)), -model.score(x)))
        )
        hits = np.flatnonzero(y[order] > 0)
        total += 1.0 / (hits[0] + 1) if len(hits) else 0.0
    return total / len(examples) if examples else 0.0


def main(
    argv: Sequence[str] | None = None, *, embedder: Any = None, cache_dir: Path = CACHE_DIR
) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        prog="python -m bench.train_ranker", description=__doc__.split("\n\n")[0]
    )
    add_group_args(ap)
    ap.add_argument("--limit", type=int, help="queries per group (a quick run)")
    ap.add_argument("--l2", type=float, nargs="*", default=[1e-4, 1e-3, 1e-2, 1e-1])
    ap.add_argument(
        "--steps",
        type=int,
        help=f"optimiser steps (default: 400 linear, {HIDDEN_STEPS} with a hidden layer)",
    )
    ap.add_argument(
        "--hidden", type=int, default=16, help="units of a tanh hidden layer (0: linear; 16 ships)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "models" / "ranker")
    ap.add_argument(
        "--query-adapter-folds",
        type=Path,
        help="out-of-fold query adapters, <group>.npz each (bench.train_query_adapter --folds): "
        "each group's dense features come from the adapter fit without it",
    )
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    steps = args.steps or (HIDDEN_STEPS if args.hidden else 400)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    embedder = embedder or plain_embedder(args.embedder)
    t0 = time.perf_counter()
    data, cached = group_features(args, embedder, cache_dir=cache_dir)
    train = [e for name, ex in data.items() if name not in args.valid for e in ex]
    valid = [e for name, ex in data.items() if name in args.valid for e in ex]
    rows = []
    for l2 in args.l2:
        model = fit_model(train, l2=l2, steps=steps, hidden=args.hidden)
        rows.append((l2, evaluate(model, valid) if valid else evaluate(model, train)))
        print(
            f"l2 {l2:g}: validation MRR {rows[-1][1]:.4f} (fused order {evaluate(None, valid or train):.4f})"
        )
    best_l2 = max(rows, key=lambda r: (r[1], r[0]))[0]
    chosen = fit_model(train, l2=best_l2, steps=steps, hidden=args.hidden)
    by_group = {
        name: {
            "fused": round(evaluate(None, data[name]), 4),
            "learned": round(evaluate(chosen, data[name]), 4),
        }
        for name in args.valid
        if name in data
    }
    final = dataclasses.replace(
        fit_model(train + valid, l2=best_l2, steps=steps, hidden=args.hidden),
        embedder=embedder.model_id,
    )
    report = {
        "l2": best_l2,
        "steps": steps,
        "hidden": args.hidden,
        "validation_mrr": dict((f"{k:g}", round(v, 4)) for k, v in rows),
        "validation_fused_mrr": round(evaluate(None, valid), 4) if valid else None,
        "validation_by_group": by_group,
        "features_from_cache": cached,
        "query_adapter_folds": str(args.query_adapter_folds) if args.query_adapter_folds else None,
        "groups": {k: len(v) for k, v in data.items()},
        "valid_groups": [g for g in args.valid if g in data],
        "seconds": round(time.perf_counter() - t0, 1),
        "command": "python -m bench.train_ranker "
        + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ranker.json").write_text(final.to_json(training=report) + "\n")
    write_card(args.out, report, final)
    print(json.dumps(report, indent=2))
    return report


def group_features(
    args: argparse.Namespace,
    embedder: Any,
    *,
    cache_dir: Path = CACHE_DIR,
) -> tuple[dict[str, list[tuple[np.ndarray, np.ndarray]]], list[str]]:
    """Each selected group's (features, labels) per query, and the groups read from the cache.

    Features are cached per group and per version of the code that computes them, so refitting
    never re-retrieves and an edited feature or retrieval stage never reads stale ones."""
    data: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    cached: list[str] = []
    key = (
        feature_key()
    )  # once, before any group: an edit during a long run must not mislabel a cache
    for g in selected_groups(args):
        group_embedder, tag = _group_embedder(embedder, args.query_adapter_folds, g.name)
        tag = _embedder_tag(embedder) + tag
        saved = g / f"features-{len(FEATURES)}-{key}{tag}-{args.limit or 'all'}.pkl"
        if saved.exists():
            data[g.name] = pickle.loads(saved.read_bytes())
            cached.append(g.name)
        else:
            data[g.name] = asyncio.run(
                collect(
                    g,
                    embedder=group_embedder,
                    limit=args.limit,
                    progress=not getattr(args, "quiet", False),
                    cache_dir=cache_dir,
                )
            )
            saved.write_bytes(pickle.dumps(data[g.name]))
        print(f"{g.name}: {len(data[g.name])} queries", file=sys.stderr)
    return data, cached


def _embedder_tag(embedder: Any) -> str:
    """A cache-name tag for the embedder the dense features come from. Empty for the bundled
    model, whose caches predate the tag; any other (a fine-tuned one) gets its own files."""
    import hashlib

    from liminalis.adapters.sentence_transformers import BUNDLED_MINILM

    model_id = getattr(embedder, "model_id", "")
    if model_id.startswith(BUNDLED_MINILM + "@"):
        return ""
    return "-e" + hashlib.blake2b(model_id.encode(), digest_size=4).hexdigest()


def _group_embedder(embedder: Any, folds: Path | None, group: str) -> tuple[Any, str]:
    """The embedder a group's features are collected with, and a cache-name tag for it: with
    ``folds``, the group's out-of-fold query adapter on top (stacking without leakage)."""
    if folds is None:
        return embedder, ""
    import hashlib

    from liminalis.retrieval.query_adapter import AdaptedEmbedder, QueryAdapter

    path = folds / f"{group}.npz"
    adapter = QueryAdapter.load(path)
    if adapter.base_model != embedder.model_id:
        raise SystemExit(f"{path} was fit for {adapter.base_model}, not {embedder.model_id}")
    tag = hashlib.blake2b(path.read_bytes(), digest_size=4).hexdigest()
    return AdaptedEmbedder(embedder, adapter), f"-qa{tag}"


def write_card(out: Path, report: dict[str, Any], model: LearnedRanker) -> None:
    """The model card: what it is, its data and their licences, the command, validation numbers."""
    weights = "\n".join(
        f"| {f} | {w:+.3f} |"
        for f, w in sorted(zip(FEATURES, model.weights, strict=True), key=lambda fw: -abs(fw[1]))
    )
    valid = ", ".join(f"l2 {k}: {v}" for k, v in report["validation_mrr"].items())
    by_group = "; ".join(
        f"{k} {v['fused']} → {v['learned']}" for k, v in report["validation_by_group"].items()
    )
    cache_note = (
        f" (features of {len(report['features_from_cache'])} groups read from an earlier run's cache; "
        "a run from scratch ingests and embeds every group first, about 35 minutes)"
        if report["features_from_cache"]
        else " (ingest and embedding of the groups included)"
    )
    dense_note = (
        "## Dense features\nEach group's features were collected with the query adapter fit on the "
        "*other* groups (`bench.train_query_adapter --folds`), so the dense scores it learned to weigh "
        "are out-of-fold, as on a campaign it never saw.\n\n"
        if report.get("query_adapter_folds")
        else ""
    )
    from liminalis.adapters.sentence_transformers import BUNDLED_MINILM

    if model.embedder and not model.embedder.startswith(BUNDLED_MINILM + "@"):
        dense_note += (
            f"## Dense features: a fine-tuned embedder\nThe dense features come from `{model.embedder}` "
            "(`--embedder`). Fit the ranker only on groups that embedder was *not* trained on (its card "
            "lists them), so its scores are what it gives on a campaign it never saw: a ranker fit on the "
            "embedder's own training groups learns to over-trust the dense arm. `ranker.json` records the "
            "embedder's `model_id`; a service configured with another embedder logs a warning at start.\n\n"
        )
    # A hand-written "## Why …" section (the feature choice and its evidence) survives a refit.
    card = out / "README.md"
    old_card = card.read_text() if card.exists() else ""
    at = old_card.find("\n## Why ")
    kept = old_card[at:] if at >= 0 else ""
    kind = (
        "A linear listwise ranker (ListNet top-one)"
        if model.hidden is None
        else f"A listwise ranker (ListNet top-one), linear plus a {model.hidden[0].shape[1]}-unit tanh hidden layer,"
    )
    card.write_text(f"""# Liminalis learned document ranker

{kind} over {len(FEATURES)} retrieval features
(liminalis/retrieval/learned.py) that re-orders the documents of the fused pool. Trained by
`bench/train_ranker.py`; weights, feature means and scales live in `ranker.json` (numpy only).

## Training data and licences
- FairytaleQA training stories (shared/bench/train/fairytaleqa-train): questions Apache-2.0; stories public domain.
- Critical Role campaign 1 episodes 22–115 (shared/bench/train/crd3-train): CC BY-SA 4.0 — Critical Role Wiki
  contributors; CRTranscript volunteers; Rameshkumar & Bailey, "Storytelling with Dialogue: A Critical Role
  Dungeons and Dragons Dataset", ACL 2020. This model inherits that licence and attribution.
- Each corpus is cut into campaign-sized groups of whole stories / episodes; queries per group:
  {", ".join(f"{k} {v}" for k, v in report["groups"].items())}.
- No dev or evaluation set was used for training or model selection. The L2 weight was chosen on the
  held-out groups {", ".join(report["valid_groups"]) or "(none)"}; the final model is fit on every group.

## Command
`{report["command"]}`

{dense_note}## Validation (held-out groups; MRR over each query's fused-pool documents)
- fused order: {report["validation_fused_mrr"]}
- learned: {valid} (chosen: l2 {report["l2"]:g})
- by held-out group (fused → learned): {by_group}
- {report["seconds"]} s on 2 CPU cores{cache_note}

## {"Linear weights" if model.hidden is not None else "Weights"} (standardised features, largest first)
| feature | weight |
|---|---|
{weights}
{kept}""")


if __name__ == "__main__":
    main()
