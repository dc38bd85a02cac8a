"""An Obsidian vault or a folder of notes uploaded as one ``.zip``, read without trusting it.

The archive is refused whole (a :class:`~liminalis.ingest.formats.LoadError` whose reason is
fixed text) when it is not a zip, holds more members or unpacks to more bytes than
:class:`~liminalis.ingest.formats.ZipLimits` allow, is compressed suspiciously well (a zip bomb),
or names a member outside itself (``../``, an absolute path, a drive letter: a path traversal).
Only declared sizes are read before refusing, and :mod:`zipfile` never inflates a member past
its declared size, so a lying header cannot make it read more.

Members are skipped, each with a reason for the report, when they are symbolic links (never
followed), encrypted, damaged, over the per-file limit, in a hidden folder (``.obsidian/`` is
Obsidian's settings, ``.trash/`` its bin) or attachments the campaign does not read (images,
audio, canvases).
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from liminalis.ingest.formats import LoadError, ZipLimits, check_zip
from liminalis.lens import GM, NOT_GM, PLAYERS
from liminalis.text import clean_text

__all__ = ["Member", "Vault", "read_vault", "may_alias", "link_targets"]


@dataclass(frozen=True, slots=True)
class Member:
    """One file of the archive: its path inside it (POSIX, cleaned) and its bytes."""

    path: str
    data: bytes


@dataclass(slots=True)
class Vault:
    """What an archive holds: the files to ingest and ``(path, reason)`` of those skipped."""

    members: list[Member] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


_DRIVE = re.compile(r"[A-Za-z]:")


def _parts(name: str) -> list[str] | None:
    """A member name's parts (``./`` and ``//`` dropped), or ``None`` when it points outside
    the archive: absolute, a drive letter, or a ``..``."""
    name = clean_text(name).replace("\\", "/")
    if name.startswith("/") or _DRIVE.match(name):
        return None
    parts = [p for p in name.split("/") if p not in {"", "."}]
    return None if ".." in parts else parts


def read_vault(
    data: bytes,
    *,
    suffixes: tuple[str, ...],
    max_member_bytes: int,
    limits: ZipLimits = ZipLimits(),
) -> Vault:
    """The members of a zip archive worth ingesting (raises :class:`LoadError`)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except Exception:  # noqa: BLE001 (zipfile raises many kinds on a hostile archive)
        raise LoadError("not a readable zip archive") from None
    vault = Vault()
    with zf:
        check_zip(zf, limits)
        infos = zf.infolist()
        named = [(info, _parts(info.filename)) for info in infos]
        if any(parts is None for _, parts in named):
            raise LoadError(
                "the archive names a file outside itself (an absolute path or ..): refused"
            )
        hidden: dict[str, int] = {}
        for info, found in named:
            if info.is_dir() or not found:
                continue
            parts = found
            name = "/".join(parts)
            top_hidden = next((p for p in parts[:-1] if p.startswith(".") or p == "__MACOSX"), None)
            if top_hidden is not None:
                hidden[top_hidden] = hidden.get(top_hidden, 0) + 1
                continue
            if parts[-1].startswith("."):
                continue  # .DS_Store and the like: nobody's notes
            if stat.S_ISLNK(info.external_attr >> 16):
                vault.skipped.append((name, "a symbolic link (never followed)"))
                continue
            if info.flag_bits & 0x1:
                vault.skipped.append((name, "encrypted in the archive"))
                continue
            suffix = PurePosixPath(name).suffix.lower()
            if suffix not in suffixes:
                vault.skipped.append(
                    (name, f"an attachment ({suffix or 'no suffix'}): only notes are read")
                )
                continue
            if info.file_size > max_member_bytes:
                vault.skipped.append((name, f"file too large (limit {max_member_bytes:,} bytes)"))
                continue
            try:
                body = zf.read(info)
            except Exception:  # noqa: BLE001 (bad CRC, bad deflate data, an unknown method)
                vault.skipped.append((name, "damaged in the archive"))
                continue
            vault.members.append(Member(name, body))
        for folder, count in sorted(hidden.items()):
            why = "Obsidian's settings" if folder == ".obsidian" else "a hidden folder"
            vault.skipped.append((f"{folder}/", f"{why}, skipped ({count:,} files)"))
    return vault


def may_alias(target: frozenset[str], link: frozenset[str]) -> bool:
    """Whether ``[[Target|alias]]`` in text read by ``link`` may give ``alias`` to a document read
    by ``target``: only when everyone who reads the target read the link. A GM-only note's
    ``[[Duke|the traitor]]`` must not name the players' Duke page so."""
    readers = set(target) - {GM, NOT_GM}
    linkers = set(link) - {GM, NOT_GM}
    if not readers or PLAYERS in linkers:
        return True
    return PLAYERS not in readers and readers <= linkers


def link_targets(paths: dict[str, str], suffixes: tuple[str, ...]) -> dict[str, str]:
    """How Obsidian resolves ``[[name]]``, for ``paths`` (a note's path in the archive → the
    key to return): by note name (file stem) or by its path from any folder down, the suffix
    optional, without regard to case; the shortest path wins a name two notes share."""
    out: dict[str, str] = {}
    for path in sorted(paths, key=lambda p: (p.count("/"), p)):
        parts = path.split("/")
        for i in range(len(parts)):
            tail = "/".join(parts[i:])
            p = PurePosixPath(tail)
            out.setdefault(tail.lower(), paths[path])
            if p.suffix.lower() in suffixes:
                out.setdefault(str(p.with_suffix("")).lower(), paths[path])
    return out
