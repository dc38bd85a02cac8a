"""Upload bytes on disk: a download streamed to a temporary file, and a saved upload written
whole or not at all.

A file a GM attaches may be megabytes: read whole into memory on the event loop it stalled
every other chat (a 10 MB upload: 5 s). The adapters stream a download in chunks to a temporary
file (:func:`stream_to_file`), refusing it past the cap before it is all read; the upload's
checks and writes then run in a worker (``bot.commands.upload``). Writing goes through
:class:`UploadWriter`, so a test can meet a full disk (``ENOSPC``) where no small disk can be
mounted.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import aiohttp

__all__ = [
    "DISK",
    "DiskWriter",
    "TooLarge",
    "UploadWriter",
    "discard",
    "discard_all",
    "download_to_file",
    "stream_to_file",
]

#: Bytes read from the platform at a time.
CHUNK = 64 * 1024


class UploadWriter(Protocol):
    """Writes one upload's bytes at ``path``, whole or not at all (raises ``OSError``)."""

    def write(self, path: Path, data: bytes) -> None: ...


class DiskWriter:
    """The real disk: the bytes go to ``.<name>.part`` beside ``path``, then replace it. A write
    that fails (a full disk) removes the part file, so no note cut short lies beside the uploads
    for the next tick to read."""

    def write(self, path: Path, data: bytes) -> None:
        tmp = path.with_name(f".{path.name}.part")
        try:
            self.write_part(tmp, data)
            tmp.replace(path)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise

    def write_part(self, tmp: Path, data: bytes) -> None:
        """The bytes to the part file, flushed to the disk: a full disk can refuse at the
        flush, and must be met here, not after the rename."""
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


#: The writer every upload uses unless a test gives another.
DISK = DiskWriter()


class TooLarge(Exception):
    """A download passed the cap its declared size did not show; nothing of it is kept."""


async def stream_to_file(chunks: AsyncIterator[bytes], max_bytes: int) -> Path:
    """Write ``chunks`` to a new temporary file; its path. Past ``max_bytes`` (a platform that
    declared less than it sends) raises :class:`TooLarge`; any failure removes the file.

    Memory holds one chunk at a time: ``O(CHUNK)``, not ``O(size)``."""
    fd, name = tempfile.mkstemp(prefix="liminalis-upload-", suffix=".part")
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            got = 0
            async for chunk in chunks:
                got += len(chunk)
                if got > max_bytes:
                    raise TooLarge(f"{got} bytes > {max_bytes}")
                f.write(chunk)
    except BaseException:
        discard(path)
        raise
    return path


def discard(path: Path) -> None:
    """Remove a streamed download once its upload is done with it (or failed)."""
    path.unlink(missing_ok=True)


def discard_all(paths: Sequence[Path]) -> None:
    """:func:`discard` each of ``paths``."""
    for path in paths:
        discard(path)


async def download_to_file(
    url: str,
    *,
    max_bytes: int,
    client_timeout: aiohttp.ClientTimeout,
    headers: Mapping[str, str] = {},
) -> Path:
    """GET ``url`` in chunks into a temporary file (:func:`stream_to_file`); its path.

    Raises ``aiohttp.ClientError`` or ``TimeoutError`` for a failed download, :class:`TooLarge`
    past ``max_bytes``, ``OSError`` where the temporary folder cannot hold it."""
    async with (
        aiohttp.ClientSession(timeout=client_timeout) as session,
        session.get(url, headers=dict(headers)) as resp,
    ):
        resp.raise_for_status()
        return await stream_to_file(resp.content.iter_chunked(CHUNK), max_bytes)
