"""Outbound: replies, files and streamed answers sent to Discord (followups after a defer,
replies to a mention, DMs for a private answer, posts by channel id) with rate-limit retries.

discord.py's bot HTTP client sleeps on 429 for ``retry_after`` itself (``discord/http.py``,
``HTTPClient.request``), and so does its webhook adapter (interaction responses and followups)
*when the 429 carries a ``Via`` header*; a 429 without it (a Cloudflare-level limit) surfaces as
``HTTPException`` — :func:`send_with_retry` honours its ``Retry-After`` for our own loops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import discord

from bot.discord_adapter._render import button_view, render_partial, render_reply
from bot.discord_adapter._state import NO_MENTIONS, AdapterState, is_dm_channel
from bot.messages import Reply
from bot.streaming import StreamedEdits
from liminalis.errors import NotReady

__all__ = ["Delivery", "reply_in_channel", "send_with_retry"]

_log = logging.getLogger(__name__)
T = TypeVar("T")


async def send_with_retry(
    call: Callable[[], Awaitable[T]], *, attempts: int = 4, max_wait: float = 60.0
) -> T:
    """Run ``call``; on a 429 discord.py did not retry itself, wait ``retry_after`` and try again."""
    for attempt in range(attempts):
        try:
            return await call()
        except discord.RateLimited as exc:  # raised when retry_after exceeds max_ratelimit_timeout
            wait = exc.retry_after
        except discord.HTTPException as exc:
            if exc.status != 429 or attempt == attempts - 1:
                raise
            wait = _retry_after(exc)
        if wait > max_wait or attempt == attempts - 1:
            raise RuntimeError(f"rate limited for {wait:.1f}s; giving up")
        _log.warning("discord 429; retrying in %.2fs", wait)
        await asyncio.sleep(wait)
    raise AssertionError("unreachable")


def _retry_after(exc: discord.HTTPException) -> float:
    headers = getattr(exc.response, "headers", {}) or {}
    for key in ("Retry-After", "X-RateLimit-Reset-After"):
        try:
            return max(0.0, float(headers[key]))
        except (KeyError, TypeError, ValueError):
            continue
    return 1.0


def reply_in_channel(
    message: discord.Message, content: str | None, **kw: Any
) -> Awaitable[discord.Message]:
    """A reply in the message's channel that still goes out when the message is gone: the asker
    deleting it while the bot thinks made Discord refuse the reply, and the answer was lost."""
    return message.channel.send(
        content,
        reference=message.to_reference(fail_if_not_exists=False),
        allowed_mentions=NO_MENTIONS,
        mention_author=False,
        **kw,
    )


class Delivery(AdapterState):
    """Sending: every way a ``Reply`` leaves the bot."""

    async def followup(
        self,
        interaction: discord.Interaction,
        reply: Reply,
        *,
        deferred_private: bool,
        streamed: bool = False,
    ) -> None:
        """Send ``reply`` after a defer. A streamed answer's message becomes its first message
        (one complete message with its sources); the rest follow."""
        if reply.ephemeral and not deferred_private:
            # The public "thinking…" message cannot become private; replace it with a private one.
            await send_with_retry(interaction.delete_original_response)
            streamed = False
        ephemeral = reply.ephemeral or deferred_private
        outs = render_reply(reply)
        if streamed:
            first, outs = outs[0], outs[1:]
            await send_with_retry(
                lambda: interaction.edit_original_response(
                    content=first.content,
                    embeds=list(first.embeds),
                    view=button_view(first.actions),
                    allowed_mentions=NO_MENTIONS,
                )
            )
        for out in outs:
            await send_with_retry(
                lambda out=out: interaction.followup.send(  # type: ignore[misc]
                    content=out.content,
                    embeds=list(out.embeds),
                    view=button_view(out.actions),
                    ephemeral=ephemeral,
                    allowed_mentions=NO_MENTIONS,
                    **out.file_kwargs(),
                )
            )

    def _stream_reply(
        self, message: discord.Message, posted: list[discord.Message]
    ) -> StreamedEdits:
        async def edit(content: str) -> None:
            if not posted:
                posted.append(await reply_in_channel(message, content))
            else:
                await posted[0].edit(content=content, allowed_mentions=NO_MENTIONS)

        return StreamedEdits(
            edit, render=render_partial, interval=self.edit_interval, clock=self.clock
        )

    async def _finish_streamed(
        self, message: discord.Message, streamed: discord.Message, reply: Reply
    ) -> None:
        """The streamed reply becomes the answer's first message, whole, with its sources and
        buttons. A reply that turned private (an error) takes the partial text down and goes
        the private way."""
        if reply.ephemeral and not is_dm_channel(message.channel):
            await send_with_retry(streamed.delete)
            await self.reply_to_message(message, reply)
            return
        first, *rest = render_reply(reply)
        await send_with_retry(
            lambda: streamed.edit(
                content=first.content,
                embeds=list(first.embeds),
                view=button_view(first.actions) if first.actions else None,
                allowed_mentions=NO_MENTIONS,
            )
        )
        for out in rest:
            await send_with_retry(
                lambda out=out: message.channel.send(  # type: ignore[misc]
                    content=out.content,
                    embeds=list(out.embeds),
                    view=button_view(out.actions),
                    allowed_mentions=NO_MENTIONS,
                )
            )

    async def reply_to_message(self, message: discord.Message, reply: Reply) -> None:
        """Reply in channel; a private (GM, personal lens) reply goes to the author's DMs with a
        pointer left behind, wherever the channel is not known to be a DM."""
        outs = render_reply(reply)
        if reply.ephemeral and not is_dm_channel(message.channel):
            try:
                for out in outs:
                    await send_with_retry(
                        lambda out=out: message.author.send(  # type: ignore[misc]
                            content=out.content,
                            embeds=list(out.embeds),
                            view=button_view(out.actions),
                            allowed_mentions=NO_MENTIONS,
                            **out.file_kwargs(),
                        )
                    )
                note = "I sent you the answer in a direct message."
            except discord.Forbidden:
                note = "That answer is private, and I could not DM you. Use `/ask` here instead."
            await send_with_retry(lambda: reply_in_channel(message, note))
            return
        for i, out in enumerate(outs):
            if i == 0:
                await send_with_retry(
                    lambda out=out: reply_in_channel(  # type: ignore[misc]
                        message,
                        out.content,
                        embeds=list(out.embeds),
                        view=button_view(out.actions),
                        **out.file_kwargs(),
                    )
                )
            else:
                await send_with_retry(
                    lambda out=out: message.channel.send(  # type: ignore[misc]
                        content=out.content,
                        embeds=list(out.embeds),
                        view=button_view(out.actions),
                        allowed_mentions=NO_MENTIONS,
                        **out.file_kwargs(),
                    )
                )

    async def post(self, channel_id: str, reply: Reply) -> str:
        """Post a (public) reply to a channel by id: scheduled recaps; returns the id of its
        first message, which the scheduler stores so the slot is never posted again.

        The scheduler's start-up catch-up runs before the client has logged in: until then
        nothing is sent and :class:`NotReady` is raised, so the slot stays claimed and the next
        tick posts it (a post deferred in the background would be out of the scheduler's sight).
        """
        if not self._logged_in.is_set():
            raise NotReady("discord: not logged in yet")
        return await self._send(channel_id, reply)

    async def _send(self, channel_id: str, reply: Reply) -> str:
        channel = self.client.get_partial_messageable(int(channel_id))
        ids: list[str] = []
        for out in render_reply(reply):
            sent = await send_with_retry(
                lambda out=out: channel.send(  # type: ignore[misc]
                    content=out.content,
                    embeds=list(out.embeds),
                    allowed_mentions=NO_MENTIONS,
                    **out.file_kwargs(),
                )
            )
            ids.append(str(sent.id))
        return ids[0] if ids else ""

    async def deliver(self, interaction: discord.Interaction, reply: Reply) -> None:
        """A press's reply, after its deferred update: in place of the pressed message, to the
        whole channel, or to the presser alone."""
        outs = render_reply(reply)
        if reply.delivery == "replace" and not reply.error:
            first, outs = outs[0], outs[1:]
            await send_with_retry(
                lambda: interaction.edit_original_response(
                    content=first.content,
                    embeds=list(first.embeds),
                    view=button_view(first.actions) if first.actions else None,
                    allowed_mentions=NO_MENTIONS,
                )
            )
        public = reply.delivery == "public" and not reply.error
        for out in outs:
            await send_with_retry(
                lambda out=out: interaction.followup.send(  # type: ignore[misc]
                    content=out.content,
                    embeds=list(out.embeds),
                    view=button_view(out.actions),
                    ephemeral=not public,
                    allowed_mentions=NO_MENTIONS,
                )
            )
