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


@dataclass(slots=True)
class _Walk:
    """One question's spreading: the graph and lens it walks, the resting levels it has read
    (cached: a chunk's ``B`` does not change within a question), the learned links it may
    follow, and the link activations every pass carried (what :meth:`MemoryModel.record`
    learns from)."""

    model: MemoryModel
    g: Graph
    st: _Scope
    lens: frozenset[str]
    now: float
    learned: dict[str, list[tuple[str, float]]]
    carried: dict[tuple[str, str], float] = field(default_factory=dict)
    cache: dict[str, float] = field(default_factory=dict)

    def resting(self, cid: str) -> float:
        """``B`` of ``cid``, read once per question."""
        b = self.cache.get(cid)
        if b is None:
            b = self.cache[cid] = self.model.resting(self.g, self.st, cid, self.now)
        return b

    def seeds(self, docs: Sequence[str]) -> dict[str, float]:
        """Seed activations of a document ranking: ``1 / (1 + r/3)`` at rank ``r``, the first
        ``seeds`` visible ones."""
        return {
            f"d:{d}": 1.0 / (1 + r / 3)
            for r, d in enumerate(docs[: self.model.params.seeds])
            if self.g.visible(f"d:{d}", self.lens)
        }

    def spread(self, given: dict[str, float]) -> dict[str, float]:
        """One spreading pass from ``given`` (:func:`~liminalis.memory.spreading.spread`)."""
        return spread(
            self.g,
            given,
            self.lens,
            resting=self.resting,
            learned=self.learned,
            p=self.model.params.spread,
            carried=self.carried,
        )


@dataclass(slots=True)
class _Learning:
    """One turn's Hebbian updates: each learned edge strengthened in the scope and kept in
    ``changed`` (what the store saves and pruning spares)."""

    st: _Scope
    vis: str
    now: float
    base: BaseLevelModel
    hebbian: HebbianParams
    changed: dict[tuple[str, str], LearnedEdge] = field(default_factory=dict)

    def learn(self, src: str, dst: str, kind: str, a_i: float, a_j: float, eta: float) -> None:
        """Strengthen ``src → dst`` (:func:`~liminalis.memory.associations.strengthen`)."""
        e = self.st.edges.get((src, dst)) or LearnedEdge(
            src, dst, kind, 0.0, self.vis, self.base.empty(), self.now
        )
        self.st.edges[(src, dst)] = self.changed[(src, dst)] = strengthen(
            e,
            self.now,
            a_i,
            a_j,
            eta=eta,
            half_life_s=self.hebbian.half_life_s,
            model=self.base,
        )


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
        """Memory's ranking for one question (read-only; :meth:`record` writes the turn).

        Stages: the question's walk (:class:`_Walk`), its entities and carried-over context,
        then one orchestration (:meth:`_resonate` or :meth:`_loop`) and the fusion with the
        retrieval order (:meth:`_fuse`)."""
        t0 = time.perf_counter()
        lens = frozenset(lens)
        scope = scope or scope_of(lens)
        g = await self.graph(cat)
        st = await self._scope(cat.campaign, scope)
        now = self.now()
        walk = _Walk(self, g, st, lens, now, self._learned(g, st, lens, now))
        named = self._named(g, question, lens)
        context = self._context(walk, named)
        if self.params.orchestration == "resonance":
            total, mem, fused = self._resonate(walk, retrieved, dense, lexical, context, named)
        else:
            total, mem, fused = self._loop(walk, cat, retrieved, context, named)
        rec = Recall(
            ranked_doc_ids=fused,
            memory_docs=mem,
            activation=total,
            carried=walk.carried,
            entities=[e for e in named],
            ms=(time.perf_counter() - t0) * 1000,
        )
        self._pending[(cat.campaign, scope)] = rec
        return rec

    def _named(self, g: Graph, question: str, lens: frozenset[str]) -> list[str]:
        """The entity chunks the question names that ``lens`` may see."""
        return [
            f"e:{k}"
            for k in self.entities.named_in_question(question, g.vocabulary)
            if g.visible(f"e:{k}", lens)
        ]

    def _context(self, walk: _Walk, named: list[str]) -> dict[str, float]:
        """The turn context carried over from earlier turns, shared out among the named
        entities when ``share_context`` (``a / (1 + named_share · |named|)``): a question that
        names its subject leans less on the chat so far."""
        p = self.params
        context = {c: a for c, a in walk.st.context.items() if walk.g.visible(c, walk.lens)}
        if p.share_context and named:
            context = {c: a / (1 + p.named_share * len(named)) for c, a in context.items()}
        return context

    def _resonate(
        self,
        walk: _Walk,
        retrieved: Sequence[str],
        dense: Sequence[str],
        lexical: Sequence[str],
        context: dict[str, float],
        named: list[str],
    ) -> tuple[dict[str, float], dict[str, float], list[str]]:
        """Resonance: dense, lexical and entity seeds spread as independent passes, ranked by
        :func:`~liminalis.memory.spreading.resonance`; memory's score of the document at rank
        ``i`` is ``1/(rrf_k + i + 1)``. Returns (activation, memory scores, fused order)."""
        p = self.params
        passes = {
            "dense": walk.spread({**walk.seeds(dense)}),
            "lexical": walk.spread(walk.seeds(lexical or retrieved)),
            "entity": walk.spread({**context, **{e: 1.0 for e in named}}),
        }
        scores = {k: doc_scores(walk.g, v) for k, v in passes.items()}
        order = resonance(scores)
        total: dict[str, float] = {}
        for v in passes.values():
            for c, a in v.items():
                total[c] = total.get(c, 0.0) + a
        mem = {d: 1.0 / (p.rrf_k + i + 1) for i, d in enumerate(order)}
        return total, mem, self._fuse(retrieved, mem, rank_based=True)

    def _loop(
        self,
        walk: _Walk,
        cat: Catalog,
        retrieved: Sequence[str],
        context: dict[str, float],
        named: list[str],
    ) -> tuple[dict[str, float], dict[str, float], list[str]]:
        """The recall loop (the module docstring): context and retrieval seeds first, then up
        to ``cycles - 1`` rounds from the named entities and the entities of what was recalled,
        the activations adding up. Returns (activation, memory scores, fused order)."""
        p = self.params
        given = {**context, **walk.seeds(retrieved)}
        total = walk.spread(given)
        seen: set[str] = set()
        for cycle in range(1, p.cycles):
            src = (
                {e: 1.0 for e in named if e not in seen}
                if cycle == 1
                else self._recalled_entities(walk, cat, total, seen)
            )
            if not src:
                continue
            seen |= set(src)
            for c, a in walk.spread(src).items():
                total[c] = total.get(c, 0.0) + a
        # Memory's evidence is what spreading brought, not the retrieval seeds' own amounts
        # (retrieval already counts in the fused score's first factor).
        mem = doc_scores(
            walk.g,
            {c: a - given.get(c, 0.0) if p.arrivals_only else a for c, a in total.items()},
        )
        return total, mem, self._fuse(retrieved, mem, rank_based=False)

    def _recalled_entities(
        self, walk: _Walk, cat: Catalog, total: dict[str, float], seen: set[str]
    ) -> dict[str, float]:
        """Steps 3–4 of the loop: the entities named in the passages of the top recalled
        documents and not yet spread from, each ``min(1, 0.25 · mentions)``."""
        g = walk.g
        top = sorted(doc_scores(g, total).items(), key=lambda kv: -kv[1])[
            : self.params.recalled_docs
        ]
        src: dict[str, float] = {}
        for d, _ in top:
            for pid in cat.by_doc.get(d, ()):
                for k in g.mentions.get(f"p:{pid}", ()):
                    e = f"e:{k}"
                    if e not in seen and g.visible(e, walk.lens):
                        src[e] = src.get(e, 0.0) + 0.25
        return {e: min(1.0, a) for e, a in src.items()}

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
        """Write one answered turn: uses, Hebbian learning, the carried-over context.

        Stages: :meth:`_use` (base-level uses), :meth:`_learn_turn` (associations),
        :meth:`_carry_context` (the next turn's context), :meth:`_save_turn` (the store)."""
        lens = frozenset(lens)
        scope = scope or scope_of(lens)
        g = await self.graph(cat)
        st = await self._scope(cat.campaign, scope)
        rec = self._pending.pop((cat.campaign, scope), None)
        now = self.now()
        cited = [d for d in dict.fromkeys(cited) if g.visible(f"d:{d}", lens)]
        named = self._named(g, question, lens)
        st.turns += 1
        turn = f"q:{scope}:{int(now)}:{st.turns}"
        rows = self._use(g, st, [f"d:{d}" for d in cited] + named, now)
        vis = json.dumps([sorted(set(lens) | {GM})])
        learning = _Learning(st, vis, now, self.base, self.params.hebbian)
        self._learn_turn(learning, g, lens, turn, cited, named, rec)
        doomed = prune(
            [edge for k, edge in st.edges.items() if k not in learning.changed],
            now,
            self.params.hebbian,
        )
        for edge in doomed:
            st.edges.pop((edge.src, edge.dst), None)
        self._carry_context(st, rec, cited, named)
        await self._save_turn(cat, scope, turn, question, vis, rows, learning.changed, doomed)
        await self.store.save_context(cat.campaign, scope, st.context, now)

    def _use(
        self, g: Graph, st: _Scope, used: list[str], now: float
    ) -> list[tuple[str, str, str, list[float], int, float]]:
        """One base-level use of each chunk in ``used`` at ``now``; the activation rows to
        save."""
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
        return rows

    @staticmethod
    def _learn_turn(
        learning: _Learning,
        g: Graph,
        lens: frozenset[str],
        turn: str,
        cited: list[str],
        named: list[str],
        rec: Recall | None,
    ) -> None:
        """Hebbian learning of one turn: turn → cited document, question entity → cited
        document, and the 20 strongest links the recall's spreading carried activation along
        (each ``c / max c``), the last at ``eta_spread``."""
        h = learning.hebbian
        for d in cited:
            learning.learn(turn, f"d:{d}", "cited", 1.0, 1.0, h.eta)
            for e in named:
                learning.learn(e, f"d:{d}", "asked", 1.0, 1.0, h.eta)
        if rec is not None and rec.carried:
            top = max(rec.carried.values())
            for (s, d), c in sorted(rec.carried.items(), key=lambda kv: -kv[1])[:20]:
                if g.visible(s, lens) and g.visible(d, lens):
                    learning.learn(s, d, "spread", c / top, 1.0, h.eta_spread)

    def _carry_context(
        self, st: _Scope, rec: Recall | None, cited: list[str], named: list[str]
    ) -> None:
        """The turn context: last turn's context decayed, plus this turn's strongest entities
        and documents, ``ctx(c) ← decay · ctx(c) + (1 − decay) · fresh(c)``, cut to the
        ``context_size`` strongest above 0.01."""
        p = self.params
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

    async def _save_turn(
        self,
        cat: Catalog,
        scope: str,
        turn: str,
        question: str,
        vis: str,
        rows: list[tuple[str, str, str, list[float], int, float]],
        changed: dict[tuple[str, str], LearnedEdge],
        doomed: Sequence[LearnedEdge],
    ) -> None:
        """The turn, its uses and its learned and pruned edges into the store."""
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
