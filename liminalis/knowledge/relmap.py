"""A relationship map: the entities a lens knows and the relations between them, as graph data.

Built only from an :class:`~liminalis.knowledge.entities.EntityIndex` over the views the lens
reads (so a GM-only name is never a node of a player's map), then cut to a size a picture can
show. Without a centre, the ``max_nodes`` entities with most relations (ties: most mentions)
and the relations among them; with a centre, a breadth-first walk from it over relations taken
both ways, up to ``radius`` steps, nearest first. Only relations trusted enough to draw
(:func:`liminalis.knowledge.confidence.drawn`) are edges: a doubtful one stays for retrieval and
the GM's cards, not in the picture. Deterministic: the same facts, the same map.
Drawing it is an adapter's (:mod:`liminalis.adapters.relmap_png`).
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from liminalis.knowledge.confidence import drawn
from liminalis.knowledge.entities import EntityIndex
from liminalis.knowledge.facts import ViewFacts

__all__ = ["MapNode", "MapEdge", "RelationMap", "build_map"]


@dataclass(frozen=True, slots=True)
class MapNode:
    """An entity on the map."""

    key: str
    name: str
    type: str
    mentions: int


@dataclass(frozen=True, slots=True)
class MapEdge:
    """``src`` —kind→ ``dst`` (entity keys)."""

    src: str
    kind: str
    dst: str


@dataclass(frozen=True, slots=True)
class RelationMap:
    """Nodes and edges to draw; ``centre`` is the key of the entity it is centred on."""

    nodes: tuple[MapNode, ...]
    edges: tuple[MapEdge, ...]
    centre: str | None = None

    def name(self, key: str) -> str:
        return next((n.name for n in self.nodes if n.key == key), key)

    def lines(self) -> list[str]:
        """The map in words: one line per relation (what a platform without the picture gets)."""
        return [f"{self.name(e.src)} —{e.kind}→ {self.name(e.dst)}" for e in self.edges]


def build_map(
    views: Iterable[ViewFacts],
    *,
    centre: str | None = None,
    max_nodes: int = 30,
    radius: int = 2,
) -> RelationMap | None:
    """The map of the relations ``views`` state (see the module); ``None`` when ``centre`` names
    no entity of these views."""
    idx = EntityIndex(views)
    edges: dict[tuple[str, str, str], None] = {}
    for v in idx.views:
        for r in v.relations:
            src, dst = idx.resolve(r.src), idx.resolve(r.dst)
            if src and dst and src != dst and drawn(r):
                if "player" in (idx.entities[src].type, idx.entities[dst].type):
                    continue
                edges[(src, r.kind, dst)] = None
    neighbours: dict[str, set[str]] = defaultdict(set)
    for src, _, dst in edges:
        neighbours[src].add(dst)
        neighbours[dst].add(src)
    mentions = {k: len(e.mentions) for k, e in idx.entities.items()}
    start: str | None = None
    if centre is not None:
        found = idx.find(centre)
        if found is None:
            return None
        start = found.key
        order, seen = [start], {start: 0}
        queue = deque([start])
        while queue:
            here = queue.popleft()
            if seen[here] >= radius:
                continue
            near = sorted(neighbours[here] - seen.keys(), key=lambda k: (-mentions[k], k))
            for k in near:
                seen[k] = seen[here] + 1
                order.append(k)
                queue.append(k)
        kept = order[:max_nodes]
    else:
        degree = Counter({k: len(n) for k, n in neighbours.items()})
        kept = sorted(degree, key=lambda k: (-degree[k], -mentions[k], k))[:max_nodes]
    keep = set(kept)
    nodes = tuple(
        MapNode(k, idx.entities[k].name, idx.entities[k].type or "other", mentions[k]) for k in kept
    )
    shown = tuple(MapEdge(s, kind, d) for s, kind, d in edges if s in keep and d in keep)
    return RelationMap(nodes, tuple(sorted(shown, key=lambda e: (e.src, e.kind, e.dst))), start)
