"""Context budgets set with ``/budget set``, per campaign or per chat."""

from __future__ import annotations

from liminalis.store._base import Repository

__all__ = ["BudgetRepository"]


class BudgetRepository(Repository):
    async def get(self, campaign: str, scope: str) -> int | None:
        row = await self._db.fetchone(
            "SELECT tokens FROM budgets WHERE campaign = ? AND scope = ?", (campaign, scope)
        )
        return int(row["tokens"]) if row else None

    async def set(self, campaign: str, scope: str, tokens: int) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO budgets (campaign, scope, tokens) VALUES (?, ?, ?)",
            (campaign, scope, tokens),
        )
