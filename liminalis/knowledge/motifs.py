"""Recurring themes and open threads of a document view.

**Threads**: every item of a ``## Loose Threads`` / ``## Open Threads`` / ``## Open Questions``
/ ``## Unresolved`` section (list items, else its sentences) is a thread, with its offset.

**Themes**: the view's most frequent content words (no stop words, no names: a word met
capitalised inside a sentence is a name), weighted ``w = 1 + ln tf``; a lens's themes are the
words that recur across the views it sees, ranked by ``Σ_views w`` (:func:`rank_themes`).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable

from liminalis.knowledge.facts import Motif
from liminalis.knowledge.summaries import is_metadata_line
from liminalis.text import STOP_WORDS, split_sentences
from liminalis.types import Document

__all__ = ["extract_motifs", "open_threads", "rank_themes", "THREAD_HEADINGS"]

THREAD_HEADINGS = re.compile(
    r"^(?:loose|open|dangling|unresolved|unanswered)\s+(?:threads?|questions?|ends?|hooks?)\b"
    r"|^unresolved\b|^threads\b",
    re.I,
)
_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(.*)$")
_WORD = re.compile(r"[A-Za-z][a-z'’-]+")
_MORE_STOP = frozenset(
    "said says would could should also like just back even still much many well made make "
    "made into over down come came went going told tell asked away every again never since "
    "before after there their them they that this with from have been were what when which "
    "while where other another night time first last long little know knew think thought "
    "session sessions each each".split()
)


def open_threads(doc: Document) -> list[Motif]:
    """The items of the view's loose/open-thread sections, as ``thread`` motifs."""
    out: list[Motif] = []
    level = 0
    inside = False
    pos = 0
    buffer: list[tuple[int, str]] = []
    for line in doc.text.split("\n"):
        h = _HEADING.match(line)
        if h:
            if inside and len(h.group(1)) <= level:
                inside = False
            if not inside and THREAD_HEADINGS.search(h.group(2).strip()):
                inside, level = True, len(h.group(1))
        elif inside and line.strip() and not is_metadata_line(line):
            buffer.append((pos, line))
        pos += len(line) + 1
    items = [(p, _ITEM.match(line)) for p, line in buffer]
    if any(m for _, m in items):
        for p, m in items:
            if m:
                out.append(Motif("thread", _clean(m.group(1)), 1.0, p))
    else:
        for p, line in buffer:
            for s, e, _ in split_sentences(line):
                out.append(Motif("thread", _clean(line[s:e]), 1.0, p + s))
    return [m for m in out if m.text]


def _clean(text: str) -> str:
    return " ".join(re.sub(r"\*\*|__|(?<!\w)[*_]|[*_](?!\w)", "", text).split())


def _themes(doc: Document, top_k: int) -> list[Motif]:
    counts: Counter[str] = Counter()
    names: set[str] = set()
    for line in doc.text.split("\n"):
        if line.lstrip().startswith(("#", "|")) or is_metadata_line(line):
            continue
        for i, m in enumerate(_WORD.finditer(line)):
            word = m.group(0).lower().replace("’", "'").rstrip("'")
            if m.group(0)[0].isupper():
                if i > 0 and line[max(0, m.start() - 2) : m.start()].strip() not in {
                    ".",
                    "!",
                    "?",
                    '"',
                }:
                    names.add(word)
                continue
            if len(word) < 4 or word in STOP_WORDS or word in _MORE_STOP or "'" in word:
                continue
            counts[word] += 1
    for word in list(counts):
        if word.endswith("s") and word[:-1] in counts:  # bells → bell
            counts[word[:-1]] += counts.pop(word)
    ranked = sorted(
        ((w, c) for w, c in counts.items() if c >= 2 and w not in names),
        key=lambda wc: (-wc[1], wc[0]),
    )[:top_k]
    return [Motif("theme", w, round(1 + math.log(c), 4)) for w, c in ranked]


def extract_motifs(doc: Document, *, top_k: int = 12) -> tuple[Motif, ...]:
    """The view's open threads and its top ``top_k`` theme words."""
    return (*open_threads(doc), *_themes(doc, top_k))


def rank_themes(per_view: Iterable[Iterable[Motif]], *, top_k: int = 10) -> list[tuple[str, float]]:
    """Themes recurring across views (in at least two): ``(word, Σ weight)``, best first."""
    score: dict[str, float] = defaultdict(float)
    views: Counter[str] = Counter()
    for motifs in per_view:
        for m in motifs:
            if m.kind == "theme":
                score[m.text] += m.weight
                views[m.text] += 1
    ranked = sorted(
        ((w, s) for w, s in score.items() if views[w] >= 2), key=lambda ws: (-ws[1], ws[0])
    )
    return [(w, round(s, 3)) for w, s in ranked[:top_k]]
