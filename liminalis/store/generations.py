"""Vector generations of a campaign and the per-document checkpoints of the one being built."""

from __future__ import annotations

from dataclasses import dataclass

import aiosqlite

from liminalis.store._base import Repository

__all__ = ["GenerationRepository", "GenerationRow", "Checkpoint"]


@dataclass(frozen=True, slots=True)
class GenerationRow:
    """One collection of a campaign's vectors, built under ``profile``.

    ``state``: ``building`` (a re-index writes it), ``serving`` (questions read it) or
    ``previous`` (served before the last publish; kept for a rollback until its grace period
    ends, counted from ``retired_at``)."""

    campaign: str
    profile: str
    store_key: str
    model_id: str
    dim: int
    state: str
    created_at: float
    published_at: float | None
    retired_at: float | None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A document a build has written (``done``) or could not (``failed``, with ``reason``), at
    the content hash it had then: a document edited since is written again."""

    content_hash: str
    state: str
    reason: str


_COLUMNS = (
    "campaign, profile, store_key, model_id, dim, state, created_at, published_at, retired_at"
)


class GenerationRepository(Repository):
    async def record(
        self,
        campaign: str,
        profile: str,
        *,
        store_key: str,
        model_id: str,
        dim: int,
        state: str,
        at: float,
    ) -> None:
        """Note a generation, unless one of ``profile`` is noted already (a resumed build keeps
        its row). A build of a ``previous`` generation's profile (after a rollback) takes that
        row over as ``building``: a collection being rewritten is no rollback target, and its
        grace period must not drop it under the build."""
        await self._db.execute(
            f"INSERT INTO vector_generations ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,NULL,NULL) "
            "ON CONFLICT (campaign, profile) DO UPDATE SET state = 'building', retired_at = NULL "
            "WHERE vector_generations.state = 'previous' AND excluded.state = 'building'",
            (campaign, profile, store_key, model_id, dim, state, at),
        )

    async def all(self, campaign: str) -> list[GenerationRow]:
        rows = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM vector_generations WHERE campaign = ? ORDER BY created_at",
            (campaign,),
        )
        return [
            GenerationRow(
                campaign=r["campaign"],
                profile=r["profile"],
                store_key=r["store_key"],
                model_id=r["model_id"],
                dim=int(r["dim"]),
                state=r["state"],
                created_at=float(r["created_at"]),
                published_at=r["published_at"],
                retired_at=r["retired_at"],
            )
            for r in rows
        ]

    async def get(self, campaign: str, profile: str) -> GenerationRow | None:
        return next((g for g in await self.all(campaign) if g.profile == profile), None)

    async def switch(
        self, campaign: str, profile: str, *, at: float, unless_held: bool = False
    ) -> bool:
        """Serve ``campaign`` from its generation ``profile``, in one transaction: the serving
        one becomes ``previous`` (retired ``at``), the campaign row names the new collection and
        its generation moves (every process rebuilds its snapshot and reads the new one), and the
        build's checkpoints go. ``unless_held``: an automatic publish, refused (``False``, nothing
        changed) while a rollback holds ``profile`` back; the check is in the same transaction,
        so a rollback by another process in between is not undone."""
        async with self._db.write() as conn:
            if unless_held:
                async with conn.execute(
                    "SELECT rolled_back_from FROM campaigns WHERE slug = ?", (campaign,)
                ) as cur:
                    row = await cur.fetchone()
                if row is not None and row[0] == profile:
                    return False
            await self._switch(conn, campaign, profile, at=at)
        return True

    async def roll_back(self, campaign: str, profile: str, *, at: float) -> None:
        """Serve ``campaign`` from its generation ``profile`` again (as :meth:`switch`) and hold
        the profile that served until now back from the automatic upgrade."""
        async with self._db.write() as conn:
            await conn.execute(
                "UPDATE campaigns SET rolled_back_from = COALESCE(model_id, '') WHERE slug = ?",
                (campaign,),
            )
            await self._switch(conn, campaign, profile, at=at)

    async def release(self, campaign: str) -> bool:
        """Lift a rollback's hold on ``campaign`` (a host asked for a re-index); ``True`` when
        one was held."""
        changed = await self._db.execute(
            "UPDATE campaigns SET rolled_back_from = '' WHERE slug = ? AND rolled_back_from != ''",
            (campaign,),
        )
        return changed > 0

    @staticmethod
    async def _switch(
        conn: aiosqlite.Connection, campaign: str, profile: str, *, at: float
    ) -> None:
        await conn.execute(
            "UPDATE vector_generations SET state = 'previous', retired_at = ? "
            "WHERE campaign = ? AND state = 'serving' AND profile != ?",
            (at, campaign, profile),
        )
        await conn.execute(
            "UPDATE vector_generations SET state = 'serving', published_at = ?, "
            "retired_at = NULL WHERE campaign = ? AND profile = ?",
            (at, campaign, profile),
        )
        await conn.execute(
            "UPDATE campaigns SET model_id = ?, generation = generation + 1, store_key = "
            "(SELECT store_key FROM vector_generations WHERE campaign = ? AND profile = ?) "
            "WHERE slug = ?",
            (profile, campaign, profile, campaign),
        )
        await conn.execute(
            "DELETE FROM reindex_docs WHERE campaign = ? AND profile = ?", (campaign, profile)
        )

    async def forget(self, campaign: str, profile: str) -> None:
        """Drop a generation's row and checkpoints (its collection was dropped)."""
        async with self._db.write() as conn:
            await conn.execute(
                "DELETE FROM vector_generations WHERE campaign = ? AND profile = ?",
                (campaign, profile),
            )
            await conn.execute(
                "DELETE FROM reindex_docs WHERE campaign = ? AND profile = ?", (campaign, profile)
            )

    async def checkpoints(self, campaign: str, profile: str) -> dict[str, Checkpoint]:
        rows = await self._db.fetchall(
            "SELECT doc_id, content_hash, state, reason FROM reindex_docs "
            "WHERE campaign = ? AND profile = ?",
            (campaign, profile),
        )
        return {r["doc_id"]: Checkpoint(r["content_hash"], r["state"], r["reason"]) for r in rows}

    async def checkpoint(
        self,
        campaign: str,
        profile: str,
        doc_id: str,
        *,
        content_hash: str,
        state: str,
        reason: str = "",
    ) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO reindex_docs "
            "(campaign, profile, doc_id, content_hash, state, reason) VALUES (?,?,?,?,?,?)",
            (campaign, profile, doc_id, content_hash, state, reason),
        )
