"""Render a neutral ``Reply`` as Slack Block Kit messages within Slack's limits.

Limits (Slack docs, "Block Kit" reference): a section block's text is at most 3,000 characters, a
message holds at most 50 blocks, a header's plain text at most 150. Text is converted from the
Markdown the service writes (``**bold**``, ``*italic*``) to mrkdwn (``*bold*``, ``_italic_``) and
escaped (``&``, ``<``, ``>``), which disarms every ``<!here>``/``<@U…>``/``<!subteam^…>`` token.

A reply's files (the relationship map's picture) are not uploaded: a slash command's response
URL cannot carry one, Slack has no private file for a private reply, and the reply's text
already holds what the picture shows. The reply says where to get the picture instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.messages import Reply
from bot.render import sanitize, split_text, truncate

__all__ = [
    "SlackMessage",
    "render_blocks",
    "to_mrkdwn",
    "SECTION_LIMIT",
    "BLOCKS_LIMIT",
    "FILES_NOTE",
]

SECTION_LIMIT = 3000
BLOCKS_LIMIT = 50
HEADER_LIMIT = 150
_ITALIC = re.compile(r"(?<![*\w])\*(?!\*)([^*\n]+?)(?<!\*)\*(?![*\w])")
_BOLD = re.compile(r"\*\*([^*\n]+?)\*\*")
_QUOTE = re.compile(r"^&gt;", re.MULTILINE)
#: Said where a reply has files (the relationship map): Slack gets the text, not the picture.
FILES_NOTE = (
    "The picture of this map is posted on Discord, and the console (`liminalis chat`) writes it "
    "to a file; here it is in words."
)


@dataclass(frozen=True, slots=True)
class SlackMessage:
    blocks: tuple[dict[str, Any], ...]
    text: str  # notification fallback


def to_mrkdwn(markdown: str) -> str:
    """Markdown → escaped Slack mrkdwn (mentions neutralized, line-leading quotes kept)."""
    out = sanitize(markdown, platform="slack")
    out = _QUOTE.sub(">", out)  # a quote marker cannot start a mention token, so it stays live
    out = _ITALIC.sub(r"_\1_", out)
    return _BOLD.sub(r"*\1*", out)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def render_blocks(reply: Reply) -> list[SlackMessage]:
    """The messages for ``reply``: sections ≤ 3,000 characters, ≤ 50 blocks per message."""
    blocks: list[dict[str, Any]] = []
    if reply.title:
        title = truncate(sanitize(reply.title, platform="slack"), HEADER_LIMIT)
        blocks.append(
            {"type": "header", "text": {"type": "plain_text", "text": title, "emoji": False}}
        )
    body = to_mrkdwn(reply.text) or "(no answer)"
    blocks.extend(_section(chunk) for chunk in split_text(body, SECTION_LIMIT))
    if reply.sources:
        lines = "\n".join(
            f"{i}. {to_mrkdwn(truncate(s.label(), 300))}" for i, s in enumerate(reply.sources, 1)
        )
        blocks.append({"type": "divider"})
        blocks.extend(_section(chunk) for chunk in split_text(f"*Sources*\n{lines}", SECTION_LIMIT))
    if reply.files:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": FILES_NOTE}]})
    if reply.lens:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"lens: {to_mrkdwn(reply.lens)}"}],
            }
        )
    fallback = truncate(sanitize(reply.title or reply.text, platform="slack"), SECTION_LIMIT)
    return [
        SlackMessage(tuple(blocks[i : i + BLOCKS_LIMIT]), fallback)
        for i in range(0, len(blocks), BLOCKS_LIMIT)
    ]
