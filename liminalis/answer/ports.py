"""What the answer pipeline needs from the campaign below it: a narrow Protocol, so the
:class:`~liminalis.answer.pipeline.Responder` is handed its collaborators and never imports the
Engine (the facade sits above the pipeline; the pipeline calling back into it is what made the
two an import cycle).

The Engine satisfies it structurally; a test can hand the Responder anything that does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from liminalis.campaign import CampaignConfig
from liminalis.knowledge.service import Knowledge
from liminalis.scope import CampaignScope
from liminalis.store.sqlite import Database
from liminalis.types import Bundle

__all__ = ["AnswerSources"]


class AnswerSources(Protocol):
    """The campaign's side of an answer: its scope resolved once, retrieval through a lens, the
    knowledge layer's time questions, the memory a cited turn feeds, and the chat's model."""

    db: Database
    knowledge: Knowledge
    memory_enabled: bool

    async def scope(
        self, campaign: str | CampaignConfig | CampaignScope, lens: Iterable[str]
    ) -> CampaignScope: ...

    async def retrieve(
        self,
        campaign: str | CampaignConfig | CampaignScope,
        query: str,
        lens: Iterable[str] | None = None,
        *,
        chat: str | None = None,
        forced: Sequence[str] = (),
    ) -> Bundle: ...

    async def remember_turn(
        self, scope: CampaignScope, question: str, cited: Sequence[str]
    ) -> None: ...

    async def chat_model(self, slug: str, chat: str | None) -> str | None: ...
