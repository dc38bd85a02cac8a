"""The seams a pass run spends through: a model port and a credit gate.

They are their own Protocols, not :class:`~liminalis.ports.LanguageModel` itself, because a pass
call carries what a router needs to pick a model and book the spend (the campaign, the pass, the
node, a role) and nothing of a chat (messages, cache breakpoints). ``liminalis.routing`` can
implement both; until then :class:`LanguageModelPassModel` adapts the answer path's model,
:class:`NoPassModel` stands in offline, and :class:`AllowAllGate` lets every run spend.
"""

from __future__ import annotations

from typing import Protocol

from liminalis.errors import ModelUnavailable
from liminalis.ports import LanguageModel, Message, Usage

__all__ = [
    "AllowAllGate",
    "CreditGate",
    "LanguageModelPassModel",
    "NoPassModel",
    "PassModel",
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
    ) -> tuple[str, Usage]: ...


class CreditGate(Protocol):
    """Whether a campaign may spend on background work now, and the booking of what it spent.

    Asked by the executor before it takes each new document; a refusal stops the run taking
    more (the documents in flight finish, the rest stay pending for the next run)."""

    async def allow_background(self, campaign: str) -> bool: ...

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
    ) -> tuple[str, Usage]:
        raise ModelUnavailable("no language model is configured for passes")


class AllowAllGate:
    """Lets every run spend, and remembers the bookings (tests, offline, and until a router's
    credits exist)."""

    def __init__(self) -> None:
        self.charged: list[tuple[str, str, str, Usage]] = []

    async def allow_background(self, campaign: str) -> bool:
        return True

    async def charge(
        self, campaign: str, *, pass_id: str, node: str, role: str, usage: Usage
    ) -> None:
        self.charged.append((campaign, pass_id, node, usage))
