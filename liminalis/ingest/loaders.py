"""Read campaign files into :class:`~liminalis.types.Document` safely.

Bad input is reported, never raised past the ingest loop: binary files, invalid UTF-8, empty
files, files over the size limit, unreadable paths and malformed front matter each become a
:class:`LoadError` with a reason a GM can act on.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from liminalis.campaign import CampaignConfig
from liminalis.ingest.chunking import content_hash
from liminalis.lens import GM, PLAYERS, parse_visibility
from liminalis.text import clean_text
from liminalis.types import Document

__all__ = ["LoadError", "load_document", "parse_document", "normalize_text", "SUPPORTED_SUFFIXES", "doc_id_for",
           "needs_escaped_ids"]

SUPPORTED_SUFFIXES = (".md", ".markdown", ".txt")
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_TITLE_LINE = re.compile(r"\A\s*#\s+(.+?)\s*#*\s*$", re.M)
#: A fence that is not ``---`` (``----``, TOML's ``+++``), and the lines after it up to the next.
_OTHER_FENCE = re.compile(r"\A(?:-{4,}|\+{3,})[ \t]*\n(.*?)(?:\n(?:-{3,}|\+{3,})[ \t]*(?:\n|\Z)|\Z)", re.S)
_KEY_LINE = re.compile(r"[ \t]*([\w-]+)[ \t]*:(?:\s|\Z)")
_VISIBILITY_LINE = re.compile(r"^[ \t]*visibility[ \t]*[:=]", re.I | re.M)


class _FrontMatterLoader(yaml.SafeLoader):
    """YAML's safe loader without implicit timestamps (``date: 2026-13-45`` stays a string: a GM's
    typo must not fail the file, and no field here wants a date object) and without aliases:
    ``*ref`` lets a few lines name a structure that grows exponentially when it is turned into
    text (the "billion laughs"), and front matter never needs them."""

    def compose_node(self, parent: object, index: object) -> object:
        if self.check_event(yaml.AliasEvent):
            raise LoadError("malformed front matter (YAML aliases such as *name are not supported)")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        """Refuse a key given twice (in any case): YAML keeps the last silently, so
        ``visibility: gm`` above ``Visibility: players`` would publish the file."""
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = str(key_node.value).strip().lower()
                if key in seen:
                    raise LoadError(f"malformed front matter (`{key}` is given twice)")
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_FrontMatterLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _front_matter(source: str) -> object:
    """Parse front matter, or raise :class:`LoadError` with a line number where YAML gives one."""
    try:
        return yaml.load(source, Loader=_FrontMatterLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise LoadError(f"malformed front matter{where}") from None
    except (ValueError, TypeError, RecursionError):  # a value YAML parsed but could not build
        raise LoadError("malformed front matter (a value could not be read)") from None


class LoadError(Exception):
    """A file that cannot be ingested; ``reason`` is safe to show the uploader."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def normalize_text(text: str) -> str:
    """NFC, ``\\n`` line ends, no control characters or lone surrogates, trailing spaces gone."""
    text = clean_text(text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def doc_id_for(rel_path: str) -> str:
    """Document id: the campaign-relative POSIX path without its suffix."""
    p = PurePosixPath(rel_path)
    return str(p.with_suffix("")) if p.suffix.lower() in SUPPORTED_SUFFIXES else str(p)


def needs_escaped_ids(doc_id: str) -> bool:
    """A document named with ``"`` or ``\\``: pymilvus's query iterator pastes primary keys into
    its expressions unescaped, so its vector ids are escaped (liminalis.ingest.indexer.vector_id)."""
    return '"' in doc_id or "\\" in doc_id


def _decode(raw: bytes) -> str:
    if not raw.strip():
        raise LoadError("empty file")
    if b"\x00" in raw[:8192]:
        raise LoadError("binary file (contains NUL bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError(f"not valid UTF-8 (byte {exc.start})") from None


def _as_tuple(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return (str(value).strip(),) if str(value).strip() else ()


def _without_invisible_lead(text: str) -> str:
    """The text from its first visible character: blank lines, spaces, a byte-order mark and
    other format characters (zero-width, direction marks, soft hyphens: Unicode ``Cf``) before an
    opening ``---`` must not hide the front matter. Read as body text, a GM's ``visibility: gm``
    after a stray blank line would publish the file to players."""
    i = 0
    while i < len(text) and (text[i].isspace() or unicodedata.category(text[i]) == "Cf"):
        i += 1
    return text[i:]


def _looks_like_front_matter(block: str) -> bool:
    """Whether the lines between two fences are front matter, not prose between two horizontal
    rules: they name ``visibility`` (fail closed), or their first line (past YAML comments) is a
    ``key:`` line."""
    if _VISIBILITY_LINE.search(block):
        return True
    first = next((ln for ln in block.split("\n") if ln.strip() and not ln.lstrip().startswith("#")), "")
    return bool(_KEY_LINE.match(first))


def _refuse_misplaced_visibility(head: str, config: CampaignConfig) -> None:
    """A file with no ``---`` front matter that still says who may read it: ``visibility: gm``
    between ``----`` or ``+++`` fences, or in ``key: value`` lines opening the file. It meant
    front matter; refuse it rather than publish what it meant to hide. A stat block's
    ``Visibility: poor (fog)`` names no lens and is left alone."""
    m = _OTHER_FENCE.match(head)
    if m and _VISIBILITY_LINE.search(m.group(1)):
        raise LoadError("malformed front matter (open and close it with a line of three dashes: ---)")
    words = {GM, PLAYERS, "player", "public", "all", *config.lenses}
    for line in head.split("\n"):
        km = _KEY_LINE.match(line)
        if not km:
            return
        if km.group(1).lower() == "visibility":
            value = line[km.end():].strip().strip("[]").replace("'", "").replace('"', "")
            names = [v.strip().lower() for v in value.split(",") if v.strip()]
            if names and all(n in words for n in names):
                raise LoadError("`visibility:` must sit in front matter, between two lines of three dashes (---)")


def parse_document(raw: bytes, rel_path: str, config: CampaignConfig) -> Document:
    """Turn one file's bytes into a Document (raises :class:`LoadError`)."""
    # Line endings first: a file saved on Windows ("---\r\n") must not lose its front matter —
    # its visibility with it, which would publish a GM-only file to players.
    text = _decode(raw).replace("\r\n", "\n").replace("\r", "\n")
    meta: dict[str, object] = {}
    body = _without_invisible_lead(text)
    m = _FRONT.match(body)
    if m and _looks_like_front_matter(m.group(1)):
        loaded = _front_matter(m.group(1))
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise LoadError("malformed front matter (not a mapping)")
        meta = {str(k).lower(): v for k, v in loaded.items()}
        body = body[m.end():]
    elif not m and body.startswith("---\n") and _looks_like_front_matter(body[4:].split("\n\n", 1)[0]):
        raise LoadError("malformed front matter (no closing ---)")
    else:
        _refuse_misplaced_visibility(body, config)
    body = normalize_text(body)
    if not body:
        raise LoadError("empty document (no text after front matter)")
    gm_path = config.is_gm_path(rel_path)
    if "visibility" in meta and meta["visibility"] is None:
        meta["visibility"] = ""  # "visibility:" with no value: not understood, so GM-only
    visibility = parse_visibility(meta.get("visibility"), known_lenses=config.lenses, gm_path=gm_path)
    title = str(meta.get("title") or "").strip()
    if not title:
        tm = _TITLE_LINE.search(body[:500])
        title = tm.group(1).strip() if tm else PurePosixPath(rel_path).stem.replace("-", " ").replace("_", " ").title()
    synopsis = str(meta.get("summary") or meta.get("synopsis") or "").strip()
    doc_type = str(meta.get("type") or "lore").strip().lower()
    tags = _as_tuple(meta.get("tags"))
    # The summary feeds contextual embeddings and the title vectors, so editing it must re-embed;
    # added to the hash only when present, so documents without one keep their hashes.
    extra = (f"\x1fsummary:{synopsis}" if synopsis else "") + (f"\x1ftags:{tags!r}" if tags else "")
    # Such a document is re-embedded once under escaped vector ids (its old rows failed every
    # exact search); every other document keeps its hash.
    doc_id = doc_id_for(rel_path)
    extra += "\x1fids:escaped" if needs_escaped_ids(doc_id) else ""
    return Document(
        doc_id=doc_id,
        path=rel_path,
        title=normalize_text(title)[:300],
        text=body,
        visibility=visibility,
        type=doc_type,
        aliases=_as_tuple(meta.get("aliases")),
        tags=tags,
        content_hash=content_hash(title + "\x1f" + body + "\x1f" + repr(sorted(visibility)) + doc_type
                                  + repr(meta.get("aliases")) + extra),
        synopsis=normalize_text(synopsis)[:600],
    )


def load_document(path: Path, rel_path: str, config: CampaignConfig, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Document:
    """Read and parse one file (raises :class:`LoadError`)."""
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise LoadError(f"unsupported file type '{path.suffix or 'none'}' (use .md or .txt)")
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise LoadError(f"file too large ({size:,} bytes; limit {max_bytes:,})")
        raw = path.read_bytes()
    except OSError as exc:
        raise LoadError(f"unreadable ({exc.strerror or 'I/O error'})") from None
    return parse_document(raw, rel_path, config)
