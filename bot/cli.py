"""``liminalis`` command line: ingest, ask, chat, explain, memory, serve, train-reranker,
train-ranker, train-query-adapter."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from liminalis.errors import ConfigError, LiminalisError

__all__ = ["main"]

_log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="liminalis", description="Campaign-grounded answers for tabletop groups.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ing = sub.add_parser("ingest", help="ingest new and changed documents of a campaign")
    ing.add_argument("--campaign", required=True)
    ing.add_argument("path", nargs="?", type=Path, help="file or folder inside the campaign (default: all)")
    ing.add_argument("--json", action="store_true", help="print one JSON report")

    ask = sub.add_parser("ask", help="ask one question and print the answer with sources")
    ask.add_argument("--campaign", required=True)
    ask.add_argument("--lens", default="players", help="gm, players, or players,<personal lens>")
    ask.add_argument("question")
    ask.add_argument("--passages", action="store_true", help="print the retrieved bundle instead of an answer")

    chat = sub.add_parser("chat", help="console chat (the embedded default adapter)")
    chat.add_argument("--campaign", default=None)
    chat.add_argument("--lens", default="players")

    ex = sub.add_parser("explain", help="which stage each relevant document reached")
    ex.add_argument("--campaign", required=True)
    ex.add_argument("question")
    ex.add_argument("--relevant", nargs="*", default=[])
    ex.add_argument("--lens", default="gm")

    mem = sub.add_parser("memory", help="the campaign memory: `memory stats` (graph size and history)")
    mem.add_argument("action", choices=["stats"])
    mem.add_argument("--campaign", required=True)

    sub.add_parser("serve", help="run the Discord and/or Slack bots that have tokens")

    tr = sub.add_parser("train-reranker", help="train the project's cross-encoder reranker")
    tr.add_argument("args", nargs=argparse.REMAINDER)
    tl = sub.add_parser("train-ranker", help="train the learned document ranker (models/ranker)")
    tl.add_argument("args", nargs=argparse.REMAINDER)
    tq = sub.add_parser("train-query-adapter", help="fit the dense arm's query adapter (models/query-adapter)")
    tq.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _lens(spec: str) -> frozenset[str]:
    names = {x.strip().lower() for x in spec.split(",") if x.strip()}
    if "gm" in names:
        return frozenset({"gm"})
    return frozenset(names | {"players"})


async def _run(args: argparse.Namespace) -> int:
    from bot.main import build_engine, configure_logging
    from bot.settings import Settings

    settings = Settings.from_env()
    configure_logging("WARNING" if args.command in {"ask", "chat", "ingest", "explain"} else settings.log_level)
    if args.command == "serve":
        from bot.serve import serve

        return await serve(settings)
    async with build_engine(settings) as engine:
        if args.command == "ingest":
            path = args.path.resolve() if args.path else None
            report = await engine.ingest(args.campaign, path)
            if args.json:
                print(json.dumps(report.as_dict()))
            else:
                d = report.as_dict()
                print(f"{d['documents']} documents: +{d['passages_added']} -{d['passages_removed']} ={d['passages_unchanged']} passages; "
                      f"embedded {d['embedded']} passages and {d['windows_embedded']} windows in {d['seconds']:.1f}s")
                for s in report.skipped:
                    print(f"  skipped {s.path}: {s.reason}")
            return 0
        if args.command == "ask":
            lens = _lens(args.lens)
            await engine.ensure_indexed(args.campaign, announce=_announce)
            if args.passages:
                bundle = await engine.retrieve(args.campaign, args.question, lens)
                for d in bundle.documents:
                    print(f"## {d.title}{' (pinned)' if d.pinned else ''}\n{d.text}\n")
                return 0
            from bot.console import ConsoleAdapter, format_reply
            from bot.main import open_service

            async with open_service(settings, engine) as service:
                reply = await ConsoleAdapter(service, campaign=args.campaign, lens=args.lens).ask(args.question)
            print(format_reply(reply))
            return 1 if reply.error else 0
        if args.command == "explain":
            ex = await engine.explain(args.campaign, args.question, relevant=args.relevant, lens=_lens(args.lens))
            cat = await engine.retriever.catalog(args.campaign)
            print(ex.render({d: doc.title for d, doc in cat.documents.items()}))
            return 0
        if args.command == "memory":
            await engine.ensure_indexed(args.campaign, announce=_announce)
            if engine.memory is None:
                print("error: no campaign memory configured", file=sys.stderr)
                return 2
            cat = await engine.retriever.catalog(args.campaign)
            await engine.memory.graph(cat)
            stats = await engine.memory.store.stats(cat.campaign)
            stats["enabled"] = engine.memory_enabled
            print(json.dumps(stats, indent=2, sort_keys=True))
            return 0
        if args.command == "chat":
            from bot.console import ConsoleAdapter
            from bot.main import open_service

            campaign = args.campaign or settings.default_campaign
            await engine.ensure_indexed(campaign, announce=_announce)
            async with open_service(settings, engine) as service:
                service.default_campaign = campaign
                await ConsoleAdapter(service, campaign=campaign, lens=args.lens).run()
            return 0
    return 2


def _announce(campaign: str) -> None:
    """The console commands answer from a local folder, indexed first when it never was (or was
    built with another embedder)."""
    print(f"indexing {campaign} …", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    # A terminal that is not UTF-8 (LANG=…ISO-8859-1) must get "?" for "—", not a traceback.
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    args = _parser().parse_args(argv)
    if args.command == "train-reranker":
        from bench.train_reranker import main as train_main

        return train_main(args.args)
    if args.command == "train-ranker":
        from bench.train_ranker import main as train_ranker_main

        train_ranker_main(args.args)
        return 0
    if args.command == "train-query-adapter":
        from bench.train_query_adapter import main as train_adapter_main

        train_adapter_main(args.args)
        return 0
    try:
        return asyncio.run(_run(args))
    except LiminalisError as exc:
        # The person at this terminal is the host: a setting's error names the setting.
        detail = f" ({exc})" if isinstance(exc, ConfigError) and str(exc) != exc.user_message else ""
        print(f"error: {exc.user_message}{detail}", file=sys.stderr)
        _log.debug("details: %s", exc)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
