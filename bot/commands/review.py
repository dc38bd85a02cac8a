"""``/review [show|keep <id>]`` (``/gm review``): GM: what the wall held back as GM notes by
habit — a ``## Secrets`` heading, a ``GM:`` line, a ``DM/`` folder — and the GM's word on each.

GM-only and private: the queue quotes GM-only text. ``show`` publishes a section to the readers
of its document (the campaign is indexed again at once); ``keep`` leaves it GM-only and stops
asking. An edit to a decided section asks again."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.errors import InvalidInput

__all__ = ["command", "SHOWN"]

_USAGE = "Usage: `/review` to list, `/review show <id>` or `/review keep <id>` to decide"
#: How many held sections one reply lists (the rest: after these are decided).
SHOWN = 10


def _parse(arg: str) -> dict[str, OptionValue]:
    action, _, key = arg.strip().partition(" ")
    options: dict[str, OptionValue] = {}
    if action:
        options["action"] = action.lower()
    if key.strip():
        options["id"] = key.strip()
    return options


async def run(request: Request, scope: Scope) -> Reply:
    cfg, engine = scope.config, scope.services.engine
    action, key = request.string("action", "list"), request.string("id")
    if action == "list":
        queue = await engine.review.queue(cfg.slug)
        if not queue:
            return Reply(
                text="Nothing awaits your review: every section held back as GM notes is "
                "decided, or marked GM-only in the documented syntax.",
                title="Held back as GM notes",
            )
        lines = [
            f"`{i.key}` **{i.path}** line {i.line} — {i.rule}\n> {i.excerpt[:160]}"
            for i in queue[:SHOWN]
        ]
        more = f"\n…and {len(queue) - SHOWN} more." if len(queue) > SHOWN else ""
        return Reply(
            text=f"{len(queue)} section(s) held back as GM notes, awaiting your word "
            f"(players cannot read them until you show them):\n\n"
            + "\n\n".join(lines)
            + more
            + "\n\n`/review show <id>` publishes one to its document's readers; "
            "`/review keep <id>` keeps it GM-only.",
            title="Held back as GM notes",
        )
    if action not in {"show", "keep"} or not key:
        raise InvalidInput("bad review", user_message=_USAGE)
    who = f"{request.msg.platform}:{request.msg.user_id}"
    item = await engine.review_decide(cfg.slug, key, show=action == "show", by=who)
    if action == "show":
        return Reply(text=f"Shown to players: **{item.path}** line {item.line} ({item.rule}).")
    return Reply(text=f"Kept GM-only: **{item.path}** line {item.line} ({item.rule}).")


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
