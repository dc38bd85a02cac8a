"""Replies with buttons: the card each is stored as, and the ids its buttons send back.

A button's id is ``lm:<verb>:<card id>[:<arg>…]`` (at most 100 characters, Discord's
``custom_id`` limit; Slack's ``action_id`` allows more). The card id is random and names a row
(:mod:`liminalis.store.cards`); it is not a secret and nothing relies on it being one: a press
is checked against the card, the channel it was pressed in and the presser's own lens
(:mod:`bot.presses`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterable, Sequence

from bot.messages import Action, IncomingMessage
from liminalis.answer import Source
from liminalis.errors import StoreError
from liminalis.lens import GM
from liminalis.store.cards import CardRow, FeedbackRow
from liminalis.store.sqlite import Database

__all__ = [
    "Cards",
    "PREFIX",
    "action_id",
    "answer_actions",
    "covers",
    "pager",
    "parse_action",
]

_log = logging.getLogger(__name__)

PREFIX = "lm"
#: Discord's limit on a component's ``custom_id``.
MAX_ID = 100
#: How long a card's buttons keep working (its row is pruned after).
KEEP_S = 30 * 86400.0


def action_id(verb: str, *parts: str | int) -> str:
    """``lm:<verb>:<part>…``; raises ``ValueError`` past :data:`MAX_ID` characters."""
    out = ":".join([PREFIX, verb, *(str(p) for p in parts)])
    if len(out) > MAX_ID:
        raise ValueError(f"action id too long: {out[:40]}…")
    return out


def parse_action(action: str) -> tuple[str, list[str]] | None:
    """``("verb", [parts])`` of an id :func:`action_id` made, ``None`` for anything else."""
    head, _, rest = (action or "").partition(":")
    if head != PREFIX or not rest or len(action) > MAX_ID:
        return None
    verb, *parts = rest.split(":")
    return verb, parts


def covers(lens: Iterable[str], card_lens: Iterable[str]) -> bool:
    """Whether a member holding ``lens`` may see what was made for ``card_lens``: the GM sees
    everything; anyone else only what was made for lenses they all hold (a players' answer for
    every player, Mirel's for Mirel), never a GM's."""
    mine, made = frozenset(lens), frozenset(card_lens)
    if GM in mine:
        return True
    return GM not in made and made <= mine


def answer_actions(card: CardRow, *, shareable: bool) -> tuple[Action, ...]:
    """An answer's buttons: its sources, its first document, 👍/👎, and — for a private answer
    (the GM's, a personal view's) in a shared channel — Share with table."""
    actions: list[Action] = []
    if card.sources:
        actions.append(Action("Sources", action_id("src", card.card_id)))
        actions.append(Action("Open document", action_id("doc", card.card_id, 0)))
    actions.append(Action("👍", action_id("up", card.card_id)))
    actions.append(Action("👎", action_id("down", card.card_id)))
    if shareable:
        actions.append(Action("Share with table", action_id("share", card.card_id), "primary"))
    return tuple(actions)


def pager(verb: str, card_id: str, page: int, pages: int, *extra: str | int) -> tuple[Action, ...]:
    """◀/▶ buttons for page ``page`` (1-based) of ``pages``: ``lm:<verb>:<card>:<extra…>:<n>``."""
    out: list[Action] = []
    if page > 1:
        out.append(Action("◀ Previous", action_id(verb, card_id, *extra, page - 1)))
    if page < pages:
        out.append(Action("Next ▶", action_id(verb, card_id, *extra, page + 1)))
    return tuple(out)


class Cards:
    """The cards of the replies with buttons, the feedback on answers and the campaign each
    member picked for their DMs (``db.cards``), with ids and times made here."""

    def __init__(
        self, db: Database, *, clock: Callable[[], float] = time.time, keep_s: float = KEEP_S
    ) -> None:
        self.db = db
        self.clock = clock
        self.keep_s = keep_s

    async def save(
        self,
        *,
        kind: str,
        msg: IncomingMessage,
        campaign: str,
        lens: Iterable[str],
        question: str,
        answer: str = "",
        sources: Sequence[Source] = (),
        question_id: int | None = None,
    ) -> CardRow:
        """Store a new card for a reply to ``msg`` (pruning the expired ones)."""
        now = self.clock()
        card = CardRow(
            card_id=secrets.token_urlsafe(9),  # 12 characters of [A-Za-z0-9_-]: never a ":"
            kind=kind,
            platform=msg.platform,
            channel_id=msg.channel_id,
            campaign=campaign,
            user_id=msg.user_id,
            lens=frozenset(lens),
            question=question,
            answer=answer,
            sources=tuple((s.doc_id, s.title, s.section) for s in sources),
            created_at=now,
            question_id=question_id,
        )
        await self.db.cards.add(card, prune_before=now - self.keep_s)
        return card

    async def keep(
        self,
        *,
        kind: str,
        msg: IncomingMessage,
        campaign: str,
        lens: Iterable[str],
        question: str,
        answer: str = "",
        sources: Sequence[Source] = (),
        question_id: int | None = None,
    ) -> CardRow | None:
        """:meth:`save`, best-effort: ``None`` (the reply goes without buttons, which would find
        no card) when the store cannot write. A reply already computed is never lost to it."""
        try:
            return await self.save(
                kind=kind,
                msg=msg,
                campaign=campaign,
                lens=lens,
                question=question,
                answer=answer,
                sources=sources,
                question_id=question_id,
            )
        except StoreError as exc:
            _log.warning(
                "%s card of %s not stored; the reply goes without buttons: %s", kind, campaign, exc
            )
            return None

    async def get(self, card_id: str) -> CardRow | None:
        card = await self.db.cards.get(card_id)
        if card is None or card.created_at < self.clock() - self.keep_s:
            return None
        return card

    async def vote(self, card: CardRow, user_id: str, vote: int, reason: str | None = None) -> None:
        await self.db.cards.vote(card, user_id, vote, reason=reason, at=self.clock())

    async def feedback(self, campaign: str) -> list[FeedbackRow]:
        return await self.db.cards.feedback(campaign)

    async def dm_choice(self, platform: str, user_id: str) -> str | None:
        return await self.db.cards.dm_choice(platform, user_id)

    async def set_dm_choice(self, platform: str, user_id: str, campaign: str) -> None:
        await self.db.cards.set_dm_choice(platform, user_id, campaign)
