"""Blue/green re-index: the next vector generation is built beside the serving one.

Two hash embedders with different model ids (and dimensions: a query embedded by the wrong one
cannot be scored against a collection) stand in for the embedder a campaign was indexed with and
the one an upgrade ships. The engines share one SQLite file and one in-memory vector store, as a
restart after an upgrade shares the data directory.
"""

from __future__ import annotations

import harness
import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from liminalis.errors import InvalidInput, StoreError
from liminalis.generations import generation_key
from liminalis.testing import FrozenClock, HashEmbedder, MemoryVectorStore

PLAYERS = frozenset({"players"})
QUESTION = "who guards the Greyhold keep and the river tower?"
EXTRA = 8  # lore notes beside the tiny campaign's files


class FailingEmbedder(HashEmbedder):
    """Refuses any batch holding ``word`` while ``failing``: one document that cannot be embedded."""

    def __init__(self, *, word: str, **kw) -> None:
        super().__init__(**kw)
        self.word = word
        self.failing = True

    async def embed_passages(self, texts):
        if self.failing and any(self.word in t for t in texts):
            raise RuntimeError("the embedder refused this text")
        return await super().embed_passages(texts)


class Stop(Exception):
    """The injected crash of a re-index."""


def stop_after(n: int):
    def hook(done: int) -> None:
        if done == n:
            raise Stop(f"killed after {n} documents")

    return hook


async def ranked(engine, question: str = QUESTION):
    bundle = await engine.retrieve("greyhold", question, PLAYERS)
    return list(bundle.ranked_doc_ids), [(d.doc_id, round(d.score, 9)) for d in bundle.documents]


async def upgraded(tmp_path, new, **kw):
    """The campaign indexed with the old embedder, then the engine of the upgrade (``new``,
    the old one still loaded) over the same data; returns (old engine, new engine, store)."""
    root = make_tiny_campaign(tmp_path / "campaigns")
    for i in range(EXTRA):
        (root / f"note{i}.md").write_text(
            f"# Note {i}\n\nThe ferryman {i} rows across the river tower moat.\n", encoding="utf-8"
        )
    store = MemoryVectorStore()
    old_embedder = HashEmbedder(dim=256, model_id="hash-old")
    old = await make_engine(tmp_path, milvus=False, embedder=old_embedder, store=store)
    await old.ingest("greyhold")
    new_engine = await make_engine(
        tmp_path, milvus=False, embedder=new, embedders=[old_embedder], store=store, **kw
    )
    return old, new_engine, store


async def test_an_interrupted_reindex_resumes_while_the_old_generation_answers(tmp_path):
    new = HashEmbedder(dim=128, model_id="hash-new")
    old, engine, store = await upgraded(tmp_path, new)
    try:
        before = await ranked(old)
        old_profile = old.indexer.profile()
        # The upgrade does not take the campaign offline: the old generation serves.
        assert await engine.is_indexed("greyhold")
        assert await ranked(engine) == before

        with pytest.raises(Stop):
            await engine.reindex("greyhold", on_document=stop_after(3))
        status = await engine.reindex_status("greyhold")
        assert status.building == harness.profile(engine) and status.serving == old_profile
        assert (status.done, status.failed) == (3, 0) and status.total > 3
        assert await ranked(engine) == before  # still the old generation

        # An edit meanwhile goes to the serving generation under its own profile (no reset)…
        done = await harness.db(engine).generations.checkpoints("greyhold", harness.profile(engine))
        assert "baron" in done  # documents go in id order: the baron's was written
        (tmp_path / "campaigns" / "greyhold" / "baron.md").write_text(
            "---\ntitle: Baron Aldric\n---\n# Baron Aldric\n\nThe baron now guards the keep "
            "gate with a ferryman.\n",
            encoding="utf-8",
        )
        await engine.ingest("greyhold")
        row = await harness.db(engine).campaigns.get("greyhold")
        assert row is not None and row.model_id == old_profile

        # … and the resumed run writes only what is left, the edited note included.
        report = await engine.reindex("greyhold")
        assert report.published and not report.failed
        assert report.resumed == 2 and report.indexed == report.documents - 2
        status = await engine.reindex_status("greyhold")
        assert status.serving == harness.profile(engine) and status.building is None
        assert status.previous == (old_profile,)
        key = generation_key("greyhold", harness.profile(engine))
        assert store.rows[key] and not await harness.indexer(engine).unbacked("greyhold")
        ids, _docs = await ranked(engine, "baron ferryman keep gate")
        assert ids and ids[0] == "baron"
    finally:
        await close_engine(old)
        await close_engine(engine)


async def test_a_failed_document_refuses_to_publish_and_the_old_generation_serves(tmp_path):
    new = FailingEmbedder(word="bells", dim=128, model_id="hash-new")
    old, engine, store = await upgraded(tmp_path, new)
    try:
        before = await ranked(old)
        report = await engine.reindex("greyhold")
        assert not report.published and [d for d, _ in report.failed] == ["baron"]
        row = await harness.db(engine).campaigns.get("greyhold")
        assert row is not None and row.model_id == old.indexer.profile() and not row.store_key
        status = await engine.reindex_status("greyhold")
        assert status.failed == 1 and status.done == status.total - 1
        assert await ranked(engine) == before

        new.failing = False  # the cause fixed: the next run writes that document and publishes
        report = await engine.reindex("greyhold")
        assert report.published and report.indexed == 1
    finally:
        await close_engine(old)
        await close_engine(engine)


async def test_rollback_restores_identical_ranked_results(tmp_path):
    new = HashEmbedder(dim=128, model_id="hash-new")
    old, engine, _store = await upgraded(tmp_path, new)
    try:
        before = await ranked(engine)
        assert (await engine.reindex("greyhold")).published
        after = await ranked(engine)
        assert after[0]  # the new generation answers
        assert await engine.rollback_index("greyhold") == old.indexer.profile()
        assert await ranked(engine) == before
        # And forward again: the new generation was kept as the previous one.
        assert await engine.rollback_index("greyhold") == harness.profile(engine)
        assert await ranked(engine) == after
    finally:
        await close_engine(old)
        await close_engine(engine)


async def tick(engine) -> None:
    """The scheduler tick's ingest of every campaign (its automatic upgrade included)."""
    from bot.scheduler import RecapScheduler
    from bot.service import BotService

    await RecapScheduler(BotService(engine), clock=FrozenClock(), tick_seconds=0).ingest_pending()


async def test_a_rollback_holds_the_automatic_upgrade_back(tmp_path):
    """The tick of a process whose embedder is the rolled-back one neither rebuilds nor
    publishes it: the campaign answers from the generation rolled back to."""
    clock = FrozenClock()
    new = HashEmbedder(dim=128, model_id="hash-new")
    old, engine, store = await upgraded(tmp_path, new, clock=clock)
    try:
        before = await ranked(engine)
        assert (await engine.reindex("greyhold")).published
        assert await engine.rollback_index("greyhold") == old.indexer.profile()
        written = {k: dict(v) for k, v in store.rows.items()}  # the records, held as they are
        clock.advance(minutes=5)
        assert await engine.upgrade_index("greyhold") is None
        clock.advance(minutes=5)
        await tick(engine)
        row = await harness.db(engine).campaigns.get("greyhold")
        assert row is not None and row.model_id == old.indexer.profile()
        assert row.rolled_back_from == harness.profile(engine)
        assert (
            await harness.db(engine).generations.checkpoints("greyhold", harness.profile(engine))
            == {}
        )
        assert store.rows.keys() == written.keys()  # nothing rebuilt: the same records
        for key, records in written.items():
            assert store.rows[key].keys() == records.keys()
            assert all(store.rows[key][i] is r for i, r in records.items())
        assert await ranked(engine) == before
        # An automatic publish already under way when the rollback landed is refused too.
        assert not await harness.db(engine).generations.switch(
            "greyhold", harness.profile(engine), at=0.0, unless_held=True
        )
        assert await harness.db(engine).campaigns.get("greyhold") == row
    finally:
        await close_engine(old)
        await close_engine(engine)


async def test_the_hold_is_shared_and_an_explicit_reindex_lifts_it(tmp_path):
    """A hold set by one process (the CLI) holds another (the bot) sharing the SQLite file, as it
    would after a restart; the host's next ``liminalis reindex`` lifts it, and from then on the
    bot's tick upgrades as before: it finishes a build the host interrupted and publishes it."""
    clock = FrozenClock()
    new = HashEmbedder(dim=128, model_id="hash-new")
    old, cli, store = await upgraded(tmp_path, new, clock=clock)
    bot = await make_engine(
        tmp_path,
        milvus=False,
        embedder=HashEmbedder(dim=128, model_id="hash-new"),
        embedders=[HashEmbedder(dim=256, model_id="hash-old")],
        store=store,
        clock=clock,
    )
    try:
        before = await ranked(bot)
        assert (await cli.reindex("greyhold")).published
        assert await cli.rollback_index("greyhold") == old.indexer.profile()
        clock.advance(minutes=5)
        assert await bot.upgrade_index("greyhold") is None
        await tick(bot)
        assert (await bot.reindex_status("greyhold")).held == bot.indexer.profile()
        assert await ranked(bot) == before

        with pytest.raises(Stop):  # the host builds it again, and stops half-way
            await cli.reindex("greyhold", on_document=stop_after(3))
        status = await bot.reindex_status("greyhold")
        assert status.held == "" and status.building == bot.indexer.profile()
        assert status.serving == old.indexer.profile()
        clock.advance(minutes=5)
        await tick(bot)
        status = await bot.reindex_status("greyhold")
        assert status.serving == bot.indexer.profile() and status.building is None
        assert await ranked(bot) == await ranked(cli)
        key = generation_key("greyhold", bot.indexer.profile())
        assert bot.generations.routed.routes["greyhold"].key == key
    finally:
        await close_engine(old)
        await close_engine(cli)
        await close_engine(bot)


async def test_the_status_says_the_upgrade_is_held_and_how_to_resume(tmp_path, capsys):
    from bot.cli import _parser, _reindex

    new = HashEmbedder(dim=128, model_id="hash-new")
    old, engine, _store = await upgraded(tmp_path, new)
    try:
        assert (await engine.reindex("greyhold")).published
        await engine.rollback_index("greyhold")
        text = (await engine.reindex_status("greyhold")).describe()
        assert f"rolled back from {harness.profile(engine)}" in text
        assert "automatic upgrade paused" in text
        assert "run `liminalis reindex --campaign greyhold` to build it again" in text
        args = _parser().parse_args(["reindex", "--campaign", "greyhold", "--status"])
        assert await _reindex(args, None, engine) == 0
        assert "automatic upgrade paused" in capsys.readouterr().out
        assert (await engine.reindex("greyhold")).published
        assert "paused" not in (await engine.reindex_status("greyhold")).describe()
    finally:
        await close_engine(old)
        await close_engine(engine)


async def test_a_rebuild_of_the_rolled_back_generation_reads_as_a_build(tmp_path):
    """Built again after a rollback, the replaced generation's collection is being rewritten: the
    status says so, a rollback does not return to it, and its grace period does not drop it."""
    clock = FrozenClock()
    new = HashEmbedder(dim=128, model_id="hash-new")
    old, engine, store = await upgraded(tmp_path, new, clock=clock, generation_grace_s=3600)
    try:
        assert (await engine.reindex("greyhold")).published
        await engine.rollback_index("greyhold")
        with pytest.raises(Stop):
            await engine.reindex("greyhold", on_document=stop_after(3))
        status = await engine.reindex_status("greyhold")
        assert status.building == harness.profile(engine) and status.previous == ()
        assert (status.done, status.failed) == (3, 0)
        with pytest.raises(InvalidInput):
            await engine.rollback_index("greyhold")
        clock.advance(hours=2)
        assert await engine.generations.drop_expired() == []
        key = generation_key("greyhold", harness.profile(engine))
        assert store.rows[key]
        report = await engine.reindex("greyhold")
        assert report.published and report.resumed == 3
        assert (await engine.reindex_status("greyhold")).previous == (old.indexer.profile(),)
    finally:
        await close_engine(old)
        await close_engine(engine)


class ClientStore(MemoryVectorStore):
    """One process's client of a store shared with others (their rows are its rows): like a
    Milvus client, it reads only collections it has opened."""

    def __init__(self, rows) -> None:
        super().__init__()
        self.rows = rows
        self.opened: list[str] = []

    async def ensure(self, campaign, *, dim, model_id):
        self.opened.append(campaign)
        return await super().ensure(campaign, dim=dim, model_id=model_id)

    async def search(self, campaign, vector, **kw):
        if campaign not in self.opened:
            raise StoreError(f"collection for campaign {campaign!r} not ensured")
        return await super().search(campaign, vector, **kw)


async def test_a_publish_by_another_process_is_followed_on_the_next_question(tmp_path):
    """The running bot's route follows the campaign row another process switched; the collection
    it now names, which only that process wrote, is opened by the next question's search, while
    the readiness check asks the vector store nothing."""
    new = HashEmbedder(dim=128, model_id="hash-new")
    old, cli, store = await upgraded(tmp_path, new)
    bot = await make_engine(
        tmp_path,
        milvus=False,
        embedder=HashEmbedder(dim=128, model_id="hash-new"),
        embedders=[HashEmbedder(dim=256, model_id="hash-old")],
        store=ClientStore(store.rows),
    )
    try:
        before = await ranked(bot)
        assert (await cli.reindex("greyhold")).published
        opened = list(bot.store.opened)
        assert await bot.is_indexed("greyhold") and bot.store.opened == opened
        after = await ranked(bot)
        assert bot.store.opened[len(opened) :] == [
            generation_key("greyhold", cli.indexer.profile())
        ]
        assert after == await ranked(cli)
        assert await cli.rollback_index("greyhold") == old.indexer.profile()
        assert await ranked(bot) == before
    finally:
        await close_engine(old)
        await close_engine(cli)
        await close_engine(bot)


async def test_the_old_generation_is_dropped_after_the_grace_period(tmp_path):
    clock = FrozenClock()
    new = HashEmbedder(dim=128, model_id="hash-new")
    old, engine, store = await upgraded(tmp_path, new, clock=clock, generation_grace_s=3600)
    try:
        assert (await engine.reindex("greyhold")).published
        assert store.rows["greyhold"]  # the old generation, kept for a rollback
        clock.advance(seconds=3599)
        assert await engine.generations.drop_expired() == []
        clock.advance(seconds=1)
        assert await engine.generations.drop_expired() == [("greyhold", old.indexer.profile())]
        assert "greyhold" not in store.rows
        assert store.rows[generation_key("greyhold", harness.profile(engine))]
        with pytest.raises(InvalidInput):
            await engine.rollback_index("greyhold")
        assert (await ranked(engine))[0]  # the serving generation is untouched
    finally:
        await close_engine(old)
        await close_engine(engine)


async def test_without_the_old_embedder_the_campaign_reads_as_rebuilt_as_before(tmp_path):
    """An engine that does not hold the serving generation's embedder cannot embed queries for
    it: the in-place rebuild of before generations applies."""
    root = make_tiny_campaign(tmp_path / "campaigns")
    assert root.is_dir()
    store = MemoryVectorStore()
    old = await make_engine(tmp_path, milvus=False, embedder=HashEmbedder(), store=store)
    await old.ingest("greyhold")
    engine = await make_engine(
        tmp_path, milvus=False, embedder=HashEmbedder(model_id="hash-x"), store=store
    )
    try:
        assert not await engine.is_indexed("greyhold") and await engine.was_indexed("greyhold")
    finally:
        await close_engine(old)
        await close_engine(engine)


async def test_the_reindex_command_builds_reports_and_rolls_back(tmp_path, capsys):
    from bot.cli import _parser, _reindex

    new = HashEmbedder(dim=128, model_id="hash-new")
    old, engine, _store = await upgraded(tmp_path, new)
    try:
        args = _parser().parse_args(["reindex", "--campaign", "greyhold"])
        assert await _reindex(args, None, engine) == 0
        out = capsys.readouterr().out
        assert "published" in out and f"serving {harness.profile(engine)}" in out
        args = _parser().parse_args(["reindex", "--campaign", "greyhold", "--rollback"])
        assert await _reindex(args, None, engine) == 0
        out = capsys.readouterr().out
        assert f"serving {old.indexer.profile()} again" in out
        assert f"rolled back from {harness.profile(engine)}: automatic upgrade paused" in out
    finally:
        await close_engine(old)
        await close_engine(engine)


@pytest.mark.slow
async def test_milvus_lite_holds_one_collection_per_generation_and_drops_the_old(tmp_path):
    from liminalis.adapters.milvus import MilvusVectorStore

    clock = FrozenClock()
    root = make_tiny_campaign(tmp_path / "campaigns")
    assert root.is_dir()
    store = MilvusVectorStore(str(tmp_path / "milvus.db"))
    old_embedder = HashEmbedder(dim=256, model_id="hash-old")
    old = await make_engine(tmp_path, embedder=old_embedder, store=store)
    await old.ingest("greyhold")
    before = await ranked(old)
    engine = await make_engine(
        tmp_path,
        embedder=HashEmbedder(dim=128, model_id="hash-new"),
        embedders=[old_embedder],
        store=store,
        clock=clock,
        generation_grace_s=60,
    )
    try:
        assert (await engine.reindex("greyhold")).published
        assert len(store._client.list_collections()) == 2
        assert await engine.rollback_index("greyhold") == old.indexer.profile()
        assert await ranked(engine) == before
        await engine.rollback_index("greyhold")
        clock.advance(seconds=61)
        assert len(await engine.generations.drop_expired()) == 1
        assert len(store._client.list_collections()) == 1
        assert (await ranked(engine))[0]
    finally:
        await close_engine(engine)
        await old.db.close()


async def test_a_rollback_refills_what_the_old_collection_missed_meanwhile(tmp_path):
    """An edit made while the new generation served never reached the old collection; after a
    rollback it can hold as many rows as SQLite expects and still lack the edited passage. A
    changed route makes the next ingest read every id, and refill it."""
    from liminalis.ingest.indexer import vector_owner

    old, engine, store = await upgraded(tmp_path, HashEmbedder(dim=128, model_id="hash-new"))
    try:
        await engine.ingest("greyhold")
        assert (await engine.reindex("greyhold")).published
        (tmp_path / "campaigns" / "greyhold" / "note0.md").write_text(
            "# Note 0\n\nThe ferryman 0 now sails a copper barge past the river tower.\n",
            encoding="utf-8",
        )
        await engine.ingest("greyhold")  # under the new generation
        await engine.rollback_index("greyhold")
        await engine.ingest("greyhold")  # the tick after the rollback
        live = {r.passage_id for r in await harness.db(engine).documents.passages("greyhold")}
        serving = {vector_owner(v) for v in store.rows["greyhold"]}
        assert live <= serving
    finally:
        await close_engine(old)
        await close_engine(engine)
