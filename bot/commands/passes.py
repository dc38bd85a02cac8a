"""``/pass list|show NAME|run NAME|pause|resume`` (``/gm pass`` where commands are grouped): a
GM's analysis passes from chat, the same actions and the same text as ``liminalis
pass …``, which calls :func:`pass_action` too.

GM-only and private: a pass's report names GM-only documents in its errors, and pausing or
running one spends or holds the campaign's background credits, which is the GM's call. The
passes run in the process that serves the chat (``serve``, ``chat``): the command reaches them
through ``Services.passes`` and says so where a process has none.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.errors import InvalidInput
from liminalis.passes import Passes

__all__ = ["ACTIONS", "NOT_RUNNING", "PassOutcome", "command", "pass_action"]

#: What a pass command does, in both forms (the command line adds ``save FILE``).
ACTIONS = ("list", "show", "run", "pause", "resume")
_NAMED = frozenset({"show", "run"})
_USAGE = "Usage: `/pass list|show <name>|run <name>|pause|resume`"
NOT_RUNNING = (
    "The analysis passes are not running in this process; ask the host to run "
    "`liminalis pass …` where the bot serves."
)


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What a pass action says, and whether it went as asked (a run that stopped on a cap, the
    credits or a failure did not: the command line exits 1)."""

    text: str
    ok: bool = True


async def pass_action(passes: Passes, action: str, campaign: str, name: str | None) -> PassOutcome:
    """Do one of :data:`ACTIONS` on ``campaign``'s passes and say what happened.

    ``run`` is a requested run: it runs on a paused campaign (a pause stops only autonomous
    runs) over the pass's pending documents, within its caps and the router's credits.
    ``pause``/``resume`` set the router's one pause flag of the campaign.

    Raises:
        InvalidInput: an unknown action, or ``show``/``run`` without a name.
        NotFound: no pass of that name.
    """
    if action not in ACTIONS:
        raise InvalidInput(f"pass action {action!r}", user_message=_USAGE)
    if action in _NAMED and not name:
        raise InvalidInput(f"pass {action} without a name", user_message=_USAGE)
    if action == "list":
        paused = await passes.paused(campaign)
        lines = [f"passes of {campaign}" + (" (paused)" if paused else "") + ":"]
        for d in await passes.definitions(campaign):
            when = f", cron `{d.cron}`" if d.cron else ""
            lines.append(
                f"- {d.name}: {', '.join(d.triggers)}{when}; {len(d.nodes)} nodes. "
                f"{d.description}".rstrip()
            )
        return PassOutcome("\n".join(lines))
    if action == "show":
        return PassOutcome((await passes.report(campaign, str(name))).render())
    if action == "run":
        r = await passes.run(campaign, str(name), trigger="requested")
        return PassOutcome(
            f"pass {r.pass_id} on {campaign}: {r.status}"
            + (f" ({r.reason})" if r.reason else "")
            + f"; {r.documents_done} documents done, {r.documents_failed} failed, "
            f"{r.documents_left} left; {r.node_executions} node executions, {r.model_calls} "
            f"model calls, {r.tokens} tokens, {r.facts} facts",
            ok=r.status in {"done", "idle"},
        )
    if action == "pause":
        await passes.pause(campaign)
        return PassOutcome(
            f"passes of {campaign} paused: changes wait until resumed; a requested run still runs"
        )
    resumed = await passes.resume(campaign)
    return PassOutcome(f"passes of {campaign} " + ("resumed" if resumed else "were not paused"))


def _parse(arg: str) -> dict[str, OptionValue]:
    """``run echo`` → action and name; a pass's name keeps its case."""
    words = arg.split()
    if not words:
        return {}
    if words[0].lower() not in ACTIONS or len(words) > 2:
        raise InvalidInput("bad pass", user_message=_USAGE)
    options: dict[str, OptionValue] = {"action": words[0].lower()}
    if len(words) == 2:
        options["name"] = words[1]
    return options


async def run(request: Request, scope: Scope) -> Reply:
    passes = scope.services.passes
    if passes is None:
        return Reply(text=NOT_RUNNING)
    action = request.string("action", "list")
    outcome = await pass_action(passes, action, scope.config.slug, request.string("name") or None)
    return Reply(text=outcome.text, title="Analysis passes")


command = Command(
    name="pass",
    group="gm",
    description="GM: the campaign's analysis passes: list, show one, run one now, pause, resume",
    run=run,
    options=(
        Option(
            "action",
            "string",
            "list the passes, show or run one, pause or resume autonomous runs",
            choices=ACTIONS,
            default="list",
        ),
        Option("name", "string", "show, run: the pass's name"),
    ),
    usage=(
        "`/pass list|show <name>|run <name>|pause|resume` — GM: the analysis passes (entities, summaries, motifs)",
    ),
    example="/pass run entities",
    gm_only=True,
    private=True,
    parse=_parse,
)
