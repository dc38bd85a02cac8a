"""Load benchmark: many questions in flight at once through ``BotService.handle``.

    python -m bench.load [DIR] [--questions N] [--concurrency 50,200] [--out FILE.json] [--json]
                         [--no-busy] [--heavy-mb 1,5,10]

Builds the service as ``bot/main.py`` does (the shipped embedder, query adapter, learned ranker
and reranker; Milvus Lite; no API key, so the offline answerer), in a temporary data folder, and
ingests the campaign ``DIR`` (default: the sample campaign, ``campaigns/emberfall``). Then, for
each concurrency level, it sends ``N`` console questions with that many in flight at once and
reports throughput, latency p50/p95/p99, how many questions were answered (a reply that is not
an error), how many answers skipped a stage (their reply carries a "skipped" note, e.g. the
reranker) and the longest event-loop stall: a loop-lag probe schedules itself every 1 ms, and a
stall is how late a beat came (the gap between two beats less that 1 ms). Every Discord
interaction must be acknowledged within 3 s, so a stall of seconds is a lost interaction.
Start-up (models, stores) and the first ingest are measured the same way.

Each burst runs twice: with the machine as it is (*idle*) and *busy*, with a CPU burner (one
process per core spinning, ``Burner``) competing for every core, as a host shared with other
work is. Then heavy input, one at a time, each with its own longest stall: a message of 1, 5
and 10 MB (refused by its length before any processing) and a GM's upload of a note of 1, 5 and
10 MB of text (read, checked and written in the worker pool, then ingested; the 5 and 10 MB ones,
with their heading, are past the default 5 MB cap and refused by size before they are read).

Questions are made from the titles of the documents the players may read, cycled to ``N``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Self

from bench.common import percentile
from liminalis import research

__all__ = ["Burner", "Heartbeat", "main", "make_questions", "run", "skipped_stage"]

DEFAULT = Path(__file__).resolve().parent.parent / "campaigns" / "emberfall"
_TEMPLATES = (
    "What do we know about {}?",
    "Tell me about {}.",
    "Who or what is {}, and why does it matter?",
)


class Heartbeat:
    """A loop-lag probe: a task that sleeps ``interval_s`` (1 ms) in a loop and keeps the
    longest lateness, ``gap - interval_s``: how long the event loop could not run anything
    else (a stall)."""

    def __init__(self, interval_s: float = 0.001) -> None:
        self.interval_s = interval_s
        self.max_stall_s = 0.0
        self.beats = 0
        self._task: asyncio.Task[None] | None = None

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(self.interval_s)
            self.beats += 1
            self.max_stall_s = max(self.max_stall_s, loop.time() - t - self.interval_s)

    def reset(self) -> float:
        """The longest stall since the last reset (seconds), and start again."""
        worst, self.max_stall_s = self.max_stall_s, 0.0
        return worst

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._beat(), name="heartbeat")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def _spin() -> None:
    while True:
        pass


class Burner:
    """``processes`` processes spinning on the CPU (default: one per core) while the block
    runs: the machine busy, as a host shared with other work is."""

    def __init__(self, processes: int | None = None) -> None:
        self.processes = processes or os.cpu_count() or 1
        self._procs: list[multiprocessing.process.BaseProcess] = []

    def __enter__(self) -> Self:
        ctx = multiprocessing.get_context("spawn")
        self._procs = [ctx.Process(target=_spin, daemon=True) for _ in range(self.processes)]
        for proc in self._procs:
            proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            proc.join()


def skipped_stage(notes: Sequence[str]) -> bool:
    """Whether a reply's notes say a retrieval stage was skipped (the reranker busy or failing)."""
    return any(
        "reranker" in n and ("unavailable" in n or "skipped" in n or "busy" in n) for n in notes
    )


def make_questions(titles: Sequence[str], n: int) -> list[str]:
    """``n`` questions about ``titles``, cycling through templates and titles."""
    if not titles:
        raise SystemExit("the campaign has no document the players may read: nothing to ask about")
    out = []
    for i in range(n):
        title = titles[i % len(titles)]
        out.append(_TEMPLATES[(i // len(titles)) % len(_TEMPLATES)].format(title))
    return out


@contextlib.asynccontextmanager
async def _service(
    folder: Path,
    data_dir: Path,
    *,
    embedder: Any = None,
    reranker: Any = None,
) -> AsyncIterator[Any]:
    """The service over ``folder`` as the composition root builds it; with ``embedder`` given (a
    smoke test), the same service over that embedder, an in-memory store and ``reranker``."""
    from bot.main import build_engine, build_service
    from bot.settings import Settings

    settings = dataclasses.replace(
        Settings(),
        data_dir=data_dir,
        campaigns_dir=folder.parent,
        default_campaign=folder.name,
        anthropic_api_key="",
    )
    if embedder is None:
        async with build_engine(settings) as engine:
            yield build_service(settings, engine)
        return
    from liminalis.engine import Engine
    from liminalis.ingest.indexer import IngestOptions
    from liminalis.models import load_learned_ranker
    from liminalis.store.sqlite import Database
    from liminalis.testing import MemoryVectorStore

    data_dir.mkdir(parents=True, exist_ok=True)
    async with Database(settings.sqlite_path) as db:
        engine = Engine(
            db=db,
            store=MemoryVectorStore(),
            embedder=embedder,
            reranker=reranker,
            ranker=load_learned_ranker("auto"),
            campaigns_dir=folder.parent,
            ingest_options=IngestOptions(),
        )
        try:
            yield build_service(settings, engine)
        finally:
            await engine.close()


async def _burst(
    service: Any,
    slug: str,
    questions: Sequence[str],
    concurrency: int,
    beat: Heartbeat,
) -> dict[str, Any]:
    from bot.service import IncomingMessage

    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    answered = errors = skipped = nothing = 0

    async def one(i: int, text: str) -> None:
        nonlocal answered, errors, skipped, nothing
        # One channel per question: no question is a follow-up answered from another's material.
        msg = IncomingMessage(
            platform="console",
            channel_id=f"load-{i}",
            user_id=f"player-{i}",
            text=text,
            roles=("players",),
            campaign_override=slug,
        )
        async with gate:
            t = time.perf_counter()
            reply = await service.handle(msg)
            latencies.append(time.perf_counter() - t)
        if reply.error or not reply.text.strip():
            errors += 1
            return
        answered += 1
        skipped += skipped_stage(reply.notes)
        nothing += "no matching passages" in reply.notes

    beat.reset()
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i, q) for i, q in enumerate(questions)))
    secs = time.perf_counter() - t0
    return {
        "concurrency": concurrency,
        "questions": len(questions),
        "seconds": round(secs, 2),
        "throughput_qps": round(len(questions) / secs, 2),
        "p50_ms": round(percentile(latencies, 50) * 1000),
        "p95_ms": round(percentile(latencies, 95) * 1000),
        "p99_ms": round(percentile(latencies, 99) * 1000),
        "answered": answered,
        "errors": errors,
        "skipped_stage": skipped,
        "found_nothing": nothing,
        "max_stall_ms": round(beat.reset() * 1000, 1),
    }


async def _heavy(
    service: Any, slug: str, beat: Heartbeat, sizes_mb: Sequence[int]
) -> list[dict[str, Any]]:
    """Messages and uploads of ``sizes_mb`` MB, one at a time, each with its longest stall."""
    from bot.service import Attachment, IncomingMessage

    out: list[dict[str, Any]] = []
    for mb in sizes_mb:
        size = mb * 1024 * 1024
        asks = IncomingMessage(
            platform="console",
            channel_id="heavy",
            user_id="player-heavy",
            text="Who rules? " + "x" * size,
            roles=("players",),
            campaign_override=slug,
        )
        note = b"# Notes\n\n" + b"The ford is shallow at the mill. " * (size // 33)
        uploads = IncomingMessage(
            platform="console",
            channel_id="heavy",
            user_id="gm-heavy",
            text="/upload gm",
            roles=("gm",),
            attachments=(Attachment(f"notes-{mb}mb.md", note),),
            campaign_override=slug,
        )
        for kind, msg in (("message", asks), ("upload", uploads)):
            beat.reset()
            t = time.perf_counter()
            reply = await service.handle(msg)
            seconds = time.perf_counter() - t
            await asyncio.sleep(2 * beat.interval_s)  # the probe's beat late by the handling
            out.append(
                {
                    "input": kind,
                    "mb": mb,
                    "seconds": round(seconds, 3),
                    "refused": bool(reply.error),
                    "reply": reply.text.splitlines()[-1][:120] if reply.text else "",
                    "max_stall_ms": round(beat.reset() * 1000, 1),
                }
            )
    return out


async def run(
    folder: Path,
    *,
    questions: int = 200,
    concurrency: Sequence[int] = (50, 200),
    embedder: Any = None,
    reranker: Any = None,
    idle_s: float = 5.0,
    busy: bool = True,
    heavy_mb: Sequence[int] = (1, 5, 10),
) -> dict[str, Any]:
    """Start the service over ``folder``, ingest it, then one burst per concurrency level.
    First the heartbeat runs alone for ``idle_s``: its longest stall there is the machine's own
    (other processes, the scheduler), the floor under every other stall measured."""
    from liminalis.lens import players_lens

    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    folder = folder.resolve()
    out: dict[str, Any] = {"campaign": folder.name, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        async with Heartbeat() as beat:
            await asyncio.sleep(idle_s)
            out["idle_max_stall_ms"] = round(beat.reset() * 1000, 1)
            t = time.perf_counter()
            async with _service(
                folder, Path(tmp) / "data", embedder=embedder, reranker=reranker
            ) as service:
                engine = service.engine
                out["startup"] = {
                    "seconds": round(time.perf_counter() - t, 2),
                    "max_stall_ms": round(beat.reset() * 1000, 1),
                }
                t = time.perf_counter()
                report = await engine.ingest(folder.name)
                out["ingest"] = {
                    "seconds": round(time.perf_counter() - t, 2),
                    "documents": report.documents,
                    "passages": report.passages_added,
                    "max_stall_ms": round(beat.reset() * 1000, 1),
                }
                out["reranker"] = getattr(engine.reranker, "model_id", None)
                cat = await research.catalog(engine, folder.name)
                lens = players_lens()
                titles = sorted(
                    {d.title for d in cat.documents.values() if cat.visible_doc(d.doc_id, lens)}
                )
                asked = make_questions(titles, questions)
                for load in ("idle", "busy") if busy else ("idle",):
                    with Burner() if load == "busy" else contextlib.nullcontext():
                        for c in concurrency:
                            row = await _burst(service, folder.name, asked, c, beat)
                            out["runs"].append({"load": load, **row})
                out["heavy"] = await _heavy(service, folder.name, beat, heavy_mb)
    return out


def print_table(r: dict[str, Any]) -> None:
    print(
        f"{r['campaign']} (reranker: {r['reranker'] or 'off'}): idle loop's longest stall "
        f"{r['idle_max_stall_ms']:.0f} ms (the machine's floor); start-up {r['startup']['seconds']} s, "
        f"longest stall {r['startup']['max_stall_ms']:.0f} ms; first ingest {r['ingest']['seconds']} s "
        f"({r['ingest']['documents']} documents), longest stall {r['ingest']['max_stall_ms']:.0f} ms"
    )
    cols = [
        "load",
        "concurrency",
        "questions",
        "throughput_qps",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "answered",
        "errors",
        "skipped_stage",
        "max_stall_ms",
    ]
    print("  ".join(f"{c:>14}" for c in cols))
    for run_ in r["runs"]:
        print("  ".join(f"{run_.get(c, 'idle')!s:>14}" for c in cols))
    for h in r.get("heavy", []):
        print(
            f"{h['input']:>8} {h['mb']:>3} MB: {h['seconds']} s, refused {h['refused']}, "
            f"longest stall {h['max_stall_ms']} ms"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n")[0])
    ap.add_argument(
        "dir", nargs="?", type=Path, default=DEFAULT, help="a campaign folder (default: emberfall)"
    )
    ap.add_argument("--questions", type=int, default=200, help="questions per concurrency level")
    ap.add_argument(
        "--concurrency", default="50,200", help="comma-separated questions in flight at once"
    )
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--no-busy", action="store_true", help="skip the bursts with the CPU burner")
    ap.add_argument("--heavy-mb", default="1,5,10", help="sizes of the heavy messages and uploads")
    args = ap.parse_args(argv)
    try:
        levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(
            f"--concurrency: comma-separated integers, not {args.concurrency!r}"
        ) from None
    if not levels or min(levels) < 1 or args.questions < 1:
        raise SystemExit("--questions and every --concurrency level must be at least 1")
    if not args.dir.is_dir():
        raise SystemExit(f"{args.dir}: not a campaign folder")
    heavy = [int(x) for x in args.heavy_mb.split(",") if x.strip()]
    r = asyncio.run(
        run(
            args.dir,
            questions=args.questions,
            concurrency=levels,
            busy=not args.no_busy,
            heavy_mb=heavy,
        )
    )
    if args.json:
        print(json.dumps(r))
    else:
        print_table(r)
    if args.out:
        args.out.write_text(json.dumps(r, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
