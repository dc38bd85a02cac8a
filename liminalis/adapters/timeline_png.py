"""Draws a :class:`~liminalis.knowledge.timeline.Timeline` as a PNG (matplotlib).

Two lanes on one axis: sessions above it in campaign order, dated events below it in in-world
order, each a marker and its label. matplotlib draws with its Agg backend through a ``Figure``
of its own, never pyplot (no screen, no global state, nothing shared between threads); it is
blocking, so call it off the event loop (``asyncio.to_thread``). Every label drawn is also the
PNG's ``Description`` text, so a screen reader (and a test) reads what the picture shows.
"""

from __future__ import annotations

import io
import logging

from liminalis.knowledge.timeline import Timeline

__all__ = ["render_png", "MAX_DRAWN"]

_log = logging.getLogger(__name__)

#: The most sessions and events each lane draws (the text lists the rest).
MAX_DRAWN = 40
_SESSION = "#c8702a"
_EVENT = "#4a5fa8"


def _lane(ax: object, labels: list[str], *, y: float, colour: str, below: bool) -> None:
    """One lane of markers at height ``y`` with slanted labels above or below it."""
    xs = list(range(1, len(labels) + 1))
    ax.scatter(xs, [y] * len(xs), color=colour, s=60, zorder=3)  # type: ignore[attr-defined]
    for x, label in zip(xs, labels, strict=True):
        ax.annotate(  # type: ignore[attr-defined]
            label,
            (x, y),
            xytext=(0, -10 if below else 10),
            textcoords="offset points",
            rotation=-35 if below else 35,
            ha="left",
            va="top" if below else "bottom",
            fontsize=7,
        )


def render_png(timeline: Timeline, *, title: str = "", dpi: int = 110) -> bytes:
    """The timeline as PNG bytes (blocking)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sessions = [s.label() for s in timeline.sessions[:MAX_DRAWN]]
    events = [e.label() for e in timeline.events[:MAX_DRAWN]]
    width = max(8.0, min(24.0, 0.6 * max(len(sessions), len(events), 1) + 4))
    fig = Figure(figsize=(width, 7.5), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    if not sessions and not events:
        ax.text(0.5, 0.5, "No sessions or dated events known yet", ha="center", va="center")
    else:
        ax.axhline(0.0, color="#777777", linewidth=1)
        _lane(ax, sessions, y=0.15, colour=_SESSION, below=False)
        _lane(ax, events, y=-0.15, colour=_EVENT, below=True)
        ax.set_xlim(0, max(len(sessions), len(events)) + 4)
        ax.set_ylim(-1.2, 1.2)
    out = io.BytesIO()
    fig.savefig(
        out,
        format="png",
        bbox_inches="tight",
        metadata={"Title": title, "Description": "\n".join(sessions + events)},
    )
    return out.getvalue()
