"""Scale benchmark: one campaign of 1,000, 5,000 and 10,000 documents, end to end.

    python -m bench.scale [--sizes 1000,5000,10000] [--doc-chars 1500] [--queries 60]
                          [--corpora DIR ...] [--out FILE.json] [--json]

Each size runs in a fresh process (its peak RSS is its own) over a fresh data folder, building
the engine as ``bot/main.py`` does (the shipped embedder, ranker and reranker; Milvus Lite; no API
key). It reports:

- **ingest**: a first full ingest's seconds, documents/s and passages/s, the share of the ingest
  spent inside the embedder (``embed_share = Σ embed_passages wall time / ingest wall time``) and
  the longest event-loop stall;
- **catalog**: the snapshot (documents and passages read from SQLite, then the catalog) and the
  players' BM25 indexes, each timed alone, and their background rebuild after the ingest;
- **queries**: p50/p95 of ``hybrid`` (dense + lexical over the contextual index, fused) and
  ``full`` (hybrid + the learned ranker + the cross-encoder), over the same questions at every
  size, asked one at a time with the players' lens; and one Milvus Lite search (the dense arm's);
- **tick**: the scheduler's tick on an unchanged campaign (every file as it was: the median of
  three ticks' seconds and their longest stall), and after a one-file edit (seconds, passages re-embedded, longest
  stall; then the background rebuild of the snapshot and the next question's latency);
- **restart**: a new process's start check (every vector id against SQLite) and its first tick,
  which reads only the files whose stored stat signature no longer holds (none here);
- **memory**: peak RSS of the process and the resident memory the campaign added once its
  snapshot, indexes and caches exist (RSS after the queries − RSS with the models loaded).

A stall is measured by :class:`bench.load.Heartbeat` (a task that sleeps 10 ms; the gap beyond
that is time the loop could not run anything else): a Discord interaction not acknowledged in 3 s
is lost, so every stall on the loop is latency for every user.

**Documents.** The corpora (default: every ``corpus/`` under shared/bench's train and dev folders)
are cut at paragraph ends into pieces of about ``--doc-chars`` characters, the size of a lore note
or a scene; the pieces are taken round-robin over the source files (every source's first piece,
then every source's second …) so a campaign of N documents is the first N of one fixed list and
each size contains the smaller ones. One in ten goes under ``gm/`` (GM-only), as a campaign keeps
its secrets. The questions are the dev sets' queries, the same at every size.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import percentile
from bench.load import Heartbeat

__all__ = ["build_documents", "main", "run_one"]

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "bench"
DEFAULT_SIZES = (1000, 5000, 10000)
SLUG = "scale"
_PARA = re.compile(r"\n\s*\n")


def default_corpora() -> list[Path]:
    """Every ``corpus/`` folder under shared/bench (dev sets and the training split)."""
    return sorted(p for p in SHARED.glob("**/corpus") if p.is_dir())


def _pieces(text: str, target: int) -> list[str]:
    """``text`` cut at paragraph ends into pieces of at least ``target`` characters (the last
    may be shorter); a paragraph longer than the target is one piece."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for para in _PARA.split(text):
        para = para.strip()
        if not para:
            continue
        cur.append(para)
        size += len(para) + 2
        if size >= target:
            out.append("\n\n".join(cur))
            cur, size = [], 0
    if cur:
        out.append("\n\n".join(cur))
    return out


def build_documents(
    corpora: Sequence[Path], n: int, *, doc_chars: int = 1500
) -> list[tuple[str, str]]:
    """The first ``n`` documents ``(relative path, markdown)`` of the fixed list (module doc)."""
    sources: list[tuple[str, str, list[str]]] = []  # (id, title, pieces)
    for corpus in corpora:
        tag = corpus.parent.name
        for f in sorted(corpus.glob("*.md")):
            raw = f.read_text(encoding="utf-8")
            first, _, body = raw.partition("\n")
            title = first.lstrip("# ").strip() or f.stem
            pieces = _pieces(body, doc_chars)
            if pieces:
                sources.append((f"{tag}-{f.stem}", title, pieces))
    docs: list[tuple[str, str]] = []
    depth = 0
    while len(docs) < n:
        added = False
        for sid, title, pieces in sources:
            if depth < len(pieces):
                added = True
                k = len(docs)
                folder = "gm" if k % 10 == 9 else sid.split("-", 1)[0]
                name = f"{folder}/{sid}-{depth + 1}.md"
                head = title if len(pieces) == 1 else f"{title}, part {depth + 1}"
                docs.append((name, f"# {head}\n\n{pieces[depth]}\n"))
                if len(docs) == n:
                    break
        if not added:
            raise SystemExit(f"the corpora hold only {len(docs)} pieces; asked for {n}")
        depth += 1
    return docs


def load_questions(corpora: Sequence[Path], n: int) -> list[str]:
    """``n`` queries from the sets beside the corpora (``queries.jsonl``; the dev sets' where
    there are dev sets), in a fixed order."""
    sets = [c.parent for c in corpora if (c.parent / "queries.jsonl").exists()]
    sets = [s for s in sets if "dev" in s.name] or sets
    qs: list[str] = []
    for folder in sets:
        for line in (folder / "queries.jsonl").read_text(encoding="utf-8-sig").splitlines():
            if line.strip():
                qs.append(str(json.loads(line)["query"]))
    random.Random(7).shuffle(qs)
    if not qs:
        raise SystemExit("no queries.jsonl beside the corpora: nothing to ask")
    return (qs * (n // len(qs) + 1))[:n]


def rss_mb() -> float:
    """Resident memory now (MB), from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _size(folder: Path, pattern: str) -> int:
    """Bytes of the files under ``folder`` matching ``pattern``."""
    return sum(p.stat().st_size for p in folder.glob(pattern) if p.is_file())


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _TimedEmbedder:
    """Counts the wall time and texts of ``embed_passages`` on the engine's embedder (wrapped on
    the instance, so every holder of the embedder is counted). ``fake``: random unit vectors
    instead of the model, to see what besides the embedder grows with a campaign (never for
    recorded numbers)."""

    def __init__(self, embedder: Any, *, fake: bool = False) -> None:
        self.seconds = 0.0
        self.texts = 0
        inner = embedder.embed_passages
        if fake:
            import numpy as np

            dim = embedder.dim
            rng = np.random.default_rng(0)

            async def inner(texts: Sequence[str]) -> Any:
                v = rng.standard_normal((len(texts), dim)).astype(np.float32)
                return v / np.linalg.norm(v, axis=1, keepdims=True)

        async def timed(texts: Sequence[str]) -> Any:
            t = time.perf_counter()
            try:
                return await inner(texts)
            finally:
                self.seconds += time.perf_counter() - t
                self.texts += len(texts)

        embedder.embed_passages = timed

    def take(self) -> tuple[float, int]:
        out = (self.seconds, self.texts)
        self.seconds, self.texts = 0.0, 0
        return out


async def _timed(coro: Any, beat: Heartbeat) -> tuple[Any, float, float]:
    beat.reset()
    t = time.perf_counter()
    out = await coro
    return out, time.perf_counter() - t, beat.reset()


async def _queries(
    engine: Any, questions: Sequence[str], params: Any, beat: Heartbeat
) -> dict[str, float]:
    from liminalis.errors import LiminalisError

    lat: list[float] = []
    beat.reset()
    for q in questions[:3]:  # warm: the lens's first query builds its indexes
        await engine.retrieve(SLUG, q, frozenset({"players"}), params=params)
    for q in questions:
        t = time.perf_counter()
        try:
            await engine.retrieve(SLUG, q, frozenset({"players"}), params=params)
        except LiminalisError:
            continue
        lat.append(time.perf_counter() - t)
    return {
        "p50_ms": round(percentile(lat, 50) * 1000, 1),
        "p95_ms": round(percentile(lat, 95) * 1000, 1),
        "asked": len(lat),
        "max_stall_ms": round(beat.reset() * 1000, 1),
    }


async def run_one(
    n: int,
    *,
    corpora: Sequence[Path],
    doc_chars: int,
    questions: int,
    root: Path,
    fake_embedder: bool = False,
) -> dict[str, Any]:
    """Build the campaign of ``n`` documents under ``root`` and measure it (module doc)."""
    from bot.main import build_engine
    from bot.settings import Settings
    from liminalis import research

    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    docs = build_documents(corpora, n, doc_chars=doc_chars)
    camp = root / "campaigns" / SLUG
    for rel, text in docs:
        path = camp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (camp / "campaign.toml").write_text('name = "Scale"\ngm_paths = ["gm/**"]\n', encoding="utf-8")
    asked = load_questions(corpora, questions)
    settings = dataclasses.replace(
        Settings(),
        data_dir=root / "data",
        campaigns_dir=root / "campaigns",
        default_campaign=SLUG,
        anthropic_api_key="",
    )
    out: dict[str, Any] = {
        "documents": n,
        "doc_chars_mean": round(sum(len(t) for _, t in docs) / n),
        "corpus_mb": round(sum(len(t.encode()) for _, t in docs) / 1e6, 2),
    }
    async with Heartbeat() as beat:
        t = time.perf_counter()
        async with build_engine(settings) as engine:
            await asyncio.to_thread(lambda: engine.embedder.dim)  # the weights, before timing
            out["startup_s"] = round(time.perf_counter() - t, 2)
            rss_models = rss_mb()
            out["rss_models_mb"] = round(rss_models)
            timer = _TimedEmbedder(engine.embedder, fake=fake_embedder)

            report, secs, stall = await _timed(engine.ingest(SLUG), beat)
            embed_s, embedded = timer.take()
            out["ingest"] = {
                "seconds": round(secs, 1),
                "documents": report.documents,
                "skipped": len(report.skipped),
                "passages": report.passages_added,
                "embedded_texts": embedded,
                "docs_per_s": round(report.documents / secs, 2),
                "passages_per_s": round(report.passages_added / secs, 2),
                "embed_seconds": round(embed_s, 1),
                "embed_share": round(embed_s / secs, 3),
                "max_stall_ms": round(stall * 1000, 1),
            }

            # The ingest started the background rebuild of the snapshot and indexes.
            _, secs, stall = await _timed(engine.prewarmed(SLUG), beat)
            lens = frozenset({"players"})
            base = engine.retrieval_params
            parts = await research.snapshot_timings(engine, SLUG, lens)
            cat = await research.catalog(engine, SLUG)
            out["catalog"] = {
                "background_rebuild_s": round(secs, 2),
                "background_max_stall_ms": round(stall * 1000, 1),
                "read_s": round(parts["read_s"], 2),
                "build_s": round(parts["catalog_s"], 2),
                "bm25_build_s": round(parts["bm25_passages_s"] + parts["bm25_documents_s"], 2),
                "passages": len(cat.passages),
            }

            hybrid = dataclasses.replace(base, rerank_enabled=False, learned_enabled=False)
            full = dataclasses.replace(base, rerank_enabled=True, learned_enabled=True)
            out["hybrid"] = await _queries(engine, asked, hybrid, beat)
            out["full"] = await _queries(engine, asked, full, beat)

            lat = []
            for q in asked[:30]:
                vec = await engine.embedder.embed_query(q)
                t = time.perf_counter()
                await research.vector_search(engine, SLUG, vec, lens, top_k=base.dense_top_k)
                lat.append(time.perf_counter() - t)
            out["milvus_search"] = {
                "p50_ms": round(percentile(lat, 50) * 1000, 1),
                "p95_ms": round(percentile(lat, 95) * 1000, 1),
            }

            ticks = []
            for _ in range(3):
                rep, secs, stall = await _timed(engine.ingest(SLUG), beat)
                ticks.append((secs, stall, rep.passages_added + rep.passages_removed))
            out["tick_unchanged"] = {
                "seconds": round(sorted(t[0] for t in ticks)[1], 2),
                "seconds_max": round(max(t[0] for t in ticks), 2),
                "max_stall_ms": round(max(t[1] for t in ticks) * 1000, 1),
                "passages_changed": sum(t[2] for t in ticks),
            }

            rel = docs[len(docs) // 2][0]
            path = camp / rel
            path.write_text(
                path.read_text(encoding="utf-8")
                + "\nA new paragraph the GM added after the session, about the lantern road.\n",
                encoding="utf-8",
            )
            timer.take()
            rep, secs, stall = await _timed(engine.ingest(SLUG), beat)
            _, embedded = timer.take()
            _, warm_s, warm_stall = await _timed(engine.prewarmed(SLUG), beat)
            t = time.perf_counter()
            await engine.retrieve(SLUG, asked[0], lens, params=full)
            first_ms = (time.perf_counter() - t) * 1000
            out["tick_one_edit"] = {
                "seconds": round(secs, 2),
                "passages_added": rep.passages_added,
                "embedded_texts": embedded,
                "max_stall_ms": round(stall * 1000, 1),
                "background_rebuild_s": round(warm_s, 2),
                "background_max_stall_ms": round(warm_stall * 1000, 1),
                "next_question_full_ms": round(first_ms, 1),
            }
            out["disk_mb"] = {
                "sqlite": round(_size(root / "data", "liminalis.sqlite3*") / 1e6, 1),
                "milvus": round(_size(root / "data" / "milvus.db", "**/*") / 1e6, 1),
            }
            out["rss_after_mb"] = round(rss_mb())
            out["campaign_memory_mb"] = round(rss_mb() - rss_models)
        # A restart: serve's start check (every vector id against SQLite), then its first tick,
        # which trusts the file signatures the last process stored.
        async with build_engine(settings) as engine:
            _, secs, stall = await _timed(engine.ensure_indexed(SLUG), beat)
            rep, tick_s, tick_stall = await _timed(engine.ingest(SLUG), beat)
            out["restart"] = {
                "start_check_s": round(secs, 2),
                "start_check_max_stall_ms": round(stall * 1000, 1),
                "first_tick_s": round(tick_s, 2),
                "first_tick_max_stall_ms": round(tick_stall * 1000, 1),
                "passages_changed": rep.passages_added + rep.passages_removed,
            }
    out["peak_rss_mb"] = round(peak_rss_mb())
    return out


def _child(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="liminalis-scale-") as tmp:
        r = asyncio.run(
            run_one(
                args.one,
                corpora=args.corpora,
                doc_chars=args.doc_chars,
                questions=args.queries,
                root=Path(tmp),
                fake_embedder=args.fake_embedder,
            )
        )
    print(json.dumps(r), flush=True)
    return 0


def print_table(runs: Sequence[dict[str, Any]]) -> None:
    rows = [
        ("documents", lambda r: f"{r['documents']:,}"),
        ("corpus MB", lambda r: r["corpus_mb"]),
        ("passages", lambda r: f"{r['ingest']['passages']:,}"),
        ("ingest s", lambda r: r["ingest"]["seconds"]),
        ("docs/s", lambda r: r["ingest"]["docs_per_s"]),
        ("passages/s", lambda r: r["ingest"]["passages_per_s"]),
        ("embed share", lambda r: r["ingest"]["embed_share"]),
        ("ingest stall ms", lambda r: r["ingest"]["max_stall_ms"]),
        ("snapshot read s", lambda r: r["catalog"]["read_s"]),
        ("catalog build s", lambda r: r["catalog"]["build_s"]),
        ("BM25 build s", lambda r: r["catalog"]["bm25_build_s"]),
        ("bg rebuild s", lambda r: r["catalog"]["background_rebuild_s"]),
        ("bg rebuild stall ms", lambda r: r["catalog"]["background_max_stall_ms"]),
        ("hybrid p50/p95 ms", lambda r: f"{r['hybrid']['p50_ms']} / {r['hybrid']['p95_ms']}"),
        ("full p50/p95 ms", lambda r: f"{r['full']['p50_ms']} / {r['full']['p95_ms']}"),
        ("Milvus search p50 ms", lambda r: r["milvus_search"]["p50_ms"]),
        ("tick, unchanged s", lambda r: r["tick_unchanged"]["seconds"]),
        ("tick stall ms", lambda r: r["tick_unchanged"]["max_stall_ms"]),
        ("tick, one edit s", lambda r: r["tick_one_edit"]["seconds"]),
        ("edit stall ms", lambda r: r["tick_one_edit"]["max_stall_ms"]),
        ("edit bg rebuild s", lambda r: r["tick_one_edit"]["background_rebuild_s"]),
        ("next question ms", lambda r: r["tick_one_edit"]["next_question_full_ms"]),
        ("restart check s", lambda r: r["restart"]["start_check_s"]),
        ("restart tick s", lambda r: r["restart"]["first_tick_s"]),
        ("restart tick stall ms", lambda r: r["restart"]["first_tick_max_stall_ms"]),
        ("campaign memory MB", lambda r: r["campaign_memory_mb"]),
        ("SQLite / Milvus MB", lambda r: f"{r['disk_mb']['sqlite']} / {r['disk_mb']['milvus']}"),
        ("peak RSS MB", lambda r: r["peak_rss_mb"]),
    ]
    print(f"{'':>22}" + "".join(f"{r['documents']:>16,}" for r in runs))
    for name, get in rows:
        print(f"{name:>22}" + "".join(f"{get(r)!s:>16}" for r in runs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--doc-chars", type=int, default=1500, help="about this many per document")
    ap.add_argument("--queries", type=int, default=60, help="questions per configuration")
    ap.add_argument("--corpora", type=Path, nargs="*", default=None, help="corpus/ folders")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument(
        "--fake-embedder",
        action="store_true",
        help="random vectors instead of the model: what else grows with size (not for results)",
    )
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one size
    args = ap.parse_args(argv)
    args.corpora = args.corpora or default_corpora()
    if not args.corpora:
        raise SystemExit(f"no corpus/ folders under {SHARED}; give --corpora")
    if args.one:
        return _child(args)
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--sizes: comma-separated integers, not {args.sizes!r}") from None
    if not sizes or min(sizes) < 10:
        raise SystemExit("--sizes: each at least 10 documents")
    runs = []
    for n in sizes:
        cmd = [sys.executable, "-m", "bench.scale", "--one", str(n)]
        cmd += ["--doc-chars", str(args.doc_chars), "--queries", str(args.queries)]
        cmd += ["--corpora", *map(str, args.corpora)]
        cmd += ["--fake-embedder"] if args.fake_embedder else []
        print(f"[scale] {n:,} documents …", file=sys.stderr, flush=True)
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
        if done.returncode != 0:
            raise SystemExit(f"the run of {n} documents failed (exit {done.returncode})")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    result = {
        "cores": os.cpu_count(),
        "doc_chars": args.doc_chars,
        "fake_embedder": args.fake_embedder,
        "runs": runs,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print_table(runs)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
