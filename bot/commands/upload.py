"""``/upload [players|gm|<lens>] [session|lore|…]`` with files: GM: ingest Markdown/text notes.

Every file is checked before any is written, saved with the visibility it got in its front
matter, ingested alone, and reported on its own line (added, changed, removed, hidden sections,
warnings, or why it was skipped).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from bot.commands._base import Command, Option, Request, Scope
from bot.messages import Attachment, OptionValue, Reply
from liminalis.campaign import CampaignConfig
from liminalis.errors import InvalidInput, UploadRejected
from liminalis.ingest.loaders import (
    SUPPORTED_SUFFIXES,
    LoadError,
    doc_id_for,
    parse_file,
    with_front_matter,
)
from liminalis.lens import GM, NOT_GM, PLAYERS, parse_visibility
from liminalis.text import clean_text

__all__ = [
    "command",
    "UPLOAD_TYPES",
    "describe_visibility",
    "parse_upload_options",
    "resolve_visibility",
    "save_uploads",
    "upload_name",
    "visibility_choices",
]

UPLOAD_TYPES = ("session", "lore", "character", "place", "faction", "item", "note")
MAX_FILES = 10
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
        if PurePosixPath(name).suffix.lower() not in SUPPORTED_SUFFIXES:
            skipped.append((name, "unsupported file type (use .md or .txt)"))
            continue
        if max(len(att.data), att.size or 0) > max_bytes:
            skipped.append((name, f"file too large (limit {max_bytes:,} bytes)"))
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
        data = att.data
        try:
            parsed = parse_file(
                data, f"uploads/{name}", cfg, visibility=visibility, doc_type=doc_type
            )
            if visibility is None and not parsed.declared:
                default = parse_visibility(
                    cfg.upload_visibility, known_lenses=cfg.lenses, gm_path=False
                )
                parsed = parse_file(
                    data, f"uploads/{name}", cfg, visibility=default, doc_type=doc_type
                )
            # The visibility it got (and the type given) go into the saved copy's front
            # matter: every later re-read (the tick, a restart, a changed default) gives the
            # file what this reply says it has.
            data = with_front_matter(data, visibility=parsed.visibility, doc_type=doc_type)
            parse_file(data, f"uploads/{name}", cfg)
        except LoadError as exc:
            skipped.append((name, exc.reason))
            continue
        cfg.uploads_root.mkdir(parents=True, exist_ok=True)
        target = cfg.uploads_root / name
        if target.exists():
            replaced.append(name)
        tmp = cfg.uploads_root / f".{name}.part"
        tmp.write_bytes(data)
        tmp.replace(target)
        saved.append(name)
        existing[doc_id_for(name)] = name
    return saved, skipped, replaced


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
            else "Attach one or more .md or .txt files to `/upload`."
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
    for name in saved:  # only these files are read: the rest of the campaign is left as it is
        report = await services.engine.ingest(cfg.slug, cfg.uploads_root / name)
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
    if visibility is None and cfg.upload_visibility == GM:
        lines.append(
            "Files that do not say who may read them are GM-only: add `visibility: players` to their "
            "front matter, or upload with the visibility option, to share them with the table."
        )
    return Reply(text="\n".join(lines))


command = Command(
    name="upload",
    description="GM: upload Markdown/text session notes to the campaign",
    run=run,
    options=(
        Option("file", "attachment", "A .md or .txt file", required=True),
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
    usage=("`/upload` — GM: attach Markdown/text session notes to ingest",),
    example="/upload players session (with the notes attached)",
    gm_only=True,
    private=True,
    parse=_parse,
    group="gm",
)
