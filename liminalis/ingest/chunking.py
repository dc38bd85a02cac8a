"""Content-defined chunking of a document into passages, plus sentence windows.

Cut points are content-defined, so an edit disturbs only the passages around it — the idea of
content-defined chunking in LBFS (Muthitacharoen et al., 2001), with sentences instead of bytes
as the unit so a cut never splits one, and with *local-maximum* selection (Bjørner, Blass &
Gurevich, "Content-dependent chunking for differential compression: the local maximum
approach", 2010) instead of a mask test, because the min-length rule of mask-based CDC lets an
edit cascade through the following passages.

Each sentence end *i* gets a score from a rolling hash over the last ``window`` sentences,
raised by a tier for structure::

    g_i     = H(s_i) ⊕ rotl(H(s_{i-1}), 1) ⊕ …          (H = BLAKE2b of normalised text)
    score_i = tier_i · 2^64 + g_i      tier = 2 before a heading, 1 at a paragraph end, else 0

Sentence end *i* is a cut iff its score is the strict maximum over every sentence end within
``min_chars`` characters on either side (and it lies at least ``min_chars`` from the document's
start and end). The decision reads only text within ``min_chars`` of *i*, so an edit can move
cuts only within that distance of itself; cuts are at least ``min_chars`` apart. A passage
still longer than ``max_chars`` is split at its best-scoring inner sentence end, and each part
again until it fits — a decision local to that passage's own content.

A paged document (a PDF; :attr:`~liminalis.types.Document.pages`) gets its page as the last part
of each passage's heading path, ``Chapter 2 > p. 12`` (``pp. 12–13`` across a page break), so a
citation names the page.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from liminalis.text import split_sentences
from liminalis.types import Passage, Window

__all__ = ["ChunkingParams", "chunk_document", "make_windows", "content_hash", "page_label"]

_WS = re.compile(r"\s+")
#: A heading line's level and the start of its title. The title's trailing spaces and ``#``s are cut
#: in Python: ``(.*?)\\s*#*\\s*$`` backtracks cubically on a long run of spaces.
_HEADING = re.compile(r"\s{0,3}(#{1,6})\s+")


@dataclass(frozen=True, slots=True)
class ChunkingParams:
    min_chars: int = 400
    max_chars: int = 1800
    window: int = 1
    window_chars: int = 360


def content_hash(text: str) -> str:
    """Hash of whitespace-normalised text; identical prose gives the identical id."""
    norm = _WS.sub(" ", text).strip()
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=10).hexdigest()


def _h64(text: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(_WS.sub(" ", text).encode(), digest_size=8).digest(), "big"
    )


def _rotl(x: int, r: int) -> int:
    r %= 64
    return ((x << r) | (x >> (64 - r))) & 0xFFFFFFFFFFFFFFFF


def _headings(text: str) -> list[tuple[int, int, str]]:
    """(offset, level, title) of each Markdown heading line."""
    out = []
    offset = 0
    for line in text.split("\n"):
        m = _HEADING.match(line)
        if m:
            out.append((offset, len(m.group(1)), line[m.end() :].rstrip().rstrip("#").rstrip()))
        offset += len(line) + 1
    return out


def _heading_paths(heads: list[tuple[int, int, str]], positions: list[int]) -> list[str]:
    """The heading path (``Part > Chapter > Scene``) in force at each of ``positions`` (ascending):
    one pass over the headings, not one per passage, which made a long document with many
    headings quadratic to chunk."""
    stack: list[tuple[int, str]] = []
    out: list[str] = []
    i = 0
    for pos in positions:
        while i < len(heads) and heads[i][0] <= pos:
            _off, level, title = heads[i]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            i += 1
        out.append(" > ".join(t for _, t in stack))
    return out


def page_label(pages: Sequence[tuple[int, str]], start: int, end: int) -> str:
    """``p. 12`` for a passage ``[start, end)`` on one page, ``pp. 12–13`` across pages, ``""``
    for a document without pages."""
    if not pages:
        return ""
    offsets = [off for off, _ in pages]
    first = pages[max(bisect_right(offsets, start) - 1, 0)][1]
    last = pages[max(bisect_right(offsets, max(end - 1, start)) - 1, 0)][1]
    return f"p. {first}" if first == last else f"pp. {first}\u2013{last}"


def chunk_document(
    doc_id: str,
    text: str,
    *,
    visibility: frozenset[str],
    params: ChunkingParams = ChunkingParams(),
    pages: Sequence[tuple[int, str]] = (),
) -> list[Passage]:
    """Cut ``text`` into passages at content-defined sentence boundaries; ``pages`` (where each
    page starts, and its label) end each passage's heading path with its page.

    Stages: :func:`_boundary_scores` → :func:`_cuts` (local maxima) → :func:`_split_to_fit`
    per run of sentences → :func:`_passages` → :func:`_chain`."""
    sents = split_sentences(text, max_len=min(1200, params.max_chars))
    if not sents:
        return []
    heads = _headings(text)
    scores = _boundary_scores(text, sents, {off for off, _, _ in heads}, params.window)
    groups: list[list[int]] = []
    start = 0
    for c in [*_cuts(sents, scores, params.min_chars), len(sents) - 1]:
        for a, b in _split_to_fit(sents, scores, a=start, b=c, params=params):
            groups.append(list(range(a, b + 1)))
        start = c + 1
    passages = _passages(doc_id, text, sents, groups, heads, pages, visibility)
    return _chain(passages)


def _boundary_scores(
    text: str, sents: Sequence[tuple[int, int, bool]], head_starts: set[int], window: int
) -> list[int]:
    """Each sentence end's boundary score, ``tier << 64 | g``: ``g`` the XOR of the last
    ``window`` sentence hashes, each rotated by its distance (content-defined, so an edit moves
    only nearby cuts); ``tier`` 2 before a heading line, 1 at a paragraph end, else 0, so
    structure outranks any hash."""
    hashes = [_h64(text[s:e]) for s, e, _ in sents]
    n = len(sents)
    scores: list[int] = []
    for i, (_s, _e, para) in enumerate(sents):
        g = 0
        for j in range(window):
            if i - j >= 0:
                g ^= _rotl(hashes[i - j], j)
        tier = 1 if para else 0
        if i + 1 < n:
            nxt = sents[i + 1][0]
            line_start = text.rfind("\n", 0, nxt) + 1
            if line_start in head_starts and not text[line_start:nxt].strip():
                tier = 2
        scores.append(tier << 64 | g)
    return scores


def _cuts(sents: Sequence[tuple[int, int, bool]], scores: list[int], radius: int) -> list[int]:
    """The sentences that end a passage: those whose score is the strict maximum of every
    sentence ending within ``radius`` characters, at least ``radius`` from either end."""
    n = len(sents)
    first, last = sents[0][0], sents[-1][1]
    cuts: list[int] = []  # index of the sentence that ends a passage
    lo = 0
    for i in range(n - 1):
        end = sents[i][1]
        if end - first < radius or last - end < radius:
            continue
        while sents[lo][1] < end - radius:
            lo += 1
        ok = True
        j = lo
        while j < n and sents[j][1] <= end + radius:
            if j != i and scores[j] >= scores[i]:
                ok = False
                break
            j += 1
        if ok:
            cuts.append(i)
    return cuts


def _split_to_fit(
    sents: Sequence[tuple[int, int, bool]],
    scores: list[int],
    *,
    a: int,
    b: int,
    params: ChunkingParams,
) -> list[tuple[int, int]]:
    """Split sentences a..b (inclusive) until every piece fits ``max_chars``, in order.

    With a stack, not recursion: sentences that all score alike (a line repeated a thousand
    times) split one piece off the front at a time, as deep as there are pieces."""
    pieces: list[tuple[int, int]] = []
    todo = [(a, b)]
    while todo:
        a, b = todo.pop()
        if sents[b][1] - sents[a][0] <= params.max_chars or a == b:
            pieces.append((a, b))
            continue
        inner = [
            k
            for k in range(a, b)
            if sents[k][1] - sents[a][0] >= params.min_chars
            and sents[b][1] - sents[k + 1][0] >= params.min_chars
        ]
        if not inner:
            inner = list(range(a, b))
        k = max(inner, key=lambda x: scores[x])
        todo += [(k + 1, b), (a, k)]  # the left piece is taken first
    return pieces


def _passages(
    doc_id: str,
    text: str,
    sents: Sequence[tuple[int, int, bool]],
    groups: list[list[int]],
    heads: list[tuple[int, int, str]],
    pages: Sequence[tuple[int, str]],
    visibility: frozenset[str],
) -> list[Passage]:
    """One passage per group of sentences, its id ``doc#hash`` (``.n`` on the n-th repeat of
    the same text) and its heading path, ending with its page when ``pages`` are given."""
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    paths = _heading_paths(heads, [sents[group[0]][0] for group in groups])
    for ordinal, group in enumerate(groups):
        start, end = sents[group[0]][0], sents[group[-1]][1]
        if pages:
            page = page_label(pages, start, end)
            paths[ordinal] = f"{paths[ordinal]} > {page}" if paths[ordinal] else page
        body = text[start:end]
        h = content_hash(body)
        n = seen.get(h, 0)
        seen[h] = n + 1
        pid = f"{doc_id}#{h}" + (f".{n}" if n else "")
        passages.append(
            Passage(
                passage_id=pid,
                doc_id=doc_id,
                ordinal=ordinal,
                start=start,
                end=end,
                text=body,
                heading=paths[ordinal],
                hash=h,
                visibility=visibility,
                sentence_ends=tuple(sents[i][1] for i in group),
            )
        )
    return passages


def _chain(passages: list[Passage]) -> list[Passage]:
    """The passages linked to their neighbours (``prev_id``, ``next_id``)."""
    chained = []
    for i, p in enumerate(passages):
        chained.append(
            Passage(
                passage_id=p.passage_id,
                doc_id=p.doc_id,
                ordinal=p.ordinal,
                start=p.start,
                end=p.end,
                text=p.text,
                heading=p.heading,
                hash=p.hash,
                visibility=p.visibility,
                prev_id=passages[i - 1].passage_id if i else None,
                next_id=passages[i + 1].passage_id if i + 1 < len(passages) else None,
                sentence_ends=p.sentence_ends,
            )
        )
    return chained


def make_windows(passage: Passage, text: str, *, window_chars: int = 360) -> list[Window]:
    """Overlapping sentence windows inside one passage (overlap: one sentence).

    A passage short enough to be one window emits none: its own vector already covers it.
    """
    if passage.end - passage.start <= window_chars * 1.3:
        return []
    sents = [(s, e) for s, e, _ in split_sentences(text[passage.start : passage.end])]
    sents = [(passage.start + s, passage.start + e) for s, e in sents]
    windows: list[Window] = []
    i = 0
    while i < len(sents):
        j = i
        while j + 1 < len(sents) and sents[j + 1][1] - sents[i][0] <= window_chars:
            j += 1
        s, e = sents[i][0], sents[j][1]
        windows.append(
            Window(
                window_id=f"{passage.passage_id}@{s - passage.start}",
                passage_id=passage.passage_id,
                doc_id=passage.doc_id,
                start=s,
                end=e,
                text=text[s:e],
            )
        )
        if j + 1 >= len(sents):
            break
        i = j if j > i else j + 1
    return windows
