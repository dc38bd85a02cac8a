"""``/show <document>``: a document as the asker may read it (hidden sections cut for
players), a page at a time."""

from __future__ import annotations

import re

from bot.cards import pager
from bot.commands._base import Command, Option, Request, Scope, private_in_shared
from bot.messages import OptionValue, Reply
from bot.render import page_of, pages_of
from liminalis.errors import InvalidInput

__all__ = ["command", "document_page"]

_USAGE = "Usage: `/show <document title>`, e.g. `/show Baron Aldric`"


def _parse(arg: str) -> dict[str, OptionValue]:
    # "/show Baron Aldric page 2" (a bare trailing number is a title's: "Session 1")
    m = re.fullmatch(r"(.+?)\s+(?:p\.|page)\s*([0-9]{1,3})", arg.strip(), re.IGNORECASE)
    if m:
        return {"document": m.group(1), "page": int(m.group(2))}
    return {"document": arg.strip()} if arg.strip() else {}


async def document_page(
    scope: Scope, key: str, page: int, buttons: tuple[str, str, tuple[str | int, ...]] | None
) -> Reply:
    """Page ``page`` of the document ``key`` names, in the fullest view ``scope``'s lens may
    read. ``buttons``: ``(verb, card id, extra parts)`` of its ◀/▶ buttons, or none."""
    cfg = scope.config
    _, title, text = await scope.services.engine.read_document(cfg, key, scope.lens)
    pages = pages_of(text)
    page = page_of(page, len(pages))
    actions = pager(buttons[0], buttons[1], page, len(pages), *buttons[2]) if buttons else ()
    return Reply(
        text=pages[page - 1],
        title=title,
        lens=scope.lens.describe(),
        footer=f"Page {page} of {len(pages)}" if len(pages) > 1 else "",
        actions=actions,
    )


async def run(request: Request, scope: Scope) -> Reply:
    key = request.string("document")
    if not key:
        raise InvalidInput("no document", user_message=_USAGE)
    doc_id, _, _ = await scope.services.engine.read_document(scope.config, key, scope.lens)
    buttons = None
    if request.msg.platform != "console":
        card = await scope.services.cards.keep(
            kind="show",
            msg=request.msg,
            campaign=scope.config.slug,
            lens=scope.lens,
            question=doc_id,
        )
        buttons = ("page", card.card_id, ()) if card is not None else None
    return await document_page(scope, doc_id, request.integer("page") or 1, buttons)


command = Command(
    name="show",
    description="Read a document as you may see it, a page at a time",
    run=run,
    options=(
        Option(
            "document",
            "string",
            "A document title",
            required=True,
            autocomplete="titles",
            low=1,
            high=200,
        ),
        Option("page", "integer", "Which page to start on", low=1, high=999),
    ),
    usage=("`/show <document>` — read a document as you may see it, a page at a time",),
    example="/show Baron Aldric",
    private=private_in_shared,
    parse=_parse,
)
