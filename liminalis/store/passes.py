"""Passes as data: definitions, per-document state, runs, node traces, facts.

A campaign's pause is the router's (``db.credits``): one flag stops all autonomous background
work, passes included.

The repository knows rows, not graphs: :mod:`liminalis.passes` parses and validates a definition
and walks it; this module keeps what that needs between runs. One write per batch of finished
documents (:meth:`PassRepository.record`) swaps each document's facts and marks it done in the
same transaction, so a crash never leaves a document marked done without its facts, nor facts
from two runs side by side.

Facts are read through a lens only (:meth:`PassRepository.facts`): a fact carries the visibility
of the document view it was derived from, and :func:`liminalis.lens.visible` decides, as for
every other store filter.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import aiosqlite

from liminalis.lens import visible
from liminalis.store._base import Repository

__all__ = [
    "DefinitionRow",
    "DocumentResult",
    "Fact",
    "PassRepository",
    "PassStateRow",
    "RunRow",
    "TraceRow",
]


@dataclass(frozen=True, slots=True)
class DefinitionRow:
    """A stored pass definition: its JSON text and the hash that says whether it changed."""

    campaign: str
    pass_id: str
    definition: str
    def_hash: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class PassStateRow:
    """What a pass last did to one source document: the views' hash it processed, and how."""

    doc_id: str
    content_hash: str
    status: str  # "done" | "failed"
    error: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run of a pass: why it started, how it ended, and what it spent."""

    run_id: int
    campaign: str
    pass_id: str
    trigger: str
    status: str  # "running" | "done" | "capped" | "credit" | "paused" | "failed" | "cancelled"
    reason: str
    started_at: float
    finished_at: float | None
    documents_done: int
    documents_failed: int
    documents_left: int
    node_executions: int
    model_calls: int
    tokens: int


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One node execution: its input sizes, output size, time, model calls and tokens."""

    run_id: int
    seq: int
    doc_id: str
    node_id: str
    node_type: str
    inputs: dict[str, int]
    output_size: int
    started_at: float
    ms: float
    model_calls: int
    tokens: int
    error: str = ""


@dataclass(frozen=True, slots=True)
class Fact:
    """One derived key/value of a document, visible to whom its source view was."""

    pass_id: str
    doc_id: str  # the source document (file)
    view_id: str  # the view it was derived from (``doc``, ``doc//gm``, ``doc//lens:NAME``)
    key: str
    value: object  # any JSON value
    visibility: frozenset[str]


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """A finished document of a run: the hash it was processed at, and its facts."""

    doc_id: str
    content_hash: str
    status: str  # "done" | "failed"
    error: str = ""
    facts: Sequence[Fact] = field(default_factory=tuple)


def _run(r: aiosqlite.Row) -> RunRow:
    return RunRow(
        run_id=int(r["run_id"]),
        campaign=r["campaign"],
        pass_id=r["pass_id"],
        trigger=r["trigger"],
        status=r["status"],
        reason=r["reason"],
        started_at=float(r["started_at"]),
        finished_at=None if r["finished_at"] is None else float(r["finished_at"]),
        documents_done=int(r["documents_done"]),
        documents_failed=int(r["documents_failed"]),
        documents_left=int(r["documents_left"]),
        node_executions=int(r["node_executions"]),
        model_calls=int(r["model_calls"]),
        tokens=int(r["tokens"]),
    )


def _definition(r: aiosqlite.Row) -> DefinitionRow:
    return DefinitionRow(
        campaign=r["campaign"],
        pass_id=r["pass_id"],
        definition=r["definition"],
        def_hash=r["def_hash"],
        updated_at=float(r["updated_at"]),
    )


_RUN_COLUMNS = (
    "run_id, campaign, pass_id, trigger, status, reason, started_at, finished_at, documents_done, "
    "documents_failed, documents_left, node_executions, model_calls, tokens"
)


class PassRepository(Repository):
    """Pass definitions, state, runs, traces and facts."""

    # -- definitions -------------------------------------------------------------------------

    async def save_definition(
        self, campaign: str, pass_id: str, definition: str, *, def_hash: str, at: float
    ) -> bool:
        """Store a definition; returns whether it changed. A changed definition blanks the hash
        of every document's state for the pass, so each is pending again under the new graph
        (its old facts stay readable until then, and a document removed meanwhile is still
        known, to have its facts dropped)."""
        async with self._db.write() as conn:
            async with conn.execute(
                "SELECT def_hash FROM pass_definitions WHERE campaign = ? AND pass_id = ?",
                (campaign, pass_id),
            ) as cur:
                row = await cur.fetchone()
            if row is not None and row["def_hash"] == def_hash:
                return False
            await conn.execute(
                "INSERT OR REPLACE INTO pass_definitions "
                "(campaign, pass_id, definition, def_hash, updated_at) VALUES (?, ?, ?, ?, ?)",
                (campaign, pass_id, definition, def_hash, at),
            )
            await conn.execute(
                "UPDATE pass_state SET content_hash = '' WHERE campaign = ? AND pass_id = ?",
                (campaign, pass_id),
            )
        return True

    async def definition(self, campaign: str, pass_id: str) -> DefinitionRow | None:
        row = await self._db.fetchone(
            "SELECT campaign, pass_id, definition, def_hash, updated_at FROM pass_definitions "
            "WHERE campaign = ? AND pass_id = ?",
            (campaign, pass_id),
        )
        return _definition(row) if row else None

    async def definitions(self, campaign: str | None = None) -> list[DefinitionRow]:
        """A campaign's definitions, or every campaign's (the scheduler arms their crons)."""
        sql = "SELECT campaign, pass_id, definition, def_hash, updated_at FROM pass_definitions"
        if campaign is None:
            rows = await self._db.fetchall(sql + " ORDER BY campaign, pass_id")
        else:
            rows = await self._db.fetchall(
                sql + " WHERE campaign = ? ORDER BY pass_id", (campaign,)
            )
        return [_definition(r) for r in rows]

    async def delete_definition(self, campaign: str, pass_id: str) -> bool:
        """Remove a pass with its state and facts (its runs and traces stay as history)."""
        async with self._db.write() as conn:
            async with conn.execute(
                "DELETE FROM pass_definitions WHERE campaign = ? AND pass_id = ?",
                (campaign, pass_id),
            ) as cur:
                gone = int(cur.rowcount)
            for table in ("pass_state", "pass_facts"):
                await conn.execute(
                    f"DELETE FROM {table} WHERE campaign = ? AND pass_id = ?", (campaign, pass_id)
                )
        return gone > 0

    # -- per-document state ------------------------------------------------------------------

    async def states(self, campaign: str, pass_id: str) -> dict[str, PassStateRow]:
        rows = await self._db.fetchall(
            "SELECT doc_id, content_hash, status, error, updated_at FROM pass_state "
            "WHERE campaign = ? AND pass_id = ?",
            (campaign, pass_id),
        )
        return {
            r["doc_id"]: PassStateRow(
                doc_id=r["doc_id"],
                content_hash=r["content_hash"],
                status=r["status"],
                error=r["error"],
                updated_at=float(r["updated_at"]),
            )
            for r in rows
        }

    async def forget_documents(self, campaign: str, pass_id: str, doc_ids: Iterable[str]) -> None:
        """Drop the state and facts of documents that no longer exist."""
        ids = [(campaign, pass_id, d) for d in doc_ids]
        if not ids:
            return
        async with self._db.write() as conn:
            for table in ("pass_state", "pass_facts"):
                await conn.executemany(
                    f"DELETE FROM {table} WHERE campaign = ? AND pass_id = ? AND doc_id = ?", ids
                )

    # -- runs and traces ---------------------------------------------------------------------

    async def start_run(self, campaign: str, pass_id: str, *, trigger: str, at: float) -> int:
        async with (
            self._db.write() as conn,
            conn.execute(
                "INSERT INTO pass_runs (campaign, pass_id, trigger, status, started_at) "
                "VALUES (?, ?, ?, 'running', ?)",
                (campaign, pass_id, trigger, at),
            ) as cur,
        ):
            return int(cur.lastrowid or 0)

    async def finish_run(
        self,
        run_id: int,
        *,
        status: str,
        reason: str,
        at: float,
        documents_done: int,
        documents_failed: int,
        documents_left: int,
        node_executions: int,
        model_calls: int,
        tokens: int,
    ) -> None:
        await self._db.execute(
            "UPDATE pass_runs SET status = ?, reason = ?, finished_at = ?, documents_done = ?, "
            "documents_failed = ?, documents_left = ?, node_executions = ?, model_calls = ?, "
            "tokens = ? WHERE run_id = ?",
            (
                status,
                reason,
                at,
                documents_done,
                documents_failed,
                documents_left,
                node_executions,
                model_calls,
                tokens,
                run_id,
            ),
        )

    async def runs(self, campaign: str, pass_id: str, *, limit: int = 10) -> list[RunRow]:
        """The latest runs of a pass, newest first."""
        rows = await self._db.fetchall(
            f"SELECT {_RUN_COLUMNS} FROM pass_runs WHERE campaign = ? AND pass_id = ? "
            "ORDER BY run_id DESC LIMIT ?",
            (campaign, pass_id, limit),
        )
        return [_run(r) for r in rows]

    async def run(self, run_id: int) -> RunRow | None:
        row = await self._db.fetchone(
            f"SELECT {_RUN_COLUMNS} FROM pass_runs WHERE run_id = ?", (run_id,)
        )
        return _run(row) if row else None

    async def trace(self, run_id: int) -> list[TraceRow]:
        rows = await self._db.fetchall(
            "SELECT run_id, seq, doc_id, node_id, node_type, inputs, output_size, started_at, ms, "
            "model_calls, tokens, error FROM pass_trace WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        return [
            TraceRow(
                run_id=int(r["run_id"]),
                seq=int(r["seq"]),
                doc_id=r["doc_id"],
                node_id=r["node_id"],
                node_type=r["node_type"],
                inputs={str(k): int(v) for k, v in json.loads(r["inputs"]).items()},
                output_size=int(r["output_size"]),
                started_at=float(r["started_at"]),
                ms=float(r["ms"]),
                model_calls=int(r["model_calls"]),
                tokens=int(r["tokens"]),
                error=r["error"],
            )
            for r in rows
        ]

    async def record(
        self,
        campaign: str,
        pass_id: str,
        *,
        results: Sequence[DocumentResult],
        traces: Sequence[TraceRow],
        at: float,
    ) -> None:
        """One batch of a run, in one transaction: each finished document's facts replaced and
        its state marked, and the node traces (of unfinished documents too: their spend
        happened)."""
        async with self._db.write() as conn:
            for res in results:
                await conn.execute(
                    "DELETE FROM pass_facts WHERE campaign = ? AND pass_id = ? AND doc_id = ?",
                    (campaign, pass_id, res.doc_id),
                )
                await conn.executemany(
                    "INSERT INTO pass_facts (campaign, pass_id, doc_id, view_id, ordinal, key, "
                    "value, visibility) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            campaign,
                            pass_id,
                            res.doc_id,
                            f.view_id,
                            i,
                            f.key,
                            json.dumps(f.value, sort_keys=True),
                            json.dumps(sorted(f.visibility)),
                        )
                        for i, f in enumerate(res.facts)
                    ],
                )
                await conn.execute(
                    "INSERT OR REPLACE INTO pass_state (campaign, pass_id, doc_id, content_hash, "
                    "status, error, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (campaign, pass_id, res.doc_id, res.content_hash, res.status, res.error, at),
                )
            await conn.executemany(
                "INSERT INTO pass_trace (run_id, seq, doc_id, node_id, node_type, inputs, "
                "output_size, started_at, ms, model_calls, tokens, error) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        t.run_id,
                        t.seq,
                        t.doc_id,
                        t.node_id,
                        t.node_type,
                        json.dumps(t.inputs, sort_keys=True),
                        t.output_size,
                        t.started_at,
                        t.ms,
                        t.model_calls,
                        t.tokens,
                        t.error,
                    )
                    for t in traces
                ],
            )

    # -- facts -------------------------------------------------------------------------------

    async def facts(
        self,
        campaign: str,
        *,
        lens: Iterable[str],
        pass_id: str | None = None,
        key: str | None = None,
        doc_id: str | None = None,
    ) -> list[Fact]:
        """The facts ``lens`` may see, optionally of one pass, key or source document.

        ``lens`` is required: there is no unfiltered read, so no caller can forget the wall."""
        where = ["campaign = ?"]
        params: list[object] = [campaign]
        for column, value in (("pass_id", pass_id), ("key", key), ("doc_id", doc_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = await self._db.fetchall(
            "SELECT pass_id, doc_id, view_id, key, value, visibility FROM pass_facts WHERE "
            + " AND ".join(where)
            + " ORDER BY pass_id, doc_id, ordinal",
            params,
        )
        lens_set = frozenset(lens)
        out: list[Fact] = []
        for r in rows:
            vis = frozenset(json.loads(r["visibility"]))
            if visible(vis, lens_set):
                out.append(
                    Fact(
                        pass_id=r["pass_id"],
                        doc_id=r["doc_id"],
                        view_id=r["view_id"],
                        key=r["key"],
                        value=json.loads(r["value"]),
                        visibility=vis,
                    )
                )
        return out
