"""Passes are data: background analysis of a campaign's documents as stored graphs.

A pass is a :class:`PassDefinition` — typed nodes from a registry and the edges between them —
saved per campaign (validated: unknown types, missing inputs, mismatched types and cycles are
refused, naming the node). The :class:`Executor` walks it over each pending document with hard
caps, a credit gate, bounded concurrency and a trace row per node; what it derives is written as
generic key/value :class:`Fact` rows that keep the visibility of the view they came from.

* ``definition``  the data model, JSON/TOML forms, validation
* ``registry``    node types, type tags, the values on edges, :class:`NodeRegistry`
* ``nodes``       the built-in node types and :func:`builtin_registry`
* ``ports``       :class:`PassModel` and :class:`CreditGate`, with simple implementations
* ``executor``    the one executor
* ``service``     :class:`Passes`, the facade the bot calls
"""

from liminalis.passes.definition import (
    AUTONOMOUS,
    TRIGGERS,
    Caps,
    Edge,
    NodeSpec,
    PassDefinition,
    definition_from_mapping,
    parse_definition,
    validate,
)
from liminalis.passes.executor import Executor, RunResult
from liminalis.passes.nodes import builtin_registry
from liminalis.passes.ports import (
    AllowAllGate,
    CreditGate,
    LanguageModelPassModel,
    NoPassModel,
    PassModel,
)
from liminalis.passes.registry import (
    ANY,
    CALLABLE,
    FACTS,
    PLACEHOLDERS,
    RECORDS,
    TEXTS,
    VIEWS,
    DocView,
    NodeContext,
    NodeRegistry,
    NodeType,
    Piece,
    Record,
    SourceDocument,
)
from liminalis.passes.service import NodeSummary, Passes, PassReport
from liminalis.store.passes import Fact

__all__ = [
    "ANY",
    "AUTONOMOUS",
    "CALLABLE",
    "FACTS",
    "PLACEHOLDERS",
    "RECORDS",
    "TEXTS",
    "TRIGGERS",
    "VIEWS",
    "AllowAllGate",
    "Caps",
    "CreditGate",
    "DocView",
    "Edge",
    "Executor",
    "Fact",
    "LanguageModelPassModel",
    "NoPassModel",
    "NodeContext",
    "NodeRegistry",
    "NodeSpec",
    "NodeSummary",
    "NodeType",
    "PassDefinition",
    "PassModel",
    "PassReport",
    "Passes",
    "Piece",
    "Record",
    "RunResult",
    "SourceDocument",
    "builtin_registry",
    "definition_from_mapping",
    "parse_definition",
    "validate",
]
