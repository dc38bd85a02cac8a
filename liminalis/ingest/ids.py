"""Bounded document ids: every id a file gives stays within what the vector store can hold.

A document id is the file's campaign-relative path (``liminalis.ingest.loaders.doc_id_for``),
and everything the store keys on grows from it: a view ``{id}//gm`` or ``{id}//lens:NAME``, a
passage ``{view}#{20 hex}.{n}``, a sentence window ``{passage}@{offset}``, a vector id
``{kind}:{owner}:{10 hex}`` whose owner may be percent-escaped (three bytes for each ``%``, ``"``
or ``\\``; ``liminalis.ingest.indexer.vector_id``). Milvus holds at most 512 in each of its id
columns (bytes on a server, characters in Milvus Lite). A deeply nested folder once gave a
646-character vector id, and that one file failed the whole campaign's ingest.

So a file's id is kept within :data:`DOC_ID_BYTES`, counted as its vector ids would write it;
the suffixes above add at most :data:`SUFFIX_BYTES`. An id over the bound keeps its head and ends
in ``~`` and a hash of the whole path: the same file gets the same id on every run, and two long
paths that share a head still differ. Ids within the bound are unchanged (no re-index).
"""

from __future__ import annotations

import hashlib

__all__ = [
    "DOC_ID_BYTES",
    "LENS_NAME_BYTES",
    "STORE_ID_BYTES",
    "SUFFIX_BYTES",
    "bound_doc_id",
    "id_bytes",
]

#: The vector store's limit on an id column (Milvus VARCHAR ``max_length`` in our schema).
STORE_ID_BYTES = 512
#: The longest lens name a campaign may define (a lens is an element of the store's ``vis``
#: array, whose elements hold 64; ``liminalis.campaign`` ignores longer names).
LENS_NAME_BYTES = 48
#: What the ids built on a document id add to it at most: ``//lens:`` and a lens name, ``#``, 20
#: hex digits, ``.`` and a six-digit repeat count, ``@`` and a five-digit offset, and a vector
#: id's ``k:`` … ``:`` and 10 hex digits.
SUFFIX_BYTES = 7 + LENS_NAME_BYTES + 1 + 20 + 7 + 6 + 13
#: The bound on a file's document id, as :func:`id_bytes` counts it.
DOC_ID_BYTES = STORE_ID_BYTES - SUFFIX_BYTES
_HASH_HEX = 16
_ESCAPED = frozenset('%"\\')


def id_bytes(text: str) -> int:
    """Bytes ``text`` takes in a vector id: UTF-8, with ``%``, ``"`` and ``\\`` counted as their
    three-byte escapes (whether or not this id gets escaped: the bound must hold either way)."""
    return len(text.encode("utf-8", "surrogatepass")) + 2 * sum(map(text.count, _ESCAPED))


def bound_doc_id(doc_id: str, *, limit: int = DOC_ID_BYTES) -> str:
    """``doc_id`` itself when it fits ``limit`` bytes (:func:`id_bytes`), else its longest head
    that fits with ``~`` and a hash of the whole id after it (stable across runs)."""
    if id_bytes(doc_id) <= limit:
        return doc_id
    digest = hashlib.blake2b(
        doc_id.encode("utf-8", "surrogatepass"), digest_size=_HASH_HEX // 2
    ).hexdigest()
    room = limit - 1 - _HASH_HEX
    head: list[str] = []
    used = 0
    for ch in doc_id:
        cost = id_bytes(ch)
        if used + cost > room:
            break
        head.append(ch)
        used += cost
    # A head ending in "/" would read as a folder; "//" never occurs in a path-derived id.
    return "".join(head).rstrip("/") + "~" + digest
