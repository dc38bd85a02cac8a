"""A database that cannot write never costs a finished answer, and says why where it must.

The answer is computed from what SQLite can still read; what is stored after it (the buttons'
card, the question log, the chat memory) is best-effort. Met for real: SQLite itself refuses
the writes, through the Discord and Slack adapters against their local fake APIs. A read-only
database is SQLite's ``query_only`` (the very error, ``SQLITE_READONLY``, a read-only file or
mount gives); a full disk is a small tmpfs filled up, where the host lets a test mount one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import discord
import harness
import pytest
from conftest import close_engine, make_engine
from fakes.discord_api import CHANNEL_ID, GUILD_ID, FakeDiscordApi, guild_payload
from fakes.discord_api import interaction_payload as discord_payload
from fakes.slack_api import SIGNING_SECRET, MockSlackApi, command_body, signed_headers
from fakes.tiny_campaign import make_tiny_campaign
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.discord_adapter import DiscordAdapter
from bot.service import Attachment, BotService, IncomingMessage
from bot.slack_adapter import ChannelRateLimiter, SlackAdapter
from liminalis.errors import StoreError
from liminalis.store.sqlite import Database, store_cause

PLAYER = 222
SLACK_PLAYER = "UPLAYER01"
SLACK_CHANNEL = "C0TABLE"
QUESTION = "Who rules Greyhold keep?"


async def read_only(db: Database) -> None:
    """From here on every write is refused as a read-only database file refuses it."""
    await db.conn.execute("PRAGMA query_only = ON")


@contextlib.contextmanager
def small_disk(where: Path, size: str = "16m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where``; the test is skipped where it cannot be."""
    where.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no tmpfs can be mounted here (needs root in a container that allows it)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def fill(disk: Path) -> None:
    """Write a file on ``disk`` until no byte more fits."""
    with (disk / "filler").open("wb", buffering=0) as f:
        for size in (1 << 16, 1):
            with contextlib.suppress(OSError):
                while f.write(b"\0" * size):
                    pass


# -- the causes, in words a player may read ---------------------------------------------------


def test_store_errors_name_their_cause_in_user_safe_words(tmp_path):
    conn = sqlite3.connect(tmp_path / "x.sqlite3")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("PRAGMA query_only = ON")
    with pytest.raises(sqlite3.Error) as ro:
        conn.execute("INSERT INTO t VALUES (1)")
    assert store_cause(ro.value) == "the data folder is read-only"
    assert store_cause(OSError(errno.ENOSPC, "No space left on device")) == "the disk is full"
    assert store_cause(OSError(errno.EROFS, "Read-only file system")) == (
        "the data folder is read-only"
    )
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    assert store_cause(full) == "the disk is full"
    assert store_cause(ValueError("x")) is None


async def test_a_store_error_a_user_meets_says_the_data_folder_is_read_only(tmp_path):
    """``/budget`` writes before it answers: refused, it names the cause, never a path."""
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        await read_only(harness.db(engine))
        with pytest.raises(StoreError) as caught:
            await engine.set_budget("greyhold", 4000)
        assert "the data folder is read-only" in caught.value.user_message
        assert str(tmp_path) not in caught.value.user_message
    finally:
        await close_engine(engine)


# -- Discord ------------------------------------------------------------------------------------


@pytest.fixture
async def discord_env(tmp_path, monkeypatch):
    api = FakeDiscordApi()
    url = await api.start()
    monkeypatch.setattr(discord.http.Route, "BASE", f"{url}/api/v10")
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    service = BotService(engine)
    await service.directory.link("discord", str(CHANNEL_ID), "greyhold", guild_id=str(GUILD_ID))
    adapter = DiscordAdapter(service, guild_ids=(123,), sync_commands=False)
    await adapter.client.login("fake-token")
    adapter.client._connection._add_guild_from_data(guild_payload())
    yield api, adapter, engine
    await adapter.client.close()
    await close_engine(engine)
    await api.close()


async def discord_ask(api: FakeDiscordApi, adapter: DiscordAdapter, question: str) -> dict:
    n = len(api.calls)
    payload = discord_payload(
        "lore ask", [{"name": "question", "type": 3, "value": question}], user_id=PLAYER
    )
    await adapter.tree._call(discord.Interaction(data=payload, state=adapter.client._connection))
    bodies = [
        c.json
        for c in api.calls[n:]
        if c.path.startswith("/webhooks/") and c.method in {"POST", "PATCH"}
    ]
    (body,) = [b for b in bodies if b.get("embeds")]
    return body


async def test_a_read_only_database_still_delivers_the_answer_on_discord(discord_env, caplog):
    api, adapter, engine = discord_env
    before = await discord_ask(api, adapter, QUESTION)
    assert before.get("components")  # buttons while the card can be stored
    await read_only(harness.db(engine))
    body = await discord_ask(api, adapter, QUESTION)
    text = json.dumps(body, ensure_ascii=False)
    assert "Baron" in text and "unavailable" not in text
    assert not body.get("components")  # no card stored: no buttons that would find none
    assert "read-only" in caplog.text  # the host is told, in the log


# -- Slack --------------------------------------------------------------------------------------


@pytest.fixture
async def slack_env(tmp_path):
    api = MockSlackApi()
    await api.start()
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    service = BotService(engine)
    await service.directory.link("slack", SLACK_CHANNEL, "greyhold")
    adapter = SlackAdapter(
        service,
        client=AsyncWebClient(token="xoxb-test", base_url=api.api_url),
        signing_secret=SIGNING_SECRET,
        limiter=ChannelRateLimiter(interval=0.0),
    )
    yield api, adapter, engine
    await close_engine(engine)
    await api.close()


async def slack_ask(api: MockSlackApi, adapter: SlackAdapter, question: str, tag: str) -> dict:
    body = command_body(
        "/lore",
        f"ask {question}",
        user_id=SLACK_PLAYER,
        channel_id=SLACK_CHANNEL,
        response_url=f"{api.url}/respond/{tag}",
    )
    req = AsyncBoltRequest(
        body=body, headers=signed_headers(body, content_type="application/x-www-form-urlencoded")
    )
    assert (await adapter.app.async_dispatch(req)).status == 200
    return (await api.wait_for(f"/respond/{tag}"))[0].args


def slack_buttons(args: dict) -> list[str]:
    blocks = args["blocks"] if isinstance(args["blocks"], list) else json.loads(args["blocks"])
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


async def test_a_read_only_database_still_delivers_the_answer_on_slack(slack_env):
    api, adapter, engine = slack_env
    assert slack_buttons(await slack_ask(api, adapter, QUESTION, "before"))
    await read_only(harness.db(engine))
    args = await slack_ask(api, adapter, QUESTION, "after")
    text = json.dumps(args, ensure_ascii=False)
    assert "Baron" in text and "unavailable" not in text
    assert not slack_buttons(args)


async def test_a_full_disk_still_delivers_the_answer_and_says_so_where_it_must(tmp_path):
    """On a disk with no byte left: the answer arrives (no buttons), and a write a user asked
    for says the disk is full."""
    with small_disk(tmp_path / "disk") as disk:
        make_tiny_campaign(disk / "campaigns")
        engine = await make_engine(disk, milvus=False)
        try:
            await engine.ingest("greyhold")
            service = BotService(engine)
            await service.directory.link("slack", SLACK_CHANNEL, "greyhold")
            await harness.db(engine).close()  # the next open starts a fresh write-ahead log
            await harness.db(engine).open()
            fill(disk)
            api = MockSlackApi()
            await api.start()
            try:
                adapter = SlackAdapter(
                    service,
                    client=AsyncWebClient(token="xoxb-test", base_url=api.api_url),
                    signing_secret=SIGNING_SECRET,
                    limiter=ChannelRateLimiter(interval=0.0),
                )
                args = await slack_ask(api, adapter, QUESTION, "full")
            finally:
                await api.close()
            text = json.dumps(args, ensure_ascii=False)
            assert "Baron" in text and "unavailable" not in text
            assert not slack_buttons(args)
            with pytest.raises(StoreError) as caught:
                await engine.set_budget("greyhold", 4000)
            assert "the disk is full" in caught.value.user_message
        finally:
            os.remove(disk / "filler")
            await close_engine(engine)


# -- a database lost beside the data it went with -------------------------------------------------


def lost_data_dir(tmp_path: Path, *, db: str) -> Path:
    """A data folder that served (a vector store, an upload) whose database is ``"missing"`` or
    ``"empty"`` (0 bytes: a copy cut short, a disk that filled while it was written)."""
    data = tmp_path / "data"
    (data / "uploads" / "greyhold").mkdir(parents=True)
    (data / "uploads" / "greyhold" / "map-notes.md").write_text("# Map notes\n\nThe ford.\n")
    (data / "milvus.db").write_bytes(b"vectors")
    if db == "empty":
        (data / "liminalis.sqlite3").write_bytes(b"")
    return data


async def test_an_empty_database_beside_a_data_folder_refuses_to_start_and_says_why(tmp_path):
    import dataclasses

    from bot.main import build_engine
    from bot.settings import Settings

    data = lost_data_dir(tmp_path, db="empty")
    settings = dataclasses.replace(Settings(), data_dir=data, campaigns_dir=tmp_path / "campaigns")
    with pytest.raises(StoreError) as caught:
        async with build_engine(settings):
            pass
    said = caught.value.user_message
    assert "empty (0 bytes)" in said and "vector store and uploads" in said and "--reset" in said
    assert str(tmp_path) not in said
    assert (data / "liminalis.sqlite3").stat().st_size == 0  # nothing was made over it


def test_a_missing_database_refuses_the_cli_until_reset_moves_the_old_state_aside(
    tmp_path, monkeypatch, capsys
):
    from bot.cli import main

    data = lost_data_dir(tmp_path, db="missing")
    make_tiny_campaign(tmp_path / "campaigns")
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    monkeypatch.setenv("LIMINALIS_DATA_DIR", str(data))
    monkeypatch.setenv("LIMINALIS_CAMPAIGNS_DIR", str(tmp_path / "campaigns"))
    assert main(["credits", "--campaign", "greyhold"]) == 2
    err = capsys.readouterr().err
    assert "error: The database (liminalis.sqlite3) is missing" in err and "--reset" in err
    assert not (data / "liminalis.sqlite3").exists()
    assert main(["--reset", "credits", "--campaign", "greyhold"]) == 0
    (aside,) = data.glob("lost-*")
    assert (aside / "milvus.db").read_bytes() == b"vectors"
    assert (data / "uploads" / "greyhold" / "map-notes.md").exists()  # the GM's files stay
    assert (data / "liminalis.sqlite3").stat().st_size > 0
    assert main(["credits", "--campaign", "greyhold"]) == 0  # started over: it opens


async def test_an_upload_on_a_full_disk_is_refused_with_why_and_leaves_no_partial_file(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        make_tiny_campaign(disk / "campaigns")
        engine = await make_engine(disk, milvus=False)
        try:
            await engine.ingest("greyhold")
            service = BotService(engine)
            await service.directory.link("discord", "C1", "greyhold")
            uploads = disk / "uploads" / "greyhold"
            uploads.mkdir(parents=True)
            fill(disk)
            reply = await service.handle(
                IncomingMessage(
                    platform="discord",
                    channel_id="C1",
                    user_id="111",
                    text="/upload players",
                    attachments=(
                        Attachment("ford.md", b"# The ford\n\n" + b"The ford is shallow. " * 4000),
                    ),
                )
            )
            assert "ford.md: not saved: the disk is full" in reply.text
            assert "went wrong" not in reply.text
            assert list(uploads.iterdir()) == []  # no .part file, no half a note
        finally:
            os.remove(disk / "filler")
            await close_engine(engine)
