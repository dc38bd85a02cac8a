"""A summary per document view: the author's own first, else an extractive one.

In order (:func:`summarize`):

1. the front matter's ``summary`` (the loader keeps it as :attr:`Document.synopsis`);
2. a ``## Recap`` / ``## Summary`` / ``## TL;DR`` section, condensed if long;
3. an extractive summary over the whole document (:func:`extractive_summary`).

The extractive summary skips what is not prose (headings, tables, ``**Played:**`` and
``Present:`` style metadata lines), then scores each sentence ``s`` by its centrality — its
mean cosine similarity to the other sentences over log-scaled term counts, as in LexRank's
degree centrality (Erkan & Radev, 2004) —

    c(s) = 1/(n−1) · Σ_{t≠s} cos(v_s, v_t),   v_s[w] = 1 + ln tf(w, s)  (stop words left out)

and picks the best sentence of each of ``k`` equal stretches of the document (position
spread), so the summary covers the beginning, the middle and the end rather than the lead.
Sentences come back in document order.

:func:`summarize_with_model` asks a :class:`~liminalis.ports.LanguageModel` (``role="summarize"``)
for ``{"summary": …}`` and falls back to the offline summary on any bad reply.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass

from liminalis.errors import LiminalisError
from liminalis.ports import LanguageModel, Message
from liminalis.text import STOP_WORDS, split_sentences
from liminalis.types import Document

__all__ = [
    "Summary",
    "summarize",
    "summarize_with_model",
    "extractive_summary",
    "is_metadata_line",
    "section",
    "FRONT_MATTER",
    "SECTION",
    "EXTRACTIVE",
    "MODEL",
    "SUMMARY_SYSTEM",
]

_log = logging.getLogger(__name__)

FRONT_MATTER, SECTION, EXTRACTIVE, MODEL = "front-matter", "section", "extractive", "model"
_SUMMARY_HEADINGS = re.compile(r"^(?:recap|summary|tl;?dr|synopsis|previously)\b", re.I)
_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
_META = re.compile(r"^\s*(?:[-*]\s+)?(?:\*\*[^*\n]{1,40}\*\*\s*:?|[A-Z][\w ()/-]{0,30}:)(?:\s|$)")
_SPEAKER = re.compile(r"^\s*[A-Z][A-Z .'-]{1,30}:\s+")
_WORD = re.compile(r"[a-z0-9']+")
_MARKUP = re.compile(
    r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|^\s*(?:[-*+]|\d{1,3}[.)])\s+|^\s*>\s?"
)


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary's text and how it was made (front-matter, section, extractive, model)."""

    text: str
    method: str


def is_metadata_line(line: str) -> bool:
    """Whether a line is metadata, not prose: ``**Played:** 6 March``, ``Present: Mirel, Tobin``,
    ``Date: 524``, ``XP: 300`` — a short key and a value without a sentence in it. A transcript's
    ``MATT: Welcome…`` (an upper-case speaker and a sentence) is prose."""
    m = _META.match(line)
    if not m:
        return False
    key = m.group(0).strip(" -*:")
    if key.isupper() and len(key) > 2 and not line.lstrip().startswith("*"):
        return False  # a speaker's line
    value = line[m.end() :]
    return line.lstrip().startswith("**") or len(value) < 80 or not re.search(r"[.!?]\s", value)


def section(text: str, heading: re.Pattern[str]) -> str:
    """The body of the first section whose heading matches, up to the next heading of the same
    or a higher level ("" when there is none)."""
    heads = list(_HEADING.finditer(text))
    for i, h in enumerate(heads):
        if heading.search(h.group(2).strip()):
            level = len(h.group(1))
            end = next((n.start() for n in heads[i + 1 :] if len(n.group(1)) <= level), len(text))
            return text[h.end() : end].strip()
    return ""


def _prose(text: str) -> list[str]:
    """The document's prose sentences, markup and speaker labels cut, in order."""
    out = []
    for s, e, _ in split_sentences(text):
        raw = text[s:e]
        line = raw.strip()
        if not line or line.startswith(("#", "|", "```", "---")) or is_metadata_line(line):
            continue
        clean = _SPEAKER.sub("", _MARKUP.sub("", line))
        clean = " ".join(clean.split())
        if len(_WORD.findall(clean.lower())) >= 3:
            out.append(clean)
    return out


def _vector(sentence: str) -> dict[str, float]:
    tf = Counter(w for w in _WORD.findall(sentence.lower()) if w not in STOP_WORDS and len(w) > 2)
    return {w: 1 + math.log(c) for w, c in tf.items()}


def _cos(a: dict[str, float], b: dict[str, float]) -> float:
    if not a or not b:
        return 0.0
    dot = sum(v * b.get(w, 0.0) for w, v in a.items())
    na = math.sqrt(sum(v * v for v in a.values()))
    nb = math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb)


def extractive_summary(
    text: str, *, max_sentences: int = 4, max_chars: int = 700, keep_first: bool = False
) -> str:
    """Centrality-scored sentences spread over the whole text (see the module), in order.

    ``keep_first``: the first sentence is always kept (an author's recap opens with its point)
    and the others are spread over the rest."""
    sents = _prose(text)
    if not sents:
        return ""
    if len(sents) <= max_sentences and sum(len(s) + 1 for s in sents) <= max_chars:
        return " ".join(sents)
    vecs = [_vector(s) for s in sents]
    n = len(sents)
    # Over long texts, centrality against a strided sample of sentences keeps this linear-ish.
    sample = list(range(0, n, max(1, n // 200)))
    central = [
        sum(_cos(vecs[i], vecs[j]) for j in sample if j != i) / max(1, len(sample) - 1)
        for i in range(n)
    ]
    first = 1 if keep_first else 0
    if keep_first:
        central[0] = math.inf
    k = max(1, min(max_sentences - first, n - first))
    picked: list[int] = [0] if keep_first else []
    for part in range(k):
        lo = first + part * (n - first) // k
        hi = max(lo + 1, first + (part + 1) * (n - first) // k)
        picked.append(max(range(lo, min(hi, n)), key=lambda i: (central[i], -i)))
    out: list[str] = []
    used = 0
    for i in sorted(set(picked), key=lambda i: -central[i]):
        if used + len(sents[i]) + 1 > max_chars and out:
            continue
        out.append(sents[i] if len(sents[i]) <= max_chars else sents[i][: max_chars - 1] + "…")
        used += len(out[-1]) + 1
    order = {s: i for i, s in enumerate(sents)}
    return " ".join(sorted(out, key=lambda s: order.get(s, len(sents))))


def front_matter_summary(doc: Document) -> str:
    """The front matter's ``summary``, if the document has one.

    The loader keeps it as ``synopsis``; a synopsis it made itself (for a document with hidden
    sections: "Names: …" and the lead sentence) is no author's summary and is not used."""
    syn = doc.synopsis.strip()
    if not syn or syn.startswith("Names:") or syn in doc.text:
        return ""
    return syn


def summarize(doc: Document, *, max_sentences: int = 4, max_chars: int = 700) -> Summary:
    """The offline summary of one view (see the module for the order)."""
    own = front_matter_summary(doc)
    if own:
        return Summary(own, FRONT_MATTER)
    recap = section(doc.text, _SUMMARY_HEADINGS)
    if recap:
        text = extractive_summary(
            recap, max_sentences=max_sentences, max_chars=max_chars, keep_first=True
        )
        if text:
            return Summary(text, SECTION)
    return Summary(
        extractive_summary(doc.text, max_sentences=max_sentences, max_chars=max_chars), EXTRACTIVE
    )


#: What a model is asked for a view's summary (here and by the seeded summaries pass).
SUMMARY_SYSTEM = (
    "You summarise one document of a tabletop roleplaying campaign for the people playing it. "
    'Reply with JSON only: {"summary": "<at most 4 sentences>"}. Name the people, places and '
    "things that matter, say what happened or what the document establishes, and invent nothing."
)


async def summarize_with_model(
    doc: Document, model: LanguageModel, *, max_chars: int = 900, max_input_chars: int = 24_000
) -> Summary:
    """A model-written summary of ``doc`` (``role="summarize"``), or the offline one when the
    model fails or its reply is not ``{"summary": "<text>"}``."""
    fallback = summarize(doc)
    body = doc.text if len(doc.text) <= max_input_chars else doc.text[:max_input_chars]
    try:
        reply = await model.complete(
            system=[SUMMARY_SYSTEM],
            messages=[Message("user", f"# {doc.title}\n\n{body}")],
            max_tokens=400,
            role="summarize",
        )
    except LiminalisError as exc:
        _log.warning("summary of %s: model failed (%s); offline summary kept", doc.doc_id, exc)
        return fallback
    text = parse_summary_reply(reply.text)
    if not text:
        _log.warning("summary of %s: unusable model reply; offline summary kept", doc.doc_id)
        return fallback
    return Summary(text[:max_chars], MODEL)


def parse_summary_reply(reply: str) -> str:
    """The ``summary`` string of a ``{"summary": …}`` reply (fences allowed), or ""."""
    raw = reply.strip()
    raw = re.sub(r"^```(?:json)?\s*|\s*```$", "", raw)
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end <= start:
        return ""
    try:
        data = json.loads(raw[start : end + 1])
    except ValueError:
        return ""
    value = data.get("summary") if isinstance(data, dict) else None
    if not isinstance(value, str):
        return ""
    return " ".join(value.split())
