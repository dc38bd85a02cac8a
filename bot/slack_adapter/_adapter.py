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
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.messages import Attachment, IncomingMessage, Reply
from bot.presses import opens_form
from bot.render import describe_view
from bot.service import BotService
from bot.slack_adapter._render import (
    DM_FILES_NOTE,
    FILES_NOTE,
    HomeEntry,
    SlackMessage,
    render_blocks,
    render_home,
    render_modal,
    render_partial,
)
from bot.streaming import EDIT_INTERVAL_S, StreamedEdits
from bot.upload_files import TooLarge, download_to_file
from liminalis.errors import ConfigError

__all__ = ["SlackAdapter", "ChannelRateLimiter"]

_log = logging.getLogger(__name__)
#: ``/campaign …`` however it is written: ``/lore campaign``, ``/lore gm campaign``, ``campaign``.
_CAMPAIGN_COMMAND = re.compile(r"\s*/?(?:lore\s+)?(?:/?gm\s+)?/?campaign\b", re.IGNORECASE)
NEUTRAL = "Sorry, something went wrong on my side. The error has been logged."
DOWNLOAD_FAILED = "could not be downloaded from Slack; attach it again"
_DOWNLOAD_TIMEOUT = aiohttp.ClientTimeout(total=60)
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
#: The one slash command: everything else is its first word.
COMMAND = "/lore"
_ACTION = re.compile(r"^lm:")


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
        self.app.action(_ACTION)(ack=self._ack, lazy=[self._on_action])
        self.app.view(_ACTION)(ack=self._ack, lazy=[self._on_form])
        self.app.error(self._on_error)
        service.use_seating("slack", self.seat)

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
        bot_dm: bool = False,
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
            bot_dm=bot_dm,
            # Asked of Slack only for /lore campaign (create needs it): one lookup, not one a message.
            can_manage=bool(_CAMPAIGN_COMMAND.match(text)) and await self.is_admin(user_id),
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
        posted: list[str] = []  # the ts of a streamed answer's message
        user = body.get("user_id", "")
        try:
            msg = await self.incoming(
                user_id=user,
                channel_id=channel,
                text=text,
                is_dm=is_dm,
                # A slash command works in any conversation, a DM between two people included,
                # and its payload says only "directmessage": the app's own DM is told by its id.
                bot_dm=is_dm and await self._is_app_dm(channel, user),
            )
            pending = await self.service.begin(msg)
            stream = None if pending.private else self._stream(channel, posted)
            reply = await pending.finish(progress=stream)
        except Exception:
            _log.exception("slack command failed")
            reply = Reply(text=NEUTRAL, ephemeral=True, error=True)
        # A private reply's picture goes to the app's DM with the member, even for a command
        # typed in a DM: that DM may be one between two people.
        messages = render_blocks(reply, files_note=await self._private_files(reply, user))
        if posted:
            messages = await self._finish_stream(channel, posted[0], reply, messages)
        for m in messages:
            await self.limiter.wait(channel)
            await respond(
                blocks=list(m.blocks),
                text=m.text,
                response_type="ephemeral" if reply.ephemeral else "in_channel",
                replace_original=False,
            )
        if reply.files and not reply.ephemeral:
            await self._upload(reply, channel=channel)

    def _stream(
        self, channel: str, posted: list[str], thread_ts: str | None = None
    ) -> StreamedEdits:
        """A public answer's text so far: posted once, then updated in place (``posted`` gets
        the message's ts). A post refused (the bot is not in the channel) ends the streaming;
        the answer then comes whole."""

        async def edit(text: str) -> None:
            blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
            if not posted:
                await self.limiter.wait(channel)
                resp = await self.client.chat_postMessage(
                    channel=channel, text=text, blocks=blocks, thread_ts=thread_ts
                )
                posted.append(str(resp["ts"]))
            else:
                await self.client.chat_update(
                    channel=channel, ts=posted[0], text=text, blocks=blocks
                )

        return StreamedEdits(
            edit, render=render_partial, interval=self.edit_interval, clock=self.clock
        )

    async def _finish_stream(
        self, channel: str, ts: str, reply: Reply, messages: list[SlackMessage]
    ) -> list[SlackMessage]:
        """The streamed message becomes the reply's first message (one complete message with
        its sources); returns the messages left to send. A reply that turned private (an
        error) replaces the partial text with a neutral line and goes privately."""
        if reply.ephemeral:
            await self.client.chat_update(channel=channel, ts=ts, text="(no answer)", blocks=[])
            return messages
        first, *rest = messages
        await self.client.chat_update(
            channel=channel, ts=ts, text=first.text, blocks=list(first.blocks)
        )
        return rest

    async def _on_mention(self, event: dict[str, Any], context: Any) -> None:
        # Events come only from conversations the app is in: an "im" there is its own DM.
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
        posted: list[str] = []
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
                bot_dm=is_dm,
                file_count=len(files),
            )
            pending = await self.service.begin(msg)
            attachments: list[Attachment] = []
            if files and pending.is_gm:  # past the tenth: named, not downloaded
                attachments = [await self._download(f) for f in files[:10]] + [
                    Attachment(str(f.get("name") or "upload.md"), b"") for f in files[10:]
                ]
            public = not pending.private or is_dm
            stream = self._stream(channel, posted, thread_ts) if public else None
            reply = await pending.finish(tuple(attachments), progress=stream)
        except Exception:
            _log.exception("slack mention failed")
            reply = Reply(text=NEUTRAL, ephemeral=True, error=True)
        private = reply.ephemeral and not is_dm
        note = await self._private_files(reply, user) if private else ""
        messages = render_blocks(reply, files_note=note)
        if posted:
            messages = await self._finish_stream(channel, posted[0], reply, messages)
        for m in messages:
            await self.limiter.wait(channel)
            if private:
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
        if reply.files and not private:
            await self._upload(reply, channel=channel, thread_ts=thread_ts)

    # -- files -------------------------------------------------------------------------------

    async def _private_files(self, reply: Reply, user: str) -> str:
        """Send a private reply's files to ``user``'s DM with the app; returns the note to say
        under the reply (``""`` for a public reply, whose files follow it in its channel)."""
        if not reply.files or not reply.ephemeral:
            return ""
        dm = await self._app_dm(user)
        if not dm:
            return FILES_NOTE
        return DM_FILES_NOTE if await self._upload(reply, channel=dm) else FILES_NOTE

    async def _is_app_dm(self, channel: str, user: str) -> bool:
        """Whether ``channel`` is the app's own DM with ``user`` (a DM's id starts with D; only
        one is theirs with the app)."""
        return channel.startswith("D") and channel == await self._app_dm(user)

    async def _app_dm(self, user: str) -> str:
        """The id of the app's own DM with ``user`` (``conversations.open``), ``""`` when it
        cannot be opened (a missing ``im:write`` scope): then no conversation counts as it."""
        if not user:
            return ""
        if user in self._app_dms:
            return self._app_dms[user]
        try:
            resp = await self.client.conversations_open(users=user)
            dm = str((resp.get("channel") or {}).get("id") or "")
        except Exception as exc:
            _log.warning("slack: no DM with %s (%s)", user, exc)
            return ""
        if not dm.startswith("D"):  # never a shared conversation as a member's own
            return ""
        self._app_dms[user] = dm
        return dm

    async def _upload(self, reply: Reply, *, channel: str, thread_ts: str | None = None) -> bool:
        """Upload ``reply.files`` to ``channel`` (and ``thread_ts``) with ``files_upload_v2``
        (files.getUploadURLExternal, a POST of the bytes, files.completeUploadExternal).
        A refusal (no ``files:write``, the app not in the channel) is logged: the reply's
        text already holds what the picture shows."""
        uploads = [
            {"file": f.data, "filename": f.filename, "title": f.filename} for f in reply.files
        ]
        await self.limiter.wait(channel)
        try:
            await self.client.files_upload_v2(
                file_uploads=uploads, channel=channel, thread_ts=thread_ts
            )
        except Exception as exc:
            _log.warning("slack: the reply's files could not be posted to %s (%s)", channel, exc)
            return False
        return True

    # -- buttons, forms, the Home tab --------------------------------------------------------

    async def _on_action(
        self, body: dict[str, Any], respond: Callable[..., Awaitable[Any]]
    ) -> None:
        """A button of ours pressed: checked and run by ``BotService.press``; its reply goes in
        place of the pressed message, to the channel, to the presser alone, or opens a form."""
        action = str(((body.get("actions") or [{}])[0]).get("action_id") or "")
        user = str((body.get("user") or {}).get("id") or "")
        container = body.get("container") or {}
        channel = str((body.get("channel") or {}).get("id") or container.get("channel_id") or "")
        home = container.get("type") == "view"
        dm_channel = str((body.get("view") or {}).get("private_metadata") or "") if home else ""
        try:
            msg = await self.incoming(
                user_id=user,
                channel_id=channel or dm_channel,
                text="",
                is_dm=home or channel.startswith("D"),
                bot_dm=home or await self._is_app_dm(channel, user),
            )
            reply = await self.service.press(msg, action)
            if reply.form is not None and not reply.error and opens_form(action):
                metadata = json.dumps({"channel": channel, "dm": dm_channel})
                await self.client.views_open(
                    trigger_id=body.get("trigger_id", ""),
                    view=render_modal(reply.form, metadata=metadata),
                )
                return
        except Exception:
            _log.exception("slack button %s failed", action[:40])
            reply = Reply(text=NEUTRAL, ephemeral=True, error=True)
        await self._deliver(
            reply,
            user=user,
            channel=channel,
            dm_channel=dm_channel,
            thread_ts=container.get("thread_ts"),
            respond=respond if body.get("response_url") else None,
        )

    async def _on_form(self, body: dict[str, Any]) -> None:
        """A form of ours sent (a 👎's reason, a question from the Home tab)."""
        view = body.get("view") or {}
        action = str(view.get("callback_id") or "")
        user = str((body.get("user") or {}).get("id") or "")
        try:
            where = json.loads(view.get("private_metadata") or "{}")
        except ValueError:
            where = {}
        channel, dm_channel = str(where.get("channel") or ""), str(where.get("dm") or "")
        values = ((view.get("state") or {}).get("values") or {}).get("value") or {}
        value = str((values.get("value") or {}).get("value") or "")
        try:
            msg = await self.incoming(
                user_id=user,
                channel_id=channel or dm_channel,
                text="",
                is_dm=not channel or channel.startswith("D"),
                bot_dm=not channel or await self._is_app_dm(channel, user),
            )
            reply = await self.service.press(msg, action, value)
        except Exception:
            _log.exception("slack form %s failed", action[:40])
            reply = Reply(text=NEUTRAL, ephemeral=True, error=True)
        await self._deliver(
            reply, user=user, channel=channel, dm_channel=dm_channel, thread_ts=None, respond=None
        )

    async def _deliver(
        self,
        reply: Reply,
        *,
        user: str,
        channel: str,
        dm_channel: str,
        thread_ts: str | None,
        respond: Callable[..., Awaitable[Any]] | None,
    ) -> None:
        """A press's reply: in place (through the pressed message's ``response_url``), to the
        channel (``chat.postMessage``), or to the presser alone (``response_url`` as ephemeral,
        ``chat.postEphemeral``, or their DM with the app when pressed on the Home tab)."""
        messages = render_blocks(reply)
        mode = "private" if reply.error else reply.delivery
        for i, m in enumerate(messages):
            blocks, text = list(m.blocks), m.text
            if mode == "replace" and respond is not None and i == 0:
                await respond(blocks=blocks, text=text, replace_original=True)
            elif mode == "public" and channel:
                await self.limiter.wait(channel)
                await self.client.chat_postMessage(
                    channel=channel, blocks=blocks, text=text, thread_ts=thread_ts
                )
            elif respond is not None:
                await respond(
                    blocks=blocks, text=text, response_type="ephemeral", replace_original=False
                )
            elif channel and not channel.startswith("D"):
                await self.client.chat_postEphemeral(
                    channel=channel, user=user, blocks=blocks, text=text
                )
            elif channel or dm_channel:  # a DM is private already
                await self.client.chat_postMessage(
                    channel=channel or dm_channel, blocks=blocks, text=text
                )

    async def _on_home(self, event: dict[str, Any]) -> None:
        """Publish the member's Home tab: their campaigns, what they can see in each, the recap
        schedules and quick actions."""
        if event.get("tab", "home") != "home":
            return
        user = str(event.get("user") or "")
        try:
            msg = await self.incoming(
                user_id=user,
                channel_id=str(event.get("channel") or ""),
                text="",
                is_dm=True,
                bot_dm=True,
            )
            entries = [
                HomeEntry(
                    seat.config.slug, seat.config.name, describe_view(seat.lens.describe()), recaps
                )
                for seat, recaps in await self.service.home(msg)
            ]
            view = render_home(entries, dm_channel=str(event.get("channel") or ""))
            await self.client.views_publish(user_id=user, view=view)
        except Exception:
            _log.exception("slack: the Home tab of %s could not be published", user)

    # -- direct messages ---------------------------------------------------------------------

    async def seat(
        self, msg: IncomingMessage, channels: Sequence[tuple[str, str | None]]
    ) -> list[IncomingMessage]:
        """Where the author of a DM sits (``bot.service.Seating``): each linked channel they are
        a member of (``conversations.members``), as a message of theirs there. A channel whose
        members cannot be read counts as none."""
        out: list[IncomingMessage] = []
        for channel_id, _ in channels:
            members = await self._channel_members(channel_id)
            if members is not None and msg.user_id in members:
                out.append(
                    await self.incoming(
                        user_id=msg.user_id, channel_id=channel_id, text=msg.text, is_dm=False
                    )
                )
        return out

    async def _channel_members(self, channel_id: str) -> frozenset[str] | None:
        now = self.clock()
        cached = self._members.get(channel_id)
        if cached is not None and now - cached[0] < self.usergroup_ttl:
            return cached[1]
        members: set[str] = set()
        cursor = ""
        try:
            for _ in range(20):  # 20 pages of 1,000: a channel of 20,000 members at most
                resp = await self.client.conversations_members(
                    channel=channel_id, limit=1000, cursor=cursor or None
                )
                members.update(str(m) for m in resp.get("members") or [])
                cursor = str((resp.get("response_metadata") or {}).get("next_cursor") or "")
                if not cursor:
                    break
        except Exception as exc:  # a missing scope, an archived channel: nobody sits there
            _log.warning("slack: members of %s unreadable (%s)", channel_id, exc)
            self._members[channel_id] = (now, None)
            return None
        found = frozenset(members)
        self._members[channel_id] = (now, found)
        return found

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
        try:  # streamed to a temporary file, never whole in memory (bot.upload_files)
            path = await download_to_file(
                url,
                max_bytes=self.service.max_upload_bytes,
                client_timeout=_DOWNLOAD_TIMEOUT,
                headers=headers,
            )
        except TooLarge:  # more than it declared: refused by size like a file declared so
            return Attachment(name, b"", size=self.service.max_upload_bytes + 1)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            _log.warning("slack: downloading %s failed: %s", name, exc)
            return Attachment(name, b"", error=DOWNLOAD_FAILED)
        return Attachment(name, b"", path=path)

    async def _on_error(self, error: Exception, body: dict[str, Any]) -> None:
        _log.error("slack listener failed", exc_info=error)

    async def post(self, channel_id: str, reply: Reply) -> str:
        """Post a (public) reply to a channel: scheduled recaps; returns the ``ts`` of its first
        message, which the scheduler stores so the slot is never posted again."""
        stamps: list[str] = []
        for m in render_blocks(reply):
            await self.limiter.wait(channel_id)
            resp = await self.client.chat_postMessage(
                channel=channel_id, blocks=list(m.blocks), text=m.text
            )
            stamps.append(str(resp.get("ts") or ""))
        return stamps[0] if stamps else ""
