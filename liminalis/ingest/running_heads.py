"""A printed book's running heads, feet and page numbers are not its text.

A rulebook PDF repeats its title, its chapter's name or its publisher's line at the top or foot
of every page, usually with the page number. Extracted as text, each page then opens with "GURPS
Lite · 12" and a question about GURPS finds that line on every page; a passage that is nothing
else is noise in every answer. A line is *running* when, with its digits read as one wildcard,
it stands within the first or last :data:`EDGE_LINES` lines of at least :data:`SHARE` of the
pages (and of at least :data:`MIN_PAGES` pages): a left page and a right page each carry their
own head, so each is on about half the pages. A bare page number (``12``, ``- 12 -``, ``Page
12``, the page's own label) at a page's edge is dropped on any page. Only the edges are read:
a line repeated inside the text (a table's header) stays. Headings the outline gave (``#``
lines) are never dropped, and neither is a line that names GM intent ("Secrets of the Keep (GM
only)" atop every page of a GM's book): the wall reads those lines, and leaving out a running
head must never publish what it marks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from liminalis.ingest.intent import name_intent

__all__ = ["EDGE_LINES", "MIN_PAGES", "SHARE", "gm_mark", "running_gm_mark", "strip_running_lines"]

#: How many lines at each end of a page a running head or foot may take.
EDGE_LINES = 2
#: The share of pages a line must stand at the edge of to be running (a left or right head
#: stands on about half).
SHARE = 0.4
#: Fewer pages than this prove nothing repeats.
MIN_PAGES = 3
_GM_WORDS = re.compile(r"\b(?:gm|dm|gms|dms|secrets?|spoilers?|keeper|referee)\b", re.I)
_NUMBER = re.compile(r"[\W_]*(?:page|p\.|pg\.?)?[\W_]*\d{1,4}[\W_]*", re.I)
#: A page number printed before or after a running head: ``12 · ``, `` — page 12``, ``    12``.
_LEAD_NUMBER = re.compile(r"^\s*(?:page|p\.|pg\.?)?\s*\d{1,4}\s*[·•|–—-]?\s*", re.I)
_TRAIL_NUMBER = re.compile(r"\s*[·•|–—-]?\s*(?:page|p\.|pg\.?)?\s*\d{1,4}\s*$", re.I)


def _key(line: str) -> str:
    return " ".join(re.sub(r"\d+", "#", line.lower()).split())


def gm_mark(line: str) -> str:
    """The GM mark a head, foot or title line states (``Secrets of the Keep (GM only) · 12``,
    ``GM ONLY``, ``Not for players``), its page number read past, else ``""``: the one
    vocabulary's :func:`~liminalis.ingest.intent.name_intent` of the line without its number (a
    head is a name: "The Dungeon Master and the Players" names the role as a topic, no mark)."""
    text = _TRAIL_NUMBER.sub("", _LEAD_NUMBER.sub("", line.strip())).strip()
    if not text:
        return ""
    return text if name_intent(text) else ""


def running_gm_mark(texts: Sequence[str]) -> str:
    """The GM mark a book prints as a running head or foot, else ``""``: one mark
    (:func:`gm_mark`, its digits read as one wildcard) in the first or last :data:`EDGE_LINES`
    lines of as many pages as a running head needs (:data:`SHARE`, and at least
    :data:`MIN_PAGES` or every page of a shorter book) marks the whole book GM-only:

        marked(book) ⇔ ∃ m: |{p : ∃ l ∈ edges(p): key(gm_mark(l)) = m}| ≥ max(min(MIN_PAGES, n), SHARE · n)

    A chapter's own title ("GM Notes" atop one page, "Secrets" atop another) repeats on no
    other page: the wall holds its chapter, not the book."""
    texts = [t for t in texts if t.strip()]
    counts: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for text in texts:
        lines = text.split("\n")
        marks = {m for i in _edges(lines) if (m := gm_mark(lines[i]))}
        for m in marks:
            shown.setdefault(_key(m), m)
        counts.update({_key(m) for m in marks})
    need = max(min(MIN_PAGES, len(texts)), SHARE * len(texts))
    return next((shown[k] for k, c in counts.most_common() if c >= need), "")


def _page_number(line: str, label: str) -> bool:
    text = line.strip()
    return bool(_NUMBER.fullmatch(text)) or (bool(label) and text.lower() == label.lower())


def _edges(lines: list[str]) -> list[int]:
    """Indexes of the first and last :data:`EDGE_LINES` non-blank lines."""
    filled = [i for i, ln in enumerate(lines) if ln.strip()]
    return sorted(set(filled[:EDGE_LINES] + filled[-EDGE_LINES:]))


def _running_keys(texts: Sequence[str]) -> set[str]:
    counts: Counter[str] = Counter()
    texts = [t for t in texts if t.strip()]
    for text in texts:
        lines = text.split("\n")
        counts.update({_key(lines[i]) for i in _edges(lines) if not lines[i].startswith("#")})
    need = max(MIN_PAGES, SHARE * len(texts))
    return {k for k, c in counts.items() if k and c >= need}


def _strip_page(text: str, label: str, running: set[str]) -> str:
    lines = text.split("\n")

    def furniture(line: str) -> bool:
        if line.startswith("#") or _GM_WORDS.search(line) or gm_mark(line):
            return False
        return _key(line) in running or _page_number(line, label)

    drop: set[int] = set()
    filled = [i for i, ln in enumerate(lines) if ln.strip()]
    for order in (filled, filled[::-1]):  # inward from the top, then from the foot
        for i in order[:EDGE_LINES]:
            if not furniture(lines[i]):
                break
            drop.add(i)
    if not drop:
        return text
    return "\n".join(ln for i, ln in enumerate(lines) if i not in drop).strip("\n")


def strip_running_lines(texts: Sequence[str], labels: Sequence[str]) -> list[str]:
    """Each page's text (``texts``, printed ``labels``) without its running heads, feet and
    bare page numbers."""
    running = _running_keys(texts)
    return [_strip_page(t, lab, running) if t else t for t, lab in zip(texts, labels, strict=True)]
