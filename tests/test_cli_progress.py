"""``liminalis ingest`` end to end: progress on a terminal, JSON lines on request, nothing off a
terminal, and no Milvus/gRPC/torch/transformers line on stderr (subprocesses, real pty)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # the real embedder and Milvus Lite

#: What a library writes when it reaches the terminal.
NOISE = re.compile(
    r"grpc|GOAWAY|too_many_pings|pymilvus|milvus_lite|torch|transformers|Warning|Traceback"
    r"|Loading weights|it/s",
    re.IGNORECASE,
)
INGEST = [sys.executable, "-m", "bot.cli", "ingest", "--campaign", "emberfall", "--no-passes"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "LIMINALIS_DATA_DIR": str(tmp_path / "data"),
        "HF_HUB_OFFLINE": "1",
        "ANTHROPIC_API_KEY": "",
        "LIMINALIS_RERANKER": "none",
    }
    for name in (
        "GRPC_VERBOSITY",
        "GRPC_TRACE",
        "TRANSFORMERS_VERBOSITY",
        "HF_HUB_DISABLE_PROGRESS_BARS",
    ):
        env.pop(name, None)  # the CLI's own defaults, not the test runner's
    return env


def _on_a_terminal(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal: (exit code, stdout, what the terminal showed)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    master, slave = pty.openpty()
    out = tmp_path / "stdout.txt"
    with out.open("w") as stdout:
        proc = subprocess.Popen(args, cwd=ROOT, env=_env(tmp_path), stdout=stdout, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal (EIO)
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    code = proc.wait(timeout=300)
    return code, out.read_text(), shown.decode(errors="replace")


def test_ingest_on_a_terminal_shows_progress_and_off_one_shows_none(tmp_path):
    piped = subprocess.run(
        [*INGEST, "--json"],
        cwd=ROOT,
        env=_env(tmp_path / "piped"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout.splitlines()[-1])["documents"] > 1
    assert piped.stderr == ""  # no progress off a terminal, and no library's lines

    code, stdout, shown = _on_a_terminal([*INGEST, "--json"], tmp_path / "tty")
    assert code == 0, shown
    total = json.loads(stdout.splitlines()[-1])["documents"]
    frames = [f for f in re.split(r"[\r\n]", shown) if f.strip()]
    assert any(
        re.fullmatch(rf"ingest emberfall: {total} of {total} documents, .* a second.*", f)
        for f in frames
    ), shown
    assert not NOISE.search(shown), shown


def test_progress_json_writes_one_object_a_line_on_stderr(tmp_path):
    r = subprocess.run(
        [*INGEST, "--progress", "json"],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stderr.splitlines()]  # nothing else on stderr
    assert lines and {"done", "total", "rate", "eta_s", "stage"} <= set(lines[-1])
    assert lines[0]["done"] == 0 and lines[-1]["done"] == lines[-1]["total"] > 1
    assert {x["stage"] for x in lines} == {"ingest"}
    assert lines[-1]["rate"] > 0 and lines[-1]["eta_s"] == 0
