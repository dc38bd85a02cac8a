"""Each campaign file's stat signature as an ingest last read it (``db.files``).

Derived data: what the files themselves give back. A new process reads it once per campaign so
that its first tick skips the files unchanged since (a restart over 10,000 files would read and
parse them all otherwise); the ingest checks every row against the documents SQLite holds before
trusting it, and a row that does not hold sends its file to be read again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import aiosqlite

from liminalis.store._base import Repository
from liminalis.store.rows import FileRow
from liminalis.types import FileReport, HeldBack
from liminalis.workers import run_cpu

__all__ = ["FileSignatureRepository"]


def _report_json(r: FileReport) -> str:
    return json.dumps(
        {
            "path": r.path,
            "doc_id": r.doc_id,
            "visibility": sorted(r.visibility),
            "type": r.type,
            "hidden_sections": r.hidden_sections,
            "warnings": list(r.warnings),
            "held_back": [[h.line, h.rule, h.digest, h.reviewable, h.excerpt] for h in r.held_back],
        }
    )


def _report(text: str) -> FileReport:
    d = json.loads(text)
    return FileReport(
        path=str(d["path"]),
        doc_id=str(d["doc_id"]),
        visibility=frozenset(map(str, d["visibility"])),
        type=str(d["type"]),
        hidden_sections=int(d["hidden_sections"]),
        warnings=tuple(map(str, d["warnings"])),
        held_back=tuple(
            HeldBack(int(a), str(b), str(c), bool(e), str(f))
            for a, b, c, e, f in d.get("held_back", ())
        ),
    )


def _decode(rows: Sequence[aiosqlite.Row]) -> dict[str, FileRow]:
    out: dict[str, FileRow] = {}
    for r in rows:
        try:
            f = FileRow(
                path=r["path"],
                signature=tuple(int(x) for x in json.loads(r["signature"])),
                reader=r["reader"],
                views=tuple((str(d), str(h)) for d, h in json.loads(r["views"])),
                report=_report(r["report"]),
            )
        except (ValueError, TypeError, KeyError):
            continue
        if f.views:  # a file read gives at least one view: a row without is damaged
            out[f.path] = f
    return out


def _encode(campaign: str, put: Sequence[FileRow]) -> list[tuple[str, ...]]:
    return [
        (
            campaign,
            f.path,
            json.dumps(list(f.signature)),
            f.reader,
            json.dumps([list(v) for v in f.views]),
            _report_json(f.report),
        )
        for f in put
    ]


class FileSignatureRepository(Repository):
    """Each file's row as the last ingest that read it left it (module doc)."""

    async def all(self, campaign: str) -> dict[str, FileRow]:
        """Every file row of ``campaign`` by path; a row that does not decode is left out (its
        file is read again)."""
        rows = await self._db.fetchall(
            "SELECT path, signature, reader, views, report FROM file_signatures WHERE campaign = ?",
            (campaign,),
        )
        # Tens of thousands of rows to decode: off the event loop.
        return await run_cpu(_decode, rows)

    async def update(self, campaign: str, put: Sequence[FileRow], drop: Sequence[str]) -> None:
        """Write ``put`` and delete the rows of the paths in ``drop``, in one transaction."""
        if not put and not drop:
            return
        params = await run_cpu(_encode, campaign, put)  # a first tick writes every file's row
        async with self._db.write() as conn:
            await conn.executemany(
                "DELETE FROM file_signatures WHERE campaign = ? AND path = ?",
                [(campaign, p) for p in drop],
            )
            await conn.executemany(
                "INSERT OR REPLACE INTO file_signatures"
                " (campaign, path, signature, reader, views, report) VALUES (?, ?, ?, ?, ?, ?)",
                params,
            )
