"""Heavy uploads never hold the event loop, and a disk that cannot hold one says so.

Through the real service (and the real Discord adapter against its fake API): a download is
streamed to a temporary file, the files are read, parsed and written in the engine's worker
pool, and a full disk is met through the writer seam (``bot.upload_files.UploadWriter``), so a
host where no tmpfs can be mounted still covers it (``test_store_faults.py`` meets a real one).
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import discord
import pytest
from conftest import close_engine, make_engine
from fakes.discord_api import FakeDiscordApi, guild_payload
from fakes.tiny_campaign import make_tiny_campaign

from bot.discord_adapter import DiscordAdapter
from bot.service import Attachment, BotService, IncomingMessage
from bot.upload_files import DiskWriter

NOTE = b"# The ford\n\nThe ford is shallow at the mill.\n"
BIG = b"# The long road\n\n" + b"The road runs on past the hills. " * 2000


class FullDisk(DiskWriter):
    """The real writer on a disk with ``room`` bytes left: a larger file is cut short and
    refused with ``ENOSPC``, as a full disk refuses it."""

    def __init__(self, room: int) -> None:
        self.room = room

    def write_part(self, tmp: Path, data: bytes) -> None:
        if len(data) <= self.room:
            super().write_part(tmp, data)
            return
        tmp.write_bytes(data[: self.room])
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
async def engine(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    yield engine
    await close_engine(engine)


def upload(*attachments: Attachment) -> IncomingMessage:
    return IncomingMessage(
        platform="discord",
        channel_id="C1",
        user_id="111",
        text="/upload players",
        attachments=attachments,
    )


async def test_a_full_disk_met_through_the_writer_names_what_was_saved_and_leaves_no_part(
    engine, tmp_path
):
    service = BotService(engine, upload_writer=FullDisk(room=1000))
    await service.directory.link("discord", "C1", "greyhold")
    reply = await service.handle(upload(Attachment("ford.md", NOTE), Attachment("road.md", BIG)))
    assert "ford.md — players" in reply.text, reply.text
    assert "road.md: not saved: the disk is full" in reply.text
    assert "went wrong" not in reply.text
    uploads = tmp_path / "uploads" / "greyhold"
    assert sorted(p.name for p in uploads.iterdir()) == ["ford.md"]  # no .part, no half a note


class ThreadNoting(DiskWriter):
    """The real writer, noting which thread each write runs in."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def write_part(self, tmp: Path, data: bytes) -> None:
        self.threads.append(threading.current_thread())
        super().write_part(tmp, data)


async def test_an_upload_is_read_parsed_and_written_in_the_worker_pool_not_on_the_loop(engine):
    """The checks and the write are one call: the thread that writes is the one that parsed."""
    writer = ThreadNoting()
    service = BotService(engine, upload_writer=writer)
    await service.directory.link("discord", "C1", "greyhold")
    reply = await service.handle(upload(Attachment("ford.md", NOTE)))
    assert "ford.md — players" in reply.text
    (thread,) = writer.threads
    assert thread is not threading.current_thread()  # the event loop's
    assert thread.name.startswith("liminalis-cpu")  # the engine's worker pool


@pytest.fixture
async def discord_env(engine, tmp_path, monkeypatch):
    api = FakeDiscordApi()
    url = await api.start()
    monkeypatch.setattr(discord.http.Route, "BASE", f"{url}/api/v10")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    adapter = DiscordAdapter(BotService(engine, max_upload_bytes=4096), sync_commands=False)
    await adapter.client.login("fake-token")
    adapter.client._connection._add_guild_from_data(guild_payload())
    yield api, adapter
    await adapter.client.close()
    await api.close()


def attachment(
    adapter: DiscordAdapter, api: FakeDiscordApi, name: str, size: int
) -> discord.Attachment:
    data = {
        "id": "11",
        "filename": name,
        "size": size,
        "url": f"{api.url}/attachments/{name}",
        "proxy_url": f"{api.url}/attachments/{name}",
    }
    return discord.Attachment(data=data, state=adapter.client._connection)  # type: ignore[arg-type]


async def test_a_discord_download_is_streamed_to_a_temporary_file_not_held_in_memory(
    discord_env, tmp_path
):
    api, adapter = discord_env
    api.files["ford.md"] = NOTE
    (got,) = await adapter.read_attachments([attachment(adapter, api, "ford.md", len(NOTE))])
    assert got.data == b"" and got.path is not None and got.path.parent == tmp_path
    assert got.content() == NOTE


async def test_a_discord_file_larger_than_it_declared_is_cut_off_and_refused_by_size(
    discord_env, tmp_path
):
    api, adapter = discord_env
    api.files["road.md"] = BIG  # declares 100 bytes, sends 66 KB: past the cap of 4,096
    (got,) = await adapter.read_attachments([attachment(adapter, api, "road.md", 100)])
    assert got.path is None and got.byte_size() > 4096
    assert list(tmp_path.glob("liminalis-upload-*")) == []  # what was read is removed


async def test_a_discord_file_declared_over_the_cap_is_never_downloaded(discord_env):
    api, adapter = discord_env
    api.files["road.md"] = BIG
    (got,) = await adapter.read_attachments([attachment(adapter, api, "road.md", len(BIG))])
    assert got.byte_size() == len(BIG) and got.path is None
    assert api.find("GET", "/attachments/road.md") == []


@pytest.fixture
async def slack_env(engine, tmp_path, monkeypatch):
    from fakes.slack_api import SIGNING_SECRET, MockSlackApi
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.slack_adapter import ChannelRateLimiter, SlackAdapter

    api = MockSlackApi()
    await api.start()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    adapter = SlackAdapter(
        BotService(engine, max_upload_bytes=4096),
        client=AsyncWebClient(token="xoxb-test", base_url=api.api_url),
        signing_secret=SIGNING_SECRET,
        limiter=ChannelRateLimiter(interval=0.0),
    )
    yield api, adapter
    await api.close()


def slack_file(api, name: str, size: int) -> dict[str, object]:
    return {"name": name, "size": size, "url_private_download": f"{api.url}/files/{name}"}


async def test_a_slack_download_is_streamed_to_a_temporary_file_and_cut_off_past_the_cap(
    slack_env, tmp_path
):
    api, adapter = slack_env
    api.files["ford.md"], api.files["road.md"] = NOTE, BIG
    got = await adapter._download(slack_file(api, "ford.md", len(NOTE)))
    assert got.data == b"" and got.path is not None and got.content() == NOTE
    # road.md declares 100 bytes and sends 66 KB: cut off past the cap, refused by size.
    cut = await adapter._download(slack_file(api, "road.md", 100))
    assert cut.path is None and cut.byte_size() > 4096
    assert [p.name for p in tmp_path.glob("liminalis-upload-*")] == [got.path.name]


async def test_a_streamed_download_is_removed_whatever_the_command_did_with_it(engine, tmp_path):
    """An upload refused before it reads its files (a visibility nobody has) still removes the
    temporary files the adapter streamed them to."""
    service = BotService(engine)
    await service.directory.link("discord", "C1", "greyhold")
    streamed = tmp_path / "liminalis-upload-1.part"
    streamed.write_bytes(NOTE)
    msg = IncomingMessage(
        platform="discord", channel_id="C1", user_id="111", text="/upload nobody", file_count=1
    )
    pending = await service.begin(msg)
    assert pending.is_gm
    reply = await pending.finish((Attachment("ford.md", b"", path=streamed),))
    assert reply.error and not streamed.exists()
