"""A first run: questions during the first index say how far it has come, `/campaign status`
shows documents done, rate and time left, and `serve` connects before the index is done.

The indexer is slowed by an embedder that waits for the test's permission before each batch,
and time is a frozen clock the test moves: no test here waits on the wall clock.
"""

from __future__ import annotations

import asyncio
import json

from conftest import close_engine, make_engine, upgraded_engine
from fakes.slack_api import SIGNING_SECRET, MockSlackApi, command_body, signed_headers
from fakes.tiny_campaign import CANARY, make_tiny_campaign
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.serve import index_in_background
from bot.service import BotService, IncomingMessage
from bot.slack_adapter import ChannelRateLimiter, SlackAdapter
from liminalis.errors import NotReady
from liminalis.ingest.indexer import IngestOptions
from liminalis.progress import ProgressBoard
from liminalis.testing import FrozenClock, HashEmbedder

QUESTION = "who guards the Greyhold keep?"


class SteppedEmbedder(HashEmbedder):
    """A hash embedder whose every passage batch waits for :meth:`step`: an ingest the test
    moves one batch at a time."""

    def __init__(self, model_id: str = "hash-256") -> None:
        super().__init__(model_id=model_id)
        self.waiting = asyncio.Event()
        self._steps = asyncio.Semaphore(0)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self._steps.release()

    async def next_batch(self) -> None:
        """Until a batch waits for its step."""
        await asyncio.wait_for(self.waiting.wait(), 30)
        self.waiting.clear()

    async def embed_passages(self, texts):
        self.waiting.set()
        await self._steps.acquire()
        return await super().embed_passages(texts)


def ask(text: str) -> IncomingMessage:
    return IncomingMessage(platform="discord", channel_id="C1", user_id="9", text=text)


async def stepped_engine(tmp_path, clock: FrozenClock):
    make_tiny_campaign(tmp_path / "campaigns")
    embedder = SteppedEmbedder()
    engine = await make_engine(
        tmp_path,
        milvus=False,
        embedder=embedder,
        ingest_options=IngestOptions(batch_docs=1),
        clock=clock,
    )
    return engine, embedder


def test_progress_rate_and_time_left_follow_the_clock():
    clock = FrozenClock()
    board = ProgressBoard(clock)
    assert board.get("x") is None
    board.start("x")
    assert board.get("x").describe() == "reading its files"
    clock.advance(seconds=30)  # reading files does not count toward the rate
    board.update("x", 0, 40)
    p = board.get("x")
    assert (p.rate, p.eta_s, p.describe()) == (None, None, "0 of 40 documents")
    clock.advance(seconds=5)
    board.update("x", 10, 40)
    p = board.get("x")
    assert p.rate == 2.0 and p.eta_s == 15.0
    assert p.describe() == "10 of 40 documents, 2.0 a second, about 15 s left"
    assert p.as_dict()["done"] == 10 and board.all() == [p]
    board.finish("x")
    assert board.get("x") is None and board.all() == []


async def test_a_question_during_the_first_index_says_how_far_it_has_come(tmp_path):
    clock = FrozenClock()
    engine, embedder = await stepped_engine(tmp_path, clock)
    svc = BotService(engine)
    await svc.directory.link("discord", "C1", "greyhold")
    ingest = asyncio.create_task(engine.ingest("greyhold"))
    try:
        await embedder.next_batch()
        reply = await svc.handle(ask(f"/ask {QUESTION}"))
        assert reply.error and "Still indexing this campaign: 0 of 4 documents" in reply.text
        assert "no indexed documents yet" not in reply.text and CANARY not in reply.text

        embedder.step()
        await embedder.next_batch()
        clock.advance(seconds=4)
        progress = engine.index_progress("greyhold")
        assert (progress.done, progress.total, progress.rate, progress.eta_s) == (1, 4, 0.25, 12)
        reply = await svc.handle(ask(f"/ask {QUESTION}"))
        assert "Still indexing this campaign: 1 of 4 documents" in reply.text
        status = await svc.handle(ask("/campaign status"))
        assert "Indexing: 1 of 4 documents, 0.2 a second, about 12 s left." in status.text
        assert [p.campaign for p in engine.indexing()] == ["greyhold"]

        embedder.step(10)
        await asyncio.wait_for(ingest, 30)
        assert engine.index_progress("greyhold") is None and engine.indexing() == []
        reply = await svc.handle(ask(f"/ask {QUESTION}"))
        assert not reply.error and "Greyhold" in reply.text
        status = await svc.handle(ask("/campaign status"))
        assert "Indexing" not in status.text
    finally:
        embedder.step(100)
        await asyncio.gather(ingest, return_exceptions=True)
        await close_engine(engine)


async def test_a_rebuild_after_an_upgrade_says_rebuilt_with_its_progress(tmp_path):
    embedder = SteppedEmbedder("hash-256-v2")
    engine = await upgraded_engine(tmp_path, embedder, ingest_options=IngestOptions(batch_docs=1))
    ingest = asyncio.create_task(engine.ingest("greyhold"))
    try:
        await embedder.next_batch()
        embedder.step()
        await embedder.next_batch()
        try:
            await engine.retrieve("greyhold", QUESTION, frozenset({"players"}))
        except NotReady as exc:
            assert exc.user_message.startswith(
                "This campaign's index is being rebuilt after an update: 1 of 4 documents"
            )
        else:
            raise AssertionError("a question mid-rebuild was answered")
    finally:
        embedder.step(100)
        await asyncio.gather(ingest, return_exceptions=True)
        await close_engine(engine)


async def slack_ask(adapter: SlackAdapter, api: MockSlackApi, text: str, n: int) -> str:
    """``/lore ask text`` through Slack; the ``n``-th reply posted to its response URL."""
    body = command_body(
        "/lore",
        f"ask {text}",
        user_id="UPLAYER01",
        channel_id="C0TABLE",
        response_url=f"{api.url}/respond/ask",
    )
    headers = signed_headers(body, content_type="application/x-www-form-urlencoded")
    assert (
        await adapter.app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
    ).status == 200
    posted = await api.wait_for("/respond/ask", n=n)
    return json.dumps(posted[n - 1].args, ensure_ascii=False)


async def test_serve_answers_on_slack_while_it_indexes_in_the_background(tmp_path):
    """`serve`'s first index runs beside the platforms: a Slack question meanwhile is answered at
    once with how far it has come, and answered from the documents once it is done."""
    clock = FrozenClock()
    engine, embedder = await stepped_engine(tmp_path, clock)
    api = MockSlackApi()
    await api.start()
    service = BotService(engine)
    await service.directory.link("slack", "C0TABLE", "greyhold")
    adapter = SlackAdapter(
        service,
        client=AsyncWebClient(token="xoxb-test", base_url=api.api_url),
        signing_secret=SIGNING_SECRET,
        limiter=ChannelRateLimiter(interval=0.0),
    )
    lines: list[str] = []
    try:
        async with index_in_background(engine, lines.append) as indexing:
            await embedder.next_batch()
            assert lines == ["indexing greyhold …"] and not indexing.done()
            text = await slack_ask(adapter, api, QUESTION, 1)
            assert "Still indexing this campaign: 0 of 4 documents" in text
            embedder.step(10)
            assert await asyncio.wait_for(indexing, 30) == ["greyhold"]
            text = await slack_ask(adapter, api, QUESTION, 2)
            assert "Greyhold" in text and "Still indexing" not in text and CANARY not in text
    finally:
        embedder.step(100)
        await close_engine(engine)
        await api.close()


async def test_leaving_serve_cancels_an_unfinished_first_index(tmp_path):
    engine, embedder = await stepped_engine(tmp_path, FrozenClock())
    try:
        async with index_in_background(engine, lambda _: None) as indexing:
            await embedder.next_batch()
        assert indexing.cancelled() and engine.indexing() == []
        assert not await engine.is_indexed("greyhold")
    finally:
        embedder.step(100)
        await close_engine(engine)
