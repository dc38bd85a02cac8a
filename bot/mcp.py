"""The MCP server: one campaign's lore as Model Context Protocol tools, for one fixed lens.

``liminalis mcp --campaign SLUG --lens players`` serves the campaign to an MCP client (a
desktop assistant, an editor, an agent) over stdio; ``--http HOST:PORT`` serves it over
streamable HTTP at ``http://HOST:PORT/mcp`` instead.

An adapter like the Discord and Slack ones, and as thin: each tool takes its typed arguments,
calls the :class:`~liminalis.engine.Engine` facade and renders text. Two rules keep the GM's
wall, both decided when the server is built and never by a caller:

* **The lens is the server's.** No tool takes a lens, a campaign or a chat; every engine call
  passes the server's lens, and the engine shows that lens only what it may see.
* **The lens is the catalogue.** A tool marked ``gm_only`` in :data:`TOOLS` is not registered
  on a server without the GM lens: a players server neither lists nor runs ``explain``.

A tool's error reaches the client as the ``user_message`` of a
:class:`~liminalis.errors.LiminalisError` (safe to show a player); anything else is logged here
with its traceback, and the client reads a neutral sentence.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Concatenate, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from bot.main import open_service
from liminalis.engine import MAX_QUERY_CHARS
from liminalis.errors import ConfigError, LiminalisError, PermissionDenied
from liminalis.lens import GM, PLAYERS, Lens

if TYPE_CHECKING:
    from bot.settings import Settings
    from liminalis.engine import Engine

__all__ = ["TOOLS", "LoreTools", "ToolSpec", "build_server", "catalogue", "parse_http", "serve"]

_log = logging.getLogger(__name__)

#: What the client reads when a tool failed for a reason that is not the caller's.
NEUTRAL = "Something went wrong while reading the campaign. Please try again."
#: Characters of a document one ``get-document`` call returns; ``offset`` reads on.
PAGE_CHARS = 20_000
_KEY_CHARS = 300


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One row of the catalogue: the tool's name, the :class:`LoreTools` method that runs it,
    what the client is told it does, and whether only a GM server offers it."""

    name: str
    method: str
    description: str
    gm_only: bool = False
    read_only: bool = True


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "ask",
        "ask",
        "Answer a question about the campaign from its documents, citing the documents used.",
        read_only=False,  # it may update the campaign memory's activations
    ),
    ToolSpec(
        "search",
        "search",
        "Find the campaign documents most relevant to a query and return their relevant "
        "passages (no answer is written).",
    ),
    ToolSpec(
        "get-document",
        "get_document",
        "Read one campaign document whole, by its id, path or title.",
    ),
    ToolSpec(
        "list-documents",
        "list_documents",
        "List the campaign's documents (id and title), optionally those whose title holds a text.",
    ),
    ToolSpec("pins", "pins", "The documents pinned to every answer of this campaign."),
    ToolSpec("recap", "recap", "A 'previously on…' recap of the latest session notes."),
    ToolSpec(
        "explain",
        "explain",
        "Which retrieval stage each relevant document reached for a question (GM only).",
        gm_only=True,
    ),
    # HOOK (knowledge wiring): once Engine has entities(), add its row and a LoreTools method:
    # ToolSpec("entities", "entities", "People, places and things of the campaign."),
)


def catalogue(lens: Lens) -> tuple[ToolSpec, ...]:
    """The tools a server for ``lens`` offers."""
    return tuple(t for t in TOOLS if lens.is_gm or not t.gm_only)


P = ParamSpec("P")
S = TypeVar("S", bound="LoreTools")


def _user_safe(
    fn: Callable[Concatenate[S, P], Awaitable[str]],
) -> Callable[Concatenate[S, P], Awaitable[str]]:
    """A tool whose failure the client reads as a user message, never as the exception's text."""

    @functools.wraps(fn)
    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> str:
        try:
            return await fn(self, *args, **kwargs)
        except LiminalisError as exc:
            _log.info("mcp %s: %s", fn.__name__, exc)
            raise ToolError(exc.user_message) from None
        except Exception:
            _log.exception("mcp %s failed", fn.__name__)
            raise ToolError(NEUTRAL) from None

    return run


Question = Annotated[
    str,
    Field(description="The question, in plain words.", min_length=1, max_length=MAX_QUERY_CHARS),
]
Key = Annotated[
    str,
    Field(
        description="A document's id (as list-documents gives it), path or title.",
        min_length=1,
        max_length=_KEY_CHARS,
    ),
]


class LoreTools:
    """The tools' bodies over one campaign and one lens, both fixed here."""

    def __init__(self, engine: Engine, campaign: str, lens: Lens) -> None:
        self._engine = engine
        self._campaign = campaign
        self._lens = lens

    @_user_safe
    async def ask(self, question: Question) -> str:
        """Answer a question, with its sources."""
        answer = await self._engine.answer(self._campaign, question, self._lens)
        sources = "\n".join(f"- {s.label()} ({s.doc_id})" for s in answer.sources)
        return f"{answer.text}\n\nSources:\n{sources}" if sources else answer.text

    @_user_safe
    async def search(
        self,
        query: Question,
        limit: Annotated[int, Field(description="How many documents.", ge=1, le=10)] = 5,
    ) -> str:
        """The most relevant documents' passages."""
        bundle = await self._engine.retrieve(self._campaign, query, self._lens, use_pins=False)
        docs = bundle.documents[:limit]
        if not docs:
            return "Nothing in the campaign's documents matches that."
        return "\n\n".join(f"## {d.title} ({d.doc_id})\n\n{d.text}" for d in docs)

    @_user_safe
    async def get_document(
        self,
        document: Key,
        offset: Annotated[int, Field(description="Character to start at.", ge=0)] = 0,
    ) -> str:
        """One document's text, a page at a time."""
        doc_id = await self._engine.resolve_document(self._campaign, document, self._lens)
        title, text = await self._engine.document_text(self._campaign, doc_id, self._lens)
        page = text[offset : offset + PAGE_CHARS]
        more = offset + PAGE_CHARS < len(text)
        tail = (
            f"\n\n[{len(text) - offset - PAGE_CHARS:,} more characters: call get-document "
            f"with offset={offset + PAGE_CHARS}]"
            if more
            else ""
        )
        return f"# {title} ({doc_id})\n\n{page}{tail}"

    @_user_safe
    async def list_documents(
        self,
        contains: Annotated[
            str, Field(description="Only titles holding this text.", max_length=_KEY_CHARS)
        ] = "",
        offset: Annotated[int, Field(description="Entries to skip.", ge=0)] = 0,
        limit: Annotated[int, Field(description="Entries to return.", ge=1, le=200)] = 100,
    ) -> str:
        """Document ids and titles, by title."""
        docs = await self._engine.list_documents(self._campaign, self._lens, contains)
        page = docs[offset : offset + limit]
        lines = [f"- {title} ({doc_id})" for doc_id, title in page]
        if offset + limit < len(docs):
            lines.append(f"[{len(docs) - offset - limit} more: call with offset={offset + limit}]")
        return "\n".join(lines) or "No documents."

    @_user_safe
    async def pins(self) -> str:
        """The pinned documents."""
        pinned = await self._engine.list_pins(self._campaign, self._lens)
        return "\n".join(f"- {title} ({doc_id})" for doc_id, title in pinned) or "Nothing pinned."

    @_user_safe
    async def recap(
        self,
        sessions: Annotated[int, Field(description="How many sessions back.", ge=1, le=10)] = 1,
    ) -> str:
        """The latest sessions, recapped."""
        recap = await self._engine.recap(self._campaign, sessions)
        sources = "\n".join(f"- {title} ({doc_id})" for doc_id, title in recap.sources)
        return f"{recap.text}\n\nFrom:\n{sources}" if sources else recap.text

    @_user_safe
    async def explain(
        self,
        question: Question,
        relevant: Annotated[
            list[Annotated[str, Field(max_length=_KEY_CHARS)]],
            Field(
                description="Documents expected to answer it (default: the top ones).",
                max_length=20,
            ),
        ] = [],  # noqa: B006 (pydantic copies defaults)
    ) -> str:
        """Retrieval's trace of a question (GM servers only)."""
        if not self._lens.is_gm:  # never registered without the GM lens; a second lock
            raise PermissionDenied("explain on a server without the GM lens")
        ex = await self._engine.explain(
            self._campaign, question, relevant=relevant, lens=self._lens
        )
        return ex.render()


def build_server(engine: Engine, campaign: str, lens: Lens, *, description: str = "") -> MCPServer:
    """An MCP server over ``campaign`` for ``lens``, offering :func:`catalogue` of it."""
    tools = LoreTools(engine, campaign, lens)
    server: MCPServer = MCPServer(
        name=f"liminalis-{campaign}",
        instructions=(
            f"Lore of the tabletop campaign `{campaign}`, from its documents, as "
            f"{'the GM' if lens.is_gm else 'its players'} may read it. {description}"
        ).strip(),
        log_level="WARNING",
    )
    for spec in catalogue(lens):
        server.add_tool(
            getattr(tools, spec.method),
            name=spec.name,
            description=spec.description,
            annotations=ToolAnnotations(read_only_hint=spec.read_only, open_world_hint=False),
            structured_output=False,
        )
    return server


def parse_http(spec: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6) as ``(host, port)``; ``ConfigError`` otherwise."""
    host, _, port = spec.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"--http {spec!r}", user_message="--http takes HOST:PORT, e.g. 127.0.0.1:8765."
        )
    return host, int(port)


async def serve(
    settings: Settings, engine: Engine, *, campaign: str, lens: Lens, http: str | None = None
) -> int:
    """Serve ``campaign`` for ``lens`` until the client leaves (stdio) or the process is stopped
    (HTTP). The campaign and the lens are checked first, and the campaign indexed if it never was;
    answers use the composition root's answer path (the model when it has a key, else quotes)."""
    config = await engine.campaign(campaign)
    unknown = sorted(set(lens) - {GM, PLAYERS, *config.lenses})
    if unknown:
        raise ConfigError(
            f"unknown lens {unknown}",
            user_message=f"{config.slug} has no lens named {', '.join(unknown)}.",
        )
    address = parse_http(http) if http else None
    await engine.ensure_indexed(
        config.slug, announce=lambda s: print(f"indexing {s} …", file=sys.stderr)
    )
    server = build_server(engine, config.slug, lens, description=config.description)
    async with open_service(settings, engine):  # the answer path, closed on exit
        if address is None:
            await server.run_stdio_async()
        else:
            host, port = address
            if host not in {"127.0.0.1", "localhost", "::1"}:
                _log.warning(
                    "MCP over HTTP on %s has no authentication: anyone who reaches it reads "
                    "what the %s lens may read",
                    host,
                    lens.describe(),
                )
            await server.run_streamable_http_async(host=host, port=port)
    return 0
