"""A pass definition is data: typed nodes and edges, read from JSON or TOML, validated at save.

The JSON form (TOML is the same keys; ``[[nodes]]``, ``[[edges]]``, ``[caps]``)::

    {"name": "npc-moods", "triggers": ["changed"], "cron": null,
     "caps": {"node_executions": 500, "model_calls": 50, "tokens": 40000},
     "nodes": [
       {"id": "docs", "type": "select-documents", "params": {"types": ["npc"]}},
       {"id": "whole", "type": "split", "params": {"by": "whole"}, "inputs": {"views": "docs"}},
       ...],
     "edges": [{"from": "whole", "to": "ask", "input": "items"}]}

An edge may be written either way: in ``edges``, or as a node's ``inputs`` (input name →
producer node id). Validation (:func:`validate`) refuses, with an
:class:`~liminalis.errors.InvalidInput` whose message names the node: an unknown node type (or a
reserved one not registered yet), bad params, an edge to or from no node or into no input, an
input fed twice, a producer whose output tag differs from the consumer's input tag, an input
left unfed, and a cycle. It returns the topological order the executor walks.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from liminalis.errors import InvalidInput
from liminalis.passes.registry import ANY, PLACEHOLDERS, NodeRegistry

__all__ = [
    "AUTONOMOUS",
    "TRIGGERS",
    "Caps",
    "Edge",
    "NodeSpec",
    "PassDefinition",
    "definition_from_mapping",
    "parse_definition",
    "validate",
]

#: ``changed``: after an ingest (the scheduler's tick, an upload) found documents changed;
#: ``scheduled``: the definition's ``cron``; ``requested``: ``liminalis pass run`` ("run now").
TRIGGERS = ("changed", "scheduled", "requested")
#: The triggers nobody asked for at that moment: a paused campaign does not start them.
AUTONOMOUS = frozenset({"changed", "scheduled"})

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
MAX_CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class Caps:
    """Hard limits on one run: node executions, model calls, and tokens (input + output). A run
    that reaches one stops cleanly; the documents it had not finished stay pending."""

    node_executions: int = 5_000
    model_calls: int = 200
    tokens: int = 200_000


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node of a definition: its id, its registered type, its params (JSON values)."""

    id: str
    type: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Edge:
    """``source``'s output feeds ``target``'s input named ``input``."""

    source: str
    target: str
    input: str


@dataclass(frozen=True, slots=True)
class PassDefinition:
    """A pass: a graph of typed nodes run per pending document, with its triggers and caps."""

    name: str
    nodes: tuple[NodeSpec, ...]
    edges: tuple[Edge, ...] = ()
    triggers: tuple[str, ...] = ("changed",)
    cron: str | None = None
    caps: Caps = Caps()
    concurrency: int = 2
    description: str = ""

    def node(self, node_id: str) -> NodeSpec:
        return next(n for n in self.nodes if n.id == node_id)

    def to_mapping(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "triggers": list(self.triggers),
            "cron": self.cron,
            "concurrency": self.concurrency,
            "caps": {
                "node_executions": self.caps.node_executions,
                "model_calls": self.caps.model_calls,
                "tokens": self.caps.tokens,
            },
            "nodes": [{"id": n.id, "type": n.type, "params": dict(n.params)} for n in self.nodes],
            "edges": [{"from": e.source, "to": e.target, "input": e.input} for e in self.edges],
        }

    def to_json(self) -> str:
        """The canonical JSON text (what is stored, and what :meth:`digest` hashes)."""
        return json.dumps(self.to_mapping(), sort_keys=True, ensure_ascii=False)

    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]


def _refuse(name: str, detail: str, *, node: str | None = None) -> InvalidInput:
    where = f"Pass `{name}`" + (f": node `{node}`" if node is not None else "")
    return InvalidInput(f"{where}: {detail}", user_message=f"{where}: {detail}.")


def _int(data: Mapping[str, Any], key: str, default: int, *, name: str) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _refuse(name, f"{key} must be a positive integer")
    return value


def definition_from_mapping(data: Mapping[str, Any]) -> PassDefinition:
    """A definition from its parsed JSON/TOML form (structure only; see :func:`validate`).
    Each field is read by its own stage, in the order their errors are reported: name, nodes,
    edges, triggers and cron, caps, concurrency.

    Raises:
        InvalidInput: a field of the wrong shape, named.
    """
    if not isinstance(data, Mapping):
        raise InvalidInput("definition not an object", user_message="A pass is a JSON object.")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInput(
            f"pass name {name!r}",
            user_message="A pass needs a `name`: lower-case letters, digits, - and _.",
        )
    nodes, edges = _nodes_of(name, data)
    edges += _edges_of(name, data)
    triggers, cron = _triggers_of(name, data)
    caps = _caps_of(name, data)
    concurrency = _int(data, "concurrency", 2, name=name)
    if concurrency > MAX_CONCURRENCY:
        raise _refuse(name, f"concurrency is at most {MAX_CONCURRENCY}")
    description = data.get("description", "")
    return PassDefinition(
        name=name,
        nodes=tuple(nodes),
        edges=tuple(edges),
        triggers=tuple(dict.fromkeys(triggers)),
        cron=" ".join(cron.split()) if cron else None,
        caps=caps,
        concurrency=concurrency,
        description=description if isinstance(description, str) else "",
    )


def _nodes_of(name: str, data: Mapping[str, Any]) -> tuple[list[NodeSpec], list[Edge]]:
    """The ``nodes`` list, and the edges their ``inputs`` declare (``input name → node id``)."""
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise _refuse(name, "`nodes` must be a non-empty list")
    nodes: list[NodeSpec] = []
    edges: list[Edge] = []
    for i, raw in enumerate(raw_nodes):
        node_id = raw.get("id") if isinstance(raw, Mapping) else None
        if not isinstance(node_id, str) or not _NODE_ID.match(node_id):
            raise _refuse(name, f"node #{i + 1} needs an `id` (letters, digits, - and _)")
        assert isinstance(raw, Mapping)
        node_type, params = raw.get("type"), raw.get("params", {})
        if not isinstance(node_type, str):
            raise _refuse(name, "a `type` is needed", node=node_id)
        if not isinstance(params, Mapping):
            raise _refuse(name, "`params` must be an object", node=node_id)
        inputs = raw.get("inputs", {})
        if not isinstance(inputs, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in inputs.items()
        ):
            raise _refuse(name, "`inputs` must map input names to node ids", node=node_id)
        nodes.append(NodeSpec(id=node_id, type=node_type, params=dict(params)))
        edges += [Edge(source=src, target=node_id, input=inp) for inp, src in inputs.items()]
    return nodes, edges


def _edges_of(name: str, data: Mapping[str, Any]) -> list[Edge]:
    """The explicit ``edges`` list (``from``, ``to``, ``input``)."""
    raw_edges = data.get("edges", [])
    if not isinstance(raw_edges, list):
        raise _refuse(name, "`edges` must be a list")
    edges: list[Edge] = []
    for raw in raw_edges:
        parts = [raw.get(k) for k in ("from", "to", "input")] if isinstance(raw, Mapping) else []
        if len(parts) != 3 or not all(isinstance(p, str) for p in parts):
            raise _refuse(name, f"edge {raw!r} needs string `from`, `to` and `input`")
        edges.append(Edge(source=str(parts[0]), target=str(parts[1]), input=str(parts[2])))
    return edges


def _triggers_of(name: str, data: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """The triggers (default ``changed``) and the cron; a cron implies ``scheduled``, which
    needs one."""
    triggers = data.get("triggers", ["changed"])
    if isinstance(triggers, str):
        triggers = [triggers]
    if not isinstance(triggers, list) or any(t not in TRIGGERS for t in triggers):
        raise _refuse(name, f"`triggers` must be a list of {', '.join(TRIGGERS)}")
    cron = data.get("cron") or None
    if cron is not None and (not isinstance(cron, str) or len(cron.split()) != 5):
        raise _refuse(name, "`cron` must be a 5-field cron expression (UTC), e.g. `0 4 * * *`")
    if cron is not None and "scheduled" not in triggers:
        triggers = [*triggers, "scheduled"]  # a cron says when: the trigger it implies
    if "scheduled" in triggers and cron is None:
        raise _refuse(name, "the `scheduled` trigger needs a `cron`")
    return triggers, cron


def _caps_of(name: str, data: Mapping[str, Any]) -> Caps:
    """The run caps, each defaulting to :class:`Caps`'s; an unknown cap is refused."""
    caps_raw = data.get("caps", {})
    if not isinstance(caps_raw, Mapping):
        raise _refuse(name, "`caps` must be an object")
    unknown_caps = set(caps_raw) - {"node_executions", "model_calls", "tokens"}
    if unknown_caps:
        raise _refuse(name, f"unknown caps {sorted(unknown_caps)}")
    default = Caps()
    return Caps(
        node_executions=_int(caps_raw, "node_executions", default.node_executions, name=name),
        model_calls=_int(caps_raw, "model_calls", default.model_calls, name=name),
        tokens=_int(caps_raw, "tokens", default.tokens, name=name),
    )


def parse_definition(text: str, *, format: str | None = None) -> PassDefinition:
    """A definition from JSON or TOML text (``format`` ``"json"``/``"toml"``; by default JSON
    when the text starts with ``{``)."""
    kind = format or ("json" if text.lstrip().startswith("{") else "toml")
    try:
        data: object = json.loads(text) if kind == "json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(
            f"pass definition is not valid {kind}: {exc}",
            user_message=f"That pass definition is not valid {kind.upper()}: {exc}.",
        ) from exc
    if not isinstance(data, Mapping):
        raise InvalidInput("definition not an object", user_message="A pass is a JSON object.")
    return definition_from_mapping(data)


def validate(definition: PassDefinition, registry: NodeRegistry) -> tuple[str, ...]:
    """Check ``definition`` against ``registry``; returns the node ids in topological order.

    Raises:
        InvalidInput: what is wrong, naming the node (see the module docstring).
    """
    name = definition.name
    signatures: dict[str, tuple[Mapping[str, str], str]] = {}
    for node in definition.nodes:
        if node.id in signatures:
            raise _refuse(name, "defined twice", node=node.id)
        node_type = registry.get(node.type)
        if node_type is None:
            if node.type in PLACEHOLDERS:
                raise _refuse(
                    name,
                    f"uses `{node.type}` ({PLACEHOLDERS[node.type]}), which is not registered yet",
                    node=node.id,
                )
            known = ", ".join(sorted(registry.types))
            raise _refuse(name, f"unknown type `{node.type}` (known: {known})", node=node.id)
        try:
            if node_type.check is not None:
                node_type.check(node.params)
            signatures[node.id] = registry.signature(node_type, node.params)
        except ValueError as exc:
            raise _refuse(name, str(exc), node=node.id) from exc
    fed: dict[tuple[str, str], str] = {}
    for edge in definition.edges:
        for end in (edge.source, edge.target):
            if end not in signatures:
                raise _refuse(name, f"an edge names node `{end}`, which does not exist")
        inputs, _ = signatures[edge.target]
        if edge.input not in inputs:
            have = ", ".join(f"`{i}`" for i in inputs) or "none"
            raise _refuse(name, f"no input `{edge.input}` (inputs: {have})", node=edge.target)
        if (edge.target, edge.input) in fed:
            raise _refuse(name, f"input `{edge.input}` is fed twice", node=edge.target)
        fed[(edge.target, edge.input)] = edge.source
        produced, wanted = signatures[edge.source][1], inputs[edge.input]
        if ANY not in (produced, wanted) and produced != wanted:
            raise _refuse(
                name,
                f"input `{edge.input}` takes `{wanted}` but node `{edge.source}` makes "
                f"`{produced}`",
                node=edge.target,
            )
    for node in definition.nodes:
        for inp in signatures[node.id][0]:
            if (node.id, inp) not in fed:
                raise _refuse(name, f"input `{inp}` is not connected", node=node.id)
    return _topological(definition, name)


def _topological(definition: PassDefinition, name: str) -> tuple[str, ...]:
    """Kahn's algorithm, ties in definition order; a node left over lies on or after a cycle,
    and walking back from it along incoming edges must meet the cycle itself."""
    ids = [n.id for n in definition.nodes]
    preds: dict[str, list[str]] = {i: [] for i in ids}
    for e in definition.edges:
        preds[e.target].append(e.source)
    indegree = {i: len(p) for i, p in preds.items()}
    order: list[str] = []
    ready = [i for i in ids if indegree[i] == 0]
    while ready:
        node = ready.pop(0)
        order.append(node)
        for e in definition.edges:
            if e.source == node:
                indegree[e.target] -= 1
                if indegree[e.target] == 0:
                    ready.append(e.target)
    if len(order) == len(ids):
        return tuple(order)
    left = [i for i in ids if i not in order]
    path: list[str] = [left[0]]
    while True:
        back = next(p for p in preds[path[-1]] if p in left)
        if back in path:
            cycle = path[path.index(back) :][::-1]
            first = min(cycle, key=ids.index)  # named from its earliest node, as written
            cycle = cycle[cycle.index(first) :] + cycle[: cycle.index(first)]
            loop = " → ".join([*cycle, first])
            raise _refuse(name, f"part of a cycle ({loop})", node=first)
        path.append(back)
