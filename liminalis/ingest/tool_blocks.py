"""Block syntaxes of other tools a GM pastes notes from, read for GM intent.

A GM who preps in Homebrewery or GM Binder writes ``{{gm …}}``; in Pandoc or LegendKeeper a
fenced div ``::: secret``; in World Anvil ``[container:gm]…[/container]``; in plain Markdown a
pair of comments ``<!-- gm:start -->…<!-- gm:end -->``; on Discord a spoiler ``||…||``; a
Roll20 export a JSON field ``"gmnotes": "…"``. Each
names GM intent with the one vocabulary (:func:`liminalis.ingest.intent.tag_intent`), and each
block runs to its matching close; one never closed holds the rest of the text (fail closed: a
hidden sentence costs a question to the GM, a leaked one the campaign).

The finders return plain :class:`Block` spans; the wall (:mod:`liminalis.ingest.sections`)
turns them into held sections, reviewable, as every habit is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from liminalis.ingest.intent import name_intent, tag_intent

__all__ = ["Block", "tool_blocks", "data_attribute_mark", "titled_element"]


@dataclass(frozen=True, slots=True)
class Block:
    """A span ``[start, end)`` of the text a tool's syntax marks as the GM's, the ``rule`` that
    fired (for the ingest report), and whether it was closed."""

    start: int
    end: int
    rule: str
    terminated: bool = True


def _marks(words: str) -> str | None:
    """The first of ``words`` (split on spaces, commas, dots, ``#``) that names GM intent."""
    for word in re.split(r"[\s,.#{}]+", words):
        key, _, value = word.partition("=")
        for part in (key, value.strip("\"'")):
            if part and tag_intent(part):
                return part
    return None


def _balanced(
    text: str, pos: int, opener: re.Pattern[str], closer: re.Pattern[str]
) -> tuple[int, bool]:
    """Where the block whose opener ends at ``pos`` closes (same-kind blocks nest), and whether
    it did: the end of the text when never closed."""
    depth = 1
    both = re.compile(f"(?P<o>{opener.pattern})|(?P<c>{closer.pattern})", re.M)
    for m in both.finditer(text, pos):
        depth += 1 if m.group("o") is not None else -1
        if depth == 0:
            return m.end(), True
    return len(text), False


#: Homebrewery / GM Binder: ``{{gm``, ``{{note,gm``; classes end at the first space.
_BRACE_OPEN = re.compile(r"\{\{(?P<cls>[^\s{}]{1,60})")
_BRACE_ANY_OPEN = re.compile(r"\{\{")
_BRACE_CLOSE = re.compile(r"\}\}")


def _brace_blocks(text: str) -> Iterator[Block]:
    for m in _BRACE_OPEN.finditer(text):
        word = _marks(m.group("cls"))
        if word:
            end, closed = _balanced(text, m.end(), _BRACE_ANY_OPEN, _BRACE_CLOSE)
            yield Block(m.start(), end, f"block “{{{{{m.group('cls')[:30]}”", closed)


#: Pandoc / LegendKeeper fenced divs: ``::: secret``, ``::: {.gm}``, closed by a bare ``:::``.
_DIV_OPEN = re.compile(r"^[ \t]*:{3,}[ \t]*(?P<attr>[^\s:][^\n]*?)[ \t]*:*[ \t]*$", re.M)
_DIV_CLOSE = re.compile(r"^[ \t]*:{3,}[ \t]*$", re.M)


def _fenced_divs(text: str) -> Iterator[Block]:
    for m in _DIV_OPEN.finditer(text):
        if _marks(m.group("attr")):
            end, closed = _balanced(text, m.end(), _DIV_OPEN, _DIV_CLOSE)
            yield Block(m.start(), end, f"fenced div “{m.group('attr')[:30]}”", closed)


#: World Anvil: ``[container:gm]…[/container]``, ``[section:gm-notes]…[/section]``.
_CONTAINER_OPEN = re.compile(
    r"\[(?P<tag>container|section|block|div|span)[ \t]*:[ \t]*(?P<cls>[^\]\n]{1,40})\]", re.I
)


def _containers(text: str) -> Iterator[Block]:
    for m in _CONTAINER_OPEN.finditer(text):
        if _marks(m.group("cls")):
            tag = re.escape(m.group("tag"))
            opener = re.compile(rf"\[{tag}[ \t]*:[^\]\n]{{0,40}}\]|\[{tag}\]", re.I)
            closer = re.compile(rf"\[/{tag}\]", re.I)
            end, closed = _balanced(text, m.end(), opener, closer)
            rule = f"block “[{m.group('tag')}:{m.group('cls')[:30]}]”"
            yield Block(m.start(), end, rule, closed)


#: An HTML comment's words, and the edge words that make it a pair's opener or closer.
_COMMENT = re.compile(r"<!--[ \t]*(?P<inner>[^<>\n]{1,40}?)[ \t]*-->")
_START = r"(?:start|begin|open|on)"
_END = r"(?:end|stop|close|off)"


def _comment_edge(inner: str) -> tuple[str, str] | None:
    """``("open"|"close"|"start", word)`` for a pair's comment: ``gm``/``gm:start`` open one,
    ``/gm``/``gm:end``/``end gm`` close it; ``None`` when the comment names no GM word."""
    inner = inner.strip().lower()
    m = re.fullmatch(
        rf"(?:/[ \t]*(?P<a>.+)|(?P<b>.+?)[ \t:_-]+{_END}|{_END}[ \t:_-]+(?P<c>.+))", inner
    )
    if m:
        word = m.group("a") or m.group("b") or m.group("c") or ""
        return ("close", word) if tag_intent(word) else None
    m = re.fullmatch(rf"(?P<b>.+?)[ \t:_-]+{_START}|{_START}[ \t:_-]+(?P<c>.+)", inner)
    if m:
        word = m.group("b") or m.group("c") or ""
        return ("start", word) if tag_intent(word) else None
    return ("open", inner) if tag_intent(inner) else None


def _paired_comments(text: str) -> Iterator[Block]:
    """``<!-- gm:start -->…<!-- gm:end -->``, ``<!-- secret -->…<!-- /secret -->``: the text
    between a pair. A lone ``<!-- secret -->`` is a comment only; a ``start`` never ended holds
    the rest of the text."""
    edges = [(m, _comment_edge(m.group("inner"))) for m in _COMMENT.finditer(text)]
    k = 0
    while k < len(edges):
        m, edge = edges[k]
        k += 1
        if edge is None or edge[0] == "close":
            continue
        close = next((j for j in range(k, len(edges)) if (edges[j][1] or ("",))[0] == "close"), -1)
        if close >= 0:
            yield Block(m.start(), edges[close][0].end(), f"comments “{m.group('inner')}”")
            k = close + 1
        elif edge[0] == "start":
            yield Block(m.start(), len(text), f"comments “{m.group('inner')}”", False)


#: A Discord spoiler: ``||a vampire||`` (not a table's empty cell ``| a || b |``).
_SPOILER_BARS = re.compile(r"(?<!\|)\|\|(?=[^\s|])[^|\n]*?[^\s|]\|\|(?!\|)")


def _spoiler_bars(text: str) -> Iterator[Block]:
    for m in _SPOILER_BARS.finditer(text):
        yield Block(m.start(), m.end(), "Discord spoiler “||…||”")


#: A JSON field (a Roll20 handout's export, a VTT's journal): ``"gmnotes": "…"``, ``"gm": {…}``.
_JSON_FIELD = re.compile(r'"(?P<k>[^"\n]{1,40})"[ \t]*:[ \t\n]*(?P<v>"(?:[^"\\]|\\.)*"?|[\[{])')
_JSON_OPEN = {"[": re.compile(r"\["), "{": re.compile(r"\{")}
_JSON_CLOSE = {"[": re.compile(r"\]"), "{": re.compile(r"\}")}


def _json_fields(text: str) -> Iterator[Block]:
    """A JSON field whose key names GM intent (``gmnotes``, ``secret``): its value, a string to
    its closing quote, an object or a list to its matching bracket."""
    for m in _JSON_FIELD.finditer(text):
        if not tag_intent(m.group("k")):
            continue
        value = m.group("v")
        if value in _JSON_OPEN:
            end, closed = _balanced(text, m.end(), _JSON_OPEN[value], _JSON_CLOSE[value])
        else:
            end, closed = m.end(), len(value) > 1 and value.endswith('"')
            end = end if closed else len(text)
        yield Block(m.start("v"), end, f"JSON field “{m.group('k')}”", closed)


def tool_blocks(text: str, masked: str) -> list[Block]:
    """Every block another tool's syntax marks as the GM's (module docstring): the pairs of
    comments read in ``text``, the rest in ``masked`` (the same text, its comments blanked, so a
    commented-out block marks nothing)."""
    out = list(_paired_comments(text))
    for finder in (_brace_blocks, _fenced_divs, _containers, _spoiler_bars, _json_fields):
        out += finder(masked)
    return out


#: An HTML ``data-`` attribute: ``data-gm``, ``data-visibility="gm"``.
_DATA_ATTR = re.compile(
    r"\bdata-(?P<k>[\w-]{1,30})(?:\s*=\s*(?:\"(?P<a>[^\"]*)\"|'(?P<b>[^']*)'|(?P<c>[^\s>]+)))?",
    re.I,
)


#: ``data-`` attributes whose value says who reads the element.
_AUDIENCE_ATTRS = frozenset(
    {"visibility", "audience", "access", "readers", "role", "for", "lens", "visible-to"}
)


def data_attribute_mark(attrs: str) -> str | None:
    """The ``data-`` attribute of an HTML tag that names GM intent, by its name (``data-gm``,
    ``data-secret``) or its value (``data-visibility="gm"``, ``data-audience="dm only"``)."""
    for m in _DATA_ATTR.finditer(attrs):
        value = m.group("a") or m.group("b") or m.group("c") or ""
        key = m.group("k").lower()
        if tag_intent(key) or (key in _AUDIENCE_ATTRS and value and tag_intent(value)):
            return m.group(0)
    return None


#: Elements a tool titles with their first line: a Notion export's callout ``<aside>``.
_TITLED = frozenset({"aside", "div", "section", "blockquote"})


def titled_element(tag: str, text: str, pos: int) -> str | None:
    """The title of an element of ``tag`` whose content starts at ``pos``, when its first line
    names GM intent as a whole (``<aside>`` then ``🔒 **GM only**``: Notion's callout), else
    ``None``."""
    if tag not in _TITLED:
        return None
    first = next((ln for ln in text[pos : pos + 400].split("\n") if ln.strip()), "")
    title = re.sub(r"<[^<>]*>", " ", first).strip()
    return title if len(title) <= 60 and name_intent(title) else None
