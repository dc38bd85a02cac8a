"""``VectorStore`` backed by Milvus through pymilvus ``MilvusClient``.

The URI is the one setting: a path (``data/milvus.db``) opens Milvus Lite in-process; an
``http://host:19530`` URI talks to a Milvus server with the same code.

Isolation: each campaign gets its own collection, named from the campaign slug and the
embedding model id, so two campaigns never share rows and a changed embedder starts a fresh
collection (never a mix of vectors from two models). Every search also carries the lens filter
``array_contains_any(vis, [...])`` inside the store, and the engine re-checks before rendering.
All pymilvus calls run on one worker thread: Milvus Lite is blocking and not thread-safe.

Repair: the store is derived data (SQLite holds the documents, its embedding cache the vectors).
A Milvus Lite store that cannot be opened, or a collection that cannot be loaded or read (a
truncated or garbled file), is moved aside to ``<uri>.damaged`` and recreated empty, instead of
failing every question until someone deletes it by hand; the indexer then finds the documents
whose vectors are missing and refills them from the cache (``liminalis.ingest.indexer``). Only
what failed is moved: the collection, or the whole store when it cannot be opened at all. A
Milvus server is never touched: its errors are reported, as they may well pass.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from liminalis.errors import StoreError
from liminalis.lens import GM, NOT_GM, visible
from liminalis.ports import VectorHit, VectorRecord

__all__ = ["MilvusVectorStore", "collection_name", "VectorStoreProbe", "probe_milvus"]

_log = logging.getLogger(__name__)
T = TypeVar("T")


SCHEMA_VERSION = 2


def visibility_key(visibility: Iterable[str]) -> str:
    """Canonical scalar form of a visibility set, e.g. ``"gm,players"``."""
    return ",".join(sorted(visibility))


def collection_name(campaign: str, model_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_]", "_", campaign)[:40]
    tag = hashlib.blake2b(
        f"{campaign}\x1f{model_id}\x1fv{SCHEMA_VERSION}".encode(), digest_size=5
    ).hexdigest()
    return f"lim_{safe}_{tag}"


@dataclass(frozen=True, slots=True)
class _DocRows:
    ids: tuple[str, ...]
    passage_ids: tuple[str, ...]
    kinds: tuple[str, ...]
    vis: tuple[frozenset[str], ...]
    vectors: np.ndarray


#: Documents whose rows the restricted search keeps in memory, per collection. A row is a
#: 384-float vector (1.5 KB); a long transcript window has about 20 rows, so 1,024 documents
#: cost at most about 30 MB, and a 500-document campaign fits whole.
DOC_ROWS_CACHE = 1024

#: The most rows one query returns: a Milvus server refuses ``offset + limit`` above 16,384.
QUERY_LIMIT = 16_384


class _UnimplementedRpcFilter(logging.Filter):
    """Drops grpc's ERROR traceback for an RPC Milvus Lite does not implement (pymilvus probes
    AllocTimestamp; the call it belongs to succeeds). Every other grpc record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (
            isinstance(exc, NotImplementedError)
            and "not implemented" in record.getMessage().lower()
        )


_RPC_FILTER = _UnimplementedRpcFilter()


class _LiteIteratorTsFilter(logging.Filter):
    """Drops pymilvus's warning that Milvus Lite has no server timestamp for a query iterator
    (it falls back to the client's clock, which is right for an in-process store)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "failed to get mvccTs" not in record.getMessage()


_TS_FILTER = _LiteIteratorTsFilter()
_ITERATOR_LOGGER = "pymilvus.client.iterator.query_iterator"


class _StoreLocked(StoreError):
    """Another process holds the Milvus Lite store: never a sign of damage (nothing is moved)."""


def _check_lite_lock(uri: str) -> None:
    """Fail with an explanation when another process has this Milvus Lite store open.

    Milvus Lite takes an exclusive lock on its data directory, one process at a time: a CLI
    ``ingest`` or ``ask`` beside a running bot would otherwise fail with a library traceback and
    "try again", which never helps while the bot runs. Probed before the client starts (the
    library logs the failure with a traceback); a lock this process already holds is fine.
    """
    lock = Path(uri) / "LOCK"  # milvus_lite.db.LOCK_FILENAME
    if sys.platform == "win32" or not lock.exists():
        return
    from milvus_lite.server_manager import server_manager_instance

    if os.path.abspath(uri) in getattr(server_manager_instance, "_servers", {}):
        return

    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        raise _StoreLocked(
            f"Milvus Lite store {uri} is open in another process",
            user_message=(
                "The campaign index is open in another Liminalis process (the bot?). Milvus Lite allows "
                "one process per data directory: stop the other one, or share the index through "
                "`milvus-lite server --data-dir <data dir>/milvus.db` with LIMINALIS_MILVUS_URI="
                "http://127.0.0.1:19530 for every process."
            ),
        ) from None
    finally:
        os.close(fd)


def _str_list(values: Sequence[str]) -> str:
    """A list of strings in Milvus's expression syntax. JSON's quoting, but with characters
    beyond ASCII written as they are: Milvus knows no ``\\u`` escape, so a document "café" or
    "セッション" failed every exact search that named it (and the ranker fell back to the fused
    order, logging one warning)."""
    return json.dumps(list(values), ensure_ascii=False)


def _lens_filter(lens: frozenset[str], visibilities: Iterable[frozenset[str]] | None) -> str | None:
    """The store-side filter a search under ``lens`` runs with: "" for none (the GM over a
    campaign without hidden sections), None when the lens can see nothing (no search runs).
    ``visibilities``: the campaign's visibility sets, when known, filtered by exact key."""
    if GM not in lens:
        names = sorted(lens - {GM, NOT_GM})
        if not names:
            return None
        if visibilities is not None:
            keys = sorted({visibility_key(v) for v in visibilities if visible(v, lens)})
            if not keys:
                return None
            return f"vkey in {_str_list(keys)}"
        return f"array_contains_any(vis, {_str_list(names)})"
    if visibilities is None:
        return f"not array_contains(vis, {_str_list([NOT_GM])[1:-1]})"
    if any(NOT_GM in v for v in visibilities):
        # The GM reads a file with hidden sections whole, not its shared view: without such
        # files the GM's search stays unfiltered, as it always was.
        keys = sorted({visibility_key(v) for v in visibilities if visible(v, lens)})
        return f"vkey in {_str_list(keys)}"
    return ""


class MilvusVectorStore:
    """Milvus (Lite or server) vector store, one collection per campaign and model."""

    def __init__(self, uri: str, *, token: str = "") -> None:
        self._uri = uri
        self._token = token
        self._client: Any = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="milvus")
        self._collections: dict[str, str] = {}
        #: campaign → (dim, model id) it was ensured with: a repair recreates its collection.
        self._specs: dict[str, tuple[int, str]] = {}
        #: What repairs moved aside (for the host's logs and tests): "store" or a collection name.
        self.repairs: list[str] = []
        #: collection → doc id → its rows (ids, passage ids, kinds, visibilities, unit vectors),
        #: for restricted searches. Touched only on the store's one worker thread. A collection's
        #: entries are dropped on every write through this store, and on ``invalidate`` (the
        #: engine calls it when the campaign's generation moved: a write by another process to a
        #: shared server).
        self._doc_rows: dict[str, OrderedDict[str, _DocRows]] = {}

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def call() -> T:
            self._connect()
            return fn(*args, **kwargs)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"milvus call {getattr(fn, '__name__', fn)} failed: {exc}") from exc

    def _connect(self) -> None:
        if self._client is not None:
            return
        from pymilvus import MilvusClient

        # Milvus Lite (in-process, or its ``milvus-lite server`` over http) has no server
        # timestamp for query iterators; the client's clock is right for it, and a Milvus
        # server never logs this.
        if _TS_FILTER not in logging.getLogger(_ITERATOR_LOGGER).filters:
            logging.getLogger(_ITERATOR_LOGGER).addFilter(_TS_FILTER)
        if "://" not in self._uri:  # Milvus Lite, in-process
            Path(self._uri).parent.mkdir(parents=True, exist_ok=True)
            if _RPC_FILTER not in logging.getLogger("grpc._server").filters:
                logging.getLogger("grpc._server").addFilter(_RPC_FILTER)
            _check_lite_lock(self._uri)
        kwargs = {"uri": self._uri}
        if self._token:
            kwargs["token"] = self._token
        self._client = MilvusClient(**kwargs)

    def _name(self, campaign: str) -> str:
        try:
            return self._collections[campaign]
        except KeyError:
            raise StoreError(f"collection for campaign {campaign!r} not ensured") from None

    @property
    def _lite(self) -> bool:
        return "://" not in self._uri

    def _create(self, name: str, dim: int) -> bool:
        """Open collection ``name``, or create it empty; ``True`` when created (worker thread)."""
        from pymilvus import DataType

        c = self._client
        if c.has_collection(name):
            c.load_collection(name)
            return False
        schema = c.create_schema(auto_id=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=512)
        schema.add_field("passage_id", DataType.VARCHAR, max_length=512)
        schema.add_field("doc_id", DataType.VARCHAR, max_length=512)
        schema.add_field("kind", DataType.VARCHAR, max_length=16)
        schema.add_field(
            "vis", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=64, max_length=64
        )
        # Scalar copy of ``vis`` for filtering: Milvus Lite evaluates array_contains_any in
        # Python row by row (1.8 s at 25k rows) but ``vkey in [...]`` vectorised (~+15 ms).
        schema.add_field("vkey", DataType.VARCHAR, max_length=1024)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        index = c.prepare_index_params()
        index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="IP")
        c.create_collection(name, schema=schema, index_params=index)
        return True

    async def _repairing(self, fn: Callable[[], T], *, collection: str | None) -> T:
        """``fn`` on the worker; on a Milvus Lite store that fails it, move the damaged part
        aside (``collection``, else the whole store; the whole store too when moving the
        collection did not help), recreate, and run ``fn`` once more."""
        try:
            return await self._run(fn)
        except _StoreLocked:
            raise
        except StoreError as exc:
            if not self._lite:
                raise
            first: StoreError = exc
        for part in ([collection] if collection else []) + [None]:
            try:
                await self._on_worker(functools.partial(self._set_aside, part, first))
                return await self._run(fn)
            except _StoreLocked:
                raise
            except StoreError as exc:
                first = exc
        raise first

    async def _on_worker(self, fn: Callable[[], T]) -> T:
        """``fn`` on the store's worker thread without connecting first (a repair connects)."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"milvus repair failed: {exc}") from exc

    def _set_aside(self, collection: str | None, cause: Exception) -> None:
        """Move a damaged collection (or the whole Milvus Lite store) to ``<uri>.damaged``,
        replacing what an earlier repair left there, and recreate every collection this store
        has opened, empty (worker thread). Refuses while another process holds the store."""
        root = Path(self._uri)
        self._release()
        _check_lite_lock(self._uri)  # a store another process holds is not ours to move
        aside = root.with_name(root.name + ".damaged")
        if collection is None:
            moving, target = root, aside
        else:
            moving = root / "collections" / collection
            target = aside / "collections" / collection
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        if moving.exists() or moving.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(moving, target)
        _log.error(
            "Milvus Lite %s is damaged (%s): moved aside to %s and recreated empty; its campaigns "
            "refill from the embedding cache",
            f"collection {collection}" if collection else f"store {root}",
            cause,
            target,
        )
        self.repairs.append(collection or "store")
        self._doc_rows.clear()
        self._connect()
        for campaign, (dim, model_id) in self._specs.items():
            self._create(collection_name(campaign, model_id), dim)

    def _release(self) -> None:
        """Close the client and release Milvus Lite's in-process server and its file lock."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception as exc:  # a client of a damaged store may fail to close
                _log.debug("milvus client close failed: %s", exc)
            self._client = None
        if self._lite:
            try:
                from milvus_lite.server_manager import server_manager_instance

                server_manager_instance.release_server(str(Path(self._uri).resolve()))
            except Exception as exc:  # best effort; process exit releases it anyway
                _log.debug("milvus lite release failed: %s", exc)

    async def ensure(self, campaign: str, *, dim: int, model_id: str) -> bool:
        name = collection_name(campaign, model_id)
        self._specs[campaign] = (dim, model_id)
        created = await self._repairing(lambda: self._create(name, dim), collection=name)
        self._collections[campaign] = name
        return created

    async def upsert(self, campaign: str, records: Sequence[VectorRecord]) -> None:
        if not records:
            return
        name = self._name(campaign)
        rows = [
            {
                "id": r.id,
                "passage_id": r.passage_id,
                "doc_id": r.doc_id,
                "kind": r.kind,
                "vis": sorted(r.visibility),
                "vkey": visibility_key(r.visibility),
                "vector": np.asarray(r.vector, dtype=np.float32).tolist(),
            }
            for r in records
        ]

        def go() -> None:
            self._doc_rows.pop(name, None)
            for i in range(0, len(rows), 1000):
                self._client.upsert(name, rows[i : i + 1000])

        await self._run(go)

    async def delete(self, campaign: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        name = self._name(campaign)
        ids = list(ids)

        def go() -> None:
            self._doc_rows.pop(name, None)
            for i in range(0, len(ids), 1000):
                # By filter, not ``ids=``: pymilvus quotes ids without escaping, so an id with a
                # quote (a document "Vex'ahlia") failed the delete and with it the re-ingest.
                self._client.delete(name, filter=f"id in {_str_list(ids[i : i + 1000])}")

        await self._run(go)

    async def ids(self, campaign: str) -> set[str]:
        """Every row id of the campaign's collection. The indexer reads these at every ingest to
        find what the store lacks; a collection that cannot be read is repaired here (see the
        module docstring) and reads empty, so its documents are refilled."""
        name = self._name(campaign)

        def go() -> set[str]:
            return {row["id"] for row in self._scan(name, ["id"])}

        return await self._repairing(go, collection=name)

    async def count(self, campaign: str) -> int:
        """The collection's rows. Milvus Lite keeps its statistics exact through deletes and
        upserts and answers them without a scan; a Milvus server's statistics lag deletes until
        compaction, so a server is asked for ``count(*)``, which it computes on its side."""
        name = self._name(campaign)

        def go() -> int:
            if self._lite:
                return int(self._client.get_collection_stats(name)["row_count"])
            rows = self._client.query(name, filter="", output_fields=["count(*)"])
            return int(rows[0]["count(*)"])

        return await self._repairing(go, collection=name)

    def _scan(
        self, name: str, fields: list[str], *, where: str = 'id != ""', batch: int = 4000
    ) -> Iterator[dict[str, Any]]:
        """Every row of a collection (or those matching ``where``). An iterator, not offset
        paging: a Milvus server refuses offset + limit above 16,384, so paging would break a
        large campaign on a server."""
        it = self._client.query_iterator(name, batch_size=batch, filter=where, output_fields=fields)
        try:
            while rows := it.next():
                yield from rows
        finally:
            it.close()

    def _rows(self, name: str, fields: list[str], *, where: str) -> Iterable[dict[str, Any]]:
        """The rows matching ``where``: one query, and an iterator only when the query came
        back full. A query returns at most ``QUERY_LIMIT`` rows (a few multi-megabyte documents
        hold more, which one query would cut off silently); an iterator costs several round
        trips and a fresh scan of the collection for each, which for a few dozen documents is
        most of a question's restricted search. A server configured with a smaller query
        window refuses the query: the iterator pages within any window."""
        from pymilvus import MilvusException

        try:
            rows: list[dict[str, Any]] = self._client.query(
                name, filter=where, output_fields=fields, limit=QUERY_LIMIT
            )
        except MilvusException:
            return self._scan(name, fields, where=where)
        if len(rows) < QUERY_LIMIT:
            return rows
        return self._scan(name, fields, where=where)

    async def all_vectors(self, campaign: str) -> list[tuple[str, np.ndarray]]:
        """Every stored vector with its document, sorted by id (for offline training, e.g. the
        query adapter; not on any request path)."""
        name = self._name(campaign)

        def go() -> list[tuple[str, np.ndarray]]:
            rows = sorted(self._scan(name, ["id", "doc_id", "vector"]), key=lambda r: r["id"])
            return [(r["doc_id"], np.asarray(r["vector"], dtype=np.float32)) for r in rows]

        return await self._run(go)

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
        """The ``top_k`` rows nearest ``vector`` that ``lens`` may see: exact over ``doc_ids``
        when given (:meth:`_search_exact`), else the index's search under the lens's filter
        (:meth:`_search_index`, :func:`_lens_filter`)."""
        name = self._name(campaign)
        if doc_ids is not None and not doc_ids:
            return []
        where = _lens_filter(lens, visibilities)
        if where is None:
            return []
        if doc_ids is not None:
            return await self._run(self._search_exact, name, vector, lens, top_k, doc_ids)
        kwargs: dict[str, Any] = {"filter": where} if where else {}
        return await self._run(self._search_index, name, vector, lens, top_k, kwargs)

    def _search_exact(
        self,
        name: str,
        vector: np.ndarray,
        lens: frozenset[str],
        top_k: int,
        doc_ids: Sequence[str],
    ) -> list[VectorHit]:
        """A search restricted to a few documents is exact: the index's approximate search
        applies the filter after probing, so a document far from the query's clusters would
        return nothing. Those documents' rows are fetched once (then cached until the
        collection is written) and scored here: a few hundred dot products. The rows carry
        their visibility, checked against the lens exactly as :meth:`_search_index` checks
        hits."""
        cache = self._doc_rows.setdefault(name, OrderedDict())
        wanted = sorted(set(doc_ids or ()))
        self._cache_doc_rows(name, cache, [d for d in wanted if d not in cache])
        q = np.asarray(vector, dtype=np.float32)
        hits: list[VectorHit] = []
        for d in wanted:
            held = cache[d]
            cache.move_to_end(d)
            if not held.ids:
                continue
            scores = held.vectors @ q
            hits.extend(
                VectorHit(
                    id=held.ids[k],
                    passage_id=held.passage_ids[k],
                    doc_id=d,
                    kind=held.kinds[k],
                    score=float(scores[k]),
                )
                for k in range(len(held.ids))
                if visible(held.vis[k], lens)
            )
        while len(cache) > DOC_ROWS_CACHE:
            cache.popitem(last=False)
        hits.sort(key=lambda h: -h.score)
        return hits[:top_k]

    def _cache_doc_rows(
        self, name: str, cache: OrderedDict[str, _DocRows], missing: list[str]
    ) -> None:
        """Fetch the rows of the ``missing`` documents into ``cache``, 256 documents a query
        (a document without rows is cached as empty)."""
        for i in range(0, len(missing), 256):
            part = missing[i : i + 256]
            got: dict[str, list[dict[str, Any]]] = {d: [] for d in part}
            rows = self._rows(
                name,
                ["id", "passage_id", "doc_id", "kind", "vis", "vector"],
                where=f"doc_id in {_str_list(part)}",
            )
            for r in rows:
                got.setdefault(r["doc_id"], []).append(r)
            for d, rs in got.items():
                cache[d] = _DocRows(
                    ids=tuple(r["id"] for r in rs),
                    passage_ids=tuple(r["passage_id"] for r in rs),
                    kinds=tuple(r["kind"] for r in rs),
                    vis=tuple(frozenset(r.get("vis") or ()) for r in rs),
                    vectors=np.asarray([r["vector"] for r in rs], dtype=np.float32).reshape(
                        len(rs), -1
                    ),
                )

    def _search_index(
        self,
        name: str,
        vector: np.ndarray,
        lens: frozenset[str],
        top_k: int,
        kwargs: dict[str, Any],
    ) -> list[VectorHit]:
        """The index's approximate search under the lens's filter; every hit's visibility is
        checked again (belt and braces: never trust the filter alone)."""
        res = self._client.search(
            name,
            data=[np.asarray(vector, dtype=np.float32).tolist()],
            limit=top_k,
            output_fields=["passage_id", "doc_id", "kind", "vis"],
            anns_field="vector",
            **kwargs,
        )
        hits = []
        for h in res[0]:
            ent = h["entity"]
            if not visible(ent.get("vis") or (), lens):
                continue  # belt and braces: never trust the filter alone
            hits.append(
                VectorHit(
                    id=h["id"],
                    passage_id=ent["passage_id"],
                    doc_id=ent["doc_id"],
                    kind=ent["kind"],
                    score=float(h["distance"]),
                )
            )
        return hits

    async def invalidate(self, campaign: str) -> None:
        name = self._collections.get(campaign)
        if name:
            await self._run(lambda: self._doc_rows.pop(name, None))

    async def flush(self, campaign: str) -> None:
        name = self._name(campaign)
        await self._run(lambda: self._client.flush(name))

    async def drop(self, campaign: str) -> None:
        name = self._collections.pop(campaign, None)
        if name:

            def go() -> None:
                self._doc_rows.pop(name, None)
                self._client.drop_collection(name)

            await self._run(go)

    async def close(self) -> None:
        def go() -> None:
            if self._client is not None:
                # Milvus Lite keeps its file lock until the in-process server is released;
                # release it so another process (a re-run, the CLI) can open the path.
                self._release()

        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, go)
        finally:
            self._pool.shutdown(wait=True)


# -- a look without opening the store (for `liminalis health` and `doctor`) -------------


@dataclass(frozen=True, slots=True)
class VectorStoreProbe:
    """Whether the store at a URI can be used (``ok``) and what was found, in one line naming
    the URI (without any credentials in it)."""

    ok: bool
    detail: str


def _safe_uri(uri: str) -> str:
    """``uri`` without a ``user:password@`` part."""
    parts = urlsplit(uri)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit(parts._replace(netloc=netloc))
    return uri


def _lite_lock_held(path: Path) -> bool:
    """Whether another process holds this Milvus Lite directory's lock (a running ``serve``)."""
    lock = path / "LOCK"
    if sys.platform == "win32" or not lock.exists():
        return False

    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def probe_milvus(
    uri: str, *, token: str = "", timeout_s: float = 3.0, deep: bool = False
) -> VectorStoreProbe:
    """Milvus Lite: the directory is usable (or not made yet) and whether a process has it open;
    nothing is opened, so a running ``serve`` keeps its lock. A server: a TCP connection within
    ``timeout_s``; ``deep`` also lists its collections through pymilvus (it speaks Milvus).
    Blocking."""
    if "://" not in uri:
        path = Path(uri)
        if path.exists() and not path.is_dir():
            return VectorStoreProbe(False, f"Milvus Lite at {uri} is not a Milvus Lite directory")
        if not path.exists():
            return VectorStoreProbe(True, f"Milvus Lite at {uri} (created at the first index)")
        try:
            held = _lite_lock_held(path)
        except OSError as exc:
            return VectorStoreProbe(
                False, f"Milvus Lite at {uri} cannot be read ({exc.strerror or exc})"
            )
        return VectorStoreProbe(
            True, f"Milvus Lite at {uri}" + (" (open in a running process)" if held else "")
        )
    safe = _safe_uri(uri)
    parts = urlsplit(uri)
    host, port = parts.hostname or "localhost", parts.port or 19530
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        return VectorStoreProbe(False, f"Milvus server {safe} is unreachable ({reason})")
    if not deep:
        return VectorStoreProbe(True, f"Milvus server {safe} (reachable)")
    try:
        from pymilvus import MilvusClient

        client = MilvusClient(uri=uri, token=token, timeout=timeout_s)
        try:
            n = len(client.list_collections())
        finally:
            client.close()
    except Exception as exc:
        return VectorStoreProbe(
            False, f"Milvus server {safe} answers, but not as Milvus ({type(exc).__name__}: {exc})"
        )
    return VectorStoreProbe(True, f"Milvus server {safe} ({n} collections)")
