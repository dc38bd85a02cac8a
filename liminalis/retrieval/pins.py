"""Deterministic pins: documents that reach the answerer regardless of ranking.

Sources, in precedence order: always-include documents (campaign config), ``/pin`` pins of the
campaign or chat, documents forced for one turn, ``@``-mentions (``@Title``, ``@[Two Words]``,
``@path/id``) and any document key (title, alias, file name) named in the query.

Every source is resolved through the lens-scoped catalog, so a players lens that mentions or
names a GM-only document simply gets nothing from it — no error, nothing that reveals it exists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from liminalis.retrieval.catalog import Catalog

__all__ = ["Pin", "resolve_pins", "mentions_in", "strip_mentions"]

_MENTION = re.compile(r"@\[([^\]]{1,200})\]|@([\w./-]{2,120})")


@dataclass(frozen=True, slots=True)
class Pin:
    doc_id: str
    reason: str  # always | pinned | forced | mention | named


def mentions_in(query: str) -> list[str]:
    return [m.group(1) or m.group(2) for m in _MENTION.finditer(query)]


def strip_mentions(query: str) -> str:
    """The query with ``@[...]`` brackets removed but the mentioned words kept for search."""
    return _MENTION.sub(
        lambda m: m.group(1) or m.group(2).replace("-", " ").replace("_", " "), query
    )


def resolve_pins(
    catalog: Catalog,
    query: str,
    lens: frozenset[str],
    *,
    always: Sequence[str] = (),
    pinned: Sequence[str] = (),
    forced: Sequence[str] = (),
    named_keys: bool = True,
) -> list[Pin]:
    """All pins for one turn, de-duplicated, visible to ``lens`` only."""
    out: list[Pin] = []
    seen: set[str] = set()

    def add(doc_ids: Sequence[str], reason: str) -> None:
        for d in doc_ids:
            if d not in seen and catalog.visible_doc(d, lens):
                seen.add(d)
                out.append(Pin(d, reason))

    def keyed(keys: Sequence[str]) -> list[str]:
        found: list[str] = []
        for k in keys:
            found.extend(catalog.resolve_key(k, lens))
        return found

    add(keyed(always), "always")
    # Stored pins are document ids: the document itself, never a namesake whose title or alias
    # happens to equal the id ("factions" pinned must not pin the guilds document aliased so).
    # A pin names a file; each lens gets the view of it that it may read.
    add([v for d in pinned for v in catalog.views_of(d, lens)], "pinned")
    add(keyed(forced), "forced")
    add(keyed(mentions_in(query)), "mention")
    if named_keys:
        add(catalog.named_in(query, lens), "named")
    return out
