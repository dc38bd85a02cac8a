"""Which hiding syntaxes a file's format speaks: Markdown's comments belong to Markdown.

``%% … %%``, ``<!-- … -->`` and a link-reference comment (``[//]: # (…)``) are how a GM hides
text *in Markdown* (and in a ``.txt`` note written the same way). In text extracted from a PDF
they are nothing of the kind: a rulebook's table of ``%%`` percentages, read as an Obsidian
comment that never closes, hid everything after it from players. A Word document hides text its
own way (hidden runs, tracked deletions, comments, a GM-named style), which the extractor writes
as HTML comments opened by a fixed phrase (:data:`WORD_OPENERS`); those are kept. A comment a GM
typed whole within one paragraph or line of a Word or PDF text (``<!-- … -->``, ``%% … %%``)
clearly marks what it holds and is kept too; every other comment opener there is not read as one.

The gate masks the openers that do not apply with spaces of the same length, so every offset a
hidden section is found at still points into the real text (the views are cut from it).
Everything else the wall reads (GM headings, labels, callouts, fences) is read in every format.
A CSV file's delimiting commas are read as tabs, so its GM column is held as a pasted
spreadsheet's is.
"""

from __future__ import annotations

import re

from liminalis.ingest.formats import TEXT_SUFFIXES, WORD_OPENERS

__all__ = ["comment_gate"]

#: An HTML comment opener, an Obsidian comment mark, a link-reference comment's opening ``[``.
_OPENERS = re.compile(
    r"<!--|%%|^[ \t]{0,3}\[(?=[^\]\n]{1,40}\]:[ \t]*(?:#|<>|//)(?:[ \t]|$))", re.M
)


def _closed_on_its_line(text: str, m: re.Match[str]) -> int:
    """Where a comment opened by ``m`` closes when it closes on its own line (a Word paragraph
    is one line of the extracted text; a PDF's line is its own), else ``-1``."""
    closer = {"<!--": "-->", "%%": "%%"}.get(m.group(0))
    if closer is None:
        return -1
    eol = text.find("\n", m.end())
    at = text.find(closer, m.end(), len(text) if eol < 0 else eol)
    return -1 if at < 0 else at + len(closer)


def _csv_as_tabs(text: str) -> str:
    """A CSV file's text with each delimiting comma (outside double quotes) a tab, one
    character for one: the wall reads its columns as it reads a pasted spreadsheet's."""
    out, quoted = [], False
    for c in text:
        if c == '"':
            quoted = not quoted
        out.append("\t" if c == "," and not quoted else c)
    return "".join(out)


def comment_gate(text: str, suffix: str) -> str:
    """``text`` as the wall should read it for a file ending ``suffix``: unchanged for Markdown
    and text; for a PDF or Word document, with Markdown's comment openers blanked unless the
    comment closes on the line it opens (a GM typed it whole: ``<!-- … -->``, ``%% … %%``), and
    a Word document keeps the hidden runs its extractor marked. An opener never closed on its
    line (a rulebook's ``%%`` percentages) hides nothing."""
    if suffix.lower() in TEXT_SUFFIXES:
        return text
    if suffix.lower() == ".csv":
        text = _csv_as_tabs(text)
    word = suffix.lower() == ".docx"
    kept_to = 0  # the end of the last comment kept whole: openers inside it are its own

    def blank(m: re.Match[str]) -> str:
        nonlocal kept_to
        if m.start() < kept_to or (word and text.startswith(WORD_OPENERS, m.start())):
            return m.group(0)
        end = _closed_on_its_line(text, m)
        if end > 0:
            kept_to = end
            return m.group(0)
        return " " * len(m.group(0))

    return _OPENERS.sub(blank, text)
