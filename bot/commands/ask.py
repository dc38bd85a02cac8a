"""``/ask <question>``: an answer from the campaign's documents, with sources, for the asker's lens."""

from __future__ import annotations

from dataclasses import replace

from bot.cards import answer_actions
from bot.commands._base import Command, Option, Request, Scope, private_in_shared
from bot.messages import OptionValue, Reply
from liminalis.errors import InvalidInput
from liminalis.retrieval.retriever import RERANK_BUSY_NOTE, RERANK_FAILED_NOTE

__all__ = ["command"]

_SKIPPED_STAGE = {
    RERANK_BUSY_NOTE: "_Many questions at once: this answer skipped its reranking step, so its best passages "
    "may be ordered a little less well._",
    RERANK_FAILED_NOTE: "_The reranking step is unavailable right now, so this answer's best passages may be "
    "ordered a little less well._",
}


def _parse(arg: str) -> dict[str, OptionValue]:
    return {"question": arg} if arg else {}


async def run(request: Request, scope: Scope) -> Reply:
    cfg, msg, services = scope.config, request.msg, scope.services
    question = request.string("question")
    if not question.strip():
        raise InvalidInput(
            "empty question",
            user_message="Ask a question, e.g. `/lore ask who is the Lantern Queen?`",
        )
    budget = await services.engine.budget(
        cfg.slug, msg.chat_key, default=services.responder.budget_tokens
    )
    answer = await services.engine.answer(
        cfg,
        question,
        scope.lens,
        chat=msg.chat_key,
        budget_tokens=budget,
        on_text=request.progress,
    )
    # A stage skipped is said in the reply: a busy bot answers, a little less well, and the
    # player knows why.
    said = [_SKIPPED_STAGE[n] for n in dict.fromkeys(answer.notes) if n in _SKIPPED_STAGE]
    reply = Reply(
        text="\n\n".join([answer.text, *said]),
        sources=answer.sources,
        lens=scope.lens.describe(),
        title=cfg.name,
        notes=answer.notes,
        question_id=answer.question_id,
        question=question,
    )
    if msg.platform == "console":  # no buttons to press
        return reply
    card = await services.cards.keep(
        kind="answer",
        msg=msg,
        campaign=cfg.slug,
        lens=scope.lens,
        question=question,
        answer=answer.text,
        sources=answer.sources,
        question_id=answer.question_id,
    )
    if card is None:
        return reply
    return replace(reply, actions=answer_actions(card, shareable=private_in_shared(request, scope)))


command = Command(
    name="ask",
    description="Ask about the campaign; answers come with sources",
    run=run,
    options=(
        Option("question", "string", "What do you want to know?", required=True, low=1, high=2000),
    ),
    usage=("`/ask <question>` — ask about the campaign (or mention the bot)",),
    example="/ask who is the Lantern Queen?",
    private=private_in_shared,
    parse=_parse,
)
