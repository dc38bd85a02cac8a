"""Render a neutral ``Reply`` as Discord messages within Discord's limits.

Limits (Discord API docs, "Message" and "Embed limits"): content 2,000 characters; an embed's
title 256, description 4,096, field name 256, field value 1,024, 25 fields, footer 2,048, and all
embeds of one message 6,000 characters together. Replies with a title or sources become one
embed per message (sources as fields); plain replies are split at 2,000 characters. An answer's
question is the first embed's author line; its buttons go on the last message (a button's
label is at most 80 characters, five buttons a row, five rows a message). A reply's
files (the relationship map) go with its first message (up to 10, Discord's limit).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import discord

from bot.messages import Action, Attachment, Form, Reply
from bot.render import describe_view, sanitize, split_text, truncate

__all__ = [
    "Outgoing",
    "button_view",
    "form_modal",
    "render_reply",
    "render_partial",
    "CONTENT_LIMIT",
    "DESCRIPTION_LIMIT",
    "EMBED_TOTAL_LIMIT",
    "BUTTONS_LIMIT",
    "FILES_LIMIT",
]

CONTENT_LIMIT = 2000
DESCRIPTION_LIMIT = 4096
EMBED_TOTAL_LIMIT = 6000
TITLE_LIMIT = 256
FIELD_NAME_LIMIT = 256
FIELD_VALUE_LIMIT = 1024
FIELDS_LIMIT = 25
AUTHOR_LIMIT = 256
BUTTON_LABEL_LIMIT = 80
BUTTONS_LIMIT = 25
FILES_LIMIT = 10
_COLOUR = discord.Colour(0xC8702A)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One Discord message: content and/or embeds, and files."""

    content: str | None = None
    embeds: tuple[discord.Embed, ...] = ()
    actions: tuple[Action, ...] = ()
    files: tuple[Attachment, ...] = ()

    def file_kwargs(self) -> dict[str, Any]:
        """``files=`` for a send, fresh ``discord.File`` s each time (one is consumed by the
        send that reads it, and a retried send needs its own); nothing when there are none."""
        if not self.files:
            return {}
        return {
            "files": [discord.File(io.BytesIO(f.data), filename=f.filename) for f in self.files]
        }


def _embed(title: str, description: str) -> discord.Embed:
    return discord.Embed(title=title or None, description=description or None, colour=_COLOUR)


def render_partial(text: str) -> str:
    """A streamed answer's text so far, as the content of the message edited in place."""
    return truncate(sanitize(text, platform="discord"), CONTENT_LIMIT - 2) + " ▌"


def _with_actions(outs: list[Outgoing], actions: tuple[Action, ...]) -> list[Outgoing]:
    if not actions:
        return outs
    last = outs[-1]
    shown = tuple(
        Action(truncate(a.label, BUTTON_LABEL_LIMIT), a.id, a.style)
        for a in actions[:BUTTONS_LIMIT]
    )
    return [*outs[:-1], Outgoing(last.content, last.embeds, shown)]


def render_reply(reply: Reply) -> list[Outgoing]:
    """The messages to send for ``reply``; every one within Discord's limits, mentions neutralized."""
    outs = _render(reply)
    if reply.files and outs:
        outs[0] = replace(outs[0], files=tuple(reply.files[:FILES_LIMIT]))
    return outs


def _render(reply: Reply) -> list[Outgoing]:
    text = sanitize(reply.text, platform="discord") or "(no answer)"
    if not (reply.title or reply.sources or reply.question or reply.footer):
        outs = [Outgoing(content=chunk) for chunk in split_text(text, CONTENT_LIMIT)]
        return _with_actions(outs, reply.actions)
    title = truncate(sanitize(reply.title, platform="discord"), TITLE_LIMIT)
    footer = " · ".join(x for x in (reply.footer, describe_view(reply.lens)) if x)
    embeds = [
        _embed(title if i == 0 else "", chunk)
        for i, chunk in enumerate(split_text(text, DESCRIPTION_LIMIT))
    ]
    if reply.question:  # the answer shows what it answers
        asked = truncate(
            "❓ " + sanitize(" ".join(reply.question.split()), platform="discord"), AUTHOR_LIMIT
        )
        embeds[0].set_author(name=asked)
    for i, src in enumerate(reply.sources, 1):
        name = truncate(f"{i}. {sanitize(src.title, platform='discord')}", FIELD_NAME_LIMIT)
        value = (
            truncate(sanitize(src.section or src.doc_id, platform="discord"), FIELD_VALUE_LIMIT)
            or "—"
        )
        last = embeds[-1]
        if (
            len(last.fields) >= FIELDS_LIMIT
            or len(last) + len(name) + len(value) + len(footer) > EMBED_TOTAL_LIMIT
        ):
            last = _embed("Sources (continued)", "")
            embeds.append(last)
        last.add_field(name=name, value=value, inline=False)
    if footer:
        embeds[-1].set_footer(text=footer)
    return _with_actions([Outgoing(embeds=(e,)) for e in embeds], reply.actions)


_STYLES = {
    "primary": discord.ButtonStyle.primary,
    "secondary": discord.ButtonStyle.secondary,
    "success": discord.ButtonStyle.success,
    "danger": discord.ButtonStyle.danger,
}


def button_view(actions: Sequence[Action]) -> Any:
    """``actions`` as message components (``MISSING`` for none). The view is stopped before it
    is sent, so discord.py keeps no state for it: presses reach ``on_interaction`` by their ids,
    also after a restart."""
    if not actions:
        return discord.utils.MISSING
    view = discord.ui.View(timeout=None)
    for action in actions:
        view.add_item(
            discord.ui.Button(label=action.label, custom_id=action.id, style=_STYLES[action.style])
        )
    view.stop()
    return view


def form_modal(form: Form) -> discord.ui.Modal:
    modal = discord.ui.Modal(title=form.title[:45], custom_id=form.id)
    modal.add_item(
        discord.ui.TextInput(
            label=form.label[:45],
            custom_id="value",
            placeholder=form.placeholder[:100] or None,
            required=False,
            max_length=form.max_length,
        )
    )
    modal.stop()
    return modal
