"""The Slack adapter: slash commands and @-mentions → ``BotService.handle`` → Block Kit.

slack-bolt ``AsyncApp``; in production it runs in Socket Mode (``AsyncSocketModeHandler`` with
the ``xapp-`` app token), so no public HTTP endpoint is needed. Every listener acknowledges
first (``ack()``, well within Slack's 3 s) and does the work in a lazy listener. Slash-command
replies go to the command's ``response_url`` (``ephemeral`` or ``in_channel``); mention replies
go to the mention's thread (``thread_ts``) with ``chat.postMessage``, or ``chat.postEphemeral``
for a GM answer in a shared channel. Posts to one channel are spaced at least a second apart
(:class:`ChannelRateLimiter`); a 429 from the Web API is retried after ``Retry-After`` by
slack_sdk's ``AsyncRateLimitErrorRetryHandler``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.messages import Attachment, IncomingMessage, Reply
from bot.service import BotService
from bot.slack_adapter._render import render_blocks
from liminalis.errors import ConfigError

__all__ = ["SlackAdapter", "ChannelRateLimiter"]

_log = logging.getLogger(__name__)
NEUTRAL = "Sorry, something went wrong on my side. The error has been logged."
DOWNLOAD_FAILED = "could not be downloaded from Slack; attach it again"
_DOWNLOAD_TIMEOUT = aiohttp.ClientTimeout(total=60)
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


#: Message subtypes that are a person's message: plain, with files, a thread reply also sent to
#: the channel.
_USER_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})


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


class SlackAdapter:
    """Slash commands, mentions and DMs for one ``BotService``.

    Args:
        service: the one entry point.
        client: the Web API client (``AsyncWebClient(token=xoxb-…)``; tests pass ``base_url``).
        signing_secret: verifies HTTP requests; Socket Mode requests are not signed, so it may be empty.
        limiter: per-channel spacing (default one message per second).
        usergroup_ttl: seconds a usergroup membership lookup is cached.
    """

    def __init__(
        self,
        service: BotService,
        *,
        client: AsyncWebClient,
        signing_secret: str = "",
        limiter: ChannelRateLimiter | None = None,
        usergroup_ttl: float = 60.0,
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
        self.app = AsyncApp(
            client=client,
            signing_secret=signing_secret or None,
            request_verification_enabled=bool(signing_secret),
        )
        for name in service.registry.names:
            self.app.command(f"/{name}")(ack=self._ack, lazy=[self._on_command])
        self.app.event("app_mention")(ack=self._ack, lazy=[self._on_mention])
        self.app.event({"type": "message", "channel_type": "im"})(ack=self._ack, lazy=[self._on_dm])
        self.app.error(self._on_error)

    # -- lifecycle ---------------------------------------------------------------------------

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
        file's probe (issue #26)."""
        return self._socket is not None and bool(await self._socket.is_connected())

    # -- lens inputs -------------------------------------------------------------------------

    async def usergroups_of(self, user_id: str) -> tuple[str, ...]:
        """Ids and handles of the user groups ``user_id`` belongs to; ``()`` when the lookup fails.

        A failed lookup (missing ``usergroups:read`` scope, a free workspace, an outage) means no
        group membership, so group-based GMs fall back to the players lens (default-deny).
        """
        fetched_at, table = self._groups
        if table is None or time.monotonic() - fetched_at > self.usergroup_ttl:
            table = {}
            try:
                resp = await self.client.usergroups_list(include_users=True)
                for group in resp.get("usergroups", []) or []:
                    names = tuple(x for x in (group.get("id"), group.get("handle")) if x)
                    for uid in group.get("users", []) or []:
                        table[uid] = table.get(uid, ()) + names
            except Exception as exc:
                _log.warning(
                    "slack: usergroups lookup failed (%s); group GMs get the players lens", exc
                )
            self._groups = (time.monotonic(), table)
        return table.get(user_id, ())

    async def is_admin(self, user_id: str) -> bool:
        """Whether ``user_id`` is a workspace admin or owner (``users.info``, ``users:read``);
        ``False`` when the lookup fails. Cached like the user groups."""
        at, known = self._admins.get(user_id, (float("-inf"), False))
        if time.monotonic() - at <= self.usergroup_ttl:
            return known
        try:
            resp = await self.client.users_info(user=user_id)
            user = resp.get("user") or {}
            known = bool(user.get("is_admin") or user.get("is_owner"))
        except Exception as exc:
            _log.warning("slack: users.info failed (%s); not a workspace admin", exc)
            known = False
        self._admins[user_id] = (time.monotonic(), known)
        return known

    async def incoming(
        self,
        *,
        user_id: str,
        channel_id: str,
        text: str,
        is_dm: bool,
        attachments: tuple[Attachment, ...] = (),
        file_count: int = 0,
    ) -> IncomingMessage:
        # Slack escapes &, < and > in what users type (&amp; &lt; &gt;); commands see the text as typed.
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        return IncomingMessage(
            platform="slack",
            channel_id=channel_id,
            user_id=user_id,
            text=text,
            usergroups=await self.usergroups_of(user_id),
            is_dm=is_dm,
            # Asked of Slack only for /campaign (create needs it): one lookup, not one a message.
            can_manage=text.lower().startswith("/campaign") and await self.is_admin(user_id),
            attachments=attachments,
            file_count=file_count,
        )

    # -- listeners ---------------------------------------------------------------------------

    @staticmethod
    async def _ack(ack: Callable[..., Awaitable[Any]]) -> None:
        await ack()

    async def _on_command(
        self, body: dict[str, Any], respond: Callable[..., Awaitable[Any]]
    ) -> None:
        channel = body.get("channel_id", "")
        is_dm = channel.startswith("D") or body.get("channel_name") == "directmessage"
        text = f"{body.get('command', '')} {body.get('text', '')}".strip()
        try:
            msg = await self.incoming(
                user_id=body.get("user_id", ""), channel_id=channel, text=text, is_dm=is_dm
            )
            reply = await self.service.handle(msg)
        except Exception:
            _log.exception("slack command failed")
            reply = Reply(text=NEUTRAL, ephemeral=True, error=True)
        for m in render_blocks(reply):
            await self.limiter.wait(channel)
            await respond(
                blocks=list(m.blocks),
                text=m.text,
                response_type="ephemeral" if reply.ephemeral else "in_channel",
                replace_original=False,
            )

    async def _on_mention(self, event: dict[str, Any], context: Any) -> None:
        await self._answer_event(
            event,
            bot_user_id=getattr(context, "bot_user_id", None) or context.get("bot_user_id"),
            is_dm=event.get("channel_type") == "im",
        )

    async def _on_dm(self, event: dict[str, Any], context: Any) -> None:
        # A message with a file comes as subtype "file_share" (a GM's upload in a DM, a player's
        # question with a screenshot); edits, deletions, joins and bots' posts are not questions.
        if event.get("subtype") not in _USER_SUBTYPES or event.get("bot_id"):
            return
        await self._answer_event(
            event,
            bot_user_id=getattr(context, "bot_user_id", None) or context.get("bot_user_id"),
            is_dm=True,
        )

    async def _answer_event(
        self, event: dict[str, Any], *, bot_user_id: str | None, is_dm: bool
    ) -> None:
        channel = event.get("channel", "")
        user = event.get("user", "")
        thread_ts = event.get("thread_ts") or event.get("ts")
        try:
            text = _MENTION.sub(
                lambda m: "" if m.group(1) == bot_user_id else m.group(0), event.get("text", "")
            ).strip()
            files = event.get("files") or []
            msg = await self.incoming(
                user_id=user,
                channel_id=channel,
                text=text or ("" if files else "/help"),  # files alone: a GM's DM upload
                is_dm=is_dm,
                file_count=len(files),
            )
            pending = await self.service.begin(msg)
            attachments: list[Attachment] = []
            if files and pending.is_gm:  # past the tenth: named, not downloaded
                attachments = [await self._download(f) for f in files[:10]] + [
                    Attachment(str(f.get("name") or "upload.md"), b"") for f in files[10:]
                ]
            reply = await pending.finish(tuple(attachments))
        except Exception:
            _log.exception("slack mention failed")
            reply = Reply(text=NEUTRAL, ephemeral=True, error=True)
        for m in render_blocks(reply):
            await self.limiter.wait(channel)
            if reply.ephemeral and not is_dm:
                await self.client.chat_postEphemeral(
                    channel=channel,
                    user=user,
                    blocks=list(m.blocks),
                    text=m.text,
                    thread_ts=thread_ts,
                )
            else:
                await self.client.chat_postMessage(
                    channel=channel, blocks=list(m.blocks), text=m.text, thread_ts=thread_ts
                )

    async def _download(self, file: dict[str, Any]) -> Attachment:
        """One file of a GM's message; a failed download is reported for that file alone."""
        name = str(file.get("name") or "upload.md")
        try:
            size = int(file.get("size") or 0)
        except (TypeError, ValueError):
            size = 0
        url = file.get("url_private_download") or file.get("url_private")
        if size > self.service.max_upload_bytes:
            return Attachment(name, b"", size=size)  # rejected by the service, never downloaded
        if not url:  # a file hosted elsewhere (Google Drive…): nothing to download
            return Attachment(
                name, b"", error="not downloadable from Slack (attach the file itself)"
            )
        headers = {"Authorization": f"Bearer {self.client.token}"}
        try:
            async with (
                aiohttp.ClientSession(timeout=_DOWNLOAD_TIMEOUT) as session,
                session.get(url, headers=headers) as resp,
            ):
                resp.raise_for_status()
                # To the end (or past the cap, which the service refuses): ``content.read(n)``
                # returns only what has arrived so far, and a longer file was saved cut short.
                chunks: list[bytes] = []
                got = 0
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    chunks.append(chunk)
                    got += len(chunk)
                    if got > self.service.max_upload_bytes:
                        break
                data = b"".join(chunks)
        except (TimeoutError, aiohttp.ClientError) as exc:
            _log.warning("slack: downloading %s failed: %s", name, exc)
            return Attachment(name, b"", error=DOWNLOAD_FAILED)
        return Attachment(name, data)

    async def _on_error(self, error: Exception, body: dict[str, Any]) -> None:
        _log.error("slack listener failed", exc_info=error)

    async def post(self, channel_id: str, reply: Reply) -> None:
        """Post a (public) reply to a channel: scheduled recaps."""
        for m in render_blocks(reply):
            await self.limiter.wait(channel_id)
            await self.client.chat_postMessage(
                channel=channel_id, blocks=list(m.blocks), text=m.text
            )
