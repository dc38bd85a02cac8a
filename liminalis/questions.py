"""The question log: what players asked, and what the GM's notes do not answer.

Every question :meth:`Engine.answer <liminalis.engine.Engine.answer>` answers is logged (its
words, the lens it was asked through, the chat, whether the answer cited any document and which).
A GM reads the log as a :class:`QuestionReport` (``/log``, ``liminalis log``): the players'
latest questions, the documents they keep asking about, and the **gaps in the notes**, the
questions no document answered, grouped by their words so a question asked five ways counts
five times. GM questions are logged (each answer gets an id) but left out of the report: a GM
trying their own notes is not the table asking. The report is a GM's and is never shown to a
player (``bot/commands/log.py`` is GM-only and private).

An answer "found nothing" when it cites no document (:attr:`Answer.answered
<liminalis.answer.Answer>`): the offline answerer's "the notes don't cover that" (no sentence
covers enough of the question), or a model's answer whose bracketed citations name no document
of its prompt. Sources are only what an answer cites, never stand-ins, so the gaps hold with a
model as without one.

Feedback is a seam, not a table of this module: an answer's :attr:`Answer.question_id
<liminalis.answer.Answer>` travels to the platform with its reply, a 👍/👎 recorded against that
id can be read back by any :class:`FeedbackReader`, and the report then lists the answers
players marked down. Until one is plugged in (``QuestionLog.feedback``), the report says
nothing about feedback.

Gaps are grouped greedily, newest question first: a question joins the first group whose words
(the tokenizer's: folded, stemmed, stop words dropped) it shares with a Jaccard index
``|A ∩ B| / |A ∪ B| ≥ 0.5``, else starts a group of its own.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from liminalis.clock import SystemClock
from liminalis.ingest.sections import source_of
from liminalis.lens import GM
from liminalis.ports import Clock
from liminalis.store.rows import QuestionRow
from liminalis.store.sqlite import Database
from liminalis.text import Tokenizer

__all__ = [
    "AskedDocument",
    "FeedbackReader",
    "Gap",
    "LoggedQuestion",
    "QuestionLog",
    "QuestionReport",
]

_log = logging.getLogger(__name__)

#: How alike two questions' words must be to count as one gap (Jaccard index).
GAP_SIMILARITY = 0.5


class FeedbackReader(Protocol):
    """The seam where players' 👍/👎 on answers join the log (a store of the chat adapters'
    feedback implements it; the composition root sets :attr:`QuestionLog.feedback`)."""

    async def thumbs_down(self, campaign: str, question_ids: Sequence[int]) -> Mapping[int, int]:
        """How many 👎 the answer to each of ``question_ids`` got; an id left out got none."""
        ...


@dataclass(frozen=True, slots=True)
class LoggedQuestion:
    """One question as the log keeps it."""

    id: int
    asked_at: dt.datetime
    lens: frozenset[str]
    question: str
    found: bool
    cited: tuple[str, ...]
    chat: str
    thumbs_down: int = 0

    @property
    def asker(self) -> str:
        """The lens in words: ``players``, ``players+mirel``."""
        return "+".join(sorted(self.lens, key=lambda n: (n != "players", n)))


@dataclass(frozen=True, slots=True)
class AskedDocument:
    """A document players keep asking about: how many answers cited it, from how many chats."""

    doc_id: str
    title: str
    answers: int
    chats: int


@dataclass(frozen=True, slots=True)
class Gap:
    """Questions no document answered, alike in their words."""

    question: str  # the latest wording
    times: int
    chats: int
    last_asked: dt.datetime
    wordings: tuple[str, ...]  # every distinct wording, newest first


@dataclass(frozen=True, slots=True)
class QuestionReport:
    """The GM's view of the table over ``days`` days up to ``until``."""

    campaign: str
    days: int
    until: dt.datetime
    questions: tuple[LoggedQuestion, ...]  # players' questions, newest first
    documents: tuple[AskedDocument, ...]  # most cited first
    gaps: tuple[Gap, ...]  # most asked first
    #: Answers players marked 👎, most marked first; ``None``: no feedback is read.
    disliked: tuple[LoggedQuestion, ...] | None = None

    @property
    def unanswered(self) -> tuple[LoggedQuestion, ...]:
        """The questions whose answer found nothing, newest first."""
        return tuple(q for q in self.questions if not q.found)

    def render(self, *, limit: int = 10, name: str = "") -> str:
        """The report as text (Markdown a chat renders; plain enough for a terminal)."""
        title = name or self.campaign
        n, missed = len(self.questions), len(self.unanswered)
        span = "day" if self.days == 1 else f"{self.days} days"
        if not n:
            return (
                f"**{title}**: no questions from players in the last {span}. "
                "What they ask shows here, with the questions your notes do not answer."
            )
        lines = [
            f"**{title}**: {n} question{'s' if n != 1 else ''} from players in the last {span}; "
            f"{missed} found nothing in the documents."
        ]
        if self.gaps:
            lines += ["", "**Gaps in your notes** (no document answered these):"]
            for gap in self.gaps[:limit]:
                times = f"asked {gap.times}×" + (f" in {gap.chats} chats" if gap.chats > 1 else "")
                lines.append(f"• “{_clip(gap.question)}” — {times}, last {_when(gap.last_asked)}")
        if self.documents:
            lines += ["", "**What players keep asking about** (documents answers cited):"]
            for doc in self.documents[:limit]:
                chats = f" in {doc.chats} chats" if doc.chats > 1 else ""
                lines.append(f"• {doc.title} — {doc.answers} answer(s){chats}")
        if self.disliked:
            lines += ["", "**Answers players marked 👎**:"]
            for q in self.disliked[:limit]:
                lines.append(f"• “{_clip(q.question)}” — 👎 {q.thumbs_down}, {_when(q.asked_at)}")
        lines += ["", "**Latest questions** (✗ found nothing):"]
        for q in self.questions[:limit]:
            mark = "" if q.found else "✗ "
            lines.append(f"• {mark}“{_clip(q.question)}” — {q.asker}, {_when(q.asked_at)}")
        return "\n".join(lines)


def _clip(text: str, n: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1].rstrip() + "…"


def _when(at: dt.datetime) -> str:
    return f"{at:%a %d %b %H:%M} UTC"


class QuestionLog:
    """Logs answered questions and reports them to a GM.

    Args:
        db: the database (``db.questions``).
        clock: when a question was asked, and where a report's window ends.
        retention_days: questions older than this are dropped as new ones are logged.
        feedback: players' 👍/👎, where the platform records them (see :class:`FeedbackReader`).
    """

    def __init__(
        self,
        db: Database,
        *,
        clock: Clock | None = None,
        tokenizer: Tokenizer = Tokenizer(),
        retention_days: int = 180,
        feedback: FeedbackReader | None = None,
    ) -> None:
        self.db = db
        self.clock = clock or SystemClock()
        self.tokenizer = tokenizer
        self.retention_days = retention_days
        self.feedback = feedback

    async def record(
        self,
        campaign: str,
        question: str,
        lens: frozenset[str],
        *,
        chat: str | None,
        found: bool,
        cited: Sequence[str],
    ) -> int:
        """Log one answered question; returns its id (the answer's ``question_id``)."""
        now = self.clock.now().timestamp()
        return await self.db.questions.add(
            campaign,
            asked_at=now,
            chat=chat or "",
            lens=lens,
            question=question,
            found=found,
            cited=cited,
            keep_after=now - self.retention_days * 86400.0,
        )

    async def report(
        self,
        campaign: str,
        *,
        days: int = 7,
        title: Callable[[str], str] = lambda doc_id: doc_id,
    ) -> QuestionReport:
        """The players' questions of the last ``days`` days (GM questions left out).

        Args:
            title: a document's title by its (source) id, as the GM sees it.
        """
        until = self.clock.now()
        rows = await self.db.questions.since(
            campaign, (until - dt.timedelta(days=days)).timestamp()
        )
        questions = [_logged(r) for r in reversed(rows) if GM not in r.lens]
        disliked: tuple[LoggedQuestion, ...] | None = None
        if self.feedback is not None:
            try:
                votes = await self.feedback.thumbs_down(campaign, [q.id for q in questions])
            except Exception:  # the report stands without the votes
                _log.exception(
                    "feedback of %s could not be read; the report goes without", campaign
                )
                votes = None
            if votes is not None:
                questions = [replace(q, thumbs_down=votes.get(q.id, 0)) for q in questions]
                disliked = tuple(
                    sorted(
                        (q for q in questions if q.thumbs_down),
                        key=lambda q: (-q.thumbs_down, -q.asked_at.timestamp()),
                    )
                )
        return QuestionReport(
            campaign=campaign,
            days=days,
            until=until,
            questions=tuple(questions),
            documents=_documents(questions, title),
            gaps=self._gaps(q for q in questions if not q.found),
            disliked=disliked,
        )

    def _gaps(self, unanswered: Iterable[LoggedQuestion]) -> tuple[Gap, ...]:
        groups: list[tuple[set[str], list[LoggedQuestion]]] = []
        for q in unanswered:  # newest first: a group's first member is its latest wording
            words = set(self.tokenizer(q.question)) or {" ".join(q.question.lower().split())}
            for key, members in groups:
                if len(key & words) / len(key | words) >= GAP_SIMILARITY:
                    members.append(q)
                    key |= words
                    break
            else:
                groups.append((words, [q]))
        gaps = [
            Gap(
                question=members[0].question,
                times=len(members),
                chats=len({m.chat for m in members}),
                last_asked=members[0].asked_at,
                wordings=tuple(dict.fromkeys(m.question for m in members)),
            )
            for _, members in groups
        ]
        return tuple(sorted(gaps, key=lambda g: (-g.times, -g.last_asked.timestamp())))


def _logged(row: QuestionRow) -> LoggedQuestion:
    return LoggedQuestion(
        id=row.id,
        asked_at=dt.datetime.fromtimestamp(row.asked_at, dt.UTC),
        lens=row.lens,
        question=row.question,
        found=row.found,
        cited=row.cited,
        chat=row.chat,
    )


def _documents(
    questions: Sequence[LoggedQuestion], title: Callable[[str], str]
) -> tuple[AskedDocument, ...]:
    """Cited documents by file (a personal view counts for its file), most cited first."""
    answers: dict[str, int] = {}
    chats: dict[str, set[str]] = {}
    for q in questions:
        for doc in dict.fromkeys(source_of(d) for d in q.cited):
            answers[doc] = answers.get(doc, 0) + 1
            chats.setdefault(doc, set()).add(q.chat)
    order = sorted(answers, key=lambda d: (-answers[d], d))
    return tuple(AskedDocument(d, title(d), answers[d], len(chats[d])) for d in order)
