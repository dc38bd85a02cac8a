"""The daily model-token limit: a cap on what the language model may spend per UTC day.

A public bot's model spend grows with its busiest channel; the host sets a ceiling
(``LIMINALIS_DAILY_TOKEN_BUDGET``) and, once a day's tokens are spent, answers fall back to the
offline answerer (quoted passages with sources) until midnight UTC — the bot keeps answering,
it only stops paying. Every token the API reports counts: input, output, and cache writes and
reads. Recorded in SQLite, so a restart does not reset the day.

This is a *policy* of the one gate, :class:`liminalis.routing.Router`, not a gate of its own: the
router books every call (the prompt plus the most it may write) under the writer lock and asks
:meth:`DailyTokenGate.admits` whether the booking may be made, so calls made at once see each
other's bookings and a busy minute cannot spend the limit many times over. With ``S`` the day's
spend (settled plus live bookings), ``L`` the limit, ``e`` the call's estimate and ``s`` the
background share:

* a foreground call is admitted while ``S < L`` (the call that crosses the line completes, the
  next does not);
* a background call only while ``e ≤ s · (L − S)``: each background booking leaves at least
  ``(1 − s)`` of what remained, so a fan-out can never spend what a player's reply needs.
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
        """Today's settled tokens plus the live (unexpired) bookings of calls in flight."""
        return await self.db.spend.spent(day or self._day(), now=self.clock.now().timestamp())

    async def allows(self) -> bool:
        return await self.spent_today() < self.limit

    async def charge(self, usage: Usage) -> None:
        n = tokens_of(usage)
        if n:
            await self.db.usage.add(self._day(), n)

    def admits(self, spent: int, estimate: int, *, foreground: bool, share: float) -> bool:
        """Whether a call booking ``estimate`` may start with ``spent`` tokens of the day gone
        (the rule of the module docstring)."""
        if foreground:
            return spent < self.limit
        return max(0, estimate) <= share * (self.limit - spent)
