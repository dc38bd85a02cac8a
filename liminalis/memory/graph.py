"""The campaign's memory graph: every piece of material is a chunk, linked by associations.

Chunks (one kind of object, told apart by ``kind``): ``passage`` (``p:<passage id>``), document
``summary`` (``d:<doc id>``; the document as a whole), ``entity`` (``e:<key>``), semantic
``type`` nodes (``t:<type>``: character, place, faction, item, series, …) and conversation
``turn`` s (``q:<scope>:<n>``, added by the recall model). Seeded associations, each directional
with its own weight and the visibility of its evidence:

* part-of: passage → summary (1.0), summary → passage (0.5);
* the passage chain: previous ↔ next passage (0.5), and a numbered series' documents
  (session-3 ↔ session-4) summary ↔ summary (0.5);
* mention: passage → entity and summary ↔ entity (1.0; the fan term of spreading divides a
  hub's share);
* co-mention: entity ↔ entity named in one passage (0.5);
* instance-of: entity or summary ↔ its type node (0.3), so activation flows
  instance → category → siblings.

Visibility is a tuple of sets that must all admit a lens (:func:`liminalis.lens.visible`): a
passage carries its own and its document's; an entity or a co-mention carries the union of the
visibilities of its evidence (a name players read anywhere is a players' node, and an edge seen
only in GM material is the GM's).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from liminalis.lens import GM, NOT_GM, PLAYERS, visible
from liminalis.ports import EntitySource
from liminalis.retrieval.catalog import Catalog

__all__ = ["Chunk", "Graph", "Link", "build_graph", "union_visibility"]


@dataclass(frozen=True, slots=True)
class Chunk:
    id: str
    kind: str
    label: str
    doc_id: str | None
    visibility: tuple[frozenset[str], ...]
    #: The kind whose decay rate applies (a session document's material decays as episodic).
    decay_kind: str = ""


@dataclass(frozen=True, slots=True)
class Link:
    dst: str
    kind: str
    weight: float
    visibility: tuple[frozenset[str], ...]


def union_visibility(vis: list[frozenset[str]] | set[frozenset[str]]) -> frozenset[str]:
    """Who may read at least one of ``vis`` (the GM always; a players' view's ``NOT_GM`` mark is
    dropped because the GM reads that text in the GM's view)."""
    out = {GM}
    for v in vis:
        out |= set(v) - {NOT_GM}
    return frozenset(out)


@dataclass(slots=True)
class Graph:
    campaign: str
    generation: int
    chunks: dict[str, Chunk] = field(default_factory=dict)
    out: dict[str, list[Link]] = field(default_factory=dict)
    vocabulary: dict[str, str] = field(default_factory=dict)
    #: Entities each passage names (for "the entities named in what was recalled").
    mentions: dict[str, list[str]] = field(default_factory=dict)
    _seen: dict[tuple[tuple[frozenset[str], ...], frozenset[str]], bool] = field(
        default_factory=dict
    )
    _adjacency: dict[frozenset[str], dict[str, list[tuple[str, float]]]] = field(
        default_factory=dict
    )

    def admits(self, vis: tuple[frozenset[str], ...], lens: frozenset[str]) -> bool:
        """:func:`liminalis.lens.visible` for every set of ``vis`` (memoised: a campaign has few)."""
        key = (vis, lens)
        ok = self._seen.get(key)
        if ok is None:
            ok = self._seen[key] = all(visible(v, lens) for v in vis)
        return ok

    def visible(self, chunk_id: str, lens: frozenset[str]) -> bool:
        c = self.chunks.get(chunk_id)
        return c is not None and self.admits(c.visibility, lens)

    def adjacency(self, lens: frozenset[str]) -> dict[str, list[tuple[str, float]]]:
        """The links ``lens`` may walk — link, source and target all visible — as
        ``src → [(dst, weight)]`` (built once per lens and generation)."""
        adj = self._adjacency.get(lens)
        if adj is None:
            adj = {}
            for src, links in self.out.items():
                if not self.visible(src, lens):
                    continue
                kept = [
                    (lk.dst, lk.weight)
                    for lk in links
                    if self.admits(lk.visibility, lens) and self.visible(lk.dst, lens)
                ]
                if kept:
                    adj[src] = kept
            self._adjacency[lens] = adj
        return adj

    def link(
        self, src: str, dst: str, kind: str, weight: float, vis: tuple[frozenset[str], ...]
    ) -> None:
        self.out.setdefault(src, []).append(Link(dst, kind, weight, vis))

    def fan(self, chunk_id: str) -> int:
        return len(self.out.get(chunk_id, ()))

    def rows(
        self,
    ) -> tuple[list[tuple[str, str, str, str | None, str]], list[tuple[str, str, str, float, str]]]:
        """Chunk and link rows for :class:`liminalis.store.memory.MemoryStore`."""

        def js(v: tuple[frozenset[str], ...]) -> str:
            return json.dumps([sorted(x) for x in v])

        chunks = [
            (c.id, c.kind, c.label[:200], c.doc_id, js(c.visibility)) for c in self.chunks.values()
        ]
        links = [
            (s, lk.dst, lk.kind, lk.weight, js(lk.visibility))
            for s, ls in self.out.items()
            for lk in ls
        ]
        return chunks, links


@dataclass(slots=True)
class _Seeding:
    """What seeding gathers across documents before the entity nodes can be made: each
    entity's visibilities, and each pair of entities' co-mention count and visibilities."""

    ent_vis: dict[str, set[frozenset[str]]] = field(default_factory=dict)
    co: Counter[tuple[str, str]] = field(default_factory=Counter)
    co_vis: dict[tuple[str, str], set[frozenset[str]]] = field(default_factory=dict)


def build_graph(cat: Catalog, entities: EntitySource) -> Graph:
    """The seeded graph of one catalog snapshot: documents and their passages
    (:func:`_seed_document`), the series links (:func:`_link_series`), entities and their
    co-mentions (:func:`_seed_entities`), type nodes (:func:`_seed_types`)."""
    g = Graph(campaign=cat.campaign, generation=cat.generation)
    g.vocabulary = entities.vocabulary(cat.documents.values())
    seeding = _Seeding()
    for doc_id, pids in cat.by_doc.items():
        _seed_document(g, cat, entities, seeding, doc_id, pids)
    _link_series(g, cat)
    _seed_entities(g, seeding)
    _seed_types(g)
    return g


def _seed_document(
    g: Graph,
    cat: Catalog,
    entities: EntitySource,
    seeding: _Seeding,
    doc_id: str,
    pids: list[str],
) -> None:
    """A document's summary node, the entities it defines, its type, and its passages."""
    doc = cat.documents[doc_id]
    episodic = doc.type in {"session", "log", "journal", "recap"}
    did = f"d:{doc_id}"
    g.chunks[did] = Chunk(
        did,
        "summary",
        doc.title,
        doc_id,
        (doc.visibility,),
        "session" if episodic else ("entity" if doc.type == "overview" else "summary"),
    )
    for key, _kind in entities.defined(doc):
        seeding.ent_vis.setdefault(key, set()).add(doc.visibility)
        eid = f"e:{key}"
        g.link(did, eid, "defines", 1.0, (doc.visibility,))
        g.link(eid, did, "defines", 1.0, (doc.visibility,))
    if doc.type not in {"lore", ""}:
        tid = f"t:{doc.type}"
        g.link(did, tid, "instance", 0.3, (doc.visibility,))
        g.link(tid, did, "instance", 0.3, (doc.visibility,))
    doc_mentions = _seed_passages(g, cat, entities, seeding, doc_id, pids, episodic=episodic)
    # Mentions also link the entity and the document as a whole: the walk reaches a
    # document from a name in two steps (entity → summary) rather than through each passage.
    for key, (_, pvis) in doc_mentions.items():
        dvis = (doc.visibility, union_visibility(pvis))
        g.link(did, f"e:{key}", "mention", 1.0, dvis)
        g.link(f"e:{key}", did, "mention", 1.0, dvis)


def _seed_passages(
    g: Graph,
    cat: Catalog,
    entities: EntitySource,
    seeding: _Seeding,
    doc_id: str,
    pids: list[str],
    *,
    episodic: bool,
) -> dict[str, tuple[set[frozenset[str]], set[frozenset[str]]]]:
    """A document's passage nodes: part-of links, chain links between neighbours of one
    visibility, and mention links to (up to 24) entities each names. Returns, per entity the
    document mentions, the visibilities of its mentions and of the passages holding them."""
    doc = cat.documents[doc_id]
    did = f"d:{doc_id}"
    prev: str | None = None
    doc_mentions: dict[str, tuple[set[frozenset[str]], set[frozenset[str]]]] = {}
    for pid in pids:
        p = cat.passages[pid]
        vis = (p.visibility, doc.visibility)
        cid = f"p:{pid}"
        g.chunks[cid] = Chunk(
            cid,
            "passage",
            p.heading or doc.title,
            doc_id,
            vis,
            "session" if episodic else "passage",
        )
        g.link(cid, did, "part", 1.0, vis)
        g.link(did, cid, "part", 0.5, vis)
        if prev is not None and cat.passages[prev].visibility == p.visibility:
            g.link(f"p:{prev}", cid, "chain", 0.5, vis)
            g.link(cid, f"p:{prev}", "chain", 0.5, vis)
        prev = pid
        named = entities.mentions(doc.text[p.start : p.end], g.vocabulary)[:24]
        g.mentions[cid] = named
        for key in named:
            seeding.ent_vis.setdefault(key, set()).update(vis)
            g.link(cid, f"e:{key}", "mention", 1.0, vis)
            doc_mentions.setdefault(key, (set(), set()))[0].update(vis)
            doc_mentions[key][1].add(p.visibility)
        for i, a in enumerate(named):
            for b in named[i + 1 :]:
                pair = (a, b) if a < b else (b, a)
                seeding.co[pair] += 1
                seeding.co_vis.setdefault(pair, set()).update(vis)
    return doc_mentions


def _link_series(g: Graph, cat: Catalog) -> None:
    """A numbered series (session-3 → session-4, a story's sections) links each document to the
    ones beside it, as it is read (Catalog.neighbours: per lens, so both sides' views)."""
    for lens in (frozenset({GM}), frozenset({PLAYERS})):
        for doc_id in cat.by_doc:
            for other in cat.neighbours(doc_id, lens):
                both = (cat.documents[doc_id].visibility, cat.documents[other].visibility)
                if not any(
                    lk.dst == f"d:{other}" and lk.kind == "series"
                    for lk in g.out.get(f"d:{doc_id}", ())
                ):
                    g.link(f"d:{doc_id}", f"d:{other}", "series", 0.5, both)


def _seed_entities(g: Graph, seeding: _Seeding) -> None:
    """Entity nodes (visible wherever a definition or mention is), their kind's type links, and
    co-mention links between entities named together in two passages or more, weighted
    ``min(1, 0.25 · n)``."""
    for key, vis_set in seeding.ent_vis.items():
        eid = f"e:{key}"
        kind = g.vocabulary.get(key, "name")
        g.chunks[eid] = Chunk(eid, "entity", key, None, (union_visibility(vis_set),), "entity")
        if kind != "name":
            tid = f"t:{kind}"
            g.link(eid, tid, "instance", 0.3, g.chunks[eid].visibility)
            g.link(tid, eid, "instance", 0.3, g.chunks[eid].visibility)
    for (a, b), n in seeding.co.items():
        if n >= 2:
            uv = (union_visibility(seeding.co_vis[(a, b)]),)
            w = min(1.0, 0.25 * n)
            g.link(f"e:{a}", f"e:{b}", "co-mention", w, uv)
            g.link(f"e:{b}", f"e:{a}", "co-mention", w, uv)


def _seed_types(g: Graph) -> None:
    """A node for every type a link points to. A type node is visible wherever an instance
    is: its own links carry the walls."""
    for src in list(g.out):
        for lk in g.out[src]:
            if lk.dst.startswith("t:") and lk.dst not in g.chunks:
                g.chunks[lk.dst] = Chunk(
                    lk.dst, "type", lk.dst[2:], None, (frozenset({GM, "*"}),), "type"
                )
    for cid, c in list(g.chunks.items()):
        if c.kind == "type":
            seen = {v for lk in g.out.get(cid, ()) for v in lk.visibility}
            g.chunks[cid] = Chunk(cid, "type", c.label, None, (union_visibility(seen),), "type")
