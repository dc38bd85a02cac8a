"""``/review [show|keep <id>]`` (``/gm review``): GM: what the wall held back as GM notes by
habit — a ``## Secrets`` heading, a ``GM:`` line, a ``DM/`` folder — and the GM's word on each.

GM-only and private: the queue quotes GM-only text. Each listed section carries two buttons,
**Show to players** and **Keep GM-only** (pressed: ``bot.presses``, which re-derives the
presser's lens and refuses anyone but a GM); the ``show``/``keep <id>`` subcommands do the same
where buttons are not at hand (the console, a typed command). ``show`` publishes a section to the
readers of its document (the campaign is indexed again at once); ``keep`` leaves it GM-only and
stops asking. An edit to a decided section asks again."""

from __future__ import annotations

from bot.cards import action_id
from bot.commands._base import Command, Option, Request, Scope
from bot.messages import Action, IncomingMessage, OptionValue, Reply
from liminalis.errors import InvalidInput
from liminalis.review import ReviewItem

__all__ = ["command", "SHOWN", "REVIEW_VERB", "decide", "listing"]

_USAGE = "Usage: `/review` to list, `/review show <id>` or `/review keep <id>` to decide"
#: How many held sections one reply lists (the rest: after these are decided). Two buttons each
#: stay within the 25 a Discord message or a Slack actions block carries.
SHOWN = 10
#: The verb of a review button's id: ``lm:rv:<card>:<s|k>:<key>``.
REVIEW_VERB = "rv"
_TITLE = "Held back as GM notes"


def _parse(arg: str) -> dict[str, OptionValue]:
    action, _, key = arg.strip().partition(" ")
    options: dict[str, OptionValue] = {}
    if action:
        options["action"] = action.lower()
    if key.strip():
        options["id"] = key.strip()
    return options


def _buttons(queue: list[ReviewItem], card_id: str | None) -> tuple[Action, ...]:
    """Show/Keep for each listed section; none without a card (the console, a failed store)."""
    if card_id is None:
        return ()
    out: list[Action] = []
    for i in queue[:SHOWN]:
        out.append(
            Action(
                f"Show to players ({i.key})",
                action_id(REVIEW_VERB, card_id, "s", i.key),
                "success",
            )
        )
        out.append(Action(f"Keep GM-only ({i.key})", action_id(REVIEW_VERB, card_id, "k", i.key)))
    return tuple(out)


async def listing(scope: Scope, card_id: str | None, *, note: str = "") -> Reply:
    """The queue of ``scope``'s campaign with its buttons (``card_id``: the card they name),
    under ``note`` (what was just decided)."""
    queue = await scope.services.engine.review.queue(scope.config.slug)
    head = f"{note}\n\n" if note else ""
    if not queue:
        return Reply(
            text=head + "Nothing awaits your review: every section held back as GM notes is "
            "decided, or marked GM-only in the documented syntax.",
            title=_TITLE,
            ephemeral=True,
        )
    lines = [
        f"`{i.key}` **{i.path}** line {i.line} — {i.rule}\n> {i.excerpt[:160]}"
        for i in queue[:SHOWN]
    ]
    more = f"\n…and {len(queue) - SHOWN} more." if len(queue) > SHOWN else ""
    return Reply(
        text=head + f"{len(queue)} section(s) held back as GM notes, awaiting your word "
        f"(players cannot read them until you show them):\n\n"
        + "\n\n".join(lines)
        + more
        + "\n\n**Show to players** (or `/review show <id>`) publishes one to its document's "
        "readers; **Keep GM-only** (or `/review keep <id>`) keeps it GM-only.",
        title=_TITLE,
        actions=_buttons(queue, card_id),
        ephemeral=True,
    )


async def decide(scope: Scope, msg: IncomingMessage, key: str, *, show: bool) -> str:
    """Store the GM's word on ``key`` and say what was decided (a line for the reply)."""
    who = f"{msg.platform}:{msg.user_id}"
    item = await scope.services.engine.review_decide(scope.config.slug, key, show=show, by=who)
    done = "Shown to players" if show else "Kept GM-only"
    return f"{done}: **{item.path}** line {item.line} ({item.rule})."


async def _card_id(request: Request, scope: Scope) -> str | None:
    if request.msg.platform == "console":
        return None
    card = await scope.services.cards.keep(
        kind="review", msg=request.msg, campaign=scope.config.slug, lens=scope.lens, question=""
    )
    return card.card_id if card is not None else None


async def run(request: Request, scope: Scope) -> Reply:
    action, key = request.string("action", "list"), request.string("id")
    if action == "list":
        return await listing(scope, await _card_id(request, scope))
    if action not in {"show", "keep"} or not key:
        raise InvalidInput("bad review", user_message=_USAGE)
    return Reply(text=await decide(scope, request.msg, key, show=action == "show"))


command = Command(
    name="review",
    group="gm",
    description="GM: what the wall held back as GM notes, to show to players or keep GM-only",
    run=run,
    options=(
        Option(
            "action",
            "string",
            "list, show or keep",
            choices=("list", "show", "keep"),
            default="list",
        ),
        Option("id", "string", "The held section's id from the list", low=0, high=64),
    ),
    usage=("`/review [show|keep <id>]` — GM: what the wall held back as GM notes, and your word",),
    example="/review show 3fa9c2d1",
    gm_only=True,
    private=True,
    parse=_parse,
)
