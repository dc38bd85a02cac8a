"""``/search <words>``: the documents that match, each with the line that matched best,
through the asker's view, a page at a time."""

from __future__ import annotations

from bot.cards import pager
from bot.commands._base import Command, Option, Request, Scope, private_in_shared
from bot.messages import OptionValue, Reply
from bot.render import page_of
from liminalis.errors import InvalidInput

__all__ = ["command", "search_page", "PER_PAGE", "MAX_RESULTS"]

PER_PAGE = 8
MAX_RESULTS = 40
_USAGE = "Usage: `/search <words>`, e.g. `/search silver bell`"


def _parse(arg: str) -> dict[str, OptionValue]:
    return {"text": arg} if arg else {}


async def search_page(scope: Scope, query: str, page: int, card_id: str | None) -> Reply:
    """Page ``page`` of what ``query`` finds through ``scope``'s lens, with ◀/▶ buttons that
    name ``card_id`` (none without one)."""
    cfg = scope.config
    matches = await scope.services.engine.search(cfg, query, scope.lens, limit=MAX_RESULTS)
    title = f"Search: {query}"
    if not matches:
        return Reply(
            text=f"Nothing in **{cfg.name}** matches that. Try other words, or `/ask` a question.",
            title=title,
            lens=scope.lens.describe(),
        )
    pages = -(-len(matches) // PER_PAGE)
    page = page_of(page, pages)
    first = (page - 1) * PER_PAGE
    lines = [
        f"**{first + i}. {m.title}** — {m.snippet}"
        for i, m in enumerate(matches[first : first + PER_PAGE], 1)
    ]
    found = f"{len(matches)}{'+' if len(matches) == MAX_RESULTS else ''} documents"
    return Reply(
        text="\n".join(lines) + "\n\nOpen one with `/show <title>`.",
        title=title,
        lens=scope.lens.describe(),
        footer=f"Page {page} of {pages} · {found}",
        actions=pager("page", card_id, page, pages) if card_id else (),
    )


async def run(request: Request, scope: Scope) -> Reply:
    query = request.string("text")
    if not query.strip():
        raise InvalidInput("empty search", user_message=_USAGE)
    card_id = None
    if request.msg.platform != "console":
        card = await scope.services.cards.keep(
            kind="search",
            msg=request.msg,
            campaign=scope.config.slug,
            lens=scope.lens,
            question=query,
        )
        card_id = card.card_id if card is not None else None
    return await search_page(scope, query, 1, card_id)


command = Command(
    name="search",
    description="Find the documents that mention some words, with the line that matched",
    run=run,
    options=(Option("text", "string", "The words to look for", required=True, low=1, high=300),),
    usage=("`/search <words>` — the documents that mention them, a page at a time",),
    example="/search silver bell",
    private=private_in_shared,
    parse=_parse,
)
