"""Model tokens settled per UTC day, for the daily token gate. Calls in flight are booked in
``model_bookings`` (:mod:`liminalis.store.spend`), which adds them to the day's spend."""

from __future__ import annotations

from liminalis.store._base import Repository

__all__ = ["TokenUsageRepository"]

# A settlement may be negative; the day's total never goes below zero.
_ADD = (
    "INSERT INTO token_usage (day, tokens) VALUES (?, MAX(0, ?)) "
    "ON CONFLICT(day) DO UPDATE SET tokens = MAX(0, tokens + ?)"
)


class TokenUsageRepository(Repository):
    async def spent(self, day: str) -> int:
        row = await self._db.fetchone("SELECT tokens FROM token_usage WHERE day = ?", (day,))
        return int(row["tokens"]) if row else 0

    async def add(self, day: str, n: int) -> None:
        await self._db.execute(_ADD, (day, n, n))
