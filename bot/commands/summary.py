"""``/summary <document>``: a document's summary, as the asker's lens reads it."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope, private_in_shared
from bot.messages import OptionValue, Reply
from liminalis.answer import Source
from liminalis.errors import InvalidInput

__all__ = ["command"]

_HOW = {
    "front-matter": "the author's own summary",
    "section": "from its recap section",
    "extractive": "its central sentences",
    "model": "written by the language model from the document",
}


def _parse(arg: str) -> dict[str, OptionValue]:
    return {"document": arg.strip()} if arg.strip() else {}


async def run(request: Request, scope: Scope) -> Reply:
    cfg, engine = scope.config, scope.services.engine
    key = request.string("document")
    if not key:
        raise InvalidInput("no document", user_message="Usage: `/summary <document>`")
    doc_id = await engine.resolve_document(cfg.slug, key, scope.lens)
    found = await engine.knowledge.summary(cfg.slug, scope.lens, doc_id)
    if found is None or not found.text:
        title, _ = await engine.document_text(cfg.slug, doc_id, scope.lens)
        return Reply(
            text=f"**{title}** has no summary yet: documents are summarised after each ingest. "
            "Try again in a minute."
        )
    how = _HOW.get(found.method, found.method)
    return Reply(
        text=f"{found.text}\n\n_({how})_",
        sources=(Source(found.doc_id, found.title),),
        title=found.title,
        lens=scope.lens.describe(),
    )


command = Command(
    name="summary",
    description="A document's summary",
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
    ),
    usage=("`/summary <document>` — a document's summary",),
    example="/summary Session 7",
    private=private_in_shared,
    parse=_parse,
)
