"""The engine facade every adapter calls: campaigns, ingest, retrieval, pins, explain.

It owns no platform knowledge and reads no environment: the composition root
(``bot/main.py``) builds it from settings and hands it its stores and models.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from liminalis.answer import Answer, Responder
from liminalis.campaign import (
    CampaignConfig,
    has_gm,
    is_blank,
    parse_campaign,
    read_campaign_text,
    validate_slug,
    walls_dropped,
)
from liminalis.campaign_file import GmRef, new_campaign_toml, slug_for, write_atomically
from liminalis.clock import SystemClock
from liminalis.context import DEFAULT_CONTEXT_TOKENS
from liminalis.errors import (
    ConfigError,
    InvalidInput,
    NotFound,
    NotReady,
    StoreError,
    UnknownCampaign,
)
from liminalis.generations import Generations, ReindexReport, ReindexStatus, RoutedStore
from liminalis.heap import LooseHeap
from liminalis.ingest.indexer import Indexer, IngestOptions
from liminalis.ingest.sections import source_of
from liminalis.knowledge.service import Knowledge
from liminalis.lens import GM, Lens, gm_lens, players_lens, visible
from liminalis.memory.recall import MemoryModel
from liminalis.ports import Clock, Embedder, Heap, LanguageModel, Reranker, VectorStore
from liminalis.progress import IndexProgress, ProgressBoard, ProgressWatcher
from liminalis.questions import QuestionLog, QuestionReport
from liminalis.recap import Recap, build_model_recap, build_recap
from liminalis.retrieval.browse import Match, cited_passage, richest_view, search_documents
from liminalis.retrieval.catalog import Catalog
from liminalis.retrieval.learned import DocumentRanker
from liminalis.retrieval.render import fallback_passages, render_document
from liminalis.retrieval.retriever import RetrievalParams, Retriever, Trace
from liminalis.review import ReviewItem, WallReview
from liminalis.scope import CampaignScope
from liminalis.store.sqlite import Database
from liminalis.text import Tokenizer, clean_text
from liminalis.transfer import (
    ExportReport,
    ImportReport,
    ImportTarget,
    export_campaign,
    import_campaign,
)
from liminalis.types import Bundle, IngestReport, SkippedFile, StageTrace
from liminalis.workers import run_cpu

__all__ = ["Engine", "Explanation", "Match", "CAMPAIGN_SCOPE", "MAX_QUERY_CHARS"]

_log = logging.getLogger(__name__)
#: How many tags ``create_campaign`` draws before it gives up (each taken one is drawn again).
_TAG_DRAWS = 8


def _tagged(base: str, tag: str) -> str:
    """``<base>-<tag>``, the base cut so the slug stays a slug (63 characters at most)."""
    return validate_slug(f"{base[: 62 - len(tag)].rstrip('-_')}-{tag}")


CAMPAIGN_SCOPE = "campaign"
MAX_QUERY_CHARS = 2000


@dataclass(frozen=True, slots=True)
class _Served:
    """The config a campaign is served with, and the file version it was decided on."""

    #: The stat signature of campaign.toml when this was decided (``()``: no file).
    signature: tuple[int, ...]
    config: CampaignConfig
    #: The text ``config`` was parsed from: the last good file (``None``: no file, defaults).
    text: str | None


def _file_signature(path: Path) -> tuple[int, ...]:
    """What moves when a file is written: its mtime, size and inode (a rename over it)."""
    try:
        st = path.stat()
    except OSError:
        return ()
    return (st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True, slots=True)
class Explanation:
    query: str
    stages: tuple[StageTrace, ...]
    bundle: Bundle
    reranked: bool
    #: Titles of the traced documents, as the asking lens may see them.
    titles: dict[str, str] = field(default_factory=dict)

    def render(self, titles: dict[str, str] | None = None) -> str:
        titles = self.titles if titles is None else titles
        lines = [
            f"Explain: {self.query!r}",
            f"reranker: {'applied' if self.reranked else 'not applied'}",
        ]
        for st in self.stages:
            lines.append(
                f"- {titles.get(st.doc_id, st.doc_id)} [{st.doc_id}]: {st.verdict()} — pin={st.pinned or '-'}, "
                f"dense={st.dense_rank or '-'}, lexical={st.lexical_rank or '-'}, "
                f"document={st.document_rank or '-'}, fused={st.fused_rank or '-'}, "
                f"learned={st.learned_rank or '-'}, reranked={st.reranked_rank or '-'}, rendered={'yes' if st.rendered else 'no'}"
            )
        t = ", ".join(f"{k} {v:.0f} ms" for k, v in self.bundle.timings_ms.items())
        lines.append(f"timings: {t}")
        return "\n".join(lines)


class Engine:
    """Platform-free entry point over one data directory."""

    def __init__(
        self,
        *,
        db: Database,
        store: VectorStore,
        embedder: Embedder,
        reranker: Reranker | None = None,
        ranker: DocumentRanker | None = None,
        campaigns_dir: Path = Path("campaigns"),
        params: RetrievalParams = RetrievalParams(),
        ingest_options: IngestOptions = IngestOptions(),
        tokenizer: Tokenizer = Tokenizer(),
        k1: float = 0.6,
        b: float = 0.4,
        uploads_dir: Path | None = None,
        memory: MemoryModel | None = None,
        memory_enabled: bool = False,
        created_campaigns_dir: Path | None = None,
        clock: Clock | None = None,
        embedders: Sequence[Embedder] = (),
        generation_grace_s: float = 7 * 86400.0,
        heap: Heap | None = None,
    ) -> None:
        """``embedders``: older embedders kept loaded so a campaign goes on answering from its
        serving generation while the next one is built (:mod:`liminalis.generations`);
        ``generation_grace_s``: how long a replaced generation is kept for a rollback;
        ``heap``: told before and after each rebuild of a campaign's snapshot
        (:mod:`liminalis.heap`)."""
        self.heap: Heap = heap if heap is not None else LooseHeap()
        self.db = db
        #: The campaign memory (liminalis.memory); it re-ranks retrieval only when enabled.
        self.memory = memory
        self.memory_enabled = memory_enabled
        self.uploads_dir = uploads_dir
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.campaigns_dir = campaigns_dir
        #: Where ``/campaign create`` puts a new campaign (the data directory's ``campaigns/``
        #: in the composition root); ``None``: ``campaigns_dir``.
        self.created_campaigns_dir = created_campaigns_dir
        #: What players asked: written by :meth:`answer`, read by :meth:`question_report`.
        # Players' 👎 on answers (the chat surface stores them beside its cards) join the log.
        self.questions = QuestionLog(db, clock=clock, feedback=db.cards)
        self._wire_search(
            store,
            embedder,
            reranker,
            ranker=ranker,
            params=params,
            ingest_options=ingest_options,
            tokenizer=tokenizer,
            k1=k1,
            b=b,
            embedders=embedders,
            clock=clock,
            generation_grace_s=generation_grace_s,
        )
        self._init_campaign_state()
        self._init_services(clock)

    def _wire_search(
        self,
        store: VectorStore,
        embedder: Embedder,
        reranker: Reranker | None,
        *,
        ranker: DocumentRanker | None,
        params: RetrievalParams,
        ingest_options: IngestOptions,
        tokenizer: Tokenizer,
        k1: float,
        b: float,
        embedders: Sequence[Embedder],
        clock: Clock | None,
        generation_grace_s: float,
    ) -> None:
        """The indexer, the generations and the retriever, wired to one router: each reaches a
        campaign's serving generation through it, so a re-index can build the next one beside
        it."""
        routed = RoutedStore(store)
        self.indexer = Indexer(
            self.db, routed, embedder, tokenizer=tokenizer, options=ingest_options
        )
        self.generations = Generations(
            self.db,
            store,
            routed=routed,
            indexer=self.indexer,
            embedders=embedders,
            clock=clock or SystemClock(),
            grace_s=generation_grace_s,
        )
        self.retriever = Retriever(
            self.db,
            routed,
            embedder,
            reranker,
            tokenizer=tokenizer,
            params=params,
            k1=k1,
            b=b,
            ranker=ranker,
        )
        self.retriever.embedder_for = self.generations.query_embedder

    def _init_campaign_state(self) -> None:
        """Per-campaign state: served configurations and why a newer one is not served, skipped
        files, and the locks that keep one campaign's loads, ingests and edits in turn."""
        self._configs: dict[str, _Served] = {}
        self._loading: dict[str, asyncio.Lock] = {}
        #: slug → why its campaign.toml as it is now cannot be read, while the last good version
        #: serves (``campaign``); shown to the campaign's GMs by ``/campaign status``.
        self.config_errors: dict[str, str] = {}
        #: slug → the walls its campaign.toml as it is now drops (or that it is missing or
        #: empty), while the last good version serves until a GM applies the file
        #: (:meth:`accept_campaign`) or restores it; shown to its GMs by ``/campaign status``.
        self.config_holds: dict[str, str] = {}
        self._skipped: dict[str, dict[str, str]] = {}  # slug → path → why (skipped_files)
        self._ensured: set[str] = set()
        self._ingesting: dict[str, asyncio.Lock] = {}
        self._editing: dict[str, asyncio.Lock] = {}
        self._creating = asyncio.Lock()
        self._answerer: Responder | None = None

    def _init_services(self, clock: Clock | None) -> None:
        """The engine's side services over its database: ingest listeners, index progress, the
        wall's review, the knowledge layer, and the background snapshot builds."""
        #: Called after every ingest (the scheduler's tick, an upload, the CLI) with the
        #: campaign and its report; the composition root adds ``Passes.on_ingested``, which
        #: starts the campaign's ``changed`` passes in the background. A listener must not
        #: block: the ingest's caller is waiting.
        self.ingest_listeners: list[Callable[[str, IngestReport], None]] = []
        self._clock: Clock = clock or SystemClock()
        self._progress = ProgressBoard(self._clock)
        #: The GM's review of what the wall held back by habit (liminalis.review).
        self.review = WallReview(self.db, clock=self._clock)
        #: The knowledge layer's read API over this engine's store (written by the passes).
        self.knowledge = Knowledge(self.db)
        #: slug → the background build of its snapshot after an ingest that changed it
        #: (``_prewarm_soon``), and the slugs changed again while one ran.
        self._prewarms: dict[str, asyncio.Task[None]] = {}
        self._prewarm_again: set[str] = set()
        self._closed = False

    # -- campaigns ---------------------------------------------------------------------------

    def campaign_root(self, slug: str) -> Path:
        return self.campaigns_dir / validate_slug(slug)

    async def campaign(self, slug: str) -> CampaignConfig:
        """The config that governs a campaign now (:meth:`_governing`), with the sections its
        GM chose to show of what the wall held back by habit (:mod:`liminalis.review`)."""
        config = await self._governing(slug)
        released = await self.review.released(config.slug)
        return replace(config, released=released) if released != config.released else config

    async def review_decide(self, slug: str, key: str, *, show: bool, by: str) -> ReviewItem:
        """Store a GM's word on a held section and, when it shows it, index the campaign again so
        players read it now (every file is read once: the released sections are part of the
        configuration a file row was read under)."""
        item = await self.review.decide(slug, key, show=show, by=by)
        if show:
            await self.ingest(slug)
        return item

    async def _governing(self, slug: str) -> CampaignConfig:
        """The config that governs a campaign now; raises ``UnknownCampaign``, or
        ``ConfigError`` for a campaign.toml that cannot be read when no good one was ever kept.

        The file is read again when its stat signature moves; what it says is applied only when
        it parses and drops no wall of the last good config (:func:`walls_dropped`), and a file
        missing or emptied after a good one is not applied either: a GM mid-edit, a copy half
        done, must never publish a GM folder on the next tick. Meanwhile the last good config
        serves (kept in the store, so a restart serves it too) and the campaign's GMs read why
        in ``/campaign status`` (:attr:`config_errors`, :attr:`config_holds`).
        """
        slug = validate_slug(slug)
        root = self.campaign_root(slug)
        # A stat or two of the campaign folder, on every request: cheaper than a thread hop.
        if not root.is_dir():  # noqa: ASYNC240
            row = await self.db.campaigns.get(slug)
            if row is None or not Path(row.root).is_dir():  # noqa: ASYNC240
                raise UnknownCampaign(
                    f"no campaign {slug}", user_message=f"No campaign named `{slug}`."
                )
            root = Path(row.root)
        signature = _file_signature(root / "campaign.toml")
        served = self._configs.get(slug)
        if served and served.signature == signature and served.config.root == root:
            return served.config
        async with self._loading.setdefault(slug, asyncio.Lock()):
            served = self._configs.get(slug)
            if served and served.signature == signature and served.config.root == root:
                return served.config
            return await self._load_config(slug, root, signature)

    async def _load_config(
        self, slug: str, root: Path, signature: tuple[int, ...]
    ) -> CampaignConfig:
        served = self._configs.get(slug)
        good = served if served is not None and served.config.root == root else None
        if good is None or good.text is None:
            good = await self._stored_config(slug, root) or good
        # Read and parsed in a worker: a GM's 20 MB file must not stall every chat on the loop.
        try:
            text = await asyncio.to_thread(read_campaign_text, root, slug)
            new = await asyncio.to_thread(parse_campaign, text or "", root, slug)
        except ConfigError as exc:
            if good is None:
                raise
            # A file caught mid-edit (or a typo saved): the last good config goes on serving,
            # rather than the campaign going offline for every player until the GM notices.
            self._configs[slug] = _Served(signature, good.config, good.text)
            self.config_errors[slug] = exc.detail
            self.config_holds.pop(slug, None)
            _log.warning("%s; the last good version of the file stays in use", exc.detail)
            return good.config
        if good is not None and good.text is not None:
            if text is None:
                dropped: tuple[str, ...] = ("the file is missing",)
            elif is_blank(text):
                dropped = ("the file is empty",)
            else:
                dropped = walls_dropped(good.config, new)
            if dropped:
                self._configs[slug] = _Served(signature, good.config, good.text)
                self.config_holds[slug] = "; ".join(dropped)
                self.config_errors.pop(slug, None)
                _log.warning(
                    "campaign.toml of %s: %s; the last good version stays in use until a GM "
                    "applies the file (/campaign accept) or restores it",
                    slug,
                    "; ".join(dropped),
                )
                return good.config
        return await self._apply_config(
            slug, signature, new, text, kept=good.text if good else None
        )

    async def _apply_config(
        self,
        slug: str,
        signature: tuple[int, ...],
        config: CampaignConfig,
        text: str | None,
        *,
        kept: str | None,
    ) -> CampaignConfig:
        """Serve ``config`` (parsed from ``text``) and keep ``text`` as the last good file."""
        self.config_errors.pop(slug, None)
        self.config_holds.pop(slug, None)
        if self.uploads_dir is not None:
            config = replace(config, uploads_root=self.uploads_dir / slug)
        self._configs[slug] = _Served(signature, config, text)
        if text is not None and text != kept:
            try:
                await self.db.configs.set(slug, text, at=self._clock.now().timestamp())
            except StoreError as exc:
                # The file serves all the same; only a restart would judge the next one against
                # an older kept version.
                _log.warning("campaign.toml of %s not kept in the store: %s", slug, exc)
        return config

    async def _stored_config(self, slug: str, root: Path) -> _Served | None:
        """The last good campaign.toml the store keeps for ``slug``, parsed; ``None`` if none."""
        try:
            text = await self.db.configs.get(slug)
        except StoreError as exc:
            _log.warning("the last good campaign.toml of %s cannot be read: %s", slug, exc)
            return None
        if text is None:
            return None
        try:
            config = await asyncio.to_thread(parse_campaign, text, root, slug)
        except ConfigError as exc:  # written by a release that read it otherwise
            _log.warning("the kept campaign.toml of %s no longer parses: %s", slug, exc.detail)
            return None
        if self.uploads_dir is not None:
            config = replace(config, uploads_root=self.uploads_dir / slug)
        return _Served((), config, text)

    async def accept_campaign(self, slug: str) -> tuple[CampaignConfig, tuple[str, ...]]:
        """A GM's word: apply campaign.toml as it is now, though it drops walls of the config
        that serves. Returns the config applied and the walls it dropped.

        Raises:
            ConfigError: the file cannot be read or parsed.
            InvalidInput: the file is missing, or names no GM (nobody could manage the campaign
                from chat any more).
        """
        served = await self.campaign(slug)
        root = served.root
        signature = _file_signature(root / "campaign.toml")
        text = await asyncio.to_thread(read_campaign_text, root, served.slug)
        if text is None:
            raise InvalidInput(
                f"accept without a campaign.toml in {served.slug}",
                user_message="campaign.toml is missing: restore it (the last good version serves "
                "meanwhile).",
            )
        new = await asyncio.to_thread(parse_campaign, text, root, served.slug)
        if not has_gm(new):
            raise InvalidInput(
                f"accept of a campaign.toml naming no GM in {served.slug}",
                user_message="campaign.toml as it is now names no GM, so nobody could manage the "
                "campaign from chat: add a GM to the file first.",
            )
        dropped = walls_dropped(served, new)
        async with self._loading.setdefault(served.slug, asyncio.Lock()):
            config = await self._apply_config(served.slug, signature, new, text, kept=None)
        _log.warning(
            "campaign.toml of %s applied by a GM%s",
            served.slug,
            f": {'; '.join(dropped)}" if dropped else "",
        )
        return config, dropped

    async def scope(
        self, campaign: str | CampaignConfig | CampaignScope, lens: Iterable[str]
    ) -> CampaignScope:
        """Resolve a request's scope once: the campaign's config (given, or loaded), the index
        checked ready, the catalog snapshot, and ``lens`` as a :class:`Lens`."""
        if isinstance(campaign, CampaignScope):
            return campaign if campaign.lens == Lens(lens) else replace(campaign, lens=Lens(lens))
        config = campaign if isinstance(campaign, CampaignConfig) else await self.campaign(campaign)
        await self.require_index(config.slug)
        catalog = await self.retriever.catalog(config.slug)
        return CampaignScope(config=config, catalog=catalog, lens=Lens(lens))

    async def register(self, config: CampaignConfig) -> None:
        """Register a campaign whose folder lives outside ``campaigns_dir`` (bench, tests)."""
        # No file signature matches it: the next ``campaign`` reads its folder (bench corpora
        # have no campaign.toml).
        self._configs[config.slug] = _Served((-1,), config, None)
        await self.db.campaigns.upsert(config.slug, str(config.root))

    async def create_campaign(
        self,
        name: str,
        *,
        gm: GmRef,
        slug: str | None = None,
        tag: Callable[[], str] | None = None,
    ) -> CampaignConfig:
        """Make a campaign named ``name`` (its slug from the name unless given) with ``gm`` its
        first GM: a folder under :attr:`created_campaigns_dir` with a ``campaign.toml``, written
        atomically and registered; nothing is indexed until its first document.

        Args:
            tag: when given, the slug is ``<slug>-<tag()>``, drawn again while taken: whoever
                creates from chat gets a campaign whatever others made, and so learns nothing
                of the campaigns they cannot see.

        Raises:
            InvalidInput: the name gives no slug, or a campaign of that slug exists (in any
                folder the engine reads), or ``tag`` drew only taken slugs.
        """
        name = clean_text(name).strip()
        base = validate_slug(slug) if slug else slug_for(name)
        parent = self.created_campaigns_dir or self.campaigns_dir
        # Lazily drawn: a tag is drawn again only while the slugs drawn are taken.
        candidates = (
            iter((base,)) if tag is None else (_tagged(base, tag()) for _ in range(_TAG_DRAWS))
        )
        async with self._creating:
            known = set(await self.list_campaigns())

            def free(candidate: str) -> bool:
                return candidate not in known and not (
                    (self.campaigns_dir / candidate).exists() or (parent / candidate).exists()
                )

            chosen = None
            for candidate in candidates:
                if await asyncio.to_thread(free, candidate):
                    chosen = candidate
                    break
            if chosen is None and tag is not None:
                raise InvalidInput(
                    f"no free tag for {base}",
                    user_message="No short name was free for that campaign: try again.",
                )
            if chosen is None:
                raise InvalidInput(
                    f"campaign {base} exists",
                    user_message=f"A campaign called `{base}` exists already: give yours another "
                    "name, or ask its GM to link this channel with `/campaign link "
                    f"{base}`.",
                )
            slug, root = chosen, parent / chosen
            text = new_campaign_toml(name or slug, gm)
            await asyncio.to_thread(write_atomically, root / "campaign.toml", text)
            await self.db.campaigns.upsert(slug, str(root))
            config = await asyncio.to_thread(parse_campaign, text, root, slug)
            async with self._loading.setdefault(slug, asyncio.Lock()):
                config = await self._apply_config(
                    slug, _file_signature(root / "campaign.toml"), config, text, kept=None
                )
        _log.info("campaign %s created at %s", slug, root)
        return config

    async def edit_campaign(self, slug: str, change: Callable[[str], str]) -> CampaignConfig:
        """Rewrite ``campaign.toml`` with ``change`` (its text → the new text, or an error),
        one edit of a campaign at a time, atomically; returns the config as it now reads. The
        file is read afresh, so an edit by hand since the last message is kept."""
        config = await self.campaign(slug)
        path = config.root / "campaign.toml"
        served = self._configs.get(config.slug)
        kept = served.text if served is not None else None

        def edit() -> tuple[tuple[int, ...], CampaignConfig, str] | None:
            text = read_campaign_text(config.root, config.slug)
            old = text or ""
            if kept is not None and (
                text is None
                or is_blank(old)
                or walls_dropped(config, parse_campaign(old, config.root, config.slug))
            ):
                # An edit from chat is a GM's word for the file it writes: made over a file that
                # lost walls by hand, it would apply that loss unseen.
                raise InvalidInput(
                    f"edit of {config.slug} over a campaign.toml that waits for a GM",
                    user_message="campaign.toml was changed by hand and waits for a GM (see "
                    "`/campaign status`): apply it with `/campaign accept`, or restore it, first.",
                )
            new = change(old)
            if new == old:
                return None
            parsed = parse_campaign(new, config.root, config.slug)
            write_atomically(path, new)
            return _file_signature(path), parsed, new

        async with self._editing.setdefault(config.slug, asyncio.Lock()):
            written = await asyncio.to_thread(edit)
            if written is not None:
                async with self._loading.setdefault(config.slug, asyncio.Lock()):
                    signature, parsed, text = written
                    return await self._apply_config(config.slug, signature, parsed, text, kept=kept)
        return await self.campaign(config.slug)

    async def list_campaigns(self) -> list[str]:
        slugs = {
            p.name
            for p in self.campaigns_dir.glob("*/")
            if p.is_dir() and not p.name.startswith(".")
        }
        slugs |= set(await self.db.campaigns.slugs())
        return sorted(slugs)

    async def _ensure_store(self, slug: str) -> None:
        if slug not in self._ensured:
            dim = await asyncio.to_thread(
                lambda: self.embedder.dim
            )  # may load the weights: off the loop
            await self.generations.routed.ensure(slug, dim=dim, model_id=self.embedder.model_id)
            self._ensured.add(slug)

    async def ingest(
        self, campaign: str | CampaignConfig, path: Path | None = None
    ) -> IngestReport:
        """Ingest one campaign (new, edited and removed files). One ingest per campaign at a time:
        the scheduler's tick and a GM's upload would otherwise interleave, and one run's sweep of
        orphaned vectors could delete the vectors the other had just written. A config given
        (the bench's corpora, which have no ``campaign.toml``) is ingested as given."""
        if isinstance(campaign, CampaignConfig):
            config = campaign
        else:
            slug = campaign
            config = await self.campaign(slug)
            if slug in self._configs and self._configs[slug].config.root != config.root:
                config = self._configs[slug].config
        async with self._ingesting.setdefault(config.slug, asyncio.Lock()):
            # A first index (never indexed) or a rebuild (indexed before, under another profile;
            # mid-way both read as "stale"): the answers say which.
            self._progress.start(
                config.slug, rebuild=await self._index_state(config.slug) == "stale"
            )
            # While the next generation is built, edits go to the serving one, under its profile.
            indexer = self.generations.indexer_for(config.slug)
            try:
                report = await indexer.ingest(
                    config,
                    path,
                    progress=lambda done, total: self._progress.update(config.slug, done, total),
                )
            finally:
                self._progress.finish(config.slug)
        self._ensured.add(config.slug)
        self._note_skipped(config.slug, report, whole=path is None)
        self.review.note(config.slug, report.files, whole=path is None)
        for listener in self.ingest_listeners:  # passes: see __init__
            try:
                listener(config.slug, report)
            except Exception:
                _log.exception("ingest listener %r failed; the ingest stands", listener)
        if report.passages_added or report.passages_removed or report.documents_repaired:
            self._prewarm_soon(config.slug)
        return report

    def _prewarm_soon(self, slug: str) -> None:
        """Rebuild ``slug``'s snapshot and the players' and GM's BM25 indexes in the background
        (:meth:`Retriever.prewarm`). One build per campaign at a time; changes made while it
        runs get one more build after it."""
        running = self._prewarms.get(slug)
        if self._closed:  # an ingest that ended as the engine closed: nothing left to warm
            return
        if running is not None and not running.done():
            self._prewarm_again.add(slug)
            return
        self._prewarms[slug] = asyncio.create_task(self._prewarm(slug), name=f"prewarm:{slug}")

    async def _prewarm(self, slug: str) -> None:
        while True:
            self._prewarm_again.discard(slug)
            self.heap.prepare()
            try:
                await self.retriever.prewarm(slug, (players_lens(), gm_lens()))
            except Exception:  # the next question builds what this could not
                _log.warning("prewarming %s failed", slug, exc_info=True)
            else:
                self.heap.settle()
            if slug not in self._prewarm_again:
                return

    async def prewarmed(self, slug: str) -> None:
        """Wait for ``slug``'s background rebuild, if one runs (tests, the bench)."""
        while (task := self._prewarms.get(slug)) is not None and not task.done():
            await asyncio.wait([task])

    def _note_skipped(self, slug: str, report: IngestReport, *, whole: bool) -> None:
        """Remember the files an ingest could not index, for the host (``skipped_files``): a
        whole-campaign ingest says what is skipped now; a one-file ingest updates its file."""
        held = {} if whole else dict(self._skipped.get(slug, {}))
        for f in report.files:
            held.pop(f.path, None)
        held.update((s.path, s.reason) for s in report.skipped)
        self._skipped[slug] = held

    def skipped_files(self, slug: str) -> list[SkippedFile]:
        """The files of ``slug`` the latest ingests (the tick, an upload, the start) skipped, with
        why: GM-facing (``/campaign status``), as they name GM-only files."""
        return [SkippedFile(p, r) for p, r in sorted(self._skipped.get(slug, {}).items())]

    async def ensure_indexed(
        self,
        slug: str,
        *,
        announce: Callable[[str], object] | None = None,
        prewarm: bool = True,
    ) -> bool:
        """Ingest ``slug`` unless it is indexed under the current profile and the vector store
        holds its vectors (the start of ``serve`` and of the console commands), calling
        ``announce(slug)`` first; returns whether it ingested. A store that lost rows (emptied,
        or damaged and recreated) is refilled from the embedding cache. An unknown campaign
        raises :class:`UnknownCampaign` before anything is indexed. ``prewarm``: when nothing
        needed indexing, rebuild the snapshot in the background, so a serving process's first
        question does not (a one-shot command, which asks once, passes False)."""
        await self.campaign(slug)
        await self.generations.drop_expired()
        if await self.is_indexed(slug) and not await self.generations.indexer_for(slug).unbacked(
            slug
        ):
            if prewarm:
                self._prewarm_soon(slug)
            return False
        if announce is not None:
            announce(slug)
        await self.ingest(slug)
        return True

    async def _index_state(self, slug: str) -> str:
        """ "ready" (indexed under the current embedder and options), "stale" (indexed under
        others, or mid-rebuild: the indexer records the profile only when a rebuild ends; the
        next ingest re-embeds it) or "none" (never indexed)."""
        row = await self.db.campaigns.get(validate_slug(slug))
        if row is None or row.generation == 0:
            return "none"
        # Ready also while an older generation serves whose embedder this process holds.
        return "ready" if await self.generations.route(row) else "stale"

    async def is_indexed(self, slug: str) -> bool:
        """Indexed with the current embedder and options (ready to answer)."""
        return await self._index_state(slug) == "ready"

    async def was_indexed(self, slug: str) -> bool:
        """Indexed at some point, perhaps with another embedder or options: a campaign someone
        set up, which the next ingest brings up to the current profile (a full re-embed after an
        embedder change)."""
        return await self._index_state(slug) != "none"

    async def require_index(self, slug: str) -> None:
        """Raise :class:`NotReady` unless ``slug`` is indexed under the current profile and not
        being rebuilt: a question before the first ingest, or between an embedder upgrade and the
        re-index, would otherwise meet an empty collection and be told "nothing matches"."""
        state = await self._index_state(slug)
        if state != "ready" and (progress := self._progress.get(slug)) is not None:
            # an ingest is running in this process; say how far it has come.
            rebuild = progress.rebuild
            raise NotReady(
                f"{slug}: "
                + (f"index being rebuilt under {self.indexer.profile()}" if rebuild else "indexing")
                + f" ({progress.describe()})",
                user_message=(
                    "This campaign's index is being rebuilt after an update"
                    if rebuild
                    else "Still indexing this campaign"
                )
                + f": {progress.describe()}. Please try again in a minute.",
            )
        if state == "stale":
            raise NotReady(
                f"{slug}: index being rebuilt under {self.indexer.profile()}",
                user_message="This campaign's index is being rebuilt after an update. "
                "Please try again in a minute.",
            )
        if state == "none":
            raise NotReady(
                f"{slug}: never indexed",
                user_message="This campaign has no indexed documents yet. "
                "A GM can add session notes or lore with `/upload`.",
            )

    def index_progress(self, slug: str) -> IndexProgress | None:
        """How far the ingest of ``slug`` running in this process has come; ``None`` when none
        runs."""
        return self._progress.get(slug)

    def watch_progress(self, watcher: ProgressWatcher) -> Callable[[], None]:
        """Call ``watcher`` at every report of an ingest (an import's too) or a re-index build
        in this process: the numbers chat's "still indexing" answer reads, for a terminal to
        draw. Returns the unsubscribe."""
        stops = [self._progress.watch(watcher), self.generations.board.watch(watcher)]

        def unwatch() -> None:
            for stop in stops:
                stop()

        return unwatch

    async def reindex(
        self,
        slug: str,
        *,
        embedder: Embedder | None = None,
        on_document: Callable[[int], None] | None = None,
    ) -> ReindexReport:
        """Build ``slug``'s next vector generation under this engine's profile (or
        ``embedder``'s) while the serving one answers; publish it on a clean finish
        (:mod:`liminalis.generations`)."""
        return await self._reindex(slug, embedder=embedder, on_document=on_document)

    async def _reindex(
        self,
        slug: str,
        *,
        embedder: Embedder | None = None,
        on_document: Callable[[int], None] | None = None,
        automatic: bool = False,
    ) -> ReindexReport:
        slug = validate_slug(slug)
        await self._index_state(slug)
        report = await self.generations.reindex(
            slug,
            lock=self._ingesting.setdefault(slug, asyncio.Lock()),
            embedder=embedder,
            on_document=on_document,
            automatic=automatic,
        )
        await self._index_state(slug)  # route this process to what serves now
        return report

    async def upgrade_index(self, slug: str) -> ReindexReport | None:
        """Bring a campaign served under an older profile (a new release's options or embedder)
        to this engine's profile, blue/green: while this process can still serve the old
        generation, the next one is built beside it and published on a clean finish (the tick
        calls this). ``None`` when there is nothing to do, when a rollback holds this profile
        back (until a host runs :meth:`reindex`; :meth:`reindex_status` says so), or when the old
        generation cannot be served here (its embedder is not loaded): the tick's ingest then
        rebuilds in place."""
        slug = validate_slug(slug)
        row = await self.db.campaigns.get(slug)
        if row is None or row.generation == 0 or row.model_id == self.indexer.profile():
            return None
        if row.rolled_back_from == self.indexer.profile():
            return None
        if not await self.is_indexed(slug):
            return None
        return await self._reindex(slug, automatic=True)

    async def rollback_index(self, slug: str) -> str:
        """Serve ``slug`` from its previous generation again (kept for the grace period); the
        automatic upgrade leaves the profile it served alone until the next :meth:`reindex`."""
        slug = validate_slug(slug)
        async with self._ingesting.setdefault(slug, asyncio.Lock()):
            said = await self.generations.rollback(slug)
        await self._index_state(slug)  # route this process to what serves now
        return said

    async def reindex_status(self, slug: str) -> ReindexStatus:
        """The serving generation, how far a build of the next one has come, and the profile a
        rollback holds back from the automatic upgrade."""
        return await self.generations.status(validate_slug(slug))

    def indexing(self) -> list[IndexProgress]:
        """Every ingest running in this process, by campaign."""
        return self._progress.all()

    # -- retrieval ---------------------------------------------------------------------------

    async def retrieve(
        self,
        campaign: str | CampaignConfig | CampaignScope,
        query: str,
        lens: Iterable[str] | None = None,
        *,
        chat: str | None = None,
        forced: Sequence[str] = (),
        params: RetrievalParams | None = None,
        trace: Trace | None = None,
        use_pins: bool = True,
    ) -> Bundle:
        query = clean_text(query or "").strip()
        if not query:
            raise InvalidInput(
                "empty query", user_message="Ask a question, e.g. `/ask who is the Lantern Queen?`"
            )
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(
                "query too long",
                user_message=f"Questions are limited to {MAX_QUERY_CHARS:,} characters.",
            )
        if lens is None:
            if not isinstance(campaign, CampaignScope):
                raise TypeError("retrieve needs a lens, or a CampaignScope that holds one")
            lens = campaign.lens
        scope = await self.scope(campaign, lens)
        config, lens = scope.config, scope.lens
        await self._ensure_store(config.slug)
        pinned = await self.pins(config.slug, chat) if use_pins else []
        if not use_pins:
            params = replace(params or self.retriever.params, named_keys=False)
        render = (params or self.retriever.params).render
        if (
            render.whole_chars != config.whole_document_chars
        ):  # campaign.toml's whole_document_chars
            params = replace(
                params or self.retriever.params,
                render=replace(render, whole_chars=config.whole_document_chars),
            )
        if not (self.memory_enabled and self.memory is not None and use_pins):
            return await self.retriever.retrieve(
                config.slug,
                query,
                lens,
                always=config.always_include if use_pins else (),
                catalog=scope.catalog,
                pinned=pinned,
                forced=forced,
                params=params,
                trace=trace,
            )
        trace = trace or Trace()
        bundle = await self.retriever.retrieve(
            config.slug,
            query,
            lens,
            always=config.always_include,
            catalog=scope.catalog,
            pinned=pinned,
            forced=forced,
            params=params,
            trace=trace,
        )
        return await self._remember(scope.catalog, bundle, trace, params or self.retriever.params)

    async def _remember(
        self, cat: Catalog, bundle: Bundle, trace: Trace, params: RetrievalParams
    ) -> Bundle:
        """The bundle re-ranked by the campaign memory: every retrieved document kept, the
        memory's own candidates added, the rendered documents re-chosen from the new order."""
        assert self.memory is not None
        lens = frozenset(bundle.lens)
        recall = await self.memory.recall(
            cat,
            bundle.query,
            lens,
            retrieved=bundle.ranked_doc_ids,
            dense=trace.dense_docs,
            lexical=trace.lexical_docs or trace.document_docs,
        )
        order = [d for d in recall.ranked_doc_ids if cat.visible_doc(d, lens)]
        pinned = [d for d in bundle.documents if d.pinned]
        have = {d.doc_id: d for d in bundle.documents if not d.pinned}
        tokens = self.retriever.tokenizer(bundle.query)
        rendered = list(pinned)
        for doc_id in [d for d in order if d not in {p.doc_id for p in pinned}][
            : params.max_documents
        ]:
            rendered.append(
                have.get(doc_id)
                or render_document(
                    cat,
                    doc_id,
                    fallback_passages(cat, doc_id, tokens),
                    pinned=False,
                    score=recall.memory_docs.get(doc_id, 0.0),
                    params=params.render,
                )
            )
        pinned_ids = [d for d in bundle.ranked_doc_ids if d in {p.doc_id for p in pinned}]
        ranked = tuple(dict.fromkeys([*pinned_ids, *order]))
        timings = {**bundle.timings_ms, "memory": recall.ms}
        return replace(bundle, documents=tuple(rendered), ranked_doc_ids=ranked, timings_ms=timings)

    async def remember_turn(
        self, scope: CampaignScope, question: str, cited: Sequence[str]
    ) -> None:
        """Record an answered turn in the campaign memory (when enabled): best-effort, the
        answer it follows goes out whether or not the store can write."""
        if self.memory_enabled and self.memory is not None:
            try:
                await self.memory.record(scope.catalog, question, scope.lens, cited=cited)
            except StoreError as exc:
                _log.warning("campaign memory of %s not recorded: %s", scope.slug, exc)

    async def explain(
        self,
        campaign: str | CampaignConfig | CampaignScope,
        query: str,
        *,
        relevant: Sequence[str] = (),
        lens: Iterable[str] = frozenset({GM}),
    ) -> Explanation:
        """Where each relevant document got to (default: the top documents found)."""
        trace = Trace()
        scope = await self.scope(campaign, lens)
        lens = scope.lens
        bundle = await self.retrieve(scope, query, trace=trace)
        cat = scope.catalog
        targets = [cat.resolve_key(r, lens)[0] if cat.resolve_key(r, lens) else r for r in relevant]
        if not targets:
            targets = list(bundle.ranked_doc_ids[:5])
        titles = {d: cat.documents[d].title for d in targets if cat.visible_doc(d, lens)}
        return Explanation(
            query=query,
            stages=tuple(trace.stage(d) for d in targets),
            bundle=bundle,
            reranked=trace.reranked,
            titles=titles,
        )

    # -- answers, recaps, budgets: the facade the adapters call ------------------------------

    @property
    def answerer(self) -> Responder:
        """The answer pipeline (offline quoting unless the composition root gave it a model)."""
        if self._answerer is None:
            self._answerer = Responder(self)
        return self._answerer

    def use_answerer(self, answerer: Responder) -> None:
        """Answer through ``answerer`` (the composition root's, with its model and daily gate)."""
        self._answerer = answerer

    async def answer(
        self,
        campaign: str | CampaignConfig | CampaignScope,
        question: str,
        lens: Iterable[str],
        *,
        chat: str | None = None,
        budget_tokens: int | None = None,
        forced: Sequence[str] = (),
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> Answer:
        """Answer ``question`` for ``lens`` from the campaign's documents, remembering the chat.
        The campaign's scope is resolved here, once, and handed down the pipeline. With a model,
        ``on_text`` receives the answer's text so far as it streams in (never without one)."""
        scope = await self.scope(campaign, lens)
        answer = await self.answerer.respond(
            scope,
            question,
            scope.lens,
            chat=chat,
            budget_tokens=budget_tokens,
            forced=forced,
            on_text=on_text,
        )
        found = answer.answered  # it cites a document of its material
        try:
            question_id = await self.questions.record(
                scope.slug,
                clean_text(question).strip(),
                scope.lens,
                chat=chat,
                found=found,
                cited=[s.doc_id for s in answer.sources],
            )
        except StoreError as exc:  # the answer stands; the GM's log misses one line
            _log.warning("question of %s not logged; the answer goes out: %s", scope.slug, exc)
            return answer
        return replace(answer, question_id=question_id)

    async def question_report(self, slug: str, *, days: int = 7) -> QuestionReport:
        """What players asked in ``slug`` over the last ``days`` days, for its GM
        (:mod:`liminalis.questions`): never shown to a player."""
        slug = validate_slug(slug)
        cat = await self.retriever.catalog(slug)

        def title(doc_id: str) -> str:
            views = cat.views_of(doc_id, Lens({GM}))
            return cat.documents[views[0]].title if views else doc_id

        return await self.questions.report(slug, days=days, title=title)

    async def recap(
        self, slug: str, sessions: int = 1, *, model: LanguageModel | None = None
    ) -> Recap:
        """A players-lens "previously on…" over the latest ``sessions`` session notes: from the
        stored session summaries once the summaries pass has written them, else from the
        documents; written by ``model`` (role ``summarize``) when one is given."""
        slug = validate_slug(slug)
        stored = await self.knowledge.recap_sessions(slug, sessions)
        source = stored or await self.retriever.catalog(slug)
        if model is None:
            return build_recap(source, sessions)
        return await build_model_recap(source, model, sessions)

    async def budget(
        self, slug: str, chat: str | None = None, *, default: int = DEFAULT_CONTEXT_TOKENS
    ) -> int:
        """The context budget of ``chat``, else of the campaign, else ``default``."""
        for scope in (chat, CAMPAIGN_SCOPE):
            if scope is None:
                continue
            tokens = await self.db.budgets.get(validate_slug(slug), scope)
            if tokens is not None:
                return tokens
        return default

    async def set_budget(self, slug: str, tokens: int, *, chat: str | None = None) -> None:
        """Set the context budget of ``chat`` (or of the whole campaign)."""
        await self.db.budgets.set(validate_slug(slug), chat or CAMPAIGN_SCOPE, tokens)

    async def chat_model(self, slug: str, chat: str | None) -> str | None:
        """The model a GM chose for ``chat``'s answers (``/budget model``); ``None``: the
        configured reply model. Only the reply role moves (``Router.for_chat``)."""
        if not chat:
            return None
        return await self.db.chat_models.get(validate_slug(slug), chat)

    async def set_chat_model(self, slug: str, chat: str, model: str | None) -> bool:
        """Answer ``chat`` with ``model`` from its next question; ``None`` restores the
        configured reply model. Returns whether anything changed (a clear with none set: no)."""
        slug = validate_slug(slug)
        if model is None:
            return await self.db.chat_models.clear(slug, chat)
        await self.db.chat_models.set(slug, chat, model, at=self._clock.now().timestamp())
        return True

    async def memory_stats(self, slug: str) -> dict[str, Any]:
        """The campaign memory's size: chunks by kind, links, learned associations, and whether
        it re-ranks answers (``liminalis memory stats``)."""
        if self.memory is None:
            return {"enabled": False}
        cat = await self.retriever.catalog(validate_slug(slug))
        await self.memory.graph(cat)
        stats: dict[str, Any] = dict(await self.memory.store.stats(cat.campaign))
        stats["enabled"] = self.memory_enabled
        return stats

    async def memory_report(self, slug: str, of: Lens) -> str:
        """The campaign memory's most active chunks and strongest associations as seen by the
        lenses ``of`` (a GM's view of the memory; never shown to players)."""
        if self.memory is None:
            return "The campaign memory is not configured."
        slug = validate_slug(slug)
        cat = await self.retriever.catalog(slug)
        chunks, edges = await self.memory.top(cat, of)
        stats = await self.memory.store.stats(slug)
        state = "on" if self.memory_enabled else "off (LIMINALIS_MEMORY_ENABLED)"
        lines = [
            f"Memory ({state}) of lens {','.join(sorted(of))}: "
            + ", ".join(f"{n} {k}" for k, n in sorted(stats["chunks"].items()))
            + f"; {stats['links']} links, {stats['learned_edges']} learned associations",
            "Most active:",
        ]
        lines += [f"- {label} ({cid.split(':', 1)[0]}) B={b:.2f}" for cid, label, b in chunks] or [
            "- (nothing yet)"
        ]
        lines.append("Strongest associations:")
        lines += [
            f"- {self.memory.label(slug, s)} → {self.memory.label(slug, d)} w={w:.2f}"
            for s, d, w in edges
        ] or ["- (none yet)"]
        return "\n".join(lines)

    @property
    def retrieval_params(self) -> RetrievalParams:
        """The retrieval parameters a question gets unless it names its own."""
        return self.retriever.params

    @retrieval_params.setter
    def retrieval_params(self, params: RetrievalParams) -> None:
        self.retriever.params = params

    # -- pins and titles ---------------------------------------------------------------------

    async def pins(self, slug: str, chat: str | None = None) -> list[str]:
        return await self.db.pins.doc_ids(slug, [CAMPAIGN_SCOPE] + ([chat] if chat else []))

    async def resolve_document(self, slug: str, key: str, lens: Lens) -> str:
        """The doc id for a title/alias/path the lens may see; ``NotFound`` otherwise (same message)."""
        cat = await self.retriever.catalog(validate_slug(slug))
        found = cat.resolve_key(key, lens)
        if not found:
            prefix = cat.titles_for(lens, key, limit=2)
            if len(prefix) == 1:
                return prefix[0][0]
            raise NotFound(f"no document {key!r} for lens {sorted(lens)}")
        path = key.strip().removeprefix("./")
        own = [d for d in found if source_of(d) in {path, path.rsplit(".", 1)[0]}]
        if own:  # a document's own path is never ambiguous
            return own[0]
        if (
            len({source_of(d) for d in found}) > 1
        ):  # two documents share the name: never pick one silently (all are visible to the lens)
            paths = ", ".join(f"`{d}`" for d in found[:5])
            raise InvalidInput(
                "ambiguous document",
                user_message=f"Several documents are called that: {paths}. Use one of these paths.",
            )
        return found[0]

    async def add_pin(self, slug: str, key: str, lens: Lens, *, scope: str = CAMPAIGN_SCOPE) -> str:
        doc_id = await self.resolve_document(slug, key, lens)
        # A pin names the file, not the view this lens read: each lens then gets its own view.
        await self.db.pins.add(validate_slug(slug), scope, source_of(doc_id), at=time.time())
        return doc_id

    async def remove_pin(
        self, slug: str, key: str, lens: Lens, *, scope: str = CAMPAIGN_SCOPE
    ) -> str:
        doc_id = await self.resolve_document(slug, key, lens)
        if not await self.db.pins.remove(slug, scope, source_of(doc_id)):
            raise InvalidInput("not pinned", user_message="That document is not pinned.")
        return doc_id

    async def list_pins(
        self, campaign: str | CampaignConfig, lens: Iterable[str], chat: str | None = None
    ) -> list[tuple[str, str]]:
        """Pins ``(doc_id, title)`` visible to ``lens`` (GM-only pins are invisible to players)."""
        config = campaign if isinstance(campaign, CampaignConfig) else await self.campaign(campaign)
        slug, lens = config.slug, Lens(lens)
        cat = await self.retriever.catalog(slug)
        out: list[tuple[str, str]] = []
        stored = [
            v for d in await self.pins(slug, chat) for v in cat.views_of(d, lens)
        ]  # ids, as resolve_pins
        for keys in (*(cat.resolve_key(k, lens) for k in config.always_include), stored):
            for d in keys:
                if cat.visible_doc(d, lens) and d not in {o[0] for o in out}:
                    out.append((d, cat.documents[d].title))
        return out

    async def titles(
        self, slug: str, lens: Lens, prefix: str = "", *, limit: int = 25
    ) -> list[tuple[str, str]]:
        cat = await self.retriever.catalog(validate_slug(slug))
        return cat.titles_for(lens, prefix, limit=min(limit, 25))

    async def list_documents(
        self, slug: str, lens: Lens, prefix: str = ""
    ) -> list[tuple[str, str]]:
        """Every ``(doc_id, title)`` ``lens`` may see whose title, alias or id holds ``prefix``,
        by title (``titles`` is the autocomplete's first 25)."""
        cat = await self.retriever.catalog(validate_slug(slug))
        return cat.titles_for(lens, prefix, limit=max(len(cat.documents), 1))

    async def document_text(self, slug: str, doc_id: str, lens: Lens) -> tuple[str, str]:
        cat = await self.retriever.catalog(validate_slug(slug))
        doc = cat.documents.get(doc_id)
        if doc is None or not visible(doc.visibility, lens):
            raise NotFound(f"{doc_id} not visible")
        return doc.title, doc.text

    # -- export and import: liminalis.transfer, handed the store and models, not the Engine -----------------------------------

    async def export_campaign(self, slug: str, out: Path) -> ExportReport:
        """Write the campaign, its files (upload sidecars included) and what the store holds of
        it but what an import derives again from the files, to zip ``out``."""
        return await export_campaign(
            await self.campaign(slug),
            out,
            db=self.db,
            indexer=self.indexer,
            embedder=self.embedder,
        )

    async def import_campaign(self, archive: Path, slug: str | None = None) -> ImportReport:
        """Import an export as a new campaign (``slug``, default the exported one's) and index it
        from its files; derived rows and chat memory are never taken from an archive (the
        passes listening to ingests derive the knowledge again)."""
        target = ImportTarget(
            db=self.db,
            embedder=self.embedder,
            campaigns_dir=self.campaigns_dir,
            uploads_dir=self.uploads_dir,
            existing=await self.list_campaigns(),
            reindex=self.ingest,
        )
        return await import_campaign(target, archive, slug)

    # -- browsing: search, read, cited passages (the chat surface's /search, /show, Sources) --

    async def search(
        self,
        campaign: str | CampaignConfig | CampaignScope,
        query: str,
        lens: Iterable[str],
        *,
        limit: int = 50,
    ) -> list[Match]:
        """Documents ``lens`` may see that match ``query`` (BM25 over the lens's own index), best
        first, each with its best line (:mod:`liminalis.retrieval.browse`)."""
        query = clean_text(query or "").strip()
        if not query:
            raise InvalidInput("empty search", user_message="Give some words to search for.")
        scope = await self.scope(campaign, lens)
        return await run_cpu(
            search_documents,
            scope.catalog,
            self.retriever.tokenizer,
            query[:MAX_QUERY_CHARS],
            scope.lens,
            limit=limit,
        )

    async def read_document(
        self, campaign: str | CampaignConfig | CampaignScope, key: str, lens: Iterable[str]
    ) -> tuple[str, str, str]:
        """``(doc_id, title, text)`` of the document ``key`` names (a title, alias, path or id),
        in the fullest view ``lens`` may read: the GM's whole text, a player's view with the
        hidden sections cut. Raises ``NotFound`` (one message, whether it exists or not)."""
        scope = await self.scope(campaign, lens)
        cat = scope.catalog
        # A document id names its file: the lens reads its own view of it (a source an answer
        # cited in the GM's view opens in a player's view for a player); else a title or path.
        if key in cat.documents:
            doc_id = key
        else:
            doc_id = await self.resolve_document(scope.slug, key, scope.lens)
        view = richest_view(cat, doc_id, scope.lens)
        if view is None:
            raise NotFound(f"{key!r} not visible to {sorted(scope.lens)}")
        doc = cat.documents[view]
        return view, doc.title, doc.text

    async def cited_passages(
        self,
        campaign: str | CampaignConfig | CampaignScope,
        sources: Sequence[tuple[str, str]],
        lens: Iterable[str],
        *,
        query: str = "",
        chars: int = 700,
    ) -> list[str | None]:
        """For each ``(doc_id, section)`` an answer cited, the passage it cited as ``lens``
        reads it (``None`` where ``lens`` may not read the document)."""
        scope = await self.scope(campaign, lens)
        tokenizer = self.retriever.tokenizer
        return await run_cpu(
            lambda: [
                cited_passage(scope.catalog, tokenizer, d, section, scope.lens, query, chars=chars)
                for d, section in sources
            ]
        )

    async def close(self, *, models: bool = True) -> None:
        """Close the vector store and, unless ``models`` is false (an embedder shared with
        other engines, as the bench does), the embedder."""
        self._closed = True
        for task in self._prewarms.values():
            task.cancel()
        await asyncio.gather(*self._prewarms.values(), return_exceptions=True)
        self._prewarms.clear()
        await self.store.close()
        close = getattr(self.embedder, "close", None)
        if close and models:
            close()
