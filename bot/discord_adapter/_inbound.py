"""Inbound: Discord events (app commands, mentions, DMs) → one neutral ``IncomingMessage`` →
``BotService``; who a member is (roles, ids, DM seats) is read here and nowhere else."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import aiohttp
import discord
from discord import app_commands

from bot.discord_adapter._delivery import Delivery, reply_in_channel
from bot.discord_adapter._render import render_partial
from bot.discord_adapter._state import NEUTRAL, NO_MENTIONS, is_dm_channel
from bot.messages import Attachment, IncomingMessage, OptionValue
from bot.streaming import StreamedEdits
from bot.upload_files import TooLarge, download_to_file

__all__ = ["DOWNLOAD_FAILED", "MEMBER_TTL_S", "Inbound"]

_log = logging.getLogger(__name__)
DOWNLOAD_FAILED = "could not be downloaded from Discord; attach it again"
DOWNLOAD_TIMEOUT = aiohttp.ClientTimeout(total=120)
_MENTION = re.compile(r"<@!?(\d+)>")
#: How long a member fetched for a DM (their roles on a campaign's server) is reused.
MEMBER_TTL_S = 60.0


class Inbound(Delivery):
    """Receiving: an event becomes the service's request, its reply goes out by ``Delivery``."""

    def incoming(
        self,
        *,
        user: discord.abc.User,
        channel: Any,
        guild_id: int | None,
        text: str,
        attachments: Iterable[Attachment] = (),
        file_count: int = 0,
        bot_dm: bool | None = None,
    ) -> IncomingMessage:
        """Map who and where to an ``IncomingMessage``: role ids and role names apart (names count
        only on the campaign's home servers, ``BotService.at_home``); DMs get no roles.

        ``bot_dm``: the DM is the author's own with the bot (default: any DM, as every message
        a bot receives in a DM is; an interaction says where it came from).

        A DM is told by its channel's type, never by a missing guild: discord.py has no guild
        object for a server it has not cached, and such a message is a shared channel's. A member
        whose roles cannot be read (an uncached guild resolves no role names) simply has fewer
        roles, so the lens falls back toward players, never toward gm.
        """
        names: tuple[str, ...] = ()
        role_ids: tuple[str, ...] = ()
        known = False
        manage = False
        dm = is_dm_channel(channel)
        if not dm and guild_id is not None and isinstance(user, discord.Member):
            try:
                listed = [r for r in user.roles if not r.is_default()]
                role_ids = tuple(
                    dict.fromkeys(
                        [
                            *(str(r) for r in getattr(user, "_roles", ())),
                            *(str(r.id) for r in listed),
                        ]
                    )
                )
                names = tuple(dict.fromkeys(r.name for r in listed))
                known = True
                manage = _manages_server(user)
            except Exception:
                _log.warning(
                    "discord: role lookup failed for %s; players lens", user.id, exc_info=True
                )
        channel_id = getattr(channel, "id", None)
        parent_id = getattr(channel, "parent_id", None)
        return IncomingMessage(
            platform="discord",
            channel_id=str(channel_id),
            user_id=str(user.id),
            text=text,
            parent_id=str(parent_id) if parent_id else None,
            roles=names,
            role_ids=role_ids,
            roles_known=known,
            guild_id=str(guild_id) if guild_id is not None and not dm else None,
            is_dm=dm,
            bot_dm=dm if bot_dm is None else dm and bot_dm,
            can_manage=manage,
            attachments=tuple(attachments),
            file_count=file_count,
        )

    def from_interaction(
        self,
        interaction: discord.Interaction,
        *,
        command: str | None = None,
        options: Mapping[str, OptionValue] | None = None,
    ) -> IncomingMessage:
        """The neutral request of an app command: typed, never text."""
        context = interaction.context
        msg = self.incoming(
            user=interaction.user,
            channel=interaction.channel or discord.Object(interaction.channel_id or 0),
            guild_id=interaction.guild_id,
            text="",
            # A user-installed app's commands also come from DMs between people and group DMs
            # (context PRIVATE_CHANNEL): only the bot's own DM (BOT_DM) is the author's alone.
            bot_dm=context.dm_channel and not context.private_channel,
        )
        return replace(msg, command=command, options=dict(options or {}))

    async def read_attachments(
        self, files: Iterable[discord.Attachment | None]
    ) -> list[Attachment]:
        out = []
        for f in files:
            if f is None:
                continue
            if f.size > self.service.max_upload_bytes:
                out.append(
                    Attachment(f.filename, b"", size=f.size)
                )  # rejected by size, never downloaded
                continue
            try:  # streamed to a temporary file, never whole in memory (bot.upload_files)
                path = await download_to_file(
                    f.url, max_bytes=self.service.max_upload_bytes, client_timeout=DOWNLOAD_TIMEOUT
                )
                out.append(Attachment(f.filename, b"", path=path))
            except TooLarge:  # more than it declared: refused by size, as a declared one is
                out.append(Attachment(f.filename, b"", size=self.service.max_upload_bytes + 1))
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                # An expired or deleted attachment, a dropped connection: report that file alone.
                _log.warning("discord: downloading %s failed: %s", f.filename, exc)
                out.append(Attachment(f.filename, b"", error=DOWNLOAD_FAILED))
        return out

    async def run_command(
        self,
        interaction: discord.Interaction,
        command: str,
        options: Mapping[str, OptionValue],
        files: Sequence[discord.Attachment | None] = (),
    ) -> None:
        """Defer within Discord's 3 s, answer with the service, then send followups. The campaign
        and lens are resolved once (``BotService.begin``): for the defer, for whether files are
        fetched (a GM's only), and for the command."""
        pending = await self.service.begin(
            self.from_interaction(interaction, command=command, options=options)
        )
        await interaction.response.defer(ephemeral=pending.private, thinking=True)
        attachments = await self.read_attachments(files) if any(files) and pending.is_gm else []

        async def edit(content: str) -> None:
            await interaction.edit_original_response(content=content, allowed_mentions=NO_MENTIONS)

        stream = StreamedEdits(
            edit, render=render_partial, interval=self.edit_interval, clock=self.clock
        )
        reply = await pending.finish(tuple(attachments), progress=stream)
        await self.followup(
            interaction, reply, deferred_private=pending.private, streamed=stream.edits > 0
        )

    async def on_tree_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        """The one top-level handler: log with traceback, show a neutral message."""
        _log.error("discord command failed", exc_info=error)
        try:
            if interaction.response.is_done():
                await interaction.followup.send(
                    NEUTRAL, ephemeral=True, allowed_mentions=NO_MENTIONS
                )
            else:
                await interaction.response.send_message(
                    NEUTRAL, ephemeral=True, allowed_mentions=NO_MENTIONS
                )
        except discord.HTTPException:
            _log.warning("could not report the error to the user", exc_info=True)

    async def on_message(self, message: discord.Message) -> None:
        """``@Liminalis <question>`` (or ``@Liminalis /upload`` with files) in a linked channel or a DM."""
        me = self.client.user
        if me is None or message.author.bot:
            return
        if not is_dm_channel(message.channel) and me.id not in message.raw_mentions:
            return
        try:
            text = _MENTION.sub(
                lambda m: "" if int(m.group(1)) == me.id else m.group(0), message.content
            ).strip()
            if not text and not message.attachments:  # files alone: a GM's DM upload
                text = "/help"
            async with message.channel.typing():
                msg = self.incoming(
                    user=message.author,
                    channel=message.channel,
                    guild_id=_guild_id(message),
                    text=text,
                    file_count=len(message.attachments),
                )
                pending = await self.service.begin(msg)
                attachments = (
                    await self.read_attachments(message.attachments)
                    if message.attachments and pending.is_gm
                    else []
                )
                # A public answer (or any in a DM) is written in place as it streams; a private
                # one in a shared channel goes to the author's DMs whole.
                posted: list[discord.Message] = []
                stream = None
                if not pending.private or is_dm_channel(message.channel):
                    stream = self._stream_reply(message, posted)
                reply = await pending.finish(tuple(attachments), progress=stream)
            if posted:
                await self._finish_streamed(message, posted[0], reply)
            else:
                await self.reply_to_message(message, reply)
        except Exception:
            _log.exception("discord mention failed")
            try:
                await reply_in_channel(message, NEUTRAL)
            except discord.HTTPException:
                pass

    async def seat(
        self, msg: IncomingMessage, channels: Sequence[tuple[str, str | None]]
    ) -> list[IncomingMessage]:
        """Where the author of a DM sits (``bot.service.Seating``): each linked channel, on a
        server the bot has cached, whose member they are (fetched by id: no privileged intent)
        and that they can read, as a message of theirs there with their roles. A server that
        cannot be asked counts as none."""
        by_guild: dict[int, list[int]] = {}
        for linked, server in channels:
            if server and server.isdigit() and linked.isdigit():
                by_guild.setdefault(int(server), []).append(int(linked))
        out: list[IncomingMessage] = []
        for guild_id, channel_ids in by_guild.items():
            guild = self.client.get_guild(guild_id)
            if guild is None or not msg.user_id.isdigit():
                continue
            member = await self._member(guild, int(msg.user_id))
            if member is None:
                continue
            for cid in channel_ids:
                channel = guild.get_channel_or_thread(cid)
                if channel is None or not channel.permissions_for(member).read_messages:
                    continue
                out.append(
                    self.incoming(user=member, channel=channel, guild_id=guild.id, text=msg.text)
                )
        return out

    async def _member(self, guild: discord.Guild, user_id: int) -> discord.Member | None:
        key = (guild.id, user_id)
        now = self.clock()
        cached = self._members.get(key)
        if cached is not None and now - cached[0] < MEMBER_TTL_S:
            return cached[1]
        member: discord.Member | None
        try:
            member = guild.get_member(user_id) or await guild.fetch_member(user_id)
        except (discord.NotFound, discord.Forbidden):
            member = None
        except discord.HTTPException as exc:
            _log.warning("discord: member %s of %s unreadable (%s)", user_id, guild.id, exc)
            return None
        self._members[key] = (now, member)
        return member


def _manages_server(member: discord.Member) -> bool:
    """Whether ``member`` may manage the server (``/campaign create``). An interaction carries
    the member's permissions; a mention's are computed from the cached roles (none cached: no
    permission, never a guess)."""
    perms = member.resolved_permissions
    if perms is None:
        perms = member.guild_permissions
    return bool(perms.manage_guild or perms.administrator)


def _guild_id(message: discord.Message) -> int | None:
    """The server of a message, also when discord.py has not cached it (no ``guild`` object, but
    the partial channel keeps the id)."""
    if message.guild is not None:
        return message.guild.id
    gid = getattr(message.channel, "guild_id", None)
    return gid if isinstance(gid, int) else None
