"""The `liminalis` console entry point end to end (the `make run` path), in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

QUESTIONS = json.loads((ROOT / "tests" / "data" / "emberfall_questions.json").read_text())


def cli(args: list[str], tmp_path: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LIMINALIS_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1",
           "ANTHROPIC_API_KEY": "", "LIMINALIS_RERANKER": "none"}
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=300)


def test_help_lists_subcommands(tmp_path):
    r = cli(["--help"], tmp_path)
    assert r.returncode == 0
    for sub in ("ingest", "ask", "chat", "explain", "serve", "train-reranker"):
        assert sub in r.stdout


def test_ingest_json_then_ask_and_chat_by_lens(tmp_path):
    r = cli(["ingest", "--campaign", "emberfall", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(report) >= {"documents", "passages_added", "passages_removed", "passages_unchanged", "embedded",
                           "windows_embedded", "skipped", "seconds"}
    assert report["documents"] >= 25 and report["embedded"] == report["passages_added"]
    q = QUESTIONS["gm_secret_questions"][0]["question"]
    canaries = [c.lower() for c in QUESTIONS["gm_canaries"]]
    chat = cli(["chat", "--campaign", "emberfall", "--lens", "players"], tmp_path,
               stdin=f"/lens\n{q}\n/pin add Secrets\n/bogus\n\n/quit\n")
    assert chat.returncode == 0, chat.stderr
    out = chat.stdout.lower()
    assert "players view" in out and "sources:" in out
    assert "only a gm can do that" in out and "unknown command" in out
    assert not [c for c in canaries if c in out]
    gm = cli(["ask", "--campaign", "emberfall", "--lens", "gm", "--passages", q], tmp_path)
    assert gm.returncode == 0 and any(c in gm.stdout.lower() for c in canaries)
    bad = cli(["ask", "--campaign", "no-such-campaign", "hello"], tmp_path)
    assert bad.returncode != 0 and "no campaign" in (bad.stdout + bad.stderr).lower()
    assert "Traceback" not in bad.stderr and "indexing" not in bad.stderr


def test_ask_on_a_fresh_data_dir_indexes_first_and_answers(tmp_path):
    """`liminalis ask` before any ingest: it indexes the campaign, then answers from it (it used
    to answer "I found nothing" from the empty index)."""
    r = cli(["ask", "--campaign", "emberfall", "--lens", "players", "Who carried the Vigil Key?"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "indexing emberfall" in r.stderr and "Pell Wickery" in r.stdout and "Sources:" in r.stdout
