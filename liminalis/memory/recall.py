"""The memory model of a campaign and its two orchestrations: the recall loop and resonance.

**Active-memory recall loop** (the default orchestration), up to ``cycles`` rounds a turn:

1. retrieval — the fused retrieval's top documents, plus the turn context carried over from
   earlier turns (each turn multiplies it by ``context_decay``, so a long chat does not silt up);
2. the entities the question names;
3. (and 4.) the entities named in what was recalled so far, so the next round's walk pulls
   their documents in.

Each round spreads (:func:`liminalis.memory.spreading.spread`) and the activations add up.
**Resonance** runs dense, lexical and entity seeds as independent passes and ranks what two or
more reach above the rest (:func:`liminalis.memory.spreading.resonance`).

Meeting ranking: memory re-ranks, it never hides. The retrieval order and the memory order are
fused per document,

    score(d) = 1/(k + r_ret(d)) · (1 + w_mem · min(1, m(d)))         (loop)
    score(d) = 1/(k + r_ret(d)) · (1 + w_mem · k/(k + r_mem(d)))   (resonance)

(``fusion="sum"`` adds the memory term instead; a document only memory found ranks just after
the last retrieved one)

so every retrieved document — however cold — stays in the list, and memory adds its own.

Base level (:mod:`liminalis.memory.activation`) records a use of every cited document, the
question's entities and the turn; associations (:mod:`liminalis.memory.associations`) learn
question-entity → cited document, turn → cited document, and every link a spread step carried
activation along. State lives per campaign and per lens scope in
:class:`liminalis.store.graph.MemoryStore`: one lens's history never moves another's ranking,
and a players' conversation can only strengthen links players may see.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from liminalis.lens import GM
from liminalis.memory.activation import NEG_INF, DecayRates, LeakyIntegrator
from liminalis.memory.associations import HebbianParams, LearnedEdge, decayed, prune, strengthen
from liminalis.memory.entities import NameEntities
from liminalis.memory.graph import Graph, build_graph
from liminalis.memory.spreading import SpreadParams, doc_scores, resonance, spread
from liminalis.ports import BaseLevelModel, Clock, EntitySource
from liminalis.retrieval.catalog import Catalog
from liminalis.store.graph import MemoryStore, scope_of

__all__ = ["MemoryModel", "MemoryParams", "Recall"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MemoryParams:
    orchestration: str = "loop"  # "loop" | "resonance"
    cycles: int = 4
    seeds: int = 10
    recalled_docs: int = 3
    context_decay: float = 0.5
    context_size: int = 30
    w_memory: float = 2.0
    rrf_k: float = 5.0
    #: "product": score = 1/(k + r_ret) · (1 + w·m/max m); "sum": 1/(k + r_ret) + w·m/max m.
    fusion: str = "product"
    #: ACT-R divides the source activation W among the sources: each entity the question names
    #: takes a share from the carried-over context (a named new subject is not dragged back).
    share_context: bool = True
    #: Each named entity's share of W against the whole carried context's one.
    named_share: float = 4.0
    #: Score documents by the activation spreading brought them, without the seeds' own.
    arrivals_only: bool = True
    #: Scale memory scores by the turn's best (False: absolute activation, capped at 1, so weak
    #: evidence stays weak).
    normalize: bool = False
    decay: DecayRates = field(default_factory=DecayRates)
    hebbian: HebbianParams = field(default_factory=HebbianParams)
    spread: SpreadParams = field(default_factory=SpreadParams)


@dataclass(slots=True)
class Recall:
    """What memory made of one question: the fused document order and the activations."""

    ranked_doc_ids: list[str]
    memory_docs: dict[str, float]
    activation: dict[str, float]
    carried: dict[tuple[str, str], float]
    entities: list[str]
    ms: float = 0.0


@dataclass(slots=True)
class _Scope:
    act: dict[str, tuple[str, list[float], int, float]]
    edges: dict[tuple[str, str], LearnedEdge]
    context: dict[str, float]
    turns: int = 0


class MemoryModel:
    """Per-campaign ACT-R memory over the campaign's graph (see the module docstring)."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        clock: Clock,
        base: BaseLevelModel | None = None,
        entities: EntitySource | None = None,
        params: MemoryParams = MemoryParams(),
    ) -> None:
        self.store = store
        self.clock = clock
        self.base = base or LeakyIntegrator()
        self.entities = entities or NameEntities()
        self.params = params
        self._graphs: dict[str, Graph] = {}
        self._scopes: dict[tuple[str, str], _Scope] = {}
        self._pending: dict[tuple[str, str], Recall] = {}

    def label(self, campaign: str, chunk_id: str) -> str:
        """A chunk's readable name (a title, an entity, a heading; "a question" for a turn)."""
        g = self._graphs.get(campaign)
        chunk = g.chunks.get(chunk_id) if g is not None else None
        return (
            chunk.label
            if chunk is not None
            else ("a question" if chunk_id.startswith("q:") else chunk_id)
        )

    def now(self) -> float:
        return self.clock.now().timestamp()

    async def graph(self, cat: Catalog) -> Graph:
        """The campaign's graph at the catalog's generation (built, stored and cached)."""
        g = self._graphs.get(cat.campaign)
        if g is not None and g.generation == cat.generation:
            return g
        g = build_graph(cat, self.entities)
        self._graphs[cat.campaign] = g
        if await self.store.graph_generation(cat.campaign) != cat.generation:
            chunks, links = g.rows()
            await self.store.replace_graph(cat.campaign, cat.generation, chunks, links)
            await self.store.purge_invisible(
                cat.campaign, {c.id: list(c.visibility) for c in g.chunks.values()}
            )
            self._scopes = {k: v for k, v in self._scopes.items() if k[0] != cat.campaign}
        return g

    async def _scope(self, campaign: str, scope: str) -> _Scope:
        st = self._scopes.get((campaign, scope))
        if st is None:
            edges = {
                (s, d): LearnedEdge(s, d, k, w, v, tuple(state), t)
                for s, d, k, w, v, state, t in await self.store.edges(campaign, scope)
            }
            ctx, _ = await self.store.context(campaign, scope)
            st = _Scope(await self.store.activations(campaign, scope), edges, ctx)
            self._scopes[(campaign, scope)] = st
        return st

    async def clear(self, campaign: str, scope: str | None = None) -> None:
        await self.store.clear(campaign, scope)
        self._scopes = {
            k: v
            for k, v in self._scopes.items()
            if not (k[0] == campaign and (scope is None or k[1] == scope))
        }
        self._pending = {k: v for k, v in self._pending.items() if k[0] != campaign}

    def resting(self, g: Graph, st: _Scope, chunk_id: str, now: float) -> float:
        """``B`` of a chunk in a scope (−∞ when never used)."""
        row = st.act.get(chunk_id)
        if row is None:
            return NEG_INF
        c = g.chunks.get(chunk_id)
        kind = c.decay_kind if c is not None else row[0]
        return self.base.value(row[1], now, self.params.decay.of(kind))

    def _learned(
        self, g: Graph, st: _Scope, lens: frozenset[str], now: float
    ) -> dict[str, list[tuple[str, float]]]:
        out: dict[str, list[tuple[str, float]]] = {}
        hl = self.params.hebbian.half_life_s
        for (s, d), e in st.edges.items():
            if (s.startswith("q:") or g.visible(s, lens)) and g.visible(d, lens):
                w = decayed(e.weight, now - e.updated_at, hl)
                if w >= self.params.hebbian.floor:
                    out.setdefault(s, []).append((d, w))
        return out

    async def recall(
        self,
        cat: Catalog,
        question: str,
        lens: frozenset[str],
        *,
        retrieved: Sequence[str],
        dense: Sequence[str] = (),
        lexical: Sequence[str] = (),
        scope: str | None = None,
    ) -> Recall:
        """Memory's ranking for one question (read-only; :meth:`record` writes the turn)."""
        t0 = time.perf_counter()
        p = self.params
        lens = frozenset(lens)
        scope = scope or scope_of(lens)
        g = await self.graph(cat)
        st = await self._scope(cat.campaign, scope)
        now = self.now()
        cache: dict[str, float] = {}

        def resting(cid: str) -> float:
            b = cache.get(cid)
            if b is None:
                b = cache[cid] = self.resting(g, st, cid, now)
            return b

        learned = self._learned(g, st, lens, now)
        named = [
            f"e:{k}"
            for k in self.entities.named_in_question(question, g.vocabulary)
            if g.visible(f"e:{k}", lens)
        ]
        carried: dict[tuple[str, str], float] = {}

        def seeds(docs: Sequence[str]) -> dict[str, float]:
            return {
                f"d:{d}": 1.0 / (1 + r / 3)
                for r, d in enumerate(docs[: p.seeds])
                if g.visible(f"d:{d}", lens)
            }

        context = {c: a for c, a in st.context.items() if g.visible(c, lens)}
        if p.share_context and named:
            context = {c: a / (1 + p.named_share * len(named)) for c, a in context.items()}
        if p.orchestration == "resonance":
            passes = {
                "dense": spread(
                    g,
                    {**seeds(dense)},
                    lens,
                    resting=resting,
                    learned=learned,
                    p=p.spread,
                    carried=carried,
                ),
                "lexical": spread(
                    g,
                    seeds(lexical or retrieved),
                    lens,
                    resting=resting,
                    learned=learned,
                    p=p.spread,
                    carried=carried,
                ),
                "entity": spread(
                    g,
                    {**context, **{e: 1.0 for e in named}},
                    lens,
                    resting=resting,
                    learned=learned,
                    p=p.spread,
                    carried=carried,
                ),
            }
            scores = {k: doc_scores(g, v) for k, v in passes.items()}
            order = resonance(scores)
            total: dict[str, float] = {}
            for v in passes.values():
                for c, a in v.items():
                    total[c] = total.get(c, 0.0) + a
            mem = {d: 1.0 / (p.rrf_k + i + 1) for i, d in enumerate(order)}
            fused = self._fuse(retrieved, mem, rank_based=True)
        else:
            given = {**context, **seeds(retrieved)}
            total = spread(
                g, given, lens, resting=resting, learned=learned, p=p.spread, carried=carried
            )
            seen: set[str] = set()
            for cycle in range(1, p.cycles):
                if cycle == 1:
                    src = {e: 1.0 for e in named if e not in seen}
                else:
                    top = sorted(doc_scores(g, total).items(), key=lambda kv: -kv[1])[
                        : p.recalled_docs
                    ]
                    src = {}
                    for d, _ in top:
                        for pid in cat.by_doc.get(d, ()):
                            for k in g.mentions.get(f"p:{pid}", ()):
                                e = f"e:{k}"
                                if e not in seen and g.visible(e, lens):
                                    src[e] = src.get(e, 0.0) + 0.25
                    src = {e: min(1.0, a) for e, a in src.items()}
                if not src:
                    continue
                seen |= set(src)
                got = spread(
                    g, src, lens, resting=resting, learned=learned, p=p.spread, carried=carried
                )
                for c, a in got.items():
                    total[c] = total.get(c, 0.0) + a
            # Memory's evidence is what spreading brought, not the retrieval seeds' own amounts
            # (retrieval already counts in the fused score's first factor).
            mem = doc_scores(
                g, {c: a - given.get(c, 0.0) if p.arrivals_only else a for c, a in total.items()}
            )
            fused = self._fuse(retrieved, mem, rank_based=False)
        rec = Recall(
            ranked_doc_ids=fused,
            memory_docs=mem,
            activation=total,
            carried=carried,
            entities=[e for e in named],
            ms=(time.perf_counter() - t0) * 1000,
        )
        self._pending[(cat.campaign, scope)] = rec
        return rec

    def _fuse(
        self, retrieved: Sequence[str], mem: dict[str, float], *, rank_based: bool
    ) -> list[str]:
        p = self.params
        order = {d: i for i, d in enumerate(dict.fromkeys(retrieved))}
        top = max(mem.values(), default=0.0)
        score: dict[str, float] = {}
        for d in {*order, *mem}:
            base = 1.0 / (p.rrf_k + order.get(d, len(order)) + 1)
            m = mem.get(d, 0.0)
            if p.fusion == "product":
                rel = (
                    m * p.rrf_k
                    if rank_based
                    else (m if not p.normalize else (m / top if top > 0 else 0.0))
                )
                score[d] = base * (1.0 + p.w_memory * min(1.0, rel))
            else:
                score[d] = base + p.w_memory * (m if rank_based else (m / top if top > 0 else 0.0))
        return sorted(score, key=lambda d: (-score[d], order.get(d, len(order))))

    async def record(
        self,
        cat: Catalog,
        question: str,
        lens: frozenset[str],
        *,
        cited: Sequence[str],
        scope: str | None = None,
    ) -> None:
        """Write one answered turn: uses, Hebbian learning, the carried-over context."""
        p = self.params
        lens = frozenset(lens)
        scope = scope or scope_of(lens)
        g = await self.graph(cat)
        st = await self._scope(cat.campaign, scope)
        rec = self._pending.pop((cat.campaign, scope), None)
        now = self.now()
        cited = [d for d in dict.fromkeys(cited) if g.visible(f"d:{d}", lens)]
        named = [
            f"e:{k}"
            for k in self.entities.named_in_question(question, g.vocabulary)
            if g.visible(f"e:{k}", lens)
        ]
        used = [f"d:{d}" for d in cited] + named
        st.turns += 1
        turn = f"q:{scope}:{int(now)}:{st.turns}"
        rows = []
        for cid in used:
            kind, state, n, _ = st.act.get(
                cid, (g.chunks[cid].kind, list(self.base.empty()), 0, now)
            )
            new = list(self.base.record(state, now))
            st.act[cid] = (kind, new, n + 1, now)
            rows.append(
                (
                    cid,
                    kind,
                    json.dumps([sorted(v) for v in g.chunks[cid].visibility]),
                    new,
                    n + 1,
                    now,
                )
            )
        vis = json.dumps([sorted(set(lens) | {GM})])
        changed: dict[tuple[str, str], LearnedEdge] = {}
        h = p.hebbian

        def learn(src: str, dst: str, kind: str, a_i: float, a_j: float, eta: float) -> None:
            e = st.edges.get((src, dst)) or LearnedEdge(
                src, dst, kind, 0.0, vis, self.base.empty(), now
            )
            st.edges[(src, dst)] = changed[(src, dst)] = strengthen(
                e, now, a_i, a_j, eta=eta, half_life_s=h.half_life_s, model=self.base
            )

        for d in cited:
            learn(turn, f"d:{d}", "cited", 1.0, 1.0, h.eta)
            for e in named:
                learn(e, f"d:{d}", "asked", 1.0, 1.0, h.eta)
        if rec is not None and rec.carried:
            top = max(rec.carried.values())
            for (s, d), c in sorted(rec.carried.items(), key=lambda kv: -kv[1])[:20]:
                if g.visible(s, lens) and g.visible(d, lens):
                    learn(s, d, "spread", c / top, 1.0, h.eta_spread)
        doomed = prune([edge for k, edge in st.edges.items() if k not in changed], now, h)
        for edge in doomed:
            st.edges.pop((edge.src, edge.dst), None)
        # The turn context: last turn's context decayed, plus this turn's strongest entities and documents.
        ctx = {c: a * p.context_decay for c, a in st.context.items()}
        fresh: dict[str, float] = {f"d:{d}": 1.0 / (1 + i) for i, d in enumerate(cited[:3])}
        if rec is not None:
            ents = sorted(
                ((e, a) for e, a in rec.activation.items() if e.startswith("e:")),
                key=lambda kv: -kv[1],
            )[:10]
            best = ents[0][1] if ents else 0.0
            fresh.update({e: a / best for e, a in ents if best > 0})
        for ent in named:
            fresh[ent] = 1.0
        for cid, a in fresh.items():
            ctx[cid] = ctx.get(cid, 0.0) + a * (1 - p.context_decay)
        st.context = dict(
            sorted(((c, a) for c, a in ctx.items() if a >= 0.01), key=lambda kv: -kv[1])[
                : p.context_size
            ]
        )
        await self.store.add_turn(cat.campaign, turn, question[:200], vis, cat.generation)
        await self.store.save_activations(cat.campaign, scope, rows)
        await self.store.save_edges(
            cat.campaign,
            scope,
            [
                (e.src, e.dst, e.kind, e.weight, e.visibility, e.state, e.updated_at)
                for e in changed.values()
            ],
            pruned=[(edge.src, edge.dst) for edge in doomed],
        )
        await self.store.save_context(cat.campaign, scope, st.context, now)

    async def top(
        self,
        cat: Catalog,
        lens: frozenset[str],
        *,
        scope: str | None = None,
        n: int = 10,
    ) -> tuple[list[tuple[str, str, float]], list[tuple[str, str, float]]]:
        """The most active chunks ``(id, label, B)`` and strongest associations ``(src, dst, w)``
        the lens may see (the console's ``/memory``)."""
        scope = scope or scope_of(lens)
        g = await self.graph(cat)
        st = await self._scope(cat.campaign, scope)
        now = self.now()
        chunks = sorted(
            (
                (c, g.chunks[c].label, self.resting(g, st, c, now))
                for c in st.act
                if c in g.chunks and g.visible(c, lens)
            ),
            key=lambda x: -x[2],
        )[:n]
        edges = sorted(
            (
                (s, d, decayed(e.weight, now - e.updated_at, self.params.hebbian.half_life_s))
                for (s, d), e in st.edges.items()
                if g.visible(d, lens) and (s.startswith("q:") or g.visible(s, lens))
            ),
            key=lambda x: -x[2],
        )[:n]
        return chunks, [x for x in edges if not math.isnan(x[2])]
