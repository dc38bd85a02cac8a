"""A campaign's rows, table by table: read out for an export, written back for an import.

Generic over the schema, so a table a later migration adds travels without a change here: every
table with a ``campaign`` column is the campaign's, read with ``WHERE campaign = ?`` and written
back under the importing slug. What that rule cannot see is declared below:

* ``campaigns`` is keyed by ``slug``; the importer writes its row itself (new root, new slug).
* Child tables hold no ``campaign`` column and belong through their parent's key
  (``chat_turns`` through ``chat_state.chat_key``, ``pass_trace`` through ``pass_runs.run_id``).
* ``pass_runs.run_id`` is an ``AUTOINCREMENT`` number: an import takes new numbers and its
  children follow them.
* A chat memory's key starts with its campaign's slug (``memory_key``): it is renamed with it.
* ``embeddings`` (by model and text hash, shared by campaigns) travels through
  :class:`~liminalis.store.embeddings.EmbeddingCache`; ``token_usage`` is the whole bot's daily
  count and stays.

* Rows derived from the documents (:data:`REBUILT`) and remembered text (:data:`UNCHECKED`) are
  neither exported nor imported. An archive is untrusted input: a row claiming players'
  visibility for GM text cannot be checked against anything, so an import takes only the files
  (each with its declared visibility) and the GM's decisions, and the index and the passes derive
  the rest again, each fact under the visibility of the view it comes from.

A table none of these rules places is left out of an export and named
(:meth:`TransferRepository.unplaced`; ``tests/test_transfer.py`` keeps the list empty).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiosqlite

from liminalis.store._base import Repository

__all__ = ["TransferRepository", "Imported", "CAMPAIGN_TABLE", "REBUILT", "UNCHECKED"]

#: The registry row of a campaign: never copied as is (its root and slug are the importer's).
CAMPAIGN_TABLE = "campaigns"
#: Child table → (its key column, the campaign table that owns the key).
_CHILDREN: dict[str, tuple[str, str]] = {
    "chat_turns": ("chat_key", "chat_state"),
    "pass_trace": ("run_id", "pass_runs"),
}
#: Campaign table → its AUTOINCREMENT key, renumbered on import.
_RENUMBERED: dict[str, str] = {"pass_runs": "run_id", "question_log": "id", "model_calls": "id"}
#: Columns whose value starts with ``"<campaign>:"`` (chat memory keys).
_SLUG_PREFIXED = frozenset({"chat_key"})
#: Tables that are not any one campaign's, or hold nothing worth carrying (the bookings of model
#: calls in flight expire within minutes).
#: Vector generations and their build checkpoints name collections of the exporting store: an
#: import indexes into its own. File signatures describe the exporting machine's files, and the
#: last good campaign.toml the exporting machine's file (an import brings its own).
_SHARED = frozenset(
    {
        "embeddings",
        "token_usage",
        "model_bookings",
        "vector_generations",
        "reindex_docs",
        "file_signatures",
        "campaign_configs",
    }
)
#: Derived from the documents, so rebuilt after an import rather than trusted: documents and
#: passages by the re-index from the files, the knowledge layer and pass facts by the passes
#: (their per-document state goes with them, so every document is pending again), the memory
#: graph by the first recall over the new catalog.
REBUILT = frozenset(
    {
        "documents",
        "passages",
        "knowledge_views",
        "knowledge_entities",
        "knowledge_mentions",
        "knowledge_relations",
        "knowledge_motifs",
        "knowledge_summaries",
        "pass_facts",
        "pass_state",
        "memory_chunks",
        "memory_links",
    }
)
#: Text that was shown to some lens and cannot be derived again, so nothing can check the lens an
#: archive claims for it: chat memory (it feeds the next prompt) and answer cards (their buttons
#: show their text). A moved campaign's chats start afresh and its old buttons say expired.
UNCHECKED = frozenset({"chat_state", "chat_turns", "answer_cards"})
_LEFT_OUT = REBUILT | UNCHECKED
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(slots=True)
class Imported:
    """What an import wrote: rows per table, and rows it kept out (a key already taken, e.g. a
    channel linked to another campaign here)."""

    rows: dict[str, int] = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)
    #: Tables of the archive this schema does not have (written by another build).
    unknown_tables: list[str] = field(default_factory=list)
    #: Tables of the archive an import never takes (:data:`REBUILT`, :data:`UNCHECKED`), with
    #: how many rows each held.
    left_out: dict[str, int] = field(default_factory=dict)


def _renamed(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str) and value.startswith(f"{old}:"):
        return f"{new}:{value[len(old) + 1 :]}"
    return value


class TransferRepository(Repository):
    """Export and import of one campaign's rows (``db.transfer``)."""

    async def _tables(self, conn: aiosqlite.Connection) -> dict[str, list[str]]:
        """Every table of the schema and its columns, in creation order."""
        async with conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY rowid"
        ) as cur:
            names = [str(r[0]) for r in await cur.fetchall()]
        out: dict[str, list[str]] = {}
        for name in names:
            if not _NAME.match(name):
                continue
            async with conn.execute(f"PRAGMA table_info({name})") as cur:
                out[name] = [str(r[1]) for r in await cur.fetchall()]
        return out

    @staticmethod
    def _owned(tables: Mapping[str, list[str]]) -> list[str]:
        """The campaign's tables, each parent before its children."""
        own = [
            t
            for t, cols in tables.items()
            if "campaign" in cols and t not in _SHARED and t not in _LEFT_OUT
        ]
        own += [
            t for t in _CHILDREN if t in tables and _CHILDREN[t][1] in own and t not in _LEFT_OUT
        ]
        return own

    async def unplaced(self) -> list[str]:
        """Tables no rule places: neither the campaign's, nor a declared child, nor shared."""
        async with self._db.write() as conn:
            tables = await self._tables(conn)
        placed = set(self._owned(tables)) | _SHARED | _LEFT_OUT | {CAMPAIGN_TABLE}
        return sorted(set(tables) - placed)

    async def export_rows(self, campaign: str) -> dict[str, list[dict[str, Any]]]:
        """Every row of ``campaign`` by table (its ``campaigns`` row included), read as one
        snapshot: the read holds the writer's lock, so no ingest or answer lands half-way."""
        out: dict[str, list[dict[str, Any]]] = {}
        async with self._db.write() as conn:
            tables = await self._tables(conn)
            queries: list[tuple[str, str]] = [
                # Not its root: a path on the exporting machine means nothing on another.
                (
                    CAMPAIGN_TABLE,
                    f"SELECT slug, model_id, generation FROM {CAMPAIGN_TABLE} WHERE slug = ?",
                )
            ]
            for table in self._owned(tables):
                if table in _CHILDREN:
                    key, parent = _CHILDREN[table]
                    queries.append(
                        (
                            table,
                            f"SELECT * FROM {table} WHERE {key} IN "
                            f"(SELECT {key} FROM {parent} WHERE campaign = ?)",
                        )
                    )
                else:
                    queries.append((table, f"SELECT * FROM {table} WHERE campaign = ?"))
            for table, sql in queries:
                async with conn.execute(sql, (campaign,)) as cur:
                    cols = [d[0] for d in cur.description]
                    out[table] = [dict(zip(cols, r, strict=True)) for r in await cur.fetchall()]
        return out

    async def import_rows(
        self,
        campaign: str,
        tables: Mapping[str, Sequence[Mapping[str, Any]]],
        *,
        renamed_from: str,
        root: str,
    ) -> Imported:
        """Write an export's rows under ``campaign`` in one transaction (all or nothing).

        The ``campaigns`` row is written with ``root`` and no index profile (the caller re-indexes:
        until then the campaign reads as being rebuilt). Columns this schema lacks are dropped; a
        row whose key is already taken is kept out and counted in :attr:`Imported.ignored`.
        """
        done = Imported()
        async with self._db.write() as conn:
            have = await self._tables(conn)
            done.left_out = {t: len(rows) for t, rows in tables.items() if t in _LEFT_OUT and rows}
            done.unknown_tables = sorted(
                t for t in tables if t not in have and t != CAMPAIGN_TABLE and t not in _LEFT_OUT
            )
            registry = list(tables.get(CAMPAIGN_TABLE, ()))
            generation = int(registry[0].get("generation") or 0) if registry else 0
            await conn.execute(
                f"INSERT INTO {CAMPAIGN_TABLE} (slug, root, model_id, generation) "
                "VALUES (?, ?, '', ?)",
                (campaign, root, generation),
            )
            done.rows[CAMPAIGN_TABLE] = 1
            numbers: dict[str, dict[Any, Any]] = {}
            for table in self._owned(have):
                rows = tables.get(table)
                if not rows:
                    continue
                cols = [c for c in have[table] if c in rows[0]]
                renumber = _RENUMBERED.get(table)
                child = _CHILDREN.get(table)
                values: list[list[Any]] = []
                for row in rows:
                    vals = []
                    for c in cols:
                        v = row.get(c)
                        if c == "campaign":
                            v = campaign
                        elif c in _SLUG_PREFIXED:
                            v = _renamed(v, renamed_from, campaign)
                        vals.append(v)
                    if child is not None and child[1] in numbers:
                        key = cols.index(child[0])
                        if vals[key] not in numbers[child[1]]:
                            continue  # its parent did not come along
                        vals[key] = numbers[child[1]][vals[key]]
                    values.append(vals)
                if renumber is not None:
                    keep = [c for c in cols if c != renumber]
                    at = cols.index(renumber)
                    sql = (
                        f"INSERT INTO {table} ({', '.join(keep)}) "
                        f"VALUES ({', '.join('?' * len(keep))})"
                    )
                    numbers[table] = {}
                    for vals in values:
                        async with conn.execute(sql, vals[:at] + vals[at + 1 :]) as cur:
                            numbers[table][vals[at]] = cur.lastrowid
                    written = len(values)
                else:
                    sql = (
                        f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) "
                        f"VALUES ({', '.join('?' * len(cols))})"
                    )
                    async with conn.executemany(sql, values) as cur:
                        written = max(int(cur.rowcount), 0)
                done.rows[table] = written
                if written < len(values):
                    done.ignored[table] = len(values) - written
        return done
