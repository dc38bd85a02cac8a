"""The knowledge layer's facts, one set per document view, each row with its view's visibility.

A view's facts are replaced together (:meth:`KnowledgeRepository.replace`), so a reader never
sees half a view; the seeded passes write one part at a time (:meth:`KnowledgeRepository.write_parts`:
entities, summary or motifs), and a part never outlives the content hash and visibility it was
extracted under. Nothing here filters by lens: callers apply :func:`liminalis.lens.visible` to
the ``visibility`` every fact carries (the one visibility rule).

Campaign overviews (one per lens) are kept beside the cached model summaries, in
``knowledge_summaries`` under a pseudo doc id (``@overview:<lens>``) no document can have: no
document view, so no pass reads an overview back as its input.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite

from liminalis.knowledge.facts import (
    EntityDef,
    Mention,
    Motif,
    RelationFact,
    SessionMark,
    ViewFacts,
)
from liminalis.store._base import Repository

__all__ = ["KnowledgeRepository", "PARTS", "OVERVIEW_METHOD"]

#: The parts of a view's facts the seeded passes write separately.
PARTS = frozenset({"entities", "summary", "motifs"})
#: The ``method`` of an overview row in ``knowledge_summaries``.
OVERVIEW_METHOD = "overview"
_OVERVIEW_PREFIX = "@overview:"
#: The tables each part owns (the summary is two columns of ``knowledge_views``).
_PART_TABLES = {
    "entities": ("knowledge_entities", "knowledge_mentions", "knowledge_relations"),
    "motifs": ("knowledge_motifs",),
}

_TABLES = (
    "knowledge_views",
    "knowledge_entities",
    "knowledge_mentions",
    "knowledge_relations",
    "knowledge_motifs",
)


def _vis(vis: Iterable[str]) -> str:
    return json.dumps(sorted(vis))


def _session(mark: SessionMark | None) -> str | None:
    if mark is None:
        return None
    return json.dumps({"number": mark.number, "date": mark.date, "key": list(mark.date_key)})


def _view(r: aiosqlite.Row, **facts: Any) -> ViewFacts:
    """A ``knowledge_views`` row as :class:`ViewFacts`, with the per-view ``facts`` read beside
    it (none: the view's head alone)."""
    return ViewFacts(
        doc_id=r["doc_id"],
        path=r["path"],
        title=r["title"],
        type=r["type"],
        visibility=frozenset(json.loads(r["visibility"])),
        content_hash=r["content_hash"],
        summary=r["summary"],
        summary_method=r["summary_method"],
        session=_mark(r["session"]),
        **facts,
    )


def _mark(raw: str | None) -> SessionMark | None:
    if raw is None:
        return None
    d = json.loads(raw)
    return SessionMark(d["number"], d["date"], tuple(d["key"]))


class KnowledgeRepository(Repository):
    async def hashes(self, campaign: str) -> dict[str, str]:
        """doc id (view) → the content hash its facts were extracted from."""
        rows = await self._db.fetchall(
            "SELECT doc_id, content_hash FROM knowledge_views WHERE campaign = ?", (campaign,)
        )
        return {r["doc_id"]: r["content_hash"] for r in rows}

    async def replace(self, campaign: str, views: Sequence[ViewFacts]) -> None:
        """Swap the facts of ``views`` (each replaced whole), in one transaction."""
        async with self._db.write() as conn:
            for v in views:
                for table in _TABLES:
                    await conn.execute(
                        f"DELETE FROM {table} WHERE campaign = ? AND doc_id = ?",
                        (campaign, v.doc_id),
                    )
                vis = _vis(v.visibility)
                await conn.execute(
                    "INSERT INTO knowledge_views (campaign, doc_id, path, title, type, visibility, "
                    "content_hash, summary, summary_method, session) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        campaign,
                        v.doc_id,
                        v.path,
                        v.title,
                        v.type,
                        vis,
                        v.content_hash,
                        v.summary,
                        v.summary_method,
                        _session(v.session),
                    ),
                )
                await self._insert_entities(conn, campaign, v, vis)
                await self._insert_motifs(conn, campaign, v, vis)

    @staticmethod
    async def _insert_entities(
        conn: aiosqlite.Connection, campaign: str, v: ViewFacts, vis: str
    ) -> None:
        """The entity part of a view: its definitions, mentions and relations."""
        await conn.executemany(
            "INSERT OR REPLACE INTO knowledge_entities (campaign, doc_id, key, name, type, "
            "aliases, visibility) VALUES (?,?,?,?,?,?,?)",
            [
                (
                    campaign,
                    v.doc_id,
                    e.key,
                    e.name,
                    e.type,
                    json.dumps(list(e.aliases)),
                    vis,
                )
                for e in v.entities
            ],
        )
        await conn.executemany(
            "INSERT INTO knowledge_mentions (campaign, doc_id, ordinal, key, surface, start, "
            "end, passage_id, initial, hint, visibility) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    campaign,
                    v.doc_id,
                    n,
                    m.key,
                    m.surface,
                    m.start,
                    m.end,
                    m.passage_id,
                    int(m.initial),
                    m.hint,
                    vis,
                )
                for n, m in enumerate(v.mentions)
            ],
        )
        await conn.executemany(
            "INSERT INTO knowledge_relations (campaign, doc_id, ordinal, src, kind, dst, "
            "start, end, evidence, visibility) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    campaign,
                    v.doc_id,
                    n,
                    r.src,
                    r.kind,
                    r.dst,
                    r.start,
                    r.end,
                    r.evidence,
                    vis,
                )
                for n, r in enumerate(v.relations)
            ],
        )

    async def remove(self, campaign: str, doc_ids: Iterable[str]) -> None:
        """Forget the facts (and cached summaries) of views that no longer exist."""
        ids = list(doc_ids)
        if not ids:
            return
        async with self._db.write() as conn:
            for table in (*_TABLES, "knowledge_summaries"):
                await conn.executemany(
                    f"DELETE FROM {table} WHERE campaign = ? AND doc_id = ?",
                    [(campaign, d) for d in ids],
                )

    async def views(self, campaign: str) -> list[ViewFacts]:
        """Every stored view's facts (the caller filters them through a lens)."""
        rows = await self._db.fetchall(
            "SELECT doc_id, path, title, type, visibility, content_hash, summary, summary_method, "
            "session FROM knowledge_views WHERE campaign = ? ORDER BY doc_id",
            (campaign,),
        )
        ents: dict[str, list[EntityDef]] = defaultdict(list)
        for r in await self._db.fetchall(
            "SELECT doc_id, key, name, type, aliases FROM knowledge_entities WHERE campaign = ? "
            "ORDER BY doc_id, key",
            (campaign,),
        ):
            ents[r["doc_id"]].append(
                EntityDef(r["key"], r["name"], r["type"], tuple(json.loads(r["aliases"])))
            )
        mentions: dict[str, list[Mention]] = defaultdict(list)
        for r in await self._db.fetchall(
            "SELECT doc_id, key, surface, start, end, passage_id, initial, hint "
            "FROM knowledge_mentions WHERE campaign = ? ORDER BY doc_id, ordinal",
            (campaign,),
        ):
            mentions[r["doc_id"]].append(
                Mention(
                    r["key"],
                    r["surface"],
                    int(r["start"]),
                    int(r["end"]),
                    r["passage_id"],
                    bool(r["initial"]),
                    r["hint"],
                )
            )
        rels: dict[str, list[RelationFact]] = defaultdict(list)
        for r in await self._db.fetchall(
            "SELECT doc_id, src, kind, dst, start, end, evidence FROM knowledge_relations "
            "WHERE campaign = ? ORDER BY doc_id, ordinal",
            (campaign,),
        ):
            rels[r["doc_id"]].append(
                RelationFact(
                    r["src"], r["kind"], r["dst"], int(r["start"]), int(r["end"]), r["evidence"]
                )
            )
        motifs: dict[str, list[Motif]] = defaultdict(list)
        for r in await self._db.fetchall(
            "SELECT doc_id, kind, text, weight, start FROM knowledge_motifs WHERE campaign = ? "
            "ORDER BY doc_id, ordinal",
            (campaign,),
        ):
            motifs[r["doc_id"]].append(
                Motif(r["kind"], r["text"], float(r["weight"]), int(r["start"]))
            )
        return [
            _view(
                r,
                entities=tuple(ents[r["doc_id"]]),
                mentions=tuple(mentions[r["doc_id"]]),
                relations=tuple(rels[r["doc_id"]]),
                motifs=tuple(motifs[r["doc_id"]]),
            )
            for r in rows
        ]

    async def cached_summary(
        self, campaign: str, doc_id: str, method: str, content_hash: str
    ) -> str | None:
        """A summary made by ``method`` for exactly this content, if one was kept."""
        row = await self._db.fetchone(
            "SELECT summary FROM knowledge_summaries WHERE campaign = ? AND doc_id = ? "
            "AND method = ? AND content_hash = ?",
            (campaign, doc_id, method, content_hash),
        )
        return str(row["summary"]) if row else None

    async def keep_summary(
        self,
        campaign: str,
        doc_id: str,
        *,
        method: str,
        content_hash: str,
        summary: str,
        visibility: frozenset[str],
    ) -> None:
        """Cache a (model) summary of one view under its content hash."""
        await self._db.execute(
            "INSERT OR REPLACE INTO knowledge_summaries (campaign, doc_id, method, content_hash, "
            "summary, visibility) VALUES (?,?,?,?,?,?)",
            (campaign, doc_id, method, content_hash, summary, _vis(visibility)),
        )

    # -- part by part (the seeded passes) --------------------------------------------------

    async def write_parts(
        self,
        campaign: str,
        views: Sequence[ViewFacts],
        *,
        parts: Iterable[str],
        source: str | None = None,
        current: Iterable[str] = (),
    ) -> None:
        """Write ``parts`` of ``views`` (each part replaced whole), in one transaction.

        A view's row (path, title, type, visibility, content hash, session) is upserted; when its
        content hash or visibility changed, the parts not written now are cleared, so no fact is
        ever read under a visibility it was not extracted with (a document made public must not
        publish the summary of its GM-only past). With ``source``, the views of that file not in
        ``current`` are forgotten (a hidden section removed takes its ``X//gm`` view with it).
        """
        wanted = set(parts)
        unknown = wanted - PARTS
        if unknown:
            raise ValueError(f"unknown knowledge parts {sorted(unknown)}")
        async with self._db.write() as conn:
            if source is not None:
                keep = set(current) | {v.doc_id for v in views}
                await self._forget_other_views(conn, campaign, source, keep)
            for v in views:
                await self._write_view(conn, campaign, v, wanted)

    @staticmethod
    async def _forget_other_views(
        conn: aiosqlite.Connection, campaign: str, source: str, keep: set[str]
    ) -> None:
        """Every fact of the views of file ``source`` not in ``keep`` (the file and its
        ``source//…`` views), in the caller's transaction."""
        prefix = f"{source}//"
        async with conn.execute(
            "SELECT doc_id FROM knowledge_views WHERE campaign = ? "
            "AND (doc_id = ? OR substr(doc_id, 1, ?) = ?)",
            (campaign, source, len(prefix), prefix),
        ) as cur:
            stale = [r["doc_id"] for r in await cur.fetchall() if r["doc_id"] not in keep]
        for table in (*_TABLES, "knowledge_summaries"):
            await conn.executemany(
                f"DELETE FROM {table} WHERE campaign = ? AND doc_id = ?",
                [(campaign, d) for d in stale],
            )

    async def _write_view(
        self, conn: aiosqlite.Connection, campaign: str, v: ViewFacts, wanted: set[str]
    ) -> None:
        """One view's row and its ``wanted`` parts, each replaced whole; the other parts
        cleared when the view moved (:meth:`_upsert_view`)."""
        vis = _vis(v.visibility)
        moved = await self._upsert_view(conn, campaign, v, vis)
        clear = (PARTS - wanted) if moved else set()
        if "summary" in wanted or "summary" in clear:
            keep_summary = "summary" in wanted
            await conn.execute(
                "UPDATE knowledge_views SET summary = ?, summary_method = ? "
                "WHERE campaign = ? AND doc_id = ?",
                (
                    v.summary if keep_summary else "",
                    v.summary_method if keep_summary else "",
                    campaign,
                    v.doc_id,
                ),
            )
        for part in (wanted | clear) - {"summary"}:
            for table in _PART_TABLES[part]:
                await conn.execute(
                    f"DELETE FROM {table} WHERE campaign = ? AND doc_id = ?",
                    (campaign, v.doc_id),
                )
        if "entities" in wanted:
            await self._insert_entities(conn, campaign, v, vis)
        if "motifs" in wanted:
            await self._insert_motifs(conn, campaign, v, vis)

    @staticmethod
    async def _insert_motifs(
        conn: aiosqlite.Connection, campaign: str, v: ViewFacts, vis: str
    ) -> None:
        """The motif part of a view, in its order."""
        await conn.executemany(
            "INSERT INTO knowledge_motifs (campaign, doc_id, ordinal, kind, text, weight, "
            "start, visibility) VALUES (?,?,?,?,?,?,?,?)",
            [
                (campaign, v.doc_id, n, m.kind, m.text, m.weight, m.start, vis)
                for n, m in enumerate(v.motifs)
            ],
        )

    @staticmethod
    async def _upsert_view(
        conn: aiosqlite.Connection, campaign: str, v: ViewFacts, vis: str
    ) -> bool:
        """Upsert a view's row; whether it moved (its content hash or visibility changed)."""
        async with conn.execute(
            "SELECT content_hash, visibility FROM knowledge_views "
            "WHERE campaign = ? AND doc_id = ?",
            (campaign, v.doc_id),
        ) as cur:
            row = await cur.fetchone()
        moved = row is not None and (
            row["content_hash"] != v.content_hash or row["visibility"] != vis
        )
        await conn.execute(
            "INSERT INTO knowledge_views (campaign, doc_id, path, title, type, visibility, "
            "content_hash, summary, summary_method, session) VALUES (?,?,?,?,?,?,?,'','',?) "
            "ON CONFLICT (campaign, doc_id) DO UPDATE SET path = excluded.path, "
            "title = excluded.title, type = excluded.type, visibility = excluded.visibility, "
            "content_hash = excluded.content_hash, session = excluded.session",
            (
                campaign,
                v.doc_id,
                v.path,
                v.title,
                v.type,
                vis,
                v.content_hash,
                _session(v.session),
            ),
        )
        return moved

    async def heads(self, campaign: str) -> list[ViewFacts]:
        """Every stored view's row alone (title, visibility, summary, session mark): what time
        questions and prompt summaries need, without loading every mention."""
        rows = await self._db.fetchall(
            "SELECT doc_id, path, title, type, visibility, content_hash, summary, summary_method, "
            "session FROM knowledge_views WHERE campaign = ? ORDER BY doc_id",
            (campaign,),
        )
        return [_view(r) for r in rows]

    # -- overviews -----------------------------------------------------------------------------

    async def overview(self, campaign: str, key: str) -> tuple[str, str, frozenset[str]] | None:
        """The stored overview of lens ``key``: ``(inputs digest, text, visibility)``."""
        row = await self._db.fetchone(
            "SELECT content_hash, summary, visibility FROM knowledge_summaries "
            "WHERE campaign = ? AND doc_id = ? AND method = ?",
            (campaign, _OVERVIEW_PREFIX + key, OVERVIEW_METHOD),
        )
        if row is None:
            return None
        return row["content_hash"], row["summary"], frozenset(json.loads(row["visibility"]))

    async def keep_overview(
        self, campaign: str, key: str, *, digest: str, text: str, visibility: frozenset[str]
    ) -> None:
        """Store the overview of lens ``key``, built from inputs whose digest is ``digest``."""
        await self.keep_summary(
            campaign,
            _OVERVIEW_PREFIX + key,
            method=OVERVIEW_METHOD,
            content_hash=digest,
            summary=text,
            visibility=visibility,
        )

    async def overview_keys(self, campaign: str) -> list[str]:
        """The lens keys of the stored overviews."""
        rows = await self._db.fetchall(
            "SELECT doc_id FROM knowledge_summaries WHERE campaign = ? AND method = ?",
            (campaign, OVERVIEW_METHOD),
        )
        return sorted(r["doc_id"].removeprefix(_OVERVIEW_PREFIX) for r in rows)

    async def forget_overview(self, campaign: str, key: str) -> None:
        await self._db.execute(
            "DELETE FROM knowledge_summaries WHERE campaign = ? AND doc_id = ? AND method = ?",
            (campaign, _OVERVIEW_PREFIX + key, OVERVIEW_METHOD),
        )
