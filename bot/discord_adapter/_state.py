"""What every part of the Discord adapter shares: the state the adapter holds (typed once, so each
direction's module is checked against it) and the few values each direction uses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import discord
from discord import app_commands

from bot.service import BotService

__all__ = ["NEUTRAL", "NO_MENTIONS", "AdapterState", "is_dm_channel"]

NEUTRAL = "Sorry, something went wrong on my side. The error has been logged."
NO_MENTIONS = discord.AllowedMentions.none()


class AdapterState:
    """The adapter's attributes, set by ``DiscordAdapter.__init__``."""

    service: BotService
    client: discord.Client
    tree: app_commands.CommandTree[Any]
    clock: Callable[[], float]
    edit_interval: float
    #: Members fetched for DMs, by (server, user): (when, the member or ``None``).
    _members: dict[tuple[int, int], tuple[float, discord.Member | None]]
    #: Set by ``setup_hook``: the REST API can be used from then on.
    _logged_in: asyncio.Event


def is_dm_channel(channel: Any) -> bool:
    """Whether ``channel`` is a direct message, by its type. A channel of unknown type (a partial
    one from an uncached server) is not: treated as shared, a private answer goes privately."""
    return (
        isinstance(channel, discord.DMChannel)
        or getattr(channel, "type", None) == discord.ChannelType.private
    )
