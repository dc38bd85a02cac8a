"""The transport every protocol-level fake shares: an aiohttp app on a free 127.0.0.1 port."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

__all__ = ["CatchAllServer", "InFlight", "serve_locally", "wait_quiet"]

#: A timer due within this many seconds is work about to happen (a rate limiter's spacing, a
#: throttled edit, a retry's back-off); later ones are keep-alives and idle timeouts.
IMMINENT_S = 2.0
#: Loop turns in a row with nothing to run, nothing imminent and no request in flight.
QUIET_TURNS = 5


def _imminent(loop: asyncio.AbstractEventLoop) -> float | None:
    """Seconds to the earliest live timer due within :data:`IMMINENT_S` (``None``: none)."""
    now = loop.time()
    due = [
        h.when() - now
        for h in getattr(loop, "_scheduled", ())
        if not h.cancelled() and h.when() - now <= IMMINENT_S
    ]
    return max(0.0, min(due)) if due else None


async def wait_quiet(in_flight: Callable[[], int], *, limit: float = 30.0) -> None:
    """Return once the loop is idle: no callback ready to run, no timer due soon, and no request
    in flight to the fake, for :data:`QUIET_TURNS` turns in a row (each turn polls the sockets,
    so a request already written is seen). "Nothing happened" is then a fact about the code under
    test, not a bet that a sleep outlasted it; a late call fails the assertion after this instead
    of passing unseen. Raises ``AssertionError`` if the loop is never quiet within ``limit``
    seconds (work that never settles)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    calm = 0
    while calm < QUIET_TURNS:
        if loop.time() > deadline:
            raise AssertionError(f"the loop never went quiet within {limit}s")
        wait = _imminent(loop)
        busy = bool(getattr(loop, "_ready", ())) or in_flight() > 0 or wait is not None
        calm = 0 if busy else calm + 1
        await asyncio.sleep(wait or 0)


class InFlight:
    """Counts the requests a fake is handling, for :func:`wait_quiet`."""

    def __init__(self) -> None:
        self.count = 0

    def wrap(
        self, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def counted(request: web.Request) -> web.StreamResponse:
            self.count += 1
            try:
                return await handler(request)
            finally:
                self.count -= 1

        return counted


async def serve_locally(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start ``app`` on 127.0.0.1 at a port the OS picks; returns its runner (``cleanup()``
    stops it) and its base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


class CatchAllServer:
    """A fake whose ``_handle`` answers every method and path: ``start()`` serves it locally and
    returns the base URL, ``close()`` stops it."""

    url: str
    _runner: web.AppRunner | None
    _in_flight: InFlight | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    async def start(self) -> str:
        app = web.Application()
        self._in_flight = InFlight()
        app.router.add_route("*", "/{tail:.*}", self._in_flight.wrap(self._handle))
        self._runner, self.url = await serve_locally(app)
        return self.url

    async def wait_quiet(self, *, limit: float = 30.0) -> None:
        """Return once this fake and the loop are idle (see :func:`wait_quiet`): then assert
        that something did *not* happen."""
        flight = self._in_flight
        await wait_quiet(lambda: flight.count if flight is not None else 0, limit=limit)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
