"""Offline, extractive document context for contextual embeddings.

A passage such as "She finally told him the truth" is unfindable on its own; embedded with its
document's title, heading path and a short synopsis it carries the referents. The synopsis is
extractive so it needs no model: the document's most frequent proper names plus its lead
sentence. It is chosen to be *stable under small edits* (frequency ranks and the lead rarely
move), because any change to it re-embeds every passage of the document. A front-matter
``summary`` (or, later, an LLM-written one) replaces it.
"""

from __future__ import annotations

import re
from collections import Counter

from liminalis.text import STOP_WORDS, split_sentences

__all__ = ["extractive_synopsis", "contextual_text", "title_text"]

_NAME = re.compile(r"\b([A-Z][a-z'’]+(?:[ -][A-Z][a-z'’]+)*)\b")
_NOT_NAMES = STOP_WORDS | {
    "chapter",
    "section",
    "session",
    "but",
    "then",
    "when",
    "one",
    "yes",
    "oh",
    "okay",
}


def extractive_synopsis(title: str, text: str, *, names: int = 6, lead_chars: int = 220) -> str:
    counts: Counter[str] = Counter()
    for m in _NAME.finditer(text):
        name = m.group(1)
        if name.lower() in _NOT_NAMES or name.lower() in title.lower():
            continue
        # Sentence-initial capitals are noise; only count names seen at least twice.
        counts[name] += 1
    top = sorted(
        (n for n, c in counts.most_common(names * 2) if c >= 2), key=lambda n: (-counts[n], n)
    )[:names]
    lead = ""
    for s, e, _ in split_sentences(text[:2000]):
        chunk = text[s:e]
        if chunk.lstrip().startswith("#"):
            continue
        lead = chunk[:lead_chars]
        break
    parts = []
    if top:
        parts.append("Names: " + ", ".join(sorted(top)) + ".")
    if lead:
        parts.append(lead)
    return " ".join(parts)


def contextual_text(title: str, heading: str, synopsis: str, passage: str) -> str:
    head = title if not heading or heading == title else f"{title} — {heading}"
    return f"{head}\n{synopsis}\n\n{passage}" if synopsis else f"{head}\n\n{passage}"


def title_text(title: str, aliases: tuple[str, ...], synopsis: str) -> str:
    alias = f" ({', '.join(aliases)})" if aliases else ""
    return f"{title}{alias}. {synopsis}".strip()
