"""`liminalis health` and `liminalis doctor`, and `serve`'s status file they read.

No model weights load here: the model checks read files. Platform tokens are verified against
the local Discord and Slack fakes through the real client libraries.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import discord
import pytest
from conftest import ROOT
from fakes.discord_api import FakeDiscordApi
from fakes.slack_api import MockSlackApi

from bot.health import Check, check_python, doctor, doctor_checks, health, health_checks
from bot.heartbeat import Heartbeat, ServeStatus, judge, read_status, status_path
from bot.settings import Settings
from liminalis.store.sqlite import Database
from liminalis.testing import FrozenClock


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def models_without(tmp_path: Path, missing: str) -> Path:
    """A models folder holding the shipped models (linked) but ``missing``."""
    folder = tmp_path / "models"
    folder.mkdir()
    for model in (ROOT / "models").iterdir():
        if model.is_dir() and model.name != missing:
            (folder / model.name).symlink_to(model, target_is_directory=True)
    return folder


def settings_for(tmp_path: Path, **kw) -> Settings:
    campaigns = tmp_path / "campaigns"
    if not campaigns.exists():
        shutil.copytree(ROOT / "campaigns" / "emberfall", campaigns / "emberfall")
    return Settings(**{"data_dir": tmp_path / "data", "campaigns_dir": campaigns, **kw})


async def create_database(settings: Settings) -> None:
    async with Database(settings.sqlite_path):
        pass


async def connected() -> bool:
    return True


async def disconnected() -> bool:
    return False


def failures(checks: list[Check]) -> list[str]:
    return [c.detail for c in checks if c.failed]


# -- the status file -------------------------------------------------------------------------


async def test_the_status_file_says_which_platforms_are_connected_and_goes_stale(tmp_path):
    clock = FrozenClock()
    path = status_path(tmp_path)
    assert read_status(path) is None
    assert judge(None, now=clock.now(), where=path) == [
        f"serve: not running (no status file at {path})"
    ]
    never_run = asyncio.Event()

    async def sleep_forever(_: float) -> None:  # the test writes each beat itself
        await never_run.wait()

    beat = Heartbeat(
        path,
        clock=clock,
        platforms={"discord": connected, "slack": disconnected},
        interval_s=30,
        sleep=sleep_forever,
    )
    async with beat:
        status = read_status(path)
        assert status.state == "running" and status.platforms == {
            "discord": True,
            "slack": False,
        }
        assert judge(status, now=clock.now(), where=path) == ["slack: not connected"]
        beat.platforms["slack"] = connected
        await beat.beat()
        clock.advance(seconds=90)  # three intervals: still fresh
        assert judge(read_status(path), now=clock.now(), where=path) == []
        clock.advance(seconds=1)
        (stale,) = judge(read_status(path), now=clock.now(), where=path)
        assert "stale after 90 s" in stale and "hung or gone" in stale
    status = read_status(path)
    assert status.state == "stopped" and judge(status, now=clock.now(), where=path) == [
        "serve: stopped at 2026-01-01 00:01:31 UTC"
    ]
    assert ServeStatus.from_json(status.to_json()) == status


async def test_a_failing_probe_reads_as_not_connected_and_a_starting_serve_is_not_healthy(
    tmp_path, caplog
):
    async def broken() -> bool:
        raise RuntimeError("gateway gone")

    clock = FrozenClock()
    path = status_path(tmp_path)
    status = await Heartbeat(path, clock=clock, platforms={"discord": broken}).beat()
    assert status.platforms == {"discord": False}
    assert "status probe for discord failed" in caplog.text
    await Heartbeat(path, clock=clock).beat("starting")
    assert judge(read_status(path), now=clock.now(), where=path) == [
        "serve: starting since 2026-01-01 00:00:00 UTC (models loading, platforms not connected yet)"
    ]
    clock.advance(hours=1)  # a long start is still a start, not a hung serve
    assert "starting since" in judge(read_status(path), now=clock.now(), where=path)[0]
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a status file"):
        read_status(path)


async def test_health_is_healthy_with_a_fresh_status_and_every_platform_connected(tmp_path):
    settings = settings_for(tmp_path)
    await create_database(settings)
    clock = FrozenClock()
    await Heartbeat(
        status_path(settings.data_dir), clock=clock, platforms={"slack": connected}
    ).beat()
    lines: list[str] = []
    assert await health(settings, clock=clock, out=lines.append) == 0
    assert lines == [f"healthy: serve: running (pid {os.getpid()}; slack connected)"]
    clock.advance(minutes=5)
    lines.clear()
    assert await health(settings, clock=clock, out=lines.append) == 1
    assert len(lines) == 1 and "stale" in lines[0]
    # Without serve: the files only, and a data directory not made yet is fine.
    bare = settings_for(tmp_path / "bare")
    assert await health(bare, serve=False, out=lines.append) == 0


# -- health and doctor name what is wrong ----------------------------------------------------


async def test_health_and_doctor_name_a_missing_model(tmp_path):
    settings = settings_for(tmp_path, models_dir=str(models_without(tmp_path, "reranker")))
    await create_database(settings)
    reranker = tmp_path / "models" / "reranker"
    expected = f"reranker: {reranker} is missing; the rerank stage is off (fused order)"
    assert failures(await health_checks(settings, serve=False)) == [expected]
    # doctor: a stage off by design is a warning with its fix, not a failure
    lines: list[str] = []
    assert await doctor(settings, verify=False, out=lines.append) == 0
    at = lines.index(f"warn  {expected}")
    assert "LIMINALIS_RERANKER=none" in lines[at + 1] and lines[at + 1].startswith("      fix:")
    # Set to none, it is off by choice: healthy.
    off = settings_for(tmp_path, models_dir=settings.models_dir, reranker="none")
    assert failures(await health_checks(off, serve=False)) == []
    # The embedder cannot be done without: a broken one fails doctor too.
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "modules.json").write_text("[]")
    broken = settings_for(tmp_path, embedder=str(tmp_path / "broken"))
    lines.clear()
    assert await doctor(broken, verify=False, out=lines.append) == 1
    assert any(
        line.startswith(f"FAIL  embedder: {tmp_path / 'broken'} is incomplete (no config.json")
        for line in lines
    )


async def test_health_and_doctor_name_an_unwritable_data_directory(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    settings = settings_for(tmp_path, data_dir=tmp_path / "a-file" / "data")
    expected = f"data directory: {settings.data_dir} is not writable (Not a directory)"
    assert expected in failures(await health_checks(settings, serve=False))
    assert expected in failures(await doctor_checks(settings, verify=False))


async def test_health_and_doctor_name_an_unreachable_milvus_server(tmp_path):
    uri = f"http://127.0.0.1:{_closed_port()}"
    settings = settings_for(tmp_path, milvus_uri=uri)
    await create_database(settings)
    expected = f"vector store: Milvus server {uri} is unreachable (Connection refused)"
    assert failures(await health_checks(settings, serve=False)) == [expected]
    lines: list[str] = []
    assert await doctor(settings, verify=False, out=lines.append) == 1
    at = lines.index(f"FAIL  {expected}")
    assert "LIMINALIS_MILVUS_URI" in lines[at + 1]
    # A password in the URI never prints.
    secret = settings_for(tmp_path, milvus_uri=uri.replace("//", "//root:hunter2@"))
    assert "hunter2" not in " ".join(failures(await health_checks(secret, serve=False)))


async def test_health_and_doctor_name_a_damaged_database(tmp_path):
    settings = settings_for(tmp_path)
    settings.data_dir.mkdir()
    settings.sqlite_path.write_bytes(b"not a database, whatever its name says " * 200)
    expected = f"database: {settings.sqlite_path} cannot be opened (file is not a database)"
    assert failures(await health_checks(settings, serve=False)) == [expected]
    assert failures(await doctor_checks(settings, verify=False)) == [expected]


async def test_doctor_names_a_broken_campaign_and_the_stages_that_are_off(tmp_path):
    settings = settings_for(tmp_path, reranker="none")
    broken = settings.campaigns_dir / "broken"
    broken.mkdir()
    (broken / "campaign.toml").write_text("lenses = 5\n")
    lines: list[str] = []
    assert await doctor(settings, verify=False, out=lines.append) == 1
    assert any(line.startswith("FAIL  campaign broken: does not load (") for line in lines)
    assert "ok    campaign emberfall: Emberfall" in lines
    assert "off   reranker: off (set to none)" in lines
    assert "off   ANTHROPIC_API_KEY: not set (answers quote the documents, offline)" in lines
    assert "off   discord: off (DISCORD_TOKEN is not set)" in lines
    assert lines[-1].startswith("1 problem(s) to fix")
    assert check_python((3, 10, 2)).failed and not check_python().failed


# -- platform tokens, verified against the fakes ---------------------------------------------


async def test_doctor_verifies_the_discord_token(tmp_path, monkeypatch):
    api = FakeDiscordApi()
    url = await api.start()
    monkeypatch.setattr(discord.http.Route, "BASE", f"{url}/api/v10")
    try:
        settings = settings_for(tmp_path, discord_token="a-token")
        checks = await doctor_checks(settings)
        assert "discord: DISCORD_TOKEN accepted (bot Liminalis)" in [c.detail for c in checks]
        api.token_ok = False
        checks = await doctor_checks(settings)
        assert "discord: DISCORD_TOKEN was refused by Discord" in failures(checks)
        assert "a-token" not in " ".join(c.detail + c.fix for c in checks)
    finally:
        await api.close()


async def test_doctor_verifies_the_slack_tokens(tmp_path):
    api = MockSlackApi()
    await api.start()
    try:
        settings = settings_for(tmp_path, slack_bot_token="xoxb-test", slack_app_token="xapp-1")
        details = [c.detail for c in await doctor_checks(settings, slack_api=api.api_url)]
        assert "slack: SLACK_BOT_TOKEN accepted" in details
        assert "slack: SLACK_APP_TOKEN accepted" in details
        api.token_ok = api.app_token_ok = False
        checks = await doctor_checks(settings, slack_api=api.api_url)
        assert failures(checks) == [
            "slack: SLACK_BOT_TOKEN was refused by Slack (invalid_auth)",
            "slack: SLACK_APP_TOKEN was refused by Slack (invalid_auth)",
        ]
        wrong = settings_for(tmp_path, slack_bot_token="xoxb-test", slack_app_token="xoxb-oops")
        checks = await doctor_checks(wrong, slack_api=api.api_url)
        assert "slack: SLACK_APP_TOKEN is not an app-level token (xapp-…)" in failures(checks)
    finally:
        await api.close()


async def test_doctor_says_a_token_it_could_not_verify_is_unverified(tmp_path):
    port = _closed_port()
    settings = settings_for(tmp_path, slack_bot_token="xoxb-test", slack_app_token="xapp-1")
    checks = await doctor_checks(settings, slack_api=f"http://127.0.0.1:{port}/api/")
    slack = [c for c in checks if c.detail.startswith("slack:")]
    assert [c.status for c in slack] == ["warn", "warn"]
    assert slack[0].detail.startswith("slack: SLACK_BOT_TOKEN set, not verified (")


# -- the command line ------------------------------------------------------------------------


def _without_dac() -> list[str] | None:
    """As tests/test_cli.py: root made to obey file modes, or None when it cannot be."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}"]


def test_the_commands_exit_non_zero_naming_each_problem(tmp_path):
    """A read-only data directory, a Milvus server that is not there and a missing model, all at
    once: each is named on its own line, and both commands exit 1."""
    prefix = _without_dac()
    if prefix is None:
        pytest.skip("running as root without setpriv: a read-only folder cannot be made here")
    data = tmp_path / "data"
    data.mkdir()
    uri = f"http://127.0.0.1:{_closed_port()}"
    env = {
        **os.environ,
        "LIMINALIS_DATA_DIR": str(data),
        "LIMINALIS_MILVUS_URI": uri,
        "LIMINALIS_MODELS_DIR": str(models_without(tmp_path, "ranker")),
        "DISCORD_TOKEN": "",
        "SLACK_BOT_TOKEN": "",
        "SLACK_APP_TOKEN": "",
    }
    data.chmod(0o555)
    try:
        runs = {
            cmd: subprocess.run(
                [*prefix, sys.executable, "-m", "bot.cli", cmd, *extra],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            for cmd, extra in (("health", ["--no-serve"]), ("doctor", ["--offline"]))
        }
    finally:
        data.chmod(0o755)
    ranker = f"ranker: {tmp_path / 'models' / 'ranker'} is missing"
    health_out, doctor_out = runs["health"].stdout.splitlines(), runs["doctor"].stdout
    assert runs["health"].returncode == 1, runs["health"].stderr
    assert f"data directory: {data} is not writable (Permission denied)" in health_out
    assert f"vector store: Milvus server {uri} is unreachable (Connection refused)" in health_out
    assert any(line.startswith(ranker) for line in health_out)
    assert runs["doctor"].returncode == 1, runs["doctor"].stderr
    assert f"FAIL  data directory: {data} is not writable (Permission denied)" in doctor_out
    assert f"FAIL  vector store: Milvus server {uri} is unreachable" in doctor_out
    assert f"warn  {ranker}" in doctor_out
    assert "Traceback" not in runs["health"].stderr + runs["doctor"].stderr


def test_health_is_quiet_and_fast_when_not_serving(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "bot.cli", "health", "--no-serve"],
        cwd=ROOT,
        env={**os.environ, "LIMINALIS_DATA_DIR": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, "healthy\n", ""), r.stderr
    assert not (tmp_path / "data").exists()  # a check leaves nothing behind
