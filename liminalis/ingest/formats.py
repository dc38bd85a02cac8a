"""The GM's material as it is: text in any common encoding, PDF, Word, and the zip guard.

A GM's notes arrive as Word exports in Windows-1252, UTF-16 files from a Windows tool, PDFs of
a published adventure and ``.docx`` prep. Each is turned into text the loader reads as it reads
Markdown: headings become ``#`` lines (so a heading marked ``(GM)`` hides what is under it, as
in :mod:`liminalis.ingest.sections`), and a PDF keeps its pages as *structure*: a tuple of
:class:`Page`, each one page's text and printed label, never a marker inside the text.

Encoding detection: a byte-order mark decides; else strict UTF-8; else Windows-1252 when
charset-normalizer finds it decodes without mess (a short Western text is otherwise often
guessed as cp1250 or a Mac code page: "crème" read as "crčme"); else charset-normalizer's
best guess; else the file is refused as binary. A ``.docx`` is a zip archive and is read only
after :func:`check_zip` (member count, total size and compression ratio caps), so a zip bomb
named ``.docx`` is refused before python-docx inflates it.

Every :class:`LoadError` reason here is fixed text and numbers: never
a line of the document (which may be the GM's), a library's message or a path.
"""

from __future__ import annotations

import io
import logging
import re
import unicodedata
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import charset_normalizer

from liminalis.ingest.intent import name_intent
from liminalis.ingest.running_heads import gm_mark, running_gm_mark, strip_running_lines
from liminalis.ingest.titles import pdf_title

__all__ = [
    "BINARY_SUFFIXES",
    "TEXT_SUFFIXES",
    "LoadError",
    "Page",
    "Extracted",
    "ZipLimits",
    "check_zip",
    "decode_text",
    "extract_pdf",
    "extract_docx",
    "WIKILINK",
    "WORD_OPENERS",
    "plain_wikilinks",
]

_log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
BINARY_SUFFIXES = (".pdf", ".docx")

#: ``[[Target]]``, ``[[Target|alias]]``, ``[[Target#Heading|alias]]``, ``![[embed]]``.
WIKILINK = re.compile(r"(!?)\[\[([^\[\]\|\n]{1,300})(?:\|([^\[\]\n]{0,300}))?\]\]")
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
#: Characters no text file holds many of: C0/C1 controls (but tab and line ends), private use,
#: unassigned, replacement characters. More than this share of them: not text.
_JUNK_SHARE = 0.02
#: A page with fewer visible characters than this has no text layer worth the name (a scan's
#: page number or a stray OCR-less header).
_MIN_PAGE_CHARS = 16


class LoadError(Exception):
    """A file that cannot be ingested; ``reason`` is safe to show the uploader (never a line of
    the file, a path or a library's message)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Page:
    """One PDF page: its printed label (``"12"``, ``"iv"``) and its text, headings as ``#``
    lines."""

    label: str
    text: str


@dataclass(frozen=True, slots=True)
class Extracted:
    """A binary document read as text: ``pages`` for a PDF (``text`` empty), ``text`` for a
    Word document (no pages); ``warnings`` for the GM (pages with no text layer)."""

    text: str = ""
    pages: tuple[Page, ...] = ()
    warnings: tuple[str, ...] = ()
    #: The document's own title (a PDF's metadata), where it gives a sensible one.
    title: str = ""
    #: A GM mark the document states of itself outside its text (a PDF's metadata title or
    #: running head, a Word page header: "Secrets of the Keep (GM only)"), else ``""``: the
    #: whole document is then held as GM-only, as the same words in its file name would hold it.
    gm_mark: str = ""


@dataclass(frozen=True, slots=True)
class ZipLimits:
    """Caps on an archive before anything in it is inflated.

    ``max_ratio`` bounds each member's uncompressed/compressed size (a zip bomb inflates a few
    kilobytes to gigabytes; Markdown and Word XML compress 3–20×); ``max_total`` the sum of
    uncompressed sizes the archive declares, which :mod:`zipfile` never reads past."""

    max_members: int = 2000
    max_total: int = 100 * 1024 * 1024
    max_ratio: float = 200.0


def check_zip(zf: zipfile.ZipFile, limits: ZipLimits) -> None:
    """Refuse an archive over ``limits`` (raises :class:`LoadError`)."""
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise LoadError(
            f"too many files in the archive ({len(infos):,}; limit {limits.max_members:,})"
        )
    total = 0
    for info in infos:
        total += info.file_size
        if total > limits.max_total:
            raise LoadError(f"the archive unpacks to more than {limits.max_total:,} bytes (limit)")
        if info.file_size > 1024 * 1024 and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            raise LoadError(
                "the archive is compressed suspiciously well (a zip bomb?): refused unread"
            )


def _junk(ch: str) -> bool:
    if ch in "\n\r\t\f\v\x85\x1c\x1d\x1e":  # line ends (see loaders._LINE_ENDS)
        return False
    return unicodedata.category(ch) in {"Cc", "Co", "Cn", "Cs"} or ch == "\ufffd"


def _is_text(text: str) -> bool:
    sample = text[:200_000]
    if not sample:
        return True
    return sum(map(_junk, sample)) <= _JUNK_SHARE * len(sample)


def decode_text(raw: bytes) -> str:
    """``raw`` as text in its own encoding (raises :class:`LoadError` for binary data)."""
    if not raw.strip():
        raise LoadError("empty file")
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            try:
                text = raw.decode(codec)
            except UnicodeDecodeError:
                raise LoadError(f"not valid {codec.upper()} after its byte-order mark") from None
            if not _is_text(text):
                raise LoadError("binary file (not text)")
            return text
    if b"\x00" in raw[:8192]:
        raise LoadError("binary file (contains NUL bytes)")
    try:
        return raw.decode("utf-8")  # what it always was: control characters are cleaned later
    except UnicodeDecodeError:
        # Windows-1252 first, when it reads without mess: a GM's Word export is far more often
        # that than the Central European or Mac code page a short text also fits.
        match = charset_normalizer.from_bytes(raw, cp_isolation=["cp1252"]).best()
        if match is None:
            match = charset_normalizer.from_bytes(raw).best()
        if match is None:
            raise LoadError(
                "binary file (no text encoding fits: not UTF-8, UTF-16 or a code page)"
            ) from None
        text = str(match)
        _log.debug("decoded as %s", match.encoding)
    if not _is_text(text):
        raise LoadError("binary file (not text)")
    return text


def plain_wikilinks(text: str) -> tuple[str, list[tuple[str, str]]]:
    """``text`` with each Obsidian link as the words it shows, and the ``(target, alias)`` of
    each aliased link. ``[[Target]]`` shows ``Target``; ``[[Target#Heading]]`` ``Target >
    Heading``; ``[[Target|alias]]`` ``alias``; an embed ``![[map.png]]`` its name."""
    links: list[tuple[str, str]] = []

    def shown(m: re.Match[str]) -> str:
        target, alias = m.group(2).strip(), (m.group(3) or "").strip()
        name, _, heading = target.partition("#")
        name = name.strip()
        if alias:
            if name:
                links.append((name, alias))
            return alias
        heading = heading.strip().lstrip("^")
        return f"{name} > {heading}" if name and heading else (name or heading)

    return WIKILINK.sub(shown, text), links


# --- PDF ---------------------------------------------------------------------------------------


class _WithheldDetails(logging.Filter):
    """pypdf's warnings about a malformed file quote its bytes (a bookmark's title, a line of a
    page): kept as a fixed line, so no GM-only text reaches a host's logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = "malformed PDF (pypdf's details withheld)", ()
        return True


def _quiet_pypdf() -> None:
    """Install :class:`_WithheldDetails` on pypdf's loggers (each module's own: a filter acts
    only where a record is made), on first use, not at import."""
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] == "pypdf"]
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _WithheldDetails) for f in logger.filters):
            logger.addFilter(_WithheldDetails())


def _outline(reader: object) -> Iterator[tuple[int, int, str]]:
    """``(page index, level, title)`` of each bookmark, in outline order (level 1 at the top)."""
    from pypdf import PdfReader
    from pypdf.generic import Destination

    assert isinstance(reader, PdfReader)

    def walk(items: list[object], level: int) -> Iterator[tuple[int, int, str]]:
        for item in items:
            if isinstance(item, list):
                yield from walk(item, level + 1)
            elif isinstance(item, Destination):
                try:
                    page = reader.get_destination_page_number(item)
                except Exception:  # noqa: BLE001 (a broken bookmark is skipped, never fatal)
                    continue
                title = " ".join(str(item.title or "").split())
                if page is not None and page >= 0 and title:
                    yield page, min(level, 6), title[:200]

    try:
        yield from walk(list(reader.outline), 1)
    except Exception:  # noqa: BLE001 (an outline pypdf cannot walk: no headings, not no text)
        return


def _with_headings(text: str, heads: list[tuple[int, str]]) -> str:
    """A page's text with its bookmarks as ``#`` lines: on the line that reads as the title when
    there is one, else at the top of the page."""
    lines = text.split("\n")
    top: list[str] = []
    for level, title in heads:
        mark = "#" * level + " " + title
        key = " ".join(title.lower().split())
        at = next((i for i, ln in enumerate(lines) if " ".join(ln.lower().split()) == key), None)
        if at is not None:
            lines[at] = mark
        else:
            top.append(mark)
    return "\n\n".join([*top, "\n".join(lines)]) if top else "\n".join(lines)


def _labels(reader: object, count: int) -> list[str]:
    """Each page's printed label, or its number where the labels are broken."""
    try:
        labels = [str(x) for x in getattr(reader, "page_labels", [])]
    except Exception:  # noqa: BLE001 (broken page labels: number the pages instead)
        labels = []
    return labels if len(labels) == count else [str(i + 1) for i in range(count)]


def _page_texts(reader: object, count: int) -> list[str]:
    """Each page's extracted text; ``""`` for a page pypdf cannot read (the others still are)."""
    pages = getattr(reader, "pages", [])
    texts: list[str] = []
    for i in range(count):
        try:
            texts.append(pages[i].extract_text() or "")
        except Exception:  # noqa: BLE001 (one unreadable page must not lose the others)
            _log.debug("page %d unreadable", i + 1, exc_info=True)
            texts.append("")
    return texts


def extract_pdf(raw: bytes, *, max_pages: int = 2000) -> Extracted:
    """A PDF's pages as text, bookmarks as headings, running heads and page numbers left out
    (:mod:`liminalis.ingest.running_heads`; raises :class:`LoadError`).

    A PDF with no text layer (a scan) is refused: ingested, it would be a document with no
    words. Pages without text in an otherwise readable PDF are named in a warning."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    _quiet_pypdf()
    try:
        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted and not reader.decrypt(""):
            raise LoadError("password-protected PDF: save an unprotected copy")
        count = len(reader.pages)
    except LoadError:
        raise
    except (PyPdfError, ValueError, TypeError, KeyError, OSError, RecursionError, AssertionError):
        raise LoadError("not a readable PDF") from None
    except Exception:  # noqa: BLE001 (pypdf raises many kinds on a hostile file; none may escape)
        _log.debug("pypdf failed", exc_info=True)
        raise LoadError("not a readable PDF") from None
    if count == 0:
        raise LoadError("empty PDF (no pages)")
    if count > max_pages:
        raise LoadError(f"PDF too long ({count:,} pages; limit {max_pages:,})")
    labels = _labels(reader, count)
    heads: dict[int, list[tuple[int, str]]] = {}
    for page, level, title in _outline(reader):
        heads.setdefault(page, []).append((level, title))
    texts = _page_texts(reader, count)
    empty = [sum(not c.isspace() for c in t) < _MIN_PAGE_CHARS for t in texts]
    blank = [labels[i] for i in range(count) if empty[i]]
    texts = ["" if e else t for t, e in zip(texts, empty, strict=True)]
    mark = gm_mark(_raw_pdf_title(reader)) or running_gm_mark(texts)
    texts = strip_running_lines(texts, labels)
    pages = [
        Page(
            label=" ".join(labels[i].split())[:20] or str(i + 1),
            text=_with_headings(texts[i], heads[i]) if heads.get(i) else texts[i],
        )
        for i in range(count)
    ]
    if len(blank) == count:
        raise LoadError(
            f"scanned PDF: none of its {count:,} pages has a text layer "
            "(run it through OCR, or export the text, and upload that)"
        )
    warnings: tuple[str, ...] = ()
    if blank:
        shown = ", ".join(blank[:10]) + (" …" if len(blank) > 10 else "")
        warnings = (
            f"{len(blank):,} of {count:,} pages have no text layer (scanned?) and were left out: "
            f"p. {shown}",
        )
    return Extracted(
        pages=tuple(pages), warnings=warnings, title=pdf_title(_raw_pdf_title(reader)), gm_mark=mark
    )


def _raw_pdf_title(reader: object) -> str:
    """The title field of a PDF's metadata as written (``""`` when broken): read for a GM mark
    before :func:`liminalis.ingest.titles.pdf_title` decides whether it is a real title."""
    try:
        return str(getattr(getattr(reader, "metadata", None), "title", "") or "")
    except Exception:  # noqa: BLE001 (broken metadata: no title, not no document)
        return ""


# --- Word ---------------------------------------------------------------------------------------

_HEADING_STYLE = re.compile(r"heading\s*([1-9])", re.I)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OFF = frozenset({"0", "false", "off"})
#: How each hidden section :func:`_comment` writes opens: the only HTML comments the hiding wall
#: reads in a Word document's text (:mod:`liminalis.ingest.syntaxes`).
WORD_OPENERS = ("<!-- hidden in Word: ", "<!-- style ", "<!-- comment by ")


def _comment(text: str, why: str) -> str:
    """``text`` as a hidden section (an HTML comment: GM-only, the GM still reads it). A ``--``
    inside is broken up, so the text can never close its own comment early."""
    return f"<!-- {why}: {text.replace('--', '- -').replace('--', '- -')} -->"


def _vanishes(rpr: object) -> bool:
    """Whether run properties (a run's, or a style's) hide the text: Word's Hidden font."""
    if rpr is None:
        return False
    for tag in ("vanish", "specVanish", "webHidden"):
        el = rpr.find(f"{_W}{tag}")  # type: ignore[attr-defined]
        if el is not None and str(el.get(f"{_W}val", "true")).lower() not in _OFF:
            return True
    return False


def _hidden_styles(styles: object) -> frozenset[str]:
    """The ids of the styles (character or paragraph) whose font is Hidden, directly or through
    the styles they are based on: a GM who hides prep with a style of their own ("Aside", "My
    notes") hides it as surely as with the font dialog.

        hidden(s) = vanish(rPr(s)) ∨ hidden(basedOn(s))
    """
    based: dict[str, str] = {}
    direct: set[str] = set()
    for st in styles.iter(f"{_W}style"):  # type: ignore[attr-defined]
        sid = str(st.get(f"{_W}styleId") or "")
        base = st.find(f"{_W}basedOn")
        if base is not None:
            based[sid] = str(base.get(f"{_W}val") or "")
        if _vanishes(st.find(f"{_W}rPr")):
            direct.add(sid)
    out = set()
    for sid in based.keys() | direct:
        seen, cur = set(), sid
        while cur and cur not in seen:  # a cycle of basedOn ends the walk
            if cur in direct:
                out.add(sid)
                break
            seen.add(cur)
            cur = based.get(cur, "")
    return frozenset(out)


def _gm_character_styles(styles: object) -> frozenset[str]:
    """The ids of the character styles a GM named for their notes ("GM Note", "Secret"): a run
    in one is marked as surely as a paragraph in a GM-named paragraph style."""
    out = set()
    for st in styles.iter(f"{_W}style"):  # type: ignore[attr-defined]
        name = st.find(f"{_W}name")
        label = str(name.get(f"{_W}val") or "") if name is not None else ""
        if st.get(f"{_W}type") == "character" and name_intent(label):
            out.add(str(st.get(f"{_W}styleId") or ""))
    return frozenset(out)


def _gm_style(style: str) -> str:
    """The words by which a paragraph style's name states GM intent, a heading level it names
    read past ("GM Heading 3" → "GM", "Secret Title" → "Secret"), else ``""``."""
    rest = _HEADING_STYLE.sub(" ", style)
    rest = " ".join(re.sub(r"\btitle\b", " ", rest, flags=re.I).split())
    return rest if rest and name_intent(rest) else ""


def _header_mark(document: object) -> str:
    """The GM mark a Word document's page headers or footers state ("Secrets of the Keep (GM
    only)"), else ``""``: a header is on every page, so its mark is the whole document's."""
    for section in document.sections:  # type: ignore[attr-defined]
        for part in (
            section.header,
            section.footer,
            section.first_page_header,
            section.first_page_footer,
            section.even_page_header,
            section.even_page_footer,
        ):
            for p in part.paragraphs:
                if mark := gm_mark(p.text):
                    return mark
    return ""


def _style_of(el: object, props: str, ref: str) -> str:
    pr = el.find(f"{_W}{props}")  # type: ignore[attr-defined]
    st = pr.find(f"{_W}{ref}") if pr is not None else None
    return str(st.get(f"{_W}val") or "") if st is not None else ""


def _run_hidden(r: object, p: object, hidden: frozenset[str]) -> bool:
    """Whether Word hides run ``r`` of paragraph ``p``: a tracked deletion, the run's own Hidden
    font, its character style's, or its paragraph style's (``hidden``: :func:`_hidden_styles`)."""
    anc = r.getparent()  # type: ignore[attr-defined]
    while anc is not None and anc is not p:
        if anc.tag in (f"{_W}del", f"{_W}moveFrom"):
            return True
        anc = anc.getparent()
    if _vanishes(r.find(f"{_W}rPr")):  # type: ignore[attr-defined]
        return True
    return bool(hidden) and (
        _style_of(r, "rPr", "rStyle") in hidden or _style_of(p, "pPr", "pStyle") in hidden
    )


def _paragraph_text(p: object, hidden_style_ids: frozenset[str] = frozenset()) -> str:
    """A Word paragraph's text, with what Word does not show its reader — hidden (``vanish``)
    runs, text in a hidden style and tracked deletions — kept as hidden sections: GM-only,
    never dropped."""
    parts: list[tuple[bool, str]] = []
    for r in p.iter(f"{_W}r"):  # type: ignore[attr-defined]
        hidden = _run_hidden(r, p, hidden_style_ids)
        text = ""
        for child in r:
            if child.tag in (f"{_W}t", f"{_W}delText"):
                text += child.text or ""
            elif child.tag == f"{_W}tab":
                text += "\t"
            elif child.tag in (f"{_W}br", f"{_W}cr"):
                text += "\n"
        if text:
            if parts and parts[-1][0] == hidden:
                parts[-1] = (hidden, parts[-1][1] + text)
            else:
                parts.append((hidden, text))
    return "".join(_comment(t, "hidden in Word") if h else t for h, t in parts)


def _bold_label(paragraph: Any, text: str) -> str:
    """A paragraph set all in bold that names GM intent ("GM Notes", "Secrets") is how Word
    users head a section without a Heading style: it becomes a ``**…**`` line, which the wall
    reads as a heading (the section under it held). Any other paragraph is its text."""
    runs = [r for r in paragraph.runs if r.text.strip()]
    if runs and all(r.bold for r in runs) and len(text) <= 80 and name_intent(text):
        return f"**{text}**"
    return text


def _table_text(table: Any, vanish: frozenset[str]) -> str:
    """A Word table as ``a | b`` lines; the cells under a header that names GM intent ("GM
    notes", "Secret") are hidden sections, as a Markdown table's GM column is."""

    def cell_text(cell: Any) -> str:
        return " ".join(" ".join(_paragraph_text(p._p, vanish) for p in cell.paragraphs).split())

    rows = [[cell_text(c) for c in row.cells] for row in table.rows]
    header = rows[0] if rows else []
    gm_columns = {i for i, h in enumerate(header) if h and name_intent(h)}
    lines = [" | ".join(header)] if header else []
    for row in rows[1:]:
        lines.append(
            " | ".join(
                _comment(t, f"column {header[i]}") if i in gm_columns and t else t
                for i, t in enumerate(row)
            )
        )
    return "\n".join(line for line in lines if line.strip(" |"))


def extract_docx(raw: bytes, *, limits: ZipLimits = ZipLimits()) -> Extracted:
    """A Word document's paragraphs and tables in order, heading styles as ``#`` lines
    (raises :class:`LoadError`)."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            check_zip(zf, limits)
    except LoadError:
        raise
    except Exception:  # noqa: BLE001 (zipfile raises many kinds on a hostile file)
        raise LoadError("not a readable Word document (.docx)") from None
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(raw))
        vanish = _hidden_styles(document.styles.element) | _gm_character_styles(
            document.styles.element
        )
        mark = _header_mark(document)
        blocks: list[str] = []
        for item in document.iter_inner_content():
            if isinstance(item, Paragraph):
                text = " ".join(_paragraph_text(item._p, vanish).split("\n")).strip()
                if not text:
                    continue
                style = (item.style.name if item.style is not None else "") or ""
                gm_words = _gm_style(style)
                if gm_words:
                    # A paragraph style the GM named for their notes ("GM Notes", "Secret",
                    # "GM Heading 3"); a GM heading's words head its section, so it is held too.
                    text = _comment(text, f"style {style}")
                m = _HEADING_STYLE.search(style)
                if m:
                    text = f"{gm_words} {text}" if gm_words else text
                    blocks.append("#" * min(int(m.group(1)), 6) + " " + text)
                elif style.lower() == "title":
                    blocks.append("# " + text)
                elif style.lower().startswith("list"):
                    blocks.append("- " + text)
                else:
                    blocks.append(_bold_label(item, text))
            elif isinstance(item, Table):
                blocks.append(_table_text(item, vanish))
    except LoadError:
        raise
    except Exception:  # noqa: BLE001 (python-docx and lxml raise many kinds on a hostile file)
        _log.debug("python-docx failed", exc_info=True)
        raise LoadError("not a readable Word document (.docx)") from None
    try:
        notes = [
            _comment(" ".join(c.text.split()), f"comment by {c.author or 'someone'}")
            for c in document.comments
            if c.text.strip()
        ]
    except Exception:  # noqa: BLE001 (broken comments: the text still reads, the comments not)
        _log.debug("Word comments unreadable", exc_info=True)
        notes = []
    text = "\n\n".join(b for b in [*blocks, *notes] if b.strip())
    if not text.strip():
        raise LoadError("empty Word document (no text)")
    return Extracted(text=text, gm_mark=mark)
