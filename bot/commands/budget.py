"""``/budget show|set <tokens> [chat]|model <name>|default``: what an answer costs: the context
budget of the campaign or of one chat, and the model one chat's answers use.

A GM's ``show`` also gives the campaign's model spend today by role, pass and node, and its
background credits (from the router's call log, :mod:`liminalis.routing`). ``model`` lives here,
not on ``/campaign`` or a command of its own, because it is the same GM decision as ``set …
chat``: what this chat's answers may spend; ``show`` then reports both, with the spend they
cause. Only the reply role of that chat moves (``Router.for_chat``): summaries, recaps and
passes keep their configured, cheaper models."""

from __future__ import annotations

import re

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.errors import InvalidInput

__all__ = ["command", "LOW", "HIGH"]

LOW, HIGH = 500, 200_000
# ASCII digits only: "²".isdigit() is true, and int() refuses it.
_TOKENS = re.compile(r"[0-9][0-9,_]{0,11}")
#: A model name as the Messages API spells them (``claude-sonnet-4-5``, ``claude-3-5-haiku@x``):
#: the API itself says whether it exists; this keeps spaces, markup and essays out of the store.
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,99}")
#: The word that gives a chat back the configured reply model.
DEFAULT_MODEL = "default"
_USAGE = "Usage: `/budget show|set <tokens> [chat]|model <name>|default`"


def _parse(arg: str) -> dict[str, OptionValue]:
    """``set 9,000 chat`` → action, tokens, scope. Words that make no budget leave ``tokens``
    out, and ``run`` answers with the usage (after the GM wall, as a typed command's would be)."""
    words = arg.split()
    if words and words[0].lower() == "model":  # a model's name keeps its case
        return {"action": "model", **({"model": words[1]} if len(words) == 2 else {})}
    parts = arg.lower().split()
    options: dict[str, OptionValue] = {"scope": "chat" if "chat" in parts else "campaign"}
    if parts:
        options["action"] = parts[0]
    nums = [p for p in parts[1:] if _TOKENS.fullmatch(p)]
    if len(nums) == 1 and all(p in {"chat", "campaign"} for p in parts[1:] if p not in nums):
        options["tokens"] = int(nums[0].replace(",", "").replace("_", ""))
    return options


async def run(request: Request, scope: Scope) -> Reply:
    cfg, services, msg = scope.config, scope.services, request.msg
    action = request.string("action", "show")
    if action == "show":
        shown = await services.engine.budget(
            cfg.slug, msg.chat_key, default=services.responder.budget_tokens
        )
        text = f"Answer length: an answer reads up to {shown:,} tokens of campaign text."
        router = services.responder.router
        if scope.lens.is_gm and router is not None:
            report = await router.report(cfg.slug, days=1)
            text += f"\n\n```\n{report.render(limit=12)}\n```"
        override = await services.engine.chat_model(cfg.slug, msg.chat_key)
        if override:
            text += f"\nAnswers in this chat use the model `{override}` (a GM's choice)."
        return Reply(text=text)
    if action == "model":
        return await _model(request, scope)
    if action != "set":
        raise InvalidInput("bad budget", user_message=_USAGE)
    tokens = request.integer("tokens")
    if tokens is None:
        raise InvalidInput("bad budget", user_message="Usage: `/budget set <tokens> [chat]`")
    if not LOW <= tokens <= HIGH:
        raise InvalidInput(
            "budget out of range",
            user_message="Answer lengths must be between 500 and 200,000 tokens.",
        )
    chat = request.string("scope") == "chat"
    await services.engine.set_budget(cfg.slug, tokens, chat=msg.chat_key if chat else None)
    return Reply(
        text=f"Answer length for this {'chat' if chat else 'campaign'} set to {tokens:,} tokens "
        "of campaign text per answer."
    )


async def _model(request: Request, scope: Scope) -> Reply:
    """Give this chat its own reply model, or (``default``) the configured one back."""
    name = request.string("model")
    if not _MODEL.fullmatch(name):
        raise InvalidInput(
            "bad model", user_message="Usage: `/budget model <model name>|default` (this chat)"
        )
    engine, slug, chat = scope.services.engine, scope.config.slug, request.msg.chat_key
    if name.lower() == DEFAULT_MODEL:
        cleared = await engine.set_chat_model(slug, chat, None)
        return Reply(
            text="Answers in this chat use the configured model again."
            if cleared
            else "This chat already uses the configured model."
        )
    await engine.set_chat_model(slug, chat, name)
    return Reply(
        text=f"Answers in this chat now use the model `{name}`; summaries, recaps and passes "
        "keep theirs. `/budget model default` gives it back."
    )


command = Command(
    name="budget",
    description="Answer length and model: how much an answer reads, which model writes it (GMs set)",
    run=run,
    options=(
        Option(
            "action",
            "string",
            "show the answer length, set it, or choose this chat's answer model",
            choices=("show", "set", "model"),
            default="show",
        ),
        Option("tokens", "integer", "set: how many tokens of campaign text", low=LOW, high=HIGH),
        Option(
            "scope",
            "string",
            "set: for the whole campaign, or this chat only",
            choices=("campaign", "chat"),
            default="campaign",
        ),
        Option("model", "string", "model: the model name for this chat's answers, or default"),
    ),
    usage=(
        "`/budget show|set <tokens> [chat]` — answer length: how much campaign text an answer reads, for the campaign or this chat (GM sets)",
        "`/budget model <name>|default` — GM: the model this chat's answers use (summaries and passes keep theirs)",
    ),
    example="/budget set 9000 chat",
    gm_only=lambda request: request.string("action") in {"set", "model"},
    private=True,
    parse=_parse,
    group="gm",
)
