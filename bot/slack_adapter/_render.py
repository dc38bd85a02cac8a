"""Render a neutral ``Reply`` as Slack Block Kit messages within Slack's limits, and the App Home.

Limits (Slack docs, "Block Kit" reference): a section block's text is at most 3,000 characters, a
message holds at most 50 blocks and a Home tab view 100, a header's plain text at most 150, an
actions block 25 elements, a button's text 75 characters and its ``action_id`` 255. Text is
converted from the Markdown the service writes (``**bold**``, ``*italic*``) to mrkdwn (``*bold*``,
``_italic_``) and escaped (``&``, ``<``, ``>``), which disarms every ``<!here>``/``<@U…>``/
``<!subteam^…>`` token. An answer's question is a context line under its header; its buttons
are an actions block at the end of its last message.

A reply's files (the relationship map's picture) are uploaded by the adapter, not rendered here:
a public reply's go to its channel (or thread), a private reply's to the member's DM with the
app, since Slack has no ephemeral file. Where none could be sent, the reply says where to get
the picture (``FILES_NOTE``); its text already holds what the picture shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.cards import action_id
from bot.messages import Action, Form, Reply
from bot.render import describe_view, sanitize, split_text, truncate

__all__ = [
    "SlackMessage",
    "render_blocks",
    "render_home",
    "render_modal",
    "render_partial",
    "to_mrkdwn",
    "SECTION_LIMIT",
    "BLOCKS_LIMIT",
    "HOME_BLOCKS_LIMIT",
    "FILES_NOTE",
    "DM_FILES_NOTE",
]

SECTION_LIMIT = 3000
BLOCKS_LIMIT = 50
HOME_BLOCKS_LIMIT = 100
HEADER_LIMIT = 150
CONTEXT_LIMIT = 2000
BUTTON_LIMIT = 75
ACTIONS_LIMIT = 25
#: Campaigns listed on the Home tab (5 blocks each, within its 100).
HOME_CAMPAIGNS = 15
_ITALIC = re.compile(r"(?<![*\w])\*(?!\*)([^*\n]+?)(?<!\*)\*(?![*\w])")
_BOLD = re.compile(r"\*\*([^*\n]+?)\*\*")
_QUOTE = re.compile(r"^&gt;", re.MULTILINE)
#: Said where a reply has files (the relationship map): Slack gets the text, not the picture.
FILES_NOTE = (
    "The picture of this map is posted on Discord, and the console (`liminalis chat`) writes it "
    "to a file; here it is in words."
)
#: Said under a private reply whose picture went to the member's DM with the app.
DM_FILES_NOTE = "The picture of this map is in your direct messages with me, for you alone."


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


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def _header(text: str) -> dict[str, Any]:
    title = truncate(sanitize(text, platform="slack"), HEADER_LIMIT)
    return {"type": "header", "text": {"type": "plain_text", "text": title, "emoji": False}}


def _actions(actions: Sequence[Action]) -> dict[str, Any]:
    elements = []
    for a in actions[:ACTIONS_LIMIT]:
        button: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": truncate(a.label, BUTTON_LIMIT), "emoji": True},
            "action_id": a.id,
            "value": a.id,
        }
        if a.style in {"primary", "danger"}:
            button["style"] = a.style
        elements.append(button)
    return {"type": "actions", "elements": elements}


def render_partial(text: str) -> str:
    """A streamed answer's text so far, as the text of the message updated in place."""
    return truncate(to_mrkdwn(text), SECTION_LIMIT - 2) + " ▌"


def render_blocks(reply: Reply, *, files_note: str = FILES_NOTE) -> list[SlackMessage]:
    """The messages for ``reply``: sections ≤ 3,000 characters, ≤ 50 blocks per message.

    ``files_note`` is said under a reply with files (where its picture is); ``""`` says nothing
    (the picture follows in the same channel)."""
    blocks: list[dict[str, Any]] = []
    if reply.title:
        blocks.append(_header(reply.title))
    if reply.question:
        asked = truncate(to_mrkdwn(" ".join(reply.question.split())), CONTEXT_LIMIT)
        blocks.append(_context(f"❓ {asked}"))
    body = to_mrkdwn(reply.text) or "(no answer)"
    blocks.extend(_section(chunk) for chunk in split_text(body, SECTION_LIMIT))
    if reply.sources:
        lines = "\n".join(
            f"{i}. {to_mrkdwn(truncate(s.label(), 300))}" for i, s in enumerate(reply.sources, 1)
        )
        blocks.append({"type": "divider"})
        blocks.extend(_section(chunk) for chunk in split_text(f"*Sources*\n{lines}", SECTION_LIMIT))
    if reply.files and files_note:
        blocks.append(_context(files_note))
    footer = " · ".join(x for x in (reply.footer, describe_view(reply.lens)) if x)
    if footer:
        blocks.append(_context(to_mrkdwn(footer)))
    fallback = truncate(sanitize(reply.title or reply.text, platform="slack"), SECTION_LIMIT)
    messages = [blocks[i : i + BLOCKS_LIMIT] for i in range(0, len(blocks), BLOCKS_LIMIT)]
    if reply.actions:  # on the last message, or one of their own when it is full
        if len(messages[-1]) >= BLOCKS_LIMIT:
            messages.append([])
        messages[-1].append(_actions(reply.actions))
    return [SlackMessage(tuple(m), fallback) for m in messages]


def render_modal(form: Form, *, metadata: str = "") -> dict[str, Any]:
    """``form`` as a modal view: one plain-text input whose value comes back with ``form.id``."""
    return {
        "type": "modal",
        "callback_id": form.id,
        "private_metadata": metadata,
        "title": {"type": "plain_text", "text": truncate(form.title, 24)},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": "value",
                "optional": True,
                "label": {"type": "plain_text", "text": truncate(form.label, 2000)},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "max_length": form.max_length,
                    "placeholder": {"type": "plain_text", "text": truncate(form.placeholder, 150)},
                },
            }
        ],
    }


@dataclass(frozen=True, slots=True)
class HomeEntry:
    """One campaign on a member's Home tab."""

    slug: str
    name: str
    view: str  # what they can see there, in their words
    recaps: str  # the recap schedule, in words


def render_home(entries: Sequence[HomeEntry], *, dm_channel: str = "") -> dict[str, Any]:
    """The Home tab: each campaign the member plays with what they can see there, its recap
    schedule and quick actions; how to start when they play none. At most 100 blocks, sections
    of at most 3,000 characters."""
    blocks: list[dict[str, Any]] = [
        _header("Liminalis"),
        _section(
            "Answers from your campaign's own documents, with sources. Ask with `/lore ask "
            "<question>`, mention me in your campaign's channel, or message me here."
        ),
    ]
    for e in entries[:HOME_CAMPAIGNS]:
        blocks += [
            {"type": "divider"},
            _section(truncate(f"*{to_mrkdwn(e.name)}*\n{to_mrkdwn(e.view)}.", SECTION_LIMIT)),
            _context(truncate(to_mrkdwn(e.recaps), CONTEXT_LIMIT) or "No recap schedule."),
            _actions(
                (
                    Action("Ask a question", action_id("hask", e.slug), "primary"),
                    Action("Previously on…", action_id("hrecap", e.slug)),
                )
            ),
        ]
    if len(entries) > HOME_CAMPAIGNS:
        blocks.append(_context(f"…and {len(entries) - HOME_CAMPAIGNS} more campaigns."))
    if not entries:
        blocks.append(
            _section(
                "You play no campaign I know of yet: a GM links a channel with `/lore campaign "
                "link <campaign>`, and it shows here once you are in that channel."
            )
        )
    blocks.append(
        _context("`/lore help` lists every command; `/lore help <command>` explains one.")
    )
    return {"type": "home", "private_metadata": dm_channel, "blocks": blocks[:HOME_BLOCKS_LIMIT]}
