"""Campaign export and import: one zip file a host keeps as a backup or moves to another bot.

Layout (format 1)::

    manifest.json           format, version, schema (user_version), campaign, embedder, index
                            profile, and counts of what follows
    tables/<table>.jsonl    one JSON object per row of each of the campaign's tables
                            (:mod:`liminalis.store.transfer` decides which: not what is derived
                            from the documents, nor chat memory); bytes as {"$b64": …}
    embeddings.jsonl        {"hash", "vector"} for every text the documents embed, so that an
                            import with the same embedder embeds nothing
    files/campaign/<path>   the campaign folder, campaign.toml included (dot files left out,
                            as ingest leaves them out, but for the sidecar that keeps a PDF's or
                            Word document's upload options, bound to its bytes)
    files/uploads/<path>    the campaign's uploads, sidecars included

An import reads and checks the whole archive before it writes anything: another format, a newer
format version or a newer schema is refused with a message that says so, and so is a member
that is absolute, climbs out (``..``), is a link, lies outside those folders or is a dot file
other than a sidecar. A sidecar comes in only beside the file it was written for, holding that
file's sha256 (one that does not fit is left out and named: its file is GM-only). Then the files
go into a new campaign folder, the rows into the store (one transaction) and the vectors into
the embedding cache, and the campaign is indexed from its files: the vector index is derived,
rebuilt here from the cache when the embedder is the archive's, re-embedded when it is not.

An archive is untrusted input. Only the files (each with the visibility it declares) and the GM's
decisions (pins, links, budgets, pass definitions, …) come in; rows derived from the documents
(documents, passages, knowledge, pass facts, the memory graph) and remembered text (chat memory,
answer cards) are left out even where an archive holds them, since a forged one could claim
players' visibility for GM text. The ingest derives the documents again, and the passes the
knowledge (at once where they listen to ingests, else at the next run).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import secrets
import shutil
import stat
import zipfile
import zlib
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import numpy as np

from liminalis.campaign import validate_slug
from liminalis.errors import InvalidInput
from liminalis.ingest.loaders import sidecar_fits, sidecar_of, sidecar_source
from liminalis.store.schema import LATEST

if TYPE_CHECKING:
    from liminalis.campaign import CampaignConfig
    from liminalis.ingest.indexer import Indexer
    from liminalis.ports import Embedder
    from liminalis.store.sqlite import Database
    from liminalis.store.transfer import Imported
    from liminalis.types import IngestReport

#: Re-indexes an imported campaign from its files (the Engine's ``ingest``, whose passes
#: listening to ingests derive the knowledge again).
Reindex = Callable[[str], Awaitable["IngestReport"]]

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ExportReport",
    "ImportReport",
    "ImportTarget",
    "export_campaign",
    "import_campaign",
]

_log = logging.getLogger(__name__)

FORMAT = "liminalis-campaign"
#: Bumped when a reader of the previous version could not read the new one.
FORMAT_VERSION = 1
#: The most an import unpacks (declared sizes, checked before anything is written).
MAX_IMPORT_BYTES = 4 * 1024**3
_MANIFEST = "manifest.json"
_EMBEDDINGS = "embeddings.jsonl"
_TABLE = re.compile(r"^tables/([a-z_][a-z0-9_]*)\.jsonl$")
_FILE_ROOTS = ("campaign", "uploads")
#: The most a sidecar (a few lines of YAML) may hold.
_MAX_SIDECAR = 64 * 1024


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What an export wrote."""

    campaign: str
    path: Path
    rows: dict[str, int]
    embeddings: int
    files: int
    #: Documents of the campaign (their rows are not exported: an import indexes the files).
    documents: int = 0
    #: Files left out, with why (a name another system could not unpack safely).
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import wrote, and what its re-index had to embed."""

    campaign: str
    rows: dict[str, int]
    files: int
    embeddings: int
    #: The archive's embedder is this bot's: the re-index took every vector from the cache.
    same_embedder: bool
    #: Texts the re-index embedded (0 when ``same_embedder``).
    embedded: int
    ignored: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: Documents the import indexed from the archive's files.
    documents: int = 0


# -- export ------------------------------------------------------------------------------------


def _encode(value: object) -> object:
    if isinstance(value, bytes):
        return {"$b64": base64.b64encode(value).decode("ascii")}
    raise TypeError(f"cannot export a {type(value).__name__}")


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: base64.b64decode(v["$b64"]) if isinstance(v, dict) and "$b64" in v else v
        for k, v in row.items()
    }


def _safe_member(name: str) -> PurePosixPath | None:
    """``name`` as a relative path every system unpacks inside its folder, else ``None``."""
    if not name or "\\" in name or "\x00" in name or name.startswith("/"):
        return None
    path = PurePosixPath(name)
    if any(part in {"", ".", ".."} or ":" in part for part in path.parts):
        return None
    return path


def _files(root: Path) -> Iterator[tuple[Path, str]]:
    """The files under ``root`` as ingest walks them (dot names left out, linked files read),
    each PDF or Word document followed by its sidecar where that fits its bytes: a binary
    upload's visibility is kept there, and without it the file would come back GM-only."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".") or not path.is_file():
                continue
            yield path, path.relative_to(root).as_posix()
            side = sidecar_of(path)
            if sidecar_source(side.name) is None or not side.is_file():
                continue
            try:
                # A stale sidecar (its file replaced since) says nothing here either.
                if side.stat().st_size <= _MAX_SIDECAR and sidecar_fits(
                    side.read_bytes(), path.read_bytes()
                ):
                    yield side, side.relative_to(root).as_posix()
            except OSError:
                continue


def _write_archive(
    out: Path,
    manifest: dict[str, Any],
    tables: dict[str, list[dict[str, Any]]],
    vectors: dict[str, np.ndarray],
    roots: list[tuple[str, Path]],
) -> tuple[int, list[str]]:
    """Write the zip beside ``out`` and move it into place; returns (files, skipped)."""
    part = out.with_name(f".{out.name}.{secrets.token_hex(4)}.part")
    files, skipped = 0, []
    counts: dict[str, int] = {}
    try:
        with zipfile.ZipFile(part, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for table, rows in tables.items():
                zf.writestr(
                    f"tables/{table}.jsonl",
                    "".join(
                        json.dumps(r, ensure_ascii=False, default=_encode) + "\n" for r in rows
                    ),
                )
            zf.writestr(
                _EMBEDDINGS,
                "".join(
                    json.dumps(
                        {
                            "hash": h,
                            "vector": base64.b64encode(
                                np.asarray(v, dtype=np.float32).tobytes()
                            ).decode("ascii"),
                        }
                    )
                    + "\n"
                    for h, v in sorted(vectors.items())
                ),
            )
            for label, root in roots:
                counts[label] = 0
                for path, rel in _files(root):
                    if _safe_member(rel) is None:
                        skipped.append(f"{label}/{rel}: a name that cannot be unpacked safely")
                        continue
                    zf.write(path, f"files/{label}/{rel}")
                    counts[label] += 1
                    files += 1
            manifest["files"] = counts
            zf.writestr(_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
    return files, skipped


async def export_campaign(
    config: CampaignConfig, out: Path, *, db: Database, indexer: Indexer, embedder: Embedder
) -> ExportReport:
    """Write the campaign of ``config`` (its files, config, pins, links, budgets, campaign
    memory, pass definitions and history, the embedding cache of its texts) to the zip file
    ``out``; what an import derives again from the files is left out. It is handed the store,
    indexer and embedder rather than the Engine, so it reads only what an export holds."""
    slug = config.slug
    tables = await db.transfer.export_rows(slug)
    model = embedder.model_id
    hashes = await indexer.embedded_hashes(slug)
    vectors = await db.embeddings.get(model, sorted(hashes))
    roots = [("campaign", config.root)]
    if config.uploads_root is not None and config.uploads_root.is_dir():  # noqa: ASYNC240
        roots.append(("uploads", config.uploads_root))
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "schema": await db.version(),
        "campaign": slug,
        "name": config.name,
        "embedder": model,
        "profile": indexer.profile(),
        "tables": {t: len(rows) for t, rows in tables.items()},
        "embeddings": len(vectors),
    }
    files, skipped = await asyncio.to_thread(_write_archive, out, manifest, tables, vectors, roots)
    return ExportReport(
        campaign=slug,
        path=out,
        rows=manifest["tables"],
        embeddings=len(vectors),
        files=files,
        documents=len(await db.documents.hashes(slug)),
        skipped=tuple(skipped),
    )


# -- import ------------------------------------------------------------------------------------


def _refuse(detail: str, message: str) -> InvalidInput:
    return InvalidInput(detail, user_message=message)


@dataclass(slots=True)
class _Archive:
    manifest: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]]
    vectors: list[tuple[str, np.ndarray]]
    files: dict[str, list[tuple[zipfile.ZipInfo, PurePosixPath]]]
    #: Sidecars left out, with why.
    dropped: list[str] = field(default_factory=list)


def _bound_sidecars(
    zf: zipfile.ZipFile,
    label: str,
    files: list[tuple[zipfile.ZipInfo, PurePosixPath]],
    sidecars: list[tuple[zipfile.ZipInfo, PurePosixPath]],
) -> tuple[list[tuple[zipfile.ZipInfo, PurePosixPath]], list[str]]:
    """The sidecars that sit beside their file in the archive and were written for exactly its
    bytes; and what was left out, with why. The loader checks the binding again at every read;
    checked here, an import says what it left out instead of publishing nothing silently."""
    by_path = {rel: info for info, rel in files}
    kept, dropped = [], []
    for info, rel in sidecars:
        source = rel.with_name(sidecar_source(rel.name) or "")
        file = by_path.get(source)
        if file is None:
            dropped.append(f"{label}/{rel}: the upload options of a file the export lacks")
        elif info.file_size > _MAX_SIDECAR or not sidecar_fits(zf.read(info), zf.read(file)):
            dropped.append(
                f"{label}/{source}: its upload options were written for other bytes, "
                "so it is GM-only"
            )
        else:
            kept.append((info, rel))
    return kept, dropped


def _read_manifest(zf: zipfile.ZipFile) -> dict[str, Any]:
    try:
        manifest = json.loads(zf.read(_MANIFEST))
    except (KeyError, ValueError) as exc:
        raise _refuse(
            f"no readable manifest: {exc}", "That file is not a Liminalis campaign export."
        ) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _refuse("unknown format", "That file is not a Liminalis campaign export.")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _refuse(f"unknown format version {version!r}", "That export's format is unknown.")
    if version > FORMAT_VERSION:
        raise _refuse(
            f"format version {version} > {FORMAT_VERSION}",
            f"That export was written by a newer release (format {version}; this release "
            f"reads format {FORMAT_VERSION}). Upgrade Liminalis to import it.",
        )
    schema = manifest.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 0:
        raise _refuse(f"unknown schema {schema!r}", "That export's format is unknown.")
    if schema > LATEST:
        raise _refuse(
            f"schema {schema} > {LATEST}",
            f"That export was written by a newer release (database schema {schema}; this "
            f"release knows {LATEST}). Upgrade Liminalis to import it.",
        )
    for key in ("campaign", "embedder"):
        if not isinstance(manifest.get(key), str):
            raise _refuse(f"manifest lacks {key}", "That export's manifest is damaged.")
    return manifest


def _jsonl(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(zf.read(info).decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict):
            raise ValueError(f"{info.filename}:{n}: not an object")
        rows.append(row)
    return rows


def _read_archive(path: Path, max_bytes: int) -> _Archive:
    """Read and check everything but the files' contents; raise before anything is written."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise _refuse(
            f"cannot open {path}: {exc}", "That file is not a Liminalis campaign export."
        ) from exc
    with zf:
        manifest = _read_manifest(zf)
        infos = zf.infolist()
        if sum(i.file_size for i in infos) > max_bytes:
            raise _refuse("archive too large", "That export is larger than an import may unpack.")
        tables: dict[str, list[dict[str, Any]]] = {}
        vectors: list[tuple[str, np.ndarray]] = []
        files: dict[str, list[tuple[zipfile.ZipInfo, PurePosixPath]]] = {r: [] for r in _FILE_ROOTS}
        sidecars: dict[str, list[tuple[zipfile.ZipInfo, PurePosixPath]]] = {
            r: [] for r in _FILE_ROOTS
        }
        dropped: list[str] = []
        seen: set[str] = set()
        try:
            for info in infos:
                name = info.filename
                if info.is_dir():
                    continue
                if stat.S_ISLNK(info.external_attr >> 16) or name in seen:
                    raise _refuse(f"link or duplicate {name!r}", "That export is damaged.")
                seen.add(name)
                rel = _safe_member(name)
                if rel is None:
                    raise _refuse(f"unsafe member {name!r}", "That export holds an unsafe path.")
                if name == _MANIFEST:
                    continue
                if name == _EMBEDDINGS:
                    for row in _jsonl(zf, info):
                        vectors.append(
                            (
                                str(row["hash"]),
                                np.frombuffer(base64.b64decode(row["vector"]), dtype=np.float32),
                            )
                        )
                    continue
                if m := _TABLE.match(name):
                    tables[m.group(1)] = [_decode(r) for r in _jsonl(zf, info)]
                    continue
                parts = rel.parts
                if len(parts) >= 3 and parts[0] == "files" and parts[1] in _FILE_ROOTS:
                    inner = PurePosixPath(*parts[2:])
                    if not any(p.startswith(".") for p in inner.parts):
                        files[parts[1]].append((info, inner))
                        continue
                    # An export holds no dot file but a sidecar: anything else is no part of
                    # a campaign and never lands in its folder.
                    if sidecar_source(inner.name) is not None and not any(
                        p.startswith(".") for p in inner.parts[:-1]
                    ):
                        sidecars[parts[1]].append((info, inner))
                        continue
                raise _refuse(f"unexpected member {name!r}", "That export holds an unknown file.")
            for label in _FILE_ROOTS:
                kept, left = _bound_sidecars(zf, label, files[label], sidecars[label])
                files[label] += kept
                dropped += left
        except (KeyError, ValueError, TypeError, zipfile.BadZipFile, zlib.error) as exc:
            raise _refuse(f"damaged archive: {exc}", "That export is damaged.") from exc
    return _Archive(manifest=manifest, tables=tables, vectors=vectors, files=files, dropped=dropped)


def _extract(
    archive: Path, members: list[tuple[zipfile.ZipInfo, PurePosixPath]], dest: Path
) -> int:
    """Unpack ``members`` (names checked by :func:`_read_archive`) under ``dest``."""
    real = dest.resolve()
    with zipfile.ZipFile(archive) as zf:
        for info, rel in members:
            target = dest.joinpath(*rel.parts)
            if not target.resolve().is_relative_to(real):  # a folder of the archive's own making
                raise _refuse(f"member escapes: {info.filename!r}", "That export is damaged.")
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(info) as src, target.open("xb") as dst:
                    shutil.copyfileobj(src, dst)
            except (zipfile.BadZipFile, zlib.error, FileExistsError) as exc:
                raise _refuse(f"{info.filename!r}: {exc}", "That export is damaged.") from exc
    return len(members)


def _unpack(archive: Path, parsed: _Archive, root: Path, uploads: Path) -> tuple[int, list[Path]]:
    """Unpack the campaign folder to ``root`` and the uploads to ``uploads``, each through a
    staging folder renamed into place; returns the files and the folders placed. On failure
    nothing is left behind, and a folder that was there before is never touched."""
    placed: list[Path] = []
    try:
        n = 0
        for label, final in (("campaign", root), ("uploads", uploads)):
            members = parsed.files[label]
            if not members and label == "uploads":
                continue
            if final.exists():
                raise _refuse(
                    f"{final} exists", "That campaign's folder already exists here; not replaced."
                )
            final.parent.mkdir(parents=True, exist_ok=True)
            staged = final.with_name(f".import-{final.name}-{secrets.token_hex(4)}")
            staged.mkdir()
            try:
                n += _extract(archive, members, staged)
                os.replace(staged, final)
            finally:
                if staged.exists():
                    shutil.rmtree(staged)
            placed.append(final)
        return n, placed
    except BaseException:
        for p in reversed(placed):
            shutil.rmtree(p, ignore_errors=True)
        raise


@dataclass(frozen=True, slots=True)
class ImportTarget:
    """Where and into what an import goes: the store and embedder it writes to, the folders a
    campaign's files and uploads land in, the slugs already taken, and how it is re-indexed."""

    db: Database
    embedder: Embedder
    campaigns_dir: Path
    uploads_dir: Path | None
    existing: Collection[str]
    reindex: Reindex


async def import_campaign(
    target: ImportTarget,
    archive: Path,
    slug: str | None = None,
    *,
    max_bytes: int = MAX_IMPORT_BYTES,
) -> ImportReport:
    """Import an export as campaign ``slug`` (default: the exported campaign's slug), then
    re-index it. Refuses a slug this bot already has."""
    parsed = await asyncio.to_thread(_read_archive, archive, max_bytes)
    old = validate_slug(parsed.manifest["campaign"])
    slug = validate_slug(slug or old)
    if slug in target.existing:
        raise _refuse(
            f"campaign {slug} exists",
            f"A campaign named `{slug}` already exists here. Import under another name "
            "with `--campaign NEWSLUG`.",
        )
    root = target.campaigns_dir / slug
    # Uploads go where this bot keeps them; a bot without an uploads folder keeps them in the
    # campaign folder's uploads/, which ingest reads under the same document ids.
    uploads = target.uploads_dir / slug if target.uploads_dir is not None else root / "uploads"
    notes: list[str] = [f"left out {d}" for d in parsed.dropped]
    files, placed = await asyncio.to_thread(_unpack, archive, parsed, root, uploads)
    done = await _store_rows(target.db, parsed, slug, old, root, placed)
    notes += _row_notes(done)
    model = parsed.manifest["embedder"]
    same = model == target.embedder.model_id
    if not same:
        notes.append(
            f"re-embedded: the export used {model}, this bot uses {target.embedder.model_id}"
        )
    # Every document prepared from its file into the vector index (from the cache if `same`);
    # the passes listening to ingests derive its knowledge again.
    report = await target.reindex(slug)
    notes += [f"skipped {s.path}: {s.reason}" for s in report.skipped]
    return ImportReport(
        campaign=slug,
        rows=done.rows,
        files=files,
        embeddings=len(parsed.vectors),
        same_embedder=same,
        embedded=report.embedded + report.windows_embedded,
        ignored=done.ignored,
        notes=tuple(notes),
        documents=len(await target.db.documents.hashes(slug)),
    )


async def _store_rows(
    db: Database, parsed: _Archive, slug: str, old: str, root: Path, placed: list[Path]
) -> Imported:
    """The archive's embeddings and rows into the store; the files just placed are removed
    again if that fails, so a failed import leaves no half-made campaign folder behind."""
    try:
        await db.embeddings.put(parsed.manifest["embedder"], parsed.vectors)
        return await db.transfer.import_rows(
            slug,
            {t: rows for t, rows in parsed.tables.items()},
            renamed_from=old,
            root=str(root),
        )
    except BaseException:
        for p in reversed(placed):
            await asyncio.to_thread(shutil.rmtree, p, True)
        raise


def _row_notes(done: Imported) -> list[str]:
    """What the import kept out, in words for the report."""
    notes: list[str] = []
    if done.left_out:
        notes.append(
            "left out rows that are rebuilt from the documents or cannot be checked: "
            + ", ".join(f"{t} {n}" for t, n in sorted(done.left_out.items()))
        )
    if done.unknown_tables:
        notes.append(
            "left out tables this release does not have: " + ", ".join(done.unknown_tables)
        )
    if done.ignored:
        notes.append(
            "kept out rows whose key is taken here (e.g. a channel linked to another campaign): "
            + ", ".join(f"{t} {n}" for t, n in sorted(done.ignored.items()))
        )
    return notes
