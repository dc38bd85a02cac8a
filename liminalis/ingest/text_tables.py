"""Tables that are not Markdown's pipes, read for a GM column: HTML ``<table>`` (what a Google
Docs or Word HTML export writes) and tab-separated lines (a spreadsheet pasted into a note).

A column whose header names GM intent (:func:`liminalis.ingest.intent.header_intent`: ``GM
notes``, ``Secret Motive``) has its cells held; a row labelled with a GM name (``GM notes`` in
its first cell) is held whole. A table whose cells do not line up (spans, ragged rows) cannot
say which cell is the GM's, and is held whole (fail closed).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from liminalis.ingest.intent import header_intent, label_intent, name_intent
from liminalis.ingest.tool_blocks import Block

__all__ = ["table_blocks"]

_TABLE = re.compile(r"<table\b[^>]*>(?P<body>.*?)</table\s*>", re.I | re.S)
_ROW = re.compile(r"<tr\b[^>]*>(?P<row>.*?)(?=<tr\b|</table|$)", re.I | re.S)
_CELL = re.compile(
    r"<(?P<tag>t[hd])\b(?P<attrs>[^>]*)>(?P<text>.*?)(?:</t[hd]\s*>|(?=<t[hd]\b)|$)", re.I | re.S
)
_TAGS = re.compile(r"<[^<>]*>")

#: A row's cells: ``(start, end, text, is_header)``.
_Cell = tuple[int, int, str, bool]


def _rows(body: str, offset: int) -> list[list[_Cell]]:
    rows = []
    for r in _ROW.finditer(body):
        base = offset + r.start("row")
        rows.append(
            [
                (
                    base + c.start("text"),
                    base + c.end("text"),
                    " ".join(_TAGS.sub(" ", c.group("text")).split()),
                    c.group("tag").lower() == "th",
                )
                for c in _CELL.finditer(r.group("row"))
            ]
        )
    return [row for row in rows if row]


def _is_gm_row(row: list[_Cell]) -> bool:
    label = row[0][2]
    return bool(label) and bool(name_intent(label) or label_intent(label)) and not row[0][3]


def _held(rows: list[list[_Cell]], ragged: bool, whole: Block) -> Iterator[Block]:
    """The held spans of a table's ``rows`` (module docstring)."""
    heads = [row for k, row in enumerate(rows) if k == 0 or all(c[3] for c in row)]
    marked = {k for row in heads for k, c in enumerate(row) if header_intent(c[2])}
    labelled = [row for row in rows if _is_gm_row(row)]
    if not marked and not labelled:
        return
    if ragged and marked:
        yield whole
        return
    for row in rows:
        columns = range(len(row)) if row in labelled else sorted(marked)
        for k in columns:
            if k < len(row):
                yield Block(row[k][0], row[k][1], whole.rule)


def _html_tables(text: str) -> Iterator[Block]:
    for t in _TABLE.finditer(text):
        body = t.group("body")
        rows = _rows(body, t.start("body"))
        ragged = (
            bool(re.search(r"\b(?:col|row)span\b|<table\b", body, re.I))
            or len({len(r) for r in rows}) > 1
        )
        yield from _held(rows, ragged, Block(t.start(), t.end(), "HTML table GM column"))


_TSV_RUN = re.compile(r"(?:^[^\n]*\t[^\n]*(?:\n|$)){2,}", re.M)


def _tab_tables(text: str) -> Iterator[Block]:
    """Runs of two or more tab-separated lines, the first read as the header."""
    for run in _TSV_RUN.finditer(text):
        rows: list[list[_Cell]] = []
        pos = run.start()
        for line in run.group(0).split("\n"):
            cells, start = [], pos
            for part in line.split("\t"):
                cells.append((start, start + len(part), part.strip(), False))
                start += len(part) + 1
            rows.append(cells)
            pos += len(line) + 1
        rows = [r for r in rows if any(c[2] for c in r)]
        ragged = len({len(r) for r in rows}) > 1
        yield from _held(rows, ragged, Block(run.start(), run.end(), "tab-separated GM column"))


def table_blocks(masked: str) -> list[Block]:
    """Every held span of the HTML and tab-separated tables of ``masked`` (comments blanked)."""
    return list(_html_tables(masked)) + list(_tab_tables(masked))
