"""Who added each GM listed by id in a campaign's ``campaign.toml`` from chat (migration 14):
what removing a GM takes with them, and what ``/campaign status`` names."""

from __future__ import annotations

from liminalis.store._base import Repository
from liminalis.store.rows import GrantRow

__all__ = ["GrantRepository"]


class GrantRepository(Repository):
    async def add(
        self, campaign: str, platform: str, kind: str, ref: str, *, added_by: str
    ) -> None:
        """Record that ``added_by`` listed ``ref`` (replacing an older record of it)."""
        await self._db.execute(
            "INSERT OR REPLACE INTO gm_grants (campaign, platform, kind, ref, added_by) "
            "VALUES (?, ?, ?, ?, ?)",
            (campaign, platform, kind, ref, added_by),
        )

    async def remove(self, campaign: str, platform: str, kind: str, ref: str) -> None:
        await self._db.execute(
            "DELETE FROM gm_grants WHERE campaign = ? AND platform = ? AND kind = ? AND ref = ?",
            (campaign, platform, kind, ref),
        )

    async def of_campaign(self, campaign: str) -> list[GrantRow]:
        rows = await self._db.fetchall(
            "SELECT campaign, platform, kind, ref, added_by FROM gm_grants WHERE campaign = ? "
            "ORDER BY platform, kind, ref",
            (campaign,),
        )
        return [
            GrantRow(
                campaign=str(r["campaign"]),
                platform=str(r["platform"]),
                kind=str(r["kind"]),
                ref=str(r["ref"]),
                added_by=str(r["added_by"]),
            )
            for r in rows
        ]
