"""An in-memory snapshot of one campaign at one generation: documents, passages, key index.

Built from SQLite (the source of truth) and cached by the engine until the campaign's
generation changes. Every lookup here is lens-aware: ``for_lens`` views expose only what the
lens may see, which is how pins, named keys, autocompletion and lexical search all share the
one visibility rule in :mod:`liminalis.lens`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import numpy as np

from liminalis.ingest.sections import source_of
from liminalis.lens import visible
from liminalis.retrieval.lexical import BM25Index, Vocabulary, title_entry_id
from liminalis.text import Tokenizer, fold_accents, natural_key
from liminalis.types import Document

__all__ = ["PassageInfo", "Catalog", "normalize_key"]

_KEY_WS = re.compile(r"[^a-z0-9]+")
_KEY_STOP = frozenset("the a an of and in on at to for".split())
_DIGITS = re.compile(r"(\d+)")


def normalize_key(text: str) -> str:
    """Lower-case, accent-folded, punctuation-free form used to match document keys."""
    return _KEY_WS.sub(" ", fold_accents(text).lower().replace("_", " ")).strip()


@dataclass(frozen=True, slots=True)
class PassageInfo:
    passage_id: str
    doc_id: str
    ordinal: int
    start: int
    end: int
    heading: str
    visibility: frozenset[str]
    tokens: tuple[str, ...]
    prev_id: str | None
    next_id: str | None


@dataclass(slots=True)
class Catalog:
    """Documents and passages of a campaign, plus lens-scoped derived indexes."""

    campaign: str
    generation: int
    documents: dict[str, Document]
    passages: dict[str, PassageInfo]
    by_doc: dict[str, list[str]]
    tokenizer: Tokenizer
    k1: float = 0.6
    b: float = 0.4
    _lexical: dict[frozenset[str], BM25Index] = field(default_factory=dict)
    _doc_lexical: dict[tuple[frozenset[str], float, float], BM25Index] = field(default_factory=dict)
    _keys: dict[str, set[str]] = field(default_factory=dict)
    _titles: dict[str, frozenset[str]] = field(default_factory=dict)
    _bigrams: dict[tuple[frozenset[str], str], frozenset[tuple[str, str]]] = field(
        default_factory=dict
    )
    _doc_view: dict[tuple[frozenset[str], str], tuple[tuple[str, ...], frozenset[str], int]] = (
        field(default_factory=dict)
    )
    _neighbours: dict[frozenset[str], dict[str, tuple[str, ...]]] = field(default_factory=dict)
    _by_source: dict[str, list[str]] = field(default_factory=dict)
    #: Every lens's two BM25 indexes are built from the same stored tokens, so they are encoded
    #: to term ids once per catalog (passage id / doc id → ids), written under ``_building``;
    #: an index holds statistics only for the terms of the entries its lens may see.
    _vocabulary: Vocabulary = field(default_factory=Vocabulary, repr=False, compare=False)
    _passage_terms: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    _title_terms: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    _name_terms: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    #: Retrieval reads a catalog from worker threads, many questions at once: one builds a
    #: lens's BM25 index while the others wait for it, rather than each building its own. (The
    #: smaller caches are filled without it: two threads may compute one entry, to one value.)
    _building: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def visibilities(self) -> set[frozenset[str]]:
        """The distinct visibility sets of this campaign's documents (for store filters)."""
        return {d.visibility for d in self.documents.values()}

    def __post_init__(self) -> None:
        for doc in self.documents.values():
            self._by_source.setdefault(source_of(doc.doc_id), []).append(doc.doc_id)
            for key in self.keys_of(doc):
                self._keys.setdefault(key, set()).add(doc.doc_id)

    def views_of(self, doc_id: str, lens: frozenset[str]) -> list[str]:
        """The documents read from ``doc_id``'s file that ``lens`` may see: the file itself, or
        the views of a file with hidden sections (a pin names the file; each lens gets its view)."""
        return [
            d
            for d in sorted(self._by_source.get(source_of(doc_id), ()))
            if self.visible_doc(d, lens)
        ]

    @staticmethod
    def keys_of(doc: Document) -> set[str]:
        """Title, aliases, file name and doc id, normalised; too-generic keys are skipped."""
        named = [doc.title, *doc.aliases]
        # A one-word file name ("bells.md") is too generic to pin on; titles and aliases are
        # chosen by the GM and always count.
        files = [normalize_key(x) for x in (PurePosixPath(doc.path).stem, source_of(doc.doc_id))]
        keys = set()
        for k in [normalize_key(r) for r in named] + [f for f in files if len(f.split()) > 1]:
            words = k.split()
            if len(k) < 4 or not words or all(w in _KEY_STOP for w in words):
                continue
            keys.add(k)
        return keys

    def visible_doc(self, doc_id: str, lens: frozenset[str]) -> bool:
        doc = self.documents.get(doc_id)
        return doc is not None and visible(doc.visibility, lens)

    def visible_passage(self, passage_id: str, lens: frozenset[str]) -> bool:
        p = self.passages.get(passage_id)
        return p is not None and visible(p.visibility, lens) and self.visible_doc(p.doc_id, lens)

    def passage_text(self, passage_id: str) -> str:
        p = self.passages[passage_id]
        return self.documents[p.doc_id].text[p.start : p.end]

    def first_passage(self, doc_id: str) -> str | None:
        ids = self.by_doc.get(doc_id)
        return ids[0] if ids else None

    def _visible(self, lens: frozenset[str]) -> Iterator[tuple[Document, list[PassageInfo]]]:
        """Each document ``lens`` may see, with its passages ``lens`` may see (the one rule both
        lexical indexes are built from). A campaign has a handful of distinct visibility sets
        and tens of thousands of passages, so :func:`visible` is asked once per set."""
        seen: dict[frozenset[str], bool] = {}

        def shown(visibility: frozenset[str]) -> bool:
            ok = seen.get(visibility)
            if ok is None:
                ok = seen[visibility] = visible(visibility, lens)
            return ok

        for doc_id, pids in self.by_doc.items():
            doc = self.documents[doc_id]
            if shown(doc.visibility):
                yield (doc, [p for p in (self.passages[x] for x in pids) if shown(p.visibility)])

    def _passage_ids(self, passage: PassageInfo) -> np.ndarray:
        """The passage's stored tokens as term ids (encoded once; call under ``_building``)."""
        ids = self._passage_terms.get(passage.passage_id)
        if ids is None:
            ids = self._passage_terms[passage.passage_id] = self._vocabulary.encode(passage.tokens)
        return ids

    def _title_ids(self, doc: Document) -> np.ndarray:
        """Term ids of the document's title entry: title, aliases and file name (encoded once;
        call under ``_building``)."""
        ids = self._title_terms.get(doc.doc_id)
        if ids is None:
            text = " ".join([doc.title, *doc.aliases, PurePosixPath(doc.path).stem])
            ids = self._title_terms[doc.doc_id] = self._vocabulary.encode(self.tokenizer(text))
        return ids

    def _name_ids(self, doc: Document) -> np.ndarray:
        """Term ids of the document's title and aliases, which open its whole-document entry
        (encoded once; call under ``_building``)."""
        ids = self._name_terms.get(doc.doc_id)
        if ids is None:
            text = " ".join([doc.title, *doc.aliases])
            ids = self._name_terms[doc.doc_id] = self._vocabulary.encode(self.tokenizer(text))
        return ids

    def doc_view(
        self, doc_id: str, lens: frozenset[str]
    ) -> tuple[tuple[str, ...], frozenset[str], int]:
        """The passages of ``doc_id`` that ``lens`` may see, their term set and token count
        (cached; the learned ranker's coverage features read only what the lens may see)."""
        key = (frozenset(lens), doc_id)
        view = self._doc_view.get(key)
        if view is None:
            pids = tuple(x for x in self.by_doc.get(doc_id, ()) if self.visible_passage(x, lens))
            tokens = [t for x in pids for t in self.passages[x].tokens]
            view = (pids, frozenset(tokens), len(tokens))
            self._doc_view[key] = view
        return view

    def doc_bigrams(self, doc_id: str, lens: frozenset[str]) -> frozenset[tuple[str, str]]:
        """Adjacent token pairs (stop words already dropped) of the passages ``lens`` may see."""
        key = (frozenset(lens), doc_id)
        pairs = self._bigrams.get(key)
        if pairs is None:
            found: set[tuple[str, str]] = set()
            for x in self.doc_view(doc_id, lens)[0]:
                toks = self.passages[x].tokens
                found.update(zip(toks, toks[1:], strict=False))
            pairs = self._bigrams[key] = frozenset(found)
        return pairs

    def doc_positions(
        self, doc_id: str, lens: frozenset[str], terms: Collection[str]
    ) -> dict[str, list[int]]:
        """Each of ``terms`` found in the passages of ``doc_id`` that ``lens`` may see → its token
        positions, the passages read as one sequence (they do not overlap): the learned ranker's
        proximity feature. Not cached: a scan of the stored tokens costs about a millisecond
        for a query's candidates, where a cache of every document's positions would hold ~60 KB
        a document per lens."""
        found: dict[str, list[int]] = {}
        tokens = (t for x in self.doc_view(doc_id, lens)[0] for t in self.passages[x].tokens)
        for i, t in enumerate(tokens):
            if t in terms:
                found.setdefault(t, []).append(i)
        return found

    def neighbours(self, doc_id: str, lens: frozenset[str]) -> tuple[str, ...]:
        """The documents just before and after ``doc_id`` in its numbered series: the files of
        its folder whose names differ from its own only in their numbers (session-9,
        session-10; part-2, part-3), in numeric order, among those ``lens`` may see (cached per
        lens). Sessions and a story's sections are written in order, and what a question asks
        about often runs across the boundary: the learned ranker's ``neighbour_rel``. Files
        named without a number (harbour.md beside inn.md) are in no series: alphabetical
        order says nothing about what they hold."""
        lens = frozenset(lens)
        table = self._neighbours.get(lens)
        if table is None:
            series: dict[tuple[str, str], list[tuple[list[tuple[int, int, str]], str]]] = {}
            for d, doc in self.documents.items():
                path = PurePosixPath(doc.path)
                if visible(doc.visibility, lens) and _DIGITS.search(path.name):
                    key = (str(path.parent), _DIGITS.sub("#", path.name))
                    series.setdefault(key, []).append((natural_key(path.name), d))
            table = {}
            for items in series.values():
                ids = [d for _, d in sorted(items)]
                for i, d in enumerate(ids):
                    table[d] = tuple(ids[j] for j in (i - 1, i + 1) if 0 <= j < len(ids))
            self._neighbours[lens] = table
        return table.get(doc_id, ())

    def title_terms(self, doc_id: str) -> frozenset[str]:
        """Tokens of a document's title and aliases (cached)."""
        terms = self._titles.get(doc_id)
        if terms is None:
            doc = self.documents[doc_id]
            terms = self._titles[doc_id] = frozenset(
                self.tokenizer(" ".join([doc.title, *doc.aliases]))
            )
        return terms

    def lexical(self, lens: frozenset[str]) -> BM25Index:
        """BM25 over the passages and title entries ``lens`` may see (built once per lens)."""
        key = frozenset(lens)
        index = self._lexical.get(key)
        if index is not None:
            return index
        with self._building:
            index = self._lexical.get(key)
            if index is not None:
                return index
            ids: list[str] = []
            terms: list[np.ndarray] = []
            for doc, passages in self._visible(lens):
                ids.append(title_entry_id(doc.doc_id))
                terms.append(self._title_ids(doc))
                for p in passages:
                    ids.append(p.passage_id)
                    terms.append(self._passage_ids(p))
            index = BM25Index.from_encoded(ids, terms, self._vocabulary, k1=self.k1, b=self.b)
            self._lexical[key] = index
        return index

    def doc_lexical(self, lens: frozenset[str], *, k1: float = 0.6, b: float = 0.3) -> BM25Index:
        """BM25 over whole documents ``lens`` may see: the title entry plus every passage's
        tokens, one entry per document (built once per lens and setting).

        The passage index rewards the one passage densest in query terms; this one rewards a
        document whose terms are spread over many passages, which is how a recap or summary
        question matches a long scene.
        """
        key = (frozenset(lens), k1, b)
        index = self._doc_lexical.get(key)
        if index is not None:
            return index
        with self._building:
            index = self._doc_lexical.get(key)
            if index is not None:
                return index
            ids: list[str] = []
            terms: list[np.ndarray] = []
            for doc, passages in self._visible(lens):
                ids.append(doc.doc_id)
                terms.append(
                    np.concatenate([self._name_ids(doc), *(self._passage_ids(p) for p in passages)])
                )
            index = BM25Index.from_encoded(ids, terms, self._vocabulary, k1=k1, b=b)
            self._doc_lexical[key] = index
        return index

    def resolve_key(self, key: str, lens: frozenset[str]) -> list[str]:
        """Documents whose title, alias, file name or id equals ``key`` (for this lens only)."""
        k = normalize_key(key)
        hits = [d for d in self._keys.get(k, set()) if self.visible_doc(d, lens)]
        if not hits:
            # A path with or without its suffix ("overview.md", "lore/bells") names the document id.
            stem = key.strip().removeprefix("./")
            stem = (
                stem.rsplit(".", 1)[0]
                if PurePosixPath(stem).suffix.lower() in {".md", ".markdown", ".txt"}
                else stem
            )
            hits = [
                d
                for d in self.documents
                if (source_of(d) == stem or normalize_key(source_of(d)) == k)
                and self.visible_doc(d, lens)
            ]
        return sorted(hits)

    def named_in(self, query: str, lens: frozenset[str]) -> list[str]:
        """Documents one of whose keys appears as a whole phrase in ``query``."""
        q = f" {normalize_key(query)} "
        found: list[str] = []
        for key, doc_ids in self._keys.items():
            if f" {key} " in q:
                found.extend(d for d in doc_ids if self.visible_doc(d, lens))
        return sorted(
            set(found), key=lambda d: -max(len(k) for k in self.keys_of(self.documents[d]))
        )

    def titles_for(
        self, lens: frozenset[str], prefix: str = "", *, limit: int = 25
    ) -> list[tuple[str, str]]:
        """``(doc_id, title)`` pairs visible to ``lens`` whose title or alias contains ``prefix``."""
        p = normalize_key(prefix)
        out = []
        for doc in sorted(self.documents.values(), key=lambda d: d.title.lower()):
            if not visible(doc.visibility, lens):
                continue
            if not p or any(p in normalize_key(x) for x in (doc.title, *doc.aliases, doc.doc_id)):
                out.append((doc.doc_id, doc.title))
            if len(out) >= limit:
                break
        return out
