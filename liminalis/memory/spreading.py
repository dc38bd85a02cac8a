"""Spreading activation over the memory graph, gated by resting activation.

ACT-R's spreading (Anderson et al. 2004, *An integrated theory of the mind*), with the fan
effect setting each link's strength::

    A_i = B_i + Σ_j W_j S_ji,      S_ji = S − ln(fan_j)

Here a walk runs ``steps`` rounds from source amounts ``a_j``. Each round, the contribution a
link ``j → i`` (weight ``w_ji``, seeded plus learned) carries to ``i`` is

    c_ji = a_j · w_ji · max(0, S − ln fan_j)/S · g(B_i)

with the *gate* ``g(B) = g₀ + (1 − g₀) · σ((B − B₀)/τ)``: what arrives at a chunk is multiplied
by how warm it already is, so two campaigns with the same documents and different histories
walk to different material. Arrivals at one target add with diminishing returns (sorted
descending, the k-th counts ``ρ^k``), so a hub cannot win by volume. Walls: a chunk or link the
lens may not see never seeds, relays or receives activation.

:func:`resonance` runs independent passes (dense, lexical, entity seeds) and ranks material
reached by two or more above single-pass material; type weights rank passages and summaries
above entities, which are never rendered (they are how the walk travels).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from liminalis.memory.graph import Graph

__all__ = ["SpreadParams", "doc_scores", "gate", "resonance", "spread"]

#: How much each kind of chunk counts towards a document's score.
TYPE_WEIGHTS = {
    "passage": 1.0,
    "summary": 0.9,
    "fact": 1.0,
    "entity": 0.0,
    "type": 0.0,
    "turn": 0.0,
}


@dataclass(frozen=True, slots=True)
class SpreadParams:
    steps: int = 2
    #: ``S`` of the fan term, as ``ln`` of this (a node linked to this many chunks carries nothing).
    fan_limit: float = 400.0
    rho: float = 0.5
    gate_floor: float = 0.6
    gate_mid: float = -2.0
    gate_width: float = 1.0
    min_amount: float = 2e-3
    max_frontier: int = 150


def gate(b: float, p: SpreadParams) -> float:
    """``g(B)``: the share of an arrival a chunk with resting activation ``B`` takes in."""
    if b == -math.inf:
        return p.gate_floor
    return p.gate_floor + (1 - p.gate_floor) / (1 + math.exp(-(b - p.gate_mid) / p.gate_width))


def spread(
    graph: Graph,
    sources: Mapping[str, float],
    lens: frozenset[str],
    *,
    resting: Callable[[str], float],
    learned: Mapping[str, list[tuple[str, float]]] | None = None,
    p: SpreadParams = SpreadParams(),
    carried: dict[tuple[str, str], float] | None = None,
) -> dict[str, float]:
    """Total activation each chunk received from ``sources`` (sources included at their amount).

    ``learned`` links must already be filtered for ``lens`` (both ends visible); ``carried``,
    when given, collects the amount each link carried (for Hebbian learning).
    """
    S = math.log(p.fan_limit)
    lens = frozenset(lens)
    adj = graph.adjacency(lens)
    learned = learned or {}
    total: dict[str, float] = {c: a for c, a in sources.items() if graph.visible(c, lens)}
    frontier = dict(total)
    gates: dict[str, float] = {}
    for _ in range(p.steps):
        arrivals: dict[str, list[float]] = {}
        top = sorted(frontier.items(), key=lambda kv: -kv[1])[: p.max_frontier]
        for src, amount in top:
            outs = adj.get(src, [])
            extra = learned.get(src, ())
            # The fan counts every link of the chunk, walkable by this lens or not: the strength
            # of a link must not tell a player how much GM material hangs off a node.
            fan = len(graph.out.get(src, ())) + len(extra)
            strength = max(0.0, S - math.log(max(1, fan))) / S
            if amount * strength < p.min_amount:  # nothing it sends would count (weights ≤ 1)
                continue
            for dst, w in (*outs, *extra):
                g = gates.get(dst)
                if g is None:
                    g = gates[dst] = gate(resting(dst), p)
                c = amount * w * strength * g
                if c >= p.min_amount:
                    arrivals.setdefault(dst, []).append(c)
                    if carried is not None:
                        carried[(src, dst)] = carried.get((src, dst), 0.0) + c
        frontier = {}
        for dst, cs in arrivals.items():
            cs.sort(reverse=True)
            got = sum(c * p.rho**k for k, c in enumerate(cs))
            frontier[dst] = got
            total[dst] = total.get(dst, 0.0) + got
        if not frontier:
            break
    return total


def doc_scores(graph: Graph, activation: Mapping[str, float]) -> dict[str, float]:
    """Each document's score: its best chunk's activation times the chunk kind's weight."""
    out: dict[str, float] = {}
    for cid, a in activation.items():
        c = graph.chunks.get(cid)
        if c is None or c.doc_id is None:
            continue
        s = a * TYPE_WEIGHTS.get(c.kind, 0.0)
        if s > out.get(c.doc_id, 0.0):
            out[c.doc_id] = s
    return out


def resonance(passes: Mapping[str, Mapping[str, float]], *, min_share: float = 0.05) -> list[str]:
    """Documents reached by two or more passes first (by summed score), then single-pass ones.

    ``passes`` maps a pass name to its document scores; a document counts as reached by a pass
    when its score there is at least ``min_share`` of that pass's best."""
    reached: dict[str, int] = {}
    summed: dict[str, float] = {}
    for scores in passes.values():
        best = max(scores.values(), default=0.0)
        for d, s in scores.items():
            if best > 0 and s >= min_share * best:
                reached[d] = reached.get(d, 0) + 1
                summed[d] = summed.get(d, 0.0) + s / best
    return sorted(summed, key=lambda d: (-(reached[d] >= 2), -summed[d]))
