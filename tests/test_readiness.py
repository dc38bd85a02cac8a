"""A question to a campaign without a usable index says so, rather than "I found nothing".

Two real situations: a campaign linked before its first ingest, and the window after an upgrade
that ships a new embedder, while the campaign is re-embedded into its new collection.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.scheduler import RecapScheduler
from bot.service import BotService, IncomingMessage
from conftest import close_engine, make_engine, upgraded_engine
from fakes.tiny_campaign import CANARY, make_tiny_campaign
from liminalis.errors import NotReady
from liminalis.testing import FrozenClock, HashEmbedder

PLAYERS = frozenset({"players"})
QUESTION = "who guards the Greyhold keep?"


class GatedEmbedder(HashEmbedder):
    """A hash embedder whose passage embedding waits for a gate: an ingest held mid-way."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id=model_id)
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def embed_passages(self, texts):
        self.entered.set()
        await self.gate.wait()
        return await super().embed_passages(texts)


def ask(text: str) -> IncomingMessage:
    return IncomingMessage(platform="discord", channel_id="C1", user_id="9", text=text)


async def test_question_before_the_first_ingest_says_not_indexed(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        svc = BotService(engine)
        await svc.directory.link("discord", "C1", "greyhold")
        reply = await svc.handle(ask(f"/ask {QUESTION}"))
        assert reply.error and "no indexed documents yet" in reply.text
        assert "found nothing" not in reply.text
        await engine.ingest("greyhold")
        reply = await svc.handle(ask(f"/ask {QUESTION}"))
        assert not reply.error and "Greyhold" in reply.text and CANARY not in reply.text
    finally:
        await close_engine(engine)


async def test_question_while_an_upgrade_re_embeds_says_rebuilding(tmp_path):
    embedder = GatedEmbedder("hash-256-v2")
    upgraded = await upgraded_engine(tmp_path, embedder)
    try:
        # Before the tick: the campaign's new collection is empty.
        with pytest.raises(NotReady, match="rebuilt"):
            await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        tick = asyncio.create_task(RecapScheduler(BotService(upgraded), clock=FrozenClock(), tick_seconds=0).tick())
        await asyncio.wait_for(embedder.entered.wait(), 30)
        # Mid-way the new collection is partial: this engine, and another one over the same data
        # directory (a second process), both say so.
        with pytest.raises(NotReady, match="rebuilt") as caught:
            await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        assert CANARY not in caught.value.user_message
        other = await make_engine(tmp_path, milvus=False, embedder=HashEmbedder(model_id="hash-256-v2"))
        try:
            assert not await other.is_indexed("greyhold")
        finally:
            await close_engine(other)
        embedder.gate.set()
        await asyncio.wait_for(tick, 60)
        bundle = await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        assert bundle.documents and all(CANARY not in d.text for d in bundle.documents)
    finally:
        embedder.gate.set()
        await close_engine(upgraded)


async def test_scheduler_start_runs_the_first_tick_at_once_and_shutdown_ends_it_quietly(tmp_path, caplog):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    running, never = asyncio.Event(), asyncio.Event()

    async def long_pass() -> None:  # a re-embed still running at shutdown
        running.set()
        await never.wait()

    s = RecapScheduler(BotService(engine), clock=FrozenClock(), tick_seconds=300, tick_tasks=[long_pass])
    try:
        await s.start()
        await asyncio.wait_for(running.wait(), 10)  # the first tick started without waiting 300 s
        await s.close()
        await asyncio.sleep(0.05)  # let the cancelled job finish
        assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    finally:
        await s.close()
        await close_engine(engine)


async def test_a_partial_ingest_after_an_upgrade_does_not_mark_the_campaign_rebuilt(tmp_path):
    """Only a whole-campaign ingest re-embeds every document: one file's ingest after an
    upgrade leaves the campaign "being rebuilt", and the next full ingest finishes the job."""
    upgraded = await upgraded_engine(tmp_path, HashEmbedder(model_id="hash-256-v2"))
    try:
        baron = tmp_path / "campaigns" / "greyhold" / "baron.md"
        await upgraded.ingest("greyhold", baron)
        assert not await upgraded.is_indexed("greyhold")
        with pytest.raises(NotReady, match="rebuilt"):
            await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        await upgraded.ingest("greyhold")
        assert await upgraded.is_indexed("greyhold")
        bundle = await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        assert bundle.documents and all(CANARY not in d.text for d in bundle.documents)
    finally:
        await close_engine(upgraded)


class FailingEmbedder(HashEmbedder):
    """A hash embedder that dies on its first batch: a re-embed killed part-way."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id=model_id)
        self.fail = True

    async def embed_passages(self, texts):
        if self.fail:
            raise RuntimeError("killed mid-way")
        return await super().embed_passages(texts)


async def test_an_interrupted_rebuild_stays_marked_and_the_next_ingest_resumes_it(tmp_path):
    embedder = FailingEmbedder("hash-256-v2")
    upgraded = await upgraded_engine(tmp_path, embedder)
    try:
        with pytest.raises(RuntimeError):
            await upgraded.ingest("greyhold")
        assert not await upgraded.is_indexed("greyhold") and await upgraded.was_indexed("greyhold")
        with pytest.raises(NotReady, match="rebuilt"):
            await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        embedder.fail = False
        await upgraded.ingest("greyhold")
        assert await upgraded.is_indexed("greyhold")
        bundle = await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        assert bundle.documents and all(CANARY not in d.text for d in bundle.documents)
        assert {d.doc_id for d in bundle.documents} >= {"baron"}
    finally:
        await close_engine(upgraded)
