"""The SQLite connection: opened, checked and migrated once, its errors translated once.

SQLite is the source of truth: documents, passages (offsets into the stored document text),
the embedding cache, pins, channel links, budgets and chat memory. The vector store is a
derived index that can be rebuilt from here; a vector hit whose passage is not in the current
passage set is ignored, which is what keeps a campaign searchable on its previous state when an
ingest is killed half-way.

Every SQL statement of Liminalis lives in this package: :class:`Database` owns the connection
and hands out one repository per concern (``db.campaigns``, ``db.configs``, ``db.documents``, ``db.pins``,
``db.memory``, ``db.usage``, ``db.spend``, ``db.credits``, ``db.links``, ``db.schedules``,
``db.budgets``, ``db.chat_models``, ``db.embeddings``, ``db.passes``, ``db.knowledge``, ``db.questions``,
``db.cards``, and ``db.transfer``: a campaign's rows out for an export and back in for an
import). A ``sqlite3`` error from any of them reaches the caller as
:class:`~liminalis.errors.StoreError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite

from liminalis.errors import StoreError
from liminalis.store.budgets import BudgetRepository
from liminalis.store.campaigns import CampaignRepository
from liminalis.store.cards import CardRepository
from liminalis.store.chat_models import ChatModelRepository
from liminalis.store.configs import ConfigRepository
from liminalis.store.documents import DocumentRepository
from liminalis.store.embeddings import EmbeddingCache
from liminalis.store.files import FileSignatureRepository
from liminalis.store.generations import GenerationRepository
from liminalis.store.grants import GrantRepository
from liminalis.store.knowledge import KnowledgeRepository
from liminalis.store.links import LinkRepository, ScheduleRepository
from liminalis.store.memory import ChatMemoryRepository
from liminalis.store.passes import PassRepository
from liminalis.store.pins import PinRepository
from liminalis.store.questions import QuestionLogRepository
from liminalis.store.reviews import ReviewRepository
from liminalis.store.schema import LATEST, MIGRATIONS
from liminalis.store.spend import CreditRepository, SpendRepository
from liminalis.store.transfer import TransferRepository
from liminalis.store.usage import TokenUsageRepository

__all__ = ["Database", "DatabaseProbe", "probe_database", "store_cause"]

_log = logging.getLogger(__name__)

#: ``ALTER TABLE ... DROP COLUMN`` (migration 3) arrived in SQLite 3.35.
_MIN_SQLITE = (3, 35, 0)


READ_ONLY = "the data folder is read-only"
DISK_FULL = "the disk is full"
#: SQLite's primary result codes (the low byte of an extended one) → the cause, in words a
#: player may read: the host knows which folder; a chat must not be told.
_CAUSES = {
    sqlite3.SQLITE_READONLY: READ_ONLY,
    sqlite3.SQLITE_FULL: DISK_FULL,
    sqlite3.SQLITE_IOERR: "the disk failed to read or write",
    sqlite3.SQLITE_BUSY: "another process holds the database",
    sqlite3.SQLITE_LOCKED: "another process holds the database",
    sqlite3.SQLITE_CORRUPT: "the database is damaged",
    sqlite3.SQLITE_NOTADB: "the database file is not a database",
    sqlite3.SQLITE_CANTOPEN: "the database file cannot be opened",
    sqlite3.SQLITE_PERM: READ_ONLY,
}
_OS_CAUSES = {
    errno.EROFS: READ_ONLY,
    errno.EACCES: READ_ONLY,
    errno.EPERM: READ_ONLY,
    errno.ENOSPC: DISK_FULL,
    errno.EDQUOT: DISK_FULL,
    errno.EIO: "the disk failed to read or write",
}


def store_cause(exc: BaseException) -> str | None:
    """Why the database failed, in user-safe words ("the disk is full"); ``None`` if unknown."""
    if isinstance(exc, OSError):
        return _OS_CAUSES.get(exc.errno or 0)
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            return _CAUSES.get(code & 0xFF)
        # Raised by hand, or by a sqlite3 that does not say the code: its message does.
        text = str(exc).lower()
        if "readonly" in text or "read-only" in text:
            return _CAUSES[sqlite3.SQLITE_READONLY]
        if "disk is full" in text:
            return _CAUSES[sqlite3.SQLITE_FULL]
    return None


def _store_error(action: str, exc: sqlite3.Error, *, write: bool) -> StoreError:
    """``exc`` as a :class:`StoreError` whose user message names its cause where it is known."""
    cause = store_cause(exc)
    if cause is None:
        user_message = None
    elif write:
        user_message = f"This could not be saved: {cause}. The host can fix it."
    else:
        user_message = f"The campaign index is unavailable right now: {cause}."
    said = f" ({cause})" if cause else ""
    return StoreError(f"{action}{said}: {type(exc).__name__}: {exc}", user_message=user_message)


@contextlib.contextmanager
def _translated(action: str) -> Iterator[None]:
    """Re-raise a ``sqlite3`` error as :class:`StoreError` (aiosqlite raises sqlite3's own)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise _store_error(action, exc, write=False) from exc


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
        self.campaigns = CampaignRepository(self)
        self.configs = ConfigRepository(self)
        self.documents = DocumentRepository(self)
        self.pins = PinRepository(self)
        self.memory = ChatMemoryRepository(self)
        self.usage = TokenUsageRepository(self)
        self.spend = SpendRepository(self)
        self.credits = CreditRepository(self)
        self.links = LinkRepository(self)
        self.grants = GrantRepository(self)
        self.reviews = ReviewRepository(self)
        self.schedules = ScheduleRepository(self)
        self.budgets = BudgetRepository(self)
        self.chat_models = ChatModelRepository(self)
        self.embeddings = EmbeddingCache(self)
        self.files = FileSignatureRepository(self)
        self.passes = PassRepository(self)
        self.knowledge = KnowledgeRepository(self)
        self.questions = QuestionLogRepository(self)
        self.transfer = TransferRepository(self)
        self.cards = CardRepository(self)
        self.generations = GenerationRepository(self)

    async def __aenter__(self) -> Database:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect, check the file's integrity and bring its schema to :data:`LATEST`.

        Raises:
            StoreError: the file cannot be opened or written, is not a database, is damaged, or
                was written by a newer Liminalis. The connection (and aiosqlite's worker thread,
                which would keep the process alive) is closed first.
        """
        try:
            if sqlite3.sqlite_version_info < _MIN_SQLITE:
                raise StoreError(
                    f"SQLite {sqlite3.sqlite_version} is too old; Liminalis needs 3.35 or later",
                    user_message="The database cannot be opened: this SQLite is older than 3.35.",
                )
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                # Checked on a plain connection first: aiosqlite leaves its worker thread
                # reporting to a closed event loop when the file cannot even be opened.
                self._check(await asyncio.to_thread(_quick_check, self.path))
            self._conn = await aiosqlite.connect(self.path)
            self._conn.row_factory = aiosqlite.Row
            await self._conn.execute("PRAGMA journal_mode=WAL")
            await self._conn.execute("PRAGMA synchronous=NORMAL")
            await self._migrate()
        except BaseException as exc:
            await self.close()
            if isinstance(exc, StoreError):
                raise
            if isinstance(exc, (sqlite3.Error, OSError)):
                cause = f"{type(exc).__name__}: {exc}"
                raise StoreError(
                    f"cannot open database {self.path}: {cause}",
                    user_message="The database cannot be opened "
                    f"({_opening_cause(exc, Path(self.path))}).",
                ) from exc
            raise

    def _check(self, problems: list[str]) -> None:
        """A damaged file fails here, named, not at some later query."""
        if problems != ["ok"]:
            raise StoreError(
                f"database {self.path} failed its integrity check: {'; '.join(problems[:5])}",
                user_message="The database is damaged (its integrity check failed).",
            )

    async def _migrate(self) -> None:
        assert self._conn is not None
        async with self._conn.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        version = int(row[0]) if row else 0
        if version > LATEST:
            raise StoreError(
                f"database {self.path} is at schema version {version}; this release knows {LATEST}",
                user_message="The database was written by a newer release of the bot.",
            )
        for migration in MIGRATIONS:
            if migration.version <= version:
                continue
            await self._conn.execute("BEGIN")
            try:
                await migration.apply(self._conn)
                await self._conn.execute(f"PRAGMA user_version = {migration.version:d}")
                await self._conn.commit()
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    await self._conn.rollback()
                raise
            _log.info(
                "database %s: migration %d (%s) applied",
                self.path,
                migration.version,
                migration.name,
            )

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(sqlite3.Error):
                await conn.close()

    @property
    def conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StoreError("database is not open")
        return self._conn

    async def version(self) -> int:
        """The schema version (``PRAGMA user_version``) of the open database."""
        row = await self.fetchone("PRAGMA user_version")
        return int(row[0]) if row else 0

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        with _translated("query failed"):
            async with self.conn.execute(sql, params) as cur:
                return list(await cur.fetchall())

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Row | None:
        with _translated("query failed"):
            async with self.conn.execute(sql, params) as cur:
                return await cur.fetchone()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """The connection, for one writer's statements: committed together when the block ends,
        rolled back if it raises (cancellation included). Not re-entrant. A ``sqlite3`` error
        inside the block or at the commit leaves as :class:`StoreError`."""
        async with self._writer:
            conn = self.conn
            try:
                yield conn
                await conn.commit()
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    await conn.rollback()
                if isinstance(exc, sqlite3.Error):
                    raise _store_error("write failed", exc, write=True) from exc
                raise

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One write statement, committed; returns the rows it changed."""
        async with self.write() as conn, conn.execute(sql, params) as cur:
            return int(cur.rowcount)


def _quick_check(path: str) -> list[str]:
    """``PRAGMA quick_check`` of the file at ``path``: ``["ok"]``, or its problems."""
    conn = sqlite3.connect(path)
    try:
        return [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
    finally:
        conn.close()


def _opening_cause(exc: BaseException, path: Path) -> str:
    """Why the file at ``path`` would not open: a read-only folder or a full disk in the words
    every store error uses, anything else as SQLite or the OS says it ("file is not a
    database"). SQLite says only "unable to open database file" when it may not create the file
    (or its write-ahead log) in a folder it cannot write: the folder says why."""
    cause = store_cause(exc)
    if cause is None or cause == _CAUSES[sqlite3.SQLITE_CANTOPEN]:
        folder = path.parent
        if folder.is_dir() and not os.access(folder, os.W_OK):
            cause = READ_ONLY
    return cause if cause in {READ_ONLY, DISK_FULL} else _plain(exc)


def _plain(exc: BaseException) -> str:
    """The cause of an open failure in words a host reads without the path (which is theirs,
    but the message may reach a chat)."""
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)


# -- a read-only look (for `liminalis health` and `doctor`) ------------------------------


@dataclass(frozen=True, slots=True)
class DatabaseProbe:
    """What a read-only look at the database file found: whether it ``exists``, its schema
    ``version`` and, when it would not open or is damaged, the ``problem`` in one line (no
    path)."""

    exists: bool
    version: int = 0
    problem: str = ""


def probe_database(path: Path | str) -> DatabaseProbe:
    """Open ``path`` read-only (never created, never migrated: a running ``serve`` may hold it),
    run ``PRAGMA quick_check`` and read its schema version. Blocking: seconds on a large file."""
    p = Path(path)
    if not p.exists():
        return DatabaseProbe(exists=False)
    try:
        conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return DatabaseProbe(exists=True, problem=f"cannot be opened ({_plain(exc)})")
    try:
        problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
        row = conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.Error as exc:
        return DatabaseProbe(exists=True, problem=f"cannot be opened ({_plain(exc)})")
    finally:
        conn.close()
    version = int(row[0]) if row else 0
    if problems != ["ok"]:
        return DatabaseProbe(
            exists=True,
            version=version,
            problem=f"is damaged (integrity check: {'; '.join(problems[:3])})",
        )
    if version > LATEST:
        return DatabaseProbe(
            exists=True,
            version=version,
            problem=f"was written by a newer release (schema {version}; this one knows {LATEST})",
        )
    return DatabaseProbe(exists=True, version=version)
