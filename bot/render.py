"""Platform-neutral output helpers: mention sanitizing, splitting to a limit, truncating.

Every adapter runs outgoing text through :func:`sanitize` (for its platform) and cuts it with
:func:`split_text`, so no reply can ping a whole server and none exceeds a platform limit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from liminalis.types import SkippedFile

__all__ = [
    "PAGE_CHARS",
    "ZWSP",
    "describe_view",
    "page_of",
    "pages_of",
    "sanitize",
    "skipped_lines",
    "split_text",
    "truncate",
]

ZWSP = "\u200b"  # zero-width space: breaks a mention token without changing what a reader sees

# Discord: @everyone/@here, <@&role>, <@user>/<@!user>, and the Slack forms <!everyone> etc.
_DISCORD_MASS = re.compile(r"@(everyone|here)", re.IGNORECASE)
_DISCORD_TOKEN = re.compile(r"<(@[&!]?)(\d+)>")
_SLACK_MASS = re.compile(r"@(everyone|here|channel)\b", re.IGNORECASE)


def sanitize(text: str, *, platform: str = "discord") -> str:
    """Neutralize mass, role and user mentions in ``text`` for ``platform``.

    Discord: a zero-width space after ``@`` in ``@everyone``/``@here`` and inside ``<@…>``
    tokens (adapters also send ``AllowedMentions.none()``, so this is belt and braces).
    Slack: ``&``, ``<`` and ``>`` are escaped as mrkdwn requires, which disarms ``<!here>``,
    ``<!subteam^…>`` and ``<@U…>``; bare ``@here``/``@channel``/``@everyone`` get a zero-width space.
    """
    if not text:
        return ""
    if platform == "slack":
        out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return _SLACK_MASS.sub(lambda m: f"@{ZWSP}{m.group(1)}", out)
    out = _DISCORD_MASS.sub(lambda m: f"@{ZWSP}{m.group(1)}", text)
    return _DISCORD_TOKEN.sub(lambda m: f"<{m.group(1)}{ZWSP}{m.group(2)}>", out)


def skipped_lines(skipped: Sequence[SkippedFile], *, limit: int = 10) -> list[str]:
    """The files an ingest could not index, for the host or a GM: a count, then up to ``limit``
    files with their reasons. They may name GM-only files: never for a player's eyes."""
    if not skipped:
        return []
    lines = [f"{len(skipped)} file(s) not indexed:"]
    lines += [f"• {s.path}: {s.reason}" for s in skipped[:limit]]
    if len(skipped) > limit:
        lines.append(f"… and {len(skipped) - limit} more (`liminalis ingest` lists them all)")
    return lines


def truncate(text: str, limit: int, *, marker: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``marker`` when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(marker))].rstrip() + marker


_FENCE = "```"


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters.

    Prefers paragraph breaks, then line breaks, then spaces; a run with none of them is cut hard.
    Never returns an empty list for non-empty text, and no chunk is empty or over ``limit``. A
    chunk that ends inside a ``` code block closes it, and the next chunk opens it again (a
    quoted stat block split in two showed its second half as raw text).
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    if _FENCE not in text or limit <= 4 * len(_FENCE):
        return _split(text, limit)
    out: list[str] = []
    inside = False
    for chunk in _split(text, limit - 2 * (len(_FENCE) + 1)):
        if inside:
            chunk = f"{_FENCE}\n{chunk}"
        if chunk.count(_FENCE) % 2:
            chunk, inside = f"{chunk}\n{_FENCE}", True
        else:
            inside = False
        out.append(chunk)
    return out


def _split(text: str, limit: int) -> list[str]:
    text = text.strip()
    chunks: list[str] = []
    while len(text) > limit:
        window = text[: limit + 1]
        cut = -1
        # A break in the first quarter would make many tiny chunks: prefer a later, weaker break,
        # and take an early one only over cutting a word in half.
        for floor in (limit // 4, 0):
            for sep in ("\n\n", "\n", " "):
                at = window.rfind(sep, 0, limit + 1)
                if at > floor:
                    cut = at
                    break
            if cut > 0:
                break
        if cut <= 0:
            head, text = text[:limit], text[limit:]
        else:
            head, text = text[:cut], text[cut:]
        head = head.rstrip()
        if head:
            chunks.append(head)
        text = text.lstrip()
    if text:
        chunks.append(text)
    return chunks


#: One page of a document or a list: short enough to read in one screen on either platform
#: (Discord's message is 2,000 characters, a Slack section 3,000).
PAGE_CHARS = 1800


def pages_of(text: str, size: int = PAGE_CHARS) -> list[str]:
    """``text`` in pages of at most ``size`` characters (at least one page)."""
    return split_text(text, size) or ["(empty)"]


def page_of(page: int, pages: int) -> int:
    """``page`` kept within ``1..pages``."""
    return max(1, min(page, max(pages, 1)))


def describe_view(lens: str) -> str:
    """A view (``Lens.describe()``: ``gm``, ``players``, ``mirel, players``) in a player's words:
    what a reply was read from."""
    if not lens:
        return ""
    if lens == "gm":
        return "GM view: may include GM-only notes"
    own = [n.strip() for n in lens.split(",") if n.strip() and n.strip() != "players"]
    if not own:
        return "What every player can see"
    return f"What you can see: the table's documents and {' and '.join(own)}'s notes"
