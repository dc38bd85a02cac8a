"""Inbound: Slack events (the ``/lore`` command, mentions, DMs, the App Home) → one neutral
``IncomingMessage`` → ``BotService``; who a member is (usergroups, admin, DM seats) is read here."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp

from bot.messages import Attachment, IncomingMessage, Reply
from bot.render import describe_view
from bot.slack_adapter._delivery import Delivery
from bot.slack_adapter._render import (
    HomeEntry,
    render_blocks,
    render_home,
)
from bot.slack_adapter._state import NEUTRAL
from bot.upload_files import TooLarge, download_to_file

__all__ = ["DOWNLOAD_FAILED", "Inbound"]

_log = logging.getLogger(__name__)
#: ``/campaign …`` however it is written: ``/lore campaign``, ``/lore gm campaign``, ``campaign``.
_CAMPAIGN_COMMAND = re.compile(r"\s*/?(?:lore\s+)?(?:/?gm\s+)?/?campaign\b", re.IGNORECASE)

DOWNLOAD_FAILED = "could not be downloaded from Slack; attach it again"

_DOWNLOAD_TIMEOUT = aiohttp.ClientTimeout(total=60)

_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")

#: Message subtypes that are a person's message: plain, with files, a thread reply also sent to
#: the channel.
_USER_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})


class Inbound(Delivery):
    """Receiving: an event becomes the service's request, its reply goes out by ``Delivery``."""

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
