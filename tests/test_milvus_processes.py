"""Milvus across processes: the one-URI switch to a server, and a clear error for a second
process on a Milvus Lite data directory (one process at a time)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import CANARY, GM_TITLE, make_tiny_campaign
from test_bluegreen import Stop, stop_after

from liminalis.adapters.milvus import MilvusVectorStore, collection_name
from liminalis.engine import Engine
from liminalis.errors import InvalidInput, StoreError
from liminalis.generations import generation_key
from liminalis.testing import FrozenClock, HashEmbedder

pytestmark = pytest.mark.slow  # real models or Milvus Lite throughout

MILVUS_LITE = Path(sys.executable).parent / "milvus-lite"
HOLD = (
    "import sys, time; from pymilvus import MilvusClient; MilvusClient(uri=sys.argv[1]).list_collections(); "
    "print('ready', flush=True); time.sleep(120)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lite_server(tmp_path):
    """``milvus-lite server``: Milvus Lite behind the gRPC protocol a Milvus server speaks."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            str(MILVUS_LITE),
            "server",
            "--data-dir",
            str(tmp_path / "served.db"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        else:
            pytest.fail("milvus-lite server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


async def test_the_engine_runs_against_a_server_uri(tmp_path, lite_server, capfd):
    """Only the URI changes: ingest, a players' question behind the GM wall, a GM's question,
    and reading a collection back with an iterator all go over the network protocol."""
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False, store=MilvusVectorStore(lite_server))
    try:
        report = await engine.ingest("greyhold")
        assert report.documents == 4 and not report.skipped
        players = await engine.retrieve(
            "greyhold", "the baron's secret in the river tower", frozenset({"players"})
        )
        assert players.documents and all(
            CANARY not in d.text and d.title != GM_TITLE for d in players.documents
        )
        gm = await engine.retrieve("greyhold", "the baron is a drowned vampire", frozenset({"gm"}))
        assert GM_TITLE in [d.title for d in gm.documents]
        assert (
            len(await engine.store.all_vectors("greyhold"))
            == len(await engine.store.ids("greyhold"))
            > 0
        )
    finally:
        await close_engine(engine)
    assert "mvccTs" not in "".join(capfd.readouterr())  # pymilvus's iterator warning is not shown


async def test_a_second_process_on_a_lite_store_gets_a_clear_error(tmp_path, capfd):
    uri = str(tmp_path / "milvus.db")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, uri], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        store = MilvusVectorStore(uri)
        with pytest.raises(StoreError) as caught:
            await store.ensure("c", dim=4, model_id="m")
        assert "another Liminalis process" in caught.value.user_message
        assert "milvus-lite server" in caught.value.user_message
        await store.close()
    finally:
        holder.kill()
        holder.wait()
    assert "Traceback" not in "".join(capfd.readouterr())
    store = MilvusVectorStore(uri)  # the holder is gone: this process opens it
    try:
        await store.ensure("c", dim=4, model_id="m")
    finally:
        await store.close()


async def test_an_edit_by_another_process_reaches_the_cached_rows(tmp_path, lite_server):
    """Two processes on one server (the bot, and a CLI ingest beside it): the bot's cache of
    document rows for restricted searches follows the campaign's generation, so an edit made by
    the other process is searched at once, not after a timeout."""
    make_tiny_campaign(tmp_path / "campaigns")
    bot = await make_engine(tmp_path, milvus=False, store=MilvusVectorStore(lite_server))
    cli = await make_engine(tmp_path, milvus=False, store=MilvusVectorStore(lite_server))
    players = frozenset({"players"})
    try:
        await cli.ingest("greyhold")
        await bot.retrieve("greyhold", "who rules Greyhold keep from the river tower?", players)
        vec = await bot.embedder.embed_query("who breeds white ravens?")
        assert await bot.store.search(
            "greyhold", vec, lens=players, top_k=100, doc_ids=["baron"]
        )  # rows cached
        before = await bot.store.ids("greyhold")
        (tmp_path / "campaigns" / "greyhold" / "baron.md").write_text(
            "---\ntitle: Baron Aldric\n---\n# Baron Aldric\n\nThe baron breeds white ravens in the north tower.\n",
            encoding="utf-8",
        )
        await cli.ingest("greyhold")
        bundle = await bot.retrieve("greyhold", "who breeds white ravens?", players)
        assert (
            bundle.documents[0].title == "Baron Aldric"
            and "white ravens" in bundle.documents[0].text
        )
        rows = await bot.store.search("greyhold", vec, lens=players, top_k=100, doc_ids=["baron"])
        now = await bot.store.ids("greyhold")
        assert rows and {h.id for h in rows} <= now and not {h.id for h in rows} <= before
    finally:
        await close_engine(bot)
        await close_engine(cli)


async def test_a_server_serves_past_its_query_window(lite_server):
    """Over the network protocol, where the 16,384-row window is the server's rule: a campaign
    read back, and a restricted search over more rows than one query may return."""
    from test_ports import check_past_query_window

    await check_past_query_window(lite_server)


# -- blue/green across processes ------------------------------------------------------------
#
# The bot and a ``liminalis reindex`` beside it: two engines over one SQLite data directory and
# one server, each with its own store client, as two processes have. Both run the release that
# ships the new embedder, the old one still loaded; the hash embedders' dimensions differ, so a
# query embedded for one generation cannot be scored against the other's collection.

BG_QUESTION = "the baron's secret in the river tower"
PLAYERS = frozenset({"players"})
GRACE_S = 3600.0


class WatchedStore(MilvusVectorStore):
    """A server client that records the store key of every search: the collection a question
    was read from."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.searched: list[str] = []

    async def search(self, campaign, vector, **kw):
        self.searched.append(campaign)
        return await super().search(campaign, vector, **kw)


def _old() -> HashEmbedder:
    return HashEmbedder(dim=256, model_id="hash-old")


def _new() -> HashEmbedder:
    return HashEmbedder(dim=128, model_id="hash-new")


async def asked(engine) -> tuple[list[str], list[tuple[str, float]]]:
    """A players' question: nothing from behind the GM wall; the ranking and its scores."""
    bundle = await engine.retrieve("greyhold", BG_QUESTION, PLAYERS)
    assert bundle.documents and all(
        CANARY not in d.text and d.title != GM_TITLE for d in bundle.documents
    )
    return list(bundle.ranked_doc_ids), [(d.doc_id, round(d.score, 9)) for d in bundle.documents]


async def upgraded_pair(tmp_path, uri: str, clock: FrozenClock):
    """The campaign indexed under the old embedder on the server (its answer returned), then the
    bot and the CLI of the upgrade over the same data directory and server."""
    root = make_tiny_campaign(tmp_path / "campaigns")
    for i in range(8):
        (root / f"note{i}.md").write_text(
            f"# Note {i}\n\nThe ferryman {i} rows across the river tower moat.\n", encoding="utf-8"
        )
    first = await make_engine(tmp_path, milvus=False, embedder=_old(), store=MilvusVectorStore(uri))
    try:
        await first.ingest("greyhold")
        before = await asked(first)
    finally:
        await close_engine(first)

    async def engine() -> Engine:
        return await make_engine(
            tmp_path,
            milvus=False,
            embedder=_new(),
            embedders=[_old()],
            store=WatchedStore(uri),
            clock=clock,
            generation_grace_s=GRACE_S,
        )

    return before, await engine(), await engine()


def server_collections(uri: str) -> set[str]:
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri)
    try:
        return set(client.list_collections())
    finally:
        client.close()


async def test_a_reindex_by_the_cli_reaches_the_running_bot(tmp_path, lite_server):
    """The bot answers from the serving generation while the CLI builds the next one, through
    an interrupted run; once the resumed run publishes, the bot's next question reads the new
    collection on the server, without a restart."""
    clock = FrozenClock()
    before, bot, cli = await upgraded_pair(tmp_path, lite_server, clock)
    old_profile = (await bot.reindex_status("greyhold")).serving
    new_profile = bot.indexer.profile()
    new_key = generation_key("greyhold", new_profile)
    try:
        assert await asked(bot) == before
        assert bot.store.searched[-1] == "greyhold"  # the collection of before generations

        with pytest.raises(Stop):
            await cli.reindex("greyhold", on_document=stop_after(3))
        status = await bot.reindex_status("greyhold")
        assert (status.serving, status.building) == (old_profile, new_profile)
        assert status.done == 3 and status.total > 3
        assert await asked(bot) == before
        assert bot.store.searched[-1] == "greyhold"

        report = await cli.reindex("greyhold")
        assert report.published and report.resumed == 3 and not report.failed
        assert collection_name(new_key, "hash-new") in server_collections(lite_server)

        after = await asked(bot)
        assert bot.store.searched[-1] == new_key
        assert after == await asked(cli)
        assert (await bot.reindex_status("greyhold")).serving == new_profile
    finally:
        await close_engine(bot)
        await close_engine(cli)


async def test_a_rollback_by_the_cli_reaches_the_bot_and_the_old_collection_goes(
    tmp_path, lite_server
):
    """The CLI's rollback is followed by the running bot with the answers of before the
    re-index; after rolling forward, the replaced collection stays on the server for the grace
    period, then is dropped."""
    clock = FrozenClock()
    before, bot, cli = await upgraded_pair(tmp_path, lite_server, clock)
    old_profile = (await bot.reindex_status("greyhold")).serving
    new_key = generation_key("greyhold", bot.indexer.profile())
    old_collection = collection_name("greyhold", "hash-old")
    new_collection = collection_name(new_key, "hash-new")
    try:
        assert await asked(bot) == before
        assert (await cli.reindex("greyhold")).published
        after = await asked(bot)
        assert bot.store.searched[-1] == new_key

        assert await cli.rollback_index("greyhold") == old_profile
        assert await asked(bot) == before
        assert bot.store.searched[-1] == "greyhold"
        # The bot's tick leaves the rollback be: its own profile is the one rolled back from.
        assert await bot.upgrade_index("greyhold") is None
        assert await asked(bot) == before
        assert bot.store.searched[-1] == "greyhold"

        await cli.rollback_index("greyhold")  # forward again: the old generation is previous
        assert await asked(bot) == after
        assert bot.store.searched[-1] == new_key
        assert {old_collection, new_collection} <= server_collections(lite_server)

        # Any command's start drops what has expired (``ensure_indexed``); here the CLI's.
        clock.advance(seconds=GRACE_S - 1)
        assert not await cli.ensure_indexed("greyhold")
        assert old_collection in server_collections(lite_server)
        clock.advance(seconds=1)
        assert not await cli.ensure_indexed("greyhold")
        collections = server_collections(lite_server)
        assert old_collection not in collections and new_collection in collections
        assert (await bot.reindex_status("greyhold")).previous == ()
        with pytest.raises(InvalidInput):
            await bot.rollback_index("greyhold")
        assert await asked(bot) == after
        assert bot.store.searched[-1] == new_key
    finally:
        await close_engine(bot)
        await close_engine(cli)
