"""Blue/green re-index: build a campaign's next vector generation while the current one serves.

A campaign's vectors live in *generations*, one collection per index profile (the embedder and
the embedding options, :meth:`Indexer.profile`). The campaign row names the serving one
(``model_id``: its profile, ``store_key``: its collection; ``""`` is the slug, the collection of
every campaign indexed before generations). A re-index writes the stored documents' vectors under
the new profile into a new collection named ``<slug>~<blake2(profile)[:8]>``, checkpointing each
document in SQLite (``reindex_docs``: the content hash it was written at), so a run stopped at
any point resumes with the documents it had not written. Questions meanwhile go to the serving
generation, embedded by *its* embedder: a process serves a generation only while its embedder is
loaded (the engine's own, or one of ``Engine(embedders=...)``); otherwise the campaign reads as
being rebuilt, as before generations.

Publish happens only on a clean finish: every document written at its current content hash (a
document edited meanwhile is written again, the last check under the campaign's ingest lock) and
none failed. It is one SQLite transaction (:meth:`GenerationRepository.switch`) that moves the
campaign's generation, so every process's next question reads the new collection. The generation
it replaces stays as ``previous`` for a rollback until ``grace_s`` has passed since it was
retired::

    dropped  ⇔  state = previous  ∧  now − retired_at ≥ grace_s

A rollback also holds the profile it left (``campaigns.rolled_back_from``): the automatic upgrade
(the tick of a process whose own profile that is) would otherwise build it again and publish it
within minutes, undoing the host's decision. The hold lives in SQLite, so every process sharing
the database and every restart sees it; the automatic publish checks it in its own transaction.
Only an explicit re-index (``liminalis reindex``) lifts it::

    automatic build of p  ⇔  serving ≠ p  ∧  rolled_back_from ≠ p

The documents, passages and BM25 tokens in SQLite are shared by every generation: a profile
change of the tokenizer is not a generation (it goes through the in-place rebuild).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from liminalis.errors import InvalidInput, NotReady
from liminalis.ingest.indexer import Indexer, IngestOptions
from liminalis.ports import Clock, Embedder, VectorHit, VectorRecord, VectorStore
from liminalis.progress import IndexProgress, ProgressBoard
from liminalis.store.rows import CampaignRow
from liminalis.store.sqlite import Database
from liminalis.text import Tokenizer

__all__ = [
    "Generations",
    "ReindexReport",
    "ReindexStatus",
    "RoutedStore",
    "Route",
    "generation_key",
]

_log = logging.getLogger(__name__)

_HELD = "held back by a rollback"


def generation_key(slug: str, profile: str) -> str:
    """The store key (collection) of ``slug``'s generation built under ``profile``."""
    return f"{slug}~{hashlib.blake2b(profile.encode(), digest_size=4).hexdigest()}"


def _profile_parts(profile: str) -> tuple[str, bool, bool, str] | None:
    """``(model id, contextual, windows, tokenizer tag)`` of a profile string, or ``None``."""
    parts = profile.rsplit("|", 3)
    if len(parts) != 4 or not parts[1].startswith("ctx=") or not parts[2].startswith("win="):
        return None
    return parts[0], parts[1] == "ctx=1", parts[2] == "win=1", parts[3]


@dataclass(frozen=True, slots=True)
class Route:
    """Where a campaign's vectors are read and written: the collection key and its embedder."""

    key: str
    embedder: Embedder
    dim: int
    profile: str = ""


class RoutedStore:
    """A :class:`VectorStore` that sends each campaign to its routed collection (unrouted
    campaigns go to the collection named by their slug, as before generations). ``ensure``
    opens the routed collection with the route's embedder, whatever the caller's.

    A routed collection is also opened on its first use here when this process has not opened
    it: the route follows the campaign row in SQLite, and the collection it names now may be one
    another process published or rolled back to (``liminalis reindex`` beside a running bot on a
    shared server), while a store client reads only collections it has opened. Opening on use,
    not when routing, keeps routing a SQLite read: the readiness check and the lexical browse
    never wait on the vector store."""

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner
        self.routes: dict[str, Route] = {}
        self._opened: set[tuple[str, str]] = set()  # (store key, model id) opened in ``inner``

    def _key(self, campaign: str) -> str:
        route = self.routes.get(campaign)
        return route.key if route is not None else campaign

    async def _open(self, campaign: str) -> str:
        """The store key of ``campaign``, its routed collection opened first if need be."""
        route = self.routes.get(campaign)
        if route is None:
            return campaign
        if (route.key, route.embedder.model_id) not in self._opened:
            await self.ensure(campaign, dim=route.dim, model_id=route.embedder.model_id)
        return route.key

    def closed(self, key: str) -> None:
        """Forget that ``key``'s collection is open here (it was dropped): its next use opens
        it again."""
        self._opened = {o for o in self._opened if o[0] != key}

    async def ensure(self, campaign: str, *, dim: int, model_id: str) -> bool:
        route = self.routes.get(campaign)
        if route is not None:
            dim, model_id = route.dim, route.embedder.model_id
        key = self._key(campaign)
        created = await self.inner.ensure(key, dim=dim, model_id=model_id)
        self._opened.add((key, model_id))
        return created

    async def upsert(self, campaign: str, records: Sequence[VectorRecord]) -> None:
        await self.inner.upsert(await self._open(campaign), records)

    async def delete(self, campaign: str, ids: Sequence[str]) -> None:
        await self.inner.delete(await self._open(campaign), ids)

    async def count(self, campaign: str) -> int:
        return await self.inner.count(await self._open(campaign))

    async def ids(self, campaign: str) -> set[str]:
        return await self.inner.ids(await self._open(campaign))

    async def search(
        self,
        campaign: str,
        vector: np.ndarray,
        *,
        lens: frozenset[str],
        top_k: int,
        visibilities: Iterable[frozenset[str]] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        return await self.inner.search(
            await self._open(campaign),
            vector,
            lens=lens,
            top_k=top_k,
            visibilities=visibilities,
            doc_ids=doc_ids,
        )

    async def flush(self, campaign: str) -> None:
        await self.inner.flush(await self._open(campaign))

    async def invalidate(self, campaign: str) -> None:
        await self.inner.invalidate(self._key(campaign))

    async def drop(self, campaign: str) -> None:
        key = await self._open(campaign)
        await self.inner.drop(key)
        self.closed(key)

    async def close(self) -> None:
        await self.inner.close()

    async def all_vectors(self, campaign: str) -> list[tuple[str, np.ndarray]]:
        """The inner store's vectors of the routed collection (bench research)."""
        read = getattr(self.inner, "all_vectors", None)
        if read is None:
            raise TypeError(f"{type(self.inner).__name__} cannot list its vectors")
        rows: list[tuple[str, np.ndarray]] = await read(await self._open(campaign))
        return rows


@dataclass(slots=True)
class ReindexReport:
    """What a re-index did: documents written now, already written by an interrupted run
    (``resumed``), failed (with why); whether it published."""

    campaign: str
    profile: str
    documents: int = 0
    indexed: int = 0
    resumed: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    published: bool = False
    note: str = ""


@dataclass(frozen=True, slots=True)
class ReindexStatus:
    """A build's state from SQLite (any process's), with rate and time left when it runs in
    this one."""

    campaign: str
    serving: str
    building: str | None
    total: int
    done: int
    failed: int
    previous: tuple[str, ...]
    progress: IndexProgress | None
    #: The profile a rollback left, which the automatic upgrade does not build ("" none).
    held: str = ""

    def describe(self) -> str:
        if self.building is None:
            text = f"{self.campaign}: serving {self.serving}; no re-index in progress"
        else:
            text = (
                f"{self.campaign}: serving {self.serving}; building {self.building}: "
                f"{self.done} of {self.total} documents done, {self.failed} failed"
            )
            if self.progress is not None:
                text += f" ({self.progress.describe()})"
        if self.held:
            text += (
                f"; rolled back from {self.held}: automatic upgrade paused — run "
                f"`liminalis reindex --campaign {self.campaign}` to build it again"
            )
        return text


class Generations:
    """The campaigns' vector generations: routing, the query embedder, re-index, rollback."""

    def __init__(
        self,
        db: Database,
        store: VectorStore,
        *,
        routed: RoutedStore,
        indexer: Indexer,
        embedders: Sequence[Embedder] = (),
        clock: Clock,
        grace_s: float,
    ) -> None:
        self.db = db
        self.inner = store
        self.routed = routed
        self.indexer = indexer
        self._embedders = {e.model_id: e for e in embedders}
        self.clock = clock
        self.grace_s = grace_s
        self.board = ProgressBoard(clock, stage="reindex")
        self._indexers: dict[str, Indexer] = {}

    def _now(self) -> float:
        return self.clock.now().timestamp()

    def embedder_for(self, model_id: str) -> Embedder | None:
        if model_id == self.indexer.embedder.model_id:
            return self.indexer.embedder
        return self._embedders.get(model_id)

    def servable(self, profile: str) -> bool:
        """Whether this process can serve a generation built under ``profile``: its embedder
        is loaded and its tokenizer is this one's (the BM25 tokens are shared)."""
        if profile == self.indexer.profile():
            return True
        parts = _profile_parts(profile)
        return (
            parts is not None
            and parts[3] == self.indexer.tokenizer.tag
            and self.embedder_for(parts[0]) is not None
        )

    async def route(self, row: CampaignRow) -> bool:
        """Route ``row``'s campaign to its serving collection; ``True`` when this process can
        serve it (:meth:`servable`)."""
        profile = row.model_id or ""
        parts = _profile_parts(profile)
        if profile and parts is not None and self.servable(profile):
            embedder = self.embedder_for(parts[0])
            assert embedder is not None
        elif row.store_key:  # an in-place rebuild of a published generation's collection
            embedder, profile = self.indexer.embedder, self.indexer.profile()
        else:
            self.routed.routes.pop(row.slug, None)
            return False
        old = self.routed.routes.get(row.slug)
        key = row.store_key or row.slug
        if old is None or old.key != key or old.embedder is not embedder:
            dim = await asyncio.to_thread(lambda: embedder.dim)
            self.routed.routes[row.slug] = Route(key, embedder, dim, profile)
        return profile == (row.model_id or "")

    def query_embedder(self, slug: str) -> Embedder | None:
        route = self.routed.routes.get(slug)
        return route.embedder if route is not None else None

    def indexer_for(self, slug: str) -> Indexer:
        """The indexer that keeps ``slug``'s serving generation up to date (the tick, uploads):
        the engine's own, or one under the serving generation's older profile while the next
        generation is built."""
        route = self.routed.routes.get(slug)
        if route is None or route.profile == self.indexer.profile() or not route.profile:
            return self.indexer
        parts = _profile_parts(route.profile)
        if parts is None:
            return self.indexer
        cached = self._indexers.get(route.profile)
        if cached is None:
            options: IngestOptions = replace(
                self.indexer.options, contextual=parts[1], windows=parts[2]
            )
            cached = Indexer(
                self.db,
                self.routed,
                route.embedder,
                tokenizer=self.indexer.tokenizer,
                options=options,
            )
            self._indexers[route.profile] = cached
        return cached

    async def reindex(
        self,
        slug: str,
        *,
        lock: asyncio.Lock,
        embedder: Embedder | None = None,
        tokenizer: Tokenizer | None = None,
        on_document: Callable[[int], None] | None = None,
        automatic: bool = False,
    ) -> ReindexReport:
        """Build ``slug``'s generation under this engine's profile (or ``embedder``'s) and
        publish it when every document is written; see the module docstring. ``on_document(n)``
        is called after the ``n``-th document is checkpointed (tests interrupt there).

        ``automatic`` (the tick's upgrade) builds nothing, and publishes nothing, while a
        rollback holds the target profile back; a re-index a host asked for lifts the hold
        first, so that if it is interrupted the tick finishes what the host started.

        Stages: :meth:`_indexed_row` → :meth:`_builder` → :meth:`_record_serving` →
        :meth:`_open_building` → :meth:`_build` (rounds, then the switch) → routing."""
        row, serving = await self._indexed_row(slug, automatic=automatic)
        builder = self._builder(embedder, tokenizer)
        target = builder.profile()
        report = ReindexReport(campaign=slug, profile=target)
        if serving == target:
            report.note = "already serving this profile"
            return report
        if automatic and row.rolled_back_from == target:
            report.note = _HELD
            return report
        now = self._now()
        await self._record_serving(slug, row, serving, now)
        writer = await self._open_building(slug, target, builder, now)
        if not await self._build(slug, target, writer, report, on_document, lock, automatic):
            return report
        report.published = True
        _log.info("%s: generation %s published (%s)", slug, generation_key(slug, target), target)
        published = await self.db.campaigns.get(slug)
        if published is not None:
            await self.route(published)
        await self.drop_expired()
        return report

    async def _indexed_row(self, slug: str, *, automatic: bool) -> tuple[CampaignRow, str]:
        """The campaign's row, which must be indexed, and the profile it serves; a re-index a
        host asked for lifts a rollback's hold first."""
        row = await self.db.campaigns.get(slug)
        if row is None or row.generation == 0 or not row.model_id:
            raise NotReady(
                f"{slug}: not indexed, nothing to re-index",
                user_message="This campaign is not indexed yet: ingest it first.",
            )
        if not automatic and await self.db.generations.release(slug):
            _log.info("%s: rollback hold on %s lifted by a re-index", slug, row.rolled_back_from)
        return row, row.model_id

    def _builder(self, embedder: Embedder | None, tokenizer: Tokenizer | None) -> Indexer:
        """The indexer whose profile the new generation takes: this engine's, or one over
        ``embedder`` (kept, so the generation can be served once published)."""
        if embedder is None or embedder.model_id == self.indexer.embedder.model_id:
            return self.indexer
        self._embedders.setdefault(embedder.model_id, embedder)
        return Indexer(
            self.db,
            self.inner,
            embedder,
            tokenizer=tokenizer or self.indexer.tokenizer,
            options=self.indexer.options,
        )

    async def _record_serving(self, slug: str, row: CampaignRow, serving: str, now: float) -> None:
        """The generation serving now, recorded as such (what a rollback returns to)."""
        serving_parts = _profile_parts(serving)
        serving_model = serving_parts[0] if serving_parts else serving
        serving_emb = self.embedder_for(serving_model)
        serving_dim = await asyncio.to_thread(lambda: serving_emb.dim) if serving_emb else 0
        await self.db.generations.record(
            slug,
            serving,
            store_key=row.store_key or slug,
            model_id=serving_model,
            dim=serving_dim,
            state="serving",
            at=now,
        )

    async def _open_building(self, slug: str, target: str, builder: Indexer, now: float) -> Indexer:
        """The new generation recorded as building, its collection opened, and an indexer
        that writes into it (routed there while the campaign is served from the old one)."""
        key = generation_key(slug, target)
        dim = await asyncio.to_thread(lambda: builder.embedder.dim)
        await self.db.generations.record(
            slug,
            target,
            store_key=key,
            model_id=builder.embedder.model_id,
            dim=dim,
            state="building",
            at=now,
        )
        writer_store = RoutedStore(self.inner)
        writer_store.routes[slug] = Route(key, builder.embedder, dim, target)
        writer = Indexer(
            self.db,
            writer_store,
            builder.embedder,
            tokenizer=builder.tokenizer,
            options=builder.options,
        )
        await writer_store.ensure(slug, dim=dim, model_id=builder.embedder.model_id)
        return writer

    async def _build(
        self,
        slug: str,
        target: str,
        writer: Indexer,
        report: ReindexReport,
        on_document: Callable[[int], None] | None,
        lock: asyncio.Lock,
        automatic: bool,
    ) -> bool:
        """Write every document into the new generation and switch to it; whether it was
        published. One round without the lock (the long one), then one under the campaign's
        ingest lock, so no edit lands between its last check and the publish."""
        self.board.start(slug, rebuild=True)
        try:
            if not await self._round(slug, target, writer, report, on_document):
                return False
            async with lock:
                if not await self._round(slug, target, writer, report, on_document):
                    return False
                await writer.collect_garbage(slug)
                if not await self.db.generations.switch(
                    slug, target, at=self._now(), unless_held=automatic
                ):
                    report.note = _HELD
                    return False
        finally:
            self.board.finish(slug)
        return True

    async def _round(
        self,
        slug: str,
        target: str,
        writer: Indexer,
        report: ReindexReport,
        on_document: Callable[[int], None] | None,
    ) -> bool:
        """Write every document not checkpointed at its current hash; ``False`` when one
        failed (nothing is published: the serving generation stays)."""
        docs = [d for d in await self.db.documents.all(slug) if d.content_hash]
        marks = await self.db.generations.checkpoints(slug, target)
        todo = []
        for d in docs:
            m = marks.get(d.doc_id)
            if m is not None and m.state == "done" and m.content_hash == d.content_hash:
                continue
            todo.append(d)
        if not report.documents:
            report.documents = len(docs)
            report.resumed = len(docs) - len(todo)
        if not todo:
            return True
        tokens = {r.passage_id: r.tokens for r in await self.db.documents.passages(slug)}
        failed_before = len(report.failed)
        size = max(writer.options.batch_docs, 1)
        done = 0
        self.board.update(slug, 0, len(todo))
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            written = []
            for doc in batch:
                try:
                    rows = await writer.vector_rows(doc, tokens)
                    await writer.store.upsert(slug, rows)
                except Exception as exc:  # one document's failure: the build goes on
                    reason = f"{type(exc).__name__}: {exc}"[:300]
                    _log.warning("%s: re-index of %s failed: %s", slug, doc.doc_id, reason)
                    report.failed.append((doc.doc_id, reason))
                    await self.db.generations.checkpoint(
                        slug,
                        target,
                        doc.doc_id,
                        content_hash=doc.content_hash,
                        state="failed",
                        reason=reason,
                    )
                    continue
                written.append(doc)
            await writer.store.flush(slug)
            # Checkpointed only once the vectors are flushed: a resumed run never skips a
            # document whose rows a crash lost.
            for doc in written:
                await self.db.generations.checkpoint(
                    slug, target, doc.doc_id, content_hash=doc.content_hash, state="done"
                )
                report.indexed += 1
                done += 1
                self.board.update(slug, done, len(todo))
                if on_document is not None:
                    on_document(report.indexed)
        return len(report.failed) == failed_before

    async def rollback(self, slug: str) -> str:
        """Serve ``slug`` from its previous generation again, and hold the profile it served
        back from the automatic upgrade; returns the profile now serving.

        Raises:
            InvalidInput: no previous generation is kept (none published, or its grace period
                ended), or its embedder is not loaded in this process.
        """
        previous = [g for g in await self.db.generations.all(slug) if g.state == "previous"]
        if not previous:
            raise InvalidInput(
                f"{slug}: no previous generation",
                user_message="There is no previous index to return to (none was replaced, or "
                "its grace period has ended).",
            )
        prev = max(previous, key=lambda g: g.retired_at or 0.0)
        if not self.servable(prev.profile):
            raise InvalidInput(
                f"{slug}: embedder {prev.model_id} of the previous generation is not loaded",
                user_message=f"The previous index needs the embedder `{prev.model_id}`: start "
                "with it loaded to roll back.",
            )
        await self.db.generations.roll_back(slug, prev.profile, at=self._now())
        row = await self.db.campaigns.get(slug)
        if row is not None:
            await self.route(row)
        return prev.profile

    async def drop_expired(self) -> list[tuple[str, str]]:
        """Drop the collections of previous generations retired ``grace_s`` ago or more;
        returns ``(campaign, profile)`` of each dropped."""
        now = self._now()
        dropped: list[tuple[str, str]] = []
        for slug in await self.db.campaigns.slugs():
            row = await self.db.campaigns.get(slug)
            serving_key = (row.store_key or slug) if row is not None else slug
            for g in await self.db.generations.all(slug):
                if g.state != "previous" or g.retired_at is None:
                    continue
                if now - g.retired_at < self.grace_s:
                    continue
                if g.store_key != serving_key:  # never the serving collection
                    await self.inner.ensure(g.store_key, dim=g.dim or 1, model_id=g.model_id)
                    await self.inner.drop(g.store_key)
                    self.routed.closed(g.store_key)
                await self.db.generations.forget(slug, g.profile)
                _log.info("%s: previous generation %s dropped", slug, g.store_key)
                dropped.append((slug, g.profile))
        return dropped

    async def status(self, slug: str) -> ReindexStatus:
        row = await self.db.campaigns.get(slug)
        serving = (row.model_id or "") if row is not None else ""
        gens = await self.db.generations.all(slug)
        building = next((g.profile for g in gens if g.state == "building"), None)
        total = done = failed = 0
        if building is not None:
            docs = {d: h for d, (_p, h) in (await self.db.documents.hashes(slug)).items() if h}
            marks = await self.db.generations.checkpoints(slug, building)
            total = len(docs)
            for doc_id, h in docs.items():
                m = marks.get(doc_id)
                if m is not None and m.content_hash == h:
                    done += m.state == "done"
                    failed += m.state == "failed"
        return ReindexStatus(
            campaign=slug,
            serving=serving,
            building=building,
            total=total,
            done=done,
            failed=failed,
            previous=tuple(g.profile for g in gens if g.state == "previous"),
            progress=self.board.get(slug),
            held=row.rolled_back_from if row is not None else "",
        )
