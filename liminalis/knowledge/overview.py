"""A campaign overview for one lens, as plain text sized for a prompt's cached prefix.

Built only from what the caller hands it, which :class:`~liminalis.knowledge.service.Knowledge`
draws from lens-visible facts alone. Four parts, in this order and each with a share of the
cap: who and what matters (entities by mention count), the arc so far (session summaries in
session order), open threads (latest sessions first), and how the documents are organised
(counts by type and folder). Deterministic: the same facts give the same text, byte for byte,
so the prefix stays cached.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["OverviewEntity", "OverviewSession", "build_overview"]


@dataclass(frozen=True, slots=True)
class OverviewEntity:
    name: str
    type: str
    mentions: int
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OverviewSession:
    title: str
    summary: str
    threads: tuple[str, ...] = ()


#: Shares of the character cap: entities, arc, threads, organisation.
_SHARES = (0.3, 0.45, 0.15, 0.1)


def _fit(lines: Sequence[str], limit: int) -> list[str]:
    out: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > limit:
            if not out and limit > 20:
                out.append(line[: limit - 2] + "…")
            break
        out.append(line)
        used += len(line) + 1
    return out


def build_overview(
    *,
    title: str,
    entities: Sequence[OverviewEntity],
    sessions: Sequence[OverviewSession],
    documents: Sequence[tuple[str, str]],
    max_chars: int = 6000,
    top_entities: int = 25,
) -> str:
    """The overview text (at most ``max_chars``). ``documents``: ``(path, type)`` of each
    visible file; ``sessions`` in session order."""
    budget = [int(max_chars * s) for s in _SHARES]
    parts = [f"# {title}"]
    who = [
        f"- {e.name} ({e.type}, {e.mentions} mentions"
        + (f"; also {', '.join(e.aliases[:3])}" if e.aliases else "")
        + ")"
        for e in sorted(entities, key=lambda e: (-e.mentions, e.name))[:top_entities]
    ]
    if who:
        parts.append("## Who and what matters\n" + "\n".join(_fit(who, budget[0])))
    # The arc keeps the latest sessions whole when it must cut: older ones drop first.
    arc = [f"- {s.title}: {s.summary}" for s in sessions]
    kept = _fit(list(reversed(arc)), budget[1])[::-1]
    if kept:
        head = "## The arc so far"
        if len(kept) < len(arc):
            head += f" (the last {len(kept)} of {len(arc)} sessions)"
        parts.append(head + "\n" + "\n".join(kept))
    threads = [f"- {t} ({s.title})" for s in reversed(sessions) for t in s.threads]
    if threads:
        parts.append("## Open threads\n" + "\n".join(_fit(threads, budget[2])))
    types = Counter(t for _, t in documents)
    folders = Counter(
        str(PurePosixPath(p).parent) if str(PurePosixPath(p).parent) != "." else "(top level)"
        for p, _ in documents
    )
    org = [
        "- by type: "
        + ", ".join(f"{n} {t}" for t, n in sorted(types.items(), key=lambda x: (-x[1], x[0]))),
        "- by folder: "
        + ", ".join(f"{f}/ {n}" for f, n in sorted(folders.items(), key=lambda x: (-x[1], x[0]))),
    ]
    parts.append("## How the documents are organised\n" + "\n".join(_fit(org, budget[3] + 200)))
    text = "\n\n".join(parts)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
