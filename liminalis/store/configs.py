"""The last good ``campaign.toml`` of each campaign (migration 14): the text that serves while
the file on disk is missing, broken or drops a wall no GM confirmed."""

from __future__ import annotations

from liminalis.store._base import Repository

__all__ = ["ConfigRepository"]


class ConfigRepository(Repository):
    async def get(self, campaign: str) -> str | None:
        """The text last applied for ``campaign``; ``None`` when none was ever kept."""
        row = await self._db.fetchone(
            "SELECT text FROM campaign_configs WHERE campaign = ?", (campaign,)
        )
        return str(row["text"]) if row else None

    async def set(self, campaign: str, text: str, *, at: float) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO campaign_configs (campaign, text, saved_at) VALUES (?, ?, ?)",
            (campaign, text, at),
        )
