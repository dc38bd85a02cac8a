"""SQL of the memory graph (:mod:`liminalis.memory`): one repository, every statement here.

Tables (created by the schema's migrations, ``liminalis/store/schema.py``):

* ``memory_chunks`` — the campaign's chunks (passages, document summaries, entities, type nodes,
  turns) with kind, label, document and visibility;
* ``memory_links`` — the seeded associations (co-mention, passage chain, part-of, instance-of),
  one row per direction with its own weight and the visibility of its evidence;
* ``memory_activation`` — each chunk's base-level state per scope (one lens's history);
* ``memory_edges`` — learned (Hebbian) association weights per scope and direction, with their
  own base-level state;
* ``memory_context`` — each scope's carried-over turn context (the sources of the next turn).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from liminalis.lens import visible
from liminalis.store.sqlite import Database

__all__ = ["MemoryStore", "scope_of"]


def scope_of(lens: Iterable[str]) -> str:
    """A lens's memory scope: its sorted names (each lens remembers only its own history)."""
    return ",".join(sorted(set(lens)))


def _lens(scope: str) -> frozenset[str]:
    return frozenset(x for x in scope.split("|", 1)[0].split(",") if x)


def _vis(raw: str) -> list[frozenset[str]]:
    return [frozenset(v) for v in json.loads(raw)]


class MemoryStore:
    """Reads and writes the memory graph of every campaign over the engine's :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def graph_generation(self, campaign: str) -> int:
        row = await self.db.fetchone(
            "SELECT MAX(generation) AS g FROM memory_chunks WHERE campaign = ?", (campaign,)
        )
        return int(row["g"]) if row is not None and row["g"] is not None else -1

    async def replace_graph(
        self,
        campaign: str,
        generation: int,
        chunks: Sequence[tuple[str, str, str, str | None, str]],
        links: Sequence[tuple[str, str, str, float, str]],
    ) -> None:
        """Store the campaign's chunks ``(id, kind, label, doc_id, visibility json)`` and seeded
        links ``(src, dst, kind, weight, visibility json)`` (turn chunks are kept)."""
        async with self.db.write() as conn:
            await conn.execute(
                "DELETE FROM memory_chunks WHERE campaign = ? AND kind != 'turn'", (campaign,)
            )
            await conn.execute("DELETE FROM memory_links WHERE campaign = ?", (campaign,))
            await conn.executemany(
                "INSERT OR REPLACE INTO memory_chunks VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(campaign, c, k, lab, d, v, generation) for c, k, lab, d, v in chunks],
            )
            await conn.executemany(
                "INSERT OR REPLACE INTO memory_links VALUES (?, ?, ?, ?, ?, ?)",
                [(campaign, s, d, k, w, v) for s, d, k, w, v in links],
            )

    async def add_turn(
        self, campaign: str, chunk_id: str, label: str, visibility: str, generation: int
    ) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO memory_chunks VALUES (?, ?, 'turn', ?, NULL, ?, ?)",
            (campaign, chunk_id, label, visibility, generation),
        )

    async def activations(
        self, campaign: str, scope: str
    ) -> dict[str, tuple[str, list[float], int, float]]:
        """``chunk_id → (kind, state, uses, updated_at)`` of the scope."""
        rows = await self.db.fetchall(
            "SELECT chunk_id, kind, state, uses, updated_at FROM memory_activation "
            "WHERE campaign = ? AND scope = ?",
            (campaign, scope),
        )
        return {
            r["chunk_id"]: (
                r["kind"],
                json.loads(r["state"]),
                int(r["uses"]),
                float(r["updated_at"]),
            )
            for r in rows
        }

    async def save_activations(
        self,
        campaign: str,
        scope: str,
        rows: Sequence[tuple[str, str, str, Sequence[float], int, float]],
    ) -> None:
        """Upsert ``(chunk_id, kind, visibility json, state, uses, updated_at)``."""
        async with self.db.write() as conn:
            await conn.executemany(
                "INSERT OR REPLACE INTO memory_activation VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (campaign, scope, c, k, v, json.dumps([round(x, 9) for x in s]), n, t)
                    for c, k, v, s, n, t in rows
                ],
            )

    async def edges(
        self, campaign: str, scope: str
    ) -> list[tuple[str, str, str, float, str, list[float], float]]:
        """Learned edges ``(src, dst, kind, weight, visibility json, state, updated_at)``."""
        rows = await self.db.fetchall(
            "SELECT src, dst, kind, weight, visibility, state, updated_at FROM memory_edges "
            "WHERE campaign = ? AND scope = ?",
            (campaign, scope),
        )
        return [
            (
                r["src"],
                r["dst"],
                r["kind"],
                float(r["weight"]),
                r["visibility"],
                json.loads(r["state"]),
                float(r["updated_at"]),
            )
            for r in rows
        ]

    async def save_edges(
        self,
        campaign: str,
        scope: str,
        rows: Sequence[tuple[str, str, str, float, str, Sequence[float], float]],
        pruned: Sequence[tuple[str, str]] = (),
    ) -> None:
        async with self.db.write() as conn:
            await conn.executemany(
                "INSERT OR REPLACE INTO memory_edges VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (campaign, scope, s, d, k, w, v, json.dumps([round(x, 9) for x in st]), t)
                    for s, d, k, w, v, st, t in rows
                ],
            )
            await conn.executemany(
                "DELETE FROM memory_edges WHERE campaign = ? AND scope = ? AND src = ? AND dst = ?",
                [(campaign, scope, s, d) for s, d in pruned],
            )

    async def context(self, campaign: str, scope: str) -> tuple[dict[str, float], float]:
        row = await self.db.fetchone(
            "SELECT context, updated_at FROM memory_context WHERE campaign = ? AND scope = ?",
            (campaign, scope),
        )
        if row is None:
            return {}, 0.0
        return {str(k): float(v) for k, v in json.loads(row["context"]).items()}, float(
            row["updated_at"]
        )

    async def save_context(
        self, campaign: str, scope: str, context: dict[str, float], now: float
    ) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO memory_context VALUES (?, ?, ?, ?)",
            (campaign, scope, json.dumps(context), now),
        )

    async def clear(self, campaign: str, scope: str | None = None) -> None:
        """Forget the history of ``scope`` (every scope when None); the seeded graph stays."""
        where, args = (
            ("campaign = ?", (campaign,))
            if scope is None
            else ("campaign = ? AND scope = ?", (campaign, scope))
        )
        async with self.db.write() as conn:
            for table in ("memory_activation", "memory_edges", "memory_context"):
                await conn.execute(f"DELETE FROM {table} WHERE {where}", args)
            if scope is None:
                await conn.execute(
                    "DELETE FROM memory_chunks WHERE campaign = ? AND kind = 'turn'", (campaign,)
                )

    async def forget_hidden(self, campaign: str, was: frozenset[str], now: frozenset[str]) -> int:
        """A document of visibility ``was`` is now ``now``: every scope whose lens could read it
        and cannot now forgets its activation, learned edges and context (they may point into
        it; forgetting more than the one document is the safe side). Returns scopes forgotten."""
        if was <= now:
            return 0
        rows = await self.db.fetchall(
            "SELECT DISTINCT scope FROM memory_activation WHERE campaign = ? UNION "
            "SELECT DISTINCT scope FROM memory_edges WHERE campaign = ? UNION "
            "SELECT DISTINCT scope FROM memory_context WHERE campaign = ?",
            (campaign, campaign, campaign),
        )
        doomed = [
            str(r[0])
            for r in rows
            if visible(was, _lens(str(r[0]))) and not visible(now, _lens(str(r[0])))
        ]
        for scope in doomed:
            await self.clear(campaign, scope)
        return len(doomed)

    async def purge_invisible(
        self, campaign: str, visibility: dict[str, list[frozenset[str]]]
    ) -> int:
        """Drop, in every scope, activation of chunks its lens can no longer see (or that are
        gone) and learned edges with such an end (after a re-ingest)."""

        def ok(chunk: str, lens: frozenset[str]) -> bool:
            vis = visibility.get(chunk)
            return vis is not None and all(visible(v, lens) for v in vis)

        gone: list[tuple[Any, ...]] = []
        for r in await self.db.fetchall(
            "SELECT scope, chunk_id, kind FROM memory_activation WHERE campaign = ?", (campaign,)
        ):
            if r["kind"] != "turn" and not ok(r["chunk_id"], _lens(r["scope"])):
                gone.append(("a", r["scope"], r["chunk_id"], ""))
        for r in await self.db.fetchall(
            "SELECT scope, src, dst FROM memory_edges WHERE campaign = ?", (campaign,)
        ):
            lens = _lens(r["scope"])
            if any(not c.startswith("q:") and not ok(c, lens) for c in (r["src"], r["dst"])):
                gone.append(("e", r["scope"], r["src"], r["dst"]))
        if gone:
            async with self.db.write() as conn:
                for g in gone:
                    if g[0] == "a":
                        await conn.execute(
                            "DELETE FROM memory_activation WHERE campaign = ? AND scope = ? AND chunk_id = ?",
                            (campaign, g[1], g[2]),
                        )
                    else:
                        await conn.execute(
                            "DELETE FROM memory_edges WHERE campaign = ? AND scope = ? AND src = ? AND dst = ?",
                            (campaign, g[1], g[2], g[3]),
                        )
        return len(gone)

    async def stats(self, campaign: str) -> dict[str, Any]:
        """Counts for ``liminalis memory stats``: chunks by kind, links, scopes, learned edges."""
        kinds = {
            r["kind"]: int(r["n"])
            for r in await self.db.fetchall(
                "SELECT kind, COUNT(*) AS n FROM memory_chunks WHERE campaign = ? GROUP BY kind",
                (campaign,),
            )
        }
        links = await self.db.fetchone(
            "SELECT COUNT(*) AS n FROM memory_links WHERE campaign = ?", (campaign,)
        )
        acts = await self.db.fetchone(
            "SELECT COUNT(*) AS n, COUNT(DISTINCT scope) AS s FROM memory_activation "
            "WHERE campaign = ?",
            (campaign,),
        )
        edges = await self.db.fetchone(
            "SELECT COUNT(*) AS n FROM memory_edges WHERE campaign = ?", (campaign,)
        )
        return {
            "chunks": kinds,
            "links": int(links["n"]) if links else 0,
            "active_chunks": int(acts["n"]) if acts else 0,
            "scopes": int(acts["s"]) if acts else 0,
            "learned_edges": int(edges["n"]) if edges else 0,
        }
