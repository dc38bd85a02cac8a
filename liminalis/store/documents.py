"""Documents and their passages, swapped together so a reader never sees half a document."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import aiosqlite

from liminalis.store._base import Repository
from liminalis.store.rows import PassageRow
from liminalis.types import Document, Passage
from liminalis.workers import run_cpu

__all__ = ["DocumentRepository"]


def _vis_json(vis: Iterable[str]) -> str:
    return json.dumps(sorted(vis))


def _document(r: aiosqlite.Row) -> Document:
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


def _passage(r: aiosqlite.Row) -> PassageRow:
    return PassageRow(
        passage_id=r["passage_id"],
        doc_id=r["doc_id"],
        ordinal=int(r["ordinal"]),
        start=int(r["start"]),
        end=int(r["end"]),
        heading=r["heading"],
        visibility=frozenset(json.loads(r["visibility"])),
        prev_id=r["prev_id"],
        next_id=r["next_id"],
        tokens=r["tokens"],
    )


_DOC_COLUMNS = "doc_id, path, title, type, visibility, aliases, tags, content_hash, text, synopsis"
_PASSAGE_COLUMNS = (
    "passage_id, doc_id, ordinal, start, end, heading, visibility, prev_id, next_id, tokens"
)


class DocumentRepository(Repository):
    async def all(self, campaign: str) -> list[Document]:
        rows = await self._db.fetchall(
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE campaign = ? ORDER BY doc_id", (campaign,)
        )
        # Thousands of rows of JSON decoding: in a worker, so a catalog rebuild does not hold the
        # event loop (the same for ``passages``).
        return await run_cpu(lambda: [_document(r) for r in rows])

    async def get(self, campaign: str, doc_id: str) -> Document | None:
        row = await self._db.fetchone(
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE campaign = ? AND doc_id = ?",
            (campaign, doc_id),
        )
        return _document(row) if row else None

    async def hashes(self, campaign: str) -> dict[str, tuple[str, str]]:
        """doc id → (path, content hash)."""
        rows = await self._db.fetchall(
            "SELECT doc_id, path, content_hash FROM documents WHERE campaign = ?", (campaign,)
        )
        return {r["doc_id"]: (r["path"], r["content_hash"]) for r in rows}

    async def visibilities(self, campaign: str) -> dict[str, frozenset[str]]:
        rows = await self._db.fetchall(
            "SELECT doc_id, visibility FROM documents WHERE campaign = ?", (campaign,)
        )
        return {r["doc_id"]: frozenset(json.loads(r["visibility"])) for r in rows}

    async def awaiting_rebuild(self, campaign: str) -> int:
        """Documents whose content hash a rebuild blanked and no ingest has re-prepared yet."""
        row = await self._db.fetchone(
            "SELECT COUNT(*) AS n FROM documents WHERE campaign = ? AND content_hash = ''",
            (campaign,),
        )
        return int(row["n"]) if row else 0

    async def mark_for_rebuild(self, campaign: str) -> None:
        """Blank every content hash (each document is re-prepared by the next ingest) and every
        passage's tokens (they may come from another tokenizer)."""
        async with self._db.write() as conn:
            await conn.execute(
                "UPDATE documents SET content_hash = '' WHERE campaign = ?", (campaign,)
            )
            await conn.execute("UPDATE passages SET tokens = '' WHERE campaign = ?", (campaign,))

    async def passages(self, campaign: str, doc_id: str | None = None) -> list[PassageRow]:
        if doc_id is None:
            rows = await self._db.fetchall(
                f"SELECT {_PASSAGE_COLUMNS} FROM passages WHERE campaign = ? ORDER BY doc_id, ordinal",
                (campaign,),
            )
        else:
            rows = await self._db.fetchall(
                f"SELECT {_PASSAGE_COLUMNS} FROM passages WHERE campaign = ? AND doc_id = ? ORDER BY ordinal",
                (campaign, doc_id),
            )
        return await run_cpu(lambda: [_passage(r) for r in rows])

    async def passages_by_doc(self, campaign: str) -> dict[str, list[str]]:
        """doc id → its passage ids in order: what an ingest diffs against, without the passages'
        tokens (a tick over an unchanged campaign reads no token)."""
        rows = await self._db.fetchall(
            "SELECT doc_id, passage_id FROM passages WHERE campaign = ? ORDER BY doc_id, ordinal",
            (campaign,),
        )
        out: dict[str, list[str]] = {}
        for r in rows:
            out.setdefault(r["doc_id"], []).append(r["passage_id"])
        return out

    async def tokens(self, campaign: str, doc_ids: Iterable[str]) -> dict[str, str]:
        """passage id → its stored BM25 tokens, for the passages of ``doc_ids``."""
        out: dict[str, str] = {}
        ids = sorted(set(doc_ids))
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            rows = await self._db.fetchall(
                "SELECT passage_id, tokens FROM passages WHERE campaign = ? AND doc_id IN "
                f"({','.join('?' * len(chunk))})",
                (campaign, *chunk),
            )
            out.update((r["passage_id"], r["tokens"]) for r in rows)
        return out

    async def vector_owners(self, campaign: str) -> tuple[int, int]:
        """(passages, documents with at least one passage): one passage vector each, and one
        title vector each, is what the vector store should hold for the campaign."""
        row = await self._db.fetchone(
            "SELECT COUNT(*) AS p, COUNT(DISTINCT doc_id) AS d FROM passages WHERE campaign = ?",
            (campaign,),
        )
        return (int(row["p"]), int(row["d"])) if row else (0, 0)

    async def title_texts(self, campaign: str) -> list[tuple[str, str, tuple[str, ...], str]]:
        """(doc id, title, aliases, synopsis) of every document: a title vector's text, without
        the documents' own text."""
        rows = await self._db.fetchall(
            "SELECT doc_id, title, aliases, synopsis FROM documents WHERE campaign = ?",
            (campaign,),
        )
        return [
            (r["doc_id"], r["title"], tuple(json.loads(r["aliases"])), r["synopsis"]) for r in rows
        ]

    async def passage_ids(self, campaign: str) -> set[str]:
        rows = await self._db.fetchall(
            "SELECT passage_id FROM passages WHERE campaign = ?", (campaign,)
        )
        return {r["passage_id"] for r in rows}

    async def replace(
        self, campaign: str, doc: Document, passages: Sequence[Passage], tokens: dict[str, str]
    ) -> None:
        """Atomically swap one document and its passage set, and move the campaign's generation."""
        async with self._db.write() as conn:
            await conn.execute(
                f"INSERT OR REPLACE INTO documents (campaign, {_DOC_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    campaign,
                    doc.doc_id,
                    doc.path,
                    doc.title,
                    doc.type,
                    _vis_json(doc.visibility),
                    json.dumps(list(doc.aliases)),
                    json.dumps(list(doc.tags)),
                    doc.content_hash,
                    doc.text,
                    doc.synopsis,
                ),
            )
            await conn.execute(
                "DELETE FROM passages WHERE campaign = ? AND doc_id = ?", (campaign, doc.doc_id)
            )
            await conn.executemany(
                f"INSERT INTO passages (campaign, {_PASSAGE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        campaign,
                        p.passage_id,
                        p.doc_id,
                        p.ordinal,
                        p.start,
                        p.end,
                        p.heading,
                        _vis_json(p.visibility),
                        p.prev_id,
                        p.next_id,
                        tokens.get(p.passage_id, ""),
                    )
                    for p in passages
                ],
            )
            await conn.execute(
                "UPDATE campaigns SET generation = generation + 1 WHERE slug = ?", (campaign,)
            )

    async def remove(self, campaign: str, doc_id: str) -> int:
        """Delete a document, its passages and its pins; returns how many passages went."""
        async with self._db.write() as conn:
            async with conn.execute(
                "SELECT COUNT(*) FROM passages WHERE campaign = ? AND doc_id = ?",
                (campaign, doc_id),
            ) as cur:
                row = await cur.fetchone()
            await conn.execute(
                "DELETE FROM passages WHERE campaign = ? AND doc_id = ?", (campaign, doc_id)
            )
            await conn.execute(
                "DELETE FROM documents WHERE campaign = ? AND doc_id = ?", (campaign, doc_id)
            )
            await conn.execute(
                "DELETE FROM pins WHERE campaign = ? AND doc_id = ?", (campaign, doc_id)
            )
            await conn.execute(
                "UPDATE campaigns SET generation = generation + 1 WHERE slug = ?", (campaign,)
            )
        return int(row[0]) if row else 0
