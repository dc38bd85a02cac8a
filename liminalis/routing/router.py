"""The router: the one place a model call is made, and the one gate it passes.

Every call names a role (:mod:`liminalis.routing.roles`), the campaign it is for, whether a
person is waiting on it (``foreground``) and, for the passes, the pass and node it serves. The
router picks the role's model, admits the call, books it, makes it, settles it and logs it.

Admission, in order:

1. **Pause.** Autonomous background work of a paused campaign is refused
   (:class:`~liminalis.errors.CampaignPaused`); foreground calls and background work a person
   asked for (``requested=True``) pass.
2. **A slot.** At most ``C`` calls run at once, of which at most
   ``B = max(1, min(C − 1, ⌊s · C⌋))`` are background (``s`` the background share). A freed
   slot goes to a waiting foreground call before any waiting background call. As ``B < C``, a
   foreground call finds a slot unless ``C`` foreground calls already run: a background fan-out
   queues behind its ``B`` slots and never starves a reply.
3. **A booking**, read and written under the store's writer lock, so calls made at once see
   each other: with ``S`` the day's spend (settled plus live bookings), ``L`` the daily limit,
   ``e`` the call's estimate, a foreground call needs ``S < L`` and a background call
   ``e ≤ s · (L − S)`` (:meth:`~liminalis.spend.DailyTokenGate.admits`), and a background call
   needs the campaign's available credits ``> 0`` (:mod:`liminalis.store.spend`). Refused:
   :class:`~liminalis.errors.BudgetSpent` or :class:`~liminalis.errors.CreditsExhausted`,
   nothing booked. A call admitted finishes even if credits run out meanwhile; its overdraft
   comes off the next top-up, and a top-up lets refused work be tried again.
4. **The call, then its settlement**: the booking is replaced by what the API reported (the day's
   total, and the campaign's credits for background work) and the call is logged in
   ``model_calls`` with its campaign, role, pass, node, model, tokens and time, in one
   transaction. A :class:`~liminalis.errors.StoreError` while settling is logged and the
   result returned: it is paid for, and its booking expires on its own. A stream that broke
   after text settles at what it used: the tokens the model error reports (``used``), or, cut
   off by the caller (a deadline), the booked prompt plus ``⌈characters sent / 4⌉``.

Bookings carry their owner (a stable name of the service) and run id, and expire
``booking_ttl_s`` after they are made (the injected clock): an expired booking no longer
counts, and :meth:`Router.start` deletes what the owner's previous run left, so a process killed
mid-answer does not hold the day's budget until midnight.

**Why this is the only gate.** A second gate around the same calls — a pass executor's own
concurrency limit or token reservation, say — deadlocks. Call X holds a reservation of gate A
and waits for capacity in gate B; call Y holds B's capacity and waits for A's. Each holds what
the other needs and gives nothing back until it runs: hold-and-wait with a circular wait, the
classic deadlock. Taking the gates in one fixed order does not save it: a pass holding A's slot
waits on B, while B's capacity is held by that pass's own fan-out children, queued on A. And two
budgets that each book an estimate count every call twice and refuse at half the limit. So a
slot and a booking are taken for exactly one model call and never held across another
acquisition; callers schedule their work, ask :meth:`Router.allow_background` as a hint, and let
the router decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from liminalis.errors import (
    BudgetSpent,
    CampaignPaused,
    CreditsExhausted,
    ModelUnavailable,
    StoreError,
)
from liminalis.ports import Clock, Completion, LanguageModel, Message, Usage
from liminalis.routing.report import SpendReport
from liminalis.routing.roles import ROLES, RoleTable
from liminalis.spend import DailyTokenGate
from liminalis.store.spend import CallRecord, Ledger
from liminalis.store.sqlite import Database

__all__ = ["Limits", "RoutedModel", "Router", "Streamed", "estimate_tokens", "spend_report"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Limits:
    """The router's numbers.

    Args:
        concurrency: ``C``, model calls in flight at once, every role together.
        background_share: ``s``, the share of the slots and of the day's remaining tokens
            background work may take (``0 < s < 1``).
        booking_ttl_s: how long a booking counts if its call never settles (longer than any
            call: the client's timeout times its attempts).
        default_credits: the background credits of a campaign never topped up.
    """

    concurrency: int = 8
    background_share: float = 0.5
    booking_ttl_s: float = 900.0
    default_credits: int = 0

    def __post_init__(self) -> None:
        if self.concurrency < 2:
            raise ValueError("the router needs at least 2 concurrent calls (one kept for replies)")
        if not 0 < self.background_share < 1:
            raise ValueError("the background share must be between 0 and 1")
        if self.booking_ttl_s <= 0:
            raise ValueError("bookings must expire after a positive time")

    @property
    def background_slots(self) -> int:
        """``B = max(1, min(C − 1, ⌊s · C⌋))``."""
        return max(1, min(self.concurrency - 1, int(self.background_share * self.concurrency)))


class _Slots:
    """``total`` slots, at most ``background`` of them for background calls; waiting foreground
    calls are served first, each class in arrival order."""

    def __init__(self, total: int, background: int) -> None:
        self.total = total
        self.background = background
        self.foreground_active = 0
        self.background_active = 0
        self._waiting: dict[bool, deque[asyncio.Future[None]]] = {True: deque(), False: deque()}

    def _free(self, foreground: bool) -> bool:
        if self.foreground_active + self.background_active >= self.total:
            return False
        return foreground or self.background_active < self.background

    def _take(self, foreground: bool) -> None:
        if foreground:
            self.foreground_active += 1
        else:
            self.background_active += 1

    def waiting(self, foreground: bool) -> int:
        return sum(not f.done() for f in self._waiting[foreground])

    async def acquire(self, foreground: bool) -> None:
        queue = self._waiting[foreground]
        ahead = bool(queue) or (not foreground and bool(self._waiting[True]))
        if not ahead and self._free(foreground):
            self._take(foreground)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(foreground)  # granted as it was cancelled: hand the slot on
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(fut)
                self._wake()  # a cancelled foreground waiter may have held background back
            raise

    def release(self, foreground: bool) -> None:
        if foreground:
            self.foreground_active -= 1
        else:
            self.background_active -= 1
        self._wake()

    def _wake(self) -> None:
        for foreground in (True, False):
            queue = self._waiting[foreground]
            while queue and self._free(foreground):
                fut = queue.popleft()
                if fut.done():
                    continue
                self._take(foreground)
                fut.set_result(None)
            if self._waiting[True]:
                return  # background waits behind every waiting foreground call


@dataclass
class _Started:
    done: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True, slots=True)
class _Call:
    """One call's request and the facts it is admitted, booked and logged by."""

    role: str
    campaign: str
    foreground: bool
    requested: bool
    pass_id: str | None
    node: str | None
    estimate: int
    system: Sequence[str]
    messages: Sequence[Message]
    cache_upto: int
    max_tokens: int


@dataclass
class _Ticket:
    """What a call reports back to its settlement."""

    model: str
    usage: Usage = field(default_factory=Usage)
    ok: bool = False

    def done(self, model: str, usage: Usage) -> None:
        self.model, self.usage, self.ok = model or self.model, usage, True


def estimate_tokens(system: Sequence[str], messages: Sequence[Message], max_tokens: int) -> int:
    """A call's booking when the caller gives none: ``⌈chars / 4⌉ + max_tokens`` (the Messages
    API's rule of thumb of about four characters a token, plus the most it may write)."""
    chars = sum(len(s) for s in system) + sum(len(m.content) for m in messages)
    return -(-chars // 4) + max(0, max_tokens)


def _day(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d")


class Router:
    """Owns every model call: picks the role's model, admits, books, calls, settles, logs.

    Args:
        model: the ``LanguageModel`` the calls go to.
        db: the store (bookings, call log, credits, pauses).
        clock: the time of bookings, expiries and the log (frozen in tests).
        roles: the model of each role; ``None`` leaves the choice to ``model`` (its own table).
        daily: the daily token limit, a policy of this gate; ``None``: no daily limit.
        limits: concurrency, background share, booking expiry, default credits.
        owner: a stable name of this service: its next start settles what this run left.
        run_id: this run's id (default: a random one).
    """

    def __init__(
        self,
        model: LanguageModel,
        *,
        db: Database,
        clock: Clock,
        roles: RoleTable | None = None,
        daily: DailyTokenGate | None = None,
        limits: Limits = Limits(),
        owner: str = "liminalis",
        run_id: str | None = None,
    ) -> None:
        self.model = model
        self.db = db
        self.clock = clock
        self.roles = roles
        self.daily = daily
        self.limits = limits
        self.owner = owner
        self.run_id = run_id or uuid.uuid4().hex
        self._reply_override: str | None = None
        self._slots = _Slots(limits.concurrency, limits.background_slots)
        self._started = _Started()

    def __repr__(self) -> str:
        return f"Router(owner={self.owner!r}, run_id={self.run_id!r}, limits={self.limits!r})"

    # -- configuration ------------------------------------------------------------------------

    def for_chat(self, override: str | None) -> Router:
        """This router with the ``reply`` role on ``override`` (a chat's own model), sharing its
        slots and ledger; every other role keeps its model. ``None`` or empty: this router."""
        if not override:
            return self
        view = copy.copy(self)
        view._reply_override = override
        if self.roles is not None:
            view.roles = self.roles.with_reply(override)
        return view

    def _chosen(self, role: str) -> str | None:
        """The model name sent with the call: ``None`` leaves it to the model's own table."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; the roles are {', '.join(ROLES)}")
        if role == "reply" and self._reply_override:
            return self._reply_override
        return self.roles.model_for(role) if self.roles is not None else None

    def model_for(self, role: str) -> str:
        """The model a call of ``role`` goes to."""
        chosen = self._chosen(role)
        if chosen:
            return chosen
        pick = getattr(self.model, "model_for", None)
        return str(pick(role)) if callable(pick) else self.model.name

    # -- lifetime ------------------------------------------------------------------------------

    async def start(self) -> int:
        """Settle (delete) the bookings this owner's previous run left; once per router, also
        done by the first call. Returns how many there were."""
        async with self._started.lock:
            if self._started.done:
                return 0
            n = await self.db.spend.clear_run(self.owner, keep_run=self.run_id)
            self._started.done = True
        if n:
            _log.warning(
                "settled %d model-call booking(s) a previous run of %s left", n, self.owner
            )
        return n

    # -- calls ---------------------------------------------------------------------------------

    async def complete(
        self,
        role: str,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        campaign: str,
        foreground: bool,
        pass_id: str | None = None,
        node: str | None = None,
        requested: bool = False,
        cache_upto: int = 0,
        max_tokens: int = 800,
        estimate: int | None = None,
    ) -> Completion:
        """One call of ``role`` for ``campaign``, through the gate (module docstring).

        Args:
            foreground: a person is waiting on it (a reply); else background work.
            requested: background work a person asked for (passes a pause).
            estimate: the tokens to book; default :func:`estimate_tokens`.

        Raises:
            CampaignPaused, BudgetSpent, CreditsExhausted: refused before the call.
            ModelUnavailable, ConfigError: the model's own failures, after settling to nothing.
            ValueError: an unknown role.
        """
        call = self._spec(
            role,
            system=system,
            messages=messages,
            campaign=campaign,
            foreground=foreground,
            pass_id=pass_id,
            node=node,
            requested=requested,
            cache_upto=cache_upto,
            max_tokens=max_tokens,
            estimate=estimate,
        )
        async with self._admitted(call) as ticket:
            done = await self.model.complete(
                system=system,
                messages=messages,
                cache_upto=cache_upto,
                max_tokens=max_tokens,
                role=role,
                model=self._chosen(role),
            )
            ticket.done(done.model, done.usage)
        return done

    def stream(
        self,
        role: str,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        campaign: str,
        foreground: bool,
        pass_id: str | None = None,
        node: str | None = None,
        requested: bool = False,
        cache_upto: int = 0,
        max_tokens: int = 800,
        estimate: int | None = None,
    ) -> Streamed:
        """As :meth:`complete`, yielding text deltas; ``usage`` and ``model`` of the returned
        :class:`Streamed` are set once it is exhausted."""
        return Streamed(
            self,
            self._spec(
                role,
                system=system,
                messages=messages,
                campaign=campaign,
                foreground=foreground,
                pass_id=pass_id,
                node=node,
                requested=requested,
                cache_upto=cache_upto,
                max_tokens=max_tokens,
                estimate=estimate,
            ),
        )

    def _spec(
        self,
        role: str,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        campaign: str,
        foreground: bool,
        pass_id: str | None,
        node: str | None,
        requested: bool,
        cache_upto: int,
        max_tokens: int,
        estimate: int | None,
    ) -> _Call:
        self._chosen(role)  # an unknown role fails here, before anything is booked
        return _Call(
            role=role,
            campaign=campaign,
            foreground=foreground,
            requested=requested,
            pass_id=pass_id,
            node=node,
            estimate=estimate
            if estimate is not None
            else estimate_tokens(system, messages, max_tokens),
            system=system,
            messages=messages,
            cache_upto=cache_upto,
            max_tokens=max_tokens,
        )

    @contextlib.asynccontextmanager
    async def _admitted(self, call: _Call) -> AsyncIterator[_Ticket]:
        """Pause check, slot, booking; settles and frees the slot when the block ends."""
        await self.start()
        if not call.foreground and not call.requested and await self.is_paused(call.campaign):
            raise CampaignPaused(
                f"campaign {call.campaign} is paused: {call.role} call refused",
                campaign=call.campaign,
                role=call.role,
            )
        await self._slots.acquire(call.foreground)
        try:
            now = self.clock.now()
            booking: int | None = None
            try:
                booking = await self.db.spend.book(
                    owner=self.owner,
                    run_id=self.run_id,
                    campaign=call.campaign,
                    day=_day(now),
                    tokens=call.estimate,
                    foreground=call.foreground,
                    now=now.timestamp(),
                    expires_at=now.timestamp() + self.limits.booking_ttl_s,
                    default_credits=self.limits.default_credits,
                    admit=lambda ledger: self._admit(ledger, call),
                )
            except StoreError:
                # A ledger that cannot be written cannot enforce a limit: with one, or for
                # background work, the call is not made. A reply with no daily limit risks
                # nothing by going ahead unbooked, and the player gets the model's answer.
                if not call.foreground or self.daily is not None:
                    raise
                _log.exception("model call %s for %s made unbooked", call.role, call.campaign)
            ticket = _Ticket(model=self.model_for(call.role))
            try:
                yield ticket
            finally:
                await self._settle(booking, ticket, call)
        finally:
            self._slots.release(call.foreground)

    def _admit(self, ledger: Ledger, call: _Call) -> None:
        """The booking rule (module docstring); raises to refuse."""
        fg, role, campaign = call.foreground, call.role, call.campaign
        if self.daily is not None and not self.daily.admits(
            ledger.spent_today, call.estimate, foreground=fg, share=self.limits.background_share
        ):
            raise BudgetSpent(
                f"daily model-token budget: {ledger.spent_today:,} of {self.daily.limit:,} spent; "
                f"{'foreground' if fg else 'background'} {role} call of ~{call.estimate:,} refused",
                campaign=campaign,
                role=role,
            )
        if not fg and ledger.credits <= 0:
            raise CreditsExhausted(
                f"campaign {campaign} has {ledger.credits:,} background credits: {role} refused",
                campaign=campaign,
                role=role,
            )

    async def _settle(self, booking: int | None, ticket: _Ticket, call: _Call) -> None:
        now = self.clock.now()
        record = CallRecord(
            campaign=call.campaign,
            role=call.role,
            model=ticket.model,
            usage=ticket.usage,
            foreground=call.foreground,
            at=now.timestamp(),
            day=_day(now),
            pass_id=call.pass_id,
            node=call.node,
            ok=ticket.ok,
        )
        try:
            await self.db.spend.settle(booking, record, default_credits=self.limits.default_credits)
        except StoreError:
            # The call is made (and, if it answered, paid for): losing its result to a ledger
            # that cannot be written helps nobody. The booking expires on its own.
            _log.exception(
                "model call %s/%s for %s not settled; its booking expires in %.0fs",
                call.role,
                ticket.model,
                call.campaign,
                self.limits.booking_ttl_s,
            )

    # -- credits, pauses, reports ------------------------------------------------------------------

    async def allow_background(self, campaign: str, *, requested: bool = False) -> bool:
        """Whether background work for ``campaign`` would be admitted now (not paused unless
        ``requested``, credits left, the day's background share not spent). A hint for a
        scheduler; the call itself is decided again when it is made."""
        if not requested and await self.is_paused(campaign):
            return False
        now = self.clock.now()
        ledger = await self.db.spend.ledger(
            campaign, _day(now), now=now.timestamp(), default=self.limits.default_credits
        )
        if ledger.credits <= 0:
            return False
        return self.daily is None or self.daily.admits(
            ledger.spent_today, 1, foreground=False, share=self.limits.background_share
        )

    async def credits(self, campaign: str) -> int:
        """The campaign's background credit balance (tokens; below zero after an overdraft)."""
        return await self.db.credits.balance(campaign, default=self.limits.default_credits)

    async def add_credits(self, campaign: str, tokens: int) -> int:
        """Top up (or, negative, take back) the campaign's credits; returns the new balance."""
        return await self.db.credits.add(campaign, tokens, default=self.limits.default_credits)

    async def pause(self, campaign: str) -> None:
        """Refuse the campaign's autonomous background work until :meth:`resume`."""
        await self.db.credits.pause(campaign, at=self.clock.now().timestamp())

    async def resume(self, campaign: str) -> bool:
        """Lift the pause; False when it was not paused."""
        return await self.db.credits.resume(campaign)

    async def is_paused(self, campaign: str) -> bool:
        return await self.db.credits.paused(campaign)

    async def report(self, campaign: str, *, days: int = 1) -> SpendReport:
        """The campaign's spend over the last ``days`` UTC days (today included), by role, pass
        and node, with its credits and pause."""
        return await spend_report(
            self.db,
            campaign,
            days=days,
            clock=self.clock,
            default_credits=self.limits.default_credits,
        )


async def spend_report(
    db: Database, campaign: str, *, days: int, clock: Clock, default_credits: int = 0
) -> SpendReport:
    """:meth:`Router.report` without a router (the CLI opens only the database)."""
    if days < 1:
        raise ValueError("a spend report covers at least one day")
    now = clock.now().astimezone(dt.UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    since = midnight - dt.timedelta(days=days - 1)
    return SpendReport(
        campaign=campaign,
        since=since,
        days=days,
        lines=tuple(await db.spend.breakdown(campaign, since=since.timestamp())),
        credits=await db.credits.balance(campaign, default=default_credits),
        paused=await db.credits.paused(campaign),
    )


class Streamed:
    """A streamed call through the router: iterate for text deltas; ``usage`` and ``model`` are
    what the call reported, once the iteration ended."""

    def __init__(self, router: Router, call: _Call) -> None:
        self._router = router
        self._call = call
        self.model = router.model_for(call.role)
        self.usage = Usage()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._run()

    async def _run(self) -> AsyncIterator[str]:
        r, c = self._router, self._call
        async with r._admitted(c) as ticket:
            sent = 0
            try:
                async for text in r.model.stream(
                    system=c.system,
                    messages=c.messages,
                    cache_upto=c.cache_upto,
                    max_tokens=c.max_tokens,
                    role=c.role,
                    model=r._chosen(c.role),
                ):
                    sent += len(text)
                    yield text
            except ModelUnavailable as exc:
                if exc.used is not None:
                    ticket.usage = exc.used  # the broken call is paid for what it used
                raise
            except BaseException:
                if sent:  # cancelled mid-answer: the prompt was read and some text written
                    ticket.usage = Usage(
                        input_tokens=max(0, c.estimate - c.max_tokens),
                        output_tokens=-(-sent // 4),
                    )
                raise
            # The port reports a stream's usage on the model (``AnthropicModel.last_usage``).
            usage = getattr(r.model, "last_usage", None)
            ticket.done(ticket.model, usage if isinstance(usage, Usage) else Usage())
        self.model, self.usage = ticket.model, ticket.usage


class RoutedModel:
    """A :class:`~liminalis.ports.LanguageModel` whose every call goes through ``router`` for
    ``campaign``: for code written against the plain port (the model recap) that must still
    pass the one gate, be booked and logged. ``foreground``: a person is waiting on it (a
    ``/recap``); a scheduled post is background work. A refusal raises
    :class:`~liminalis.errors.SpendRefused`, which such callers treat as "answer offline"."""

    def __init__(self, router: Router, campaign: str, *, foreground: bool) -> None:
        self.router = router
        self.campaign = campaign
        self.foreground = foreground

    @property
    def name(self) -> str:
        return self.router.model.name

    async def complete(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> Completion:
        return await self.router.complete(
            role,
            system=system,
            messages=messages,
            campaign=self.campaign,
            foreground=self.foreground,
            cache_upto=cache_upto,
            max_tokens=max_tokens,
        )

    def stream(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> AsyncIterator[str]:
        return aiter(
            self.router.stream(
                role,
                system=system,
                messages=messages,
                campaign=self.campaign,
                foreground=self.foreground,
                cache_upto=cache_upto,
                max_tokens=max_tokens,
            )
        )
