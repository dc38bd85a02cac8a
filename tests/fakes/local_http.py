"""The transport every protocol-level fake shares: an aiohttp app on a free 127.0.0.1 port."""

from __future__ import annotations

from aiohttp import web

__all__ = ["CatchAllServer", "serve_locally"]


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

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner, self.url = await serve_locally(app)
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
