"""The test harness itself: ``wait_quiet`` waits for work about to happen, and says so when the
loop never settles; the engine accessors are the engine's own parts."""

from __future__ import annotations

import asyncio

import aiohttp
import harness
import pytest
from aiohttp import web
from conftest import close_engine, make_engine
from fakes.local_http import CatchAllServer


class Recorder(CatchAllServer):
    def __init__(self, *, hold: asyncio.Event | None = None) -> None:
        self.paths: list[str] = []
        self.hold = hold
        self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.hold is not None:
            await self.hold.wait()
        self.paths.append(request.path)
        return web.json_response({"ok": True})


async def _post_later(url: str, delay: float) -> None:
    await asyncio.sleep(delay)
    async with aiohttp.ClientSession() as session, session.post(f"{url}/late") as resp:
        await resp.read()


async def test_wait_quiet_waits_for_a_call_already_on_its_way():
    """A call scheduled behind a timer (a rate limiter's spacing, a retry's back-off) arrives
    before ``wait_quiet`` returns: the assertion after it sees it, where a short sleep would
    have passed with the call still to come."""
    fake = Recorder()
    await fake.start()
    try:
        task = asyncio.create_task(_post_later(fake.url, 0.3))
        await fake.wait_quiet()
        assert fake.paths == ["/late"]
        await task
    finally:
        await fake.close()


async def test_wait_quiet_waits_for_a_request_in_flight():
    hold = asyncio.Event()
    fake = Recorder(hold=hold)
    await fake.start()
    try:
        task = asyncio.create_task(_post_later(fake.url, 0))
        asyncio.get_running_loop().call_later(0.2, hold.set)
        await fake.wait_quiet()
        assert fake.paths == ["/late"]
        await task
    finally:
        await fake.close()


async def test_wait_quiet_says_when_the_loop_never_settles():
    fake = Recorder()
    await fake.start()

    async def busy() -> None:
        while True:
            await asyncio.sleep(0.05)

    task = asyncio.create_task(busy())
    try:
        with pytest.raises(AssertionError, match="never went quiet"):
            await fake.wait_quiet(limit=0.5)
    finally:
        task.cancel()
        await fake.close()


async def test_the_accessors_are_the_engines_parts(tmp_path):
    engine = await make_engine(tmp_path, milvus=False)
    try:
        assert harness.db(engine) is engine.db
        assert harness.retriever(engine) is engine.retriever
        assert harness.indexer(engine) is engine.indexer
        assert harness.profile(engine) == engine.indexer.profile()
        assert [r["one"] for r in await harness.rows(engine, "SELECT 1 AS one")] == [1]
    finally:
        await close_engine(engine)
