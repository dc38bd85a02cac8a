"""Read campaign files into :class:`~liminalis.types.Document` safely.

Bad input is reported, never raised past the ingest loop: binary files, text in no known
encoding, empty files, files over the size limit, unreadable paths, scanned PDFs and malformed
front matter each become a :class:`LoadError` with a reason a GM can act on.

Markdown and text files may be in any common encoding; PDFs and Word documents are read as text
by :mod:`liminalis.ingest.formats` (headings as ``#`` lines, so hidden sections work in them as
in Markdown). A PDF's pages stay structure: each view records where each page starts in its
text (:attr:`~liminalis.types.Document.pages`), so a passage's heading path can end ``p. 12``.
A binary file has no front matter; an upload's visibility is kept beside it in a sidecar
(:func:`sidecar_of`) that counts only for the exact bytes it was written for.
"""

from __future__ import annotations

import hashlib
import logging
import re
import tomllib
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

import yaml

from liminalis.campaign import CampaignConfig
from liminalis.ingest.chunking import content_hash
from liminalis.ingest.formats import (
    BINARY_SUFFIXES,
    TEXT_SUFFIXES,
    Extracted,
    LoadError,
    decode_text,
    extract_docx,
    extract_pdf,
    plain_wikilinks,
)
from liminalis.ingest.ids import bound_doc_id
from liminalis.ingest.intent import (
    Intent,
    body_properties,
    meta_intent,
    path_intent,
    property_intent,
)
from liminalis.ingest.sections import (
    HeldBack,
    HiddenSection,
    View,
    find_hidden_sections,
    section_digest,
    source_of,
    split_views,
    view_id,
    without_gm_asides,
)
from liminalis.ingest.synopsis import extractive_synopsis
from liminalis.ingest.syntaxes import comment_gate
from liminalis.ingest.titles import document_title, file_title
from liminalis.lens import GM, NOT_GM, PLAYERS, narrowest, parse_visibility
from liminalis.text import clean_text
from liminalis.types import Document

__all__ = [
    "LoadError",
    "ParsedFile",
    "load_file",
    "load_document",
    "parse_file",
    "parse_document",
    "with_front_matter",
    "normalize_text",
    "SUPPORTED_SUFFIXES",
    "BINARY_SUFFIXES",
    "doc_id_for",
    "sidecar_of",
    "sidecar_fits",
    "sidecar_source",
    "write_sidecar",
    "source_of",
    "needs_escaped_ids",
]

_log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = TEXT_SUFFIXES + BINARY_SUFFIXES
#: What an unsupported file's reason suggests instead.
SUPPORTED_WORDS = "use .md, .txt, .pdf or .docx"
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
#: ``---`` (or ``---yaml``, ``--- # a comment``) … ``---`` or ``...``.
_FRONT = re.compile(
    r"\A---[ \t]*(?:ya?ml)?[ \t]*(?:#[^\n]*)?\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:#[^\n]*)?(?:\n|\Z)",
    re.S | re.I,
)
#: Hugo's TOML front matter: ``+++`` … ``+++``, read with the keys YAML front matter has.
_TOML_FRONT = re.compile(r"\A\+\+\+[ \t]*\n(.*?)\n?\+\+\+[ \t]*(?:\n|\Z)", re.S)
#: Line ends besides ``\n`` that Python's ``splitlines`` (and so an editor) honours: a front matter
#: written with them must still be read as front matter, not as one long first line of prose.
_LINE_ENDS = re.compile("\r\n|[\r\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e]")
#: How far into a document a ``visibility`` outside front matter is still read as meant for it.
_HEAD_LINES = 12
#: ``key: value`` pairs in a document's first lines, as YAML, JSON, TOML or bold Markdown write them.
_ANY_KEY = re.compile(
    r"(?:^|[\s{,;(])[*_\"'`]*([A-Za-z][\w -]{0,24}?)[*_\"'`]*[ \t]*[:=][*_ \t]*((?:[^;},\n]|,(?![ \t]*[\"']?[A-Za-z][\w -]{0,24}[\"']?[ \t]*:))*)",
    re.M,
)
_FLAG_KEYS = frozenset({"gm", "secret", "private", "hidden", "gmonly", "dm", "dmonly"})
#: Flags read in a document's first lines outside front matter: not ``hidden``/``private``/``dm``,
#: which a trap's stat block or a transcript writes as ordinary text.
_BODY_FLAG_KEYS = frozenset({"gm", "secret", "gmonly", "dmonly"})
#: A flag's values that set it. An empty one (``secret:``, a template's unfilled field) says
#: nothing either way.
_TRUTHY = frozenset({"true", "yes", "y", "on", "1", "gm", "only", "gm only"})
_TRUTHY_BODY = frozenset({"true", "yes", "y", "on", "1", "gm only"})
_LENS_WORDS = frozenset({"gm", "dm", "players", "player", "public", "private", "secret", "hidden"})
#: Near misses of ``visibility`` a GM types: within two edits of it, ``visible``, or starting ``visib``.
#: A fence that is not ``---`` (``----``, TOML's ``+++``), and the lines after it up to the next.
_OTHER_FENCE = re.compile(
    r"\A(?:-{4,}|\+{3,})[ \t]*\n(.*?)(?:\n(?:-{3,}|\+{3,})[ \t]*(?:\n|\Z)|\Z)", re.S
)
_KEY_LINE = re.compile(r"[ \t]*([\w-]+)[ \t]*:(?:\s|\Z)")
_VISIBILITY_LINE = re.compile(r"^[ \t]*visibility[ \t]*[:=]", re.I | re.M)


class _FrontMatterLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
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
        mapping: dict[object, object] = super().construct_mapping(node, deep=deep)
        return mapping


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


def normalize_text(text: str) -> str:
    """NFC, ``\\n`` line ends, no control characters or lone surrogates, trailing spaces gone."""
    text = clean_text(text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def doc_id_for(rel_path: str) -> str:
    """Document id: the campaign-relative POSIX path without its suffix, bounded so every id
    built on it fits the vector store (:func:`liminalis.ingest.ids.bound_doc_id`)."""
    p = PurePosixPath(rel_path)
    return bound_doc_id(
        str(p.with_suffix("")) if p.suffix.lower() in SUPPORTED_SUFFIXES else str(p)
    )


def needs_escaped_ids(doc_id: str) -> bool:
    """A document named with ``"`` or ``\\``: pymilvus's query iterator pastes primary keys into
    its expressions unescaped, so its vector ids are escaped (liminalis.ingest.indexer.vector_id)."""
    return '"' in doc_id or "\\" in doc_id


def _decode(raw: bytes) -> str:
    """A text file's bytes as text, in whatever encoding they are (raises :class:`LoadError`)."""
    return decode_text(raw)


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
    first = next(
        (ln for ln in block.split("\n") if ln.strip() and not ln.lstrip().startswith("#")), ""
    )
    return bool(_KEY_LINE.match(first))


def _near_visibility(key: str) -> bool:
    """``visiblity``, ``Visibilty``, ``visible``, ``vis-ibility``: a key a GM meant as ``visibility``."""
    k = _norm_key(key)
    return k.startswith("visib") or k == "visible" or _edits(k, "visibility") <= 2


def _norm_key(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "").replace(" ", "")


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions), for short keys."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _names_a_lens(value: str, config: CampaignConfig) -> bool:
    words = set(re.findall(r"[a-z]+", value.lower()))
    return bool(words & (_LENS_WORDS | set(config.lenses)))


#: Values a misplaced ``Visibility:`` may name without hiding anything: every player. A Notion
#: page's ``Visibility: Players`` property says what the page already is, so nothing is lost.
_EVERY_PLAYER = frozenset({"players", "player", "everyone", "all", "public", "party", "table"})


def _players_only(value: str) -> bool:
    """Whether a visibility value names every player and nothing narrower (``Players``)."""
    words = [w for w in re.split(r"[\s,;/|]+", value.lower()) if w]
    return bool(words) and all(w in _EVERY_PLAYER for w in words)


def _refuse_misplaced_visibility(head: str, config: CampaignConfig, *, after_front: bool) -> None:
    """Fail closed on a visibility a GM meant but the parser did not read: in the first lines of
    a document outside its parsed front matter, a ``visibility`` (or a near miss of it) that
    names a lens, or a ``gm``/``secret``/``private``/``hidden`` flag. It sits after the closing
    ``---``, in a block after a title line, between fences other than ``---`` (``----``, ``+++``,
    ``;;;``), in JSON front matter, or with no fences at all: refuse the file with a reason the GM
    can act on rather than publish what it meant to hide. A stat block's ``Visibility: poor
    (fog)`` names no lens and is left alone."""
    lines = [ln for ln in head.split("\n") if ln.strip()]
    cut = _HEAD_LINES
    fences = [
        n
        for n, ln in enumerate(lines[:_HEAD_LINES])
        if re.fullmatch(r"[ \t]*(?:-{3,}|\+{3,}|;{3})[^\n]*", ln)
    ]
    if fences:  # a fenced block among the first lines is read whole, however long
        after = next(
            (
                n
                for n, ln in enumerate(lines[fences[0] + 1 :], fences[0] + 1)
                if re.fullmatch(r"[ \t]*(?:-{3,}|\+{3,}|;{3}|\.{3})[ \t]*", ln)
            ),
            fences[0] + 200,
        )
        cut = max(cut, after + 1)
    lines = lines[:cut]
    for n, line in enumerate(lines):
        for m in _ANY_KEY.finditer(line):
            key, value = (
                _norm_key(m.group(1)),
                m.group(2).strip().rstrip(",}").strip().strip("\"'`*_ "),
            )
            # ``GM: yes`` is a line of a transcript far more often than a flag: only ``true``.
            flag = key in _BODY_FLAG_KEYS and value.lower() in (
                _TRUTHY_BODY if key not in {"gm", "dm"} else {"true"}
            )
            vis = (
                _near_visibility(key)
                and bool(value)
                and _names_a_lens(value, config)
                and not _players_only(value)
            )
            if not (flag or vis):
                continue
            what = f"`{m.group(1).strip()}:`"
            titled = next(
                (k for k, ln in enumerate(lines[:n]) if ln.lstrip().startswith("#")), None
            )
            if after_front:
                where = "below the front matter: move it up, between the two lines of three dashes (---)"
            elif line.lstrip().startswith(("{", '"')) or head.lstrip().startswith("{"):
                where = "in JSON front matter: write front matter as YAML between two lines of three dashes (---)"
            elif titled is not None and any(ln.strip().startswith("---") for ln in lines[titled:n]):
                where = (
                    "after a title line: front matter must open the file, so move the `# Title` line below "
                    "its closing ---"
                )
            else:
                where = "outside front matter: put it between two lines of three dashes (---) at the top of the file"
            raise LoadError(f"malformed front matter ({what} {where})")


def _check_keys(meta: dict[str, object]) -> None:
    """A front-matter key that is a misspelt ``visibility`` is refused: read as an unknown key it
    would leave the file published to players."""
    for key in meta:
        if key != "visibility" and _near_visibility(key):
            raise LoadError(
                f"malformed front matter (`{key}` is not a key: did you mean `visibility`?)"
            )


def _flagged_gm(meta: dict[str, object]) -> bool:
    """``secret: true``, ``gm: yes``, ``hidden: true``, ``private: true``: the GM said GM-only."""
    for key, value in meta.items():
        if _norm_key(key) in _FLAG_KEYS:
            v = "" if value is None else str(value).strip().lower()
            if v in _TRUTHY:
                return True
    return False


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """One file read: the documents its readers get (one per view; see
    :mod:`liminalis.ingest.sections`), how many hidden sections it holds, and warnings for the
    GM (a hidden section never closed)."""

    doc_id: str
    views: tuple[Document, ...]
    visibility: frozenset[str]
    type: str
    hidden_sections: int = 0
    warnings: tuple[str, ...] = ()
    #: Whether the file itself says who reads it (front matter, a flag, a GM folder).
    declared: bool = False
    #: ``(visibility of the view it is in, target, alias)`` of each ``[[Target|alias]]`` link.
    links: tuple[tuple[frozenset[str], str, str], ...] = ()
    #: What the wall held back and why, for the ingest report and the GM's review.
    held_back: tuple[HeldBack, ...] = ()


def _held_back(
    body: str, sections: list[HiddenSection], held_file: tuple[str, str] | None
) -> tuple[HeldBack, ...]:
    out = []
    if held_file is not None:
        rule, digest = held_file
        out.append(HeldBack(1, rule, digest, True, " ".join(body.split())[:200]))
    for h in sections:
        excerpt = " ".join(body[h.start : h.end].split())[:200]
        out.append(HeldBack(h.line, h.rule or h.kind, h.digest, not h.explicit, excerpt))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Source:
    """A file read to text: its body (front matter cut), its front matter, a PDF's pages, the
    extractor's warnings, and the page properties its body states (Dataview, Notion)."""

    body: str
    meta: dict[str, object]
    pages: list[tuple[int, str]]
    notes: tuple[str, ...]
    properties: Intent | None = None
    #: A GM mark a PDF or Word document states of itself outside its text (metadata title,
    #: running head, page header): held whole, reviewable, like a GM word in its file name.
    mark: Intent | None = None


def _read_binary(raw: bytes, rel_path: str, config: CampaignConfig) -> _Source:
    """A PDF's or a Word document's text. No front matter there, but a `visibility: gm` in its
    first lines is still a GM's word: refuse rather than publish."""
    suffix = PurePosixPath(rel_path).suffix.lower()
    extracted = extract_pdf(raw) if suffix == ".pdf" else extract_docx(raw)
    body, pages = _paged_text(extracted)
    meta: dict[str, object] = {}
    if pages:
        # A PDF's first bookmark is a chapter, not the book: its metadata or file name is.
        meta["title"] = extracted.title or file_title(rel_path)
    _refuse_misplaced_visibility(body, config, after_front=False)
    mark = Intent("document mark", extracted.gm_mark) if extracted.gm_mark else None
    return _Source(body, meta, pages, extracted.warnings, mark=mark)


def _parse_front(m: re.Match[str]) -> dict[str, object]:
    """The front matter ``m`` matched, YAML (``---``) or TOML (``+++``, Hugo's), as a mapping
    with lower-case keys (raises :class:`LoadError`)."""
    if m.re is _TOML_FRONT:
        try:
            loaded: object = tomllib.loads(m.group(1))
        except (tomllib.TOMLDecodeError, ValueError, RecursionError):
            raise LoadError("malformed front matter (TOML between +++ lines)") from None
    else:
        loaded = _front_matter(m.group(1))
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise LoadError("malformed front matter (not a mapping)")
    meta = {str(k).lower(): v for k, v in loaded.items()}
    _check_keys(meta)
    return meta


def _read_text(raw: bytes, config: CampaignConfig) -> _Source:
    """A Markdown or text file: its front matter read (YAML or TOML), a visibility the GM
    meant but wrote where front matter is not refused, and its page properties read."""
    body = _without_invisible_lead(_LINE_ENDS.sub("\n", _decode(raw)))
    m = _FRONT.match(body) or _TOML_FRONT.match(body)
    meta: dict[str, object] = {}
    if m and (m.re is _TOML_FRONT or _looks_like_front_matter(m.group(1))):
        meta = _parse_front(m)
        body = body[m.end() :]
        after_front = True
    elif (
        (not m)
        and re.match(r"---[ \t]*\n", body)
        and _looks_like_front_matter(body[4:].split("\n\n", 1)[0])
    ):
        raise LoadError("malformed front matter (no closing ---)")
    else:
        after_front = False
    # Page properties a GM's tool writes in the body (``visibility:: gm``, a Notion export's
    # ``Visibility: GM``) are read as what they are, not refused as a misplaced front matter.
    properties = property_intent(body_properties(body))
    if properties is None:
        _refuse_misplaced_visibility(body, config, after_front=after_front)
    return _Source(body, meta, [], (), properties)


def _read_source(raw: bytes, rel_path: str, config: CampaignConfig) -> _Source:
    """Stage one of :func:`parse_file`: the file's text and what it says of itself."""
    if PurePosixPath(rel_path).suffix.lower() in BINARY_SUFFIXES:
        source = _read_binary(raw, rel_path, config)
    else:
        source = _read_text(raw, config)
    body = source.body if source.pages else normalize_text(source.body)
    if not body:
        raise LoadError("empty document (no text after front matter)")
    return replace(source, body=body)


@dataclass(frozen=True, slots=True)
class _Audience:
    """Who reads a file: its visibility, whether the file says so itself, and what the wall
    held back of it whole (the rule and the body's digest), if anything."""

    vis: frozenset[str]
    said: bool
    held_file: tuple[str, str] | None


def _audience(
    source: _Source,
    rel_path: str,
    config: CampaignConfig,
    visibility: frozenset[str] | None,
) -> _Audience:
    """Stage two of :func:`parse_file`: the file's readers, from its front matter, its path,
    the GM's habits (held back whole unless reviewed and shown) and an uploader's option."""
    meta = source.meta
    gm_path = config.is_gm_path(rel_path)
    if "visibility" in meta and meta["visibility"] is None:
        meta["visibility"] = ""  # "visibility:" with no value: not understood, so GM-only
    said = "visibility" in meta or gm_path or _flagged_gm(meta)
    # An upload is saved with the visibility it was given (bot.service): one that says nothing
    # (saved by an earlier version, or put there by hand) is GM-only.
    default = GM if rel_path.startswith("uploads/") else PLAYERS
    vis = parse_visibility(
        meta.get("visibility"), known_lenses=config.lenses, gm_path=gm_path, default=default
    )
    if _flagged_gm(meta):
        vis = frozenset({GM})
    # A GM's habits outside the documented syntax (a `DM/` folder, `publish: false`, `tags: [gm]`,
    # a nested `visibility: gm`, `visibility:: gm` in the body): GM-only unless the GM reviewed
    # this text and chose to show it.
    habit = meta_intent(meta, known_lenses=config.lenses) or source.properties or source.mark
    if habit is None and "visibility" not in meta and not said:
        habit = path_intent(rel_path)
    held_file: tuple[str, str] | None = None
    if habit is not None and vis != frozenset({GM}):
        digest = section_digest(source.body)
        if digest not in config.released:
            vis = frozenset({GM})
            held_file = (f"{habit.rule} “{habit.words}”"[:120], digest)
    if visibility is not None:
        # The uploader's option decides a file that says nothing; front matter that says more
        # wins only where it is narrower.
        vis = narrowest(vis, visibility) if said else visibility
    return _Audience(vis, said, held_file)


def _sections(
    body: str, suffix: str, vis: frozenset[str], config: CampaignConfig
) -> list[HiddenSection]:
    """Stage three of :func:`parse_file`: the hidden sections of a file its readers get."""
    sections = find_hidden_sections(
        comment_gate(body, suffix), lenses=config.lenses, released=config.released
    )
    if vis == frozenset({GM}):
        # Nothing of a GM-only file reaches players: what habit would hold in it is not held
        # back from anyone, and asks no review.
        sections = [h for h in sections if h.explicit]
    return sections


def _documents(
    source: _Source,
    sections: list[HiddenSection],
    vis: frozenset[str],
    *,
    rel_path: str,
    kind: str,
) -> tuple[tuple[Document, ...], list[tuple[frozenset[str], str, str]]]:
    """Stage four of :func:`parse_file`: one document per view, and the wikilinks of each."""
    doc_id = doc_id_for(rel_path)
    body, pages = source.body, source.pages
    paged = (
        _paged_views(body, sections, vis, pages)
        if pages
        else [(view, ()) for view in split_views(body, sections, vis)]
    )
    links: list[tuple[frozenset[str], str, str]] = []
    views_list: list[Document] = []
    for view, view_pages in paged:
        text = view.text
        if not view_pages:  # a PDF's text holds no wikilinks, and its page offsets must hold
            text, found = plain_wikilinks(text)
            links += [(view.visibility, target, alias) for target, alias in found]
        views_list.append(
            _view_document(
                source.meta,
                text,
                view.visibility,
                view_id(doc_id, view.key),
                rel_path,
                kind,
                personal=view.key.removeprefix("lens:") if view.key.startswith("lens:") else "",
                pages=view_pages,
            )
        )
    views = tuple(views_list)
    if sections and not views[0].synopsis:
        # The GM's text and the shared view embed under one synopsis drawn from the shared text:
        # an edit inside a hidden section then re-embeds only the passages it touches (a synopsis
        # change re-embeds every passage of a document), and no synopsis quotes a secret.
        shared = next((v for v in views if v.doc_id == doc_id), views[0])
        synopsis = extractive_synopsis(shared.title, shared.text)
        views = tuple(
            replace(v, synopsis=synopsis) if v.doc_id in {doc_id, view_id(doc_id, "gm")} else v
            for v in views
        )
    return views, links


def parse_file(
    raw: bytes,
    rel_path: str,
    config: CampaignConfig,
    *,
    visibility: frozenset[str] | None = None,
    doc_type: str | None = None,
) -> ParsedFile:
    """Turn one file's bytes into the documents each lens reads (raises :class:`LoadError`).

    ``visibility`` and ``doc_type`` are an uploader's options: the visibility applies only where
    it is narrower than the front matter's (:func:`~liminalis.lens.narrowest`); the type wins.
    Four stages: the file's text and what it says of itself, its readers, its hidden sections,
    and the documents of its views.
    """
    source = _read_source(raw, rel_path, config)
    audience = _audience(source, rel_path, config, visibility)
    sections = _sections(source.body, PurePosixPath(rel_path).suffix.lower(), audience.vis, config)
    warnings = source.notes + tuple(
        f"a hidden {h.kind} opened on line {h.line} is never closed: everything after it is GM-only"
        for h in sections
        if not h.terminated
    )
    kind = (doc_type or str(source.meta.get("type") or "lore")).strip().lower()
    views, links = _documents(source, sections, audience.vis, rel_path=rel_path, kind=kind)
    return ParsedFile(
        doc_id=doc_id_for(rel_path),
        views=views,
        visibility=audience.vis,
        type=kind,
        hidden_sections=len(sections),
        warnings=warnings,
        declared=audience.said or audience.held_file is not None,
        held_back=_held_back(source.body, sections, audience.held_file),
        links=tuple(links),
    )


def _paged_text(extracted: Extracted) -> tuple[str, list[tuple[int, str]]]:
    """An extracted document's text and, for a PDF, where each page with text starts in it
    (each page normalized alone and joined by one blank line, so the whole is already normal
    and the offsets hold)."""
    if not extracted.pages:
        return normalize_text(extracted.text), []
    parts: list[str] = []
    starts: list[tuple[int, str]] = []
    pos = 0
    for page in extracted.pages:
        text = normalize_text(page.text)
        if not text:
            continue
        if parts:
            pos += 2
        starts.append((pos, page.label))
        parts.append(text)
        pos += len(text)
    return "\n\n".join(parts), starts


def _paged_views(
    body: str,
    sections: list[HiddenSection],
    visibility: frozenset[str],
    pages: list[tuple[int, str]],
) -> list[tuple[View, tuple[tuple[int, str], ...]]]:
    """:func:`~liminalis.ingest.sections.split_views` page by page: what each view reads of each
    page, with where each page starts in the view's text. Sections are found over the whole
    text (a ``(GM)`` chapter hides every page up to the next chapter) and cut page by page, so
    each view holds exactly what :func:`split_views` gives it, a blank line between pages."""
    bounds = [*(start for start, _ in pages[1:]), len(body) + 2]
    pieces: dict[str, list[tuple[str, str]]] = {}
    for (start, label), nxt in zip(pages, bounds, strict=True):
        end = nxt - 2  # the blank line between pages belongs to neither
        clipped = [
            HiddenSection(
                max(h.start, start) - start,
                min(h.end, end) - start,
                h.audience,
                h.kind,
                h.line,
                h.terminated,
            )
            for h in sections
            if h.start < end and h.end > start
        ]
        page_views = split_views(body[start:end], clipped, visibility)
        if sections and not clipped and len(page_views) == 1:
            # Nothing hidden on this page of a document that hides something: the GM's whole
            # text and the shared view both read it.
            (only,) = page_views
            page_views = [View("gm", only.text, frozenset()), only]
        for view in page_views:
            pieces.setdefault(view.key, []).append((label, normalize_text(view.text)))
    whole = split_views(body, sections, visibility)  # the views and visibilities to give
    out: list[tuple[View, tuple[tuple[int, str], ...]]] = []
    for view in whole:
        parts: list[str] = []
        starts: list[tuple[int, str]] = []
        pos = 0
        for label, text in pieces.get(view.key, []):
            if not text:
                continue
            if parts:
                pos += 2
            starts.append((pos, label))
            parts.append(text)
            pos += len(text)
        text = "\n\n".join(parts)
        if text.strip():
            out.append((View(view.key, text, view.visibility), tuple(starts)))
    return out


def _view_document(
    meta: dict[str, object],
    body: str,
    visibility: frozenset[str],
    doc_id: str,
    rel_path: str,
    doc_type: str,
    *,
    personal: str = "",
    pages: tuple[tuple[int, str], ...] = (),
) -> Document:
    """One view of a file as a :class:`Document`: its title, type, aliases and tags from the
    front matter (which every reader of the file sees), its text what this view's readers see."""
    normal = normalize_text(body)
    if pages and normal != body:  # never expected (pages are joined normal); offsets would drift
        _log.warning("page offsets dropped for %s: its text was not normal", doc_id)
        pages = ()
    body = normal
    # A PDF's first heading is its first chapter, not another name of the book.
    head = "" if pages else body
    title, also = document_title(str(meta.get("title") or ""), head, rel_path)
    declared = (without_gm_asides(a) for a in _as_tuple(meta.get("aliases")))
    aliases = tuple(dict.fromkeys(a for a in [*declared, *also] if a))
    if personal:
        title = f"{title} ({personal.title()} only)"
    synopsis = str(meta.get("summary") or meta.get("synopsis") or "").strip()
    tags = _as_tuple(meta.get("tags"))
    # The summary feeds contextual embeddings and the title vectors, so editing it must re-embed;
    # added to the hash only when present, so documents without one keep their hashes.
    extra = (f"\x1fsummary:{synopsis}" if synopsis else "") + (f"\x1ftags:{tags!r}" if tags else "")
    # Such a document is re-embedded once under escaped vector ids (its old rows failed every
    # exact search); every other document keeps its hash.
    extra += "\x1fids:escaped" if needs_escaped_ids(doc_id) else ""
    extra += f"\x1fpages:{pages!r}" if pages else ""
    extra += f"\x1ftitles:{also!r}" if also else ""
    return Document(
        doc_id=doc_id,
        path=rel_path,
        title=normalize_text(title)[:300],
        text=body,
        visibility=visibility,
        type=doc_type,
        aliases=aliases,
        tags=tags,
        content_hash=content_hash(
            title
            + "\x1f"
            + body
            + "\x1f"
            + repr(sorted(visibility))
            + doc_type
            + repr(meta.get("aliases"))
            + extra
        ),
        synopsis=normalize_text(synopsis)[:600],
        pages=pages,
    )


def with_front_matter(
    raw: bytes,
    *,
    visibility: frozenset[str] | None = None,
    doc_type: str | None = None,
    aliases: tuple[str, ...] = (),
) -> bytes:
    """``raw`` with ``visibility`` and ``type`` set in its front matter (added when it has none):
    how an upload keeps the visibility and type its uploader chose on every later re-read.
    The caller passes the visibility :func:`parse_file` gave the file with those options, so
    a front matter narrower than the option stays as narrow. ``aliases`` are added to the
    front matter's own (a vault's ``[[file|alias]]`` links). Raises :class:`LoadError`."""
    text = _LINE_ENDS.sub("\n", _decode(raw))
    body = _without_invisible_lead(text)
    meta: dict[str, object] = {}
    m = _FRONT.match(body)
    if m and _looks_like_front_matter(m.group(1)):
        loaded = _front_matter(m.group(1)) or {}
        if not isinstance(loaded, dict):
            raise LoadError("malformed front matter (not a mapping)")
        replaced = {"visibility"} | ({"type"} if doc_type else set())
        meta = {str(k): v for k, v in loaded.items() if str(k).lower() not in replaced}
        body = body[m.end() :]
    if visibility is not None:
        names = sorted(set(visibility) - {GM, NOT_GM})
        meta["visibility"] = names if names else GM
    if doc_type:
        meta["type"] = doc_type
    if aliases:
        key = next((k for k in meta if k.lower() == "aliases"), "aliases")
        had = _as_tuple(meta.get(key))
        meta[key] = list(dict.fromkeys([*had, *aliases]))
    head = yaml.safe_dump(
        meta, sort_keys=False, allow_unicode=True, default_flow_style=False
    ).strip()
    return f"---\n{head}\n---\n{body}".encode()


def parse_document(raw: bytes, rel_path: str, config: CampaignConfig) -> Document:
    """The whole file as one document, as its GM reads it: every hidden section in place, the
    visibility the front matter and folder give the file (raises :class:`LoadError`). What each
    lens reads is :func:`parse_file`'s ``views``."""
    parsed = parse_file(raw, rel_path, config)
    whole = parsed.views[0]
    return Document(
        doc_id=parsed.doc_id,
        path=whole.path,
        title=whole.title,
        text=whole.text,
        visibility=parsed.visibility,
        type=whole.type,
        aliases=whole.aliases,
        tags=whole.tags,
        content_hash=whole.content_hash,
        synopsis=whole.synopsis,
        pages=whole.pages,
    )


def _read(path: Path, *, max_bytes: int) -> bytes:
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise LoadError(f"unsupported file type '{path.suffix or 'none'}' ({SUPPORTED_WORDS})")
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise LoadError(f"file too large ({size:,} bytes; limit {max_bytes:,})")
        return path.read_bytes()
    except OSError as exc:
        raise LoadError(f"unreadable ({exc.strerror or 'I/O error'})") from None


_SIDECAR_SUFFIX = ".liminalis.yaml"


def sidecar_of(path: Path) -> Path:
    """Where a PDF's or Word document's upload options are kept: a dot file beside it, which
    the campaign walk skips."""
    return path.with_name(f".{path.name}{_SIDECAR_SUFFIX}")


def sidecar_source(name: str) -> str | None:
    """The name of the PDF or Word document a file named ``name`` is the sidecar of (the
    inverse of :func:`sidecar_of`), or ``None`` when it is no sidecar."""
    if not (name.startswith(".") and name.endswith(_SIDECAR_SUFFIX)):
        return None
    source = name[1 : -len(_SIDECAR_SUFFIX)]
    if not source or source.startswith(".") or "/" in source:
        return None
    return source if PurePosixPath(source).suffix.lower() in BINARY_SUFFIXES else None


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def write_sidecar(
    path: Path,
    raw: bytes,
    *,
    visibility: frozenset[str],
    doc_type: str | None = None,
) -> None:
    """Record the visibility (and type) an upload of ``raw`` was given, for the file at
    ``path``. It counts only while the file holds exactly ``raw``: a file replaced by other
    bytes says nothing (an upload that says nothing is GM-only), so the order the sidecar and
    the file are written in can never publish a file under another's visibility."""
    names = sorted(set(visibility) - {GM, NOT_GM})
    meta: dict[str, object] = {"sha256": _digest(raw), "visibility": names if names else GM}
    if doc_type:
        meta["type"] = doc_type
    target = sidecar_of(path)
    tmp = target.with_name(target.name + ".part")
    tmp.write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
    tmp.replace(target)


def _sidecar_meta(sidecar: bytes, raw: bytes) -> dict[str, object] | None:
    """A sidecar's options when it was written for exactly ``raw``, else ``None``."""
    try:
        loaded = yaml.safe_load(sidecar.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(loaded, dict) or loaded.get("sha256") != _digest(raw):
        return None
    return loaded


def sidecar_fits(sidecar: bytes, raw: bytes) -> bool:
    """Whether the sidecar whose contents are ``sidecar`` was written for exactly ``raw`` (one
    that does not counts for nothing: its file is GM-only)."""
    return _sidecar_meta(sidecar, raw) is not None


def _sidecar_options(
    path: Path, raw: bytes, config: CampaignConfig
) -> tuple[frozenset[str] | None, str | None]:
    """The upload options a sidecar gives ``raw`` (``None``s when it has none that fits)."""
    try:
        loaded = _sidecar_meta(sidecar_of(path).read_bytes(), raw)
    except OSError:
        return None, None
    if loaded is None:
        return None, None
    vis = parse_visibility(
        loaded.get("visibility", GM), known_lenses=config.lenses, gm_path=False, default=GM
    )
    kind = loaded.get("type")
    return vis, str(kind) if isinstance(kind, str) and kind.strip() else None


def load_file(
    path: Path, rel_path: str, config: CampaignConfig, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> ParsedFile:
    """Read and parse one file into its views (raises :class:`LoadError`)."""
    raw = _read(path, max_bytes=max_bytes)
    if path.suffix.lower() in BINARY_SUFFIXES:
        visibility, doc_type = _sidecar_options(path, raw, config)
        return parse_file(raw, rel_path, config, visibility=visibility, doc_type=doc_type)
    return parse_file(raw, rel_path, config)


def load_document(
    path: Path, rel_path: str, config: CampaignConfig, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> Document:
    """Read and parse one file as one document (:func:`parse_document`; raises :class:`LoadError`)."""
    return parse_document(_read(path, max_bytes=max_bytes), rel_path, config)
