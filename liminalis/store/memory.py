"""Chat memory rows: each memory key's rolling state, its turns, and each campaign's forget epoch."""

from __future__ import annotations

import json
from collections.abc import Callable

import aiosqlite

from liminalis.store._base import Repository
from liminalis.store.rows import TurnRow

__all__ = ["ChatMemoryRepository"]


async def _epoch(conn: aiosqlite.Connection, campaign: str) -> int:
    async with conn.execute(
        "SELECT epoch FROM memory_forgets WHERE campaign = ?", (campaign,)
    ) as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


class ChatMemoryRepository(Repository):
    async def forget_epoch(self, campaign: str) -> int:
        """How many times ``campaign``'s memories were told to forget (see :meth:`forget`)."""
        row = await self._db.fetchone(
            "SELECT epoch FROM memory_forgets WHERE campaign = ?", (campaign,)
        )
        return int(row[0]) if row else 0

    async def state(self, key: str) -> str | None:
        """The memory's rolling state (JSON), if it has one."""
        row = await self._db.fetchone("SELECT state FROM chat_state WHERE chat_key = ?", (key,))
        return str(row["state"]) if row else None

    async def recent_turns(self, key: str, limit: int) -> list[TurnRow]:
        """The last ``limit`` turns, newest first."""
        rows = await self._db.fetchall(
            "SELECT role, content, lens FROM chat_turns WHERE chat_key = ? ORDER BY seq DESC LIMIT ?",
            (key, limit),
        )
        return [
            TurnRow(
                role=r["role"], content=r["content"], lens=frozenset(json.loads(r["lens"] or "[]"))
            )
            for r in rows
        ]

    async def keys(self, campaign: str) -> list[str]:
        rows = await self._db.fetchall(
            "SELECT chat_key FROM chat_state WHERE campaign = ?", (campaign,)
        )
        return [str(r[0]) for r in rows]

    async def forget(self, campaign: str, doomed: Callable[[str], bool]) -> list[str]:
        """Delete every memory of ``campaign`` whose key ``doomed`` picks, and move the campaign's
        forget epoch on; returns the keys forgotten.

        One write block, the epoch last: a memory loaded meanwhile either read the old epoch
        (and its answer is not recorded) or the new one, after its rows were gone."""
        async with self._db.write() as conn:
            async with conn.execute(
                "SELECT chat_key FROM chat_state WHERE campaign = ?", (campaign,)
            ) as cur:
                keys = [str(r[0]) for r in await cur.fetchall()]
            gone = [k for k in keys if doomed(k)]
            for key in gone:
                await conn.execute("DELETE FROM chat_turns WHERE chat_key = ?", (key,))
                await conn.execute("DELETE FROM chat_state WHERE chat_key = ?", (key,))
            await conn.execute(
                "INSERT INTO memory_forgets (campaign, epoch) VALUES (?, 1) "
                "ON CONFLICT(campaign) DO UPDATE SET epoch = epoch + 1",
                (campaign,),
            )
        return gone

    async def record(
        self,
        key: str,
        *,
        campaign: str,
        question: str,
        answer: str,
        lens: frozenset[str],
        state: str,
        epoch: int,
    ) -> bool:
        """Append one exchange and replace the rolling state, unless the campaign's forget epoch
        moved past ``epoch`` (then nothing is written and the result is False)."""
        lens_json = json.dumps(sorted(lens))
        async with self._db.write() as conn:
            if await _epoch(conn, campaign) != epoch:
                return False
            # The pair's numbers come from the table, in one statement: two questions answered at
            # once in one chat both loaded the same state, and numbering from it made the second
            # answer collide with the first and be lost. (Its rolling state is the last writer's.)
            await conn.execute(
                "INSERT INTO chat_turns (chat_key, seq, role, content, lens) "
                "WITH base AS (SELECT COALESCE(MAX(seq), -1) + 1 AS s FROM chat_turns WHERE chat_key = ?) "
                "SELECT ?, s, 'user', ?, ? FROM base UNION ALL SELECT ?, s + 1, 'assistant', ?, ? FROM base",
                (key, key, question, lens_json, key, answer, lens_json),
            )
            await conn.execute(
                "INSERT INTO chat_state (chat_key, campaign, state) VALUES (?, ?, ?) "
                "ON CONFLICT(chat_key) DO UPDATE SET state = excluded.state",
                (key, campaign, state),
            )
        return True
