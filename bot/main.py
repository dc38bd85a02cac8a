"""The composition root: settings → stores → models → engine → platform clients.

Everything is built inside ``async with`` lifetimes here and nowhere else; importing any module
of the project has no side effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from bot.settings import Settings
from liminalis.engine import Engine
from liminalis.ingest.indexer import IngestOptions
from liminalis.ports import Embedder, LanguageModel, Reranker
from liminalis.store.sqlite import Database

if TYPE_CHECKING:
    from bot.service import BotService
    from liminalis.answer import Responder
    from liminalis.memory.recall import MemoryModel
    from liminalis.retrieval.learned import DocumentRanker
    from liminalis.routing import Router

__all__ = [
    "open_service",
    "build_engine",
    "build_responder",
    "build_router",
    "build_service",
    "configure_logging",
    "load_reranker",
    "load_learned_ranker",
    "load_embedder",
    "load_models",
    "SHIPPED_RERANKER",
    "SHIPPED_RANKER",
    "SHIPPED_QUERY_ADAPTER",
    "SHIPPED_EMBEDDER",
    "resolve_embedder",
    "check_ranker_embedder",
]

_log = logging.getLogger(__name__)
MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
SHIPPED_RERANKER = MODELS_DIR / "reranker"
SHIPPED_RANKER = MODELS_DIR / "ranker"
SHIPPED_QUERY_ADAPTER = MODELS_DIR / "query-adapter"
SHIPPED_EMBEDDER = MODELS_DIR / "embedder"


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # pymilvus warns on every query iterator against Milvus Lite; it is not actionable.
    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    for noisy in ("httpx", "sentence_transformers", "discord.gateway"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _off(spec: str) -> bool:
    """A model setting that turns its stage off."""
    return spec.lower() in {"none", "off", ""}


def load_reranker(spec: str, *, int8: bool = False) -> Reranker | None:
    """``auto`` → the shipped model when present; ``none`` → off; else a CrossEncoder name/path.
    ``int8``: dynamic int8 quantization of its linear layers. About 1.5x faster on a CPU, but on
    the shipped model it moves the scores enough (rank correlation with fp32 0.85–0.88 over a
    query's candidates) to lose most of the stage's gain, so it is off by default."""
    if _off(spec):
        return None
    path = spec
    if spec == "auto":
        if not (SHIPPED_RERANKER / "config.json").exists():
            _log.info("no shipped reranker at %s: rerank stage off", SHIPPED_RERANKER)
            return None
        path = str(SHIPPED_RERANKER)
    from liminalis.adapters.cross_encoder import CrossEncoderReranker

    return CrossEncoderReranker(path, quantize=int8)


def load_learned_ranker(spec: str) -> DocumentRanker | None:
    """``auto`` → the shipped ranker (models/ranker); ``none`` → off; else a ranker.json path.
    A missing or broken model logs once and leaves the fused order."""
    from liminalis.retrieval.learned import load_ranker

    if _off(spec):
        return None
    return load_ranker(SHIPPED_RANKER if spec == "auto" else spec)


def resolve_embedder(spec: str) -> str:
    """``auto`` → the shipped fine-tuned embedder (models/embedder) when present, else the
    bundled all-MiniLM-L6-v2; anything else is a sentence-transformers name or path."""
    from liminalis.adapters.sentence_transformers import BUNDLED_MINILM

    if spec != "auto":
        return spec
    if (SHIPPED_EMBEDDER / "modules.json").exists():
        return str(SHIPPED_EMBEDDER)
    _log.info("no shipped embedder at %s: %s", SHIPPED_EMBEDDER, BUNDLED_MINILM)
    return BUNDLED_MINILM


def load_embedder(spec: str = "auto", adapter: str = "auto") -> Embedder:
    """The sentence-transformers embedder ``spec`` (see :func:`resolve_embedder`), its query
    vectors mapped by the query adapter (``auto`` → the shipped one, if it was fit for this
    embedder; ``none`` → off; else a path). An explicitly named adapter fit for another
    embedder, or a missing or broken one, leaves plain query vectors and logs once."""
    from liminalis.adapters.sentence_transformers import SentenceTransformerEmbedder
    from liminalis.retrieval.query_adapter import adapt, load_query_adapter

    embedder = SentenceTransformerEmbedder(resolve_embedder(spec))
    if _off(adapter):
        return embedder
    loaded = load_query_adapter(SHIPPED_QUERY_ADAPTER if adapter == "auto" else adapter)
    if adapter == "auto" and loaded is not None and loaded.base_model != embedder.model_id:
        # The shipped adapter serves the bundled embedder; the shipped fine-tuned one needs none.
        _log.info("shipped query adapter is for %s: plain query vectors", loaded.base_model)
        return embedder
    return adapt(embedder, loaded)


def check_ranker_embedder(ranker: DocumentRanker | None, embedder: Embedder) -> bool:
    """Whether the learned ranker was fit on this embedder's dense scores; logs a warning if
    not. The ranker still runs (its lexical features carry most of its weight), but its dense
    weights are calibrated to another model: refit it with ``bench.train_ranker --embedder``."""
    trained_on = getattr(ranker, "embedder", "")
    if not trained_on or trained_on == embedder.model_id:
        return True
    _log.warning(
        "learned ranker was fit on %s's dense scores, this service embeds with %s: "
        "refit it (python -m bench.train_ranker --embedder ...)",
        trained_on,
        embedder.model_id,
    )
    return False


def load_models(settings: Settings) -> tuple[Embedder, DocumentRanker | None, Reranker | None]:
    """The embedder, learned ranker and reranker ``settings`` name, with their weights in memory
    (blocking: seconds of torch). Loaded here, at start, so the first question or ingest does
    not pay for it; a reranker that fails to load is kept and fails soft on use (logged once)."""
    embedder = load_embedder(settings.embedder, settings.query_adapter)
    _ = embedder.dim  # loads the weights (the dimension is read from the model)
    ranker = load_learned_ranker(settings.ranker)
    check_ranker_embedder(ranker, embedder)
    reranker = load_reranker(settings.reranker, int8=settings.reranker_int8)
    from liminalis.context.tokens import default_counter

    default_counter()  # the prompt's token counter (a tokenizer.json), read once per process
    load = getattr(reranker, "load", None)
    if callable(load):
        try:
            load()
        except Exception as exc:
            _log.warning(
                "reranker %s did not load (%s): the rerank stage keeps the fused order",
                getattr(reranker, "model_id", "?"),
                exc,
            )
    return embedder, ranker, reranker


@contextlib.asynccontextmanager
async def build_engine(settings: Settings) -> AsyncIterator[Engine]:
    """Open the database, vector store and models; close them all on exit. The models load in
    a worker thread: the event loop keeps serving (a platform's heartbeat, other bots) meanwhile."""
    from liminalis.adapters.milvus import MilvusVectorStore

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # The engine's CPU work runs in worker threads that hold the GIL while they compute; the
    # event loop waits up to one switch interval per runnable thread each time it wants the GIL
    # back. 1 ms instead of CPython's 5 ms keeps it answering under a burst of questions, for a
    # little switching overhead.
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))
    async with Database(settings.sqlite_path) as db:
        embedder, ranker, reranker = await asyncio.to_thread(load_models, settings)
        store = MilvusVectorStore(settings.resolved_milvus_uri, token=settings.milvus_token)
        engine = Engine(
            db=db,
            store=store,
            embedder=embedder,
            reranker=reranker,
            ranker=ranker,
            campaigns_dir=settings.campaigns_dir,
            uploads_dir=settings.data_dir / "uploads",
            ingest_options=IngestOptions(
                contextual=settings.contextual, max_bytes=settings.max_upload_bytes
            ),
            memory=_memory(db, settings),
            memory_enabled=settings.memory_enabled,
        )
        try:
            yield engine
        finally:
            await engine.close()


def _memory(db: Database, settings: Settings) -> MemoryModel:
    from liminalis.context.rolling import SystemClock
    from liminalis.errors import ConfigError
    from liminalis.memory.recall import MemoryModel, MemoryParams
    from liminalis.store.graph import MemoryStore

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
    from liminalis.answer import Responder

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
    router = build_router(settings, engine.database, model, owner=owner)
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


def build_router(
    settings: Settings, db: Database, model: LanguageModel, *, owner: str = "serve"
) -> Router:
    """The one gate of every model call: ``settings``' roles, daily limit, concurrency, share
    and default credits, over ``model``."""
    from liminalis.clock import SystemClock
    from liminalis.routing import Limits, Router
    from liminalis.spend import DailyTokenGate

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
    from bot.service import BotService

    return BotService(
        engine,
        responder=build_responder(settings, engine, owner=owner),
        max_upload_bytes=settings.max_upload_bytes,
        default_campaign=settings.default_campaign,
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
