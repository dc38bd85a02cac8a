"""The knowledge layer's read API: extract and store per view, read through a lens.

``Knowledge(db)`` keeps one set of facts per document view (:mod:`liminalis.store.knowledge`).
:meth:`Knowledge.refresh` extracts only the views whose content hash changed; every other
method reads the stored facts of the views the caller's lens may see
(:func:`liminalis.lens.visible`, the one rule) and nothing else.

Typical use, from a command or a pass::

    knowledge = Knowledge(engine.db)
    await knowledge.refresh(slug, catalog)
    card = await knowledge.entity(slug, lens, "Mirel")
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from liminalis.ingest.sections import source_of
from liminalis.knowledge.confidence import DRAW_CONFIDENCE, relation_confidence
from liminalis.knowledge.entities import (
    Entity,
    EntityIndex,
    extract_entities,
    extract_relations,
)
from liminalis.knowledge.facts import EntityDef, Mention, RelationFact, ViewFacts
from liminalis.knowledge.motifs import extract_motifs, rank_themes
from liminalis.knowledge.overview import OverviewEntity, OverviewSession, build_overview
from liminalis.knowledge.relmap import RelationMap, build_map
from liminalis.knowledge.sessions import (
    SessionInfo,
    order_sessions,
    resolve_sessions,
    session_mark,
)
from liminalis.knowledge.summaries import MODEL, summarize, summarize_with_model
from liminalis.knowledge.timeline import Timeline, build_timeline
from liminalis.lens import GM, NOT_GM, PLAYERS, players_lens, visible
from liminalis.ports import LanguageModel
from liminalis.recap import RecapSession
from liminalis.retrieval.catalog import Catalog
from liminalis.text import split_sentences
from liminalis.types import Document

if TYPE_CHECKING:
    from liminalis.store.sqlite import Database

__all__ = [
    "Knowledge",
    "RefreshReport",
    "EntityInfo",
    "RelationInfo",
    "EntityCard",
    "DocSummary",
    "Motifs",
    "extract_view",
    "extract_parts",
    "lens_key",
    "lens_views",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What a refresh did: views extracted anew, views unchanged, views forgotten."""

    extracted: int
    unchanged: int
    removed: int


@dataclass(frozen=True, slots=True)
class EntityInfo:
    """An entity as a lens knows it: its name, type, other names, how often it is mentioned
    and in which documents (view ids, most mentions first)."""

    key: str
    name: str
    type: str
    aliases: tuple[str, ...]
    mentions: int
    documents: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RelationInfo:
    """``src`` —kind→ ``dst`` (entity names), the document and sentence that state it: where
    (the view's ``title`` and 1-based ``line``) and how far it is trusted
    (:func:`~liminalis.knowledge.confidence.relation_confidence`)."""

    src: str
    kind: str
    dst: str
    doc_id: str
    evidence: str
    title: str = ""
    line: int = 0
    confidence: float = 1.0


@dataclass(frozen=True, slots=True)
class EntityCard:
    """What a lens knows of one entity: lines from the visible documents that mention it,
    its relations, and its sources as ``(doc_id, title)``."""

    entity: EntityInfo
    lines: tuple[str, ...]
    relations: tuple[RelationInfo, ...]
    sources: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class DocSummary:
    """One document's summary as a lens reads it (the view it may see)."""

    doc_id: str
    title: str
    text: str
    method: str


@dataclass(frozen=True, slots=True)
class Motifs:
    """Recurring themes ``(word, weight)`` and open threads ``(doc_id, text)``, latest first."""

    themes: tuple[tuple[str, float], ...]
    threads: tuple[tuple[str, str], ...]


def extract_view(doc: Document, passages: Sequence[tuple[str, int, int]] = ()) -> ViewFacts:
    """Every fact of one view: entities, mentions, relations, summary, motifs, session mark."""
    defined, mentions = extract_entities(doc, passages)
    owner = defined[0].key if defined else None
    summary = summarize(doc)
    return ViewFacts(
        doc_id=doc.doc_id,
        path=doc.path,
        title=doc.title,
        type=doc.type,
        visibility=doc.visibility,
        content_hash=doc.content_hash,
        summary=summary.text,
        summary_method=summary.method,
        session=session_mark(doc),
        entities=defined,
        mentions=mentions,
        relations=extract_relations(doc, mentions, owner),
        motifs=extract_motifs(doc),
    )


def extract_parts(
    doc: Document, passages: Sequence[tuple[str, int, int]] = (), *, parts: Iterable[str]
) -> ViewFacts:
    """The facts of one view for ``parts`` alone (``entities``, ``summary``, ``motifs``), with the
    view's row (title, visibility, hash, session mark): what one seeded pass writes."""
    wanted = set(parts)
    defined: tuple[EntityDef, ...] = ()
    mentions: tuple[Mention, ...] = ()
    relations: tuple[RelationFact, ...] = ()
    if "entities" in wanted:
        defined, mentions = extract_entities(doc, passages)
        relations = extract_relations(doc, mentions, defined[0].key if defined else None)
    summary = summarize(doc) if "summary" in wanted else None
    return ViewFacts(
        doc_id=doc.doc_id,
        path=doc.path,
        title=doc.title,
        type=doc.type,
        visibility=doc.visibility,
        content_hash=doc.content_hash,
        summary=summary.text if summary else "",
        summary_method=summary.method if summary else "",
        session=session_mark(doc),
        entities=defined,
        mentions=mentions,
        relations=relations,
        motifs=extract_motifs(doc) if "motifs" in wanted else (),
    )


def lens_key(lens: Iterable[str]) -> str:
    """The key a lens's overview is stored under: ``gm`` for any GM, else its names sorted
    (``players``, ``mirel,players``)."""
    names = set(lens)
    return GM if GM in names else ",".join(sorted(names))


def _key_visibility(key: str) -> frozenset[str]:
    """Who may read the overview of lens ``key``: the GM's only the GM; the players' every
    player; a personal lens's only that lens (``mirel,players`` → ``{mirel}``)."""
    if key == GM:
        return frozenset({GM})
    personal = set(key.split(",")) - {PLAYERS}
    return frozenset(personal or {PLAYERS})


def lens_views(
    views: Iterable[ViewFacts],
    lens: frozenset[str],
    current: Mapping[str, frozenset[str]] | None = None,
) -> list[ViewFacts]:
    """The views ``lens`` reads: those :func:`visible` allows. The views of one file never
    overlap for a reader (the GM reads ``X//gm`` alone; a player the shared view plus the
    personal sections of ``X//lens:NAME``), so nothing is counted twice.

    With ``current`` (doc id → the visibility of the document stored now), a view is read only
    when the document it was extracted from still stands and is still visible to ``lens``: the
    facts are extracted by the passes, later than ingest, and a note made GM-only in between
    must not be read through its old facts.

        read(v) ⇔ visible(v.visibility, lens) ∧ (current = ∅ ∨ visible(current[v.doc_id], lens))
    """
    return sorted(
        (
            v
            for v in views
            if visible(v.visibility, lens)
            and (current is None or visible(current.get(v.doc_id, frozenset({GM})), lens))
        ),
        key=lambda v: v.doc_id,
    )


class Knowledge:
    """Extract, store and read the knowledge layer of campaigns (see the module)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def refresh(
        self, campaign: str, source: Catalog | Iterable[Document], *, prune: bool = True
    ) -> RefreshReport:
        """Extract and store the facts of every view whose content hash changed.

        Args:
            source: the campaign's catalog (its passages place each mention), or its documents
                (passages are read from the store).
            prune: forget stored views ``source`` does not hold (it is the whole campaign).
        """
        if isinstance(source, Catalog):
            docs = list(source.documents.values())
            passages: dict[str, list[tuple[str, int, int]]] = {
                d: [
                    (p, source.passages[p].start, source.passages[p].end)
                    for p in source.by_doc.get(d, ())
                    if p in source.passages
                ]
                for d in source.documents
            }
        else:
            docs = list(source)
            passages = {}
        stored = await self.db.knowledge.hashes(campaign)
        changed = [d for d in docs if stored.get(d.doc_id) != d.content_hash or not d.content_hash]
        facts = []
        for d in changed:
            spans = passages.get(d.doc_id)
            if spans is None:
                spans = [
                    (p.passage_id, p.start, p.end)
                    for p in await self.db.documents.passages(campaign, d.doc_id)
                ]
            facts.append(extract_view(d, spans))
        if facts:
            await self.db.knowledge.replace(campaign, facts)
        gone = set(stored) - {d.doc_id for d in docs} if prune else set()
        await self.db.knowledge.remove(campaign, sorted(gone))
        if facts or gone:
            _log.info(
                "knowledge of %s: %d views extracted, %d forgotten", campaign, len(facts), len(gone)
            )
        return RefreshReport(len(facts), len(docs) - len(facts), len(gone))

    async def built(self, campaign: str) -> bool:
        """Whether any facts of the campaign are stored yet (the passes have run)."""
        return bool(await self.db.knowledge.hashes(campaign))

    async def _views(self, campaign: str, lens: frozenset[str]) -> list[ViewFacts]:
        """The facts of the views ``lens`` reads, read through the documents stored now."""
        current = await self.db.documents.visibilities(campaign)
        return lens_views(await self.db.knowledge.views(campaign), frozenset(lens), current)

    async def index(self, campaign: str, lens: frozenset[str]) -> EntityIndex:
        """The entity index over the views ``lens`` reads (for callers that ask many times)."""
        return EntityIndex(await self._views(campaign, lens))

    async def entities(
        self, campaign: str, lens: frozenset[str], type: str | None = None
    ) -> list[EntityInfo]:
        """The entities ``lens`` knows, most mentioned first (of one ``type`` if given)."""
        idx = await self.index(campaign, lens)
        out = [
            _info(e)
            for e in idx.entities.values()
            if (type is None or e.type == type) and e.type != "player"
        ]
        return sorted(out, key=lambda e: (-e.mentions, e.name))

    async def entity(
        self, campaign: str, lens: frozenset[str], name: str, *, max_lines: int = 6
    ) -> EntityCard | None:
        """What ``lens`` knows of the entity ``name`` names (any alias), or None."""
        views = await self._views(campaign, lens)
        idx = EntityIndex(views)
        ent = idx.find(name)
        if ent is None:
            return None
        relations = await self._relations(campaign, lens, views, idx, ent.key)
        lines = await self._lines(campaign, ent.key, ent.defined_in, ent.mentions, max_lines)
        docs = ent.documents
        titles = {v.doc_id: v.title for v in views}
        return EntityCard(
            entity=_info(ent),
            lines=tuple(lines),
            relations=tuple(dict.fromkeys(relations)),
            sources=tuple((d, titles.get(d, d)) for d in docs),
        )

    async def _relations(
        self,
        campaign: str,
        lens: frozenset[str],
        views: Sequence[ViewFacts],
        idx: EntityIndex,
        key: str,
    ) -> list[RelationInfo]:
        """The relations of entity ``key`` that the views ``lens`` reads state, each with the
        document and line it stands on. A player is listed only the relations trusted enough to
        draw (:data:`~liminalis.knowledge.confidence.DRAW_CONFIDENCE`); the GM reads them all."""
        out: list[RelationInfo] = []
        texts: dict[str, str] = {}
        for v in views:
            for r in v.relations:
                src, dst = idx.resolve(r.src), idx.resolve(r.dst)
                conf = relation_confidence(r)
                if not (src and dst and src != dst and key in (src, dst)):
                    continue
                if GM not in lens and conf < DRAW_CONFIDENCE:
                    continue
                if v.doc_id not in texts:
                    doc = await self.db.documents.get(campaign, v.doc_id)
                    texts[v.doc_id] = doc.text if doc else ""
                line = texts[v.doc_id].count("\n", 0, r.start) + 1
                names = (idx.entities[src].name, r.kind, idx.entities[dst].name)
                out.append(RelationInfo(*names, v.doc_id, r.evidence, v.title, line, conf))
        return out

    async def _lines(
        self,
        campaign: str,
        key: str,
        defined_in: set[str],
        mentions: Sequence[tuple[str, Mention]],
        max_lines: int,
    ) -> list[str]:
        """Sentences of the visible views that mention the entity: its own page's first, then
        one per other document, most mentions first."""
        starts: dict[str, list[int]] = defaultdict(list)
        for doc_id, m in mentions:
            starts[doc_id].append(m.start)
        order = sorted(defined_in) + sorted(
            (d for d in starts if d not in defined_in), key=lambda d: (-len(starts[d]), d)
        )
        lines: list[str] = []
        for doc_id in order:
            if len(lines) >= max_lines:
                break
            doc = await self.db.documents.get(campaign, doc_id)
            if doc is None:
                continue
            positions = sorted(starts.get(doc_id, ()))
            want = 2 if doc_id in defined_in else 1
            for s, e, _ in split_sentences(doc.text):
                text = " ".join(doc.text[s:e].split())
                if text.startswith(("#", "|")) or len(text) < 25:
                    continue
                if doc_id in defined_in or any(s <= p < e for p in positions):
                    lines.append(re.sub(r"^[-*]\s+|\*\*", "", text))
                    want -= 1
                    if want == 0 or len(lines) >= max_lines:
                        break
        return lines

    async def summary(
        self,
        campaign: str,
        lens: frozenset[str],
        doc_id: str,
        *,
        model: LanguageModel | None = None,
    ) -> DocSummary | None:
        """The summary of the view of ``doc_id``'s file that ``lens`` reads (None when it reads
        none). With ``model``, a model-written summary, cached by the view's content hash."""
        views = [
            v for v in await self._views(campaign, lens) if source_of(v.doc_id) == source_of(doc_id)
        ]
        if not views:
            return None
        v = views[0]
        if model is None:
            return DocSummary(v.doc_id, v.title, v.summary, v.summary_method)
        cached = await self.db.knowledge.cached_summary(campaign, v.doc_id, MODEL, v.content_hash)
        if cached is not None:
            return DocSummary(v.doc_id, v.title, cached, MODEL)
        doc = await self.db.documents.get(campaign, v.doc_id)
        if doc is None:
            return DocSummary(v.doc_id, v.title, v.summary, v.summary_method)
        made = await summarize_with_model(doc, model)
        if made.method == MODEL:
            await self.db.knowledge.keep_summary(
                campaign,
                v.doc_id,
                method=MODEL,
                content_hash=v.content_hash,
                summary=made.text,
                visibility=v.visibility,
            )
        return DocSummary(v.doc_id, v.title, made.text, made.method)

    async def motifs(self, campaign: str, lens: frozenset[str], *, top_k: int = 10) -> Motifs:
        """Themes recurring across the views ``lens`` reads, and their open threads (latest
        session first, then other documents)."""
        views = await self._views(campaign, lens)
        order = {s.doc_id: s.ordinal for s in self._sessions(views)}
        threads = [
            (v.doc_id, m.text)
            for v in sorted(views, key=lambda v: (-order.get(v.doc_id, 0), v.doc_id))
            for m in v.motifs
            if m.kind == "thread"
        ]
        themes = rank_themes(([m for m in v.motifs] for v in views), top_k=top_k)
        return Motifs(tuple(themes), tuple(threads))

    @staticmethod
    def _sessions(views: Sequence[ViewFacts]) -> list[SessionInfo]:
        return order_sessions([(v.doc_id, v.title, v.path, v.session) for v in views if v.session])

    async def sessions(self, campaign: str, lens: frozenset[str]) -> list[SessionInfo]:
        """The session notes ``lens`` reads, in campaign order."""
        return self._sessions(await self._heads(campaign, lens))

    async def _heads(self, campaign: str, lens: frozenset[str]) -> list[ViewFacts]:
        """The rows of the views ``lens`` reads, without their mentions (cheap: per question)."""
        current = await self.db.documents.visibilities(campaign)
        return lens_views(await self.db.knowledge.heads(campaign), frozenset(lens), current)

    async def timeline(
        self, campaign: str, lens: frozenset[str], *, entity: str | None = None
    ) -> Timeline | None:
        """The sessions and dated events ``lens`` reads, in order (:mod:`liminalis.knowledge.timeline`),
        about the entity ``entity`` names if given; ``None`` when ``lens`` knows no such entity."""
        views = await self._views(campaign, lens)
        ids = {v.doc_id for v in views}
        texts = {d.doc_id: d.text for d in await self.db.documents.all(campaign) if d.doc_id in ids}
        sessions = self._sessions(views)
        if not entity:
            return build_timeline(sessions, texts)
        ent = EntityIndex(views).find(entity)
        if ent is None:
            return None
        return build_timeline(
            sessions,
            texts,
            entity=ent.name,
            names=[ent.name, *sorted(ent.aliases)],
            entity_docs=frozenset(ent.documents),
        )

    async def resolve_time(self, campaign: str, lens: frozenset[str], question: str) -> list[str]:
        """The session doc ids the time words of ``question`` point at ("last session", …)."""
        return resolve_sessions(question, await self.sessions(campaign, lens))

    async def overview(
        self, campaign: str, lens: frozenset[str], *, title: str = "", max_chars: int = 6000
    ) -> str:
        """The campaign overview for ``lens`` (:mod:`liminalis.knowledge.overview`), built from
        the facts of the views it reads only."""
        views = await self._views(campaign, lens)
        return self._overview(campaign, views, title=title, max_chars=max_chars)

    # -- what the seeded passes write, and what the answer path reads -------------------------

    async def write(
        self,
        campaign: str,
        views: Sequence[ViewFacts],
        *,
        parts: Iterable[str],
        source: str | None = None,
        current: Iterable[str] = (),
    ) -> None:
        """Store ``parts`` of ``views`` (see :meth:`KnowledgeRepository.write_parts`)."""
        await self.db.knowledge.write_parts(
            campaign, views, parts=parts, source=source, current=current
        )

    async def prune(self, campaign: str, current: Mapping[str, frozenset[str]]) -> int:
        """Forget the views not in ``current`` (view id → its visibility now), and those whose
        visibility is not what their facts were extracted under (a document made GM-only must
        not keep its public facts until a pass reaches it; the pass writes them anew). Returns
        how many were forgotten."""
        gone = sorted(
            v.doc_id
            for v in await self.db.knowledge.heads(campaign)
            if current.get(v.doc_id) != v.visibility
        )
        await self.db.knowledge.remove(campaign, gone)
        return len(gone)

    async def summaries_for(
        self, campaign: str, lens: frozenset[str], doc_ids: Iterable[str]
    ) -> dict[str, str]:
        """The stored summaries of the views among ``doc_ids`` that ``lens`` reads, by view id
        (the summarization pass's output, for :func:`liminalis.context.tiering.tier_documents`)."""
        wanted = set(doc_ids)
        if not wanted:
            return {}
        return {
            v.doc_id: v.summary
            for v in await self._heads(campaign, lens)
            if v.doc_id in wanted and v.summary
        }

    async def session_notes(
        self, campaign: str, lens: frozenset[str], doc_ids: Sequence[str]
    ) -> list[tuple[str, str, str]]:
        """``(doc_id, title, summary)`` of the session views among ``doc_ids`` that ``lens``
        reads, in campaign order."""
        heads = {v.doc_id: v for v in await self._heads(campaign, lens)}
        order = [s.doc_id for s in self._sessions(list(heads.values()))]
        return [
            (d, heads[d].title, heads[d].summary)
            for d in order
            if d in doc_ids and heads[d].summary
        ]

    async def recap_sessions(self, campaign: str, sessions: int = 1) -> list[RecapSession]:
        """The latest ``sessions`` session notes every player may read, each with its stored
        summary, and the open threads of the latest; ``[]`` while a summary is missing (the
        passes have not reached it: the caller recaps from the documents instead)."""
        views = await self._views(campaign, players_lens())
        latest = self._sessions(views)[-sessions:] if sessions > 0 else []
        by_id = {v.doc_id: v for v in views}
        out = [
            RecapSession(
                s.doc_id,
                s.title,
                by_id[s.doc_id].summary,
                tuple(m.text for m in by_id[s.doc_id].motifs if m.kind == "thread"),
            )
            for s in latest
        ]
        return out if out and all(r.summary for r in out) else []

    async def relation_map(
        self,
        campaign: str,
        lens: frozenset[str],
        *,
        centre: str | None = None,
        max_nodes: int = 30,
    ) -> RelationMap | None:
        """The relationship map of the entities ``lens`` knows (:mod:`liminalis.knowledge.relmap`),
        centred on the entity ``centre`` names; ``None`` when ``lens`` knows no such entity."""
        return build_map(await self._views(campaign, lens), centre=centre, max_nodes=max_nodes)

    # -- overviews ---------------------------------------------------------------------------

    async def lenses(self, campaign: str) -> list[frozenset[str]]:
        """The lenses an overview is kept for: the GM, the players, and each personal lens with
        the players (the names the stored views' visibilities hold)."""
        names: set[str] = set()
        for v in await self.db.knowledge.heads(campaign):
            names |= set(v.visibility)
        personal = sorted(names - {GM, PLAYERS, NOT_GM})
        return [frozenset({GM}), frozenset({PLAYERS})] + [frozenset({PLAYERS, p}) for p in personal]

    async def refresh_overviews(
        self, campaign: str, *, title: str = "", max_chars: int = 4000
    ) -> list[str]:
        """Rebuild the stored overview of every lens (:meth:`lenses`) whose inputs changed;
        returns the lens keys rebuilt. The inputs are the facts of the views the lens reads
        (their digest decides); an overview is never one of them."""
        views = await self.db.knowledge.views(campaign)
        rebuilt: list[str] = []
        keys = set()
        for lens in await self.lenses(campaign):
            key = lens_key(lens)
            keys.add(key)
            seen = lens_views(views, lens)
            digest = _digest(seen, title, max_chars)
            stored = await self.db.knowledge.overview(campaign, key)
            if stored is not None and stored[0] == digest:
                continue
            text = self._overview(campaign, seen, title=title, max_chars=max_chars)
            await self.db.knowledge.keep_overview(
                campaign, key, digest=digest, text=text, visibility=_key_visibility(key)
            )
            rebuilt.append(key)
        for key in set(await self.db.knowledge.overview_keys(campaign)) - keys:
            await self.db.knowledge.forget_overview(campaign, key)
        if rebuilt:
            _log.info("overview of %s rebuilt for %s", campaign, ", ".join(rebuilt))
        return rebuilt

    async def stored_overview(self, campaign: str, lens: frozenset[str]) -> str:
        """The overview kept for ``lens`` (for a lens none was kept for, the players'); ``""``
        when none is kept. Read through :func:`visible` as every fact is."""
        key = lens_key(lens)
        for k in dict.fromkeys([key] if key == GM else [key, PLAYERS]):
            found = await self.db.knowledge.overview(campaign, k)
            if found is not None and visible(found[2], lens):
                return found[1]
        return ""

    def _overview(
        self, campaign: str, views: Sequence[ViewFacts], *, title: str, max_chars: int
    ) -> str:
        idx = EntityIndex(views)
        by_id = {v.doc_id: v for v in views}
        ents = [
            OverviewEntity(e.name, e.type, len(e.mentions), tuple(sorted(e.aliases))[:3])
            for e in idx.entities.values()
            if e.type != "player"
        ]
        sessions = [
            OverviewSession(
                s.title,
                by_id[s.doc_id].summary,
                tuple(m.text for m in by_id[s.doc_id].motifs if m.kind == "thread"),
            )
            for s in self._sessions(views)
        ]
        files = {source_of(v.doc_id): (v.path, v.type) for v in views}
        return build_overview(
            title=title or f"{campaign}: campaign overview",
            entities=ents,
            sessions=sessions,
            documents=[files[k] for k in sorted(files)],
            max_chars=max_chars,
        )


def _digest(views: Sequence[ViewFacts], title: str, max_chars: int) -> str:
    """What an overview is built from, hashed: each view's hash and summary, and the size of
    each part (a part rewritten under the same hash changes a count or the summary)."""
    raw = json.dumps(
        [
            title,
            max_chars,
            [
                (
                    v.doc_id,
                    v.content_hash,
                    v.summary,
                    len(v.entities),
                    len(v.mentions),
                    len(v.relations),
                    len(v.motifs),
                )
                for v in views
            ],
        ]
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _info(e: Entity) -> EntityInfo:
    return EntityInfo(
        key=e.key,
        name=e.name,
        type=e.type,
        aliases=tuple(sorted(e.aliases)),
        mentions=len(e.mentions),
        documents=tuple(e.documents),
    )
