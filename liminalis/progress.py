"""How far an ingest has come: documents done, rate and time left, per campaign.

The indexer reports ``(done, total)`` after each batch; :class:`ProgressBoard` stamps those
reports with an injected clock and answers snapshots (:class:`IndexProgress`) for
``/campaign status``, the "still indexing" answer and ``serve``'s status file. Rate and time
left are the plain average over the embedding so far::

    rate = done / (now − embedding started)        eta = (total − done) / rate

A count is of files (a file's hidden sections make several stored views of it; a GM counts
files), never a title or a path, so a snapshot is safe to show a player.

The same snapshots drive a terminal: a board calls its watchers at every report, and
:class:`ProgressReporter` draws them on stderr for the long CLI jobs (``ingest``, ``import``,
``reindex``, ``pass run``), so what a CLI user sees and what chat says ("still indexing N of M")
are one set of numbers.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from liminalis.ports import Clock

__all__ = [
    "PROGRESS_MODES",
    "IndexProgress",
    "ProgressBoard",
    "ProgressMode",
    "ProgressReporter",
    "ProgressStream",
    "ProgressWatcher",
]

_log = logging.getLogger(__name__)

#: ``auto``: a line redrawn in place when the stream is a terminal, nothing otherwise;
#: ``json``: one JSON object a line per report, terminal or not; ``off``: nothing.
ProgressMode = Literal["auto", "json", "off"]
PROGRESS_MODES: tuple[ProgressMode, ...] = ("auto", "json", "off")


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
    #: The job the numbers count: ``ingest``, ``reindex``, ``pass <name>``.
    stage: str = "ingest"

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
            "stage": self.stage,
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
    stage: str = "ingest"
    done: int = 0
    total: int | None = None
    embedding_since: dt.datetime | None = None


#: Called with a fresh snapshot at every report a board takes.
ProgressWatcher = Callable[[IndexProgress], None]


class ProgressBoard:
    """The jobs running now, one entry per campaign, stamped with ``clock``; ``stage`` names
    what this board's jobs are (``ingest``, ``reindex``, ``pass <name>``)."""

    def __init__(self, clock: Clock, *, stage: str = "ingest") -> None:
        self._clock = clock
        self._stage = stage
        self._entries: dict[str, _Entry] = {}
        self._watchers: list[ProgressWatcher] = []

    def watch(self, watcher: ProgressWatcher) -> Callable[[], None]:
        """Call ``watcher`` with the snapshot after every report; returns the unsubscribe."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher) if watcher in self._watchers else None

    def start(self, campaign: str, *, rebuild: bool = False) -> None:
        self._entries[campaign] = _Entry(
            started_at=self._clock.now(), rebuild=rebuild, stage=self._stage
        )

    def update(self, campaign: str, done: int, total: int) -> None:
        """The indexer's report: ``done`` of ``total`` files embedded so far."""
        entry = self._entries.get(campaign)
        if entry is None:
            return
        if entry.embedding_since is None:
            entry.embedding_since = self._clock.now()
        entry.done, entry.total = done, total
        self._tell(campaign)

    def _tell(self, campaign: str) -> None:
        snapshot = self.get(campaign)
        for watcher in list(self._watchers):
            # A watcher is a display (a terminal that went away, a closed pipe): its failure
            # must never stop the job it watches.
            try:
                if snapshot is not None:
                    watcher(snapshot)
            except Exception:
                _log.debug("progress watcher %r failed", watcher, exc_info=True)

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
            stage=entry.stage,
        )

    def all(self) -> list[IndexProgress]:
        return [p for c in sorted(self._entries) if (p := self.get(c)) is not None]


class ProgressStream(Protocol):
    """Where a reporter writes: ``sys.stderr``, or a test's stand-in for a terminal."""

    def write(self, s: str, /) -> object: ...
    def flush(self) -> object: ...
    def isatty(self) -> bool: ...


@dataclass(slots=True)
class ProgressReporter:
    """Draws a board's snapshots on ``stream`` the way CLI users expect (a :data:`ProgressWatcher`).

    ``auto`` on a terminal redraws one line in place (``\\r`` and erase-to-end) and ends it
    when ``done`` reaches ``total``; ``auto`` off a terminal (a pipe, a log file, cron) writes
    nothing, so scripted output stays clean; ``json`` writes one object a line,
    ``{"done", "total", "rate", "eta_s", "stage", "campaign"}``, for a script to follow.
    Rate and ETA are :class:`IndexProgress`'s, so they come from the board's injected clock."""

    stream: ProgressStream
    mode: ProgressMode = "auto"
    _open_line: bool = field(default=False, init=False)

    def __call__(self, progress: IndexProgress) -> None:
        if self.mode == "json":
            self._json(progress)
        elif self.mode == "auto" and self.stream.isatty():
            self._line(progress)

    def _json(self, progress: IndexProgress) -> None:
        record = {
            "done": progress.done,
            "total": progress.total,
            "rate": progress.rate,
            "eta_s": progress.eta_s,
            "stage": progress.stage,
            "campaign": progress.campaign,
        }
        self.stream.write(json.dumps(record) + "\n")
        self.stream.flush()

    def _line(self, progress: IndexProgress) -> None:
        if progress.total == 0:
            return  # nothing to do: no line to draw or end
        finished = progress.total is not None and progress.done >= progress.total
        text = f"\r{progress.stage} {progress.campaign}: {progress.describe()}\x1b[K"
        self.stream.write(text + ("\n" if finished else ""))
        self.stream.flush()
        self._open_line = not finished

    def close(self) -> None:
        """End a line left open (a job stopped before its last report)."""
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False
