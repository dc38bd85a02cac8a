"""Outbound: replies, streamed answers and files sent to Slack (``response_url``, ``chat.*``,
``files_upload_v2``), a private reply's files to the member's DM with the app, posts spaced per
channel by :class:`ChannelRateLimiter`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.messages import Reply
from bot.slack_adapter._render import (
    DM_FILES_NOTE,
    FILES_NOTE,
    SlackMessage,
    render_blocks,
    render_partial,
)
from bot.slack_adapter._state import SlackState
from bot.streaming import StreamedEdits

__all__ = ["Delivery"]

_log = logging.getLogger(__name__)


class Delivery(SlackState):
    """Sending: every way a ``Reply`` leaves the bot."""

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
