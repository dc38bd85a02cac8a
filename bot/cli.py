"""``liminalis`` command line: ingest, ask, chat, explain, memory, pass, log, models, credits,
spend, health, doctor, serve. Training is tooling, not
the product: ``python -m bench.train_ranker`` (and ``train_reranker``, ``train_query_adapter``,
``train_embedder``) from a checkout."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from bot.commands.log import DAYS
from bot.commands.passes import pass_action
from bot.console import ConsoleAdapter, format_reply, save_files
from bot.health import doctor, health
from bot.logs import quiet_native_logs
from bot.main import build_engine, check_database, configure_logging, open_passes, open_service
from bot.serve import serve
from bot.settings import Settings
from liminalis import models
from liminalis.clock import SystemClock
from liminalis.errors import ConfigError, LiminalisError
from liminalis.lens import Lens
from liminalis.passes import parse_definition
from liminalis.progress import PROGRESS_MODES, ProgressReporter, ProgressWatcher
from liminalis.routing import spend_report
from liminalis.store.sqlite import Database

if TYPE_CHECKING:
    from liminalis.engine import Engine
    from liminalis.passes import Passes, RunResult
    from liminalis.types import IngestReport

__all__ = ["log_command", "main", "pass_command", "transfer_command"]

_log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    """The command line: one sub-command per stage below, each adding its own commands."""
    p = argparse.ArgumentParser(
        prog="liminalis", description="Campaign-grounded answers for tabletop groups."
    )
    p.add_argument(
        "--reset",
        action="store_true",
        help="start over when the database was lost (missing or empty beside a data folder that "
        "held one): the old database and vector store are moved aside, nothing is deleted",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _index_commands(sub)
    _question_commands(sub)
    _gm_commands(sub)
    _ops_commands(sub)
    return p


def _index_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """What builds a campaign's index: ingest, reindex, the memory's stats."""
    ing = sub.add_parser("ingest", help="ingest new and changed documents of a campaign")
    ing.add_argument("--campaign", required=True)
    ing.add_argument(
        "path", nargs="?", type=Path, help="file or folder inside the campaign (default: all)"
    )
    ing.add_argument("--json", action="store_true", help="print one JSON report")
    ing.add_argument(
        "--no-passes",
        action="store_true",
        help="do not wait for the analysis passes (entities, summaries, motifs) after ingesting",
    )
    _progress_option(ing)

    rx = sub.add_parser(
        "reindex",
        help="build a campaign's next vector generation while the current one answers; publish "
        "it when every document is written",
    )
    rx.add_argument("--campaign", required=True)
    rx.add_argument(
        "--embedder", default=None, help="build with this embedder (default: LIMINALIS_EMBEDDER)"
    )
    rx.add_argument(
        "--rollback",
        action="store_true",
        help="serve the previous generation again; the tick does not build the one it replaces "
        "until the next reindex",
    )
    rx.add_argument("--status", action="store_true", help="print how far a build has come")
    _progress_option(rx)

    mem = sub.add_parser(
        "memory", help="the campaign memory: `memory stats` (graph size and history)"
    )
    mem.add_argument("action", choices=["stats"])
    mem.add_argument("--campaign", required=True)


def _question_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Asking from a terminal: one question, a chat, an explanation of the ranking."""
    ask = sub.add_parser("ask", help="ask one question and print the answer with sources")
    ask.add_argument("--campaign", required=True)
    ask.add_argument("--lens", default="players", help="gm, players, or players,<personal lens>")
    ask.add_argument("question")
    ask.add_argument(
        "--passages", action="store_true", help="print the retrieved bundle instead of an answer"
    )

    chat = sub.add_parser("chat", help="console chat (the embedded default adapter)")
    chat.add_argument("--campaign", default=None)
    chat.add_argument("--lens", default="players")

    ex = sub.add_parser("explain", help="which stage each relevant document reached")
    ex.add_argument("--campaign", required=True)
    ex.add_argument("question")
    ex.add_argument("--relevant", nargs="*", default=[])
    ex.add_argument("--lens", default="gm")


def _gm_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """A GM's work: passes, models, credits and spend, the question log, the wall's review."""
    ps = sub.add_parser(
        "pass",
        help="analysis passes: `pass list|show NAME|run NAME|save FILE|pause|resume --campaign S`",
    )
    ps.add_argument("action", choices=["list", "show", "run", "save", "pause", "resume"])
    ps.add_argument("name", nargs="?", help="the pass (show, run) or a JSON/TOML file (save)")
    ps.add_argument("--campaign", required=True)
    _progress_option(ps)

    sub.add_parser("models", help="print the model of each role (LIMINALIS_MODEL_<ROLE>)")

    cred = sub.add_parser(
        "credits", help="a campaign's background credits (tokens): show, or top up with --add"
    )
    cred.add_argument("--campaign", required=True)
    cred.add_argument("--add", type=int, default=None, metavar="N", help="add N tokens")

    spend = sub.add_parser(
        "spend", help="a campaign's model spend by role, pass and node (from the call log)"
    )
    spend.add_argument("--campaign", required=True)
    spend.add_argument("--days", type=int, default=1, help="UTC days back, today included")
    lg = sub.add_parser(
        "log", help="what players asked, the gaps in the notes, the documents they ask about"
    )
    lg.add_argument("--campaign", required=True)
    lg.add_argument("--days", type=int, default=7, help="how many days back (1-90; default 7)")

    rv = sub.add_parser(
        "review", help="what the wall held back as GM notes by habit, and your word on each"
    )
    rv.add_argument("--campaign", required=True)
    decide = rv.add_mutually_exclusive_group()
    decide.add_argument("--show", metavar="ID", help="show a held section to players")
    decide.add_argument("--keep", metavar="ID", help="keep a held section GM-only")


def _ops_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Running and reaching the service: serve, health, doctor, MCP, export and import."""
    sub.add_parser("serve", help="run the Discord and/or Slack bots that have tokens")

    # operations: what they print is the answer
    hl = sub.add_parser(
        "health",
        help="exit 0 when the service is healthy, else 1 with one line per problem",
    )
    hl.add_argument(
        "--serve",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check the running serve's status file (default; --no-serve: the files only)",
    )
    hl.add_argument("--deep", action="store_true", help="also load the models (seconds of torch)")
    hl.add_argument("-v", "--verbose", action="store_true", help="print every check")
    doc = sub.add_parser(
        "doctor", help="check the setup: what is off, what is broken, and how to fix it"
    )
    doc.add_argument(
        "--offline", action="store_true", help="do not ask Discord or Slack to accept the tokens"
    )
    doc.add_argument("--deep", action="store_true", help="also load the models (seconds of torch)")

    # reach: MCP clients, export and import
    mcp = sub.add_parser(
        "mcp", help="serve a campaign to MCP clients (stdio, or streamable HTTP with --http)"
    )
    mcp.add_argument("--campaign", required=True)
    mcp.add_argument(
        "--lens", default="players", help="fixed for the server: gm, players, players,<lens>"
    )
    mcp.add_argument("--http", metavar="HOST:PORT", help="serve http://HOST:PORT/mcp")

    exp = sub.add_parser("export", help="write a campaign and all its state to one zip file")
    exp.add_argument("--campaign", required=True)
    exp.add_argument("--out", required=True, type=Path)

    imp = sub.add_parser("import", help="add a campaign from an export (and index it)")
    imp.add_argument("file", type=Path)
    imp.add_argument("--campaign", default=None, help="its slug here (default: the exported one)")
    imp.add_argument(
        "--no-passes",
        action="store_true",
        help="do not derive the knowledge again now (the passes do at the next start)",
    )
    _progress_option(imp)


def _progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        choices=PROGRESS_MODES,
        default="auto",
        help="documents done, rate and time left on stderr: auto (a line on a terminal, nothing "
        "otherwise; the default), json (one JSON object a line), off",
    )


def _reporter(args: argparse.Namespace) -> ProgressReporter:
    """The long jobs' progress on stderr, as ``--progress`` asks (``auto`` where it has none)."""
    return ProgressReporter(sys.stderr, mode=getattr(args, "progress", "auto"))


@contextlib.asynccontextmanager
async def _drawing(reporter: ProgressReporter) -> AsyncIterator[ProgressReporter]:
    """End the progress line however the job ends, so an error prints on a line of its own."""
    try:
        yield reporter
    finally:
        reporter.close()


def _lens(spec: str) -> frozenset[str]:
    names = {x.strip().lower() for x in spec.split(",") if x.strip()}
    if "gm" in names:
        return frozenset({"gm"})
    return frozenset(names | {"players"})


async def _run(args: argparse.Namespace) -> int:
    """Run one command: those that need no engine first, then the engine's, by name."""
    settings = Settings.from_env()
    configure_logging(
        "WARNING"
        if args.command in {"ask", "chat", "ingest", "explain", "log"}
        else settings.log_level
    )
    if (code := await _run_without_engine(args, settings)) is not None:
        return code
    command = _ENGINE_COMMANDS.get(args.command)
    if command is None:
        return 2
    # The job's progress display: the engine's boards tell it, and the passes a command waits
    # for are handed it from ``args.reporter``. Closed last, so a job that fails ends its line
    # before the error is printed.
    reporter = args.reporter = _reporter(args)
    async with build_engine(settings, reset=args.reset) as engine, _drawing(reporter):
        if args.command != "chat":  # a line redrawn at the prompt would cut into the talk
            engine.watch_progress(reporter)
        return await command(args, settings, engine)


async def _run_without_engine(args: argparse.Namespace, settings: Settings) -> int | None:
    """The commands that open no engine (and load no model weights); ``None`` for the others."""
    if args.command == "serve":
        return await serve(settings, reset=args.reset)
    if args.command == "models":
        print(settings.role_table().render())
        return 0
    if args.command in {"credits", "spend"}:
        return await _ledger(args, settings)
    if args.command in {"health", "doctor"}:  # what they print is the output: no log lines
        logging.getLogger().setLevel(logging.WARNING)
    if args.command == "health":  # no engine, no model weights (unless --deep)
        return await health(settings, serve=args.serve, deep=args.deep, verbose=args.verbose)
    if args.command == "doctor":
        return await doctor(settings, verify=not args.offline, deep=args.deep)
    return None


async def _ingest(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis ingest``: the report (``--json``: as JSON), then the knowledge passes."""
    path = args.path.resolve() if args.path else None
    report = await engine.ingest(args.campaign, path)
    ran = (
        []
        if args.no_passes
        else await _knowledge_passes(settings, engine, args.campaign, watch=args.reporter)
    )
    if args.json:
        print(json.dumps({**report.as_dict(), "passes": [_run_dict(r) for r in ran]}))
        return 0
    for line in await ingest_lines(engine, args.campaign, report):
        print(line)
    if ran:
        print(_passes_line(ran))
    return 0


async def _ask(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis ask``: one question, answered as the chat would (or its passages)."""
    lens = _lens(args.lens)

    async with (
        open_service(settings, engine, owner="cli") as service,
        open_passes(engine, service.responder.router, listen=True) as passes,
    ):
        if await engine.ensure_indexed(args.campaign, announce=_announce, prewarm=False):
            await passes.idle()  # a first index: its knowledge too, before answering
        if args.passages:
            bundle = await engine.retrieve(args.campaign, args.question, lens)
            for doc in bundle.documents:
                print(f"## {doc.title}{' (pinned)' if doc.pinned else ''}\n{doc.text}\n")
            return 0
        reply = await ConsoleAdapter(service, campaign=args.campaign, lens=args.lens).ask(
            args.question
        )
    saved = await asyncio.to_thread(save_files, reply, settings.data_dir / "files")
    print(format_reply(reply, saved))
    return 1 if reply.error else 0


async def _explain(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis explain``: which stage each relevant document reached."""
    ex = await engine.explain(
        args.campaign, args.question, relevant=args.relevant, lens=_lens(args.lens)
    )
    print(ex.render())
    return 0


async def _memory(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis memory stats``: the campaign memory's size and history."""
    await engine.ensure_indexed(args.campaign, announce=_announce, prewarm=False)
    if engine.memory is None:
        print("error: no campaign memory configured", file=sys.stderr)
        return 2
    stats = await engine.memory_stats(args.campaign)
    print(json.dumps(stats, indent=2, sort_keys=True))
    return 0


async def _pass(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis pass``: list, show, run, save, pause or resume a pass."""
    await engine.campaign(args.campaign)  # an unknown campaign fails here, named
    async with (
        open_service(settings, engine) as service,
        open_passes(engine, service.responder.router) as passes,
    ):
        passes.watch_progress(args.reporter)
        return await pass_command(passes, args.action, args.campaign, args.name)


async def _mcp(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis mcp``: serve the campaign to MCP clients through one fixed lens."""
    from bot.mcp import serve as serve_mcp

    return await serve_mcp(
        settings,
        engine,
        campaign=args.campaign,
        lens=Lens(_lens(args.lens)),
        http=args.http,
    )


async def _transfer(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis export`` and ``import``: one zip file per campaign."""
    rederive = args.command == "import" and not args.no_passes
    return await transfer_command(
        engine,
        args,
        derive=partial(_knowledge_passes, settings, engine, watch=args.reporter)
        if rederive
        else None,
    )


async def _chat(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis chat``: the console adapter, passes running in the background."""
    campaign = args.campaign or settings.default_campaign
    try:
        async with (
            open_service(settings, engine, owner="cli") as service,
            open_passes(engine, service.responder.router, listen=True) as passes,
        ):
            service.passes = passes  # `/pass` at the prompt
            # A first index starts the passes itself; otherwise what is still pending
            # (an interrupted `liminalis ingest`, a pause lifted) runs in the background.
            if not await engine.ensure_indexed(campaign, announce=_announce):
                passes.on_ingested(campaign)
            service.default_campaign = campaign
            await ConsoleAdapter(
                service,
                campaign=campaign,
                lens=args.lens,
                files_dir=settings.data_dir / "files",
            ).run()
    except asyncio.CancelledError:  # Ctrl-C
        _exit_within(_EXIT_GRACE_S, 130)
        raise
    return 0


async def _log_command(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    return await log_command(engine, args.campaign, args.days)


async def _review(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    return await review_command(engine, args.campaign, show=args.show, keep=args.keep)


EngineCommand = Callable[[argparse.Namespace, Settings, "Engine"], Awaitable[int]]
#: The commands that run on an engine, by name.
_ENGINE_COMMANDS: dict[str, EngineCommand] = {
    "reindex": lambda args, settings, engine: _reindex(args, settings, engine),
    "ingest": _ingest,
    "ask": _ask,
    "explain": _explain,
    "memory": _memory,
    "log": _log_command,
    "review": _review,
    "pass": _pass,
    "mcp": _mcp,
    "export": _transfer,
    "import": _transfer,
    "chat": _chat,
}


async def log_command(
    engine: Engine, campaign: str, days: int, *, out: Callable[[str], object] = print
) -> int:
    """``liminalis log``: the GM's view of the table, as ``/log`` shows it in chat."""
    if not 1 <= days <= DAYS:
        print(f"error: --days must be between 1 and {DAYS}", file=sys.stderr)
        return 2
    config = await engine.campaign(campaign)  # an unknown campaign fails here, named
    report = await engine.question_report(config.slug, days=days)
    out(report.render(name=config.name))
    return 0


async def ingest_lines(engine: Engine, slug: str, report: IngestReport) -> list[str]:
    """What a plain ``liminalis ingest`` prints: the counts, what was skipped, and — when the
    wall held sections back by habit that await the GM's word — where to review them."""
    d = report.as_dict()
    lines = [
        f"{d['documents']} documents: +{d['passages_added']} -{d['passages_removed']} "
        f"={d['passages_unchanged']} passages; embedded {d['embedded']} passages and "
        f"{d['windows_embedded']} windows in {d['seconds']:.1f}s"
    ]
    lines += [f"  skipped {s.path}: {s.reason}" for s in report.skipped]
    awaiting = await engine.review.awaiting(slug, report.files)
    if awaiting:
        lines.append(
            f"{awaiting} section{'s' if awaiting != 1 else ''} held back as GM notes: "
            f"`liminalis review --campaign {slug}`"
        )
    return lines


async def review_command(
    engine: Engine,
    campaign: str,
    *,
    show: str | None = None,
    keep: str | None = None,
    out: Callable[[str], object] = print,
) -> int:
    """``liminalis review``: the queue ``/review`` shows in chat, and the host's word on one."""
    config = await engine.campaign(campaign)  # an unknown campaign fails here, named
    if show or keep:
        item = await engine.review_decide(
            config.slug, show or keep or "", show=bool(show), by="cli"
        )
        verb = "shown to players" if show else "kept GM-only"
        out(f"{item.path} line {item.line} ({item.rule}): {verb}")
        return 0
    queue = await engine.review.queue(config.slug)
    if not queue:
        out("nothing awaits review")
    for i in queue:
        out(f"{i.key}  {i.path}:{i.line}  {i.rule}\n    {i.excerpt[:160]}")
    return 0


async def transfer_command(
    engine: Engine,
    args: argparse.Namespace,
    *,
    out: Callable[[str], object] = print,
    derive: Callable[[str], Awaitable[list[RunResult]]] | None = None,
) -> int:
    """``liminalis export`` and ``liminalis import``: say what was written. ``derive`` runs the
    imported campaign's passes (an import takes no derived knowledge from an archive)."""
    if args.command == "export":
        ex = await engine.export_campaign(args.campaign, args.out)
        out(
            f"exported {ex.campaign} to {ex.path}: {ex.documents} documents, "
            f"{sum(ex.rows.values())} rows in {len(ex.rows)} tables, {ex.embeddings} cached "
            f"vectors, {ex.files} files"
        )
        for s in ex.skipped:
            out(f"  left out {s}")
        return 0
    im = await engine.import_campaign(args.file, args.campaign)
    how = (
        "every vector from the export's cache"
        if im.same_embedder
        else f"re-embedded {im.embedded} texts with this bot's embedder"
    )
    out(
        f"imported {im.campaign}: {im.documents} documents, "
        f"{sum(im.rows.values())} rows, {im.files} files; indexed with {how}"
    )
    for note in im.notes:
        out(f"  {note}")
    ran = await derive(im.campaign) if derive is not None else []
    if ran:
        out(_passes_line(ran))
    return 0


async def pass_command(
    passes: Passes,
    action: str,
    campaign: str,
    name: str | None,
    *,
    out: Callable[[str], object] = print,
) -> int:
    """``liminalis pass …``: list, show (with the last run's trace summary), run now, save a
    definition file, pause or resume a campaign's autonomous runs. Everything but ``save`` is
    :func:`bot.commands.passes.pass_action`, so ``/gm pass`` in chat says what this prints."""
    if action in {"show", "run", "save"} and not name:
        print(
            f"error: `pass {action}` needs a {'file' if action == 'save' else 'pass name'}",
            file=sys.stderr,
        )
        return 2
    if action == "save":
        text = await asyncio.to_thread(Path(str(name)).read_text, encoding="utf-8")
        fmt = "toml" if str(name).endswith(".toml") else "json"

        definition = parse_definition(text, format=fmt)
        changed = await passes.save(campaign, definition)
        out(f"pass {definition.name} {'saved' if changed else 'unchanged'}")
        return 0
    outcome = await pass_action(passes, action, campaign, name)
    out(outcome.text)
    return 0 if outcome.ok else 1


async def _ledger(args: argparse.Namespace, settings: Settings) -> int:
    """``credits`` and ``spend``: the database only (no models loaded)."""
    await check_database(settings, reset=args.reset)
    async with Database(settings.sqlite_path) as db:
        known = args.campaign in await db.campaigns.slugs()
        if not known and not (settings.campaigns_dir / args.campaign).is_dir():
            print(f"error: no campaign {args.campaign!r}", file=sys.stderr)
            return 2
        default = settings.campaign_credits
        if args.command == "credits":
            if args.add is not None:
                balance = await db.credits.add(args.campaign, args.add, default=default)
                print(f"{args.campaign}: {args.add:+,} tokens; background credits now {balance:,}")
            else:
                balance = await db.credits.balance(args.campaign, default=default)
                paused = await db.credits.paused(args.campaign)
                print(
                    f"{args.campaign}: background credits {balance:,} tokens"
                    + (" (autonomous background work paused)" if paused else "")
                )
            return 0
        if args.days < 1:
            print("error: --days must be at least 1", file=sys.stderr)
            return 2
        report = await spend_report(
            db, args.campaign, days=args.days, clock=SystemClock(), default_credits=default
        )
        print(report.render())
        return 0


async def _knowledge_passes(
    settings: Settings, engine: Engine, campaign: str, *, watch: ProgressWatcher | None = None
) -> list[RunResult]:
    """Run the campaign's passes now and wait for them (after ``liminalis ingest``), so the
    console that follows has its entities, summaries and overview: model-backed when a model is
    configured, each run within its definition's caps. ``watch`` is told how far each run has
    come."""
    async with (
        open_service(settings, engine, owner="cli") as service,
        open_passes(engine, service.responder.router) as passes,
    ):
        if watch is not None:
            passes.watch_progress(watch)
        return await passes.run_triggered(campaign, "changed")


def _run_dict(r: RunResult) -> dict[str, object]:
    return {
        "pass": r.pass_id,
        "status": r.status,
        "documents_done": r.documents_done,
        "documents_failed": r.documents_failed,
        "documents_left": r.documents_left,
        "model_calls": r.model_calls,
        "tokens": r.tokens,
    }


def _passes_line(ran: list[RunResult]) -> str:
    """One line for the passes an ingest waited for: each pass's documents, and the spend."""
    parts = [
        f"{r.pass_id} {r.documents_done} done"
        + (f", {r.documents_failed} failed" if r.documents_failed else "")
        + (f", {r.documents_left} left ({r.reason})" if r.documents_left else "")
        if r.status != "idle"
        else f"{r.pass_id} up to date"
        for r in ran
    ]
    calls = sum(r.model_calls for r in ran)
    tokens = sum(r.tokens for r in ran)
    return f"passes: {'; '.join(parts)}" + (
        f" ({calls} model calls, {tokens} tokens)" if calls else ""
    )


#: After Ctrl-C in the chat, the seconds the engine has to close before the process leaves
#: anyway. Closing waits for Milvus Lite's background work on a collection written moments
#: before (index builds, compaction): seconds, and on a loaded machine over 20 s, while the
#: person who pressed Ctrl-C waits at a dead prompt.
_EXIT_GRACE_S = 3.0


def _exit_within(seconds: float, code: int) -> None:
    """End the process with ``code`` after ``seconds`` unless it ended first. Cutting the close
    short is as safe as a kill, which ingest is built to survive: at the prompt nothing is being
    written, SQLite commits are atomic, and Milvus Lite finishes its background work on the next
    open."""

    def leave() -> None:
        time.sleep(seconds)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)

    threading.Thread(target=leave, name="exit-grace", daemon=True).start()


async def _reindex(args: argparse.Namespace, settings: Settings, engine: Engine) -> int:
    """``liminalis reindex``: build, resume, report on or roll back a vector generation."""
    if args.rollback:
        profile = await engine.rollback_index(args.campaign)
        print(f"{args.campaign}: serving {profile} again")
        # The host learns here, not on a later surprise, that the tick now leaves the campaign be.
        print((await engine.reindex_status(args.campaign)).describe())
        return 0
    if not args.status:
        embedder = None
        if args.embedder:
            shipped = models.find_models_dir(settings.models_dir)
            embedder = await asyncio.to_thread(
                models.load_embedder, args.embedder, "none", shipped=shipped
            )
        report = await engine.reindex(args.campaign, embedder=embedder)
        print(
            f"{args.campaign}: {report.indexed} documents written, {report.resumed} from an "
            f"earlier run, {len(report.failed)} failed of {report.documents}; "
            + ("published" if report.published else report.note or "not published")
        )
        for doc_id, reason in report.failed:
            print(f"  failed {doc_id}: {reason}")
        if report.failed:
            print("  the previous generation keeps serving; run again to retry")
            return 1
    print((await engine.reindex_status(args.campaign)).describe())
    return 0


def _announce(campaign: str) -> None:
    """The console commands answer from a local folder, indexed first when it never was (or was
    built with another embedder)."""
    print(f"indexing {campaign} …", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    quiet_native_logs()  # before anything imports grpc: its C core reads these once
    # A terminal that is not UTF-8 (LANG=…ISO-8859-1) must get "?" for "—", not a traceback.
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except LiminalisError as exc:
        # The person at this terminal is the host: a setting's error names the setting.
        detail = (
            f" ({exc})" if isinstance(exc, ConfigError) and str(exc) != exc.user_message else ""
        )
        print(f"error: {exc.user_message}{detail}", file=sys.stderr)
        _log.debug("details: %s", exc)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
