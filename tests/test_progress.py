"""Progress of the long jobs: the board's numbers, drawn on a terminal, as JSON lines, or not at
all (liminalis/progress.py, the CLI's ``--progress``)."""

from __future__ import annotations

import json

from conftest import close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from liminalis.ingest.indexer import IngestOptions
from liminalis.progress import IndexProgress, ProgressBoard, ProgressReporter
from liminalis.testing import FrozenClock, HashEmbedder, MemoryVectorStore


class Stream:
    """stderr as the reporter sees it: a terminal or not, and what was written."""

    def __init__(self, *, tty: bool) -> None:
        self.tty = tty
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return self.tty


def _run(reporter: ProgressReporter, clock: FrozenClock, *, stage: str = "ingest") -> None:
    """Four files, one a second, reported to ``reporter`` through a board."""
    board = ProgressBoard(clock, stage=stage)
    board.watch(reporter)
    board.start("greyhold")
    board.update("greyhold", 0, 4)
    for done in range(1, 5):
        clock.advance(seconds=1)
        board.update("greyhold", done, 4)
    board.finish("greyhold")


def test_a_terminal_gets_one_line_redrawn_with_done_rate_and_time_left():
    stream = Stream(tty=True)
    _run(ProgressReporter(stream), FrozenClock())
    frames = stream.text.split("\r")[1:]
    assert len(frames) == 5
    assert frames[2] == "ingest greyhold: 2 of 4 documents, 1.0 a second, about 2 s left\x1b[K"
    # The last frame ends the line, so what the command prints next starts on its own.
    assert frames[-1].startswith("ingest greyhold: 4 of 4 documents") and frames[-1].endswith("\n")
    assert stream.text.count("\n") == 1


def test_off_a_terminal_the_default_writes_nothing():
    stream = Stream(tty=False)
    _run(ProgressReporter(stream), FrozenClock())
    assert stream.text == ""


def test_off_asks_for_nothing_even_on_a_terminal():
    stream = Stream(tty=True)
    _run(ProgressReporter(stream, mode="off"), FrozenClock())
    assert stream.text == ""


def test_json_writes_one_object_a_line_terminal_or_not():
    for tty in (False, True):
        stream = Stream(tty=tty)
        _run(ProgressReporter(stream, mode="json"), FrozenClock(), stage="reindex")
        lines = [json.loads(line) for line in stream.text.splitlines()]
        assert [x["done"] for x in lines] == [0, 1, 2, 3, 4]
        assert lines[2] == {
            "done": 2,
            "total": 4,
            "rate": 1.0,
            "eta_s": 2.0,
            "stage": "reindex",
            "campaign": "greyhold",
        }
        assert lines[0]["rate"] is None and lines[0]["eta_s"] is None


def test_a_broken_display_never_stops_the_job():
    def broken(_: IndexProgress) -> None:
        raise OSError("the terminal went away")

    seen: list[int] = []
    board = ProgressBoard(FrozenClock())
    board.watch(broken)
    stop = board.watch(lambda p: seen.append(p.done))
    board.start("greyhold")
    board.update("greyhold", 1, 2)
    stop()
    board.update("greyhold", 2, 2)
    assert seen == [1]


async def test_an_ingest_reports_to_watchers_the_numbers_chat_reads(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False, ingest_options=IngestOptions(batch_docs=1))
    seen: list[tuple[int, int | None, str]] = []

    def watch(p: IndexProgress) -> None:
        # Chat's "still indexing N of M" reads the same board at the same moment.
        now = engine.index_progress(p.campaign)
        assert now is not None and (now.done, now.total) == (p.done, p.total)
        seen.append((p.done, p.total, p.stage))

    engine.watch_progress(watch)
    try:
        await engine.ingest("greyhold")
    finally:
        await close_engine(engine)
    total = seen[-1][1]
    assert total is not None and total > 1
    assert seen == [(n, total, "ingest") for n in range(total + 1)]


async def test_a_reindex_reports_to_the_same_watchers(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    store = MemoryVectorStore()
    old_embedder = HashEmbedder(dim=256, model_id="hash-old")
    old = await make_engine(tmp_path, milvus=False, embedder=old_embedder, store=store)
    await old.ingest("greyhold")
    engine = await make_engine(
        tmp_path,
        milvus=False,
        embedder=HashEmbedder(dim=128, model_id="hash-new"),
        embedders=[old_embedder],
        store=store,
    )
    seen: list[IndexProgress] = []
    engine.watch_progress(seen.append)
    try:
        report = await engine.reindex("greyhold")
    finally:
        await close_engine(engine)
        await close_engine(old)
    assert report.published
    assert {p.stage for p in seen} == {"reindex"}
    assert seen[0].done == 0 and seen[-1].done == seen[-1].total == report.documents


def test_a_job_that_stops_mid_way_leaves_no_line_open():
    """The CLI closes its reporter when the job ends, an error's message included."""
    stream = Stream(tty=True)
    reporter = ProgressReporter(stream)
    board = ProgressBoard(FrozenClock())
    board.watch(reporter)
    board.start("greyhold")
    board.update("greyhold", 1, 4)
    reporter.close()
    assert stream.text.endswith("\x1b[K\n")
    reporter.close()
    assert stream.text.count("\n") == 1
