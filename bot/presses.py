"""What a button under a reply does when pressed, checked against the presser first.

Every press names a card (``bot.cards``) and is refused — with one message that says nothing of
the card — unless:

* the card was made on the presser's platform, and the press comes from the card's channel
  (in a DM: the card is the presser's own, and they still play its campaign);
* the channel still plays the card's campaign;
* the presser's own lens, resolved now where they press, covers the lens the card was made for
  (:func:`bot.cards.covers`): a player pressing a button of the GM's answer sees nothing of it.

What a press shows is then read through the presser's lens again (sources, pages, searches),
never copied from the card, and it replaces the pressed message only when that lens is the
card's own: anything read through a wider view goes to the presser alone. *Share with table* never posts the private answer: it asks the
question again through the players' lens and posts that answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.cards import action_id, answer_actions, covers, parse_action
from bot.commands import Request, Scope
from bot.commands import ask as ask_command
from bot.commands.recap import recap_text
from bot.commands.review import REVIEW_VERB
from bot.commands.review import decide as review_decide
from bot.commands.review import listing as review_listing
from bot.commands.search import search_page
from bot.commands.show import document_page
from bot.messages import Action, Form, IncomingMessage, Reply
from liminalis.errors import InvalidInput, PermissionDenied
from liminalis.lens import GM, PLAYERS, Lens
from liminalis.store.cards import CardRow

if TYPE_CHECKING:
    from bot.service import BotService

__all__ = ["press", "opens_form", "REFUSED", "EXPIRED"]

REFUSED = "That button is not for you, or not for this channel."
EXPIRED = "That button has expired. Ask again to get a fresh one."
#: How many sources get an "Open" button of their own under the expanded sources.
OPEN_BUTTONS = 5

#: The presses whose reply is a form (a modal): an adapter that must open it as its first
#: response (Discord) runs them before acknowledging.
FORM_VERBS = frozenset({"down", "hask"})

Handler = Callable[["BotService", IncomingMessage, list[str], str], Awaitable[Reply]]


async def press(service: BotService, msg: IncomingMessage, action: str, value: str) -> Reply:
    """Run the press of ``action`` (with a form's ``value``) by ``msg``'s author, where ``msg``
    says. Raises ``LiminalisError`` (user-safe) when it is refused."""
    parsed = parse_action(action)
    handler = _HANDLERS.get(parsed[0]) if parsed is not None else None
    if parsed is None or handler is None:
        raise InvalidInput(f"unknown action {action[:40]!r}", user_message=EXPIRED)
    return await handler(service, msg, parsed[1], value)


def opens_form(action: str) -> bool:
    """Whether pressing ``action`` answers with a form."""
    parsed = parse_action(action)
    return parsed is not None and parsed[0] in FORM_VERBS


def _refused(why: str) -> PermissionDenied:
    return PermissionDenied(f"press refused: {why}", user_message=REFUSED)


async def _card(
    service: BotService, msg: IncomingMessage, parts: list[str], *kinds: str
) -> tuple[CardRow, Scope]:
    """The card a press names and the presser's scope, once every check has passed."""
    card = await service.cards.get(parts[0]) if parts else None
    if card is None:
        raise InvalidInput("no such card", user_message=EXPIRED)
    if card.kind not in kinds or card.platform != msg.platform:
        raise _refused(f"{card.kind} card on {card.platform}")
    if msg.is_dm:
        # A DM is its author's alone, and holds the buttons of their own cards only (a private
        # answer to a mention is sent there): their view is the one they hold at its table now.
        if card.user_id != msg.user_id:
            raise _refused("another member's card in a DM")
        seat = (await service.seats(msg)).get(card.campaign)
        if seat is None:
            raise _refused("the presser no longer plays the card's campaign")
        scope = Scope(service, seat.config, seat.lens)
    else:
        if card.channel_id != msg.channel_id:
            raise _refused("a card of another channel")
        scope = await service.scope_of(msg)
        if scope.config.slug != card.campaign:
            raise _refused("a card of another campaign")
    if not covers(scope.lens, card.lens):
        raise _refused("the presser's view does not cover the card's")
    return card, scope


def _index(parts: list[str], at: int, size: int) -> int:
    try:
        i = int(parts[at])
    except (IndexError, ValueError):
        raise InvalidInput("bad index", user_message=EXPIRED) from None
    if not 0 <= i < max(size, 1):
        raise InvalidInput("index out of range", user_message=EXPIRED)
    return i


# -- an answer's buttons ---------------------------------------------------------------------


async def _sources(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    card, scope = await _card(service, msg, parts, "answer")
    passages = await service.engine.cited_passages(
        scope.config,
        [(d, section) for d, _, section in card.sources],
        scope.lens,
        query=card.question,
    )
    blocks: list[str] = []
    for i, ((_, title, section), text) in enumerate(zip(card.sources, passages), 1):
        if text is None:  # covered by the checks above; a document hidden since is left out
            continue
        label = f"{title} — {section}" if section else title
        quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in text.splitlines())
        blocks.append(f"**{i}. {label}**\n{quoted}")
    actions = tuple(
        Action(f"Open {i + 1}", action_id("doc", card.card_id, i))
        for i in range(min(len(card.sources), OPEN_BUTTONS))
    )
    return Reply(
        text="\n\n".join(blocks) or "No cited passage is left to show.",
        title="Sources",
        question=card.question,
        lens=scope.lens.describe(),
        actions=actions,
        ephemeral=True,
    )


async def _open(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    card, scope = await _card(service, msg, parts, "answer")
    i = _index(parts, 1, len(card.sources))
    if not card.sources:
        raise InvalidInput("no sources", user_message="That answer cites no document.")
    page = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 1
    reply = await document_page(scope, card.sources[i][0], page, ("docp", card.card_id, (i,)))
    # A page turn names the answer's card, not the message it was pressed on, and a forged one
    # can be pressed on the public answer itself: only a page read through the answer's own
    # view may replace a message; a wider view's page (a GM's, a personal one) goes to the
    # presser alone.
    turn = len(parts) > 2 and Lens(card.lens) == scope.lens
    return replace(reply, ephemeral=True, delivery="replace" if turn else "private")


async def _vote(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    card, _scope = await _card(service, msg, parts, "answer")
    await service.cards.vote(card, msg.user_id, 1)
    return Reply(text="Thanks for the 👍 — noted.", ephemeral=True)


async def _down(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    card, _scope = await _card(service, msg, parts, "answer")
    await service.cards.vote(card, msg.user_id, -1)
    return Reply(
        text="Noted 👎. Say what was wrong with `/ask` again, or use the form.",
        ephemeral=True,
        form=Form(
            id=action_id("why", card.card_id),
            title="What was wrong?",
            label="What was wrong with this answer? (optional)",
            placeholder="One line: wrong, missing something, too long…",
        ),
    )


async def _why(service: BotService, msg: IncomingMessage, parts: list[str], value: str) -> Reply:
    card, _scope = await _card(service, msg, parts, "answer")
    await service.cards.vote(card, msg.user_id, -1, reason=value[:300])
    return Reply(text="Thanks — your note is kept with the answer for the GM.", ephemeral=True)


async def _share(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    card, scope = await _card(service, msg, parts, "answer")
    if card.user_id != msg.user_id:
        raise _refused("only the asker shares an answer")
    if msg.is_dm or msg.platform == "console":
        raise InvalidInput("share from a dm", user_message="Share with the table from its channel.")
    if not Lens(card.lens).is_private:
        raise InvalidInput("already shared", user_message="The table can already see this answer.")
    # Never the private answer: the question again, through what every player can see.
    cfg, engine, players = scope.config, service.engine, Lens({PLAYERS})
    budget = await engine.budget(cfg.slug, msg.chat_key, default=service.responder.budget_tokens)
    answer = await engine.answer(
        cfg, card.question, players, chat=msg.chat_key, budget_tokens=budget
    )
    shared = await service.cards.keep(
        kind="answer",
        msg=msg,
        campaign=cfg.slug,
        lens=players,
        question=card.question,
        answer=answer.text,
        sources=answer.sources,
        question_id=answer.question_id,
    )
    return Reply(
        text=answer.text,
        sources=answer.sources,
        title=cfg.name,
        question=card.question,
        lens=players.describe(),
        footer="Shared with the table: asked again as every player sees it",
        actions=answer_actions(shared, shareable=False) if shared is not None else (),
        delivery="public",
    )


# -- pages of a search or a document ---------------------------------------------------------


async def _page(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    card, scope = await _card(service, msg, parts, "search", "show")
    page = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 1
    if card.kind == "search":
        reply = await search_page(scope, card.question, page, card.card_id)
    else:
        reply = await document_page(scope, card.question, page, ("page", card.card_id, ()))
    # The page replaces the one shown only when it was read through the same view: another
    # view's page (a GM pressing a player's search) goes to the presser alone.
    same = Lens(card.lens) == scope.lens
    return replace(reply, ephemeral=not same, delivery="replace" if same else "private")


# -- the GM's review of what the wall held back ----------------------------------------------


async def _review(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    """Show to players / Keep GM-only under ``/gm review``: the presser's lens, resolved now
    where they press, must be a GM's of the card's campaign (the card's own lens is not trusted
    for it); the button names only which held section, and the queue decides whether it still
    awaits review. The listing is then shown again in place, less what was decided."""
    card, scope = await _card(service, msg, parts, "review")
    if GM not in scope.lens:
        raise _refused("a review press by a member who is not the campaign's GM")
    if len(parts) < 3 or parts[1] not in {"s", "k"}:
        raise InvalidInput("bad review press", user_message=EXPIRED)
    note = await review_decide(scope, msg, parts[2], show=parts[1] == "s")
    reply = await review_listing(scope, card.card_id, note=note)
    return replace(reply, delivery="replace")


# -- direct messages -------------------------------------------------------------------------


async def _pick(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    card = await service.cards.get(parts[0]) if parts else None
    if card is None:
        raise InvalidInput("no such card", user_message=EXPIRED)
    if (
        card.kind != "dm"
        or card.platform != msg.platform
        or card.user_id != msg.user_id
        or not msg.is_dm
        or len(parts) < 2
    ):
        raise _refused("a campaign pick that is not the presser's")
    seats = await service.seats(msg)
    seat = seats.get(parts[1])
    if seat is None:
        raise _refused("a campaign the presser does not play")
    await service.cards.set_dm_choice(msg.platform, msg.user_id, parts[1])
    asked = json.loads(card.question or "{}")
    if not asked.get("text") and not asked.get("command"):
        return Reply(
            text=f"Your direct messages now go to **{seat.config.name}**.", delivery="replace"
        )
    again = replace(
        msg,
        text=str(asked.get("text") or ""),
        command=asked.get("command"),
        options=dict(asked.get("options") or {}),
    )
    reply = await service.handle(again)
    return replace(reply, delivery="replace")


async def _switch(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    if not msg.is_dm:
        raise _refused("a campaign switch outside a DM")
    seats = await service.seats(msg)
    if len(seats) < 2:
        names = ", ".join(s.config.name for s in seats.values()) or "no campaign"
        return Reply(text=f"You play {names} here: there is nothing to switch.", ephemeral=True)
    return await service.choose_campaign(replace(msg, text="", command=None, options={}), seats)


# -- the Slack App Home's quick actions ------------------------------------------------------


async def _seat(service: BotService, msg: IncomingMessage, parts: list[str]) -> Scope:
    seat = (await service.seats(msg)).get(parts[0]) if parts else None
    if seat is None:
        raise _refused("a campaign the presser does not play")
    return Scope(service, seat.config, seat.lens)


async def _home_ask(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    scope = await _seat(service, msg, parts)
    return Reply(
        text=f"Ask about {scope.config.name}.",
        form=Form(
            id=action_id("hq", scope.config.slug),
            title="Ask a question"[:24],
            label=f"Your question about {scope.config.name}"[:45],
            placeholder="Who is the Lantern Queen?",
            max_length=2000,
        ),
        ephemeral=True,
    )


async def _home_question(
    service: BotService, msg: IncomingMessage, parts: list[str], value: str
) -> Reply:
    scope = await _seat(service, msg, parts)
    request = Request("ask", {"question": value}, msg)
    return replace(await ask_command.run(request, scope), ephemeral=True, delivery="private")


async def _home_recap(service: BotService, msg: IncomingMessage, parts: list[str], _: str) -> Reply:
    scope = await _seat(service, msg, parts)
    text, sources = await recap_text(service.engine, scope.config.slug)
    return Reply(
        text=text, sources=sources, title=f"Previously on {scope.config.name}", ephemeral=True
    )


_HANDLERS: dict[str, Handler] = {
    "src": _sources,
    "doc": _open,
    "docp": _open,
    "up": _vote,
    "down": _down,
    "why": _why,
    "share": _share,
    "page": _page,
    REVIEW_VERB: _review,
    "pick": _pick,
    "switch": _switch,
    "hask": _home_ask,
    "hq": _home_question,
    "hrecap": _home_recap,
}
