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

import hashlib
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from liminalis.ingest.intent import (
    colon_fold,
    header_intent,
    kind_intent,
    label_intent,
    mark_intent,
    name_intent,
    property_key,
    role_label,
    roster_value,
    speech_label,
    tag_intent,
)
from liminalis.ingest.text_tables import table_blocks
from liminalis.ingest.tool_blocks import data_attribute_mark, titled_element, tool_blocks
from liminalis.lens import GM, NOT_GM, PLAYERS
from liminalis.types import HeldBack

__all__ = [
    "HeldBack",
    "HiddenSection",
    "View",
    "find_hidden_sections",
    "gm_asides",
    "section_digest",
    "split_views",
    "view_id",
    "source_of",
    "without_gm_asides",
]

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
_BOLD_LINE = re.compile(
    r"^[ \t]*(?:(?:\*\*|__|\*|_)(?P<a>[^*_\n]{1,60}?)[ \t]*:?[ \t]*(?:\*\*|__|\*|_)"
    r"|(?P<b>[^*_\n:：]{1,40}?)[ \t]*[:：])[ \t]*:?[ \t]*$"
)
_BOLD_RUN = re.compile(r"^[ \t]*(?:\*\*|__)[^*_\n]{1,60}(?:\*\*|__)")
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
    #: The rule that fired, in a GM's words (``heading “GM Notes”``), for the ingest report.
    rule: str = ""
    #: Marked by the documented syntax (or invisible in the format itself): the GM said so, and
    #: no review is asked. ``False``: held by the recogniser's reading of GM habits, reviewable.
    explicit: bool = True
    #: :func:`section_digest` of the section's text: what a GM's review decision is stored on.
    digest: str = ""


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
        if not fm:
            i += 1
            continue
        depth, fence = fm.group("quotes").count(">"), fm.group("fence")
        j, closed = _fence_close(text, lines, i, fence, depth)
        if _fence_audience(fm.group("info"), frozenset()) is not None:
            # A hiding fence is no code block, but its closing line is no opening either: read
            # past it, or the next hiding fence would be taken for the inside of a code block.
            i = j + 1 if closed else i + 1
            continue
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
    if not first:
        return None
    aud = _audience(first, known)
    if aud is None and not first.lower().startswith("lens"):
        # ```ad-secret (Obsidian's admonitions), ```spoiler, ```gm-notes: a fence named for it.
        word = re.sub(r"^ad-", "", first.lower()).replace("-", " ").replace("_", " ")
        if name_intent(word):
            return frozenset()
    return aud if aud is not None else _later_fence_word(info)


def _later_fence_word(info: str) -> frozenset[str] | None:
    """GM-only when a word after the first of a fence's info string names GM intent
    (```` ```md gm ````, ```` ```text {.secret} ````): the first word is the language."""
    words = [w.strip(".") for w in re.split(r"[\s{},]+", info.strip())[1:]]
    return frozenset() if any(w and tag_intent(w) for w in words) else None


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


#: An open heading section while the lines are read: ``(level, start, audience, line, rule)``.
_Open = tuple[int, int, frozenset[str], int, str]


@dataclass(frozen=True, slots=True)
class _Text:
    """A document's text as the line-based marks read it: the lines, the text with comments
    blanked (``masked``), code spans and the lines code blocks cover, and the lenses known."""

    text: str
    masked: str
    lines: list[tuple[int, int]]
    starts: list[int]
    code: list[tuple[int, int]]
    code_lines: frozenset[int]
    known: frozenset[str]
    #: The lines inside a run of dialogue, where a bare ``DM:`` is a speaker (:func:`_dialogue`).
    dialogue: frozenset[int] = frozenset()

    def line_of(self, pos: int) -> int:
        return bisect_right(self.starts, pos)

    def line(self, i: int) -> str:
        return self.masked[self.lines[i][0] : self.lines[i][1]]


def find_hidden_sections(
    text: str, *, lenses: Iterable[str] = (), released: frozenset[str] = frozenset()
) -> list[HiddenSection]:
    """Every hidden section of ``text`` (normalized, ``\\n`` line ends), in document order.

    HTML comments are found first, anywhere; Obsidian comments outside code; then the
    line-based marks (fences, callouts, headings, GM lines) on the text with comments blanked
    out, so a heading or fence a comment holds neither opens nor ends anything; then the marks
    inside lines (invisible HTML, link-reference comments, a table's GM column, body tags,
    BBCode, other tools' blocks). The marks are read with look-alike colons as ``:``
    (:func:`~liminalis.ingest.intent.colon_fold`). Sections whose audience is every player (``lens:players``) are not hidden and not
    returned, and neither are sections held by habit (not ``explicit``) whose
    :func:`section_digest` is in ``released``: the GM reviewed them and chose to show them.
    """
    known = frozenset(x.lower() for x in lenses) - {GM}
    doc, found = _read_comments(colon_fold(text), known)
    found += _line_marks(doc)
    found += _html_hidden(doc.masked, doc.code, doc.line_of)
    found += _link_comments(doc.masked, doc.lines, doc.code_lines)
    found += _table_columns(doc)
    found += _body_tags(doc)
    found += _bbcode(doc)
    found += _tool_blocks(doc)
    return _finish(text, found, released)


def _tool_blocks(doc: _Text) -> list[HiddenSection]:
    """Other tools' block syntaxes (:mod:`liminalis.ingest.tool_blocks`) and tables that are not
    Markdown's (:mod:`liminalis.ingest.text_tables`), outside code: held by habit, reviewable."""
    return [
        HiddenSection(
            b.start,
            b.end,
            frozenset(),
            "block",
            doc.line_of(b.start),
            terminated=b.terminated,
            rule=b.rule,
            explicit=False,
        )
        for b in tool_blocks(doc.text, doc.masked) + table_blocks(doc.masked)
        if not (doc.code and _inside(b.start, doc.code))
    ]


def _read_comments(text: str, known: frozenset[str]) -> tuple[_Text, list[HiddenSection]]:
    """Stage one: HTML comments anywhere, Obsidian comments outside code, and the text with
    both blanked for the stages after."""
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
    code_lines = frozenset(
        k for a, b in _code_blocks(masked, lines) for k in range(line_of(a) - 1, line_of(b))
    )
    dialogue = _dialogue(masked, lines, code_lines)
    return _Text(text, masked, lines, starts, code, code_lines, known, dialogue), found


#: A speaker's line of a transcript: ``Alice: …``, ``**DM:** …``, ``- Bob: …``.
_SPEAKER = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__)?(?P<name>[^\W\d][\w .'’-]{0,30}?)(?:\*\*|__)?[ \t]*:"
    r"(?:\*\*|__)?[ \t]+\S"
)
#: How many speakers' lines a run must have, by how many speakers besides the GM, for it to read
#: as a transcript.
_DIALOGUE_LINES, _DIALOGUE_SPEAKERS = 6, 2


def _speaker(line: str) -> str | None:
    """The speaker a line of dialogue opens with (``Alice``, ``DM``), else ``None``. A property
    key (``Race: Human``, ``HP: 12``: :func:`property_key`) is no speaker."""
    m = _SPEAKER.match(line)
    if not m or property_key(m.group("name")):
        return None
    return m.group("name").strip()


def _speaker_runs(
    masked: str, lines: list[tuple[int, int]], code_lines: frozenset[int]
) -> list[list[tuple[int, str]]]:
    """The runs of consecutive speaker lines, each ``[(line index, speaker), …]``: a blank line,
    a heading, code or any line that is not a speaker's ends a run."""
    runs: list[list[tuple[int, str]]] = [[]]
    for i, (s, e) in enumerate(lines):
        name = None if i in code_lines else _speaker(masked[s:e])
        if name is None:
            runs.append([])
        else:
            runs[-1].append((i, name))
    return [r for r in runs if r]


def _dialogue(
    masked: str, lines: list[tuple[int, int]], code_lines: frozenset[int]
) -> frozenset[int]:
    """The lines of the runs that are clearly a dialogue transcript, where ``DM:`` is a speaker,
    not a note: a run R of consecutive ``Name:`` lines (no blank line, heading or prose between)
    of at least six, by the GM and at least two other speakers.

        dialogue(R) ⇔ |R| ≥ 6 ∧ |{name(r) : r ∈ R} ∖ ROLE| ≥ 2

    The exception is local, so a transcript never makes a ``DM:`` note in another paragraph or
    section speech; unsure is no: a page of notes with a few ``DM:`` lines keeps them held."""
    out: set[int] = set()
    for run in _speaker_runs(masked, lines, code_lines):
        others = {n.lower() for _, n in run if not role_label(n)}
        if len(run) >= _DIALOGUE_LINES and len(others) >= _DIALOGUE_SPEAKERS:
            out.update(i for i, _ in run)
    return frozenset(out)


def _finish(text: str, found: list[HiddenSection], released: frozenset[str]) -> list[HiddenSection]:
    """The last stage: digests and rules set, sections every player reads and habits the GM
    chose to show dropped, in document order."""
    out = []
    for h in found:
        if PLAYERS in h.audience or h.end <= h.start:
            continue
        digest = section_digest(text[h.start : h.end])
        if not h.explicit and digest in released:
            continue  # the GM read it and chose to show it
        out.append(replace(h, digest=digest, rule=h.rule or h.kind))
    return sorted(out, key=lambda h: (h.start, -h.end))


def _line_marks(doc: _Text) -> list[HiddenSection]:
    """Stage two: the marks a line opens — hiding fences, callouts, headings (and everything
    under them to the next heading of the same or a higher level), GM lines and asides."""
    found: list[HiddenSection] = []
    habits: list[HiddenSection] = []
    stack: list[_Open] = []
    i = 0
    while i < len(doc.lines):
        if i in doc.code_lines:
            i += 1
            continue
        fenced = _hidden_fence(doc, i)
        if fenced is not None:
            found.append(fenced[0])
            i = fenced[1]
            continue
        callout = _callout(doc, i)
        if callout is not None:
            found.append(callout)
            i += 1  # and on through its lines: a GM callout may sit inside a personal one
            continue
        level, title = _heading_at(doc, i, stack)
        if level:
            found += _close_headings(stack, level, doc.lines[i][0])
            _open_heading(stack, level, title, doc, i)
            habits.extend(_asides(doc.masked, doc.lines, i))
        else:
            habits.extend(
                _line_habits(
                    doc.masked,
                    doc.lines,
                    i,
                    doc.code_lines,
                    doc.line_of,
                    dialogue=i in doc.dialogue,
                )
            )
        i += 1
    found += _close_headings(stack, 0, len(doc.text))
    return found + habits


def _hidden_fence(doc: _Text, i: int) -> tuple[HiddenSection, int] | None:
    """A fence whose info string hides (```` ```gm ````) opened on line ``i``: its section and
    the line to read on from."""
    fm = _FENCE.match(doc.line(i))
    if not fm:
        return None
    fence_aud = _fence_audience(fm.group("info"), doc.known)
    if fence_aud is None:
        return None
    lines, n = doc.lines, len(doc.text)
    j, closed = _fence_close(doc.masked, lines, i, fm.group("fence"), fm.group("quotes").count(">"))
    stop = min(lines[j][1] + 1, n) if closed else (lines[j - 1][1] + 1 if j < len(lines) else n)
    section = HiddenSection(
        lines[i][0],
        min(stop, n),
        fence_aud,
        "fenced block",
        i + 1,
        terminated=closed or j < len(lines),
    )
    return section, (j + 1 if closed else j)


def _callout_audience(line: str, known: frozenset[str]) -> tuple[frozenset[str] | None, str, bool]:
    """The audience a callout (``> [!gm]``, ``> [!note] GM``) or a heading nested in a quote or
    a list (``> ## Plans (GM)``) on ``line`` gives, the rule held by habit (``""`` for the
    documented syntax), and whether it is a callout."""
    cm = _CALLOUT.match(line)
    nested = _NESTED_ATX.match(line)
    # ``[!gm|wide]``: what follows a ``|`` is the callout's look (Obsidian's metadata).
    kind = cm.group("kind").split("|", 1)[0] if cm else ""
    aud = _audience(kind, known) if cm else None
    if aud is None and nested:
        aud = _marked(line[nested.end() :], known)
    if aud is None and cm:
        title = line[cm.end() :].strip()
        if kind_intent(kind) or name_intent(title):
            rule = f"callout “{(cm.group('kind') + ' ' + title).strip()[:60]}”"
            return frozenset(), rule, True
    if aud is None and nested:
        title = line[nested.end() :].strip()
        if name_intent(title):
            return frozenset(), f"heading “{title[:60]}”", False
    return aud, "", cm is not None


def _callout(doc: _Text, i: int) -> HiddenSection | None:
    """The hidden callout (or quoted heading) opened on line ``i``, with its lazy lines."""
    line = doc.line(i)
    aud, habit, is_callout = _callout_audience(line, doc.known)
    if aud is None:
        return None
    depth = _depth(line)
    j = i + 1
    while j < len(doc.lines):
        nxt = doc.line(j)
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
    return HiddenSection(
        doc.lines[i][0],
        min(doc.lines[j - 1][1] + 1, len(doc.text)),
        aud,
        "callout" if is_callout else "heading section",
        i + 1,
        rule=habit or ("callout" if is_callout else "heading mark"),
        explicit=not habit,
    )


def _heading_at(doc: _Text, i: int, stack: list[_Open]) -> tuple[int, str]:
    """``(level, title)`` when line ``i`` is a heading — ATX, a bold or label line standing
    alone as one (level 7, below every real one), a bold run-in that ends such a pseudo-heading,
    or a setext heading that opens a hidden section — else ``(0, "")``."""
    masked, lines, line = doc.masked, doc.lines, doc.line(i)
    head = _heading(line) or _loose_heading(line)
    if head:
        return head
    # Matched on the stripped line: its optional spaces around a label backtrack quadratically
    # over a long run of blanks (a masked comment), and a label's edges never need them.
    bold = _BOLD_LINE.match(line.strip())
    if bold and label_intent(bold.group("a") or bold.group("b")) and _alone(masked, lines, i):
        # ``**GM Notes**`` or ``GM Notes:`` alone on a line: a heading in all but syntax.
        return 7, bold.group("a") or bold.group("b")
    if stack and stack[-1][0] == 7 and _BOLD_RUN.match(line):
        if _title_like(masked, lines, i, sentence=False):
            # ``**Properties.** Weight 2 lb``: the next bold run-in closes such a pseudo-heading.
            return 7, ""
    if i + 1 < len(lines) and line.strip() and _depth(line) == 0 and not _BLOCK_START.match(line):
        sm = _SETEXT.match(doc.line(i + 1))
        if sm:
            # A ``---`` under a paragraph is read as a heading only when it opens a hidden
            # section: as an end of one it is more likely a rule the GM meant.
            level, title = (1 if sm.group(1)[0] == "=" else 2), line.strip()
            if (
                sm.group(1)[0] == "-"
                and _marked(title, doc.known) is None
                and not name_intent(title)
                and not _title_like(masked, lines, i)
            ):
                return 0, ""
            return level, title
    return 0, ""


#: A heading a GM typed without the space Markdown wants (``##GM Notes``), or an HTML export's
#: heading (``<h2>GM Notes</h2>``).
_GLUED_ATX = re.compile(r"^[ \t]{0,3}(#{2,6})(?=[^\s#])(?P<t>.+)$")
#: An HTML export's bold label paragraph: ``<p><strong>GM Notes</strong></p>`` (level 7, as a
#: ``**GM Notes**`` line).
_HTML_LABEL = re.compile(
    r"^[ \t]*<p\b[^>]*>[ \t]*<(?:strong|b)>(?P<t>[^<\n]{1,60})</(?:strong|b)>[ \t]*:?[ \t]*</p>[ \t]*$"
    r"(?P<l>)",
    re.I,
)
_HTML_HEADING = re.compile(r"^[ \t]*<h([1-6])\b[^>]*>(?P<t>.*?)</h\1[ \t]*>[ \t]*$", re.I)


def _caps_label(line: str) -> bool:
    """Whether a line is an all-caps label standing as a heading (``GM NOTES``, ``SECRETS``):
    short, no sentence end, upper case, naming GM intent."""
    text = line.strip()
    return (
        0 < len(text.split()) <= 5
        and text.upper() == text
        and any(c.isalpha() for c in text)
        and not text.endswith((".", "!", "?", ","))
        and name_intent(text) is not None
    )


def _loose_heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of a heading Markdown does not read as one but a GM meant as one — a
    glued ``##GM Notes`` or an HTML ``<h2>`` — only when its title names GM intent: it then opens
    a held section (fail closed) and never closes one. A ``#hashtag`` (one ``#``) stays a tag."""
    m = _GLUED_ATX.match(line) or _HTML_HEADING.match(line) or _HTML_LABEL.match(line)
    if m is None and _caps_label(line):
        return 7, line.strip()
    if not m or not name_intent(re.sub(r"<[^<>]*>", " ", m.group("t"))):
        return None
    level = m.group(1) if m.re is not _HTML_LABEL else ""
    return (int(level) if level.isdigit() else len(level) or 7), m.group("t").strip()


def _close_headings(stack: list[_Open], level: int, end: int) -> list[HiddenSection]:
    """The open heading sections a heading of ``level`` (0: the end of the text) closes."""
    out = []
    while stack and stack[-1][0] >= level:
        _lv, start, aud, ln, rule = stack.pop()
        out.append(_heading_section(start, end, aud, ln, rule))
    return out


def _open_heading(stack: list[_Open], level: int, title: str, doc: _Text, i: int) -> None:
    """Open a hidden section at the heading on line ``i`` when it marks one: the documented
    ``(GM)`` mark, a title that names GM intent, or a GM tag on the line right under it."""
    aud = _marked(title, doc.known)
    rule = "heading mark"
    if aud is None and name_intent(title):
        aud, rule = frozenset(), f"heading “{_plain(title)[:60]}”"
    if aud is None and (tag := _title_tag(title)):
        aud, rule = frozenset(), f"tag “{tag}” in a heading"
    if aud is None and (tag := _tag_under(doc, i)):
        aud, rule = frozenset(), f"tag “{tag}” under a heading"
    if aud is not None:
        stack.append((level, doc.lines[i][0], aud, i + 1, rule))


def section_digest(text: str) -> str:
    """What a GM's review decision is stored on: a hash of the section's words, so a decision
    holds across re-ingests and moves, and is asked again once the section's text changes.

        digest(s) = sha256(" ".join(words(s)))[:16]
    """
    return hashlib.sha256(" ".join(text.split()).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _title_like(text: str, lines: list[tuple[int, int]], i: int, *, sentence: bool = True) -> bool:
    """Whether line ``i`` over a ``---`` reads as a title (``Hooks``), not as the last line of a
    paragraph (``She lies.``): a short line of its own, after a blank line, with no sentence end.
    Only such a ``---`` closes a hidden section as a heading would: a rule under prose keeps the
    section open (the safe side)."""
    line = text[lines[i][0] : lines[i][1]].strip()
    before = text[lines[i - 1][0] : lines[i - 1][1]].strip() if i else ""
    return (
        not before and len(line.split()) <= 8 and not line.endswith((".", "!", "?", ":", ";", ","))
    )


def _alone(text: str, lines: list[tuple[int, int]], i: int) -> bool:
    """Whether line ``i`` stands alone as a title would: a short line after a blank one, before
    a blank line, a list or another block (``GM Notes:``, ``*Secrets*``, ``**GM:**``)."""
    line = text[lines[i][0] : lines[i][1]].strip()
    before = text[lines[i - 1][0] : lines[i - 1][1]].strip() if i else ""
    after = text[lines[i + 1][0] : lines[i + 1][1]] if i + 1 < len(lines) else ""
    return (
        not before
        and len(line.split()) <= 8
        and (not after.strip() or bool(_BLOCK_START.match(after)) or after.lstrip().startswith(">"))
    )


def _plain(title: str) -> str:
    """A heading's or label's words without emphasis marks, for the report."""
    return " ".join(re.sub(r"[*_~`#>]+", " ", title).split())


def _heading_section(
    start: int, end: int, aud: frozenset[str], line: int, rule: str
) -> HiddenSection:
    return HiddenSection(
        start, end, aud, "heading section", line, rule=rule, explicit=rule == "heading mark"
    )


#: A line that opens with a label and a colon: ``GM: …``, ``**DM:** …``, ``- *Secret*: …``,
#: ``> GM note — …`` is not one (a dash is prose), ``🔒 Secret: …`` is.
_LABEL_LINE = re.compile(
    r"^[ \t\u00a0]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?(?:>[ \t]?)*[ \t\u00a0]*"
    r"(?P<label>[^\s:：][^:：\n]{0,40}?)[ \t]*(?:[:：]|(?<=[\w*_])[ \t]+[-–—]+(?=[ \t]))"
)
#: A marker in the middle of a line, set apart by emphasis: ``… ale. **GM:** she is a spy``.
_EMPHASIS_MARK = re.compile(
    r"(?:\*\*|__|\*|_)[ \t]*(?P<label>[^*_\n:]{1,40}?)[ \t]*(?::[ \t]*(?:\*\*|__|\*|_)|(?:\*\*|__|\*|_)[ \t]*:)"
)
#: A marker after a sentence ends: ``… pours ale. GM: she is a spy``.
_SENTENCE_MARK = re.compile(r"(?<=[.!?;])[ \t]+(?P<label>[A-Za-z][\w ]{0,24}?)[ \t]*:[ \t]")
#: An aside opened by a marker: ``(GM: a chest of tithes)``, ``[DM note - …]``, ``{secret: …}``.
_ASIDE = re.compile(
    r"(?<!\[)(?P<open>[(\[{])[ \t]*(?P<label>[^:)\]}\n\-–—,;]{1,40}?)[ \t]*"
    r"(?P<sep>:|[-–—][ \t]|[,;])"
)
#: A bare marker in a line: ``The chest under the floor (GM only)``, ``[secret]``.
_BARE = re.compile(
    r"(?<!\[)[(\[{][ \t]*(?P<label>[^()\[\]{}\n/][^()\[\]{}\n]{0,39}?)[ \t]*[)\]}](?![(\[\]])"
    r"[ \t*_.:;!]*$"
)  # not a BBCode closing tag (``[/spoiler]``): its block is held from its opening tag
_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _continuation_end(text: str, lines: list[tuple[int, int]], i: int) -> int:
    """Where the block that line ``i`` opens ends: the end of the last of its lines before a
    blank line, a new block (list item, heading, quote, fence) or another ``Label:`` line."""
    j = i + 1
    while j < len(lines):
        nxt = text[lines[j][0] : lines[j][1]]
        if not nxt.strip() or _BLOCK_START.match(nxt) or nxt.lstrip().startswith(">"):
            break
        m = _LABEL_LINE.match(nxt)
        if m and len(m.group("label").split()) <= 3:
            break
        j += 1
    return lines[j - 1][1]


def _line_habits(
    masked: str,
    lines: list[tuple[int, int]],
    i: int,
    code_lines: frozenset[int],
    line_of: Callable[[int], int],
    *,
    dialogue: bool = False,
) -> list[HiddenSection]:
    """GM habits on one line that is not a heading: a ``GM:`` label opening it, a marker later
    in it, an aside naming the GM, a bare ``(GM only)`` mark. In a ``dialogue`` (a transcript:
    :func:`_dialogue`) a bare ``DM:`` speaker's line is speech, not a note (:func:`_speech`):
    only what else the line holds is read."""
    s, e = lines[i]
    line = masked[s:e]
    if not line.strip() or i in code_lines:
        return []
    out: list[HiddenSection] = []
    m = _LABEL_LINE.match(line)
    if m and dialogue and _speech(m.group("label"), line[m.end() :]):
        line, m = " " * m.end() + line[m.end() :], None
    lead = None if m is None and dialogue else _lead_mark(masked, lines, i)
    if lead is not None:
        rule, stop = lead
        return [HiddenSection(s, stop, frozenset(), "line", i + 1, rule=rule, explicit=False)]
    if m and _not_a_mark(m.group("label"), line[m.end() :]):
        m = None
    if m and (label_intent(m.group("label")) or _role_aside(m.group("label"))):
        stop = _continuation_end(masked, lines, i)
        rule = f"line “{_plain(m.group('label'))}:”"
        return [
            HiddenSection(
                s, min(stop + 1, len(masked)), frozenset(), "line", i + 1, rule=rule, explicit=False
            )
        ]
    for pattern in (_EMPHASIS_MARK, _SENTENCE_MARK):
        for mm in pattern.finditer(line):
            if label_intent(mm.group("label")):
                stop = _continuation_end(masked, lines, i)
                rule = f"marker “{_plain(mm.group('label'))}:”"
                out.append(
                    HiddenSection(
                        s + mm.start(),
                        stop,
                        frozenset(),
                        "marker",
                        i + 1,
                        rule=rule,
                        explicit=False,
                    )
                )
                return out
    out.extend(_asides(masked, lines, i))
    for mm in _BARE.finditer(line):
        label = mm.group("label")
        if label_intent(label) and not any(h.start <= s + mm.start() < h.end for h in out):
            stop = _continuation_end(masked, lines, i)
            rule = f"mark “{mm.group(0)[:40]}”"
            out.append(
                HiddenSection(
                    s,
                    min(stop + 1, len(masked)),
                    frozenset(),
                    "marked line",
                    i + 1,
                    rule=rule,
                    explicit=False,
                )
            )
            break
    return out


def gm_asides(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, label)`` of each GM aside in ``text[start:end]`` (one line): a bracket
    opened by a GM label and a separator, ``(GM: …)``, ``[secret - …]``, ``{DM note, …}``, to
    its closing bracket (or its paragraph's end). After a comma the label must be a mark
    (:func:`~liminalis.ingest.intent.mark_intent`), so ``(the GM, …)`` in prose stays."""
    out = []
    for mm in _ASIDE.finditer(text, start, len(text) if end is None else end):
        loose = mm.group("sep") in {",", ";"}
        if (mark_intent if loose else label_intent)(mm.group("label")):
            out.append((mm.start(), _aside_end(text, mm.start(), mm.group("open")), mm["label"]))
    return out


def without_gm_asides(text: str) -> str:
    """``text`` with its GM asides cut (:func:`gm_asides`) and its spacing tidied: what a name
    that held one (a file name, ``Villain (GM: the duke)``) may show a player."""
    for start, stop, _label in reversed(gm_asides(text)):
        text = text[:start] + " " + text[stop:]
    return " ".join(text.split())


def _asides(masked: str, lines: list[tuple[int, int]], i: int) -> list[HiddenSection]:
    """The GM asides on line ``i`` as hidden sections: held, the rest of the line kept. A
    heading's asides are read too (its remaining words stay its title)."""
    s, e = lines[i]
    return [
        HiddenSection(
            start,
            stop,
            frozenset(),
            "aside",
            i + 1,
            rule=f"aside “{masked[start]}{_plain(label)}:”",
            explicit=False,
        )
        for start, stop, label in gm_asides(masked, s, e)
    ]


#: A line opening with a bracketed mark: ``[GM ONLY] …``, ``(GM only) …``, ``**[Secret]** …``.
_PREFIX_MARK = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?[*_]*[\[(][ \t]*(?P<label>[^\])\n]{1,40}?)[ \t]*[\])][*_]*[ \t]+\S"
)
#: A label with an arrow: ``GM -> …``, ``GM NOTE → …``, ``DM => …``.
_ARROW_LABEL = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?P<label>[^:\n>→⇒⟶]{1,40}?)[ \t]*(?:-{1,2}>|=>|[→⇒⟶])"
)
#: A footnote's definition: ``[^1]: GM: …`` — its text is read as a line of its own.
_FOOTNOTE = re.compile(r"^[ \t]*\[\^[^\]\n]{1,40}\]:[ \t]*")
#: A term a definition list defines on the next line (``GM`` then ``: …``).
_DEFINITION = re.compile(r"^[ \t]{0,3}:[ \t]+\S")


def _lead_mark(masked: str, lines: list[tuple[int, int]], i: int) -> tuple[str, int] | None:
    """``(rule, end)`` when line ``i`` opens with a mark the ``Label:`` rule misses — a
    bracketed ``[GM ONLY]``, an arrow ``GM ->``, a label with a bracketed mark ``NB (GM):``, a
    footnote ``[^1]: GM: …``, a definition list term ``GM``, a ``**GM**`` line in a quote — the
    line and its continuation (a quote: the rest of the quote)."""
    s, e = lines[i]
    line = masked[s:e]
    body = line[fm.end() :] if (fm := _FOOTNOTE.match(line)) else line

    def end() -> int:
        return min(_continuation_end(masked, lines, i) + 1, len(masked))

    for pattern in (_PREFIX_MARK, _ARROW_LABEL):
        pm = pattern.match(body)
        if pm and label_intent(pm.group("label")):
            return f"mark “{_plain(pm.group(0))[:40]}”", end()
    lm = _LABEL_LINE.match(body)
    if lm and (
        (fm and label_intent(lm.group("label")))
        or any(label_intent(b.group(1)) for b in _BRACKETED_PART.finditer(lm.group("label")))
    ):
        return f"line “{_plain(lm.group('label'))}:”", end()
    nxt = masked[lines[i + 1][0] : lines[i + 1][1]] if i + 1 < len(lines) else ""
    if label_intent(line.strip()) and _DEFINITION.match(nxt):
        return f"term “{line.strip()[:40]}”", end()
    return _quote_label(masked, lines, i)


#: A bracketed part of a label: the ``(GM)`` of ``NB (GM)``.
_BRACKETED_PART = re.compile(r"[(\[]([^()\[\]\n]{1,40})[)\]]")


def _quote_label(masked: str, lines: list[tuple[int, int]], i: int) -> tuple[str, int] | None:
    """A ``**GM**`` label line alone inside a block quote: the rest of the quote is held."""
    line = masked[lines[i][0] : lines[i][1]]
    if not line.lstrip().startswith(">"):
        return None
    bold = _BOLD_LINE.match(re.sub(r"^[ \t]*(?:>[ \t]?)+", "", line).strip())
    label = bold and (bold.group("a") or bold.group("b"))
    if not label or not label_intent(label):
        return None
    j = i
    while j + 1 < len(lines) and masked[lines[j + 1][0] : lines[j + 1][1]].lstrip().startswith(">"):
        j += 1
    return f"quoted label “{_plain(label)}”", min(lines[j][1] + 1, len(masked))


#: What a GM sets a note apart with inside a speaker's line: brackets, braces, emphasis, a tag.
_SPEECH_MARKS = re.compile(r"[(\[{<*#|]")


def _speech(label: str, rest: str) -> bool:
    """Whether a transcript's line ``label: rest`` is the GM speaking, not a note: the label is
    the bare role (``DM``, not ``DM (note to self)``) and the speech carries no mark a GM sets a
    note apart with — no bracket, emphasis or tag, no ``GM:`` label of its own. Any mark inside
    holds the line (a hidden sentence costs a question, a leaked one the campaign)."""
    rest = rest.lstrip("*_ \t")
    if not role_label(label) or _SPEECH_MARKS.search(label.strip("*_ ") + rest):
        return False
    inner = _LABEL_LINE.match(rest)
    return not (inner and (label_intent(inner.group("label")) or role_label(inner.group("label"))))


def _not_a_mark(label: str, rest: str) -> bool:
    """Whether a ``Label:`` line is prose about the GM, not a note: ``The GM says: …`` (a
    sentence) or ``GM: Alice. Players: …`` (the roster)."""
    return speech_label(label) or (role_label(label) and roster_value(rest))


def _role_aside(label: str) -> bool:
    """Whether a label is the GM's role with a parenthetical (``DM (note to self)``, ``GM
    (whispering to Bob)``): a note or a whisper to one player, never speech to the table."""
    m = re.match(r"^\W*(?P<role>[^(\[]+?)\s*[(\[]", label)
    return m is not None and role_label(m.group("role"))


def _aside_end(text: str, start: int, opener: str) -> int:
    """Where the aside opened at ``start`` closes (its brackets nest); one never closed runs to
    the end of its paragraph."""
    closer = _CLOSE[opener]
    depth = 0
    limit = text.find("\n\n", start)
    limit = len(text) if limit < 0 else limit
    for k in range(start, limit):
        c = text[k]
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return k + 1
    return limit


_OPEN_TAG = re.compile(r"<(?P<tag>[A-Za-z][\w-]{0,20})(?P<attrs>(?:\s[^<>]*)?)>")
_INVISIBLE = re.compile(
    r"(?:^|\s)hidden(?:\s|=|$)|display\s*:\s*none|visibility\s*:\s*hidden|aria-hidden\s*=\s*[\"']?true",
    re.I,
)
_CLASS = re.compile(r"class\s*=\s*(?:[\"']([^\"']*)[\"']|([^\s\"'>]+))", re.I)
_SUMMARY = re.compile(r"\s*<summary[^>]*>(.*?)</summary>", re.I | re.S)
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "source", "wbr", "col", "area"})


def _html_hidden(
    masked: str, code: list[tuple[int, int]], line_of: Callable[[int], int]
) -> list[HiddenSection]:
    """HTML a GM meant to be invisible (``hidden``, ``display: none``, ``aria-hidden``: explicit,
    as the page itself never shows it) or marked as theirs (a ``class="gm"``, a ``<details>``
    whose summary names the GM: held by habit). Its element runs to its matching close tag; one
    never closed hides the rest of the document."""
    out: list[HiddenSection] = []
    if "<" not in masked:
        return out
    for m in _OPEN_TAG.finditer(masked):
        if code and _inside(m.start(), code):
            continue
        tag, attrs = m.group("tag").lower(), m.group("attrs")
        if tag in _VOID or attrs.rstrip().endswith("/"):
            continue
        rule, explicit = "", True
        if _INVISIBLE.search(attrs):
            rule = f"invisible <{tag}>"
        else:
            cls = _CLASS.search(attrs)
            names = (cls.group(1) or cls.group(2) or "") if cls else ""
            data = data_attribute_mark(attrs)
            if names and any(tag_intent(c) for c in names.split()):
                rule, explicit = f"<{tag} class=“{names[:30]}”>", False
            elif data:
                rule, explicit = f"<{tag} {data[:30]}>", False
            elif title := titled_element(tag, masked, m.end()):
                rule, explicit = f"<{tag}> “{_plain(title)[:40]}”", False
            elif tag == "details":
                sm = _SUMMARY.match(masked, m.end())
                if sm and name_intent(re.sub(r"<[^>]+>", " ", sm.group(1))):
                    rule, explicit = f"<details> “{_plain(sm.group(1))[:40]}”", False
        if not rule:
            continue
        stop, closed = _element_end(masked, m.end(), tag)
        out.append(
            HiddenSection(
                m.start(),
                stop,
                frozenset(),
                "html",
                line_of(m.start()),
                terminated=closed,
                rule=rule,
                explicit=explicit,
            )
        )
    return out


def _element_end(text: str, pos: int, tag: str) -> tuple[int, bool]:
    """The end of the element of ``tag`` whose open tag ends at ``pos`` (same-name elements
    nest), and whether it closed."""
    pattern = re.compile(rf"<(/?){re.escape(tag)}(?=[\s>/])[^<>]*>", re.I)
    depth = 1
    for m in pattern.finditer(text, pos):
        if m.group(0).endswith("/>"):
            continue
        depth += -1 if m.group(1) else 1
        if depth == 0:
            return m.end(), True
    return len(text), False


#: Markdown's comment idiom: a link reference definition nothing links to, which never renders:
#: ``[//]: # (…)``, ``[comment]: <> (…)``, ``[_]: # "…"``.
_LINK_COMMENT = re.compile(
    r"^[ \t]{0,3}\[(?P<label>[^\]\n]{1,40})\]:[ \t]*(?P<dest>#|<>|//)(?:[ \t]|$)"
)


def _link_comments(
    masked: str, lines: list[tuple[int, int]], code_lines: frozenset[int]
) -> list[HiddenSection]:
    """Markdown link-reference comments, each with the lines its title runs on."""
    out: list[HiddenSection] = []
    for i, (s, e) in enumerate(lines):
        if i in code_lines or "]:" not in masked[s:e]:
            continue
        if _LINK_COMMENT.match(masked[s:e]):
            stop = e
            rest = masked[s:e]
            # A title in parentheses may run over several lines: to its closing parenthesis.
            if rest.count("(") > rest.count(")"):
                stop = _aside_end(masked, s + rest.index("("), "(")
            out.append(
                HiddenSection(
                    s,
                    min(stop + 1, len(masked)),
                    frozenset(),
                    "comment",
                    i + 1,
                    rule="link-reference comment",
                )
            )
    return out


#: A tag in a note's body (Obsidian's ``#gm``, ``#dm-only``, ``#status/secret``): not a heading's
#: ``# ``, not a URL's fragment, not ``C#``.
#: A tag in the body: ``#gm``, and ``\\#gm`` (Google Docs' Markdown export escapes every ``#``).
_BODY_TAG = re.compile(r"(?<![\w#&/\\])\\?#(?P<tag>[^\W\d][\w/-]{0,40})")
#: A line of tags alone: ``#gm``, ``#npc #secret``.
_TAG_LINE = re.compile(r"^[ \t]*(?:\\?#[^\W\d][\w/-]{0,40}[ \t]*)+$")


def _gm_tags(doc: _Text, i: int) -> str | None:
    """The first tag on line ``i`` (outside code) naming GM intent, else ``None``."""
    s, e = doc.lines[i]
    for m in _BODY_TAG.finditer(doc.masked, s, e):
        if doc.code and _inside(m.start(), doc.code):
            continue
        if tag_intent(m.group("tag")):
            return m.group(0)
    return None


def _title_tag(title: str) -> str | None:
    """A GM tag in a heading's own title (``## Blood #gm``): it marks the heading's section as a
    tag on the line under it does."""
    for m in _BODY_TAG.finditer(title):
        if tag_intent(m.group("tag")):
            return m.group(0)
    return None


def _tag_under(doc: _Text, i: int) -> str | None:
    """A GM tag on a line of tags alone right under the heading on line ``i`` (one blank line
    between them at most): it marks the heading's whole section."""
    for j in (i + 1, i + 2):
        if j >= len(doc.lines) or j in doc.code_lines:
            return None
        line = doc.line(j)
        if line.strip():
            return _gm_tags(doc, j) if _TAG_LINE.match(line) else None
    return None


def _paragraph(doc: _Text, i: int) -> tuple[int, int]:
    """``(start, end)`` of the paragraph line ``i`` is in: between blank lines, its last line's
    newline included."""
    a = i
    while a > 0 and doc.line(a - 1).strip() and _heading(doc.line(a - 1)) is None:
        a -= 1
    b = i
    while b + 1 < len(doc.lines) and doc.line(b + 1).strip() and not _heading(doc.line(b + 1)):
        b += 1
    return doc.lines[a][0], min(doc.lines[b][1] + 1, len(doc.text))


def _opens_note(doc: _Text, i: int) -> bool:
    """Whether line ``i`` is a line of tags alone that opens the note, above its first heading
    (``#gm`` then ``# Duke``): it tags the note, not one paragraph."""
    before = all(not doc.line(k).strip() for k in range(i))
    return before and bool(_TAG_LINE.match(doc.line(i)))


def _body_tags(doc: _Text) -> list[HiddenSection]:
    """A paragraph carrying a GM tag (``… a spy. #gm``): the paragraph is held. A tag under a
    heading holds the heading's section instead (:func:`_open_heading`); a line of tags that
    opens the note holds the whole note (:func:`_opens_note`)."""
    out: list[HiddenSection] = []
    for i in range(len(doc.lines)):
        if i in doc.code_lines or "#" not in doc.line(i) or _heading(doc.line(i)):
            continue
        tag = _gm_tags(doc, i)
        if tag is None:
            continue
        start, stop = _paragraph(doc, i)
        if _opens_note(doc, i):
            stop = len(doc.text)  # a tag line above the title tags the whole note
        rule = f"tag “{tag}”"
        out.append(
            HiddenSection(
                start, stop, frozenset(), "tagged paragraph", i + 1, rule=rule, explicit=False
            )
        )
    return out


#: A BBCode tag a forum or a VTT writes: ``[spoiler]``, ``[gm]``, ``[secret=Duke]``.
_BB_OPEN = re.compile(r"(?<!\[)\[(?P<tag>[A-Za-z][\w-]{0,20})(?:=[^\]\n]{0,60})?\](?![(\[:])")


def _bbcode(doc: _Text) -> list[HiddenSection]:
    """BBCode blocks naming GM intent (``[spoiler]…[/spoiler]``, ``[gm]…[/gm]``,
    ``[secret]…[/secret]``), to their closing tag; one never closed holds the rest of its
    paragraph."""
    out: list[HiddenSection] = []
    masked = doc.masked
    for m in _BB_OPEN.finditer(masked):
        if (doc.code and _inside(m.start(), doc.code)) or not tag_intent(m.group("tag")):
            continue
        if any(h.start <= m.start() < h.end for h in out):
            continue
        close = re.compile(rf"\[/{re.escape(m.group('tag'))}\]", re.I).search(masked, m.end())
        if close is not None:
            stop = close.end()
        else:
            stop = _paragraph(doc, doc.line_of(m.start()) - 1)[1]
        rule = f"BBCode “[{m.group('tag')}]”"
        line = doc.line_of(m.start())
        out.append(
            HiddenSection(m.start(), stop, frozenset(), "bbcode", line, rule=rule, explicit=False)
        )
    return out


#: A Markdown table's delimiter row: ``|---|:--:|``, ``--- | ---``.
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-{1,}:?[ \t]*(?:\|[ \t]*:?-{1,}:?[ \t]*)*\|?[ \t]*$")


def _unquoted(doc: _Text, i: int) -> tuple[int, str]:
    """Line ``i`` without the quote (``> ``) it may sit in, and where that text starts: a table
    inside a callout is still a table."""
    s, e = doc.lines[i]
    line = doc.masked[s:e]
    quote = _QUOTE_DEPTH.match(line)
    pre = quote.end() if quote and ">" in quote.group(0) else 0
    return s + pre, line[pre:]


def _cells(doc: _Text, i: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each cell's content on table row ``i`` (an escaped ``\\|`` or one in
    code is no border; the outer pipes are optional; a quote's ``>`` is no cell)."""
    s, line = _unquoted(doc, i)
    e = doc.lines[i][1]
    bars = [
        k
        for k in range(s, e)
        if doc.masked[k] == "|"
        and doc.masked[k - 1 : k] != "\\"
        and not (doc.code and _inside(k, doc.code))
    ]
    edges = [s - 1 if not line.lstrip().startswith("|") else None, *bars]
    if not line.rstrip().endswith("|"):
        edges.append(e)
    points = [x for x in edges if x is not None]
    return [(a + 1, b) for a, b in zip(points, points[1:], strict=False)]


def _marked_columns(doc: _Text, cells: list[tuple[int, int]]) -> list[int]:
    """The columns whose header cell names GM intent (:func:`header_intent`)."""
    return [k for k, (a, b) in enumerate(cells) if header_intent(doc.masked[a:b].strip())]


def _table_rows(doc: _Text, i: int) -> list[int]:
    """The rows of the table whose delimiter row is line ``i``: its header and body."""
    rows = [i - 1]
    j = i + 1
    while j < len(doc.lines) and "|" in doc.line(j) and j not in doc.code_lines:
        rows.append(j)
        j += 1
    return rows


def _table_columns(doc: _Text) -> list[HiddenSection]:
    """A Markdown table (in a quote too) whose column header names GM intent (``GM notes``,
    ``Secret Motive``; in the first body row too: a second header row), or whose row label does
    (``| GM notes | … |``, a key/value infobox): that column's or row's cells are held, so players
    read the rest. A row whose cells do not line up with the header holds the whole table (fail
    closed)."""
    out: list[HiddenSection] = []
    for i in range(1, len(doc.lines)):
        if (
            i in doc.code_lines
            or not _TABLE_RULE.match(_unquoted(doc, i)[1])
            or "|" not in doc.line(i - 1)
        ):
            continue
        out += _held_cells(doc, _table_rows(doc, i))
    return out


def _held_cells(doc: _Text, rows: list[int]) -> list[HiddenSection]:
    """The held cells of a table of ``rows`` (:func:`_table_columns`)."""
    spans = [_cells(doc, r) for r in rows]
    marked = set(_marked_columns(doc, spans[0]))
    if len(spans) > 1 and not (spans[1] and header_intent(_cell_text(doc, spans[1][0]))):
        marked |= set(_marked_columns(doc, spans[1]))  # a second header row
    labelled = [r for r, c in zip(rows[1:], spans[1:], strict=True) if c and _row_label(doc, c)]
    if not marked and not labelled:
        return []
    first = min(marked) if marked else 0
    rule = f"table column “{_plain(_cell_text(doc, spans[0][first]))[:40]}”" if marked else ""
    if any(len(c) != len(spans[0]) for c in spans):
        start, stop = doc.lines[rows[0]][0], min(doc.lines[rows[-1]][1] + 1, len(doc.text))
        line = rows[0] + 2
        rule = rule or "table row label"
        return [HiddenSection(start, stop, frozenset(), "table", line, rule=rule, explicit=False)]
    out = []
    for r, cells in zip(rows, spans, strict=True):
        why = rule if r not in labelled else f"table row “{_plain(_cell_text(doc, cells[0]))}”"
        for k in sorted(marked) if r not in labelled else range(len(cells)):
            a, b = cells[k]
            out.append(
                HiddenSection(a, b, frozenset(), "table cell", r + 1, rule=why, explicit=False)
            )
    return out


def _cell_text(doc: _Text, cell: tuple[int, int]) -> str:
    return doc.masked[cell[0] : cell[1]].strip()


def _row_label(doc: _Text, cells: list[tuple[int, int]]) -> bool:
    """Whether a body row is labelled as the GM's in its first cell (``| GM notes | … |``): a
    whole GM name, not a GM word beside others (``Secret Door`` is a room)."""
    label = _plain(_cell_text(doc, cells[0]))
    return bool(label) and bool(name_intent(label) or label_intent(label))


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
