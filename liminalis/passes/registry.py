"""Node types as a registry, and the values that flow along a pass's edges.

A node type is a name, typed inputs, one typed output and a coroutine; the definition only names
it. Registering one is how another module (``liminalis.knowledge``: entities, summaries, motifs)
adds what a pass can do, without the executor or the schema knowing. Registration is explicit and
happens on the registry a caller was handed, never at import (discord.py's ``load_extension`` →
``setup(bot)`` is the model): :func:`liminalis.passes.nodes.builtin_registry` builds one with the
built-in types, and an extension's ``install(registry)`` adds its own::

    from liminalis.passes import RECORDS, TEXTS, NodeRegistry

    async def extract(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Record, ...]:
        ...  # ctx.complete(...) for a metered model call, ctx.error(...) for a soft error

    def install(registry: NodeRegistry) -> None:
        registry.register("extract-entities", {"items": TEXTS}, RECORDS, extract)

An import registers nothing, so two registries in one process (a test's copy, a second campaign
service) never see each other's types, and importing a module to read a constant has no effect.

Type tags are strings, checked on every edge when a definition is saved (an edge's producer
output tag must equal its consumer's input tag, or one of them be :data:`ANY`):

============ ============================================================================
``views``    ``tuple[DocView, ...]``: views of one source document (one per audience)
``texts``    ``tuple[Piece, ...]``: text pieces, each carrying the view it came from
``records``  ``tuple[Record, ...]``: parsed JSON objects, each carrying its view
``facts``    ``tuple[Fact, ...]``: key/value facts handed to the executor to write
``any``      anything (the ``callable`` hook point, when a hook declares nothing better)
============ ============================================================================

Every value carries the :class:`DocView` it derives from, so visibility travels with the data:
what a node makes from a GM view stays GM-only wherever it goes (``write-facts`` stamps each
fact with its view's visibility).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from liminalis.ports import Usage
from liminalis.store.passes import Fact

if TYPE_CHECKING:
    from liminalis.store.sqlite import Database

__all__ = [
    "ANY",
    "CALLABLE",
    "FACTS",
    "PLACEHOLDERS",
    "RECORDS",
    "TAGS",
    "TEXTS",
    "VIEWS",
    "Complete",
    "DocView",
    "Hook",
    "NodeContext",
    "NodeRegistry",
    "NodeRun",
    "NodeType",
    "Piece",
    "Record",
    "SourceDocument",
]

VIEWS, TEXTS, RECORDS, FACTS, ANY = "views", "texts", "records", "facts", "any"
#: The node type that calls a registered :class:`Hook` by name, with the hook's own tags.
CALLABLE = "callable"
TAGS = frozenset({VIEWS, TEXTS, RECORDS, FACTS, ANY})

#: Names reserved for node types the knowledge module registers (its ``install(registry)``, called
#: when ``KnowledgePasses`` is built on a ``Passes``). A definition naming one before then is refused at save
#: with a message saying what is missing, not "unknown type".
PLACEHOLDERS: Mapping[str, str] = {
    "extract-entities": "entities a document names (registered by liminalis.knowledge)",
    "write-summary": "a document's summary (registered by liminalis.knowledge)",
    "tag-motifs": "a document's motifs (registered by liminalis.knowledge)",
}


@dataclass(frozen=True, slots=True)
class DocView:
    """One view of a source document as a pass reads it (see :mod:`liminalis.ingest.sections`)."""

    view_id: str  # ``doc``, ``doc//gm``, ``doc//lens:NAME``
    doc_id: str  # the source document (file)
    path: str
    title: str
    type: str
    text: str
    visibility: frozenset[str]


@dataclass(frozen=True, slots=True)
class Piece:
    """A piece of text derived from a view (a sentence, a section, a model's reply)."""

    view: DocView
    text: str
    index: int = 0
    heading: str = ""


@dataclass(frozen=True, slots=True)
class Record:
    """A JSON object derived from a view."""

    view: DocView
    data: Mapping[str, Any]
    index: int = 0


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """A pending document: its views, and the hash of them the pass is run at."""

    doc_id: str
    content_hash: str
    views: tuple[DocView, ...]


#: The executor's metered model call: (role, system, prompt, max_tokens) → (text, usage).
Complete = Callable[[str, str, str, int], Awaitable[tuple[str, Usage]]]


class NodeContext:
    """What a node's ``run`` may touch: its params, the document, a metered model call, and a
    place for soft errors and facts. The executor makes one per node execution and reads its
    counters into the trace.

    ``db`` is the store the run reads documents from: a node type that keeps its results in its
    own tables (the knowledge layer's) writes them there, replacing what it wrote for the same
    views before, so a document run twice (a run halted before marking it done) writes the same
    rows again. Marking the document done stays the executor's."""

    def __init__(
        self,
        *,
        campaign: str,
        pass_id: str,
        node_id: str,
        params: Mapping[str, Any],
        document: SourceDocument,
        complete: Complete,
        registry: NodeRegistry,
        db: Database | None = None,
    ) -> None:
        self.campaign = campaign
        self.db = db
        self.pass_id = pass_id
        self.node_id = node_id
        self.params = params
        self.document = document
        self.registry = registry
        self._complete = complete
        self.model_calls = 0
        self.tokens = 0
        self.errors: list[str] = []
        self.facts: list[Fact] = []

    async def complete(
        self, *, system: str, prompt: str, role: str = "extract", max_tokens: int = 400
    ) -> str:
        """A model call through the executor: capped, charged to the credit gate, traced.

        Raises:
            ModelUnavailable: no model, or it failed (the document stays pending).
        """
        text, usage = await self._complete(role, system, prompt, max_tokens)
        self.model_calls += 1
        self.tokens += usage.input_tokens + usage.output_tokens
        return text

    def error(self, message: str) -> None:
        """Record a soft error (an item dropped); the node and the document go on."""
        self.errors.append(message)

    def emit(self, facts: Sequence[Fact]) -> None:
        """Hand facts to the executor, written with the document's completion."""
        self.facts.extend(facts)


NodeRun = Callable[[NodeContext, Mapping[str, Any]], Awaitable[Any]]
#: Checks a node's params when a definition is saved; raises ``ValueError`` naming the problem.
ParamsCheck = Callable[[Mapping[str, Any]], None]
#: A node type's inputs as its params choose them (``{"from": "model"}`` adds a records input).
InputsFor = Callable[[Mapping[str, Any]], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class NodeType:
    """A registered node type."""

    name: str
    inputs: Mapping[str, str]
    output: str
    run: NodeRun
    check: ParamsCheck | None = None
    description: str = ""
    #: Inputs that depend on the params (validated at save like any others); ``inputs`` is the
    #: signature when this is ``None``.
    inputs_for: InputsFor | None = None


@dataclass(frozen=True, slots=True)
class Hook:
    """A function the ``callable`` node calls by name (``params.hook``), with its own types."""

    name: str
    inputs: Mapping[str, str]
    output: str
    run: NodeRun


@dataclass
class NodeRegistry:
    """Node types by name, and the hooks the ``callable`` node type reaches."""

    types: dict[str, NodeType] = field(default_factory=dict)
    hooks: dict[str, Hook] = field(default_factory=dict)

    def register(
        self,
        name: str,
        inputs: Mapping[str, str],
        output: str,
        run: NodeRun,
        *,
        check: ParamsCheck | None = None,
        description: str = "",
        replace: bool = False,
        inputs_for: InputsFor | None = None,
    ) -> NodeType:
        """Add a node type. Raises ``ValueError`` for an unknown tag or a name taken (unless
        ``replace``); a :data:`PLACEHOLDERS` name may be taken once."""
        _check_tags(name, inputs, output)
        if name in self.types and not replace:
            raise ValueError(f"node type {name!r} is already registered")
        node = NodeType(
            name=name,
            inputs=dict(inputs),
            output=output,
            run=run,
            check=check,
            description=description or PLACEHOLDERS.get(name, ""),
            inputs_for=inputs_for,
        )
        self.types[name] = node
        return node

    def register_hook(
        self,
        name: str,
        run: NodeRun,
        *,
        inputs: Mapping[str, str],
        output: str,
        replace: bool = False,
    ) -> Hook:
        """Add a hook for the ``callable`` node type (``{"type": "callable", "params":
        {"hook": name}}``)."""
        _check_tags(name, inputs, output)
        if name in self.hooks and not replace:
            raise ValueError(f"hook {name!r} is already registered")
        hook = Hook(name=name, inputs=dict(inputs), output=output, run=run)
        self.hooks[name] = hook
        return hook

    def get(self, name: str) -> NodeType | None:
        return self.types.get(name)

    def signature(
        self, node_type: NodeType, params: Mapping[str, Any]
    ) -> tuple[Mapping[str, str], str]:
        """A node's input and output tags: its type's, or for ``callable`` its hook's.

        Raises:
            ValueError: a ``callable`` node names no hook, or one not registered.
        """
        if node_type.name != CALLABLE:
            if node_type.inputs_for is not None:
                inputs = node_type.inputs_for(params)
                _check_tags(node_type.name, inputs, node_type.output)
                return inputs, node_type.output
            return node_type.inputs, node_type.output
        name = params.get("hook")
        hook = self.hooks.get(name) if isinstance(name, str) else None
        if hook is None:
            raise ValueError(f"params.hook {name!r} is not a registered hook")
        return hook.inputs, hook.output

    def copy(self) -> NodeRegistry:
        """An independent registry with the same types (tests add theirs to a copy)."""
        return NodeRegistry(types=dict(self.types), hooks=dict(self.hooks))


def _check_tags(name: str, inputs: Mapping[str, str], output: str) -> None:
    for tag in (*inputs.values(), output):
        if tag not in TAGS:
            raise ValueError(f"{name}: unknown type tag {tag!r} (known: {sorted(TAGS)})")
