"""The knowledge layer as passes: its node types, the passes seeded per campaign, the overview.

Importing this module registers the three node types the pass registry reserves for it
(:data:`liminalis.passes.PLACEHOLDERS`), each writing one part of every view's facts to the
knowledge tables (:meth:`liminalis.store.knowledge.KnowledgeRepository.write_parts`) with the
view's own visibility, so a GM view's facts are GM-only and a hidden section, which lives only
in ``X//gm``, reaches no player's facts:

================== ================================== =========================================
type               inputs                             writes
================== ================================== =========================================
``extract-entities`` ``views`` (+ ``records``)        entities, mentions, relations
``write-summary``  ``views`` (+ ``records``)          the view's summary
``tag-motifs``     ``views`` (+ ``records``)          themes and open threads
================== ================================== =========================================

With ``params.from = "model"`` a node also takes the ``records`` a ``parse-json`` node made of
the model's replies (one JSON object per view, schema-checked there) and validates them again
against the view's text (:func:`merge_model_entities`, :func:`model_summary`,
:func:`merge_model_motifs`): a name the text does not contain, a relation no sentence states, a
theme word the text never uses is dropped. A view whose reply was unusable keeps its offline
facts, so a bad reply costs the model's improvement, never the facts.

:class:`KnowledgePasses` seeds per campaign the passes ``entities``, ``summaries`` and
``motifs`` (:func:`seeded_definitions`: offline, or ``prompt-model`` → ``parse-json`` → node when
a model is configured), idempotently: an unchanged definition is not saved again, so nothing is
reset. Before and after every trigger it forgets the facts of views that are gone or whose
visibility moved (a document made GM-only keeps no public facts while its passes wait, for a
model, say); after, it rebuilds the per-lens campaign overview when the facts it is built from
changed
(:meth:`liminalis.knowledge.service.Knowledge.refresh_overviews`). The overview is stored apart
from every document, so it is never read back as an input of a pass or of itself.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from liminalis.knowledge.entities import CANONICAL_TYPES, canonical_type, name_key
from liminalis.knowledge.facts import Mention, Motif, RelationFact, ViewFacts
from liminalis.knowledge.service import Knowledge, extract_parts
from liminalis.knowledge.summaries import MODEL, SUMMARY_SYSTEM
from liminalis.passes.definition import Caps, PassDefinition, definition_from_mapping
from liminalis.passes.executor import RunResult
from liminalis.passes.registry import (
    RECORDS,
    VIEWS,
    DocView,
    NodeContext,
    NodeRegistry,
    Record,
)
from liminalis.text import split_sentences
from liminalis.types import Document

if TYPE_CHECKING:
    from liminalis.passes.service import Passes
    from liminalis.store.sqlite import Database

__all__ = [
    "ENTITY_SYSTEM",
    "KNOWLEDGE_PASSES",
    "KnowledgePasses",
    "install",
    "merge_model_entities",
    "merge_model_motifs",
    "model_summary",
    "seeded_definitions",
]

_log = logging.getLogger(__name__)

#: The seeded passes, by the part of the facts each writes.
KNOWLEDGE_PASSES = {"entities": "entities", "summaries": "summary", "motifs": "motifs"}
_RELATION_KINDS = (
    "parent-of",
    "grandparent-of",
    "sibling-of",
    "kin-of",
    "leader-of",
    "member-of",
    "located-in",
    "ally-of",
    "enemy-of",
    "employs",
)
_TYPES = tuple(sorted(set(CANONICAL_TYPES.values())))


# -- the node types ----------------------------------------------------------------------------


def _inputs(params: Mapping[str, Any]) -> Mapping[str, str]:
    return (
        {"views": VIEWS, "records": RECORDS} if params.get("from") == "model" else {"views": VIEWS}
    )


def _check(params: Mapping[str, Any]) -> None:
    if params.get("from", "documents") not in {"documents", "model"}:
        raise ValueError("params.from must be documents or model")


async def _source(ctx: NodeContext, view: DocView) -> tuple[Document, list[tuple[str, int, int]]]:
    db = _db(ctx)
    doc = await db.documents.get(ctx.campaign, view.view_id)
    if doc is None:
        raise LookupError(f"view {view.view_id} is gone")
    spans = [
        (p.passage_id, p.start, p.end)
        for p in await db.documents.passages(ctx.campaign, doc.doc_id)
    ]
    return doc, spans


def _db(ctx: NodeContext) -> Database:
    if ctx.db is None:
        raise RuntimeError("the knowledge node types need the store (NodeContext.db)")
    return ctx.db


def _replies(ctx: NodeContext, inputs: Mapping[str, Any]) -> dict[str, Mapping[str, Any]] | None:
    """The model's record per view id, or None for an offline node."""
    if ctx.params.get("from") != "model":
        return None
    out: dict[str, Mapping[str, Any]] = {}
    for rec in inputs.get("records", ()):
        out.setdefault(rec.view.view_id, rec.data)
    return out


async def _write(
    ctx: NodeContext, part: str, facts: list[ViewFacts], done: list[Record]
) -> tuple[Record, ...]:
    await Knowledge(_db(ctx)).write(
        ctx.campaign,
        facts,
        parts={part},
        source=ctx.document.doc_id,
        current=[v.view_id for v in ctx.document.views],
    )
    return tuple(done)


async def _extract_entities(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Record, ...]:
    """Entities, mentions and relations of each view (the model's, validated, on top)."""
    replies = _replies(ctx, inputs)
    facts: list[ViewFacts] = []
    done: list[Record] = []
    for view in inputs["views"]:
        doc, spans = await _source(ctx, view)
        vf = extract_parts(doc, spans, parts={"entities"})
        method = "offline"
        if replies is not None:
            data = replies.get(view.view_id)
            if data is None:
                ctx.error(f"{view.view_id}: no usable model reply; offline entities kept")
            else:
                vf, dropped = merge_model_entities(vf, doc, data, spans)
                method = "model"
                for d in dropped[:5]:
                    ctx.error(f"{view.view_id}: {d}")
        facts.append(vf)
        done.append(
            Record(
                view,
                {
                    "method": method,
                    "entities": len(vf.entities),
                    "mentions": len(vf.mentions),
                    "relations": len(vf.relations),
                },
            )
        )
    return await _write(ctx, "entities", facts, done)


async def _write_summary(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Record, ...]:
    """The summary of each view: the model's when it gave a usable one, else the offline one."""
    replies = _replies(ctx, inputs)
    facts: list[ViewFacts] = []
    done: list[Record] = []
    for view in inputs["views"]:
        doc, spans = await _source(ctx, view)
        vf = extract_parts(doc, spans, parts={"summary"})
        if replies is not None:
            text = model_summary(replies.get(view.view_id))
            if text:
                vf = replace(vf, summary=text, summary_method=MODEL)
            else:
                ctx.error(f"{view.view_id}: no usable model summary; offline summary kept")
        facts.append(vf)
        done.append(Record(view, {"method": vf.summary_method, "chars": len(vf.summary)}))
    return await _write(ctx, "summary", facts, done)


async def _tag_motifs(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Record, ...]:
    """Themes and open threads of each view (the model's, validated, merged in)."""
    replies = _replies(ctx, inputs)
    facts: list[ViewFacts] = []
    done: list[Record] = []
    for view in inputs["views"]:
        doc, spans = await _source(ctx, view)
        vf = extract_parts(doc, spans, parts={"motifs"})
        method = "offline"
        if replies is not None:
            data = replies.get(view.view_id)
            merged = merge_model_motifs(vf.motifs, doc, data) if data is not None else None
            if merged is None:
                ctx.error(f"{view.view_id}: no usable model motifs; offline motifs kept")
            else:
                vf, method = replace(vf, motifs=merged), "model"
        facts.append(vf)
        done.append(Record(view, {"method": method, "motifs": len(vf.motifs)}))
    return await _write(ctx, "motifs", facts, done)


def install(registry: NodeRegistry) -> None:
    """Register the knowledge node types in ``registry`` (idempotent)."""
    for name, run in (
        ("extract-entities", _extract_entities),
        ("write-summary", _write_summary),
        ("tag-motifs", _tag_motifs),
    ):
        if name not in registry.types:
            registry.register(
                name, {"views": VIEWS}, RECORDS, run, check=_check, inputs_for=_inputs
            )


# -- the model's replies, checked against the text ---------------------------------------------


def _occurrences(text: str, name: str) -> list[tuple[int, int]]:
    """Where ``name`` stands in ``text`` as whole words (its own case first, else any case)."""
    name = " ".join(name.split())
    if len(name) < 2:
        return []
    pattern = r"(?<!\w)" + r"\s+".join(re.escape(w) for w in name.split()) + r"(?!\w)"
    found = [(m.start(), m.end()) for m in re.finditer(pattern, text)]
    return found or [(m.start(), m.end()) for m in re.finditer(pattern, text, re.I)]


def _passage_of(spans: Sequence[tuple[str, int, int]], pos: int) -> str | None:
    return next((p for p, s, e in spans if s <= pos < e), None)


@dataclass
class _Mentions:
    """A view's mentions while the model's entities are merged in: each new surface is a
    mention unless it overlaps one already there (then the model only names whose it is)."""

    text: str
    spans: Sequence[tuple[str, int, int]]
    mentions: list[Mention]
    taken: list[tuple[int, int]] = field(default_factory=list)

    def add(self, key: str, surface_at: list[tuple[int, int]], kind: str) -> None:
        for start, end in surface_at:
            clash = next((i for i, (s, e) in enumerate(self.taken) if s < end and start < e), None)
            if clash is not None:
                m = self.mentions[clash]
                # The very span the offline pass found: the model names whose it is (an alias
                # "Vessa" becomes Vessa Coldwater's); an overlapping other span stays as found.
                if (m.start, m.end) == (start, end) or m.key == key:
                    self.mentions[clash] = replace(m, key=key, initial=False, hint=m.hint or kind)
                continue
            passage = _passage_of(self.spans, start)
            self.mentions.append(
                Mention(key, self.text[start:end], start, end, passage, False, kind)
            )
            self.taken.append((start, end))


def _merge_entities(found: _Mentions, data: Mapping[str, Any], dropped: list[str]) -> None:
    """The model's named entities (and aliases) that stand in the text, as mentions."""
    for item in data.get("entities", []) or []:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            dropped.append("an entity without a name")
            continue
        name = " ".join(str(item["name"]).split())
        key = name_key(name)
        where = _occurrences(found.text, name)
        if not key or not where:
            dropped.append(f"{name!r} is not in the text")
            continue
        raw_type = str(item.get("type", "")).strip().lower()
        kind = canonical_type(raw_type) or (raw_type if raw_type in _TYPES else "")
        found.add(key, where, kind)
        for alias in item.get("aliases", []) or []:
            if isinstance(alias, str) and name_key(alias) and name_key(alias) != key:
                found.add(key, _occurrences(found.text, alias), kind)


def _merge_relations(
    found: _Mentions, data: Mapping[str, Any], dropped: list[str]
) -> list[RelationFact]:
    """The model's relations whose two ends are names of the view and one sentence holds
    both (that sentence is the evidence)."""
    text, mentions = found.text, found.mentions
    keys = {m.key for m in mentions}
    relations: list[RelationFact] = []
    sentences = [(s, e) for s, e, _ in split_sentences(text)]
    for item in data.get("relations", []) or []:
        if not isinstance(item, Mapping):
            continue
        src, dst = name_key(str(item.get("source", ""))), name_key(str(item.get("target", "")))
        kind = str(item.get("kind", ""))
        if kind not in _RELATION_KINDS or src not in keys or dst not in keys or src == dst:
            dropped.append(f"relation {item.get('source')!r} {kind} {item.get('target')!r}")
            continue
        # Where each end stands: its mentions (a re-keyed alias counts: "Vessa trusts …").
        a = [m.start for m in mentions if m.key == src]
        b = [m.start for m in mentions if m.key == dst]
        stated = next(
            (
                (s, e)
                for s, e in sentences
                if any(s <= x < e for x in a) and any(s <= y < e for y in b)
            ),
            None,
        )
        if stated is None:
            dropped.append(f"relation {src} {kind} {dst}: no sentence states it")
            continue
        s, e = stated
        relations.append(RelationFact(src, kind, dst, s, e, " ".join(text[s:e].split())))
    return relations


def merge_model_entities(
    facts: ViewFacts,
    doc: Document,
    data: Mapping[str, Any],
    spans: Sequence[tuple[str, int, int]] = (),
) -> tuple[ViewFacts, list[str]]:
    """The offline entity facts of a view with the model's reply merged in; and what was dropped.

    Each named entity must stand in the view's text: its occurrences become mentions (typed by
    the model's type, and not sentence-initial: the model vouches that the capital is a name);
    an alias that stands in the text becomes a mention of the same entity. A relation is kept
    when both ends are names of this view and one sentence holds both; that sentence is its
    evidence."""
    dropped: list[str] = []
    mentions = list(facts.mentions)
    found = _Mentions(doc.text, spans, mentions, [(m.start, m.end) for m in mentions])
    _merge_entities(found, data, dropped)
    relations = [*facts.relations, *_merge_relations(found, data, dropped)]
    merged = replace(
        facts,
        mentions=tuple(sorted(found.mentions, key=lambda m: (m.start, m.end))),
        relations=tuple(dict.fromkeys(relations)),
    )
    return merged, dropped


def model_summary(data: Mapping[str, Any] | None, *, max_chars: int = 900) -> str:
    """The summary of a ``{"summary": …}`` record, whitespace folded and capped, or ``""``."""
    if data is None:
        return ""
    value = data.get("summary")
    if not isinstance(value, str):
        return ""
    text = " ".join(value.split())
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def merge_model_motifs(
    offline: Sequence[Motif], doc: Document, data: Mapping[str, Any]
) -> tuple[Motif, ...] | None:
    """The offline threads plus the model's, and the model's theme words the text uses
    (weighted ``1 + ln tf`` as offline ones), else the offline themes; None when the reply
    holds nothing usable."""
    words = [w.lower() for w in re.findall(r"[A-Za-z][a-z'’-]+", doc.text)]
    themes = []
    for raw in data.get("themes", []) or []:
        w = str(raw).strip().lower()
        tf = words.count(w)
        if re.fullmatch(r"[a-z][a-z'-]{2,30}", w) and tf:
            themes.append(Motif("theme", w, round(1 + math.log(tf), 4)))
    threads = [m for m in offline if m.kind == "thread"]
    seen = {m.text.lower() for m in threads}
    added = 0
    for raw in data.get("threads", []) or []:
        t = " ".join(str(raw).split())
        if 10 <= len(t) <= 300 and t.lower() not in seen:
            seen.add(t.lower())
            threads.append(Motif("thread", t, 1.0, 0))
            added += 1
    if not themes and not added:
        return None
    return (*threads, *(themes or [m for m in offline if m.kind == "theme"]))


# -- the seeded definitions --------------------------------------------------------------------

_ENTITY_SYSTEM = (
    "You read one document of a tabletop roleplaying campaign and list the named people, "
    "places, factions, items, deities, creatures and events it mentions, and the relations "
    "its sentences state between them. Reply with JSON only: "
    '{"entities": [{"name": "<exactly as written>", "type": "<one of: '
    + ", ".join(_TYPES)
    + '>", "aliases": ["<other names used in the text>"]}], "relations": [{"source": "<name>", '
    '"kind": "<one of: ' + ", ".join(_RELATION_KINDS) + '>", "target": "<name>"}]}. '
    "Use names as the text writes them; invent nothing."
)
#: What the seeded ``extract-entities`` pass asks a model (the relation benchmark asks the same).
ENTITY_SYSTEM = _ENTITY_SYSTEM
_MOTIF_SYSTEM = (
    "You read one document of a tabletop roleplaying campaign. Reply with JSON only: "
    '{"themes": ["<up to 8 single lower-case words the text uses that carry its recurring '
    'themes>"], "threads": ["<each question or plot thread the text leaves open, one sentence>"]}.'
    " Invent nothing."
)
_ENTITY_SCHEMA = {
    "type": "object",
    "required": ["entities"],
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "type": {"type": "string"},
                    "aliases": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "relations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["source", "kind", "target"],
                "properties": {
                    "source": {"type": "string"},
                    "kind": {"type": "string"},
                    "target": {"type": "string"},
                },
            },
        },
    },
}
_SUMMARY_SCHEMA = {
    "type": "object",
    "required": ["summary"],
    "properties": {"summary": {"type": "string"}},
}
_MOTIF_SCHEMA = {
    "type": "object",
    "properties": {
        "themes": {"type": "array", "items": {"type": "string"}},
        "threads": {"type": "array", "items": {"type": "string"}},
    },
}
#: What each seeded pass asks a model: the node type, the role, the system prompt, the schema
#: the reply must meet, and the most it may write.
_SEEDS: dict[str, tuple[str, str, str, dict[str, Any], int]] = {
    "entities": ("extract-entities", "extract", _ENTITY_SYSTEM, _ENTITY_SCHEMA, 1200),
    "summaries": ("write-summary", "summarize", SUMMARY_SYSTEM, _SUMMARY_SCHEMA, 400),
    "motifs": ("tag-motifs", "extract", _MOTIF_SYSTEM, _MOTIF_SCHEMA, 500),
}
_DESCRIPTIONS = {
    "entities": "the knowledge layer's entities, mentions and relations (seeded)",
    "summaries": "a summary per document view (seeded)",
    "motifs": "themes and open threads per document view (seeded)",
}


def seeded_definitions(*, model: bool = False, max_chars: int = 24_000) -> list[PassDefinition]:
    """The knowledge passes of a campaign: offline, or model-backed when ``model``.

    ``max_chars``: the head of a view a model reads (a long transcript is cut, not skipped)."""
    out = []
    for name, (node_type, role, system, schema, max_tokens) in _SEEDS.items():
        nodes: list[dict[str, Any]] = [{"id": "docs", "type": "select-documents"}]
        if model:
            nodes += [
                {
                    "id": "whole",
                    "type": "split",
                    "params": {"by": "whole"},
                    "inputs": {"views": "docs"},
                },
                {
                    "id": "ask",
                    "type": "prompt-model",
                    "params": {
                        "prompt": "# $title\n\n$text",
                        "system": system,
                        "role": role,
                        "max_tokens": max_tokens,
                        "max_chars": max_chars,
                    },
                    "inputs": {"items": "whole"},
                },
                {
                    "id": "parse",
                    "type": "parse-json",
                    "params": {"schema": schema},
                    "inputs": {"items": "ask"},
                },
                {
                    "id": "write",
                    "type": node_type,
                    "params": {"from": "model"},
                    "inputs": {"views": "docs", "records": "parse"},
                },
            ]
        else:
            nodes.append({"id": "write", "type": node_type, "inputs": {"views": "docs"}})
        caps = Caps(model_calls=400, tokens=1_000_000) if model else Caps()
        out.append(
            definition_from_mapping(
                {
                    "name": name,
                    "description": _DESCRIPTIONS[name] + (" with a model" if model else ""),
                    "triggers": ["changed"],
                    "caps": {
                        "node_executions": caps.node_executions,
                        "model_calls": caps.model_calls,
                        "tokens": caps.tokens,
                    },
                    "nodes": nodes,
                }
            )
        )
    return out


class KnowledgePasses:
    """The knowledge passes of every campaign a :class:`~liminalis.passes.Passes` runs.

    Args:
        passes: the pass runner (its ``before_runs`` seeds, its ``after_runs`` keeps the
            overview; :meth:`attach` adds both).
        model: seed the model-backed variants (a model is configured).
        overview_chars: the size of each stored overview.
    """

    def __init__(self, passes: Passes, *, model: bool = False, overview_chars: int = 4000) -> None:
        self.passes = passes
        install(passes.registry)  # this module's node types join the registry it runs on
        self.knowledge = Knowledge(passes.db)
        self.definitions = seeded_definitions(model=model)
        self.overview_chars = overview_chars
        self._moved: set[str] = set()

    def attach(self) -> KnowledgePasses:
        self.passes.before_runs.append(self.before)
        self.passes.after_runs.append(self.after)
        return self

    def detach(self) -> None:
        self.passes.before_runs.remove(self.before)
        self.passes.after_runs.remove(self.after)

    async def before(self, campaign: str) -> None:
        """Before a trigger's runs: seed the passes, and forget the facts of views gone or
        whose visibility moved (they are pending, and written anew by the runs)."""
        await self.seed(campaign)
        current = await self.passes.db.documents.visibilities(campaign)
        if await self.knowledge.prune(campaign, current):
            self._moved.add(campaign)  # the overview no longer matches: rebuilt after the runs

    async def seed(self, campaign: str) -> list[str]:
        """Save the campaign's knowledge passes where they are missing or differ; returns the
        names saved. An unchanged definition is left alone: its state (what is done) stands."""
        saved = []
        for d in self.definitions:
            row = await self.passes.db.passes.definition(campaign, d.name)
            if row is None or row.def_hash != d.digest():
                if await self.passes.save(campaign, d):
                    saved.append(d.name)
        if saved:
            _log.info("knowledge passes of %s seeded: %s", campaign, ", ".join(saved))
        return saved

    async def after(self, campaign: str, results: Sequence[RunResult]) -> None:
        """Forget the facts of views that no longer exist, then rebuild the overviews whose
        inputs changed (see :meth:`Knowledge.refresh_overviews`)."""
        current = await self.passes.db.documents.visibilities(campaign)
        pruned = await self.knowledge.prune(campaign, current)
        worked = any(
            r.pass_id in KNOWLEDGE_PASSES and (r.documents_done or r.documents_failed)
            for r in results
        )
        moved = campaign in self._moved
        self._moved.discard(campaign)
        if pruned or moved or worked or not await self.passes.db.knowledge.overview_keys(campaign):
            await self.knowledge.refresh_overviews(campaign, max_chars=self.overview_chars)

    async def pending(self, campaign: str) -> int:
        """Documents some knowledge pass has still to process."""
        await self.seed(campaign)
        total = 0
        for d in self.definitions:
            waiting, _ = await self.passes.executor.pending(campaign, d.name)
            total = max(total, len(waiting))
        return total
