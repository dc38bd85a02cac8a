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

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import Attachment, OptionValue, Reply
from bot.upload_files import DISK, UploadWriter, discard
from liminalis.campaign import CampaignConfig
from liminalis.errors import InvalidInput, UploadRejected
from liminalis.ingest.archive import Member as VaultMember
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
from liminalis.workers import run_cpu

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


@dataclass
class _Batch:
    """One upload's files as they are checked and saved, and what the reply will say."""

    cfg: CampaignConfig
    root: Path
    max_bytes: int
    visibility: frozenset[str] | None
    doc_type: str | None
    writer: UploadWriter
    saved: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    #: document id → the upload the indexer reads for it (the first by name)
    existing: dict[str, str] = field(default_factory=dict)


def save_uploads(
    cfg: CampaignConfig,
    attachments: Sequence[Attachment],
    *,
    max_bytes: int,
    visibility: frozenset[str] | None = None,
    doc_type: str | None = None,
    writer: UploadWriter = DISK,
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """Validate every file before writing any; a bad file never replaces a good one.

    Blocking (reads, parses, writes): ``run`` calls it in a worker, never on the event loop.
    Returns the names saved, the ``(name, reason)`` of those refused, and the saved names
    that replaced an earlier upload (a GM's new version of the notes: said in the reply). A
    file whose document id an earlier upload of another name holds (``notes.txt`` beside
    ``notes.md``) is refused: the two would be one document, and the older would win."""
    assert cfg.uploads_root is not None
    batch = _Batch(cfg, cfg.uploads_root, max_bytes, visibility, doc_type, writer)
    for f in sorted(batch.root.iterdir()) if batch.root.is_dir() else ():
        if f.is_file() and not f.name.startswith("."):
            batch.existing.setdefault(doc_id_for(f.name), f.name)
    for i, att in enumerate(attachments):
        name = upload_name(att.filename)
        reason = _refusal(batch, i, name, att)
        if reason is not None:
            batch.skipped.append((name, reason))
        elif PurePosixPath(name).suffix.lower() == ".zip":
            _save_zip(batch, att, name)
        else:
            _save_file(batch, att, name)
    return batch.saved, batch.skipped, batch.replaced


def _save_then_discard(
    cfg: CampaignConfig,
    attachments: Sequence[Attachment],
    *,
    max_bytes: int,
    visibility: frozenset[str] | None,
    doc_type: str | None,
    writer: UploadWriter,
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """:func:`save_uploads`, then the downloads streamed to temporary files are removed."""
    try:
        return save_uploads(
            cfg,
            attachments,
            max_bytes=max_bytes,
            visibility=visibility,
            doc_type=doc_type,
            writer=writer,
        )
    finally:
        for att in attachments:
            if att.path is not None:
                discard(att.path)


def _refusal(batch: _Batch, index: int, name: str, att: Attachment) -> str | None:
    """Why ``att`` is refused before anything of it is read, or ``None``."""
    if index >= MAX_FILES:
        return f"only {MAX_FILES} files are read per upload: send it again"
    if name in batch.saved:  # two names that clean to one: the second would overwrite the first
        return "another file in this upload has the same name"
    if att.error:
        return att.error
    if PurePosixPath(name).suffix.lower() not in (*SUPPORTED_SUFFIXES, ".zip"):
        return f"unsupported file type ({SUPPORTED_WORDS}, or a .zip of them)"
    if att.byte_size() > batch.max_bytes:
        return f"file too large (limit {batch.max_bytes:,} bytes)"
    return None


def _save_zip(batch: _Batch, att: Attachment, name: str) -> None:
    """A zipped vault, unpacked under ``uploads/<folder>/``."""
    folder = upload_name(name[: -len(".zip")]).removesuffix(".md") or "vault"
    if folder in batch.saved or doc_id_for(folder) in batch.existing:
        batch.skipped.append((name, "an upload of that name is already a single file"))
        return
    existed = (batch.root / folder).is_dir()
    try:
        kept = _save_vault(batch, att.content(), folder, name)
    except OSError as exc:
        # Each note is written whole or not at all; those written before the failure are
        # complete files, which the next tick indexes.
        batch.skipped.append(
            (
                name,
                f"not all of it was saved: {_write_cause(exc)} (the notes written "
                "before are indexed on the next tick)",
            )
        )
        return
    if kept:
        if existed:
            batch.replaced.append(folder + "/")
        batch.saved.append(folder + "/")


def _save_file(batch: _Batch, att: Attachment, name: str) -> None:
    """One note, PDF or Word document, checked, then written whole or not at all."""
    other = batch.existing.get(doc_id_for(name))
    if other is not None and other != name:
        batch.skipped.append(
            (
                name,
                f"an earlier upload, {other}, is the same document: send it as {other} to replace it",
            )
        )
        return
    try:
        prepared = _prepare(
            batch.cfg, f"uploads/{name}", att.content(), batch.visibility, batch.doc_type
        )
    except LoadError as exc:
        batch.skipped.append((name, exc.reason))
        return
    target = batch.root / name
    again = target.exists()
    try:
        prepared.write(target, batch.writer)
    except OSError as exc:
        batch.skipped.append((name, f"not saved: {_write_cause(exc)}"))
        return
    if again:
        batch.replaced.append(name)
    batch.saved.append(name)
    batch.existing[doc_id_for(name)] = name


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

    def write(self, target: Path, writer: UploadWriter) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.sidecar is not None:
            # Bound to these bytes: until the file below is replaced, the old file has no
            # sidecar that fits it, and an upload that says nothing is GM-only.
            write_sidecar(target, self.data, visibility=self.sidecar, doc_type=self.doc_type)
        writer.write(target, self.data)


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


@dataclass
class _Vault:
    """A vault's members as they will be saved: path as saved → bytes, the GM-folder paths,
    each member's path in the archive → its path as saved, and the skipped ``(path, reason)``."""

    paths: dict[str, bytes] = field(default_factory=dict)
    gm_paths: set[str] = field(default_factory=set)
    saved_as: dict[str, str] = field(default_factory=dict)
    notes: list[tuple[str, str]] = field(default_factory=list)


def _save_vault(batch: _Batch, archive: bytes, folder: str, name: str) -> bool:
    """Unpack a zipped vault into ``uploads/<folder>/``; whether anything was saved.

    Every member is checked before any is written. A member that fails keeps its earlier
    version; members the new archive no longer holds are removed. Folder rules apply inside
    the vault as in the campaign folder (``gm/`` is GM-only), and each note's
    ``[[Note|alias]]`` gives the note it names that alias where everyone who reads that note
    also read the link (:func:`~liminalis.ingest.archive.may_alias`)."""
    try:
        read = read_vault(archive, suffixes=SUPPORTED_SUFFIXES, max_member_bytes=batch.max_bytes)
    except LoadError as exc:
        batch.skipped.append((name, exc.reason))
        return False
    vault = _vault_members(batch.cfg, read.members, list(read.skipped))
    prepared = _prepare_vault(batch, vault, folder)
    batch.skipped.extend(_summarize(name, vault.notes))
    if not prepared:
        return False
    _write_vault(batch, batch.root / folder, prepared, vault.notes)
    return True


def _vault_members(
    cfg: CampaignConfig, members: Sequence[VaultMember], notes: list[tuple[str, str]]
) -> _Vault:
    """A vault's members under the names they are saved as, with the GM folders they lie in."""
    vault = _Vault(notes=notes)
    for member in members:
        path = _clean_path(member.path)
        if path in vault.paths or PurePosixPath(path).suffix.lower() not in SUPPORTED_SUFFIXES:
            vault.notes.append((member.path, "another file in the archive has the same name"))
            continue
        vault.paths[path] = member.data
        vault.saved_as[member.path] = path
        if _in_gm_folder(cfg, member.path) or _in_gm_folder(cfg, path):
            vault.gm_paths.add(path)
    return vault


def _prepare_vault(batch: _Batch, vault: _Vault, folder: str) -> dict[str, _Prepared]:
    """Every member checked, then given the aliases its links earn (a member whose aliases
    fail its checks is saved without them, as checked first)."""

    def prepare(path: str, aliases: tuple[str, ...] = ()) -> _Prepared:
        option = frozenset({GM}) if path in vault.gm_paths else batch.visibility
        rel = f"uploads/{folder}/{path}"
        return _prepare(batch.cfg, rel, vault.paths[path], option, batch.doc_type, aliases=aliases)

    prepared: dict[str, _Prepared] = {}
    for path in vault.paths:
        try:
            prepared[path] = prepare(path)
        except LoadError as exc:
            vault.notes.append((path, exc.reason))
    for path, names in _link_aliases(prepared, vault.saved_as).items():
        with contextlib.suppress(LoadError):
            prepared[path] = prepare(path, tuple(dict.fromkeys(names)))
    return prepared


def _link_aliases(
    prepared: Mapping[str, _Prepared], saved_as: Mapping[str, str]
) -> dict[str, list[str]]:
    """Aliases from links, each only where it cannot tell a reader of the note what they
    never read."""
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
    return aliases


def _write_vault(
    batch: _Batch, root: Path, prepared: Mapping[str, _Prepared], notes: list[tuple[str, str]]
) -> None:
    """Write the checked members, then remove the notes the new archive no longer holds; a
    note that failed its checks keeps its old copy."""
    kept = {_clean_path(path) for path, _ in notes}
    for path, p in prepared.items():
        p.write(root / path, batch.writer)
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
    # Reading, parsing and writing the files block: in a worker, never on the event loop.
    saved, skipped, replaced = await run_cpu(
        _save_then_discard,
        cfg,
        request.attachments,
        max_bytes=services.max_upload_bytes,
        visibility=visibility,
        doc_type=doc_type,
        writer=services.upload_writer,
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
