"""The Discord adapter: app commands, @-mentions and buttons → ``BotService`` → messages.

Thin by design, and split by direction: ``_inbound`` turns events into one neutral
``IncomingMessage`` each (typed options, never text parsed again); ``_tree`` declares the slash
commands from the service's registry in two groups, ``/lore`` for everyone and ``/gm`` for the
GM's work (hidden by default from members without ``GM_PERMISSIONS``; the run-time GM check
stays the wall), with one table-driven autocomplete; ``_delivery`` sends replies, files and
streamed answers (a streamed answer edits its message in place at most once a second) with
rate-limit retries; ``_components`` runs button presses and forms through ``BotService.press``.
This module holds the client's lifecycle and assembles the parts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import discord
from discord import app_commands

from bot.discord_adapter._delivery import send_with_retry
from bot.discord_adapter._state import NEUTRAL, NO_MENTIONS, is_dm_channel
from bot.discord_adapter._tree import GM_PERMISSIONS, CommandTree
from bot.service import BotService
from bot.streaming import EDIT_INTERVAL_S

__all__ = [
    "GM_PERMISSIONS",
    "NEUTRAL",
    "NO_MENTIONS",
    "DiscordAdapter",
    "build_intents",
    "is_dm_channel",
    "send_with_retry",
]

_log = logging.getLogger(__name__)


def build_intents() -> discord.Intents:
    """Guilds (channels, roles, threads) and guild/DM messages; no privileged intents.

    Without ``message_content`` Discord still delivers the content of messages that mention the
    bot and of DMs, which is all the mention path needs.
    """
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    return intents


class DiscordAdapter(CommandTree):
    """Slash commands and mentions for one ``BotService``.

    Args:
        service: the one entry point.
        guild_ids: sync commands to these guilds (instant; for testing); empty → global sync.
        shards: use ``AutoShardedClient`` (large deployments).
        sync_commands: sync the command tree in ``setup_hook`` (off in tests that don't need it).
        clock: monotonic seconds, for the spacing of a streamed answer's edits and the member
            cache (a fake one in tests).
        edit_interval: the least seconds between two edits of a streamed answer.
    """

    def __init__(
        self,
        service: BotService,
        *,
        guild_ids: Sequence[int] = (),
        shards: bool = False,
        sync_commands: bool = True,
        clock: Callable[[], float] = time.monotonic,
        edit_interval: float = EDIT_INTERVAL_S,
    ) -> None:
        self.service = service
        self.guild_ids = tuple(guild_ids)
        self.sync_commands = sync_commands
        cls = discord.AutoShardedClient if shards else discord.Client
        self.client = cls(intents=build_intents(), allowed_mentions=NO_MENTIONS)
        self.tree = app_commands.CommandTree(self.client)
        self.tree.on_error = self.on_tree_error  # type: ignore[method-assign]
        self.client.setup_hook = self.setup_hook  # type: ignore[method-assign]
        self.client.event(self.on_message)
        self.client.event(self.on_ready)
        self.client.event(self.on_interaction)
        self.clock = clock
        self.edit_interval = edit_interval
        self._members = {}
        self._logged_in = asyncio.Event()
        self._register()
        service.use_seating("discord", self.seat)

    async def setup_hook(self) -> None:
        self._logged_in.set()
        if not self.sync_commands:
            return
        # A refused sync (a guild id the bot is not in, a Discord 5xx) is logged, never fatal: it
        # ran inside login, and its error stopped the whole bot, Slack included.
        if self.guild_ids:
            for gid in self.guild_ids:
                guild = discord.Object(id=gid)
                self.tree.copy_global_to(guild=guild)
                await self._sync(guild, f"to guild {gid}")
        else:
            await self._sync(None, "globally (may take up to an hour to appear)")

    async def _sync(self, guild: discord.Object | None, where: str) -> None:
        try:
            synced = await self.tree.sync(guild=guild)
        except discord.HTTPException as exc:
            _log.error("discord: syncing commands %s failed (%s); is the bot in it?", where, exc)
            return
        _log.info("discord: synced %d commands %s", len(synced), where)

    async def on_ready(self) -> None:
        _log.info(
            "discord: connected as %s to %d guild(s)", self.client.user, len(self.client.guilds)
        )

    async def run(self, token: str) -> None:
        """Log in, connect and serve until cancelled; closes the client on the way out."""
        async with self.client:
            await self.client.start(token)

    async def is_connected(self) -> bool:
        """READY received and the gateway open (every shard's, when sharded): the status file's
        probe."""
        client = self.client
        if not client.is_ready() or client.is_closed():
            return False
        if isinstance(client, discord.AutoShardedClient):
            return all(not shard.is_closed() for shard in client.shards.values())
        ws = client.ws
        return ws is not None and ws.open
