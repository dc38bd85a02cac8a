"""The seams a pass run spends through: a model port and a credit gate.

They are their own Protocols, not :class:`~liminalis.ports.LanguageModel` itself, because a pass
call carries what a router needs to pick a model and book the spend (the campaign, the pass, the
node, a role) and nothing of a chat (messages, cache breakpoints). In the service both are the
router (:class:`RouterPassModel`, :class:`RouterCreditGate`): the one gate every model call
passes, so a pass fan-out is throttled beside the players' replies and charged once, at the
router. :class:`LanguageModelPassModel` adapts a bare model (tests), :class:`NoPassModel`
stands in offline, and :class:`AllowAllGate` lets every run spend.
"""

from __future__ import annotations

from typing import Protocol

from liminalis.errors import ModelUnavailable
from liminalis.ports import LanguageModel, Message, Usage
from liminalis.routing import Router

__all__ = [
    "AllowAllGate",
    "CreditGate",
    "LanguageModelPassModel",
    "NoPassModel",
    "PassModel",
    "RouterCreditGate",
    "RouterPassModel",
]


class PassModel(Protocol):
    """A model a pass node calls. Raises :class:`~liminalis.errors.ModelUnavailable` when it
    cannot answer (the executor then stops the run and leaves the documents pending)."""

    async def complete(
        self,
        role: str,
        system: str,
        prompt: str,
        *,
        campaign: str,
        pass_id: str,
        node: str,
        max_tokens: int,
        requested: bool = False,
    ) -> tuple[str, Usage]: ...


class CreditGate(Protocol):
    """Whether a campaign may spend on background work now, and the booking of what it spent.

    Asked by the executor before it takes each new document; a refusal stops the run taking
    more (the documents in flight finish, the rest stay pending for the next run)."""

    async def allow_background(self, campaign: str, *, requested: bool = False) -> bool: ...

    async def charge(
        self, campaign: str, *, pass_id: str, node: str, role: str, usage: Usage
    ) -> None: ...


class LanguageModelPassModel:
    """A :class:`PassModel` over the answer path's :class:`LanguageModel` (one user message)."""

    def __init__(self, model: LanguageModel) -> None:
        self.model = model

    async def complete(
        self,
        role: str,
        system: str,
        prompt: str,
        *,
        campaign: str,
        pass_id: str,
        node: str,
        max_tokens: int,
        requested: bool = False,
    ) -> tuple[str, Usage]:
        completion = await self.model.complete(
            system=[system] if system else [],
            messages=[Message(role="user", content=prompt)],
            max_tokens=max_tokens,
            role=role,
        )
        return completion.text, completion.usage


class NoPassModel:
    """Offline: every call is unavailable, so passes that prompt a model wait (their documents
    stay pending) and passes that do not still run."""

    async def complete(
        self,
        role: str,
        system: str,
        prompt: str,
        *,
        campaign: str,
        pass_id: str,
        node: str,
        max_tokens: int,
        requested: bool = False,
    ) -> tuple[str, Usage]:
        raise ModelUnavailable("no language model is configured for passes")


class AllowAllGate:
    """Lets every run spend, and remembers the bookings (tests, offline, and until a router's
    credits exist)."""

    def __init__(self) -> None:
        self.charged: list[tuple[str, str, str, Usage]] = []

    async def allow_background(self, campaign: str, *, requested: bool = False) -> bool:
        return True

    async def charge(
        self, campaign: str, *, pass_id: str, node: str, role: str, usage: Usage
    ) -> None:
        self.charged.append((campaign, pass_id, node, usage))


class RouterPassModel:
    """A :class:`PassModel` through the router: a background call (role ``extract``,
    ``summarize``, …) booked, throttled behind foreground replies, logged with its pass and
    node, refused with :class:`~liminalis.errors.SpendRefused` when the campaign's credits, the
    day's background share or a pause say no (a requested run passes a pause)."""

    def __init__(self, router: Router) -> None:
        self.router = router

    async def complete(
        self,
        role: str,
        system: str,
        prompt: str,
        *,
        campaign: str,
        pass_id: str,
        node: str,
        max_tokens: int,
        requested: bool = False,
    ) -> tuple[str, Usage]:
        done = await self.router.complete(
            role,
            system=[system] if system else [],
            messages=[Message(role="user", content=prompt)],
            campaign=campaign,
            foreground=False,
            pass_id=pass_id,
            node=node,
            requested=requested,
            max_tokens=max_tokens,
        )
        return done.text, done.usage


class RouterCreditGate:
    """The executor's credit check, asked of the router. ``charge`` does nothing: the router
    charged the call when it settled it, and a second charge would count every call twice."""

    def __init__(self, router: Router) -> None:
        self.router = router

    async def allow_background(self, campaign: str, *, requested: bool = False) -> bool:
        return await self.router.allow_background(campaign, requested=requested)

    async def charge(
        self, campaign: str, *, pass_id: str, node: str, role: str, usage: Usage
    ) -> None:
        return None
