"""The composition root: settings → stores → models → engine → platform clients.

Everything is built inside ``async with`` lifetimes here and nowhere else; importing any module
of the project has no side effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from bot.logs import route_logs
from bot.service import BotService
from bot.settings import Settings
from liminalis import models
from liminalis.answer import Responder
from liminalis.clock import SystemClock
from liminalis.engine import Engine
from liminalis.errors import ConfigError, StoreError
from liminalis.heap import FrozenHeap
from liminalis.ingest.indexer import IngestOptions
from liminalis.knowledge.passes import KnowledgePasses
from liminalis.memory.recall import MemoryModel, MemoryParams
from liminalis.passes import Passes
from liminalis.passes.ports import RouterCreditGate, RouterPassModel
from liminalis.ports import Embedder, LanguageModel, Reranker
from liminalis.routing import Limits, Router
from liminalis.spend import DailyTokenGate
from liminalis.store.graph import MemoryStore
from liminalis.store.sqlite import Database

if TYPE_CHECKING:
    from liminalis.retrieval.learned import DocumentRanker

__all__ = [
    "open_service",
    "build_engine",
    "build_responder",
    "build_router",
    "build_service",
    "check_database",
    "configure_logging",
    "load_models",
    "lost_database",
    "set_aside_lost_state",
]

_log = logging.getLogger(__name__)


def configure_logging(level: str = "INFO") -> None:
    """Our records at ``level`` on stderr; Milvus, gRPC, torch and transformers at DEBUG only
    (:mod:`bot.logs`: pymilvus warns on every query iterator against Milvus Lite, which is not
    the host's to act on)."""
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    route_logs()
    for noisy in ("httpx", "discord.gateway"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def load_models(settings: Settings) -> tuple[Embedder, DocumentRanker | None, Reranker | None]:
    """The models ``settings`` name, resolved against the models directory
    (:mod:`liminalis.models`) and loaded (blocking: run it in a thread)."""
    return models.load_models(
        embedder=settings.embedder,
        query_adapter=settings.query_adapter,
        ranker=settings.ranker,
        reranker=settings.reranker,
        reranker_int8=settings.reranker_int8,
        shipped=models.find_models_dir(settings.models_dir),
    )


def load_previous_embedders(settings: Settings) -> list[Embedder]:
    """The embedders of ``LIMINALIS_PREVIOUS_EMBEDDERS`` (blocking: run it in a thread)."""
    shipped = models.find_models_dir(settings.models_dir)
    return [
        models.load_embedder(spec, "none", shipped=shipped) for spec in settings.previous_embedders
    ]


def lost_database(settings: Settings) -> str | None:
    """Why the database must not be made anew here, or ``None``: it is missing or empty (0
    bytes, with no write-ahead log holding its pages) while the data folder holds what a
    database went with — a local vector store, uploads, campaigns made from chat. A new database
    there would silently start the links, pins, budgets and chat memory from nothing. Blocking."""
    db = settings.sqlite_path
    wal = db.with_name(db.name + "-wal")
    if (db.exists() and db.stat().st_size > 0) or (wal.exists() and wal.stat().st_size > 0):
        return None
    held = [
        what
        for what, path in (
            ("a vector store", _local_vector_store(settings)),
            ("uploads", settings.data_dir / "uploads"),
            ("campaigns made from chat", settings.data_dir / "campaigns"),
        )
        if path is not None and _holds_something(path)
    ]
    if not held:
        return None
    return (
        f"The database ({db.name}) is {'empty (0 bytes)' if db.exists() else 'missing'}, but the "
        f"data folder holds {' and '.join(held)}: links, pins, budgets and chat memory would start "
        "again from nothing. Restore the database from a backup, or start over with `liminalis "
        "--reset …` (the old database and vector store are moved aside, nothing is deleted)."
    )


def _local_vector_store(settings: Settings) -> Path | None:
    """The Milvus Lite file this data folder's vectors live in; ``None`` for a Milvus server."""
    uri = settings.resolved_milvus_uri
    return None if "://" in uri else Path(uri)


def _holds_something(path: Path) -> bool:
    if path.is_dir():
        return any(path.iterdir())
    return path.exists() and path.stat().st_size > 0


def set_aside_lost_state(settings: Settings, *, stamp: str) -> Path:
    """``--reset``: move the lost database and the local vector store into
    ``<data>/lost-<stamp>/``, so the next open starts both anew. Uploads and campaigns made from
    chat stay: they are the GM's files, indexed again from the new start. Blocking."""
    aside = settings.data_dir / f"lost-{stamp}"
    aside.mkdir(parents=True, exist_ok=True)
    db = settings.sqlite_path
    moved = [db.with_name(db.name + suffix) for suffix in ("", "-wal", "-shm")]
    if (store := _local_vector_store(settings)) is not None:
        moved.append(store)
    for path in moved:
        if path.exists():
            path.rename(aside / path.name)
    return aside


async def check_database(settings: Settings, *, reset: bool = False) -> None:
    """Before anything opens (and so creates) the database: refuse a lost one
    (:func:`lost_database`), or with ``reset`` set the old state aside to start anew.

    Raises:
        StoreError: the database was lost and ``reset`` is not given.
    """
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if (lost := await asyncio.to_thread(lost_database, settings)) is None:
        return
    if not reset:
        raise StoreError(lost, user_message=lost)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = await asyncio.to_thread(set_aside_lost_state, settings, stamp=stamp)
    _log.warning("--reset: the lost database and vector store were moved to %s", aside)


@contextlib.asynccontextmanager
async def build_engine(settings: Settings, *, reset: bool = False) -> AsyncIterator[Engine]:
    """Open the database, vector store and models; close them all on exit. The models load in
    a worker thread: the event loop keeps serving (a platform's heartbeat, other bots) meanwhile.

    Raises:
        StoreError: the database is missing or empty beside a data folder that held one
            (:func:`lost_database`); ``reset`` sets the old state aside and starts anew.
    """
    from liminalis.adapters.milvus import MilvusVectorStore

    await check_database(settings, reset=reset)
    # The engine's CPU work runs in worker threads that hold the GIL while they compute; the
    # event loop waits up to one switch interval per runnable thread each time it wants the GIL
    # back. 1 ms instead of CPython's 5 ms keeps it answering under a burst of questions, for a
    # little switching overhead.
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))
    async with Database(settings.sqlite_path) as db:
        embedder, ranker, reranker = await asyncio.to_thread(load_models, settings)
        # The models' and campaigns' long-lived objects out of the collector's sight: a full
        # collection holds every thread, the event loop's included, for as long as it walks
        # the heap (liminalis.heap).
        heap = FrozenHeap()
        heap.start()
        store = MilvusVectorStore(settings.resolved_milvus_uri, token=settings.milvus_token)
        route_logs()  # pymilvus and transformers, imported by now, to the root handler
        engine = Engine(
            db=db,
            store=store,
            embedder=embedder,
            reranker=reranker,
            ranker=ranker,
            heap=heap,
            campaigns_dir=settings.campaigns_dir,
            # `/campaign create` writes here: the data directory is what a host keeps (a
            # container's volume), the campaigns folder may be a read-only checkout.
            created_campaigns_dir=settings.data_dir / "campaigns",
            uploads_dir=settings.data_dir / "uploads",
            ingest_options=ingest_options(settings),
            memory=_memory(db, settings),
            memory_enabled=settings.memory_enabled,
            embedders=await asyncio.to_thread(load_previous_embedders, settings),
            generation_grace_s=settings.reindex_grace_hours * 3600.0,
        )
        try:
            yield engine
        finally:
            await engine.close()


def ingest_options(settings: Settings) -> IngestOptions:
    """How the host's settings index a campaign: contextual passages, sentence windows
    (``LIMINALIS_SENTENCE_WINDOWS``, off by default: docs/retrieval.md says when they pay), the
    largest file taken."""
    return IngestOptions(
        contextual=settings.contextual,
        windows=settings.sentence_windows,
        max_bytes=settings.max_upload_bytes,
    )


def _memory(db: Database, settings: Settings) -> MemoryModel:

    if settings.memory_orchestration not in {"loop", "resonance"}:
        raise ConfigError(
            f"LIMINALIS_MEMORY_ORCHESTRATION={settings.memory_orchestration!r}",
            user_message="LIMINALIS_MEMORY_ORCHESTRATION must be loop or resonance.",
        )
    return MemoryModel(
        MemoryStore(db),
        clock=SystemClock(),
        params=MemoryParams(orchestration=settings.memory_orchestration),
    )


def build_responder(settings: Settings, engine: Engine, *, owner: str = "serve") -> Responder:
    """The answer path: the Anthropic model when ``ANTHROPIC_API_KEY`` is set, else offline quotes.

    The model is reached through one :class:`~liminalis.routing.Router` (roles, the daily limit
    as its policy, credits, the call log); ``owner`` names this process's kind, so its next
    start settles the bookings a killed run of it left (``serve``; the console uses ``cli``).
    """
    if not settings.anthropic_api_key:
        _log.info("answers: offline quotes (ANTHROPIC_API_KEY is not set)")
        return Responder(engine, budget_tokens=settings.context_budget_tokens)
    from liminalis.adapters.anthropic import AnthropicModel

    roles = settings.role_table()
    model = AnthropicModel(
        settings.anthropic_api_key,
        base_url=settings.anthropic_base_url or None,
        models=dict(roles.models),
        timeout_s=settings.llm_timeout_s,
    )
    router = build_router(settings, engine.db, model, owner=owner)
    _log.info(
        "answers: %s via the Messages API (daily token budget: %s)",
        settings.model_reply,
        f"{settings.daily_token_budget:,}" if router.daily else "none",
    )
    return Responder(
        engine,
        router=router,
        budget_tokens=settings.context_budget_tokens,
        answer_deadline_s=settings.llm_timeout_s * 1.5,
    )


# -- passes ------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_passes(
    engine: Engine, router: Router | None, *, listen: bool = False
) -> AsyncIterator[Passes]:
    """The pass runner over the engine's database, with a lifetime.

    ``router``: the answer path's router (``None`` offline: passes that prompt a model wait with
    their documents pending; the others run). Every model call of a pass goes through it, so its
    one gate throttles a background fan-out behind the players' replies and its credits, daily
    share and pauses bound what passes spend; each definition's caps bound every run as well.
    The knowledge passes (:mod:`liminalis.knowledge.passes`) are seeded on every campaign's
    first trigger, model-backed when there is a model, and keep the campaign overviews.
    ``listen``: run the campaigns' ``changed`` passes after every ingest (``serve``, ``chat``).
    Background runs are cancelled on exit; what they had not finished stays pending."""
    passes = Passes(
        engine.db,
        clock=SystemClock(),
        model=RouterPassModel(router) if router is not None else None,
        gate=RouterCreditGate(router) if router is not None else None,
    )
    knowledge = KnowledgePasses(passes, model=router is not None).attach()
    if listen:
        engine.ingest_listeners.append(passes.on_ingested)
    try:
        yield passes
    finally:
        if listen:
            engine.ingest_listeners.remove(passes.on_ingested)
        await passes.close()
        knowledge.detach()


def build_router(
    settings: Settings, db: Database, model: LanguageModel, *, owner: str = "serve"
) -> Router:
    """The one gate of every model call: ``settings``' roles, daily limit, concurrency, share
    and default credits, over ``model``."""
    clock = SystemClock()
    gate = (
        DailyTokenGate(db, settings.daily_token_budget, clock=clock)
        if settings.daily_token_budget > 0
        else None
    )
    return Router(
        model,
        db=db,
        clock=clock,
        roles=settings.role_table(),
        daily=gate,
        limits=Limits(
            concurrency=settings.model_concurrency,
            background_share=settings.background_share,
            default_credits=settings.campaign_credits,
        ),
        owner=owner,
    )


def build_service(settings: Settings, engine: Engine, *, owner: str = "serve") -> BotService:
    """The one ``BotService`` every adapter (console, Discord, Slack) calls."""
    return BotService(
        engine,
        responder=build_responder(settings, engine, owner=owner),
        max_upload_bytes=settings.max_upload_bytes,
        default_campaign=settings.default_campaign,
        campaign_creators=frozenset(settings.campaign_creators),
    )


@contextlib.asynccontextmanager
async def open_service(
    settings: Settings, engine: Engine, *, owner: str = "serve"
) -> AsyncIterator[BotService]:
    """``build_service`` with a lifetime: the language-model client is closed on exit."""
    service = build_service(settings, engine, owner=owner)
    try:
        yield service
    finally:
        close = getattr(service.responder.model, "close", None)
        if close is not None:
            await close()
