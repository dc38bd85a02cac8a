"""Small real fakes for tests and offline tooling: no mocks of our own code.

* :class:`HashEmbedder` — deterministic bag-of-hashed-words vectors (shared words → similar).
* :class:`MemoryVectorStore` — exact inner-product search with the same lens filter contract.
* :class:`ScriptedModel` — a ``LanguageModel`` that replies from a script and records calls.
* :class:`FrozenClock` — a clock you can set and advance.
* :class:`KeywordReranker` / :class:`BrokenReranker` — rerankers with known behaviour.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import io
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from liminalis.lens import visible
from liminalis.ports import Completion, Message, Usage, VectorHit, VectorRecord

__all__ = [
    "HeldModel",
    "HashEmbedder",
    "MemoryVectorStore",
    "ScriptedModel",
    "FrozenClock",
    "KeywordReranker",
    "BrokenReranker",
    "SlowReranker",
]

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Feature-hashed bag of words, L2-normalised. Fast, deterministic, model-free."""

    def __init__(self, dim: int = 256, model_id: str = "hash-256") -> None:
        self._dim = dim
        self._id = model_id
        self.calls = 0
        self.texts_embedded = 0

    @property
    def model_id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return self._dim

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self._dim, dtype=np.float32)
        for w in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "big")
            v[h % self._dim] += 1.0 if (h >> 31) & 1 else -1.0
        n = float(np.linalg.norm(v))
        return v / n if n else v

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        return (
            np.stack([self._vec(t) for t in texts])
            if texts
            else np.zeros((0, self._dim), np.float32)
        )

    async def embed_query(self, text: str) -> np.ndarray:
        return self._vec(text)


class MemoryVectorStore:
    """In-memory ``VectorStore`` with the same filtering contract as Milvus."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, VectorRecord]] = {}

    async def ensure(self, campaign: str, *, dim: int, model_id: str) -> bool:
        created = campaign not in self.rows
        self.rows.setdefault(campaign, {})
        return created

    async def upsert(self, campaign: str, records: Sequence[VectorRecord]) -> None:
        for r in records:
            self.rows[campaign][r.id] = r

    async def delete(self, campaign: str, ids: Sequence[str]) -> None:
        for i in ids:
            self.rows[campaign].pop(i, None)

    async def ids(self, campaign: str) -> set[str]:
        return set(self.rows.get(campaign, {}))

    async def count(self, campaign: str) -> int:
        return len(self.rows.get(campaign, {}))

    async def invalidate(self, campaign: str) -> None:
        """Nothing is cached: every search reads the rows."""

    async def search(
        self,
        campaign: str,
        vector: np.ndarray,
        *,
        lens: frozenset[str],
        top_k: int,
        visibilities: object = None,
        doc_ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        out = []
        only = set(doc_ids) if doc_ids is not None else None
        for r in self.rows.get(campaign, {}).values():
            if only is not None and r.doc_id not in only:
                continue
            if not visible(r.visibility, lens):
                continue
            out.append(
                VectorHit(r.id, r.passage_id, r.doc_id, r.kind, float(np.dot(r.vector, vector)))
            )
        out.sort(key=lambda h: -h.score)
        return out[:top_k]

    async def flush(self, campaign: str) -> None:
        return None

    async def drop(self, campaign: str) -> None:
        self.rows.pop(campaign, None)

    async def close(self) -> None:
        return None


class KeywordReranker:
    """Scores a passage by how many times it contains ``keyword`` (a reranker with known output)."""

    model_id = "keyword"

    def __init__(self, keyword: str) -> None:
        self.keyword = keyword.lower()

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return [float(p.lower().count(self.keyword)) for p in passages]


class BrokenReranker:
    model_id = "broken"

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        raise RuntimeError("model weights missing")


class SlowReranker:
    model_id = "slow"

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        await asyncio.sleep(30)
        return [0.0] * len(passages)


@dataclass
class ScriptedModel:
    """A ``LanguageModel`` replying with scripted texts (cycled); records every request."""

    replies: list[str] = field(default_factory=lambda: ["(scripted answer)"])
    name: str = "scripted"
    requests: list[dict[str, object]] = field(default_factory=list)

    async def complete(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> Completion:
        self.requests.append(
            {
                "system": list(system),
                "messages": list(messages),
                "cache_upto": cache_upto,
                "role": role,
                "model": model,
            }
        )
        text = self.replies[(len(self.requests) - 1) % len(self.replies)]
        return Completion(
            text=text,
            model=model or self.name,
            usage=Usage(
                input_tokens=sum(len(s) for s in system) // 4, output_tokens=len(text) // 4
            ),
        )

    async def stream(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> AsyncIterator[str]:
        c = await self.complete(
            system=system,
            messages=messages,
            cache_upto=cache_upto,
            max_tokens=max_tokens,
            role=role,
            model=model,
        )
        for i in range(0, len(c.text), 40):
            yield c.text[i : i + 40]


@dataclass
class HeldModel(ScriptedModel):
    """A ``ScriptedModel`` that holds each reply until ``release`` is set (``started`` says a
    request arrived): for the races of an answer in flight."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def complete(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> Completion:
        self.started.set()
        await self.release.wait()
        return await super().complete(
            system=system,
            messages=messages,
            cache_upto=cache_upto,
            max_tokens=max_tokens,
            role=role,
            model=model,
        )


class FrozenClock:
    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def now(self) -> dt.datetime:
        return self._now

    def advance(self, **kwargs: float) -> None:
        self._now += dt.timedelta(**kwargs)

    def set(self, when: dt.datetime) -> None:
        self._now = when


def _pdf_string(text: str) -> str:
    """``text`` as a PDF literal string in WinAnsi (Latin-1 here), parentheses escaped."""
    safe = text.encode("latin-1", "replace").decode("latin-1")
    return "(" + safe.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def text_pdf(
    pages: Sequence[str | None],
    *,
    outline: Sequence[tuple[int, str, int]] = (),
    first_label: int = 1,
) -> bytes:
    """A small PDF whose pages hold ``pages``' lines in Helvetica (``None``: a page with no text
    layer, as a scan has), with bookmarks ``(page index, title, level)`` and page labels
    starting at ``first_label``: fixtures for tests and the PDF ingest benchmark, written with
    pypdf alone (no PDF toolkit at run time)."""
    from pypdf import PdfWriter
    from pypdf.constants import PageLabelStyle
    from pypdf.generic import (
        ContentStream,
        DecodedStreamObject,
        DictionaryObject,
        IndirectObject,
        NameObject,
    )

    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
            NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
        }
    )
    font_ref = writer._add_object(font)
    for text in pages:
        page = writer.add_blank_page(width=612, height=792)
        if text is None:
            continue
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 740 Td"]
        for line in text.split("\n"):
            ops += [f"{_pdf_string(line)} Tj", "T*"]
        ops.append("ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(ops).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(ContentStream(stream, writer))
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font_ref})}
        )
    if first_label != 1:
        writer.set_page_label(0, len(pages) - 1, PageLabelStyle.DECIMAL, start=first_label)
    parents: dict[int, IndirectObject] = {}
    for index, title, level in outline:
        parent = parents.get(level - 1) if level > 1 else None
        parents[level] = writer.add_outline_item(title=title, page_number=index, parent=parent)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def word_document(blocks: Sequence[tuple[str, str]]) -> bytes:
    """A ``.docx`` of ``(style, text)`` paragraphs (``"Heading 1"``, ``"Normal"``, ``"List
    Bullet"`` …): fixtures for tests."""
    import docx

    document = docx.Document()
    for style, text in blocks:
        document.add_paragraph(text, style=style)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
