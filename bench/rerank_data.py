"""Mine the reranker's training data, and the dev pools it is swept on, with the product's own
retrieval: the passages the rerank stage would actually see.

    python -m bench.rerank_data --out DIR [--train-root ../shared/bench/train] [--dev DIR ...]

Why a separate, portable file: training wants a GPU, and a GPU machine here has torch and
transformers but not Milvus Lite or the campaign store. Mining needs the whole engine; training
needs only text. So mining runs here and writes plain gzip'd JSON lines, and
``bench.train_reranker --examples`` trains from that file anywhere.

Training examples (``train.jsonl.gz``): for every query of every training group
(``bench.train_ranker.make_groups``: the same campaign-sized groups the learned ranker was
trained on), the players-lens pool of the top ``POOL`` passages after fusion and the learned
ranker, exactly as the rerank stage receives it. The positive is the passage of a relevant
document that holds most of the evidence text; negatives are the pool's passages from other
documents. A relevant document's other passages are neither: at document level they are hits,
and teaching the model that they are wrong would fight the metric.

Dev pools (``dev-<set>.jsonl.gz``): each dev query's pool (texts, documents, relevant list), so
a trained model can be swept without re-running retrieval; the sweep itself is
``bench.rerank_sweep --scores``. Dev pools are never used for training or checkpoint choice.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gzip
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from liminalis import research

__all__ = [
    "POOL",
    "doc_of_key",
    "mine",
    "evidence_passage",
    "evidence_score",
    "group_of",
    "normalize",
    "read",
    "write",
    "main",
]

ROOT = Path(__file__).resolve().parent.parent
POOL = 40
PLAYERS = frozenset({"players"})
_WS = re.compile(r"\s+")


def normalize(t: str) -> str:
    return _WS.sub(" ", t).strip().lower()


def group_of(doc_id: str) -> str:
    """The story or episode of a training document (fairytaleqa ``<story>-sNN``, crd3
    ``C1E0NN_MM``): validation holds out whole groups."""
    return re.sub(r"(-s\d+|_\d+)$", "", doc_id)


def doc_of_key(key: str) -> str:
    """The document of a pool passage key ``<set>/<doc id>#<hash>``."""
    return key.split("/", 1)[-1].split("#", 1)[0]


def evidence_score(text: str, evidence: Sequence[str]) -> int:
    """Evidence characters a passage holds; ``evidence`` normalised with :func:`normalize`.

    Evidence strings are verbatim substrings of the document; a passage boundary may cut one, so
    a passage is credited for an evidence string when either holds the other's first 200
    characters."""
    t = normalize(text)
    return sum(min(len(e), 400) for e in evidence if e[:200] in t or t[:200] in e)


def evidence_passage(texts: dict[str, str], evidence: Sequence[str]) -> str | None:
    """The passage id (of ``texts``: one document's passages) holding most evidence characters."""
    ev = [normalize(e) for e in evidence if e.strip()]
    best, best_score = None, 0
    for pid, text in texts.items():
        score = evidence_score(text, ev)
        if score > best_score:
            best, best_score = pid, score
    return best


class _PoolRecorder:
    """A Reranker that keeps the passages it is handed and leaves their order alone."""

    model_id = "pool-recorder"

    def __init__(self) -> None:
        self.last: list[str] | None = None

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.last = list(passages)
        return [0.0] * len(passages)


async def mine(
    folder: Path,
    *,
    embedder: Any,
    train: bool,
    limit: int | None = None,
    progress: bool = True,
    cache_dir: Path | None = None,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(rows, passages): one row per query with its pool as passage keys; ``passages`` maps each
    key (``<set>/<passage id>``) to its text. Training rows also name their positive."""
    # Imported here: ``read`` must work where only torch and transformers are installed.
    from bench.common import CACHE_DIR, bench_engine, load_set
    from liminalis.retrieval.retriever import Trace

    bench = load_set(folder, limit=limit)
    rec = _PoolRecorder()
    rows: list[dict[str, Any]] = []
    passages: dict[str, str] = {}
    from liminalis.models import load_learned_ranker

    # The shipped learned ranker orders the pool, as in the product (the set of pool passages is
    # the fused top POOL either way; the order is what depth and the mix prior act on).
    kw = {
        "reranker": rec,
        "progress": progress,
        "cache_dir": cache_dir or CACHE_DIR,
        "ranker": load_learned_ranker("auto"),
    }
    async with bench_engine(bench, embedder=embedder, **kw) as (engine, slug):
        cat = await research.catalog(engine, slug)
        key_of: dict[str, str] = {}
        for pid in cat.passages:
            key_of.setdefault(cat.passage_text(pid), pid)
        params = dataclasses.replace(
            engine.retrieval_params, rerank_depth=POOL, pool=POOL, rerank_mix=None
        )
        t0 = time.perf_counter()
        for n, q in enumerate(bench.queries):
            rec.last = None
            trace = Trace()
            await engine.retrieve(slug, q["query"], PLAYERS, params=params, trace=trace)
            if not rec.last:
                continue
            pids = [key_of[t] for t in rec.last]
            row: dict[str, Any] = {
                "id": q.get("id"),
                "query": q["query"],
                "relevant": q["relevant"],
                "pool": [f"{bench.name}/{p}" for p in pids],
                "docs": [cat.passages[p].doc_id for p in pids],
                # the rerank stage's prior (see liminalis.retrieval.rerank); empty without a ranker
                "learned": {d: round(x, 6) for d, x in trace.learned_scores.items()},
            }
            if train:
                rel = [d for d in q["relevant"] if d in cat.by_doc]
                texts = {p: cat.passage_text(p) for d in rel for p in cat.by_doc[d]}
                pos = evidence_passage(texts, q.get("passages", []))
                if pos is None:
                    continue
                row["positive"] = f"{bench.name}/{pos}"
                row["group"] = f"{bench.name}/{group_of(cat.passages[pos].doc_id)}"
                passages[row["positive"]] = texts[pos]
            for p, key in zip(pids, row["pool"]):
                passages[key] = cat.passage_text(p)
            rows.append(row)
            if progress and (n + 1) % 200 == 0:
                print(
                    f"  {bench.name}: {n + 1}/{len(bench.queries)} queries, {time.perf_counter() - t0:.0f}s",
                    file=sys.stderr,
                )
    return rows, passages


def write(path: Path, rows: list[dict[str, Any]], passages: dict[str, str]) -> None:
    """One gzip'd JSON-lines file: a header line with the passage texts, then one row a query."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"passages": passages}) + "\n")
        for r in rows:
            f.write(json.dumps(r) + "\n")


def read(path: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        passages = json.loads(f.readline())["passages"]
        rows = [json.loads(line) for line in f if line.strip()]
    return rows, passages


def main(argv: Sequence[str] | None = None) -> int:
    from bench.common import CACHE_DIR, add_embedder_arg
    from bench.train_ranker import DEFAULT_TRAIN, make_groups

    ap = argparse.ArgumentParser(
        prog="python -m bench.rerank_data", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--train-root", type=Path, default=DEFAULT_TRAIN)
    ap.add_argument("--groups-dir", type=Path, default=CACHE_DIR / "train-groups")
    ap.add_argument("--no-train", action="store_true", help="mine only the dev pools")
    ap.add_argument("--dev", nargs="*", type=Path, default=[])
    ap.add_argument("--limit", type=int, help="queries per set (a quick run)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument(
        "--query-adapter",
        default="auto",
        help="dense-arm query adapter: auto (models/query-adapter, as the product), none, or a path",
    )
    add_embedder_arg(ap)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from liminalis.models import load_embedder

    # As the product retrieves. On the training groups the shipped adapter has seen their
    # questions, so their dense arm is a little stronger than on a new campaign; the pool is
    # mostly lexical (dense weight 0.05), so the mined data barely shifts.
    embedder = load_embedder(args.embedder, adapter=args.query_adapter)
    if not args.no_train:
        rows: list[dict[str, Any]] = []
        passages: dict[str, str] = {}
        for g in make_groups(args.train_root, args.groups_dir):
            r, p = asyncio.run(
                mine(g, embedder=embedder, train=True, limit=args.limit, progress=not args.quiet)
            )
            rows += r
            passages.update(p)
            print(f"{g.name}: {len(r)} queries", file=sys.stderr)
        write(args.out / "train.jsonl.gz", rows, passages)
        print(f"train: {len(rows)} queries, {len(passages)} passages")
    for d in args.dev:
        r, p = asyncio.run(
            mine(d, embedder=embedder, train=False, limit=args.limit, progress=not args.quiet)
        )
        write(args.out / f"dev-{d.name}.jsonl.gz", r, p)
        print(f"{d.name}: {len(r)} queries, {len(p)} passages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
