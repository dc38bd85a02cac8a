"""The router's ledger: model calls, the bookings of calls in flight, credits and pauses.

``db.spend`` (:class:`SpendRepository`) and ``db.credits`` (:class:`CreditRepository`). The
rules that decide whether a call may be made live in :mod:`liminalis.routing`; here is only
what must be read and written together so that calls made at once see each other.

A day's spend is what was settled plus the live bookings::

    spent(day, now) = token_usage[day] + Σ { tokens(b) : b.day = day, b.expires_at > now }

A booking past its expiry no longer counts: a process killed mid-call cannot hold the budget
beyond it, and its owner's next start deletes what it left at once (:meth:`clear_run`).

A campaign's available background credits are its balance less its live background bookings::

    available(c, now) = balance(c) − Σ { tokens(b) : b.campaign = c, ¬b.foreground,
                                          b.expires_at > now }

``balance`` starts at ``default`` for a campaign never topped up, and may go below zero: a call
admitted while credits remained is charged in full when it settles, and the overdraft comes off
the next top-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from liminalis.ports import Usage
from liminalis.store._base import Repository

__all__ = ["CallRecord", "CreditRepository", "Ledger", "SpendLine", "SpendRepository"]

_ADD_DAY = (
    "INSERT INTO token_usage (day, tokens) VALUES (?, MAX(0, ?)) "
    "ON CONFLICT(day) DO UPDATE SET tokens = MAX(0, tokens + ?)"
)
_ADD_CREDITS = (
    "INSERT INTO campaign_credits (campaign, balance) VALUES (?, ? + ?) "
    "ON CONFLICT(campaign) DO UPDATE SET balance = balance + ?"
)


@dataclass(frozen=True, slots=True)
class Ledger:
    """What a booking is decided on, read under the writer lock."""

    spent_today: int  # settled tokens of the day plus its live bookings
    credits: int  # the campaign's balance less its live background bookings


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One model call, as logged in ``model_calls``."""

    campaign: str
    role: str
    model: str
    usage: Usage
    foreground: bool
    at: float  # seconds since the epoch, from the injected clock
    day: str  # the UTC day the tokens count against
    pass_id: str | None = None
    node: str | None = None
    ok: bool = True


@dataclass(frozen=True, slots=True)
class SpendLine:
    """The calls of one (role, pass, node) and the tokens they spent."""

    role: str
    pass_id: str | None
    node: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    cache_write: int
    cache_read: int

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_write + self.cache_read


class SpendRepository(Repository):
    """Bookings and the call log (``model_bookings``, ``model_calls``, ``token_usage``)."""

    async def spent(self, day: str, *, now: float) -> int:
        row = await self._db.fetchone(
            "SELECT COALESCE((SELECT tokens FROM token_usage WHERE day = ?), 0) + "
            "COALESCE((SELECT SUM(tokens) FROM model_bookings WHERE day = ? AND expires_at > ?), 0)"
            " AS spent",
            (day, day, now),
        )
        return int(row["spent"]) if row else 0

    async def _ledger(self, campaign: str, day: str, *, now: float, default: int) -> Ledger:
        row = await self._db.fetchone(
            "SELECT COALESCE((SELECT balance FROM campaign_credits WHERE campaign = ?), ?) - "
            "COALESCE((SELECT SUM(tokens) FROM model_bookings WHERE campaign = ? "
            "AND foreground = 0 AND expires_at > ?), 0) AS credits",
            (campaign, default, campaign, now),
        )
        credits = int(row["credits"]) if row else default
        return Ledger(spent_today=await self.spent(day, now=now), credits=credits)

    async def ledger(self, campaign: str, day: str, *, now: float, default: int) -> Ledger:
        """The ledger as it stands (read without booking)."""
        return await self._ledger(campaign, day, now=now, default=default)

    async def book(
        self,
        *,
        owner: str,
        run_id: str,
        campaign: str,
        day: str,
        tokens: int,
        foreground: bool,
        now: float,
        expires_at: float,
        default_credits: int,
        admit: Callable[[Ledger], None],
    ) -> int:
        """Book ``tokens`` for a call about to be made, if ``admit`` (which raises to refuse)
        accepts the ledger; returns the booking's id. Read and booking hold the writer lock
        together, so calls made at once each see the others' bookings."""
        async with self._db.write() as conn:
            admit(await self._ledger(campaign, day, now=now, default=default_credits))
            cur = await conn.execute(
                "INSERT INTO model_bookings "
                "(owner, run_id, campaign, day, tokens, foreground, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (owner, run_id, campaign, day, max(0, tokens), int(foreground), expires_at),
            )
            booking = int(cur.lastrowid or 0)
            await cur.close()
        return booking

    async def settle(
        self, booking: int | None, record: CallRecord, *, default_credits: int
    ) -> None:
        """Replace a booking (``None``: a call made unbooked) by what the call cost: the day's
        total and, for background work, the campaign's credits are charged, and the call is
        logged, in one transaction."""
        u = record.usage
        tokens = max(
            0,
            u.input_tokens
            + u.output_tokens
            + u.cache_creation_input_tokens
            + u.cache_read_input_tokens,
        )
        async with self._db.write() as conn:
            if booking is not None:
                await conn.execute("DELETE FROM model_bookings WHERE id = ?", (booking,))
            if tokens:
                await conn.execute(_ADD_DAY, (record.day, tokens, tokens))
                if not record.foreground:
                    await conn.execute(
                        _ADD_CREDITS, (record.campaign, default_credits, -tokens, -tokens)
                    )
            await conn.execute(
                "INSERT INTO model_calls (at, day, campaign, role, pass_id, node, model, "
                "input_tokens, output_tokens, cache_write, cache_read, foreground, ok) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.at,
                    record.day,
                    record.campaign,
                    record.role,
                    record.pass_id,
                    record.node,
                    record.model,
                    u.input_tokens,
                    u.output_tokens,
                    u.cache_creation_input_tokens,
                    u.cache_read_input_tokens,
                    int(record.foreground),
                    int(record.ok),
                ),
            )

    async def clear_run(self, owner: str, *, keep_run: str) -> int:
        """Delete the bookings ``owner`` left from runs other than ``keep_run`` (a process
        killed mid-call); returns how many."""
        return await self._db.execute(
            "DELETE FROM model_bookings WHERE owner = ? AND run_id != ?", (owner, keep_run)
        )

    async def live_bookings(self, *, now: float) -> int:
        """How many bookings still count (unexpired)."""
        row = await self._db.fetchone(
            "SELECT COUNT(*) AS n FROM model_bookings WHERE expires_at > ?", (now,)
        )
        return int(row["n"]) if row else 0

    async def breakdown(self, campaign: str, *, since: float) -> list[SpendLine]:
        """The campaign's calls since ``since``, summed per (role, pass, node), costliest first."""
        rows = await self._db.fetchall(
            "SELECT role, pass_id, node, COUNT(*) AS calls, SUM(input_tokens) AS i, "
            "SUM(output_tokens) AS o, SUM(cache_write) AS w, SUM(cache_read) AS r "
            "FROM model_calls WHERE campaign = ? AND at >= ? "
            "GROUP BY role, pass_id, node ORDER BY (i + o + w + r) DESC, role, pass_id, node",
            (campaign, since),
        )
        return [
            SpendLine(
                role=str(r["role"]),
                pass_id=r["pass_id"],
                node=r["node"],
                calls=int(r["calls"]),
                input_tokens=int(r["i"]),
                output_tokens=int(r["o"]),
                cache_write=int(r["w"]),
                cache_read=int(r["r"]),
            )
            for r in rows
        ]


class CreditRepository(Repository):
    """Per-campaign background credits and pauses (``campaign_credits``, ``campaign_pauses``)."""

    async def balance(self, campaign: str, *, default: int) -> int:
        row = await self._db.fetchone(
            "SELECT balance FROM campaign_credits WHERE campaign = ?", (campaign,)
        )
        return int(row["balance"]) if row else default

    async def add(self, campaign: str, tokens: int, *, default: int) -> int:
        """Add ``tokens`` (a top-up; negative takes back) and return the new balance."""
        async with self._db.write() as conn:
            await conn.execute(_ADD_CREDITS, (campaign, default, tokens, tokens))
            async with conn.execute(
                "SELECT balance FROM campaign_credits WHERE campaign = ?", (campaign,)
            ) as cur:
                row = await cur.fetchone()
        return int(row[0]) if row else default + tokens

    async def pause(self, campaign: str, *, at: float) -> None:
        await self._db.execute(
            "INSERT OR IGNORE INTO campaign_pauses (campaign, since) VALUES (?, ?)", (campaign, at)
        )

    async def resume(self, campaign: str) -> bool:
        """Lift the pause; False when the campaign was not paused."""
        return (
            await self._db.execute("DELETE FROM campaign_pauses WHERE campaign = ?", (campaign,))
            > 0
        )

    async def paused(self, campaign: str) -> bool:
        row = await self._db.fetchone(
            "SELECT 1 FROM campaign_pauses WHERE campaign = ?", (campaign,)
        )
        return row is not None
