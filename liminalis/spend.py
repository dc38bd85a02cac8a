"""The daily model-token gate: a cap on what the language model may spend per UTC day.

A public bot's model spend grows with its busiest channel; the host sets a ceiling
(``LIMINALIS_DAILY_TOKEN_BUDGET``) and, once a day's tokens are spent, answers fall back to the
offline answerer (quoted passages with sources) until midnight UTC — the bot keeps answering,
it only stops paying. Every token the API reports counts: input, output, and cache writes and
reads. Recorded in SQLite, so a restart does not reset the day.

A call books its estimated cost before it is made (:meth:`DailyTokenGate.reserve`: the prompt
plus the most it may write) and settles to what the API reported after (:meth:`settle`). The
call that crosses the line completes; the next does not — and answers asked at once see each
other's bookings, so a busy minute cannot spend the limit many times over.
"""

from __future__ import annotations

from liminalis.ports import Clock, Usage
from liminalis.store.sqlite import Database

__all__ = ["DailyTokenGate", "tokens_of"]


def tokens_of(usage: Usage) -> int:
    return max(
        0,
        usage.input_tokens
        + usage.output_tokens
        + usage.cache_creation_input_tokens
        + usage.cache_read_input_tokens,
    )


class DailyTokenGate:
    """``limit`` model tokens per UTC day across every campaign of the service."""

    def __init__(self, db: Database, limit: int, *, clock: Clock) -> None:
        if limit <= 0:
            raise ValueError("the daily token limit must be positive")
        self.db = db
        self.limit = limit
        self.clock = clock

    def _day(self) -> str:
        return self.clock.now().strftime("%Y-%m-%d")

    async def spent_today(self, day: str | None = None) -> int:
        return await self.db.usage.spent(day or self._day())

    async def allows(self) -> bool:
        return await self.spent_today() < self.limit

    async def charge(self, usage: Usage) -> None:
        await self._add(tokens_of(usage))

    async def reserve(self, estimate: int) -> bool:
        """Book ``estimate`` tokens for a call about to be made, if today's spend (bookings
        included) is under the limit; False, booking nothing, when it is not."""
        return await self.db.usage.reserve(self._day(), max(0, estimate), limit=self.limit)

    async def settle(self, estimate: int, usage: Usage) -> None:
        """Replace a booking of ``estimate`` by what the call cost (nothing, when it failed)."""
        await self._add(tokens_of(usage) - max(0, estimate))

    async def _add(self, n: int) -> None:
        if n:
            await self.db.usage.add(self._day(), n)
