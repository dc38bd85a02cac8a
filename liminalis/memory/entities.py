"""Entities for the memory graph: named things the walk travels through.

:class:`NameEntities` is the first :class:`liminalis.ports.EntitySource`: it reads

* front matter — a document whose ``type`` names a kind of thing (character, place, faction,
  item, …) defines an entity of that type under its title and aliases;
* titles — every title without its series marker ("Black Sheep (section 2 of 14)",
  "Session 4 - part 2 of 3") names the series its documents belong to;
* recurring capitalised names — a capitalised phrase (not sentence-initial only, not a
  stop word) met in at least ``min_docs`` documents.

Keys are :func:`liminalis.retrieval.catalog.normalize_key` forms, so "Vex'ahlia" and
"vex ahlia" meet. A later background pass can supply better entities behind the same port.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from liminalis.retrieval.catalog import normalize_key
from liminalis.types import Document

__all__ = ["ENTITY_TYPES", "HONORIFICS", "NameEntities", "NameSpan", "name_spans", "series_name"]

#: Front-matter types that make a document an entity of that type.
ENTITY_TYPES = frozenset(
    {
        "character",
        "npc",
        "pc",
        "person",
        "place",
        "location",
        "city",
        "region",
        "faction",
        "organization",
        "organisation",
        "item",
        "artifact",
        "artefact",
        "creature",
        "monster",
        "deity",
        "god",
        "event",
        "quest",
    }
)
_SERIES = re.compile(
    r"\s*(?:[-–—:,(\[]\s*)?(?:section|part|chapter|scene|page)\s+\d+(?:\s+of\s+\d+)?\s*[)\]]?"
    r"(?:\s*\(turns?[^)]*\))?\s*$",
    re.IGNORECASE,
)
_TRAIL_NUM = re.compile(r"\s*[-–—#:]?\s*\d+\s*$")
_NAME = re.compile(r"(?<![\w'’])[A-Z][a-z'’\-]+(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][a-z'’\-]+)*")
_STOP = frozenset(
    "the a an and but or so then when what who whom whose where why how if this that these "
    "those there here he she it they we you i his her its their our your my mine yes no not "
    "oh ok okay well now just also one two three all some any every each after before while "
    "with without from into onto for of in on at to by as is was were are be been do did does "
    "have has had can could would should will shall may might must let lets let's once later "
    "still very even maybe perhaps what's that's it's i'm you're we're mr mrs sir lady lord "
    "king queen prince princess chapter section part session".split()
)


#: Honorifics and titles: a name's key leaves them out ("Marshal Osric Dunmore" → "osric dunmore").
HONORIFICS = frozenset(
    "brother sister marshal master mistress guildmaster captain warden lord lady sir king queen "
    "prince princess father mother abbot abbess saint st mr mrs ms dr".split()
)
# A capitalised phrase on one line: words joined by spaces, "of"/"the"/"de" inside, "St." kept.
_NAME_SPAN = re.compile(
    r"(?<![\w'’])(?:St\.[ \t]+)?[A-Z][a-z'’\-]*[a-z'’](?:[ \t]+(?:of[ \t]+(?:the[ \t]+)?|the[ \t]+|de[ \t]+)?"
    r"[A-Z][a-z'’\-]*[a-z'’])*"
)
_POSSESSIVE = re.compile(r"(?:['’]s|['’])$")
#: Words that start a phrase but are no part of a name ("When Tobin" → "Tobin"); titles are
#: kept (they are part of how the text names someone, and :data:`HONORIFICS` drops them from keys).
_LEADING_STOP = (_STOP - HONORIFICS) | frozenset(
    "within between since until though although because during inside outside over under above "
    "below behind beside against along among around like unlike nobody someone everyone nothing "
    "something everything none both either neither most many few several such only never always "
    "often sometimes tonight today tomorrow yesterday instead meanwhile afterward afterwards "
    "however finally again far near past through toward towards upon".split()
)


@dataclass(frozen=True, slots=True)
class NameSpan:
    """A capitalised name in a text: its ``[start, end)`` without a possessive ``'s``."""

    start: int
    end: int
    surface: str
    possessive: bool


def name_spans(text: str) -> list[NameSpan]:
    """Capitalised names in ``text`` with offsets: leading stop words ("When", "The") cut,
    a trailing possessive cut ("Mirel's" → "Mirel", "Bellwrights'" stays inside a longer name),
    single stop words dropped. Unlike :meth:`NameEntities.mentions` this keeps titles
    ("Queen", "Brother"): the knowledge layer resolves them through aliases."""
    out: list[NameSpan] = []
    for m in _NAME_SPAN.finditer(text):
        start, surface = m.start(), m.group(0)
        while True:
            first, _, rest = surface.partition(" ")
            if not rest or first.lower().rstrip("'’") not in _LEADING_STOP:
                break
            start += len(first) + 1
            surface = rest.lstrip(" \t")
            start += len(rest) - len(surface)
        possessive = bool(_POSSESSIVE.search(surface))
        surface = _POSSESSIVE.sub("", surface)
        if not surface or surface.lower() in _LEADING_STOP or len(surface) < 2:
            continue
        out.append(NameSpan(start, start + len(surface), surface, possessive))
    return out


def series_name(title: str) -> str:
    """A title without its series marker: "Black Sheep (section 2 of 14)" → "Black Sheep"."""
    t = _SERIES.sub("", title).strip()
    return _TRAIL_NUM.sub("", t).strip() or t


def _names(text: str) -> list[str]:
    out = []
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        while words and words[0].lower() in _STOP:
            words = words[1:]
        if not words:
            continue
        name = normalize_key(" ".join(words))
        if len(name) >= 3 and name not in _STOP:
            out.append(name)
    return out


class NameEntities:
    """Entities from front matter, titles and recurring capitalised names (see the module)."""

    name = "names"

    def __init__(self, *, min_docs: int = 2, max_name_words: int = 4) -> None:
        self.min_docs = min_docs
        self.max_name_words = max_name_words

    def defined(self, doc: Document) -> list[tuple[str, str]]:
        """``(key, type)`` of the entities ``doc`` defines or belongs to."""
        out: list[tuple[str, str]] = []
        series = normalize_key(series_name(doc.title))
        if series:
            out.append((series, doc.type if doc.type in ENTITY_TYPES else "series"))
        if doc.type in ENTITY_TYPES:
            out += [(normalize_key(a), doc.type) for a in doc.aliases if normalize_key(a)]
        return out

    def vocabulary(self, docs: Iterable[Document]) -> dict[str, str]:
        """Every entity key of the campaign with its type (``name`` for bare recurring names)."""
        vocab: dict[str, str] = {}
        df: Counter[str] = Counter()
        for doc in docs:
            for key, kind in self.defined(doc):
                vocab.setdefault(key, kind)
            df.update({n for n in _names(doc.text) if len(n.split()) <= self.max_name_words})
        for name, n in df.items():
            if n >= self.min_docs:
                vocab.setdefault(name, "name")
        return vocab

    def mentions(self, text: str, vocabulary: dict[str, str]) -> list[str]:
        """Keys of the vocabulary's entities named (capitalised) in ``text``."""
        return list(dict.fromkeys(n for n in _names(text) if n in vocabulary))

    def named_in_question(self, question: str, vocabulary: dict[str, str]) -> list[str]:
        """Entities a question names: capitalised names, and defined keys as a phrase in any case."""
        found = self.mentions(question, vocabulary)
        low = f" {normalize_key(question)} "
        words = set(low.split())
        found += [
            k
            for k, kind in vocabulary.items()
            if kind != "name" and len(k) > 3 and k.split()[0] in words and f" {k} " in low
        ]
        return list(dict.fromkeys(found))
