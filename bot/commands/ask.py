"""``/ask <question>``: an answer from the campaign's documents, with sources, for the asker's lens."""

from __future__ import annotations

from bot.commands._base import Command, Option, Request, Scope
from bot.commands.budget import effective_budget
from bot.messages import OptionValue, Reply
from liminalis.errors import InvalidInput

__all__ = ["command"]


def _parse(arg: str) -> dict[str, OptionValue]:
    return {"question": arg} if arg else {}


def _private(request: Request, scope: Scope) -> bool:
    # A GM's or a personal lens's answer may quote what others in the channel must not see (a GM
    # secret, one player's backstory): in a shared channel only its asker reads it.
    shared = not request.msg.is_dm and request.msg.platform != "console"
    return scope.lens.is_private and shared


async def run(request: Request, scope: Scope) -> Reply:
    cfg, msg, services = scope.config, request.msg, scope.services
    question = request.string("question")
    if not question.strip():
        raise InvalidInput("empty question", user_message="Ask a question, e.g. `/ask who is the Lantern Queen?`")
    budget = await effective_budget(services.engine, cfg.slug, msg.chat_key, services.responder.budget_tokens)
    answer = await services.engine.answer(cfg.slug, question, scope.lens, chat=msg.chat_key,
                                      budget_tokens=budget)
    return Reply(text=answer.text, sources=answer.sources, lens=scope.lens.describe(), title=cfg.name,
                 notes=answer.notes)


command = Command(
    name="ask",
    description="Ask about the campaign; answers come with sources",
    run=run,
    options=(Option("question", "string", "What do you want to know?", required=True, low=1, high=2000),),
    usage=("`/ask <question>` — ask about the campaign (or mention the bot)",),
    example="/ask who is the Lantern Queen?",
    private=_private,
    parse=_parse,
)
