"""The store: a data directory written before schema versions upgrades in place, and a database
that cannot be opened fails at once, named, without leaving a thread behind."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path

import harness
import numpy as np
import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from liminalis.answer import Responder
from liminalis.errors import StoreError
from liminalis.lens import GM, PLAYERS
from liminalis.store import LATEST, CampaignRow, Database, PassageRow, ScheduleRow
from liminalis.types import Document

# The schema exactly as liminalis/store/sqlite.py created it before migrations (user_version 0).
V0_SCHEMA = """
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
CREATE TABLE IF NOT EXISTS campaigns (
    slug TEXT PRIMARY KEY, name TEXT NOT NULL, root TEXT NOT NULL,
    model_id TEXT, generation INTEGER NOT NULL DEFAULT 0, updated_at REAL
);
CREATE TABLE IF NOT EXISTS documents (
    campaign TEXT NOT NULL, doc_id TEXT NOT NULL, path TEXT NOT NULL, title TEXT NOT NULL,
    type TEXT NOT NULL, visibility TEXT NOT NULL, aliases TEXT NOT NULL, tags TEXT NOT NULL,
    content_hash TEXT NOT NULL, text TEXT NOT NULL, synopsis TEXT NOT NULL, updated_at REAL,
    PRIMARY KEY (campaign, doc_id)
);
CREATE TABLE IF NOT EXISTS passages (
    campaign TEXT NOT NULL, passage_id TEXT NOT NULL, doc_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
    heading TEXT NOT NULL, hash TEXT NOT NULL, visibility TEXT NOT NULL,
    prev_id TEXT, next_id TEXT, tokens TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (campaign, passage_id)
);
CREATE INDEX IF NOT EXISTS passages_doc ON passages (campaign, doc_id, ordinal);
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, hash)
);
CREATE TABLE IF NOT EXISTS pins (
    campaign TEXT NOT NULL, scope TEXT NOT NULL, doc_id TEXT NOT NULL, created_at REAL,
    PRIMARY KEY (campaign, scope, doc_id)
);
CREATE TABLE IF NOT EXISTS channel_links (
    platform TEXT NOT NULL, channel_id TEXT NOT NULL, campaign TEXT NOT NULL, linked_at REAL,
    guild_id TEXT,
    PRIMARY KEY (platform, channel_id)
);
CREATE TABLE IF NOT EXISTS token_usage (
    day TEXT PRIMARY KEY, tokens INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS budgets (
    campaign TEXT NOT NULL, scope TEXT NOT NULL, tokens INTEGER NOT NULL,
    PRIMARY KEY (campaign, scope)
);
CREATE TABLE IF NOT EXISTS chat_state (
    chat_key TEXT PRIMARY KEY, campaign TEXT NOT NULL, state TEXT NOT NULL, updated_at REAL
);
CREATE TABLE IF NOT EXISTS chat_turns (
    chat_key TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
    lens TEXT NOT NULL DEFAULT '', created_at REAL, PRIMARY KEY (chat_key, seq)
);
CREATE TABLE IF NOT EXISTS memory_forgets (
    campaign TEXT PRIMARY KEY, epoch INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS recap_posts (
    campaign TEXT NOT NULL, slot TEXT NOT NULL, posted_at REAL, PRIMARY KEY (campaign, slot)
);
CREATE TABLE IF NOT EXISTS recap_schedules (
    campaign TEXT PRIMARY KEY, cron TEXT NOT NULL, platform TEXT NOT NULL, channel_id TEXT NOT NULL,
    parent_id TEXT
);
CREATE TABLE IF NOT EXISTS spend (
    day TEXT NOT NULL, campaign TEXT NOT NULL, role TEXT NOT NULL, model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    cache_read INTEGER NOT NULL, cache_write INTEGER NOT NULL, created_at REAL
);
"""

GM_LENS = frozenset({GM})
KEY = "tiny:C1|players"
VECTOR = np.arange(4, dtype=np.float32)


def write_v0(path: Path) -> None:
    """A database as today's main leaves it: the v0 schema, a row in every table."""
    conn = sqlite3.connect(path)
    conn.executescript(V0_SCHEMA)
    vis = json.dumps(["players"])
    conn.executemany(
        "INSERT INTO campaigns VALUES (?, ?, ?, ?, ?, ?)",
        [("tiny", "Tiny", "/campaigns/tiny", "hash-64|ctx=0", 3, 1.0)],
    )
    conn.execute(
        "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            "tiny",
            "baron",
            "baron.md",
            "Baron Aldric",
            "npc",
            vis,
            json.dumps(["Aldric"]),
            json.dumps(["noble"]),
            "h1",
            "The baron rules the keep.",
            "A baron.",
            1.0,
        ),
    )
    conn.execute(
        "INSERT INTO passages VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            "tiny",
            "p:baron:0",
            "baron",
            0,
            0,
            25,
            "Baron Aldric",
            "ph",
            vis,
            None,
            None,
            "baron rule keep",
        ),
    )
    conn.execute("INSERT INTO embeddings VALUES (?, ?, ?)", ("hash-64", "ph", VECTOR.tobytes()))
    conn.execute("INSERT INTO pins VALUES ('tiny', 'campaign', 'baron', 1.0)")
    conn.execute("INSERT INTO channel_links VALUES ('discord', 'C1', 'tiny', 1.0, 'G1')")
    conn.execute("INSERT INTO token_usage VALUES ('2025-01-01', 1234)")
    conn.execute("INSERT INTO budgets VALUES ('tiny', 'campaign', 4000)")
    conn.execute(
        "INSERT INTO chat_state VALUES (?, 'tiny', ?, 1.0)",
        (KEY, json.dumps({"seq": 2, "story": []})),
    )
    conn.executemany(
        "INSERT INTO chat_turns VALUES (?, ?, ?, ?, ?, 1.0)",
        [(KEY, 0, "user", "Who rules?", vis), (KEY, 1, "assistant", "The baron.", vis)],
    )
    conn.execute("INSERT INTO memory_forgets VALUES ('tiny', 2)")
    conn.execute("INSERT INTO recap_posts VALUES ('tiny', '2025-01-03T18:00', 1.0)")
    conn.execute("INSERT INTO recap_schedules VALUES ('tiny', '0 18 * * 5', 'discord', 'T1', 'C1')")
    conn.execute("INSERT INTO spend VALUES ('2025-01-01', 'tiny', 'reply', 'm', 1, 2, 3, 4, 1.0)")
    conn.commit()
    conn.close()


def tables_and_columns(path: Path) -> dict[str, set[str]]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: {r[1] for r in conn.execute(f"PRAGMA table_info({n})")} for n in names}
    finally:
        conn.close()


async def test_a_v0_database_upgrades_in_place_and_keeps_its_data(tmp_path):
    path = tmp_path / "liminalis.sqlite3"
    write_v0(path)
    async with Database(path) as db:
        assert await db.version() == LATEST
        assert await db.campaigns.get("tiny") == CampaignRow(
            slug="tiny", root="/campaigns/tiny", model_id="hash-64|ctx=0", generation=3
        )
        assert await db.campaigns.slugs() == ["tiny"]
        [doc] = await db.documents.all("tiny")
        assert doc == Document(
            doc_id="baron",
            path="baron.md",
            title="Baron Aldric",
            text="The baron rules the keep.",
            visibility=frozenset({"players"}),
            type="npc",
            aliases=("Aldric",),
            tags=("noble",),
            content_hash="h1",
            synopsis="A baron.",
        )
        assert await db.documents.passages("tiny") == [
            PassageRow(
                passage_id="p:baron:0",
                doc_id="baron",
                ordinal=0,
                start=0,
                end=25,
                heading="Baron Aldric",
                visibility=frozenset({"players"}),
                prev_id=None,
                next_id=None,
                tokens="baron rule keep",
            )
        ]
        assert await db.documents.hashes("tiny") == {"baron": ("baron.md", "h1")}
        assert np.array_equal((await db.embeddings.get("hash-64", ["ph"]))["ph"], VECTOR)
        assert await db.pins.doc_ids("tiny", ["campaign"]) == ["baron"]
        assert await db.links.campaign("discord", "C1") == "tiny"
        assert await db.links.guild_counts("discord", "tiny") == {"G1": 1}
        assert await db.usage.spent("2025-01-01") == 1234
        assert await db.budgets.get("tiny", "campaign") == 4000
        assert json.loads(await db.memory.state(KEY) or "{}")["seq"] == 2
        assert [(t.role, t.content) for t in await db.memory.recent_turns(KEY, 6)] == [
            ("assistant", "The baron."),
            ("user", "Who rules?"),
        ]
        assert await db.memory.forget_epoch("tiny") == 2
        assert await db.schedules.posted("tiny", "2025-01-03T18:00")
        assert await db.schedules.all() == [
            ScheduleRow("tiny", "0 18 * * 5", "discord", "T1", "C1")
        ]
        # and it takes writes in its new shape
        await db.pins.add("tiny", "C1", "baron", at=2.0)
        assert await db.memory.record(
            KEY,
            campaign="tiny",
            question="And?",
            answer="Silver.",
            lens=frozenset({PLAYERS}),
            state="{}",
            epoch=2,
        )
        assert await db.schedules.claim("tiny", "2025-01-10T18:00")
        await db.links.link("discord", "C2", "tiny", guild_id="G1")
    schema = tables_and_columns(path)
    assert "spend" not in schema
    assert "name" not in schema["campaigns"] and "hash" not in schema["passages"]
    assert {"store_key", "rolled_back_from"} <= schema["campaigns"]  # migrations 10 and 12
    assert (
        "created_at" not in schema["chat_turns"] and "created_at" in schema["pins"]
    )  # pins are ordered by it
    async with Database(path) as db:  # opening again migrates nothing
        assert await db.version() == LATEST
        assert len(await db.memory.recent_turns(KEY, 6)) == 4


async def test_a_database_from_a_newer_release_is_refused(tmp_path):
    path = tmp_path / "db.sqlite3"
    async with Database(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.close()
    with pytest.raises(StoreError) as err:
        await Database(path).open()
    assert "newer release" in err.value.user_message


def _garbled(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 32)


def _truncated(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,) for _ in range(2000)])
    conn.execute("CREATE INDEX t_x ON t (x)")
    conn.commit()
    conn.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage", [_garbled, _truncated], ids=["garbled-header", "truncated"])
async def test_a_damaged_file_fails_at_open_named_and_closed(tmp_path, damage):
    path = tmp_path / "db.sqlite3"
    damage(path)

    def sqlite_workers() -> int:
        # aiosqlite's connection threads, by their target's name: other threads (a shared
        # executor started by an earlier test, an earlier test's connection still winding
        # down) come and go on their own; this open must add none.
        return sum("_connection_worker_thread" in t.name for t in threading.enumerate())

    workers = sqlite_workers()
    db = Database(path)
    with pytest.raises(StoreError) as err:
        await db.open()
    assert err.value.user_message.startswith("The database ")
    assert str(path) not in err.value.user_message  # a path never reaches a player
    assert sqlite_workers() <= workers  # no aiosqlite worker left to keep the process alive


async def test_an_upgraded_data_directory_answers_with_the_same_bundle(tmp_path):
    """The tiny campaign indexed and asked about, its database rewritten in main's v0 shape (as
    if main had written it), then opened again: the same bundle, and its chat memory kept."""
    make_tiny_campaign(tmp_path / "campaigns")
    question = "Where does the baron rule from?"
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        before = await engine.retrieve("greyhold", question, GM_LENS)
        answered = await Responder(engine).respond("greyhold", question, GM_LENS, chat="C1")
    finally:
        await close_engine(engine)

    db_path = tmp_path / "db.sqlite3"
    v0 = tmp_path / "v0.sqlite3"
    rewrite_as_v0(db_path, v0)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    shutil.move(v0, db_path)

    engine = await make_engine(tmp_path, milvus=False)
    try:
        assert await harness.db(engine).version() == LATEST
        await engine.ingest(
            "greyhold"
        )  # a fresh in-memory vector store: re-filled from the embedding cache
        after = await engine.retrieve("greyhold", question, GM_LENS)
        assert after.ranked_doc_ids == before.ranked_doc_ids and after.ranked_doc_ids
        assert after.text == before.text
        again = await Responder(engine).respond("greyhold", question, GM_LENS, chat="C1")
        assert again.text == answered.text
        mem = await Responder(engine).memory.load("greyhold", "C1", GM_LENS)
        assert [q for q, _ in mem.turns] == [question, question]
    finally:
        await close_engine(engine)


# Columns main writes that the current schema dropped: the value main would have put there.
_V0_FILL = {
    ("campaigns", "name"): "slug",
    ("campaigns", "updated_at"): "1.0",
    ("documents", "updated_at"): "1.0",
    ("passages", "hash"): "passage_id",
    ("channel_links", "linked_at"): "1.0",
    ("chat_state", "updated_at"): "1.0",
    ("chat_turns", "created_at"): "1.0",
    ("recap_posts", "posted_at"): "1.0",
}


def rewrite_as_v0(current: Path, dest: Path) -> None:
    """Copy every row of ``current`` into a new file with the v0 schema (user_version 0)."""
    conn = sqlite3.connect(dest)
    conn.executescript(V0_SCHEMA)
    conn.execute("ATTACH DATABASE ? AS cur", (str(current),))
    for table, columns in tables_and_columns(dest).items():
        if table == "spend":
            continue
        have = {r[1] for r in conn.execute(f"PRAGMA cur.table_info({table})")}
        cols = sorted(columns)
        values = [c if c in have else _V0_FILL[(table, c)] for c in cols]
        conn.execute(
            f"INSERT INTO main.{table} ({', '.join(cols)}) SELECT {', '.join(values)} FROM cur.{table}"
        )
    conn.commit()
    conn.execute("DETACH DATABASE cur")
    conn.close()
