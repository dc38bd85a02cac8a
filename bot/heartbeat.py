"""``serve``'s status file: which platforms are connected, and how far indexing has come.

``serve`` writes ``<data dir>/serve-status.json`` when it starts, every ``interval_s`` while it
runs and once more when it stops; ``liminalis health`` reads it. A file older than
:data:`STALE_AFTER` intervals means a hung or killed ``serve`` (nothing else can tell a
health check that the event loop stopped turning: the process is still there). Written
atomically (a temporary file renamed over it), so a reader never sees half of one.

Example::

    {"state": "running", "written_at": "2026-01-01T00:00:30+00:00", "interval_s": 30.0,
     "pid": 7, "platforms": {"discord": true, "slack": false},
     "indexing": [{"campaign": "emberfall", "done": 12, "total": 40, ...}]}
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from liminalis.ports import Clock
from liminalis.progress import IndexProgress

__all__ = [
    "STATUS_FILE",
    "STALE_AFTER",
    "Heartbeat",
    "ServeStatus",
    "read_status",
    "status_path",
    "judge",
]

_log = logging.getLogger(__name__)

STATUS_FILE = "serve-status.json"
#: Intervals without a write after which ``serve`` counts as hung or gone.
STALE_AFTER = 3
DEFAULT_INTERVAL_S = 30.0

#: Answers whether one platform is connected now.
Probe = Callable[[], Awaitable[bool]]


def status_path(data_dir: Path) -> Path:
    return data_dir / STATUS_FILE


@dataclass(frozen=True, slots=True)
class ServeStatus:
    """One write of the status file."""

    state: str  # starting | running | stopped
    written_at: dt.datetime
    interval_s: float
    pid: int
    platforms: dict[str, bool] = field(default_factory=dict)
    indexing: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {
                "state": self.state,
                "written_at": self.written_at.isoformat(),
                "interval_s": self.interval_s,
                "pid": self.pid,
                "platforms": self.platforms,
                "indexing": list(self.indexing),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> ServeStatus:
        """Raises ``ValueError`` (``KeyError``, ``TypeError``) on a file that is not one."""
        raw = json.loads(text)
        return cls(
            state=str(raw["state"]),
            written_at=dt.datetime.fromisoformat(raw["written_at"]),
            interval_s=float(raw["interval_s"]),
            pid=int(raw["pid"]),
            platforms={str(k): bool(v) for k, v in dict(raw.get("platforms", {})).items()},
            indexing=tuple(dict(x) for x in raw.get("indexing", [])),
        )


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Heartbeat:
    """Writes the status file from ``start`` to ``stop`` (``async with``), every ``interval_s``.

    Args:
        path: the status file (:func:`status_path`).
        clock: stamps each write; tests freeze it.
        platforms: name → a probe answering whether that platform is connected now.
        indexing: the ingests running now (``Engine.indexing``).
        interval_s: seconds between writes (written into the file, for its reader).
        sleep: waits between writes (``asyncio.sleep``; tests drive :meth:`beat` directly).
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Clock,
        platforms: Mapping[str, Probe] | None = None,
        indexing: Callable[[], list[IndexProgress]] | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.path = path
        self.clock = clock
        self.platforms = dict(platforms or {})
        self.indexing = indexing
        self.interval_s = interval_s
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    async def _connected(self, name: str, probe: Probe) -> bool:
        try:
            return bool(await probe())
        except Exception:
            _log.warning(
                "status probe for %s failed; reported as not connected", name, exc_info=True
            )
            return False

    async def beat(self, state: str = "running") -> ServeStatus:
        """Write the status file once, now; a failed write is logged (``health`` then finds the
        file stale), never raised: the bot keeps serving."""
        status = ServeStatus(
            state=state,
            written_at=self.clock.now(),
            interval_s=self.interval_s,
            pid=os.getpid(),
            platforms={n: await self._connected(n, p) for n, p in self.platforms.items()},
            indexing=tuple(p.as_dict() for p in (self.indexing() if self.indexing else [])),
        )
        try:
            await asyncio.to_thread(_write_atomic, self.path, status.to_json())
        except OSError as exc:
            _log.warning("status file %s not written: %s", self.path, exc)
        return status

    async def _run(self) -> None:
        while True:
            await self._sleep(self.interval_s)
            await self.beat()

    async def __aenter__(self) -> Heartbeat:
        await self.beat()
        self._task = asyncio.create_task(self._run(), name="heartbeat")
        self._task.add_done_callback(_log_failure)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.beat("stopped")


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        _log.error("heartbeat stopped; `liminalis health` will find it stale", exc_info=exc)


def read_status(path: Path) -> ServeStatus | None:
    """The status file at ``path``; ``None`` when there is none. Raises ``ValueError`` when it
    is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return ServeStatus.from_json(text)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path} is not a status file ({exc})") from exc


def judge(status: ServeStatus | None, *, now: dt.datetime, where: Path) -> list[str]:
    """The reasons ``serve`` is not healthy, one line each (``[]``: it is). ``where``: the
    status file, named when there is none."""
    if status is None:
        return [f"serve: not running (no status file at {where})"]
    if status.state == "stopped":
        return [f"serve: stopped at {status.written_at:%Y-%m-%d %H:%M:%S %Z}"]
    if status.state == "starting":  # written once, before the models load: never "stale"
        return [
            f"serve: starting since {status.written_at:%Y-%m-%d %H:%M:%S %Z} (models loading, "
            "platforms not connected yet)"
        ]
    age = (now - status.written_at).total_seconds()
    limit = STALE_AFTER * status.interval_s
    if age > limit:
        return [
            f"serve: status last written {age:.0f} s ago (stale after {limit:.0f} s): "
            f"serve (pid {status.pid}) is hung or gone"
        ]
    problems = [f"{name}: not connected" for name, up in sorted(status.platforms.items()) if not up]
    if status.state == "running" and not status.platforms:
        problems.append("serve: no platform running")
    return problems
