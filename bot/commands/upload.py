"""``/upload [players|gm|<lens>] [session|lore|…]`` with files: GM: ingest notes, PDFs, Word
documents and zipped vaults.

Every file is checked before any is written, saved with the visibility it got (in its front
matter; for a PDF or Word document in a sidecar bound to its bytes), ingested alone, and
reported on its own line (added, changed, removed, hidden sections, warnings, or why it was
skipped). A ``.zip`` (an Obsidian vault, a folder of notes) is unpacked under
``uploads/<name>/`` with the campaign's GM folder rules applied inside it; its ``[[Note|alias]]``
links give ``alias`` to the note they name. A file that fails its checks is never written, so
its previous version stays searchable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import Attachment, OptionValue, Reply
from liminalis.campaign import CampaignConfig
from liminalis.errors import InvalidInput, UploadRejected
from liminalis.ingest.archive import link_targets, may_alias, read_vault
from liminalis.ingest.loaders import (
    BINARY_SUFFIXES,
    SUPPORTED_SUFFIXES,
    SUPPORTED_WORDS,
    LoadError,
    ParsedFile,
    doc_id_for,
    parse_file,
    sidecar_of,
    with_front_matter,
    write_sidecar,
)
from liminalis.lens import GM, NOT_GM, PLAYERS, parse_visibility
from liminalis.store.sqlite import store_cause
from liminalis.text import clean_text
from liminalis.types import FileReport, SkippedFile

__all__ = [
    "command",
    "UPLOAD_TYPES",
    "describe_visibility",
    "looks_like_upload_options",
    "parse_upload_options",
    "resolve_visibility",
    "save_uploads",
    "upload_name",
    "visibility_choices",
]

UPLOAD_TYPES = ("session", "lore", "character", "place", "faction", "item", "note")
MAX_FILES = 10
#: How many of a vault's skipped files the reply names one by one (the rest are counted).
_SKIPPED_SHOWN = 8
_USAGE = (
    "Usage: `/upload [players|gm|<player>] [session|lore|character|place|faction|item|note]` "
    "with the files attached."
)
_PLAYER_WORDS = frozenset({PLAYERS, "player", "public", "all", "table"})
_GM_WORDS = frozenset({GM, "gm-only", "private", "secret"})
_SAFE_NAME = re.compile(r"[^\w.-]+")  # \w is Unicode: "Сессия 1.md" keeps its letters


def _parse(arg: str) -> dict[str, OptionValue]:
    """``players session``, ``visibility=mirel type:lore``: the visibility words (checked against
    the campaign's lenses by ``run``) and the type; a word that is neither is refused."""
    visibility: list[str] = []
    doc_type: str | None = None
    for word in arg.lower().replace(",", " ").split():
        key, _, value = word.rpartition("=") if "=" in word else word.rpartition(":")
        if key not in {"", "visibility", "type"} or not value:
            raise InvalidInput("bad upload option", user_message=_USAGE)
        if key != "visibility" and value in UPLOAD_TYPES:
            doc_type = value
        elif key != "type":
            visibility.append(value)
        else:
            raise InvalidInput("bad upload option", user_message=_USAGE)
    options: dict[str, OptionValue] = {}
    if visibility:
        options["visibility"] = " ".join(visibility)
    if doc_type is not None:
        options["type"] = doc_type
    return options


def looks_like_upload_options(arg: str) -> bool:
    """Whether ``arg`` reads as ``/upload``'s words only (a visibility or a type, or nothing), not
    as a question: a DM with files and such words is an upload (``BotService.begin``)."""
    for word in arg.lower().replace(",", " ").split():
        _, _, value = word.rpartition("=") if "=" in word else word.rpartition(":")
        if value not in _PLAYER_WORDS | _GM_WORDS | set(UPLOAD_TYPES):
            return False
    return True


def resolve_visibility(words: str, cfg: CampaignConfig) -> frozenset[str] | None:
    """The visibility one or more words give (``players``, ``gm``, a lens of ``cfg``), ``None``
    for none; two different ones are refused, never the wider taken."""
    visibility: frozenset[str] | None = None
    for word in words.lower().replace(",", " ").split():
        if word in _PLAYER_WORDS:
            given = frozenset({PLAYERS, GM})
        elif word in _GM_WORDS:
            given = frozenset({GM})
        elif word in cfg.lenses:
            given = frozenset({word, GM})
        else:
            raise InvalidInput("bad upload option", user_message=_USAGE)
        if visibility is not None and visibility != given:  # "gm players": never pick the wider
            raise InvalidInput(
                "two visibilities",
                user_message="Say who may read it once: players, gm, or one player's name.",
            )
        visibility = given
    return visibility


def parse_upload_options(arg: str, cfg: CampaignConfig) -> tuple[frozenset[str] | None, str | None]:
    """``/upload``'s words as ``run`` reads them: the visibility and type given, ``None`` where not given."""
    options = _parse(arg)
    doc_type = options.get("type")
    return resolve_visibility(str(options.get("visibility", "")), cfg), doc_type if isinstance(
        doc_type, str
    ) else None


def describe_visibility(visibility: frozenset[str]) -> str:
    """A visibility in words a GM reads in an upload's reply."""
    names = sorted(set(visibility) - {GM, NOT_GM})
    if not names:
        return "GM-only"
    if PLAYERS in names:
        return "players"
    return " and ".join(names) + " only (and the GM)"


def visibility_choices(cfg: CampaignConfig | None, *, is_gm: bool) -> list[str]:
    """The visibilities an upload may be given (autocomplete); a lens's name is the GM's business."""
    if cfg is None or not is_gm:
        return [PLAYERS, GM]
    return [PLAYERS, GM, *cfg.lenses]


def upload_name(filename: str) -> str:
    """The name an upload is saved under: the last path part, the stem cleaned to letters,
    digits, ``._-`` and cut to 100 characters, the suffix kept (cutting the whole name could cut
    ``.md`` off, and a stem of only dots or marks becomes ``upload``)."""
    base = PurePosixPath(
        clean_text(filename).replace("\\", "/")
    ).name  # NFC: macOS sends "café" decomposed
    suffix = PurePosixPath(base).suffix
    stem = base[: len(base) - len(suffix)] if suffix else base
    stem = _SAFE_NAME.sub("-", stem).strip(".-")[:100] or "upload"
    return stem + (
        _SAFE_NAME.sub("", suffix)[:12] if suffix else ("" if base.strip(". ") else ".md")
    )


def save_uploads(
    cfg: CampaignConfig,
    attachments: Sequence[Attachment],
    *,
    max_bytes: int,
    visibility: frozenset[str] | None = None,
    doc_type: str | None = None,
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """Validate every file before writing any; a bad file never replaces a good one.

    Returns the names saved, the ``(name, reason)`` of those refused, and the saved names
    that replaced an earlier upload (a GM's new version of the notes: said in the reply). A
    file whose document id an earlier upload of another name holds (``notes.txt`` beside
    ``notes.md``) is refused: the two would be one document, and the older would win."""
    assert cfg.uploads_root is not None
    saved: list[str] = []
    skipped: list[tuple[str, str]] = []
    replaced: list[str] = []
    existing: dict[
        str, str
    ] = {}  # document id → the upload the indexer reads for it (the first by name)
    for f in sorted(cfg.uploads_root.iterdir()) if cfg.uploads_root.is_dir() else ():
        if f.is_file() and not f.name.startswith("."):
            existing.setdefault(doc_id_for(f.name), f.name)
    for i, att in enumerate(attachments):
        name = upload_name(att.filename)
        if i >= MAX_FILES:
            skipped.append((name, f"only {MAX_FILES} files are read per upload: send it again"))
            continue
        if name in saved:  # two names that clean to one: the second would overwrite the first
            skipped.append((name, "another file in this upload has the same name"))
            continue
        if att.error:
            skipped.append((name, att.error))
            continue
        suffix = PurePosixPath(name).suffix.lower()
        if suffix not in (*SUPPORTED_SUFFIXES, ".zip"):
            skipped.append((name, f"unsupported file type ({SUPPORTED_WORDS}, or a .zip of them)"))
            continue
        if max(len(att.data), att.size or 0) > max_bytes:
            skipped.append((name, f"file too large (limit {max_bytes:,} bytes)"))
            continue
        if suffix == ".zip":
            folder = upload_name(name[: -len(suffix)]).removesuffix(".md") or "vault"
            if folder in saved or doc_id_for(folder) in existing:
                skipped.append((name, "an upload of that name is already a single file"))
                continue
            existed = (cfg.uploads_root / folder).is_dir()
            try:
                kept = _save_vault(
                    cfg,
                    att.data,
                    folder,
                    name,
                    max_bytes=max_bytes,
                    visibility=visibility,
                    doc_type=doc_type,
                    skipped=skipped,
                )
            except OSError as exc:
                # Each note is written whole or not at all; those written before the failure
                # are complete files, which the next tick indexes.
                skipped.append(
                    (
                        name,
                        f"not all of it was saved: {_write_cause(exc)} (the notes written "
                        "before are indexed on the next tick)",
                    )
                )
                continue
            if kept:
                if existed:
                    replaced.append(folder + "/")
                saved.append(folder + "/")
            continue
        other = existing.get(doc_id_for(name))
        if other is not None and other != name:
            skipped.append(
                (
                    name,
                    f"an earlier upload, {other}, is the same document: send it as {other} to replace it",
                )
            )
            continue
        try:
            prepared = _prepare(cfg, f"uploads/{name}", att.data, visibility, doc_type)
        except LoadError as exc:
            skipped.append((name, exc.reason))
            continue
        target = cfg.uploads_root / name
        again = target.exists()
        try:
            prepared.write(target)
        except OSError as exc:
            skipped.append((name, f"not saved: {_write_cause(exc)}"))
            continue
        if again:
            replaced.append(name)
        saved.append(name)
        existing[doc_id_for(name)] = name
    return saved, skipped, replaced


def _write_cause(exc: OSError) -> str:
    """Why an upload could not be written, in words for the chat (never the path)."""
    return store_cause(exc) or f"the file could not be written ({exc.strerror or 'I/O error'})"


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A checked file as it will be saved: its bytes, and for a PDF or Word document the
    visibility and type its sidecar keeps."""

    data: bytes
    parsed: ParsedFile
    sidecar: frozenset[str] | None = None
    doc_type: str | None = None

    def write(self, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.sidecar is not None:
            # Bound to these bytes: until the file below is replaced, the old file has no
            # sidecar that fits it, and an upload that says nothing is GM-only.
            write_sidecar(target, self.data, visibility=self.sidecar, doc_type=self.doc_type)
        tmp = target.with_name(f".{target.name}.part")
        try:
            tmp.write_bytes(self.data)
            tmp.replace(target)
        except OSError:
            # A full disk leaves a file cut short: it must not stay beside the uploads.
            tmp.unlink(missing_ok=True)
            raise


def _prepare(
    cfg: CampaignConfig,
    rel: str,
    data: bytes,
    visibility: frozenset[str] | None,
    doc_type: str | None,
    *,
    aliases: tuple[str, ...] = (),
) -> _Prepared:
    """Check one file and give it the visibility it is to keep (raises :class:`LoadError`)."""
    default = parse_visibility(cfg.upload_visibility, known_lenses=cfg.lenses, gm_path=False)
    if PurePosixPath(rel).suffix.lower() in BINARY_SUFFIXES:
        # Nothing inside a PDF or Word document says who reads it: the option, else the default.
        given = visibility if visibility is not None else default
        parsed = parse_file(data, rel, cfg, visibility=given, doc_type=doc_type)
        return _Prepared(data, parsed, sidecar=parsed.visibility, doc_type=doc_type)
    parsed = parse_file(data, rel, cfg, visibility=visibility, doc_type=doc_type)
    if visibility is None and not parsed.declared:
        parsed = parse_file(data, rel, cfg, visibility=default, doc_type=doc_type)
    # The visibility it got (and the type given) go into the saved copy's front matter: every
    # later re-read (the tick, a restart, a changed default) gives the file what this reply
    # says it has.
    data = with_front_matter(data, visibility=parsed.visibility, doc_type=doc_type, aliases=aliases)
    return _Prepared(data, parse_file(data, rel, cfg))


def _save_vault(
    cfg: CampaignConfig,
    archive: bytes,
    folder: str,
    name: str,
    *,
    max_bytes: int,
    visibility: frozenset[str] | None,
    doc_type: str | None,
    skipped: list[tuple[str, str]],
) -> bool:
    """Unpack a zipped vault into ``uploads/<folder>/``; whether anything was saved.

    Every member is checked before any is written. A member that fails keeps its earlier
    version; members the new archive no longer holds are removed. Folder rules apply inside
    the vault as in the campaign folder (``gm/`` is GM-only), and each note's
    ``[[Note|alias]]`` gives the note it names that alias where everyone who reads that note
    also read the link (:func:`~liminalis.ingest.archive.may_alias`)."""
    assert cfg.uploads_root is not None
    try:
        vault = read_vault(archive, suffixes=SUPPORTED_SUFFIXES, max_member_bytes=max_bytes)
    except LoadError as exc:
        skipped.append((name, exc.reason))
        return False
    notes: list[tuple[str, str]] = []  # (path inside the vault, reason)
    notes += vault.skipped
    paths: dict[str, bytes] = {}
    gm_paths: set[str] = set()
    saved_as: dict[str, str] = {}  # a member's path in the archive → its path as saved
    for member in vault.members:
        path = _clean_path(member.path)
        if path in paths or PurePosixPath(path).suffix.lower() not in SUPPORTED_SUFFIXES:
            notes.append((member.path, "another file in the archive has the same name"))
            continue
        paths[path] = member.data
        saved_as[member.path] = path
        if _in_gm_folder(cfg, member.path) or _in_gm_folder(cfg, path):
            gm_paths.add(path)

    def option(path: str) -> frozenset[str] | None:
        return frozenset({GM}) if path in gm_paths else visibility

    prepared: dict[str, _Prepared] = {}
    for path, data in paths.items():
        try:
            prepared[path] = _prepare(cfg, f"uploads/{folder}/{path}", data, option(path), doc_type)
        except LoadError as exc:
            notes.append((path, exc.reason))
    # Aliases from links, each only where it cannot tell a reader of the note what they never read.
    targets = link_targets(
        {m: p for m, p in saved_as.items() if p in prepared} | {p: p for p in prepared},
        SUPPORTED_SUFFIXES,
    )
    aliases: dict[str, list[str]] = {}
    for p in prepared.values():
        for link_vis, target, alias in p.parsed.links:
            to = targets.get(target.strip().lower())
            alias = " ".join(alias.split())[:100]
            if (
                to is not None
                and alias
                and PurePosixPath(to).suffix.lower() not in BINARY_SUFFIXES
                and may_alias(prepared[to].parsed.visibility, link_vis)
            ):
                aliases.setdefault(to, []).append(alias)
    for path, names in aliases.items():
        try:
            prepared[path] = _prepare(
                cfg,
                f"uploads/{folder}/{path}",
                paths[path],
                option(path),
                doc_type,
                aliases=tuple(dict.fromkeys(names)),
            )
        except LoadError:
            pass  # saved without the aliases, as checked above
    skipped.extend(_summarize(name, notes))
    if not prepared:
        return False
    root = cfg.uploads_root / folder
    kept = {_clean_path(path) for path, _ in notes}
    for path, p in prepared.items():
        p.write(root / path)
    # Notes the new archive no longer holds go; a note that failed its checks keeps its old copy.
    for old in sorted(root.rglob("*")) if root.is_dir() else ():
        rel = old.relative_to(root).as_posix()
        if (
            old.is_file()
            and not old.name.startswith(".")
            and rel not in prepared
            and rel not in kept
        ):
            old.unlink()
            sidecar_of(old).unlink(missing_ok=True)
    return True


def _in_gm_folder(cfg: CampaignConfig, path: str) -> bool:
    """Whether a vault member lies in a GM folder, read from any folder of its path down: a zip
    of a folder puts the vault under its name (``Greyhold/gm/plot.md``), and a vault may hold
    several campaigns. Erring toward GM-only is the safe side."""
    parts = path.split("/")
    return any(cfg.is_gm_path("/".join(parts[i:])) for i in range(len(parts)))


def _clean_path(path: str) -> str:
    """A vault member's path as saved: each folder cleaned as a file name is, the file name as
    :func:`upload_name` makes it."""
    *folders, leaf = path.split("/")
    return "/".join(
        [*(_SAFE_NAME.sub("-", f).strip(".-") or "folder" for f in folders), upload_name(leaf)]
    )


def _summarize(name: str, notes: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A vault's skipped files for the reply: the first few by name, the rest counted."""
    shown = [(f"{name}: {path}", reason) for path, reason in notes[:_SKIPPED_SHOWN]]
    if len(notes) > _SKIPPED_SHOWN:
        shown.append((name, f"{len(notes) - _SKIPPED_SHOWN:,} more files skipped"))
    return shown


async def run(request: Request, scope: Scope) -> Reply:
    cfg, services, msg = scope.config, scope.services, request.msg
    visibility = resolve_visibility(request.string("visibility"), cfg)
    doc_type = request.string("type") or None
    if doc_type is not None and doc_type not in UPLOAD_TYPES:
        raise InvalidInput("bad upload type", user_message=_USAGE)
    if not request.attachments:
        how = (
            "Slack commands cannot carry files: mention me with the files attached, "
            "`@Liminalis /upload [players|gm|<player>] [session|lore|…]`."
            if msg.platform == "slack"
            else "Attach notes (.md, .txt, .pdf, .docx) or a zipped vault to `/upload`."
        )
        raise InvalidInput("no attachment", user_message=how)
    if cfg.uploads_root is None:
        raise UploadRejected(
            "uploads disabled", user_message="Uploads are not enabled on this bot."
        )
    saved, skipped, replaced = save_uploads(
        cfg,
        request.attachments,
        max_bytes=services.max_upload_bytes,
        visibility=visibility,
        doc_type=doc_type,
    )
    if not saved:
        listed = "\n".join(f"• {n}: {r}" for n, r in skipped)
        return Reply(text=f"Nothing was ingested.\n{listed}", error=True)
    lines: list[str] = []
    ingested = 0
    reports: list[FileReport] = []  # what each file held back: the GM is asked to review it
    for name in saved:  # only these files are read: the rest of the campaign is left as it is
        report = await services.engine.ingest(cfg.slug, cfg.uploads_root / name)
        reports += report.files
        if name.endswith("/"):
            ingested += len(report.files)
            lines += _vault_lines(name, report.files, report.skipped, again=name in replaced)
            continue
        refused = [s.reason for s in report.skipped]
        if refused or not report.files:
            lines.append(f"• skipped {name}: {refused[0] if refused else 'not read'}")
            continue
        f = report.files[0]
        ingested += 1
        hidden = (
            f"; {f.hidden_sections} hidden section{'s' if f.hidden_sections != 1 else ''} (GM-only)"
            if f.hidden_sections
            else ""
        )
        again = " (replaced the earlier upload)" if name in replaced else ""
        lines.append(
            f"• {name}{again} — {describe_visibility(f.visibility)}, {f.type}: {f.added} passages added, "
            f"{f.changed} changed, {f.removed} removed{hidden}"
        )
        lines += [f"  ⚠ {w}" for w in f.warnings]
    lines += [f"• skipped {n}: {r}" for n, r in skipped]
    lines.insert(0, f"Ingested {ingested} file(s) into **{cfg.name}**:")
    habit = await services.engine.review.awaiting(cfg.slug, reports)
    if habit:
        lines.append(
            f"{habit} section{'s' if habit != 1 else ''} held back as GM notes: `/gm review` "
            "(they read like a GM's: a GM Notes heading, a `GM:` line, a DM folder…) to show or "
            "keep each."
        )
    if visibility is None and cfg.upload_visibility == GM:
        lines.append(
            "Files that do not say who may read them are GM-only: add `visibility: players` to their "
            "front matter, or upload with the visibility option, to share them with the table."
        )
    return Reply(text="\n".join(lines))


def _vault_lines(
    name: str, files: Sequence[FileReport], refused: Sequence[SkippedFile], *, again: bool
) -> list[str]:
    """A vault's lines in the reply: its notes by visibility, passages, warnings, refusals."""
    by_vis: dict[str, int] = {}
    for f in files:
        key = describe_visibility(f.visibility)
        by_vis[key] = by_vis.get(key, 0) + 1
    hidden = sum(f.hidden_sections for f in files)
    lines = [
        f"• {name}{' (replaced the earlier upload)' if again else ''} — {len(files)} notes ("
        + ", ".join(f"{n} {k}" for k, n in sorted(by_vis.items()))
        + f"): {sum(f.added for f in files)} passages added, {sum(f.changed for f in files)} "
        f"changed, {sum(f.removed for f in files)} removed"
        + (f"; {hidden} hidden section{'s' if hidden != 1 else ''} (GM-only)" if hidden else "")
    ]
    warned = [(f.path, w) for f in files for w in f.warnings]
    lines += [f"  ⚠ {p}: {w}" for p, w in warned[:_SKIPPED_SHOWN]]
    lines += [f"  • skipped {s.path}: {s.reason}" for s in refused[:_SKIPPED_SHOWN]]
    return lines


command = Command(
    name="upload",
    description="GM: upload notes, PDFs, Word documents or a zipped vault to the campaign",
    run=run,
    options=(
        Option(
            "file", "attachment", "A .md, .txt, .pdf or .docx file, or a .zip vault", required=True
        ),
        Option("file2", "attachment", "Another file"),
        Option("file3", "attachment", "Another file"),
        Option(
            "visibility",
            "string",
            "Who may read it: players, gm (GM-only, the default), or one player's name",
            autocomplete="visibilities",
            low=1,
            high=40,
        ),
        Option(
            "type",
            "string",
            "What it is: session notes, lore, a character, a place…",
            choices=UPLOAD_TYPES,
        ),
    ),
    usage=("`/upload` — GM: attach notes (.md, .txt, .pdf, .docx) or a zipped vault to ingest",),
    example="/upload players session (with the notes attached)",
    gm_only=True,
    private=True,
    parse=_parse,
    group="gm",
)
