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
from collections.abc import Iterable
from dataclasses import dataclass

from liminalis.lens import GM, NOT_GM, PLAYERS

__all__ = ["HiddenSection", "View", "find_hidden_sections", "split_views", "view_id", "source_of"]

_GM_WORDS = frozenset({"gm", "secret", "gm-only", "gmonly", "gm_only", "gm only", "secrets", "dm", "dm-only"})
_LENS_FORM = re.compile(r"lens\s*:\s*([\w-]+)", re.I)
_FENCE = re.compile(r"^[ \t]{0,3}(?P<quotes>(?:>[ \t]?)*)[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_CALLOUT = re.compile(
    r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?(?P<quotes>(?:>[ \t]?)+)[ \t]*\[!(?P<kind>[^\]\n]+)\][+-]?")
_QUOTE_DEPTH = re.compile(r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?((?:>[ \t]?)*)")
_ATX = re.compile(r"^[ \t]{0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
_SETEXT = re.compile(r"^[ \t]{0,3}(=+|-+)[ \t]*$")
_HEADING_MARK = re.compile(r"[(\[]\s*(gm|gm[ _-]only|secret|lens\s*:\s*[\w-]+)\s*[)\]]\s*$", re.I)
_OPENERS = re.compile(r"<!--|%%")
#: The marks around a personal section, dropped from the view its lens reads.
_MARKS = re.compile(r"<!--[ \t]*(?:lens\s*:\s*[\w-]+)?[ \t]*|[ \t]*-->|%%[ \t]*(?:lens\s*:\s*[\w-]+)?[ \t]*"
                    r"|\[!lens\s*:\s*[\w-]+\][+-]?[ \t]*|^[ \t]*(?:`{3,}|~{3,})[^\n]*$", re.I | re.M)


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


def find_hidden_sections(text: str, *, lenses: Iterable[str] = ()) -> list[HiddenSection]:
    """Every hidden section of ``text`` (normalized, ``\\n`` line ends), in document order.

    Sections whose audience is every player (``lens:players``) are not hidden and not returned.
    """
    known = frozenset(x.lower() for x in lenses) - {GM}
    found: list[HiddenSection] = []
    lines = _lines(text)

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    # Comments, anywhere (inside code too: erring toward hiding is the safe side).
    pos = 0
    while (m := _OPENERS.search(text, pos)) is not None:
        opener = m.group(0)
        closer = "-->" if opener == "<!--" else "%%"
        end = text.find(closer, m.end())
        inner_end = len(text) if end < 0 else end
        lm = _LENS_FORM.match(text[m.end():inner_end].lstrip())
        aud = (_audience(lm.group(0), known) if lm else None) or frozenset()
        stop = len(text) if end < 0 else end + len(closer)
        found.append(HiddenSection(m.start(), stop, aud, "comment" if opener == "<!--" else "obsidian comment",
                                   line_of(m.start()), terminated=end >= 0))
        pos = stop

    # Line-based marks: fences, callouts, headings (not inside an ordinary code fence).
    i = 0
    open_fence: tuple[str, int] | None = None  # an ordinary fence: (marker, its length)
    heading_stack: list[tuple[int, int, frozenset[str], int]] = []  # (level, start, audience, line)
    while i < len(lines):
        s, e = lines[i]
        line = text[s:e]
        fm = _FENCE.match(line)
        if open_fence is not None:
            if fm and fm.group("fence")[0] == open_fence[0] and len(fm.group("fence")) >= open_fence[1] \
                    and not fm.group("info").strip():
                open_fence = None
            i += 1
            continue
        if fm:
            fence_aud = _audience(fm.group("info"), known)
            if fence_aud is None:
                open_fence = (fm.group("fence")[0], len(fm.group("fence")))
                i += 1
                continue
            fence = fm.group("fence")
            j = i + 1
            while j < len(lines):
                cm = _FENCE.match(text[lines[j][0]:lines[j][1]])
                if cm and cm.group("fence")[0] == fence[0] and len(cm.group("fence")) >= len(fence) \
                        and not cm.group("info").strip():
                    break
                j += 1
            closed = j < len(lines)
            stop = min(lines[j][1] + 1, len(text)) if closed else len(text)
            found.append(HiddenSection(s, stop, fence_aud, "fenced block", i + 1, terminated=closed))
            i = j + 1
            continue
        cm = _CALLOUT.match(line)
        if cm and (callout_aud := _audience(cm.group("kind"), known)) is not None:
            depth = cm.group("quotes").count(">")
            j = i + 1
            while j < len(lines):
                nxt = text[lines[j][0]:lines[j][1]]
                if not nxt.strip():
                    break
                d = _depth(nxt)
                if d >= depth:
                    j += 1
                    continue
                # A lazy continuation line (no ``>``) still belongs to the quote's paragraph;
                # a heading, a fence or a shallower quote does not.
                if d == 0 and not _ATX.match(nxt) and not _FENCE.match(nxt):
                    j += 1
                    continue
                break
            found.append(HiddenSection(s, min(lines[j - 1][1] + 1, len(text)), callout_aud, "callout", i + 1))
            i = j
            continue
        level, title = 0, ""
        am = _ATX.match(line)
        if am:
            level, title = len(am.group(1)), am.group(2) or ""
        elif i + 1 < len(lines) and line.strip() and _depth(line) == 0:
            sm = _SETEXT.match(text[lines[i + 1][0]:lines[i + 1][1]])
            if sm and not _ATX.match(line):
                level, title = (1 if sm.group(1)[0] == "=" else 2), line.strip()
        if level:
            while heading_stack and heading_stack[-1][0] >= level:
                lv, start, aud, ln = heading_stack.pop()
                found.append(HiddenSection(start, s, aud, "heading section", ln))
            hm = _HEADING_MARK.search(title)
            if hm and (heading_aud := _audience(hm.group(1), known)) is not None:
                heading_stack.append((level, s, heading_aud, i + 1))
        i += 1
    for _lv, start, aud, ln in heading_stack:
        found.append(HiddenSection(start, len(text), aud, "heading section", ln))
    return sorted((h for h in found if PLAYERS not in h.audience and h.end > h.start),
                  key=lambda h: (h.start, -h.end))


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
    for a, b in zip(bounds, bounds[1:], strict=False):
        covering = [h for h in sections if h.start < b and h.end > a]
        if not covering:
            shared.append(text[a:b])
            continue
        for name in names:
            if all(name in h.audience for h in covering):
                personal.setdefault(name, []).append(text[a:b])
    views = [View("gm", text, frozenset({GM}))]
    common = _join(shared)
    if common.strip():
        views.append(View("", common, readers | {NOT_GM}))
    for name in names:
        if name in readers or PLAYERS in readers:
            body = "\n\n".join(_MARKS.sub("", p).strip() for p in personal.get(name, []) if _MARKS.sub("", p).strip())
            if body.strip():
                views.append(View(f"lens:{name}", body, frozenset({name, NOT_GM})))
    return views
