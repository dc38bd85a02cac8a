"""``liminalis serve``: start the platforms that have tokens; say which are off and why."""

from __future__ import annotations

import logging

from bot.settings import Settings

__all__ = ["serve"]

_log = logging.getLogger(__name__)


async def serve(settings: Settings) -> int:
    enabled = []
    if settings.discord_token:
        enabled.append("discord")
    else:
        print("discord: off (DISCORD_TOKEN is not set)")
    if settings.slack_bot_token and settings.slack_app_token:
        enabled.append("slack")
    else:
        print("slack: off (SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not both set)")
    if not enabled:
        print("No platform has a token; nothing to serve. Try `liminalis chat` for the console adapter.")
        return 1
    print("platform adapters are not built yet")
    return 1
