"""What every part of the Slack adapter shares: the state the adapter holds (typed once, so each
direction's module is checked against it) and the values each direction uses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.service import BotService

__all__ = ["COMMAND", "NEUTRAL", "SlackState"]

NEUTRAL = "Sorry, something went wrong on my side. The error has been logged."

#: The one slash command: everything else is its first word.
COMMAND = "/lore"


class SlackState:
    """The adapter's attributes, set by ``SlackAdapter.__init__``."""

    service: BotService
    client: AsyncWebClient
    app: AsyncApp
    limiter: ChannelRateLimiter
    usergroup_ttl: float
    clock: Callable[[], float]
    edit_interval: float
    _groups: tuple[float, dict[str, tuple[str, ...]] | None]
    #: The Socket Mode client while ``run`` serves.
    _socket: Any
    _admins: dict[str, tuple[float, bool]]
    _members: dict[str, tuple[float, frozenset[str] | None]]
    #: User id → the app's DM with them (never changes).
    _app_dms: dict[str, str]


class ChannelRateLimiter:
    """At most one message per ``interval`` seconds per channel (Slack's chat.postMessage guidance)."""

    def __init__(
        self,
        interval: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.interval = interval
        self.clock = clock
        self.sleep = sleep
        self._next: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def wait(self, channel: str) -> None:
        """Return when a message may be sent to ``channel``; reserves that slot."""
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:
            now = self.clock()
            at = self._next.get(channel, now)
            if at > now:
                await self.sleep(at - now)
                now = at
            self._next[channel] = now + self.interval
