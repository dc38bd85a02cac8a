"""``/pin add|remove|list <document>``: documents always included in answers (GMs change pins)."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.engine import CAMPAIGN_SCOPE
from liminalis.errors import InvalidInput

__all__ = ["command"]


def _parse(arg: str) -> dict[str, OptionValue]:
    action, _, document = arg.partition(" ")
    options: dict[str, OptionValue] = {}
    if action:
        options["action"] = action.lower()
    if document.strip():
        options["document"] = document.strip()
    return options


def _changes(request: Request) -> bool:
    # Only a well-formed change meets the GM wall: a malformed one is told its usage first.
    return request.string("action") in {"add", "remove"} and bool(request.string("document"))


async def run(request: Request, scope: Scope) -> Reply:
    cfg, engine = scope.config, scope.services.engine
    lens = scope.lens
    action, key = request.string("action", "list"), request.string("document")
    if action == "list":
        pins = await engine.list_pins(cfg, lens, chat=request.msg.chat_key)
        body = "\n".join(f"• {title}" for _, title in pins) or "No pins."
        return Reply(text=f"Pinned documents:\n{body}")
    if action not in {"add", "remove"} or not key:
        raise InvalidInput("bad pin", user_message="Usage: `/pin add|remove|list <document>`")
    if action == "add":
        doc_id = await engine.add_pin(cfg.slug, key, lens, scope=CAMPAIGN_SCOPE)
        verb = "Pinned"
    else:
        doc_id = await engine.remove_pin(cfg.slug, key, lens, scope=CAMPAIGN_SCOPE)
        verb = "Unpinned"
    title, _ = await engine.document_text(cfg.slug, doc_id, lens)
    return Reply(text=f"{verb} **{title}**.")


command = Command(
    name="pin",
    description="Always include a document in answers (GMs change pins)",
    run=run,
    options=(
        Option(
            "action",
            "string",
            "add, remove or list",
            choices=("add", "remove", "list"),
            default="list",
        ),
        Option("document", "string", "A document title", autocomplete="titles", low=0, high=200),
    ),
    usage=("`/pin add|remove|list <document>` — always include a document (GM changes)",),
    example="/pin add Baron Aldric",
    gm_only=_changes,
    private=True,
    parse=_parse,
    group="gm",
)
