"""Memory benchmark: conversations built from a bench set, priced per follow-up handling mode.

    python -m bench.memory DIR [DIR ...] [--out results.json] [--limit N] [--mode M ...]

Cases (built from the data by the rules below; groups are a story in FairytaleQA — the doc id
before ``-sNN`` — and an episode in CRD3 — the doc id before ``_NN``):

* ``follow-up`` — up to four earlier questions of one group (FairytaleQA: questions about the
  story's earlier sections, in section order; CRD3: the episode's consecutive summary chunks),
  then a question about a later section / the next chunk with the group's names replaced by
  pronouns (proper names taken from the group's titles and its documents' recurring
  capitalised names);
* ``switch`` — eight questions of one group, then a fully named question about another;
* ``cold`` — eight questions of one group, then a question that names (by an exact proper name)
  a group the history never touched;
* ``campaign`` — the questions of several groups replayed in order, then a name-less question
  about one of the two most recently discussed groups.

Modes: ``off`` (stateless retrieval), ``concat`` (the question plus the previous turn's),
``product`` (the rolling chat memory's follow-up reuse: liminalis.context.rolling through the
Responder), ``loop`` and ``resonance`` (the campaign memory, liminalis.memory). History turns go
through the Responder (offline answerer), so every mode remembers what the product would.

Metrics per case, on the last question: hit@1, hit@10, MRR at document level and group_hit@10
(any document of the target's group in the top ten).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import (
    BenchSet,
    bench_engine,
    doc_metrics,
    load_set,
    mean,
    percentile,
    unique_label,
)
from liminalis import research
from liminalis.answer import Responder
from liminalis.memory.recall import MemoryModel, MemoryParams
from liminalis.store.graph import MemoryStore
from liminalis.testing import FrozenClock

__all__ = ["CASES", "MODES", "build_cases", "group_of", "main", "run"]

MODES = ["off", "concat", "product", "loop", "resonance"]
CASES = ["follow-up", "switch", "cold", "campaign"]
LENS = frozenset({"players"})
_GROUP = re.compile(r"^(.*?)(?:[-_](?:s|part|p)?\d+)$")
_NAME = re.compile(r"(?<![\w'’])[A-Z][a-z'’\-]+(?:\s+[A-Z][a-z'’\-]+)*")
_COMMON = frozenset(
    "the a an and but or so then when what who why how where which did does do is was were "
    "are this that these those there his her their they he she it its after before while "
    "during in on at to for of with from by as one two three first second".split()
)


def group_of(doc_id: str) -> str:
    """A story (``black-sheep-s05`` → ``black-sheep``) or an episode (``C1E001_03`` → ``C1E001``)."""
    m = _GROUP.match(doc_id)
    return m.group(1) if m else doc_id


def _order(doc_id: str) -> int:
    m = re.search(r"(\d+)$", doc_id)
    return int(m.group(1)) if m else 0


def _group_names(bench: BenchSet, group: str, docs: list[str]) -> set[str]:
    """The group's proper names: title words and capitalised names met in two of its documents
    (or three times in one)."""
    count: Counter[str] = Counter()
    caps: Counter[str] = Counter()
    lower: Counter[str] = Counter()
    for d in docs:
        path = bench.corpus / f"{d}.md"
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        title = text.split("\n", 1)[0].lstrip("# ")
        for n in _NAME.findall(re.sub(r"\((section|part).*$|- part.*$", "", title)):
            count[n] += 3
        found = _NAME.findall(text)
        caps.update(found)
        for n in set(found):
            count[n] += 1
        lower.update(w for w in re.findall(r"[a-z][a-z'’\-]+", text))
    # A proper name is written capitalised far more often than not ("Some" and "Then" are not).
    return {
        n
        for n, c in count.items()
        if c >= 2
        and n.split()[0].lower() not in _COMMON
        and len(n) > 2
        and (len(n.split()) > 1 or caps[n] >= 3 * lower[n.lower()])
    }


def strip_names(query: str, names: set[str]) -> str:
    """The question with the group's names replaced by pronouns ("their" for a possessive)."""
    out = query
    for n in sorted(names, key=len, reverse=True):
        out = re.sub(
            rf"(?:\bthe\s+)?\b{re.escape(n)}(['’]s)?\b",
            lambda m: "their" if m.group(1) else "they",
            out,
            flags=re.IGNORECASE,
        )
    return re.sub(r"\s+", " ", out).strip()


def _named(query: str, names: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}\b", query) for n in names)


def build_cases(bench: BenchSet, *, per_case: int = 40) -> dict[str, list[dict[str, Any]]]:
    """Conversations ``{"history": [q, …], "query": str, "relevant": [...], "group": str}``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for q in bench.queries:
        if q["relevant"] and q["query"].strip():
            groups.setdefault(group_of(q["relevant"][0]), []).append(q)
    for qs in groups.values():
        qs.sort(key=lambda q: (min(_order(d) for d in q["relevant"]), q["id"]))
    docs = {
        g: sorted({p.stem for p in bench.corpus.glob("*.md") if group_of(p.stem) == g})
        for g in groups
    }
    names = {g: _group_names(bench, g, docs[g]) for g in groups}
    order = list(groups)
    out: dict[str, list[dict[str, Any]]] = {c: [] for c in CASES}

    def case(history: list[dict[str, Any]], q: dict[str, Any], text: str) -> dict[str, Any]:
        return {
            "history": [h["query"] for h in history],
            "query": text,
            "relevant": q["relevant"],
            "group": group_of(q["relevant"][0]),
            "id": q["id"],
        }

    for g in order:
        qs = groups[g]
        for i, q in enumerate(qs):
            first = min(_order(d) for d in q["relevant"])
            earlier = [h for h in qs[:i] if min(_order(d) for d in h["relevant"]) < first][-4:]
            stripped = strip_names(q["query"], names[g])
            if len(earlier) >= 2 and stripped != q["query"]:
                out["follow-up"].append(case(earlier, q, stripped))
    for k, g in enumerate(order):
        other = order[(k + 1) % len(order)]
        if len(groups[g]) >= 4 and groups[other]:
            q = next(
                (x for x in groups[other] if _named(x["query"], names[other])), groups[other][0]
            )
            out["switch"].append(case(groups[g][:8], q, q["query"]))
        far = order[(k + len(order) // 2) % len(order)]
        named = [x for x in groups[far] if _named(x["query"], names[far])]
        if len(groups[g]) >= 4 and named and far != g:
            out["cold"].append(case(groups[g][:8], named[-1], named[-1]["query"]))
    stream = [q for g in order for q in groups[g][:6]]
    for end in range(12, len(stream)):
        recent = {group_of(h["relevant"][0]) for h in stream[max(0, end - 8) : end]}
        nxt = stream[end]
        g = group_of(nxt["relevant"][0])
        later = [x for x in groups[g][6:] if g in recent]
        if later and stream[end - 1] is not nxt:
            target = later[end % len(later)]
            stripped = strip_names(target["query"], names[g])
            if stripped != target["query"]:
                out["campaign"].append(case(stream[max(0, end - 12) : end], target, stripped))
    for c in CASES:  # an even spread over the set, not its first groups only
        xs = out[c]
        if len(xs) > per_case:
            step = len(xs) / per_case
            out[c] = [xs[int(i * step)] for i in range(per_case)]
    return out


def _metrics(ranked: list[str], relevant: list[str], group: str) -> dict[str, float]:
    m = doc_metrics(ranked, relevant)
    return {
        "hit@1": m["hit@1"],
        "hit@10": m["hit@10"],
        "mrr": m["mrr"],
        "group_hit@10": float(any(group_of(d) == group for d in ranked[:10])),
    }


async def _conversation(
    engine: Any,
    slug: str,
    mode: str,
    conv: dict[str, Any],
    clock: FrozenClock,
    chat: str,
    lat: list[float],
) -> list[str]:
    responder = Responder(engine, clock=clock)
    if mode in {"loop", "resonance"}:
        await engine.memory.clear(slug)
    if mode in {"product", "loop", "resonance"}:
        for h in conv["history"]:
            await responder.respond(slug, h, LENS, chat=chat)
            clock.advance(seconds=90)
    query = conv["query"]
    if mode == "concat" and conv["history"]:
        query = f"{query} {conv['history'][-1]}"
    t = time.perf_counter()
    if mode == "product":
        cat = await research.catalog(engine, slug)
        mem = await responder.memory.load(slug, chat, LENS)
        if responder.memory.can_reuse(mem, query, generation=cat.generation):
            ranked = [d["doc_id"] for d in mem.loaded]
        else:
            ranked = list((await engine.retrieve(slug, query, LENS, chat=chat)).ranked_doc_ids)
    else:
        bundle = await engine.retrieve(slug, query, LENS)
        ranked = list(bundle.ranked_doc_ids)
        if "memory" in bundle.timings_ms:
            lat.append(bundle.timings_ms["memory"])
    lat.append((time.perf_counter() - t) * 1000) if mode not in {"loop", "resonance"} else None
    return ranked


async def run(
    dirs: list[Path],
    modes: list[str],
    *,
    limit: int | None = None,
    per_case: int = 40,
    embedder: Any = None,
    cache_dir: Path | None = None,
    progress: bool = True,
    memory_params: MemoryParams | None = None,
    ranker_spec: str = "auto",
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    if embedder is None:
        from liminalis.models import load_embedder

        embedder = load_embedder("auto", adapter="auto")
    ranker = None
    if ranker_spec != "none":
        from liminalis.models import load_learned_ranker

        ranker = load_learned_ranker(ranker_spec)
    results: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for d in dirs:
        bench = load_set(d, limit=limit)
        label = unique_label(bench, results)
        cases = build_cases(bench, per_case=per_case)
        results[label] = {}
        kw: dict[str, Any] = {"cache_dir": cache_dir} if cache_dir else {}
        async with bench_engine(
            bench, embedder=embedder, contextual=True, progress=progress, ranker=ranker, **kw
        ) as (engine, slug):
            engine.retrieval_params = dataclasses.replace(
                engine.retrieval_params, rerank_enabled=False
            )
            clock = FrozenClock()
            engine.memory = MemoryModel(
                MemoryStore(engine.db), clock=clock, params=memory_params or MemoryParams()
            )
            await engine.retrieve(slug, "warm up", LENS)
            for mode in modes:
                engine.memory_enabled = mode in {"loop", "resonance"}
                if engine.memory_enabled:
                    engine.memory.params = dataclasses.replace(
                        engine.memory.params, orchestration=mode
                    )
                rows: dict[str, dict[str, float]] = {}
                lat: list[float] = []
                for case_name in CASES:
                    per: list[dict[str, float]] = []
                    for n, conv in enumerate(cases[case_name]):
                        chat = f"{mode}-{case_name}-{n}"
                        ranked = await _conversation(engine, slug, mode, conv, clock, chat, lat)
                        per.append(_metrics(ranked, conv["relevant"], conv["group"]))
                        clock.advance(hours=6)
                    rows[case_name] = {
                        k: mean([r[k] for r in per])
                        for k in ("hit@1", "hit@10", "mrr", "group_hit@10")
                    }
                    rows[case_name]["n"] = float(len(per))
                rows["_latency"] = {"p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95)}
                results[label][mode] = rows
                if progress:
                    print(f"[{label}] {mode} done", file=sys.stderr)
            engine.memory_enabled = False
    return results


async def cost(
    src: Path, n_docs: int, *, turns: int = 60, work: Path | None = None
) -> dict[str, float]:
    """Per-turn memory work on a campaign of ``n_docs`` documents: ``src``'s corpus copied until
    it has that many (hash embedder, in-memory vectors: only the memory's own time is measured,
    its graph built once up front). Returns p50 / p95 ms of recall + record and the graph size."""
    import shutil
    import tempfile

    from liminalis.campaign import CampaignConfig
    from liminalis.engine import Engine
    from liminalis.ingest.indexer import IngestOptions
    from liminalis.store.sqlite import Database
    from liminalis.testing import HashEmbedder, MemoryVectorStore

    bench = load_set(src)
    files = sorted(bench.corpus.glob("*.md"))
    tmp = Path(work or tempfile.mkdtemp(prefix="memcost-"))
    corpus = tmp / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    n = 0
    while n < n_docs:
        for f in files:
            if n >= n_docs:
                break
            (corpus / f"c{n // len(files)}-{f.name}").write_text(
                f.read_text(encoding="utf-8"), encoding="utf-8"
            )
            n += 1
    try:
        async with Database(tmp / "db.sqlite3") as db:
            engine = Engine(
                db=db,
                store=MemoryVectorStore(),
                embedder=HashEmbedder(),
                campaigns_dir=tmp / "none",
                ingest_options=IngestOptions(contextual=False),
            )
            config = CampaignConfig(
                slug="cost", name="cost", root=corpus, gm_paths=(), always_include=()
            )
            await engine.register(config)
            await engine.ingest(config)
            clock = FrozenClock()
            model = MemoryModel(MemoryStore(db), clock=clock)
            cat = await research.catalog(engine, "cost")
            t = time.perf_counter()
            graph = await model.graph(cat)
            build_s = time.perf_counter() - t
            lat: list[float] = []
            for q in bench.queries[:turns]:
                trace_bundle = await engine.retrieve("cost", q["query"], LENS)
                t = time.perf_counter()
                rec = await model.recall(
                    cat, q["query"], LENS, retrieved=trace_bundle.ranked_doc_ids
                )
                await model.record(cat, q["query"], LENS, cited=rec.ranked_doc_ids[:3])
                lat.append((time.perf_counter() - t) * 1000)
                clock.advance(seconds=90)
            return {
                "documents": float(len(cat.documents)),
                "chunks": float(len(graph.chunks)),
                "links": float(sum(len(v) for v in graph.out.values())),
                "graph_build_s": build_s,
                "p50_ms": percentile(lat, 50),
                "p95_ms": percentile(lat, 95),
            }
    finally:
        if work is None:
            shutil.rmtree(tmp, ignore_errors=True)


def print_table(results: dict[str, dict[str, dict[str, dict[str, float]]]]) -> None:
    cols = ["hit@1", "hit@10", "mrr", "group_hit@10"]
    for name, modes in results.items():
        print(f"\n{name}")
        print(f"{'mode':<10} {'case':<10} {'n':>4} " + " ".join(f"{c:>13}" for c in cols))
        for mode, rows in modes.items():
            for case, m in rows.items():
                if case.startswith("_"):
                    continue
                print(
                    f"{mode:<10} {case:<10} {int(m.get('n', 0)):>4} "
                    + " ".join(f"{m[c]:>13.3f}" for c in cols)
                )
            lat = rows.get("_latency", {})
            print(
                f"{mode:<10} {'latency':<10}      p50 {lat.get('p50_ms', 0):.1f} ms, p95 {lat.get('p95_ms', 0):.1f} ms"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--mode", action="append", default=None, choices=MODES)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--limit", type=int, default=None, help="first N queries per set")
    ap.add_argument(
        "--per-case", type=int, default=40, help="conversations per case (spread over the set)"
    )
    ap.add_argument("--ranker", default="auto")
    ap.add_argument(
        "--set", action="append", default=[], help="MemoryParams override k=v (sweeps on dev sets)"
    )
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument(
        "--cost",
        type=int,
        default=0,
        help="instead: time per-turn memory work on N documents copied from the first DIR",
    )
    args = ap.parse_args(argv)
    if args.cost:
        out = asyncio.run(cost(args.dirs[0], args.cost))
        print(json.dumps(out, indent=2))
        if args.out:
            args.out.write_text(json.dumps(out, indent=2))
        return 0
    over: dict[str, Any] = {}
    for item in args.set:
        k, _, v = item.partition("=")
        over[k] = (
            v
            if k in {"orchestration", "fusion"}
            else (
                v.lower() in {"1", "true"}
                if k in {"share_context", "arrivals_only", "normalize"}
                else (
                    int(v)
                    if k in {"cycles", "seeds", "recalled_docs", "context_size"}
                    else float(v)
                )
            )
        )
    from liminalis.memory.spreading import SpreadParams

    spread_keys = {f.name for f in dataclasses.fields(SpreadParams)}
    spread_over = {k: over.pop(k) for k in list(over) if k in spread_keys}
    params = MemoryParams(**over, spread=SpreadParams(**spread_over))
    results = asyncio.run(
        run(
            args.dirs,
            args.mode or MODES,
            limit=args.limit,
            per_case=args.per_case,
            progress=not args.no_progress,
            memory_params=params,
            ranker_spec=args.ranker,
        )
    )
    print_table(results)
    if args.out:
        slim = {
            s: {
                m: {c: {k: v for k, v in r.items()} for c, r in rows.items()}
                for m, rows in ms.items()
            }
            for s, ms in results.items()
        }
        args.out.write_text(json.dumps(slim, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
