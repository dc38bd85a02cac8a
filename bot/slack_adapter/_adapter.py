"""The Slack adapter: ``/lore …``, @-mentions, DMs, buttons and the App Home → ``BotService``.

slack-bolt ``AsyncApp``; in production it runs in Socket Mode (``AsyncSocketModeHandler`` with
the ``xapp-`` app token), so no public HTTP endpoint is needed. The app registers one slash
command, ``/lore`` (``/lore ask …``, ``/lore gm upload …``, ``/lore <question>``), so it squats
on no common name. Every listener acknowledges first (``ack()``, well within Slack's 3 s) and
does the work in a lazy listener. Slash-command replies go to the command's ``response_url``
(``ephemeral`` or ``in_channel``); a public answer from a model is posted at once and updated
in place as it streams (``chat.update``, at most once a second). Mention replies go to the
mention's thread (``thread_ts``) with ``chat.postMessage``, or ``chat.postEphemeral`` for a GM
answer in a shared channel. A reply's files (the map's picture) are uploaded with
``files_upload_v2`` after its text: a public reply's to its channel and thread, a private
reply's to the member's DM with the app (``conversations.open``), never to the channel: Slack
has no ephemeral file, and the DM keeps the picture where the words went, to that member alone.
A DM is answered for the campaign its author plays (found through
``conversations.members`` of the linked channels). Buttons come back as ``block_actions``,
forms as ``view_submission``; the Home tab is published on ``app_home_opened``. Posts to one channel are spaced at least a second apart
(:class:`ChannelRateLimiter`); a 429 from the Web API is retried after ``Retry-After`` by
slack_sdk's ``AsyncRateLimitErrorRetryHandler``.

The parts, by direction: ``_inbound`` (events → requests), ``_delivery`` (replies, streams and
files out), ``_components`` (buttons and forms); this module holds the app's lifecycle and wires
the listeners.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.service import BotService
from bot.slack_adapter._components import ACTION, Components
from bot.slack_adapter._state import COMMAND, ChannelRateLimiter
from bot.streaming import EDIT_INTERVAL_S
from liminalis.errors import ConfigError

__all__ = ["COMMAND", "ChannelRateLimiter", "SlackAdapter"]

_log = logging.getLogger(__name__)


class SlackAdapter(Components):
    """Slash commands, mentions and DMs for one ``BotService``.

    Args:
        service: the one entry point.
        client: the Web API client (``AsyncWebClient(token=xoxb-…)``; tests pass ``base_url``).
        signing_secret: verifies HTTP requests; Socket Mode requests are not signed, so it may be empty.
        limiter: per-channel spacing (default one message per second).
        usergroup_ttl: seconds a usergroup membership lookup (and a channel's members, for
            DMs) is cached.
        clock: monotonic seconds, for a streamed answer's updates (a fake one in tests).
        edit_interval: the least seconds between two updates of a streamed answer.
    """

    def __init__(
        self,
        service: BotService,
        *,
        client: AsyncWebClient,
        signing_secret: str = "",
        limiter: ChannelRateLimiter | None = None,
        usergroup_ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        edit_interval: float = EDIT_INTERVAL_S,
    ) -> None:
        self.service = service
        self.client = client
        if not any(isinstance(h, AsyncRateLimitErrorRetryHandler) for h in client.retry_handlers):
            client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=2))
        self.limiter = limiter or ChannelRateLimiter()
        self.usergroup_ttl = usergroup_ttl
        self._groups: tuple[float, dict[str, tuple[str, ...]] | None] = (float("-inf"), None)
        self._socket: Any = None  # the Socket Mode client while `run` serves
        self._admins: dict[str, tuple[float, bool]] = {}
        self._members: dict[str, tuple[float, frozenset[str] | None]] = {}
        self._app_dms: dict[str, str] = {}  # user id → the app's DM with them (never changes)
        self.clock = clock
        self.edit_interval = edit_interval
        self.app = AsyncApp(
            client=client,
            signing_secret=signing_secret or None,
            request_verification_enabled=bool(signing_secret),
        )
        self.app.command(COMMAND)(ack=self._ack, lazy=[self._on_command])
        self.app.event("app_mention")(ack=self._ack, lazy=[self._on_mention])
        self.app.event({"type": "message", "channel_type": "im"})(ack=self._ack, lazy=[self._on_dm])
        self.app.event("app_home_opened")(ack=self._ack, lazy=[self._on_home])
        self.app.action(ACTION)(ack=self._ack, lazy=[self._on_action])
        self.app.view(ACTION)(ack=self._ack, lazy=[self._on_form])
        self.app.error(self._on_error)
        service.use_seating("slack", self.seat)

    async def run(self, app_token: str) -> None:
        """Serve over Socket Mode until cancelled. The bot token is checked first: Socket Mode
        connects with the app token alone, and a wrong bot token otherwise showed "connected"
        while every command got Slack's "reinstall the app" reply and mentions went unanswered."""
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
        from slack_sdk.errors import SlackApiError

        try:
            await self.client.auth_test()
        except SlackApiError as exc:
            raise ConfigError(
                f"SLACK_BOT_TOKEN was refused by Slack ({exc.response.get('error', '?')})"
            ) from exc

        handler = AsyncSocketModeHandler(self.app, app_token)
        await handler.connect_async()
        _log.info("slack: connected over Socket Mode")
        self._socket = handler.client
        try:
            await asyncio.Event().wait()
        finally:
            self._socket = None
            await handler.close_async()

    async def is_connected(self) -> bool:
        """The Socket Mode connection is up (not closed, not stale, answering pings): the status
        file's probe."""
        return self._socket is not None and bool(await self._socket.is_connected())
