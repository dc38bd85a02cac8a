"""What the chat surface keeps between a reply and a press of one of its buttons.

A *card* is a reply with buttons (an answer, a page of search results, a document's pages, a
question waiting for its campaign to be picked in a DM): who asked, where, in which campaign,
through which lens, and what it said. A button names only its card's id; the press is checked
against the card (``bot.presses``), so an id carries no secret and a guessed one reveals
nothing. *Feedback* is a 👍/👎 on an answer, kept with the question, the answer and its
sources as they were shown (cards are pruned; feedback is not). A *DM choice* is the campaign a
member picked for their direct messages when they belong to several.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from liminalis.store._base import Repository

__all__ = ["CardRepository", "CardRow", "FeedbackRow"]


@dataclass(frozen=True, slots=True)
class CardRow:
    """A reply with buttons, as stored when it was sent."""

    card_id: str
    kind: str  # "answer" | "search" | "show" | "dm"
    platform: str
    channel_id: str
    campaign: str  # "" for a DM question waiting for its campaign
    user_id: str
    lens: frozenset[str]
    question: str  # the question, the search's words, the document's id, a DM's request (JSON)
    answer: str = ""
    #: ``(doc_id, title, section)`` of each source, in the reply's order.
    sources: tuple[tuple[str, str, str], ...] = ()
    created_at: float = 0.0
    #: The question log's id of the answer (``None``: not an answer, or not logged).
    question_id: int | None = None


@dataclass(frozen=True, slots=True)
class FeedbackRow:
    """One member's 👍 (``vote`` 1) or 👎 (-1) on an answer, with what they were shown."""

    card_id: str
    user_id: str
    campaign: str
    vote: int
    reason: str
    question: str
    answer: str
    sources: tuple[tuple[str, str, str], ...]
    lens: frozenset[str]
    created_at: float


def _sources(raw: str) -> tuple[tuple[str, str, str], ...]:
    return tuple((str(a), str(b), str(c)) for a, b, c in json.loads(raw or "[]"))


class CardRepository(Repository):
    async def add(self, card: CardRow, *, prune_before: float | None = None) -> None:
        """Store ``card``; cards created before ``prune_before`` go (their buttons then say
        they have expired)."""
        async with self._db.write() as conn:
            if prune_before is not None:
                await conn.execute("DELETE FROM answer_cards WHERE created_at < ?", (prune_before,))
            await conn.execute(
                "INSERT OR REPLACE INTO answer_cards (card_id, kind, platform, channel_id, campaign, "
                "user_id, lens, question, answer, sources, created_at, question_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    card.card_id,
                    card.kind,
                    card.platform,
                    card.channel_id,
                    card.campaign,
                    card.user_id,
                    json.dumps(sorted(card.lens)),
                    card.question,
                    card.answer,
                    json.dumps([list(s) for s in card.sources]),
                    card.created_at,
                    card.question_id,
                ),
            )

    async def get(self, card_id: str) -> CardRow | None:
        row = await self._db.fetchone(
            "SELECT card_id, kind, platform, channel_id, campaign, user_id, lens, question, "
            "answer, sources, created_at, question_id FROM answer_cards WHERE card_id = ?",
            (card_id,),
        )
        if row is None:
            return None
        return CardRow(
            card_id=row["card_id"],
            kind=row["kind"],
            platform=row["platform"],
            channel_id=row["channel_id"],
            campaign=row["campaign"],
            user_id=row["user_id"],
            lens=frozenset(json.loads(row["lens"])),
            question=row["question"],
            answer=row["answer"],
            sources=_sources(row["sources"]),
            created_at=float(row["created_at"]),
            question_id=row["question_id"],
        )

    async def vote(
        self, card: CardRow, user_id: str, vote: int, *, reason: str | None, at: float
    ) -> None:
        """Record ``user_id``'s vote on ``card`` (one per member; a later one replaces it).
        ``reason`` ``None`` keeps the reason already given with the same vote."""
        async with self._db.write() as conn:
            async with conn.execute(
                "SELECT vote, reason FROM answer_feedback WHERE card_id = ? AND user_id = ?",
                (card.card_id, user_id),
            ) as cur:
                old = await cur.fetchone()
            kept = str(old["reason"]) if old is not None and int(old["vote"]) == vote else ""
            await conn.execute(
                "INSERT OR REPLACE INTO answer_feedback (card_id, user_id, campaign, vote, reason, "
                "question, answer, sources, lens, created_at, question_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    card.card_id,
                    user_id,
                    card.campaign,
                    vote,
                    kept if reason is None else reason,
                    card.question,
                    card.answer,
                    json.dumps([list(s) for s in card.sources]),
                    json.dumps(sorted(card.lens)),
                    at,
                    card.question_id,
                ),
            )

    async def thumbs_down(self, campaign: str, question_ids: Sequence[int]) -> dict[int, int]:
        """How many 👎 the answer to each of ``question_ids`` got (the question log's
        :class:`~liminalis.questions.FeedbackReader`); an id left out got none."""
        ids = sorted({int(q) for q in question_ids})
        out: dict[int, int] = {}
        for i in range(0, len(ids), 500):  # SQLite's bound-parameter limit, with room
            part = ids[i : i + 500]
            marks = ", ".join("?" * len(part))
            for row in await self._db.fetchall(
                "SELECT question_id, COUNT(*) AS n FROM answer_feedback WHERE campaign = ? "
                f"AND vote < 0 AND question_id IN ({marks}) GROUP BY question_id",
                (campaign, *part),
            ):
                out[int(row["question_id"])] = int(row["n"])
        return out

    async def feedback(self, campaign: str) -> list[FeedbackRow]:
        """The campaign's feedback, oldest first."""
        rows = await self._db.fetchall(
            "SELECT card_id, user_id, campaign, vote, reason, question, answer, sources, lens, "
            "created_at FROM answer_feedback WHERE campaign = ? ORDER BY created_at, card_id",
            (campaign,),
        )
        return [
            FeedbackRow(
                card_id=r["card_id"],
                user_id=r["user_id"],
                campaign=r["campaign"],
                vote=int(r["vote"]),
                reason=r["reason"],
                question=r["question"],
                answer=r["answer"],
                sources=_sources(r["sources"]),
                lens=frozenset(json.loads(r["lens"])),
                created_at=float(r["created_at"]),
            )
            for r in rows
        ]

    async def dm_choice(self, platform: str, user_id: str) -> str | None:
        """The campaign ``user_id`` picked for their direct messages, if any."""
        row = await self._db.fetchone(
            "SELECT campaign FROM dm_choices WHERE platform = ? AND user_id = ?",
            (platform, user_id),
        )
        return str(row["campaign"]) if row else None

    async def set_dm_choice(self, platform: str, user_id: str, campaign: str) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO dm_choices (platform, user_id, campaign) VALUES (?, ?, ?)",
            (platform, user_id, campaign),
        )
