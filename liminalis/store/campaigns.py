"""Registered campaigns: their folder, their index profile and their generation."""

from __future__ import annotations

from liminalis.store._base import Repository
from liminalis.store.rows import CampaignRow

__all__ = ["CampaignRepository"]


class CampaignRepository(Repository):
    async def upsert(self, slug: str, root: str) -> None:
        """Register ``slug`` at ``root`` (or move it there)."""
        await self._db.execute(
            "INSERT INTO campaigns (slug, root) VALUES (?, ?) ON CONFLICT(slug) DO UPDATE SET root=excluded.root",
            (slug, root),
        )

    async def get(self, slug: str) -> CampaignRow | None:
        row = await self._db.fetchone(
            "SELECT slug, root, model_id, generation, store_key, rolled_back_from FROM campaigns "
            "WHERE slug = ?",
            (slug,),
        )
        if row is None:
            return None
        return CampaignRow(
            slug=row["slug"],
            root=row["root"],
            model_id=row["model_id"],
            generation=int(row["generation"]),
            store_key=row["store_key"] or "",
            rolled_back_from=row["rolled_back_from"] or "",
        )

    async def slugs(self) -> list[str]:
        return [
            str(r["slug"])
            for r in await self._db.fetchall("SELECT slug FROM campaigns ORDER BY slug")
        ]

    async def set_model(self, slug: str, model_id: str) -> None:
        await self._db.execute("UPDATE campaigns SET model_id = ? WHERE slug = ?", (model_id, slug))

    async def generation(self, slug: str) -> int:
        row = await self._db.fetchone("SELECT generation FROM campaigns WHERE slug = ?", (slug,))
        return int(row["generation"]) if row else 0
