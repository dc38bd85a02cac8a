"""A campaign's timeline: its sessions in campaign order and the dated events its notes state.

Built from the views one lens reads and nothing else, so a GM-only session or event is not on a
player's timeline at all: positions are counted over what the lens reads (a hidden session
leaves no gap in the numbering of positions and no count). Sessions come in the order of
:func:`~liminalis.knowledge.sessions.order_sessions` (number, in-world date, file name). A
dated event is a sentence of a view that states an in-world date, either a day
(``19 Highsun 524``, ``5 March 1024``) or a year after *in*/*of*/*since*/*until* (``the flood
of 503``); events are ordered by

    key(e) = (year, month(e) ?? 0, day(e) ?? 0, document order)

where ``month`` is known only for Gregorian month names (a campaign's own calendar is ordered
within a year by its day alone). Drawing it is an adapter's
(:mod:`liminalis.adapters.timeline_png`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from liminalis.knowledge.sessions import SessionInfo
from liminalis.text import split_sentences

__all__ = ["TimelineSession", "TimelineEvent", "Timeline", "build_timeline", "dated_events"]

_MONTHS = {
    m: i
    for i, m in enumerate(
        "january february march april may june july august september october november december".split(),
        1,
    )
}
_DAY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([A-Z][a-z]{2,}),?\s+(\d{3,4})\b")
_YEAR = re.compile(
    r"\b(?:in|of|since|until)\s+(?:the\s+year\s+)?(\d{3,4})\b"
    r"(?!\s*(?:steps|feet|foot|men|gold|coins|miles|years|pounds|people|workers))"
)
#: A ``Label: value`` line (a session's ``In-world date:``): the note's metadata, no event.
_LABEL_LINE = re.compile(r"^\W*[\w -]{1,30}:\**\s")
_MAX_LABEL = 90
#: Markdown a label does not draw: bold marks, and a GM's comment marks around their own text.
_MARKUP = re.compile(r"\*\*|<!--\s*(?:lens:[\w-]+\s*)?|\s*-->|%%\s*(?:lens:[\w-]+\s*)?")


@dataclass(frozen=True, slots=True)
class TimelineSession:
    """A session at its place (1-based, among the sessions the lens reads)."""

    position: int
    number: int | None
    date: str
    name: str
    doc_id: str

    def label(self) -> str:
        head = f"Session {self.number}" if self.number is not None else f"#{self.position}"
        parts = [head, self.date, "" if self.name.lower() == head.lower() else self.name]
        return " · ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """A sentence that states an in-world date, at its place among the events."""

    position: int
    date: str
    text: str
    doc_id: str
    key: tuple[int, int, int]

    def label(self) -> str:
        text = self.text if len(self.text) <= _MAX_LABEL else self.text[: _MAX_LABEL - 1] + "…"
        return f"{self.date} — {text}"


@dataclass(frozen=True, slots=True)
class Timeline:
    """Sessions and dated events in order; ``entity`` the name it is about, if any."""

    sessions: tuple[TimelineSession, ...]
    events: tuple[TimelineEvent, ...]
    entity: str = ""

    def labels(self) -> list[str]:
        """Every label the picture draws, sessions first: what a reader of it sees."""
        return [s.label() for s in self.sessions] + [e.label() for e in self.events]

    def lines(self) -> list[str]:
        """The timeline in words (a platform without the picture, the console)."""
        out = [f"Sessions ({len(self.sessions)}):"] if self.sessions else []
        out += [f"{s.position}. {s.label()}" for s in self.sessions]
        out += [f"Dated events ({len(self.events)}):"] if self.events else []
        out += [f"- {e.label()}" for e in self.events]
        return out


def _date_of(sentence: str) -> tuple[str, tuple[int, int, int]] | None:
    m = _DAY.search(sentence)
    if m:
        day, month, year = int(m.group(1)), m.group(2), int(m.group(3))
        return m.group(0), (year, _MONTHS.get(month.lower(), 0), day)
    y = _YEAR.search(sentence)
    if y:
        return y.group(1), (int(y.group(1)), 0, 0)
    return None


def dated_events(doc_id: str, text: str) -> list[tuple[str, str, tuple[int, int, int]]]:
    """``(date, sentence, key)`` of each sentence of ``text`` that states an in-world date,
    headings and ``Label:`` lines left out."""
    out = []
    for s, e, _ in split_sentences(text):
        sentence = " ".join(text[s:e].split()).lstrip("-*+ ")
        if not sentence or sentence.startswith("#") or _LABEL_LINE.match(sentence):
            continue
        found = _date_of(sentence)
        if found:
            out.append((found[0], _MARKUP.sub("", sentence).strip(), found[1]))
    return out


def _about(sentence: str, names: Iterable[str]) -> bool:
    low = sentence.lower()
    return any(re.search(r"\b" + re.escape(n.lower()) + r"\b", low) for n in names if n)


def build_timeline(
    sessions: Sequence[SessionInfo],
    texts: Mapping[str, str],
    *,
    entity: str = "",
    names: Sequence[str] = (),
    entity_docs: frozenset[str] | None = None,
) -> Timeline:
    """The timeline of the sessions and view texts one lens reads (``texts``: doc id → text).

    With an ``entity``, only the sessions whose notes mention it (``entity_docs``) and the
    events whose sentence names it (any of ``names``)."""
    kept = [s for s in sessions if entity_docs is None or s.doc_id in entity_docs]
    timeline_sessions = tuple(
        TimelineSession(n, s.number, s.date, s.title, s.doc_id) for n, s in enumerate(kept, 1)
    )
    found: list[tuple[tuple[int, int, int], int, str, str, str]] = []
    for order, doc_id in enumerate(sorted(texts)):
        for date, sentence, key in dated_events(doc_id, texts[doc_id]):
            if entity and not _about(sentence, names):
                continue
            found.append((key, order, date, sentence, doc_id))
    found = list({(f[3], f[2]): f for f in sorted(found)}.values())  # one sentence once
    found.sort()
    events = tuple(
        TimelineEvent(n, date, sentence, doc_id, key)
        for n, (key, _, date, sentence, doc_id) in enumerate(found, 1)
    )
    return Timeline(timeline_sessions, events, entity)
