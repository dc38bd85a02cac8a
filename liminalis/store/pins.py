"""Pins: documents always loaded into a campaign's (or one chat's) context."""

from __future__ import annotations

from collections.abc import Sequence

from liminalis.store._base import Repository

__all__ = ["PinRepository"]


class PinRepository(Repository):
    async def doc_ids(self, campaign: str, scopes: Sequence[str]) -> list[str]:
        """Pinned doc ids in any of ``scopes``, oldest pin first."""
        marks = ",".join("?" * len(scopes))
        rows = await self._db.fetchall(
            f"SELECT doc_id FROM pins WHERE campaign = ? AND scope IN ({marks}) ORDER BY created_at",
            (campaign, *scopes),
        )
        return [r["doc_id"] for r in rows]

    async def add(self, campaign: str, scope: str, doc_id: str, *, at: float) -> None:
        await self._db.execute(
            "INSERT OR IGNORE INTO pins (campaign, scope, doc_id, created_at) VALUES (?, ?, ?, ?)",
            (campaign, scope, doc_id, at),
        )

    async def remove(self, campaign: str, scope: str, doc_id: str) -> bool:
        """Whether there was such a pin."""
        return bool(
            await self._db.execute(
                "DELETE FROM pins WHERE campaign = ? AND scope = ? AND doc_id = ?",
                (campaign, scope, doc_id),
            )
        )
