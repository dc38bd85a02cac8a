"""Sentence segmentation that returns character spans.

A small rule set rather than pysbd: we need exact offsets into the normalized text, speed on
megabytes of transcripts, and Markdown awareness, and pysbd gives none of the three cheaply.

Rules, in order:

1. Structural lines end a sentence at the line end: Markdown headings (``# …``), list items
   (``- …``, ``* …``, ``1. …``), table rows (``| …``), block quotes and dialogue lines
   (``MATT: …``, ``Old Tam: …``), which also start a new sentence.
2. A blank line is a paragraph break and always ends a sentence.
3. Inside prose, a sentence ends after ``.``, ``!``, ``?`` or ``…`` (plus closing quotes and
   brackets) followed by whitespace and an upper-case letter, digit, quote or bracket — unless
   the word before the dot is a known abbreviation (``Mr.``, ``St.``, ``e.g.``) or a single
   initial (``J. R.``).
4. A "sentence" longer than ``max_len`` is broken at the last whitespace before the limit, so
   one run-on line can never exceed a passage.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences", "SentenceSpan", "ABBREVIATIONS"]

SentenceSpan = tuple[int, int, bool]  # (start, end, paragraph_end)

ABBREVIATIONS = frozenset(
    """mr mrs ms dr st sr jr mt ft vs etc e.g i.e cf al prof gen capt col lt sgt rev fr
    no vol ch pp fig approx dept est inc ltd co corp jan feb mar apr jun jul aug sep sept oct
    nov dec mon tue wed thu fri sat sun hon gov pres sen rep lvl hp ac dc""".split()
)

_STRUCT = re.compile(
    r"""^(?:\s{0,3}\#{1,6}\s          # heading
        |\s*[-*+]\s+                  # bullet
        |\s*\d{1,3}[.)]\s+            # numbered item
        |\s*\|                        # table row
        |\s*>                         # block quote
        )""",
    re.X,
)
_DIALOGUE = re.compile(r"^\s*[A-Z][A-Za-z'’.\- ]{0,30}(?:\([^)]{0,30}\))?:\s")
_END = re.compile(r"""([.!?…]+|\.\.\.)["'”’)\]]*(?=\s+["'“‘(\[]?[A-Z0-9"“‘'(\[*_])""")
_WORD_BEFORE = re.compile(r"([\w.'’-]+)$")


#: How far back from a dot the word before it is looked for. Every abbreviation is shorter; a
#: longer run of word characters is cut here, and its tail is then too long to be one. Searching
#: from the start of the text instead made splitting quadratic in the document's length
#: (120 KB of prose took 20 s; a 5 MB upload would have held the bot for hours).
_WORD_WINDOW = 48


def _is_abbreviation(text: str, dot_pos: int) -> bool:
    m = _WORD_BEFORE.search(text, max(0, dot_pos - _WORD_WINDOW), dot_pos)
    if not m:
        return False
    word = m.group(1).lower().rstrip(".")
    if len(word) == 1 and m.group(1)[0].isupper():
        return True  # an initial, "J. R. Tolkien"
    return word in ABBREVIATIONS


def _split_prose(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    pos = start
    for m in _END.finditer(text, start, end):
        if text[m.start()] == "." and m.group(1) == "." and _is_abbreviation(text, m.start()):
            continue
        cut = m.end()
        if cut > pos:
            out.append((pos, cut))
        pos = cut
    if pos < end:
        out.append((pos, end))


def _strip(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _break_long(text: str, s: int, e: int, max_len: int) -> list[tuple[int, int]]:
    parts: list[tuple[int, int]] = []
    while e - s > max_len:
        cut = text.rfind(" ", s + max_len // 2, s + max_len)
        if cut <= s:
            cut = s + max_len
        parts.append((s, cut))
        s = cut
        while s < e and text[s].isspace():
            s += 1
    if s < e:
        parts.append((s, e))
    return parts


def split_sentences(text: str, *, max_len: int = 1200) -> list[SentenceSpan]:
    """Split ``text`` into sentence spans ``(start, end, paragraph_end)``.

    Spans are ordered, non-overlapping and cover every non-whitespace character.
    ``paragraph_end`` marks a sentence followed by a blank line, a structural line or the end.
    """
    raw: list[tuple[int, int, bool]] = []
    # Group lines into blocks: a structural/dialogue line is its own block; prose lines join.
    block_start: int | None = None
    block_end = 0
    lines = text.split("\n")
    offset = 0

    def flush(paragraph_end: bool) -> None:
        nonlocal block_start
        if block_start is None:
            return
        pieces: list[tuple[int, int]] = []
        _split_prose(text, block_start, block_end, pieces)
        for i, (s, e) in enumerate(pieces):
            s, e = _strip(text, s, e)
            if s < e:
                raw.append((s, e, paragraph_end and i == len(pieces) - 1))
        block_start = None

    for line in lines:
        line_start, line_end = offset, offset + len(line)
        offset = line_end + 1
        if not line.strip():
            flush(True)
            continue
        if _STRUCT.match(line):
            flush(True)
            s, e = _strip(text, line_start, line_end)
            raw.append((s, e, True))
            continue
        if _DIALOGUE.match(line):
            flush(False)
            block_start, block_end = line_start, line_end
            continue
        if block_start is None:
            block_start = line_start
        block_end = line_end
    flush(True)

    out: list[SentenceSpan] = []
    for s, e, para in raw:
        if e - s > max_len:
            parts = _break_long(text, s, e, max_len)
            for j, (ps, pe) in enumerate(parts):
                out.append((ps, pe, para and j == len(parts) - 1))
        else:
            out.append((s, e, para))
    return out
