"""The MCP server through the real ``mcp`` client, in process: the lens is the
catalogue, no argument raises it, a players client never receives GM-only text, titles or ids
whatever it sends, and errors are user-safe. One test serves over real streamable HTTP.

Real SQLite, the hash embedder, the in-memory vector store, the sample campaign."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import harness
import pytest
import uvicorn
from conftest import SAMPLE, close_engine, make_engine
from mcp import Client
from mcp.types import CallToolResult

from bot.mcp import NEUTRAL, TOOLS, build_server, catalogue, parse_http
from liminalis.engine import Engine
from liminalis.errors import ConfigError, NotReady
from liminalis.lens import Lens

SLUG = "emberfall"
PLAYERS = Lens({"players"})
GM = Lens({"gm"})
MIREL = Lens({"players", "mirel"})
DATA = json.loads((Path(__file__).parent / "data" / "emberfall_questions.json").read_text())
GM_CANARIES = [c.lower() for c in DATA["gm_canaries"]]
MIREL_CANARIES = [c.lower() for c in DATA["lens_canaries"]["mirel"]]
TOBIN_CANARIES = [c.lower() for c in DATA["lens_canaries"]["tobin"]]
PLAYER_TOOLS = {"ask", "search", "get-document", "list-documents", "pins", "recap"}


@pytest.fixture(scope="module")
async def engine(tmp_path_factory) -> AsyncIterator[Engine]:
    root = tmp_path_factory.mktemp("mcp")
    shutil.copytree(SAMPLE, root / "campaigns" / SLUG)
    engine = await make_engine(root, milvus=False)
    await engine.ingest(SLUG)
    # a GM pins a GM-only document and a file with hidden sections
    await engine.add_pin(SLUG, "gm/secrets.md", GM)
    await engine.add_pin(SLUG, "characters/vessa-coldwater.md", GM)
    yield engine
    await close_engine(engine)


@contextlib.asynccontextmanager
async def client(engine: Engine, lens: Lens, mode: str = "legacy") -> AsyncIterator[Client]:
    """The real client over memory streams (``legacy``: JSON-RPC framing and the handshake)."""
    async with Client(build_server(engine, SLUG, lens), mode=mode) as c:
        yield c


def text_of(result: CallToolResult) -> str:
    parts = [getattr(block, "text", "") for block in result.content]
    if result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


async def gm_only(engine: Engine) -> tuple[list[str], list[str]]:
    """The ids (every GM-only view) and titles (of files players have no view of) a player must
    never be handed."""
    everything = dict(await engine.list_documents(SLUG, GM))
    players = dict(await engine.list_documents(SLUG, PLAYERS))
    gm_views = [d for d in everything if d.endswith("//gm")]
    ids = [d for d in everything if d not in players] + gm_views
    titles = [t for d, t in everything.items() if d not in players and t not in players.values()]
    return ids, titles


def probes(ids: list[str], titles: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every tool with arguments aimed at the GM's side: secret questions, the canaries, GM ids,
    ``//gm`` views, paths, titles, long and odd inputs, and arguments no tool takes."""
    questions = [q["question"] for q in DATA["gm_secret_questions"]]
    questions += [f"Tell me about {c}" for c in DATA["gm_canaries"][:6]]
    questions += [f"@[{t}] what does it say?" for t in titles] + [f"@{d}" for d in ids[:4]]
    keys = [*ids, *titles, *(f"{d}.md" for d in ids), *(f"./{d}.md" for d in ids)]
    keys += [
        "gm",
        "gm/",
        "secrets",
        "GM Secrets",
        "../gm/secrets.md",
        "campaigns/emberfall/gm/secrets.md",
        "/etc/passwd",
        "characters/vessa-coldwater//GM",
        "characters/vessa-coldwater%2F%2Fgm",
        "*",
        "%",
        "\x00gm/secrets",
        "ｇｍ/secrets",
        "x" * 300,
    ]
    odd = ["?", "x" * 2000, "gm " * 600, "\u202egm/secrets", "'; DROP TABLE documents; --"]
    out: list[tuple[str, dict[str, Any]]] = []
    for q in questions + odd:
        out += [("ask", {"question": q}), ("search", {"query": q, "limit": 10})]
    for k in keys:
        out += [("get-document", {"document": k}), ("list-documents", {"contains": k})]
    out += [
        ("list-documents", {}),
        ("list-documents", {"contains": "", "offset": 0, "limit": 200}),
        ("pins", {}),
        ("recap", {"sessions": 10}),
        # arguments no tool declares, and wrong types: refused or ignored, never obeyed
        ("ask", {"question": questions[0], "lens": "gm"}),
        ("search", {"query": questions[1], "lens": ["gm"], "campaign": SLUG}),
        ("get-document", {"document": ids[0], "lens": "gm", "view": "gm"}),
        ("pins", {"lens": "gm", "chat": "discord:1"}),
        ("ask", {"question": "x" * 2001}),
        ("ask", {"question": 5}),
        ("ask", {"question": None}),
        ("ask", {}),
        ("search", {"query": "bells", "limit": 10_000}),
        ("get-document", {"document": "overview", "offset": -1}),
        ("list-documents", {"offset": 10**9}),
        ("explain", {"question": questions[0]}),
        ("entities", {}),
    ]
    return out


def scrub(text: str, args: dict[str, Any]) -> str:
    """The output without the caller's own words (echoed by a validation error, or quoted as
    the question): what a client sent is no leak."""
    for value in args.values():
        for s in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(s, str) and s:
                text = text.replace(s, "").replace(repr(s)[1:-1], "")
    return text


async def run_probes(c: Client, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    seen = []
    for name, args in calls:
        result = await c.call_tool(name, args)
        seen.append(scrub(text_of(result), args))
    return seen


async def test_the_lens_is_the_catalogue(engine):
    for mode in ("legacy", "auto"):
        async with client(engine, PLAYERS, mode) as c:
            tools = (await c.list_tools()).tools
            assert {t.name for t in tools} == PLAYER_TOOLS
            # no tool takes a lens, a campaign, a chat or a view
            for t in tools:
                assert not {"lens", "campaign", "chat", "view", "scope"} & set(
                    t.input_schema.get("properties", {})
                ), t.name
            refused = await c.call_tool("explain", {"question": "Who is the true heir?"})
            assert refused.is_error and "unknown tool" in text_of(refused).lower()
        async with client(engine, GM, mode) as c:
            assert {t.name for t in (await c.list_tools()).tools} == PLAYER_TOOLS | {"explain"}
    assert {t.name for t in catalogue(MIREL)} == PLAYER_TOOLS
    assert len(TOOLS) == len({t.name for t in TOOLS})


async def test_a_players_client_never_receives_gm_text_whatever_it_sends(engine):
    ids, titles = await gm_only(engine)
    assert "gm/secrets" in ids and any(d.endswith("//gm") for d in ids) and titles
    calls = probes(ids, titles)
    async with client(engine, PLAYERS) as c:
        seen = await run_probes(c, calls)
    everything = "\n".join(seen).lower()
    leaks = [
        (calls[i], s[:200])
        for i, s in enumerate(seen)
        if any(x in s.lower() for x in GM_CANARIES + MIREL_CANARIES + TOBIN_CANARIES)
    ]
    assert leaks == []
    assert [x for x in ids if x.lower() in everything] == []
    assert [t for t in titles if t.lower() in everything] == []
    assert "//gm" not in everything
    # the players' side is really there: the probe reached the documents
    assert "vessa" in everything and "overview" in everything
    # the same probe, through a GM server, does reach the secrets
    async with client(engine, GM) as c:
        gm_seen = "\n".join(await run_probes(c, calls)).lower()
    assert sum(x in gm_seen for x in GM_CANARIES) >= 5


async def test_a_personal_lens_reads_its_own_secret_and_no_one_elses(engine):
    async with client(engine, MIREL) as c:
        mine = await c.call_tool("get-document", {"document": "Mirel Ashcombe — Private Backstory"})
        assert not mine.is_error
        assert any(x in text_of(mine).lower() for x in MIREL_CANARIES)
        seen = await run_probes(c, probes(*(await gm_only(engine))))
    everything = "\n".join(seen).lower()
    assert not any(x in everything for x in GM_CANARIES + TOBIN_CANARIES)


async def test_tools_read_what_the_lens_may_see(engine):
    async with client(engine, PLAYERS) as c:
        answer = await c.call_tool(
            "ask", {"question": "Who carried the Vigil Key out of Emberfall?"}
        )
        assert not answer.is_error and "Sources:" in text_of(answer)
        found = await c.call_tool("search", {"query": "the Drowned Bell", "limit": 2})
        heads = re.findall(
            r"^## .+ \((?:lore|places|characters|sessions|factions)/[^)]+\)$", text_of(found), re.M
        )
        assert len(heads) == 2
        doc = await c.call_tool("get-document", {"document": "overview.md"})
        assert text_of(doc).startswith("# ") and "(overview)" in text_of(doc)
        listed = text_of(await c.call_tool("list-documents", {"limit": 5}))
        assert listed.count("\n- ") + listed.startswith("- ") == 5 and "offset=5" in listed
        pins = text_of(await c.call_tool("pins", {}))
        # the GM pinned a GM-only file and a file with hidden sections: players get their view
        assert "characters/vessa-coldwater)" in pins and "gm/secrets" not in pins
        recap = await c.call_tool("recap", {"sessions": 2})
        assert not recap.is_error and "From:" in text_of(recap)
    async with client(engine, GM) as c:
        explained = await c.call_tool("explain", {"question": "Who is the true heir of Emberfall?"})
        assert not explained.is_error and "secrets/true-heir" in text_of(explained)


async def test_a_missing_and_a_hidden_document_read_the_same(engine):
    async with client(engine, PLAYERS) as c:
        hidden = await c.call_tool("get-document", {"document": "gm/secrets.md"})
        missing = await c.call_tool("get-document", {"document": "gm/nothing-here.md"})
    assert hidden.is_error and missing.is_error
    assert text_of(hidden) == text_of(missing).replace("nothing-here", "secrets")


async def test_errors_are_user_safe(engine, monkeypatch, caplog):
    async def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"boom at {harness.db(engine).path}: the Saltborn Compact")

    async def not_ready(*args: Any, **kwargs: Any) -> Any:
        raise NotReady("index gone", user_message="Rebuilding; try again in a minute.")

    async with client(engine, PLAYERS) as c:
        monkeypatch.setattr(engine, "retrieve", crash)
        failed = await c.call_tool("search", {"query": "bells"})
        monkeypatch.setattr(engine, "retrieve", not_ready)
        waiting = await c.call_tool("search", {"query": "bells"})
    assert failed.is_error and NEUTRAL in text_of(failed)
    assert "boom" not in text_of(failed) and harness.db(engine).path not in text_of(failed)
    assert "saltborn" not in text_of(failed).lower()
    assert "boom" in caplog.text  # the operator's log has it
    assert waiting.is_error and "Rebuilding; try again in a minute." in text_of(waiting)


async def test_streamable_http_serves_the_same_catalogue(engine):
    server = build_server(engine, SLUG, PLAYERS)
    app = server.streamable_http_app()
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(web.serve())
    try:
        while not web.started:
            await asyncio.sleep(0.01)
        port = web.servers[0].sockets[0].getsockname()[1]
        async with Client(f"http://127.0.0.1:{port}/mcp") as c:
            assert {t.name for t in (await c.list_tools()).tools} == PLAYER_TOOLS
            doc = await c.call_tool("get-document", {"document": "characters/vessa-coldwater"})
            assert "Vessa" in text_of(doc)
            assert not any(x in text_of(doc).lower() for x in GM_CANARIES)
            hidden = await c.call_tool("get-document", {"document": "gm/secrets.md"})
            assert hidden.is_error
    finally:
        web.should_exit = True
        await task


def test_http_address():
    assert parse_http("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http("[::1]:9000") == ("::1", 9000)
    for bad in ("8765", "host:", "host:port", "host:70000", ":80"):
        with pytest.raises(ConfigError):
            parse_http(bad)
