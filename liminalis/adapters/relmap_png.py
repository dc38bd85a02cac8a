"""Draws a :class:`~liminalis.knowledge.relmap.RelationMap` as a PNG (networkx + matplotlib).

The layout is networkx's spring layout (Fruchterman–Reingold) with a fixed seed, so the same
map draws the same picture; a centred map puts its centre in the middle (``fixed``). matplotlib
draws with its Agg backend through a ``Figure`` of its own, never pyplot, so there is no screen,
no global state and nothing shared between threads; it is blocking, so call it off the event
loop (``asyncio.to_thread``). Nodes are coloured by entity type and labelled by name, edges by
relation kind.
"""

from __future__ import annotations

import io
import logging

from liminalis.knowledge.relmap import RelationMap

__all__ = ["render_png"]

_log = logging.getLogger(__name__)

_COLOURS = {
    "character": "#c8702a",
    "place": "#3b7a57",
    "faction": "#4a5fa8",
    "item": "#a8864a",
    "deity": "#8a4aa8",
    "creature": "#a84a5a",
    "event": "#4aa0a8",
}


def render_png(rel: RelationMap, *, title: str = "", dpi: int = 110) -> bytes:
    """The map as PNG bytes (blocking)."""
    import networkx as nx
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    graph = nx.DiGraph()
    for n in rel.nodes:
        graph.add_node(n.key)
    for e in rel.edges:
        graph.add_edge(e.src, e.dst, kind=e.kind)
    size = max(6.0, min(16.0, 2.2 * len(rel.nodes) ** 0.5 + 4))
    fig = Figure(figsize=(size, size * 0.75), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    if graph.number_of_nodes() == 0:
        ax.text(0.5, 0.5, "No relations known yet", ha="center", va="center")
    else:
        fixed = None
        initial = None
        if rel.centre is not None and rel.centre in graph:
            initial = {rel.centre: (0.0, 0.0)}
            fixed = [rel.centre]
        pos = nx.spring_layout(
            graph, seed=7, k=1.6 / max(1, len(rel.nodes)) ** 0.5, pos=initial, fixed=fixed
        )
        by_key = {n.key: n for n in rel.nodes}
        sizes = [300 + 40 * min(by_key[k].mentions, 40) for k in graph.nodes]
        colours = [_COLOURS.get(by_key[k].type, "#888888") for k in graph.nodes]
        nx.draw_networkx_edges(
            graph, pos, ax=ax, edge_color="#777777", arrows=True, arrowsize=12, node_size=sizes
        )
        nx.draw_networkx_nodes(
            graph,
            pos,
            ax=ax,
            node_color=colours,
            node_size=sizes,
            alpha=0.9,
            edgecolors=["#111111" if k == rel.centre else "none" for k in graph.nodes],
            linewidths=2.0,
        )
        nx.draw_networkx_labels(
            graph, pos, ax=ax, labels={k: by_key[k].name for k in graph.nodes}, font_size=8
        )
        kinds: dict[tuple[str, str], list[str]] = {}
        for e in rel.edges:
            kinds.setdefault((e.src, e.dst), []).append(e.kind)
        nx.draw_networkx_edge_labels(
            graph,
            pos,
            ax=ax,
            edge_labels={pair: ", ".join(k) for pair, k in kinds.items()},
            font_size=6,
            font_color="#444444",
        )
        types = sorted({by_key[k].type for k in graph.nodes})
        ax.legend(
            handles=[
                Line2D([], [], marker="o", linestyle="", color=_COLOURS.get(t, "#888888"), label=t)
                for t in types
            ],
            loc="lower right",
            fontsize=7,
            frameon=False,
        )
    out = io.BytesIO()
    fig.savefig(out, format="png", bbox_inches="tight")
    return out.getvalue()
