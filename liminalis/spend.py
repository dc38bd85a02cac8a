"""The daily model-token gate: a cap on what the language model may spend per UTC day.

A public bot's model spend grows with its busiest channel; the host sets a ceiling
(``LIMINALIS_DAILY_TOKEN_BUDGET``) and, once a day's tokens are spent, answers fall back to the
offline answerer (quoted passages with sources) until midnight UTC — the bot keeps answering,
it only stops paying. Every token the API reports counts: input, output, and cache writes and
reads. Recorded in SQLite, so a restart does not reset the day. The gate is checked before a
call and charged after it, so the call that crosses the line completes; the next one does not.
"""

from __future__ import annotations

from liminalis.ports import Clock, Usage
from liminalis.store.sqlite import Database

__all__ = ["DailyTokenGate", "tokens_of"]


def tokens_of(usage: Usage) -> int:
    return max(0, usage.input_tokens + usage.output_tokens + usage.cache_creation_input_tokens
               + usage.cache_read_input_tokens)


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

    async def spent_today(self) -> int:
        row = await self.db.fetchone("SELECT tokens FROM token_usage WHERE day = ?", (self._day(),))
        return int(row["tokens"]) if row else 0

    async def allows(self) -> bool:
        return await self.spent_today() < self.limit

    async def charge(self, usage: Usage) -> None:
        n = tokens_of(usage)
        if n:
            await self.db.execute(
                "INSERT INTO token_usage VALUES (?, ?) ON CONFLICT(day) DO UPDATE SET tokens = tokens + excluded.tokens",
                (self._day(), n),
            )
