"""``/budget show|set <tokens> [chat]``: the context budget of the campaign, or of one chat.

A GM's ``show`` also gives the campaign's model spend today by role, pass and node, and its
background credits (from the router's call log, :mod:`liminalis.routing`)."""

from __future__ import annotations

import re

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.engine import Engine
from liminalis.errors import InvalidInput

__all__ = ["command", "effective_budget", "LOW", "HIGH"]

LOW, HIGH = 500, 200_000
# ASCII digits only: "²".isdigit() is true, and int() refuses it.
_TOKENS = re.compile(r"[0-9][0-9,_]{0,11}")


async def effective_budget(
    engine: Engine, slug: str, chat_key: str | None, default: int = 6000
) -> int:
    """The chat's budget, else the campaign's, else ``default``."""
    return await engine.budget(slug, chat_key, default=default)


def _parse(arg: str) -> dict[str, OptionValue]:
    """``set 9,000 chat`` → action, tokens, scope. Words that make no budget leave ``tokens``
    out, and ``run`` answers with the usage (after the GM wall, as a typed command's would be)."""
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
        shown = await effective_budget(
            services.engine, cfg.slug, msg.chat_key, services.responder.budget_tokens
        )
        text = f"Answer length: an answer reads up to {shown:,} tokens of campaign text."
        router = services.responder.router
        if scope.lens.is_gm and router is not None:
            report = await router.report(cfg.slug, days=1)
            text += f"\n\n```\n{report.render(limit=12)}\n```"
        return Reply(text=text)
    if action != "set":
        raise InvalidInput("bad budget", user_message="Usage: `/budget show|set <tokens> [chat]`")
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


command = Command(
    name="budget",
    description="Answer length: how much campaign text an answer reads (GMs change it)",
    run=run,
    options=(
        Option(
            "action",
            "string",
            "show the answer length, or set it",
            choices=("show", "set"),
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
    ),
    usage=(
        "`/budget show|set <tokens> [chat]` — answer length: how much campaign text an answer reads, for the campaign or this chat (GM sets)",
    ),
    example="/budget set 9000 chat",
    gm_only=lambda request: request.string("action") == "set",
    private=True,
    parse=_parse,
    group="gm",
)
