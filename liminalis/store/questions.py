"""The question log: one row per question answered (the GM's view of the table)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from liminalis.store._base import Repository
from liminalis.store.rows import QuestionRow

__all__ = ["QuestionLogRepository"]


class QuestionLogRepository(Repository):
    async def add(
        self,
        campaign: str,
        *,
        asked_at: float,
        chat: str,
        lens: frozenset[str],
        question: str,
        found: bool,
        cited: Sequence[str],
        keep_after: float | None = None,
    ) -> int:
        """Log one question; returns its id. Rows of ``campaign`` asked before ``keep_after`` go
        in the same write (the log keeps a window, not a history)."""
        async with self._db.write() as conn:
            if keep_after is not None:
                await conn.execute(
                    "DELETE FROM question_log WHERE campaign = ? AND asked_at < ?",
                    (campaign, keep_after),
                )
            async with conn.execute(
                "INSERT INTO question_log (campaign, asked_at, chat, lens, question, found, cited) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    campaign,
                    asked_at,
                    chat,
                    json.dumps(sorted(lens)),
                    question,
                    int(found),
                    json.dumps(list(cited)),
                ),
            ) as cur:
                return int(cur.lastrowid or 0)

    async def since(self, campaign: str, after: float) -> list[QuestionRow]:
        """The questions of ``campaign`` asked at or after ``after``, oldest first."""
        rows = await self._db.fetchall(
            "SELECT id, campaign, asked_at, chat, lens, question, found, cited FROM question_log "
            "WHERE campaign = ? AND asked_at >= ? ORDER BY asked_at, id",
            (campaign, after),
        )
        return [
            QuestionRow(
                id=int(r["id"]),
                campaign=str(r["campaign"]),
                asked_at=float(r["asked_at"]),
                chat=str(r["chat"]),
                lens=frozenset(json.loads(r["lens"] or "[]")),
                question=str(r["question"]),
                found=bool(r["found"]),
                cited=tuple(json.loads(r["cited"] or "[]")),
            )
            for r in rows
        ]
