"""The `liminalis` console entry point end to end (the `make run` path), in subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import ROOT

from liminalis.store import Database

pytestmark = pytest.mark.slow  # real models or Milvus Lite throughout

QUESTIONS = json.loads((ROOT / "tests" / "data" / "emberfall_questions.json").read_text())


def cli(
    args: list[str],
    tmp_path: Path,
    stdin: str | None = None,
    *,
    prefix: Sequence[str] = (),
    hang_guard: float = 300,
    **env_extra: str,
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "LIMINALIS_DATA_DIR": str(tmp_path / "data"),
        "HF_HUB_OFFLINE": "1",
        "ANTHROPIC_API_KEY": "",
        "LIMINALIS_RERANKER": "none",
        **env_extra,
    }
    return subprocess.run(
        [*prefix, sys.executable, "-m", "bot.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=hang_guard,
        errors="replace",
    )


def test_help_lists_subcommands(tmp_path):
    r = cli(["--help"], tmp_path)
    assert r.returncode == 0
    for sub in ("ingest", "ask", "chat", "explain", "log", "serve"):
        assert sub in r.stdout


def test_ingest_json_then_ask_and_chat_by_lens(tmp_path):
    r = cli(["ingest", "--campaign", "emberfall", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(report) >= {
        "documents",
        "passages_added",
        "passages_removed",
        "passages_unchanged",
        "embedded",
        "windows_embedded",
        "skipped",
        "seconds",
        "hidden_sections",
        "warnings",
    }
    # a passage a file's views share is embedded once
    assert report["documents"] >= 25 and 0 < report["embedded"] <= report["passages_added"]
    assert report["hidden_sections"] == 5 and report["warnings"] == []
    # the ingest waited for the knowledge passes (offline: no key), so the console has them
    passes = {p["pass"]: p for p in report["passes"]}
    assert set(passes) == {"entities", "summaries", "motifs"}
    assert all(p["status"] == "done" and p["documents_done"] >= 25 for p in passes.values())
    assert all(p["model_calls"] == 0 for p in passes.values())
    q = QUESTIONS["gm_secret_questions"][0]["question"]
    canaries = [c.lower() for c in QUESTIONS["gm_canaries"]]
    chat = cli(
        ["chat", "--campaign", "emberfall", "--lens", "players"],
        tmp_path,
        stdin=f"/lens\n{q}\n/pin add Secrets\n/bogus\n\n/entities\n/entity Mirel\n"
        "What happened in the last session?\n/map Mirel\n/quit\n",
    )
    assert chat.returncode == 0, chat.stderr
    out = chat.stdout.lower()
    assert "players view" in out and "sources:" in out
    assert "only a gm can do that" in out and "unknown command" in out
    assert "**characters**" in out and "mirel ashcombe" in out
    assert "session 7 — the night market burns" in out
    png = tmp_path / "data" / "files" / "emberfall-map-mirel-ashcombe.png"
    assert f"file: {png}".lower() in out and png.read_bytes().startswith(b"\x89PNG")
    assert not [c for c in canaries if c in out]
    gm = cli(["ask", "--campaign", "emberfall", "--lens", "gm", "--passages", q], tmp_path)
    assert gm.returncode == 0 and any(c in gm.stdout.lower() for c in canaries)
    # --lens is read in any case; a terminal that is not UTF-8 gets its text, not a traceback
    latin = cli(
        ["ask", "--campaign", "emberfall", "--lens", "GM", q], tmp_path, PYTHONIOENCODING="latin-1"
    )
    assert latin.returncode == 0 and "Traceback" not in latin.stderr, latin.stderr[-2000:]
    assert "The True Heir of Emberfall" in latin.stdout  # a GM-only source: the GM lens, from "GM"
    bad = cli(["ask", "--campaign", "no-such-campaign", "hello"], tmp_path)
    assert bad.returncode != 0 and "no campaign" in (bad.stdout + bad.stderr).lower()
    assert "Traceback" not in bad.stderr and "indexing" not in bad.stderr


def test_ask_on_a_fresh_data_dir_indexes_first_and_answers(tmp_path):
    """`liminalis ask` before any ingest: it indexes the campaign, then answers from it (it used
    to answer "I found nothing" from the empty index)."""
    r = cli(
        ["ask", "--campaign", "emberfall", "--lens", "players", "Who carried the Vigil Key?"],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert (
        "indexing emberfall" in r.stderr and "Pell Wickery" in r.stdout and "Sources:" in r.stdout
    )


def test_ctrl_c_at_the_chat_prompt_leaves_at_once(tmp_path):
    """In a terminal, Ctrl-C at `> ` exits (130) without waiting for another Enter."""
    import pty
    import select
    import time

    env = {
        **os.environ,
        "LIMINALIS_DATA_DIR": str(tmp_path / "data"),
        "HF_HUB_OFFLINE": "1",
        "ANTHROPIC_API_KEY": "",
        "LIMINALIS_RERANKER": "none",
    }
    pid, fd = pty.fork()
    if pid == 0:  # the child: the chat, on a terminal
        os.chdir(ROOT)
        os.execve(
            sys.executable,
            [sys.executable, "-m", "bot.cli", "chat", "--campaign", "emberfall"],
            env,
        )
    seen = b""
    try:
        deadline = time.time() + 240
        while b"to leave." not in seen or not seen.rstrip().endswith(b">"):
            assert time.time() < deadline, seen[-500:]
            if select.select([fd], [], [], 0.5)[0]:
                seen += os.read(fd, 4096)
        os.write(fd, b"\x03")  # Ctrl-C: the terminal sends SIGINT
        # A hang guard only: without the fix it waits forever. The exit closes the engine within
        # a grace period (bot.cli._EXIT_GRACE_S), then leaves however far the close got: closing
        # a Milvus Lite index written moments before took over 20 s on a loaded 2-core machine.
        deadline = time.time() + 120
        while not (done := os.waitpid(pid, os.WNOHANG))[0]:
            assert time.time() < deadline, "still waiting for Enter after Ctrl-C"
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    os.read(fd, 4096)
                except OSError:
                    pass
        assert os.waitstatus_to_exitcode(done[1]) == 130
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)


def test_a_bad_setting_is_named_and_a_blank_one_is_the_default(tmp_path):
    """The host at the terminal is told which setting is wrong (it read only "the bot is
    misconfigured"); a blanked line in .env means the default, not "off" or an error."""
    r = cli(
        ["ask", "--campaign", "emberfall", "Who is the baron?"],
        tmp_path,
        LIMINALIS_TICK_SECONDS="5m",
    )
    assert r.returncode == 2 and "LIMINALIS_TICK_SECONDS" in r.stderr and "5m" in r.stderr
    from bot.settings import Settings

    blank = Settings.from_env(
        {
            "LIMINALIS_CONTEXTUAL": "",
            "LIMINALIS_RERANKER": " ",
            "LIMINALIS_RANKER": "",
            "LIMINALIS_MAX_UPLOAD_BYTES": "",
            "LIMINALIS_EMBEDDER": "",
        }
    )
    assert blank == Settings()


def _without_dac() -> list[str] | None:
    """The prefix that makes root obey file modes (root writes into a read-only folder
    otherwise), ``[]`` for anyone else, None when root cannot drop the capability here."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}"]


def test_a_garbled_database_fails_fast_with_its_cause(tmp_path):
    """A file that is not a database: the command says why and exits non-zero (it used to say
    "try again" and never exit, aiosqlite's worker thread still running)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "liminalis.sqlite3").write_bytes(b"not a database, whatever its name says " * 200)
    for args, extra in (
        (["ask", "--campaign", "emberfall", "hello"], {}),
        (["serve"], {"DISCORD_TOKEN": "not-a-token"}),
    ):
        r = cli(args, tmp_path, hang_guard=120, **extra)
        assert r.returncode != 0, r.stdout
        assert "error: The database cannot be opened (file is not a database)" in r.stderr, (
            r.stderr[-2000:]
        )
        assert "Traceback" not in r.stderr and "try again" not in r.stderr.lower()


def test_a_read_only_data_dir_fails_fast_with_its_cause(tmp_path):
    prefix = _without_dac()
    if prefix is None:
        pytest.skip("running as root without setpriv: a read-only folder cannot be made here")
    for name, existing in (("empty", False), ("with-db", True)):
        data = tmp_path / name / "data"
        data.mkdir(parents=True)
        if existing:
            asyncio.run(_create_database(data / "liminalis.sqlite3"))
        data.chmod(0o555)
        try:
            r = cli(
                ["ask", "--campaign", "emberfall", "hello"],
                tmp_path / name,
                prefix=prefix,
                hang_guard=120,
            )
        finally:
            data.chmod(0o755)
        assert r.returncode != 0, r.stdout
        assert "error: The database cannot be opened (the data folder is read-only)" in r.stderr, (
            r.stderr[-2000:]
        )
        assert "Traceback" not in r.stderr


async def _create_database(path: Path) -> None:
    async with Database(path):
        pass


def test_the_sentence_windows_setting_reaches_the_indexer():
    """docs/retrieval.md offers sentence windows as an ingest option: the host's setting is what
    turns them on (no setting reached them), and they stay off by default."""
    from bot.main import ingest_options
    from bot.settings import Settings

    assert not ingest_options(Settings.from_env({})).windows
    on = Settings.from_env({"LIMINALIS_SENTENCE_WINDOWS": "true", "LIMINALIS_CONTEXTUAL": "0"})
    assert ingest_options(on).windows and not ingest_options(on).contextual
