"""``/explain <question>``: GM: how retrieval ranked the documents for a question."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.errors import InvalidInput

__all__ = ["command"]


def _parse(arg: str) -> dict[str, OptionValue]:
    return {"question": arg} if arg else {}


async def run(request: Request, scope: Scope) -> Reply:
    cfg, engine = scope.config, scope.services.engine
    question = request.string("question")
    if not question.strip():
        raise InvalidInput("empty", user_message="Usage: `/explain <question>`")
    ex = await engine.explain(cfg, question, lens=scope.lens)
    return Reply(text=ex.render(), title="Explain")


command = Command(
    name="explain",
    description="GM: how retrieval ranked the documents for a question",
    run=run,
    options=(
        Option(
            "question",
            "string",
            "The question to trace through retrieval",
            required=True,
            low=1,
            high=2000,
        ),
    ),
    usage=("`/explain <question>` — GM: how retrieval ranked the documents",),
    example="/explain who holds the ninth bell?",
    gm_only=True,
    private=True,
    parse=_parse,
    group="gm",
)
