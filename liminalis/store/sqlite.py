"""SQLite schema and queries.

SQLite is the source of truth: documents, passages (offsets into the stored document text),
the embedding cache, pins, channel links, budgets and chat memory. The vector store is a
derived index that can be rebuilt from here; a vector hit whose passage is not in the current
passage set is ignored, which is what keeps a campaign searchable on its previous state when an
ingest is killed half-way.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite
import numpy as np

from liminalis.errors import StoreError
from liminalis.types import Document, Passage

__all__ = ["Database", "SCHEMA"]

# Columns added since a table was first shipped: (table, column, declaration). A data directory
# from before gets them on open, NULL in its old rows (``ALTER TABLE ... ADD COLUMN``).
_ADDED_COLUMNS = (
    ("channel_links", "guild_id", "TEXT"),  # the Discord server of a link; NULL: not known yet
    ("recap_schedules", "parent_id", "TEXT"),  # the parent channel of a schedule set in a thread
)

SCHEMA = """
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


def _vis_json(vis: Iterable[str]) -> str:
    return json.dumps(sorted(vis))


class Database:
    """An aiosqlite connection with the Liminalis schema. Use as ``async with Database(path)``.

    Every coroutine of the service shares the one connection, so its transaction is shared too:
    a commit in one coroutine would commit another's half-done document swap, and a rollback
    would undo another's chat turn. Every write therefore goes through :meth:`write`, one writer
    at a time, committed or rolled back as a whole.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self._conn: aiosqlite.Connection | None = None
        self._writer = asyncio.Lock()

    async def __aenter__(self) -> Database:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = await aiosqlite.connect(self.path)
            self._conn.row_factory = aiosqlite.Row
            await self._conn.executescript(SCHEMA)
            for table, column, decl in _ADDED_COLUMNS:
                async with self._conn.execute(f"PRAGMA table_info({table})") as cur:
                    if column not in {r["name"] for r in await cur.fetchall()}:
                        await self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
            await self._conn.commit()
        except Exception as exc:  # aiosqlite/sqlite errors are not a public hierarchy
            raise StoreError(f"cannot open database {self.path}: {exc}") from exc

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    @property
    def conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StoreError("database is not open")
        return self._conn

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        async with self.conn.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Row | None:
        async with self.conn.execute(sql, params) as cur:
            return await cur.fetchone()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """The connection, for one writer's statements: committed together when the block ends,
        rolled back if it raises (cancellation included). Not re-entrant."""
        async with self._writer:
            conn = self.conn
            try:
                yield conn
                await conn.commit()
            except BaseException:
                await conn.rollback()
                raise

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One write statement, committed; returns the rows it changed."""
        async with self.write() as conn, conn.execute(sql, params) as cur:
            return int(cur.rowcount)

    # -- campaigns ---------------------------------------------------------------------------

    async def upsert_campaign(self, slug: str, name: str, root: str) -> None:
        await self.execute(
            "INSERT INTO campaigns (slug, name, root, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(slug) DO UPDATE SET name=excluded.name, root=excluded.root",
            (slug, name, root, time.time()),
        )

    async def campaign_row(self, slug: str) -> aiosqlite.Row | None:
        return await self.fetchone("SELECT * FROM campaigns WHERE slug = ?", (slug,))

    async def set_campaign_model(self, slug: str, model_id: str) -> None:
        await self.execute("UPDATE campaigns SET model_id = ? WHERE slug = ?", (model_id, slug))

    async def generation(self, slug: str) -> int:
        row = await self.fetchone("SELECT generation FROM campaigns WHERE slug = ?", (slug,))
        return int(row["generation"]) if row else 0

    # -- documents and passages --------------------------------------------------------------

    async def documents(self, campaign: str) -> list[Document]:
        rows = await self.fetchall("SELECT * FROM documents WHERE campaign = ? ORDER BY doc_id", (campaign,))
        return [self._doc(r) for r in rows]

    async def document(self, campaign: str, doc_id: str) -> Document | None:
        row = await self.fetchone("SELECT * FROM documents WHERE campaign = ? AND doc_id = ?", (campaign, doc_id))
        return self._doc(row) if row else None

    async def document_hashes(self, campaign: str) -> dict[str, tuple[str, str]]:
        rows = await self.fetchall("SELECT doc_id, path, content_hash FROM documents WHERE campaign = ?", (campaign,))
        return {r["doc_id"]: (r["path"], r["content_hash"]) for r in rows}

    async def visibilities(self, campaign: str) -> dict[str, frozenset[str]]:
        rows = await self.fetchall("SELECT doc_id, visibility FROM documents WHERE campaign = ?", (campaign,))
        return {r["doc_id"]: frozenset(json.loads(r["visibility"])) for r in rows}

    async def documents_awaiting_rebuild(self, campaign: str) -> int:
        """Documents whose content hash a rebuild blanked and no ingest has re-prepared yet."""
        row = await self.fetchone(
            "SELECT COUNT(*) AS n FROM documents WHERE campaign = ? AND content_hash = ''", (campaign,))
        return int(row["n"]) if row else 0

    @staticmethod
    def _doc(r: aiosqlite.Row) -> Document:
        return Document(
            doc_id=r["doc_id"],
            path=r["path"],
            title=r["title"],
            text=r["text"],
            visibility=frozenset(json.loads(r["visibility"])),
            type=r["type"],
            aliases=tuple(json.loads(r["aliases"])),
            tags=tuple(json.loads(r["tags"])),
            content_hash=r["content_hash"],
            synopsis=r["synopsis"],
        )

    async def passages(self, campaign: str, doc_id: str | None = None) -> list[aiosqlite.Row]:
        if doc_id is None:
            return await self.fetchall(
                "SELECT * FROM passages WHERE campaign = ? ORDER BY doc_id, ordinal", (campaign,)
            )
        return await self.fetchall(
            "SELECT * FROM passages WHERE campaign = ? AND doc_id = ? ORDER BY ordinal", (campaign, doc_id)
        )

    async def passage_ids(self, campaign: str) -> set[str]:
        rows = await self.fetchall("SELECT passage_id FROM passages WHERE campaign = ?", (campaign,))
        return {r["passage_id"] for r in rows}

    async def replace_document(
        self, campaign: str, doc: Document, passages: Sequence[Passage], tokens: dict[str, str]
    ) -> None:
        """Atomically swap one document and its passage set."""
        async with self.write() as conn:
            await conn.execute(
                "INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    campaign, doc.doc_id, doc.path, doc.title, doc.type, _vis_json(doc.visibility),
                    json.dumps(list(doc.aliases)), json.dumps(list(doc.tags)), doc.content_hash,
                    doc.text, doc.synopsis, time.time(),
                ),
            )
            await conn.execute("DELETE FROM passages WHERE campaign = ? AND doc_id = ?", (campaign, doc.doc_id))
            await conn.executemany(
                "INSERT INTO passages VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        campaign, p.passage_id, p.doc_id, p.ordinal, p.start, p.end, p.heading, p.hash,
                        _vis_json(p.visibility), p.prev_id, p.next_id, tokens.get(p.passage_id, ""),
                    )
                    for p in passages
                ],
            )
            await conn.execute("UPDATE campaigns SET generation = generation + 1 WHERE slug = ?", (campaign,))

    async def remove_document(self, campaign: str, doc_id: str) -> int:
        async with self.write() as conn:
            async with conn.execute(
                "SELECT COUNT(*) FROM passages WHERE campaign = ? AND doc_id = ?", (campaign, doc_id)
            ) as cur:
                row = await cur.fetchone()
            await conn.execute("DELETE FROM passages WHERE campaign = ? AND doc_id = ?", (campaign, doc_id))
            await conn.execute("DELETE FROM documents WHERE campaign = ? AND doc_id = ?", (campaign, doc_id))
            await conn.execute("DELETE FROM pins WHERE campaign = ? AND doc_id = ?", (campaign, doc_id))
            await conn.execute("UPDATE campaigns SET generation = generation + 1 WHERE slug = ?", (campaign,))
        return int(row[0]) if row else 0

    # -- embedding cache ---------------------------------------------------------------------

    async def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(hashes))
        for i in range(0, len(uniq), 500):
            chunk = uniq[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = await self.fetchall(
                f"SELECT hash, vector FROM embeddings WHERE model = ? AND hash IN ({marks})", (model, *chunk)
            )
            for r in rows:
                out[r["hash"]] = np.frombuffer(r["vector"], dtype=np.float32)
        return out

    async def cache_vectors(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items]
        async with self.write() as conn:
            await conn.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)", rows)
