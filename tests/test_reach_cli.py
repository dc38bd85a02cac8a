"""`liminalis export`, `liminalis import` and `liminalis mcp` end to end, in subprocesses (the
real models and Milvus Lite: slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from fakes.tiny_campaign import CANARY, GM_TITLE, MIREL_CANARY, make_tiny_campaign
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.slow


def env_for(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LIMINALIS_DATA_DIR": str(home / "data"),
        "LIMINALIS_CAMPAIGNS_DIR": str(home / "campaigns"),
        "HF_HUB_OFFLINE": "1",
        "ANTHROPIC_API_KEY": "",
        "LIMINALIS_RERANKER": "none",
    }


def cli(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        cwd=ROOT,
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=600,
    )


async def test_export_import_then_serve_the_copy_over_mcp_stdio(tmp_path):
    make_tiny_campaign(tmp_path / "a" / "campaigns")
    assert cli(["ingest", "--campaign", "greyhold"], tmp_path / "a").returncode == 0
    archive = tmp_path / "greyhold.zip"
    out = cli(["export", "--campaign", "greyhold", "--out", str(archive)], tmp_path / "a")
    assert out.returncode == 0, out.stderr
    assert "exported greyhold" in out.stdout and archive.is_file()

    imported = cli(["import", str(archive), "--campaign", "grey2"], tmp_path / "b")
    assert imported.returncode == 0, imported.stderr
    assert "imported grey2" in imported.stdout
    assert "every vector from the export's cache" in imported.stdout
    again = cli(["import", str(archive), "--campaign", "grey2"], tmp_path / "b")
    assert again.returncode == 2 and "already exists" in again.stderr
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"PK\x03\x04 not really")
    refused = cli(["import", str(junk)], tmp_path / "b")
    assert refused.returncode == 2 and "not a Liminalis campaign export" in refused.stderr

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot.cli", "mcp", "--campaign", "grey2", "--lens", "players"],
        env=env_for(tmp_path / "b"),
        cwd=ROOT,
    )
    async with Client(server) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "explain" not in names and {"ask", "search", "get-document"} <= names
        found = await c.call_tool("search", {"query": "what does the baron do at night?"})
        hidden = await c.call_tool("get-document", {"document": GM_TITLE})
        answer = await c.call_tool("ask", {"question": "Who is the baron, truly?"})
    seen = "\n".join(getattr(b, "text", "") for r in (found, hidden, answer) for b in r.content)
    assert "Baron Aldric" in seen and hidden.is_error
    assert CANARY not in seen and MIREL_CANARY not in seen and GM_TITLE not in seen
