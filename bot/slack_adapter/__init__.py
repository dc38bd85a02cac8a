"""Slack adapter (slack-bolt ``AsyncApp``, Socket Mode) over ``BotService.handle``."""

from bot.slack_adapter._adapter import ChannelRateLimiter, SlackAdapter
from bot.slack_adapter._render import SlackMessage, render_blocks, to_mrkdwn

__all__ = ["ChannelRateLimiter", "SlackAdapter", "SlackMessage", "render_blocks", "to_mrkdwn"]
