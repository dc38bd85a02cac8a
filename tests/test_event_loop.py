"""Many questions at once: every one answered, the engine's CPU work off the event loop, the
reranker queued in turn, and a skipped stage said in the reply. Behaviour only, never timing:
the suite runs on loaded 2-core machines (stall sizes are measured by ``bench.load``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import replace

import harness
import numpy as np
from conftest import close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from bench.load import Heartbeat
from bot.service import BotService, IncomingMessage
from liminalis.retrieval.retriever import RERANK_BUSY_NOTE

QUESTIONS = [
    "Who rules Greyhold keep?",
    "What does the baron collect?",
    "How are the guards paid?",
    "Where is the river tower?",
    "Tell me about Baron Aldric.",
]


class RecordingRanker:
    """A learned ranker that records the threads it scores on (the fused order, unchanged)."""

    model_id = "recording"

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def score(self, x: np.ndarray) -> np.ndarray:
        self.threads.add(threading.get_ident())
        return -np.arange(len(x), dtype=np.float64)


class TurnReranker:
    """Scores by shared words; records how many questions it scored at once, and can be held."""

    model_id = "turns"

    def __init__(self) -> None:
        self.inside = self.most = self.calls = 0
        self.release = asyncio.Event()
        self.release.set()

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.inside += 1
        self.most = max(self.most, self.inside)
        self.calls += 1
        try:
            await self.release.wait()
            await asyncio.sleep(0)  # a turn spans a loop iteration, so overlapping turns would show
            words = set(query.lower().split())
            return [float(len(words & set(p.lower().split()))) for p in passages]
        finally:
            self.inside -= 1


def ask(text: str, i: int) -> IncomingMessage:
    return IncomingMessage(
        platform="console",
        channel_id=f"c{i}",
        user_id=f"u{i}",
        text=text,
        roles=("players",),
        campaign_override="greyhold",
    )


async def test_thirty_questions_at_once_are_all_answered_with_the_work_off_the_loop(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    ranker, reranker = RecordingRanker(), TurnReranker()
    engine = await make_engine(tmp_path, milvus=False, ranker=ranker, reranker=reranker)
    try:
        await engine.ingest("greyhold")
        service = BotService(engine)
        async with Heartbeat(0.001) as beat:
            replies = await asyncio.gather(
                *(service.handle(ask(QUESTIONS[i % len(QUESTIONS)], i)) for i in range(30))
            )
            assert beat.beats > 0  # the loop ran its other tasks while the questions were answered
    finally:
        await close_engine(engine)
    assert len(replies) == 30
    # each answered from the campaign: quotes with their sources
    assert all(not r.error and r.sources and "documents say" in r.text for r in replies), [
        r.text for r in replies
    ]
    # every answer had the reranker, one question at a time, none skipped it
    assert reranker.calls == 30 and reranker.most == 1
    assert not [r for r in replies if r.notes and any("reranker" in n for n in r.notes)]
    # the learned ranker's scoring (with its feature collection) ran in worker threads
    assert ranker.threads and threading.get_ident() not in ranker.threads


async def test_a_question_that_waits_out_the_reranker_says_so(tmp_path):
    """While the reranker is held, a second question's wait for its turn runs out: it is still
    answered, in the fused order, and its reply says the reranking step was skipped."""
    make_tiny_campaign(tmp_path / "campaigns")
    reranker = TurnReranker()
    engine = await make_engine(tmp_path, milvus=False, reranker=reranker)
    harness.retriever(engine).params = replace(
        harness.retriever(engine).params, rerank_wait_s=0.05, rerank_timeout_s=600
    )
    try:
        await engine.ingest("greyhold")
        service = BotService(engine)
        reranker.release.clear()
        first = asyncio.create_task(service.handle(ask(QUESTIONS[0], 0)))
        while not reranker.inside:  # the first question holds the reranker's turn
            await asyncio.sleep(0)
        second = await service.handle(ask(QUESTIONS[1], 1))
        reranker.release.set()
        first_reply = await first
    finally:
        await close_engine(engine)
    assert not second.error and RERANK_BUSY_NOTE in second.notes
    assert "skipped its reranking step" in second.text
    assert not first_reply.error and RERANK_BUSY_NOTE not in first_reply.notes
    assert "reranking step" not in first_reply.text
    assert reranker.calls == 1
