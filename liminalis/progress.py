"""How far an ingest has come: documents done, rate and time left, per campaign.

The indexer reports ``(done, total)`` after each batch; :class:`ProgressBoard` stamps those
reports with an injected clock and answers snapshots (:class:`IndexProgress`) for
``/campaign status``, the "still indexing" answer and ``serve``'s status file. Rate and time
left are the plain average over the embedding so far::

    rate = done / (now − embedding started)        eta = (total − done) / rate

A count is of files (a file's hidden sections make several stored views of it; a GM counts
files), never a title or a path, so a snapshot is safe to show a player.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from liminalis.ports import Clock

__all__ = ["IndexProgress", "ProgressBoard"]


@dataclass(frozen=True, slots=True)
class IndexProgress:
    """One campaign's ingest at ``now``: ``done`` of ``total`` files embedded (``total`` is
    ``None`` while its files are still being read)."""

    campaign: str
    done: int
    total: int | None
    started_at: dt.datetime
    embedding_since: dt.datetime | None
    now: dt.datetime
    #: A re-embed of a campaign indexed before (a new embedder), not its first index.
    rebuild: bool = False

    @property
    def rate(self) -> float | None:
        """Files a second since embedding started; ``None`` before the first is done."""
        if self.embedding_since is None or self.done <= 0:
            return None
        elapsed = (self.now - self.embedding_since).total_seconds()
        return self.done / elapsed if elapsed > 0 else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; ``None`` while it is unknown."""
        rate = self.rate
        if rate is None or self.total is None:
            return None
        return max(self.total - self.done, 0) / rate

    def describe(self) -> str:
        """``12 of 40 documents, 2.0 a second, about 14 s left`` (or ``reading its files``)."""
        if self.total is None:
            return "reading its files"
        text = f"{self.done} of {self.total} documents"
        if (rate := self.rate) is not None:
            text += f", {rate:.1f} a second"
        if (eta := self.eta_s) is not None:
            text += f", about {_duration(eta)} left"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "campaign": self.campaign,
            "done": self.done,
            "total": self.total,
            "rate": self.rate,
            "eta_s": self.eta_s,
            "started_at": self.started_at.isoformat(),
            "rebuild": self.rebuild,
        }


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(round(seconds), 1)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(slots=True)
class _Entry:
    started_at: dt.datetime
    rebuild: bool = False
    done: int = 0
    total: int | None = None
    embedding_since: dt.datetime | None = None


class ProgressBoard:
    """The ingests running now, one entry per campaign, stamped with ``clock``."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._entries: dict[str, _Entry] = {}

    def start(self, campaign: str, *, rebuild: bool = False) -> None:
        self._entries[campaign] = _Entry(started_at=self._clock.now(), rebuild=rebuild)

    def update(self, campaign: str, done: int, total: int) -> None:
        """The indexer's report: ``done`` of ``total`` files embedded so far."""
        entry = self._entries.get(campaign)
        if entry is None:
            return
        if entry.embedding_since is None:
            entry.embedding_since = self._clock.now()
        entry.done, entry.total = done, total

    def finish(self, campaign: str) -> None:
        self._entries.pop(campaign, None)

    def get(self, campaign: str) -> IndexProgress | None:
        entry = self._entries.get(campaign)
        if entry is None:
            return None
        return IndexProgress(
            campaign=campaign,
            done=entry.done,
            total=entry.total,
            started_at=entry.started_at,
            embedding_since=entry.embedding_since,
            now=self._clock.now(),
            rebuild=entry.rebuild,
        )

    def all(self) -> list[IndexProgress]:
        return [p for c in sorted(self._entries) if (p := self.get(c)) is not None]
