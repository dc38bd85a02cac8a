"""Secrets inside a document: hidden sections, and the view of a document each lens reads.

A GM hides prep inside an otherwise players-visible page the way Markdown and Obsidian users
do. Each of these marks a *hidden section*, GM-only wherever it sits:

* HTML comments ``<!-- … -->`` and Obsidian comments ``%% … %%`` (inline or multi-line);
* callouts ``> [!gm]``, ``> [!secret]``, ``> [!gm-only]`` (any case, with or without a title,
  in a list or nested in a quote): the whole callout, lazy continuation lines included;
* fenced blocks whose info string is ``gm``, ``secret`` or ``gm-only``;
* a heading ending in ``(GM)`` or ``[GM]`` (also ``(GM only)``, ``(secret)``), with everything
  under it up to the next heading of the same or a higher level.

A personal-lens form — ``> [!lens:mirel]``, ``<!-- lens:mirel … -->``, ``%% lens:mirel … %%``,
a ```` ```lens:mirel ```` fence, a heading ending ``(lens:mirel)`` — limits a section to that
lens plus the GM. A lens the campaign does not define makes the section GM-only.

Fail closed: a comment or fence never closed hides everything after its opening, and
:attr:`HiddenSection.terminated` says so for the ingest report.

This module is the one place that decides what a section hides; the loader turns its result into
per-lens *views* (:func:`split_views`), each a document of its own whose text holds only what its
readers may see, so nothing downstream (chunking, synopses, embeddings, BM25, rendering, recaps)
ever has a hidden section to leak. A character is readable by a non-GM lens ``L`` iff every
hidden section covering it has an audience meeting ``L``:

    readable(c, L) = ∀ s ∋ c : audience(s) ∩ L ≠ ∅
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from liminalis.lens import GM, NOT_GM, PLAYERS

__all__ = ["HiddenSection", "View", "find_hidden_sections", "split_views", "view_id", "source_of"]

_GM_WORDS = frozenset(
    {
        "gm",
        "secret",
        "secrets",
        "gm-only",
        "gmonly",
        "gm_only",
        "gm only",
        "dm",
        "dm-only",
        "dmonly",
        "dm_only",
        "dm only",
    }
)
_LENS_FORM = re.compile(r"lens\s*:\s*([\w-]+)", re.I)
_FENCE = re.compile(
    r"^[ \t]{0,3}(?P<quotes>(?:>[ \t]?)*)[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$"
)
_CALLOUT = re.compile(
    r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?(?P<quotes>(?:>[ \t]?)+)[ \t]*\[!(?P<kind>[^\]\n]+)\][+-]?"
)
_QUOTE_DEPTH = re.compile(r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?((?:>[ \t]?)*)")
#: Where an ATX heading's title starts (the title itself is cut in Python: a regex that also
#: strips trailing spaces and ``#``s backtracks cubically on a long run of spaces).
_ATX_OPEN = re.compile(r"[ \t]{0,3}(#{1,6})(?=[ \t]|$)")
#: A heading inside a quote or a list item: ``> ## Plans (GM)``, ``- ## Plans (GM)``.
_NESTED_ATX = re.compile(r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+|(?:>[ \t]?)+)[ \t]*#{1,6}[ \t]")
_SETEXT = re.compile(r"^[ \t]{0,3}(=+|-+)[ \t]*$")
#: A hiding mark anywhere in a heading's title, once emphasis and block ids are set aside.
_HEADING_MARK = re.compile(
    r"[(\[{]\s*(gm|dm|(?:gm|dm)[ _-]?only|secrets?|lens\s*:\s*[\w-]+)\s*[)\]}]", re.I
)
_BLOCK_START = re.compile(
    r"^[ \t]*(?:#{1,6}(?:[ \t]|$)|`{3,}|~{3,}|(?:[-*+]|\d{1,9}[.)])[ \t]|\[!|(?:[-*_][ \t]*){3,}$)"
)
#: The marks around a personal section, dropped from the view its lens reads.
_MARKS = re.compile(
    r"<!--[ \t]*(?:lens\s*:\s*[\w-]+)?[ \t]*|[ \t]*-->|%%[ \t]*(?:lens\s*:\s*[\w-]+)?[ \t]*"
    r"|\[!lens\s*:\s*[\w-]+\][+-]?[ \t]*|^[ \t]*(?:`{3,}|~{3,})[^\n]*$",
    re.I | re.M,
)


@dataclass(frozen=True, slots=True)
class HiddenSection:
    """A hidden span ``[start, end)`` of a document's normalized text.

    ``audience``: the lenses besides the GM that may read it (empty: GM-only). ``terminated``:
    false when it was never closed and so runs to the end of the document.
    """

    start: int
    end: int
    audience: frozenset[str]
    kind: str
    line: int
    terminated: bool = True


@dataclass(frozen=True, slots=True)
class View:
    """What one audience reads of a document.

    ``key`` is ``""`` for the view every reader of the document shares (hidden sections cut
    out), ``"gm"`` for the GM's whole text, ``"lens:NAME"`` for the sections one personal lens
    may read besides.
    """

    key: str
    text: str
    visibility: frozenset[str]


def view_id(doc_id: str, key: str) -> str:
    """A view's document id: the file's own id for the shared view, ``{id}//{key}`` for the
    others (``//`` never occurs in a path-derived id, so no file can take a view's id)."""
    return f"{doc_id}//{key}" if key else doc_id


def source_of(doc_id: str) -> str:
    """The id of the file a document (or one of its views) was read from."""
    return doc_id.split("//", 1)[0]


def _audience(marker: str, lenses: frozenset[str]) -> frozenset[str] | None:
    """The audience a marker's words give: ``frozenset()`` for GM-only, ``{name}`` for a known
    personal lens, ``None`` when the marker is not a hiding mark (a callout like ``[!note]``)."""
    words = " ".join(marker.strip().lower().split())
    m = _LENS_FORM.match(words)
    if m:
        name = m.group(1).lower()
        if name == PLAYERS:
            return frozenset({PLAYERS})
        return frozenset({name}) if name in lenses else frozenset()
    return frozenset() if words in _GM_WORDS else None


def _lines(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each line, the newline excluded (a line-based section takes its
    newline too, so cutting it out of a quote or a list leaves no blank line behind)."""
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _depth(line: str) -> int:
    m = _QUOTE_DEPTH.match(line)
    return m.group(1).count(">") if m else 0


def _heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of an ATX heading line, else ``None``."""
    m = _ATX_OPEN.match(line)
    if not m:
        return None
    title = line[m.end() :].strip().rstrip("#").rstrip()
    return len(m.group(1)), title


def _marked(title: str, known: frozenset[str]) -> frozenset[str] | None:
    """The audience a heading's hiding mark gives (``## Plans (GM)``, ``## **Plans [dm]**:``),
    else ``None``."""
    hm = _HEADING_MARK.search(title.replace("*", " ").replace("_", " ").replace("~", " "))
    return _audience(hm.group(1), known) if hm else None


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span's characters blanked (newlines kept): what a comment holds is not
    read as a heading, fence or callout."""
    if not spans:
        return text
    chars = list(text)
    for a, b in spans:
        for k in range(a, b):
            if chars[k] != "\n":
                chars[k] = " "
    return "".join(chars)


def _inline_code(text: str) -> list[tuple[int, int]]:
    """Backtick code spans (CommonMark: a run closes at the next run of the same length in the
    same paragraph), found in one pass."""
    spans: list[tuple[int, int]] = []
    open_at: dict[int, int] = {}
    for m in re.finditer(r"`+", text):
        n = len(m.group(0))
        if n in open_at and "\n\n" not in text[open_at[n] : m.start()]:
            spans.append((open_at.pop(n), m.end()))
            open_at = {k: v for k, v in open_at.items() if v > spans[-1][0]}
        else:
            open_at[n] = m.start()
    return spans


def _fence_close(
    text: str, lines: list[tuple[int, int]], i: int, fence: str, depth: int
) -> tuple[int, bool]:
    """The line that closes the fence opened on line ``i``, and whether one did: a fence inside
    a quote also ends where the quote does (then the index is the first line after it), and one
    never closed runs to the end (the index is the number of lines)."""
    j = i + 1
    while j < len(lines):
        nxt = text[lines[j][0] : lines[j][1]]
        if depth and _depth(nxt) < depth:
            return j, False
        cm = _FENCE.match(nxt)
        if (
            cm
            and cm.group("fence")[0] == fence[0]
            and len(cm.group("fence")) >= len(fence)
            and not cm.group("info").strip()
        ):
            return j, True
        j += 1
    return j, False


def _code_blocks(text: str, lines: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Ordinary fenced code blocks. A fence inside a quote ends with the quote; a fence never
    closed is read as text (CommonMark would make the rest of the document code, and a hiding
    mark after it would be missed)."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        line = text[lines[i][0] : lines[i][1]]
        fm = _FENCE.match(line)
        if not fm or _fence_audience(fm.group("info"), frozenset()) is not None:
            i += 1
            continue
        depth, fence = fm.group("quotes").count(">"), fm.group("fence")
        j, closed = _fence_close(text, lines, i, fence, depth)
        if closed:
            j += 1
        elif j >= len(lines) and not depth:  # never closed: not a fence
            i += 1
            continue
        spans.append((lines[i][0], lines[j - 1][1]))
        i = j
    return spans


def _fence_audience(info: str, known: frozenset[str]) -> frozenset[str] | None:
    """The audience a fence's info string gives (```` ```gm ````, ```` ```{secret} ````,
    ```` ```gm Duke ````), else ``None``."""
    first = (
        info.strip().strip("{}").split(None, 1)[0].strip("{}.") if info.strip().strip("{}") else ""
    )
    return _audience(first, known) if first else None


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    """Whether ``pos`` lies in one of ``spans`` (sorted, not overlapping)."""
    k = bisect_right(spans, (pos, _POS_MAX)) - 1
    return k >= 0 and spans[k][0] <= pos < spans[k][1]


_POS_MAX = 1 << 62


def _comments(
    text: str,
    opener: str,
    closer: str,
    kind: str,
    known: frozenset[str],
    skip: list[tuple[int, int]],
    line_of: Callable[[int], int],
) -> list[HiddenSection]:
    """Comments delimited by ``opener``/``closer``, outside ``skip`` (code). One never closed
    hides the rest of the document, GM-only whatever it says; a personal one holding another
    comment's opener is GM-only (comments do not nest: its ``-->`` may be the GM's)."""
    found: list[HiddenSection] = []
    pos = 0
    while (start := text.find(opener, pos)) >= 0:
        if skip and _inside(start, skip):
            pos = start + len(opener)
            continue
        end = text.find(closer, start + len(opener))
        while end >= 0 and skip and _inside(end, skip):
            end = text.find(closer, end + len(closer))
        inner = text[start + len(opener) : len(text) if end < 0 else end]
        lm = _LENS_FORM.match(inner.lstrip())
        aud = (_audience(lm.group(0), known) if lm else None) or frozenset()
        if end < 0 or "<!--" in inner or "%%" in inner:
            aud = frozenset()
        stop = len(text) if end < 0 else end + len(closer)
        found.append(HiddenSection(start, stop, aud, kind, line_of(start), terminated=end >= 0))
        pos = stop
    return found


def find_hidden_sections(text: str, *, lenses: Iterable[str] = ()) -> list[HiddenSection]:
    """Every hidden section of ``text`` (normalized, ``\\n`` line ends), in document order.

    HTML comments are found first, anywhere; Obsidian comments outside code; then the
    line-based marks (fences, callouts, headings) on the text with comments blanked out, so a
    heading or fence a comment holds neither opens nor ends anything. Sections whose audience
    is every player (``lens:players``) are not hidden and not returned.
    """
    known = frozenset(x.lower() for x in lenses) - {GM}
    lines = _lines(text)
    starts = [s for s, _ in lines]

    def line_of(pos: int) -> int:
        return bisect_right(starts, pos)

    found = _comments(text, "<!--", "-->", "comment", known, [], line_of)
    masked = _mask(text, [(h.start, h.end) for h in found])
    code = sorted(_code_blocks(masked, lines) + _inline_code(masked))
    obsidian = _comments(masked, "%%", "%%", "obsidian comment", known, code, line_of)
    found += obsidian
    masked = _mask(masked, [(h.start, h.end) for h in obsidian])
    code_lines = {
        k for a, b in _code_blocks(masked, lines) for k in range(line_of(a) - 1, line_of(b))
    }

    i = 0
    heading_stack: list[tuple[int, int, frozenset[str], int]] = []  # (level, start, audience, line)
    while i < len(lines):
        s, e = lines[i]
        line = masked[s:e]
        if i in code_lines:
            i += 1
            continue
        fm = _FENCE.match(line)
        if fm and (fence_aud := _fence_audience(fm.group("info"), known)) is not None:
            j, closed = _fence_close(
                masked, lines, i, fm.group("fence"), fm.group("quotes").count(">")
            )
            stop = (
                min(lines[j][1] + 1, len(text))
                if closed
                else (lines[j - 1][1] + 1 if j < len(lines) else len(text))
            )
            found.append(
                HiddenSection(
                    s,
                    min(stop, len(text)),
                    fence_aud,
                    "fenced block",
                    i + 1,
                    terminated=closed or j < len(lines),
                )
            )
            i = j + 1 if closed else j
            continue
        cm = _CALLOUT.match(line)
        nested = _NESTED_ATX.match(line)
        callout_aud = _audience(cm.group("kind"), known) if cm else None
        if callout_aud is None and nested:
            callout_aud = _marked(line[nested.end() :], known)
        if callout_aud is not None:
            depth = _depth(line)
            j = i + 1
            while j < len(lines):
                nxt = masked[lines[j][0] : lines[j][1]]
                if not nxt.strip():
                    break
                d = _depth(nxt)
                rest = _QUOTE_DEPTH.sub("", nxt, count=1) if d else nxt
                # A lazy continuation line (fewer ``>``, or none) still belongs to the quote's
                # paragraph unless it starts a block of its own.
                if d >= depth or not _BLOCK_START.match(rest):
                    j += 1
                    continue
                break
            found.append(
                HiddenSection(
                    s,
                    min(lines[j - 1][1] + 1, len(text)),
                    callout_aud,
                    "callout" if cm else "heading section",
                    i + 1,
                )
            )
            i += 1  # and on through its lines: a GM callout may sit inside a personal one
            continue
        level, title = 0, ""
        head = _heading(line)
        if head:
            level, title = head
        elif (
            i + 1 < len(lines)
            and line.strip()
            and _depth(line) == 0
            and not _BLOCK_START.match(line)
        ):
            sm = _SETEXT.match(masked[lines[i + 1][0] : lines[i + 1][1]])
            if sm:
                # A ``---`` under a paragraph is read as a heading only when it opens a hidden
                # section: as an end of one it is more likely a rule the GM meant.
                level, title = (1 if sm.group(1)[0] == "=" else 2), line.strip()
                if sm.group(1)[0] == "-" and _marked(title, known) is None:
                    level = 0
        if level:
            while heading_stack and heading_stack[-1][0] >= level:
                _lv, start, aud, ln = heading_stack.pop()
                found.append(HiddenSection(start, s, aud, "heading section", ln))
            heading_aud = _marked(title, known)
            if heading_aud is not None:
                heading_stack.append((level, s, heading_aud, i + 1))
        i += 1
    for _lv, start, aud, ln in heading_stack:
        found.append(HiddenSection(start, len(text), aud, "heading section", ln))
    return sorted(
        (h for h in found if PLAYERS not in h.audience and h.end > h.start),
        key=lambda h: (h.start, -h.end),
    )


def _join(pieces: list[str]) -> str:
    """Concatenate the kept pieces of a text: a cut inside a line leaves one space, not two."""
    out = ""
    for piece in pieces:
        if out and out[-1] in " \t" and piece[:1] in (" ", "\t", "\n", ""):
            out = out.rstrip(" \t")
        out += piece
    return out


def split_views(text: str, sections: list[HiddenSection], visibility: frozenset[str]) -> list[View]:
    """The views of a document whose whole text is ``text`` and whose readers are ``visibility``.

    Without hidden sections, or for a GM-only document, one view: the text as it is. Otherwise
    the GM's whole text (visibility ``{"gm"}``), the shared view every other reader gets
    (visibility: the document's readers, marked :data:`~liminalis.lens.NOT_GM`: the GM reads the
    whole text instead), and one view per personal lens holding the sections only it may read (when that lens may read the
    document at all). Views whose text is empty are left out.
    """
    readers = frozenset(visibility) - {GM, NOT_GM}
    if not sections or not readers:
        return [View("", text, frozenset(visibility))]
    bounds = sorted({0, len(text), *(h.start for h in sections), *(h.end for h in sections)})
    shared: list[str] = []
    personal: dict[str, list[str]] = {}
    names = sorted({n for h in sections for n in h.audience})
    by_start = sorted(sections, key=lambda h: h.start)
    active: list[HiddenSection] = []
    k = 0
    for a, b in zip(bounds, bounds[1:], strict=False):  # a sweep over the section boundaries
        active = [h for h in active if h.end > a]
        while k < len(by_start) and by_start[k].start <= a:
            if by_start[k].end > a:
                active.append(by_start[k])
            k += 1
        if not active:
            shared.append(text[a:b])
            continue
        for name in names:
            if all(name in h.audience for h in active):
                personal.setdefault(name, []).append(text[a:b])
    views = [View("gm", text, frozenset({GM}))]
    common = _join(shared)
    if common.strip():
        views.append(View("", common, readers | {NOT_GM}))
    for name in names:
        if name in readers or PLAYERS in readers:
            body = "\n\n".join(
                _MARKS.sub("", p).strip()
                for p in personal.get(name, [])
                if _MARKS.sub("", p).strip()
            )
            if body.strip():
                views.append(View(f"lens:{name}", body, frozenset({name, NOT_GM})))
    return views
