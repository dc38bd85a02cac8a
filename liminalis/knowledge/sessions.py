"""Session notes: which documents are sessions, their order, and "last session" in a question.

A view is a session note when its ``type`` is ``session``, or it lies in a ``sessions/`` folder,
or its title or file name reads ``Session N``. Sessions are ordered by

    key(s) = (number(s) ?? ∞,  in-world date(s) ?? (),  natural file name,  doc id)

where the number comes from the title ("Session 4 — …"), else the file name ("session-04"),
and the in-world date from a ``Date:`` / ``In-world date:`` line (ISO ``2024-03-05``, or
``5 March 1024`` with Gregorian month names; a campaign's own calendar is ordered by its year
only). A file's time never counts: an edited old note stays where the story put it.

:func:`resolve_sessions` turns the time words of a question into session doc ids, in order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from liminalis.ingest.sections import source_of
from liminalis.knowledge.facts import SessionMark
from liminalis.text import natural_key
from liminalis.types import Document

__all__ = ["SessionInfo", "session_mark", "order_sessions", "resolve_sessions"]

_TITLE_NO = re.compile(r"\bsession\s*#?\s*(\d{1,4})\b", re.I)
_FILE_NO = re.compile(r"(?:session|sess|ep|episode)[-_ ]*0*(\d{1,4})", re.I)
_DATE_LINE = re.compile(
    r"(?:in-world date|in world date|date|when)\s*(?:\*\*)?\s*:\s*(?:\*\*)?\s*([^·\n|]+)", re.I
)
_ISO = re.compile(r"\b(\d{3,4})-(\d{1,2})-(\d{1,2})\b")
_MONTHS = {
    m: i
    for i, m in enumerate(
        "january february march april may june july august september october november december".split(),
        1,
    )
}
_DMY = re.compile(r"\b(\d{1,2})(?:\s*[–-]\s*\d{1,2})?\s+([A-Za-z]+),?\s+(\d{1,4})\b")
_YEAR = re.compile(r"\b(\d{3,4})\b")


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session note as a lens reads it, with its place in the campaign (1-based)."""

    doc_id: str
    title: str
    number: int | None
    date: str
    ordinal: int


def _date(text: str) -> tuple[str, tuple[int, ...]]:
    m = _DATE_LINE.search(text[:1500])
    if not m:
        return "", ()
    raw = m.group(1).strip(" *_")
    iso = _ISO.search(raw)
    if iso:
        return raw, (int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))
    dmy = _DMY.search(raw)
    if dmy:
        month = _MONTHS.get(dmy.group(2).lower())
        year = int(dmy.group(3))
        return raw, ((year, month, int(dmy.group(1))) if month else (year,))
    year_m = _YEAR.search(raw)
    return raw, ((int(year_m.group(1)),) if year_m else ())


def session_mark(doc: Document) -> SessionMark | None:
    """What makes ``doc`` a session note (number, in-world date), or None when it is not one."""
    path = PurePosixPath(doc.path)
    title_no = _TITLE_NO.search(doc.title)
    file_no = _FILE_NO.search(path.stem)
    in_folder = any(
        p.lower() in {"sessions", "session-notes", "session notes"} for p in path.parts[:-1]
    )
    if not (doc.type == "session" or in_folder or title_no or file_no):
        return None
    number = int(title_no.group(1)) if title_no else int(file_no.group(1)) if file_no else None
    raw, key = _date(doc.text)
    return SessionMark(number=number, date=raw, date_key=key)


def order_sessions(marks: Sequence[tuple[str, str, str, SessionMark]]) -> list[SessionInfo]:
    """``(doc_id, title, path, mark)`` of session views in campaign order (see the module)."""

    def key(item: tuple[str, str, str, SessionMark]) -> tuple[object, ...]:
        doc_id, _, path, mark = item
        return (
            mark.number if mark.number is not None else math.inf,
            mark.date_key,
            natural_key(PurePosixPath(path).stem),
            natural_key(source_of(doc_id)),
        )

    ordered = sorted(marks, key=key)
    return [
        SessionInfo(doc_id, title, mark.number, mark.date, n)
        for n, (doc_id, title, _, mark) in enumerate(ordered, 1)
    ]


_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_ORDINALS = {
    w: i
    for i, w in enumerate(
        "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh "
        "twelfth".split()
    )
}
_NUM = r"(\d{1,4}|" + "|".join(_WORDS) + r")"


def _int(word: str) -> int:
    return int(word) if word.isdigit() else _WORDS[word]


def resolve_sessions(question: str, sessions: Sequence[SessionInfo]) -> list[str]:
    """Session doc ids (in campaign order) that the time words of ``question`` point at.

    * "last/latest/most recent/previous session", "last time", "previously" (opening or closing
      the question) → the latest;
    * "the session before last" → the one before the latest;
    * "last N sessions" / "past three sessions" → the latest N;
    * "session 4", "session four", "sessions 2 to 4", "the fourth session" → by number;
    * "the first session", "the first N sessions" → from the start;
    * "so far", "all sessions", "the whole campaign" → every session.

    An empty list: the question names no time (or no such session exists)."""
    q = " ".join(question.lower().split())
    if not sessions:
        return []
    ids = [s.doc_id for s in sessions]
    by_number = {s.number: s.doc_id for s in sessions if s.number is not None}
    if re.search(r"\bso far\b|\ball (?:the )?sessions\b|\bwhole campaign\b|\bentire campaign\b", q):
        return ids
    if m := re.search(r"\bsessions?\s+" + _NUM + r"\s*(?:-|–|to|through|and)\s*" + _NUM + r"\b", q):
        lo, hi = sorted((_int(m.group(1)), _int(m.group(2))))
        return [by_number[n] for n in sorted(by_number) if lo <= n <= hi]
    if m := re.search(r"\b(?:last|past|previous|latest)\s+" + _NUM + r"\s+sessions\b", q):
        return ids[-_int(m.group(1)) :]
    if m := re.search(r"\bfirst\s+" + _NUM + r"\s+sessions\b", q):
        return ids[: _int(m.group(1))]
    if re.search(r"\bsession before (?:the )?last\b|\bsecond[- ]to[- ]last session\b", q):
        return ids[-2:-1]
    if m := re.search(r"\bsession\s+(?:#\s*)?" + _NUM + r"\b", q):
        n = _int(m.group(1))
        return [by_number[n]] if n in by_number else []
    if m := re.search(r"\b(" + "|".join(_ORDINALS) + r")\s+session\b", q):
        word = m.group(1)
        if word == "first":
            return ids[:1]
        n = _ORDINALS[word]
        return [by_number[n]] if n in by_number else ([ids[n - 1]] if n <= len(ids) else [])
    # "previously" names a time where it opens or closes the question ("Previously, who…",
    # "what happened previously?"); inside one it is an adverb ("who previously ruled the city").
    if re.search(
        r"\b(?:last|latest|most recent|previous|recent)\s+(?:game\s+)?session\b|\blast time\b"
        r"|\blast game\b|^\W*previously\b|\bpreviously on\b|\bpreviously\W*$",
        q,
    ):
        return ids[-1:]
    return []
