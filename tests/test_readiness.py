"""A question to a campaign without a usable index says so, rather than "I found nothing".

Two real situations: a campaign linked before its first ingest, and the window after an upgrade
that ships a new embedder, while the campaign is re-embedded into its new collection.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from conftest import close_engine, make_engine, upgraded_engine
from fakes.local_http import wait_quiet
from fakes.tiny_campaign import CANARY, make_tiny_campaign

from bot.scheduler import RecapScheduler
from bot.service import BotService, IncomingMessage
from liminalis.errors import NotReady
from liminalis.ingest.indexer import IngestOptions
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
        tick = asyncio.create_task(
            RecapScheduler(BotService(upgraded), clock=FrozenClock(), tick_seconds=0).tick()
        )
        await asyncio.wait_for(embedder.entered.wait(), 30)
        # Mid-way the new collection is partial: this engine, and another one over the same data
        # directory (a second process), both say so.
        with pytest.raises(NotReady, match="rebuilt") as caught:
            await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        assert CANARY not in caught.value.user_message
        other = await make_engine(
            tmp_path, milvus=False, embedder=HashEmbedder(model_id="hash-256-v2")
        )
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


async def test_scheduler_start_runs_the_first_tick_at_once_and_shutdown_ends_it_quietly(
    tmp_path, caplog
):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    running, never = asyncio.Event(), asyncio.Event()

    async def long_pass() -> None:  # a re-embed still running at shutdown
        running.set()
        await never.wait()

    s = RecapScheduler(
        BotService(engine), clock=FrozenClock(), tick_seconds=300, tick_tasks=[long_pass]
    )
    try:
        await s.start()
        await asyncio.wait_for(running.wait(), 10)  # the first tick started without waiting 300 s
        await s.close()
        await wait_quiet(lambda: 0)  # the cancelled job has finished, its errors logged
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
    """A hash embedder that dies on its second batch: a re-embed killed part-way, after the first
    document's vectors were written."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id=model_id)
        self.fail = True
        self.calls = 0

    async def embed_passages(self, texts):
        self.calls += 1
        if self.fail and self.calls > 1:
            raise RuntimeError("killed mid-way")
        return await super().embed_passages(texts)


async def test_an_interrupted_rebuild_stays_marked_and_the_next_ingest_resumes_it(tmp_path):
    embedder = FailingEmbedder("hash-256-v2")
    one_doc_batches = IngestOptions(batch_docs=1)
    upgraded = await upgraded_engine(tmp_path, embedder, ingest_options=one_doc_batches)
    try:
        with pytest.raises(RuntimeError):
            await upgraded.ingest("greyhold")
        assert not await upgraded.is_indexed("greyhold") and await upgraded.was_indexed("greyhold")
        with pytest.raises(NotReady, match="rebuilt"):
            await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        embedder.fail = False
        # A GM's one-file upload before the next tick re-embeds that file only: still rebuilding.
        await upgraded.ingest(
            "greyhold", tmp_path / "campaigns" / "greyhold" / "sessions" / "session-01.md"
        )
        assert not await upgraded.is_indexed("greyhold")
        await upgraded.ingest("greyhold")
        assert await upgraded.is_indexed("greyhold")
        bundle = await upgraded.retrieve("greyhold", QUESTION, PLAYERS)
        assert bundle.documents and all(CANARY not in d.text for d in bundle.documents)
        assert {d.doc_id for d in bundle.documents} >= {"baron"}
    finally:
        await close_engine(upgraded)


async def test_a_file_that_fails_to_load_during_a_rebuild_keeps_its_previous_version_searchable(
    tmp_path,
):
    """A file broken on disk keeps its previous version; a rebuild must rebuild that version too,
    or the document would be left with neither vectors nor BM25 tokens under the new profile."""
    embedder = HashEmbedder(model_id="hash-256-v2")
    upgraded = await upgraded_engine(tmp_path, embedder)
    session = tmp_path / "campaigns" / "greyhold" / "sessions" / "session-01.md"
    session.write_bytes(b"---\ntitle: Session 1\n---\nThe party \x00\x00 reached")  # not text
    try:
        report = await upgraded.ingest("greyhold")
        assert [s.reason for s in report.skipped if "session-01" in s.path] == [
            "binary file (contains NUL bytes); its previous version stays searchable"
        ]
        assert await upgraded.is_indexed("greyhold")
        bundle = await upgraded.retrieve(
            "greyhold", "when did the party reach the keep at dusk", PLAYERS
        )
        assert bundle.documents[0].title == "Session 1" and "at dusk" in bundle.documents[0].text
        assert all(CANARY not in d.text for d in bundle.documents)
        session_doc = bundle.documents[0].doc_id
        vectors = await upgraded.store.ids("greyhold")
        assert any(v.startswith(f"p:{session_doc}#") for v in vectors)  # the dense arm has it too
        # A second ingest while the file stays broken does not re-prepare it again ...
        again = await upgraded.ingest("greyhold")
        assert again.embedded == 0 and again.passages_added == 0
        # ... and the file's next good version replaces the kept one.
        session.write_text(
            "---\ntitle: Session 1\n---\nThe party sailed to the salt marsh at dawn.\n",
            encoding="utf-8",
        )
        await upgraded.ingest("greyhold")
        bundle = await upgraded.retrieve(
            "greyhold", "when did the party sail to the salt marsh", PLAYERS
        )
        assert bundle.documents[0].title == "Session 1" and "salt marsh" in bundle.documents[0].text
    finally:
        await close_engine(upgraded)
