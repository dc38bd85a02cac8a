"""Discord adapter (discord.py app commands and mentions) over ``BotService.handle``."""

from bot.discord_adapter._adapter import DiscordAdapter, build_intents, send_with_retry
from bot.discord_adapter._render import Outgoing, render_reply

__all__ = ["DiscordAdapter", "Outgoing", "build_intents", "render_reply", "send_with_retry"]
