"""A local HTTP server speaking the Anthropic Messages API, for tests through the real client.

* ``POST /v1/messages`` answers JSON, or SSE when the body says ``"stream": true``.
* Every request is recorded (headers, JSON body) in ``requests``.
* ``script`` is a queue of behaviours for the next requests: ``"ok"`` (default when empty),
  an HTTP status such as ``529`` or ``429`` (an API error body), ``"hang"`` (sleep past any
  client timeout), ``"empty"`` (a message with no content blocks, as a refusal can be),
  ``"cut"`` (the reply stopped at ``max_tokens``), or ``"not-json"`` (a 200 whose body is an
  HTML page, as a proxy in the way sends). Faults of a stream, each after :attr:`partial`
  characters of the reply were sent: ``"drop"`` (the connection is cut), ``"malformed"`` (a
  ``data:`` line that is not JSON), ``"error-event"`` (an ``error`` event, as the API sends when
  it is overloaded mid-answer) and ``"stall"`` (nothing more until the test ends). Without a
  stream, ``"drop"``, ``"malformed"`` and ``"stall"`` cut the JSON body half way the same ways.
* As the real API, a request holding a message with empty content is refused with 400.
* Prompt caching is simulated: the prefix up to and including the system block carrying
  ``cache_control`` is hashed; a prefix seen before reports ``cache_read_input_tokens``, a new
  one ``cache_creation_input_tokens`` (tokens ≈ characters / 4).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from aiohttp import web

from fakes.local_http import InFlight, serve_locally, wait_quiet

__all__ = ["FakeAnthropic"]


class FakeAnthropic:
    """``async with FakeAnthropic() as fake: AnthropicModel(..., base_url=fake.url)``."""

    def __init__(
        self, reply: str = "The Drowned Bell rang thirteen times [The Long Winter]."
    ) -> None:
        self.reply = reply
        #: How much of the reply a faulty stream sends before its fault.
        self.partial = 24
        self.requests: list[dict[str, Any]] = []
        self.script: list[int | str] = []
        self.seen_prefixes: set[str] = set()
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()
        self._in_flight = InFlight()

    async def __aenter__(self) -> FakeAnthropic:
        app = web.Application()
        app.router.add_post("/v1/messages", self._in_flight.wrap(self._messages))
        self._runner, self.url = await serve_locally(app)
        return self

    async def wait_quiet(self, *, limit: float = 30.0) -> None:
        """Return once no request is in flight here and the loop is idle (see
        :func:`fakes.local_http.wait_quiet`); a ``"hang"`` or ``"stall"`` request is in flight
        until the fake closes, so wait only where none is scripted."""
        await wait_quiet(lambda: self._in_flight.count, limit=limit)

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        self._release.set()  # free hanging handlers so shutdown does not wait for them
        await self._runner.cleanup()

    @staticmethod
    def cached_prefix(body: dict[str, Any]) -> str | None:
        """The canonical JSON of the system blocks up to the breakpoint, or ``None``."""
        system = body.get("system") or []
        if isinstance(system, str):
            return None
        for i, block in enumerate(system):
            if block.get("cache_control"):
                return json.dumps(
                    {"model": body["model"], "system": system[: i + 1]}, sort_keys=True
                )
        return None

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        total = sum(len(b.get("text", "")) for b in body.get("system") or []) // 4
        total += sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
        prefix = self.cached_prefix(body)
        read = write = 0
        if prefix is not None:
            digest = hashlib.sha256(prefix.encode()).hexdigest()
            cached = len(prefix) // 4
            if digest in self.seen_prefixes:
                read = cached
            else:
                write = cached
                self.seen_prefixes.add(digest)
        return {
            "input_tokens": max(0, total - read - write),
            "output_tokens": max(1, len(self.reply) // 4),
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append({"headers": dict(request.headers), "body": body})
        action = self.script.pop(0) if self.script else "ok"
        if any(not m.get("content") for m in body.get("messages", [])):
            return web.json_response(
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "messages: all messages must have non-empty content",
                    },
                },
                status=400,
            )
        if action == "hang":
            try:
                await asyncio.wait_for(self._release.wait(), 30)
            except TimeoutError:
                pass
        if isinstance(action, int):
            kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(action, "api_error")
            return web.json_response(
                {"type": "error", "error": {"type": kind, "message": "simulated"}},
                status=action,
            )
        if action == "not-json":
            return web.Response(
                text="<html><body>502 Bad Gateway</body></html>",
                content_type="application/json" if not body.get("stream") else "text/event-stream",
            )
        usage = self._usage(body)
        msg_id = f"msg_{len(self.requests):04d}"
        if not body.get("stream"):
            message = {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [] if action == "empty" else [{"type": "text", "text": self.reply}],
                "stop_reason": "max_tokens" if action == "cut" else "end_turn",
                "stop_sequence": None,
                "usage": usage,
            }
            if action not in {"drop", "malformed", "stall"}:
                return web.json_response(message)
            # Without a stream the same faults cut the JSON body: the connection closes half
            # way, the body ends half way, or it stops coming.
            raw = json.dumps(message).encode()
            half = raw[: len(raw) // 2]
            if action == "malformed":
                return web.Response(body=half, content_type="application/json")
            plain = web.StreamResponse(
                headers={"Content-Type": "application/json", "Content-Length": str(len(raw))}
            )
            await plain.prepare(request)
            await plain.write(half)
            if action == "drop":
                assert request.transport is not None
                request.transport.close()
                return plain
            try:
                await asyncio.wait_for(self._release.wait(), 30)
            except TimeoutError:
                pass
            return plain
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)

        async def send(event: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

        start_usage = {**usage, "output_tokens": 1}
        await send(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        )
        await send(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        faulty = action in {"drop", "malformed", "error-event", "stall"}
        for i in range(0, self.partial if faulty else len(self.reply), 12):
            await send(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {
                        "type": "text_delta",
                        "text": self.reply[i : min(i + 12, self.partial) if faulty else i + 12],
                    },
                },
            )
        if action == "drop":
            assert request.transport is not None
            request.transport.close()  # mid-body: the client reads a chunked stream cut short
            return resp
        if action == "malformed":
            await resp.write(b'event: content_block_delta\ndata: {"type": "content_block_de\n\n')
        elif action == "error-event":
            await send(
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
        elif action == "stall":
            try:
                await asyncio.wait_for(self._release.wait(), 30)
            except TimeoutError:
                pass
        if faulty:
            await resp.write_eof()
            return resp
        await send("content_block_stop", {"type": "content_block_stop", "index": 0})
        await send(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        await send("message_stop", {"type": "message_stop"})
        await resp.write_eof()
        return resp
