"""Slack adapter through slack-bolt's ``AsyncApp.async_dispatch`` with signed requests and a
local mock Web API (``AsyncWebClient(base_url=...)``), as slack-bolt's own test suite does."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import close_engine, make_engine
from fakes.slack_api import (
    BOT_USER,
    SIGNING_SECRET,
    MockSlackApi,
    command_body,
    event_body,
    signed_headers,
)
from fakes.tiny_campaign import CANARY, MIREL_CANARY, SLACK_GM, SLACK_GM_GROUP, make_tiny_campaign
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.service import BotService, Reply
from bot.slack_adapter import ChannelRateLimiter, SlackAdapter, render_blocks
from liminalis.answer import Responder, Source

PLAYER = "UPLAYER01"
CHANNEL = "C0TABLE"


class GatedResponder(Responder):
    """The real responder, held at a gate so a test can see what happened before the work."""

    def __init__(self, engine) -> None:
        super().__init__(engine)
        self.started = asyncio.Event()
        self.gate = asyncio.Event()
        self.gate.set()

    async def respond(self, *args, **kw):
        self.started.set()
        await self.gate.wait()
        return await super().respond(*args, **kw)


@pytest.fixture
async def env(tmp_path):
    api = MockSlackApi()
    await api.start()
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    responder = GatedResponder(engine)
    service = BotService(engine, responder=responder)
    await service.directory.link("slack", CHANNEL, "greyhold")
    client = AsyncWebClient(token="xoxb-test", base_url=api.api_url)
    adapter = SlackAdapter(
        service,
        client=client,
        signing_secret=SIGNING_SECRET,
        limiter=ChannelRateLimiter(interval=0.0),
    )
    yield api, adapter, responder
    await close_engine(engine)
    await api.close()


async def command(
    adapter: SlackAdapter,
    api: MockSlackApi,
    name: str,
    text: str,
    *,
    user: str,
    channel: str = CHANNEL,
):
    """``/<name> <text>`` as the app receives it: its one ``/lore`` command with ``<name>``
    first (``/lore ask …``); answered at ``/respond/<name>``."""
    sub = name.removeprefix("/")
    body = command_body(
        "/lore",
        f"{sub} {text}".strip() if sub != "lore" else text,
        user_id=user,
        channel_id=channel,
        response_url=f"{api.url}/respond/{sub}",
    )
    req = AsyncBoltRequest(
        body=body, headers=signed_headers(body, content_type="application/x-www-form-urlencoded")
    )
    return await adapter.app.async_dispatch(req)


async def event(adapter: SlackAdapter, ev: dict):
    body = event_body(ev)
    req = AsyncBoltRequest(body=body, headers=signed_headers(body, content_type="application/json"))
    return await adapter.app.async_dispatch(req)


def dump(call) -> str:
    return json.dumps(call.args, ensure_ascii=False)


async def test_unsigned_request_is_rejected(env):
    api, adapter, _ = env
    body = command_body("/lore", "ask baron", user_id=PLAYER, response_url=f"{api.url}/respond/x")
    headers = signed_headers(body, content_type="application/x-www-form-urlencoded", secret="wrong")
    resp = await adapter.app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
    assert resp.status == 401
    await api.wait_quiet()
    assert not api.find("/respond/")


async def test_ack_before_work_then_player_answer_in_channel(env):
    api, adapter, responder = env
    responder.gate.clear()
    resp = await command(adapter, api, "/ask", "What is the truth about the baron?", user=PLAYER)
    assert resp.status == 200  # acknowledged while the answer is still held at the gate
    await asyncio.wait_for(responder.started.wait(), 5)
    assert not api.find("/respond/")
    responder.gate.set()
    posted = await api.wait_for("/respond/ask")
    assert posted[0].args["response_type"] == "in_channel"
    text = dump(posted[0])
    assert "baron" in text.lower() and CANARY not in text


async def test_gm_by_user_id_gets_ephemeral_secret(env):
    api, adapter, _ = env
    await command(adapter, api, "/ask", "What is the truth about the baron?", user=SLACK_GM)
    posted = await api.wait_for("/respond/ask")
    assert posted[0].args["response_type"] == "ephemeral"
    assert CANARY in dump(posted[0])


async def test_gm_by_usergroup_and_failed_lookup_falls_back_to_players(env):
    api, adapter, _ = env
    api.usergroups = [{"id": SLACK_GM_GROUP, "handle": "gms", "users": ["UGROUPGM1"]}]
    await command(adapter, api, "/lens", "", user="UGROUPGM1")
    assert "GM view" in dump((await api.wait_for("/respond/lens"))[0])
    adapter._groups = (float("-inf"), None)
    api.usergroups = None  # usergroups.list fails (missing scope)
    await command(adapter, api, "/lens", "", user="UGROUPGM1")
    second = (await api.wait_for("/respond/lens", 2))[1]
    assert "GM view" not in dump(second) and "players" in dump(second)


async def test_personal_lens_by_user_list(env):
    api, adapter, _ = env
    await command(adapter, api, "/lens", "", user="UMIREL01")
    assert "mirel" in dump((await api.wait_for("/respond/lens"))[0])


async def test_personal_lens_answer_is_ephemeral(env):
    api, adapter, _ = env
    await command(adapter, api, "/ask", "Who took the baron's ninth bell?", user="UMIREL01")
    posted = (await api.wait_for("/respond/ask"))[0]
    assert posted.args["response_type"] == "ephemeral" and MIREL_CANARY in dump(posted)
    await command(adapter, api, "/ask", "Who took the baron's ninth bell?", user=PLAYER)
    public = (await api.wait_for("/respond/ask", 2))[1]
    assert public.args["response_type"] == "in_channel" and MIREL_CANARY not in dump(public)


async def test_escaped_characters_reach_commands_as_typed(env):
    """Slack sends "Salt & Smoke" as "Salt &amp; Smoke": the pin must still find the document."""
    api, adapter, _ = env
    engine = adapter.service.engine
    cfg = await engine.campaign("greyhold")
    (cfg.root / "salt.md").write_text(
        "---\ntitle: Salt & Smoke\n---\n# Salt & Smoke\n\nA tavern by the river.\n"
    )
    await engine.ingest("greyhold")
    await command(adapter, api, "/pin", "add Salt &amp; Smoke", user=SLACK_GM)
    assert "Pinned **Salt &amp; Smoke**" in dump(
        (await api.wait_for("/respond/pin"))[0]
    )  # (escaped again on the way out)


async def test_dm_gm_gets_players(env):
    api, adapter, _ = env
    service = adapter.service
    await service.directory.link("slack", "D0DM", "greyhold")
    await command(adapter, api, "/lens", "", user=SLACK_GM, channel="D0DM")
    assert "GM view" not in dump((await api.wait_for("/respond/lens"))[0])


async def test_gm_only_commands_refused_for_players(env):
    api, adapter, _ = env
    service = adapter.service
    await command(adapter, api, "/explain", "baron", user=PLAYER)
    await command(adapter, api, "/pin", "add Baron Aldric", user=PLAYER)
    await command(adapter, api, "/upload", "", user=PLAYER)
    posted = await api.wait_for("/respond/", 3)
    assert all("Only a GM" in dump(p) and p.args["response_type"] == "ephemeral" for p in posted)
    assert await service.engine.pins("greyhold") == []


async def test_mention_replies_in_thread_and_gm_mention_is_ephemeral(env):
    api, adapter, _ = env
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": PLAYER,
            "text": f"<@{BOT_USER}> what about the baron?",
            "channel": CHANNEL,
            "ts": "100.1",
            "thread_ts": "99.0",
            "event_ts": "100.1",
        },
    )
    post = (await api.wait_for("chat.postMessage"))[0]
    assert post.args["thread_ts"] == "99.0" and post.args["channel"] == CHANNEL
    assert CANARY not in dump(post)
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": SLACK_GM,
            "text": f"<@{BOT_USER}> what is the truth about the baron?",
            "channel": CHANNEL,
            "ts": "101.1",
            "event_ts": "101.1",
        },
    )
    eph = (await api.wait_for("chat.postEphemeral"))[0]
    assert eph.args["user"] == SLACK_GM and eph.args["thread_ts"] == "101.1"
    assert CANARY in dump(eph)
    assert len(api.find("chat.postMessage")) == 1  # the GM answer never went to the channel


async def test_gm_upload_by_mention_with_file(env):
    api, adapter, _ = env
    api.files["notes.md"] = b"# Session 2\n\nThe party found the silver bell.\n"
    f = {
        "id": "F1",
        "name": "notes.md",
        "size": 50,
        "url_private_download": f"{api.url}/files/notes.md",
    }
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": PLAYER,
            "text": f"<@{BOT_USER}> /upload",
            "channel": CHANNEL,
            "ts": "1.1",
            "event_ts": "1.1",
            "files": [f],
        },
    )
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": SLACK_GM,
            "text": f"<@{BOT_USER}> /upload",
            "channel": CHANNEL,
            "ts": "2.1",
            "event_ts": "2.1",
            "files": [f],
        },
    )
    posts = await api.wait_for("chat.postEphemeral", 2)
    texts = sorted(dump(p) for p in posts)
    assert any("Only a GM" in t for t in texts) and any("Ingested 1 file" in t for t in texts)
    assert len(api.find("/files/notes.md")) == 1  # the player's file was never downloaded


async def test_upload_options_after_the_mention_and_a_per_file_report(env):
    """Words after ``/upload`` in the mention give the visibility and type; without them the
    file is GM-only. The reply names each uploaded file's visibility, type and passages only."""
    api, adapter, responder = env
    api.files["s3.md"] = (
        b"# Session 3\n\nThe party crossed the iced river.\n<!-- GM: the ice was a trap -->\n"
    )
    f = {"id": "F3", "name": "s3.md", "size": 80, "url_private_download": f"{api.url}/files/s3.md"}
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": SLACK_GM,
            "text": f"<@{BOT_USER}> /upload players session",
            "channel": CHANNEL,
            "ts": "4.1",
            "event_ts": "4.1",
            "files": [f],
        },
    )
    (post,) = await api.wait_for("chat.postEphemeral", 1)
    text = dump(post)
    assert (
        "s3.md — players, session: 1 passages added, 0 changed, 0 removed; 1 hidden section (GM-only)"
        in text
    ), text
    assert "baron" not in text.lower()  # the rest of the campaign is not reported
    engine = responder.engine
    players = await engine.retrieve("greyhold", "What did the party cross?", frozenset({"players"}))
    assert "iced river" in players.text and "trap" not in players.text
    api.files["s4.md"] = b"# Session 4\n\nThe party slept.\n"
    f4 = {"id": "F4", "name": "s4.md", "size": 30, "url_private_download": f"{api.url}/files/s4.md"}
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": SLACK_GM,
            "text": f"<@{BOT_USER}> /upload",
            "channel": CHANNEL,
            "ts": "5.1",
            "event_ts": "5.1",
            "files": [f4],
        },
    )
    posts = await api.wait_for("chat.postEphemeral", 2)
    assert "s4.md — GM-only, lore" in dump(posts[-1])
    assert "Session 4" not in [
        t for _, t in await engine.titles("greyhold", frozenset({"players"}))
    ]


async def test_a_long_upload_is_downloaded_whole(env):
    api, adapter, _ = env
    body = "# Session 7\n\n" + "\n\n".join(
        f"Paragraph {i}: the party crossed the frozen river again." for i in range(1200)
    )
    api.files["session-7.md"] = body.encode()
    f = {
        "id": "F7",
        "name": "session-7.md",
        "size": len(body),
        "url_private_download": f"{api.url}/files/session-7.md",
    }
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": SLACK_GM,
            "text": f"<@{BOT_USER}> /upload",
            "channel": CHANNEL,
            "ts": "7.1",
            "event_ts": "7.1",
            "files": [f],
        },
    )
    assert "Ingested 1 file" in dump((await api.wait_for("chat.postEphemeral"))[0])
    cfg = await adapter.service.engine.campaign("greyhold")
    assert (
        cfg.uploads_root / "session-7.md"
    ).read_bytes() == b"---\nvisibility: gm\n---\n" + body.encode()


async def test_files_past_the_tenth_are_named_not_dropped(env):
    api, adapter, _ = env
    files = []
    for i in range(11):
        api.files[f"n{i}.md"] = f"# Note {i}\n\nBell {i} rang.\n".encode()
        files.append(
            {
                "id": f"F{i}",
                "name": f"n{i}.md",
                "size": 20,
                "url_private_download": f"{api.url}/files/n{i}.md",
            }
        )
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": SLACK_GM,
            "text": f"<@{BOT_USER}> /upload",
            "channel": CHANNEL,
            "ts": "8.1",
            "event_ts": "8.1",
            "files": files,
        },
    )
    text = dump((await api.wait_for("chat.postEphemeral"))[0])
    assert "Ingested 10 file(s)" in text and "n10.md: only 10 files" in text
    assert not api.find("/files/n10.md")  # named, never downloaded


async def test_a_failed_download_is_reported_for_that_file_and_the_others_ingested(env):
    api, adapter, _ = env
    api.files["notes.md"] = b"# Session 2\n\nThe party found the silver bell.\n"
    good = {
        "id": "F1",
        "name": "notes.md",
        "size": 50,
        "url_private_download": f"{api.url}/files/notes.md",
    }
    gone = {
        "id": "F2",
        "name": "gone.md",
        "size": "n/a",
        "url_private_download": f"{api.url}/files/gone.md",
    }
    await event(
        adapter,
        {
            "type": "app_mention",
            "user": SLACK_GM,
            "text": f"<@{BOT_USER}> /upload",
            "channel": CHANNEL,
            "ts": "3.1",
            "event_ts": "3.1",
            "files": [gone, good],
        },
    )
    (post,) = await api.wait_for("chat.postEphemeral", 1)
    text = dump(post)
    assert "Ingested 1 file" in text and "gone.md: could not be downloaded from Slack" in text
    assert "something went wrong" not in text


async def test_blocks_within_limits_and_sanitized():
    sources = tuple(Source(f"d{i}", f"Doc {i}") for i in range(300))
    reply = Reply(text=("<!everyone> @here word " * 6000), sources=sources, title="Recap")
    msgs = render_blocks(reply)
    assert len(msgs) > 1
    for m in msgs:
        assert len(m.blocks) <= 50
        for b in m.blocks:
            if b["type"] == "section":
                assert len(b["text"]["text"]) <= 3000
        body = json.dumps(m.blocks)
        assert "<!everyone>" not in body and "@here" not in body


async def test_rate_limiter_spaces_messages_per_channel():
    now = [0.0]
    slept: list[float] = []

    async def sleep(d: float) -> None:
        slept.append(d)
        now[0] += d

    lim = ChannelRateLimiter(1.0, clock=lambda: now[0], sleep=sleep)
    await lim.wait("C1")
    await lim.wait("C1")
    await lim.wait("C2")  # another channel is not held back
    now[0] += 5
    await lim.wait("C1")
    assert slept == [1.0]


async def test_rate_limiter_real_time():
    lim = ChannelRateLimiter(0.2)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await asyncio.gather(lim.wait("C"), lim.wait("C"), lim.wait("C"))
    assert loop.time() - t0 >= 0.39


async def test_a_refused_bot_token_stops_the_start_with_a_clear_error(env):
    from liminalis.errors import ConfigError

    api, adapter, _ = env
    api.token_ok = False
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        await adapter.run("xapp-test")


async def test_a_dm_with_a_file_is_answered_and_an_edit_is_not(env):
    """Slack sends a message with a file as subtype "file_share": a question with a screenshot
    in a DM got no reply at all. Edits and bots' posts are still not questions."""
    api, adapter, _ = env
    await adapter.service.directory.link("slack", "D0DM", "greyhold")
    shot = {
        "id": "F9",
        "name": "map.png",
        "size": 10,
        "url_private_download": f"{api.url}/files/map.png",
    }
    await event(
        adapter,
        {
            "type": "message",
            "subtype": "message_changed",
            "channel_type": "im",
            "user": PLAYER,
            "text": "who guards the keep?",
            "channel": "D0DM",
            "ts": "3.0",
            "event_ts": "3.0",
        },
    )
    await event(
        adapter,
        {
            "type": "message",
            "subtype": "file_share",
            "channel_type": "im",
            "user": PLAYER,
            "text": "who guards the keep?",
            "channel": "D0DM",
            "ts": "3.1",
            "event_ts": "3.1",
            "files": [shot],
        },
    )
    (post,) = await api.wait_for("chat.postMessage")
    assert post.args["channel"] == "D0DM" and post.args["thread_ts"] == "3.1"
    assert not api.find("/files/map.png")  # a player's file is never downloaded
    await api.wait_quiet()
    assert len(api.find("chat.postMessage")) == 1  # the edit got no answer


async def test_upload_by_slash_command_says_how_to_upload_on_slack(env):
    """A Slack slash command cannot carry a file: "attach files to /upload" was a dead end."""
    api, adapter, _ = env
    await command(adapter, api, "/upload", "", user=SLACK_GM)
    assert "@Liminalis /upload" in dump((await api.wait_for("/respond/upload"))[0])


async def test_the_app_answers_one_namespaced_command_and_no_other(env):
    """The app registers `/lore` only, so it squats on no `/ask` or `/help` of the workspace;
    `/lore <question>` is an ask, `/lore gm upload` and `/lore upload` the same command."""
    api, adapter, _ = env
    await command(adapter, api, "/lore", "Who rules Greyhold keep?", user=PLAYER)
    assert "baron" in dump((await api.wait_for("/respond/lore"))[0]).lower()
    await command(adapter, api, "/gm", "upload", user=SLACK_GM)  # "/lore gm upload"
    assert "@Liminalis /upload" in dump((await api.wait_for("/respond/gm"))[0])
    await command(adapter, api, "/help", "", user=PLAYER)
    help_text = dump((await api.wait_for("/respond/help"))[0])
    assert "/lore ask" in help_text and "/lore upload" in help_text and "`/ask" not in help_text
    body = command_body("/ask", "baron", user_id=PLAYER, response_url=f"{api.url}/respond/bare")
    req = AsyncBoltRequest(
        body=body, headers=signed_headers(body, content_type="application/x-www-form-urlencoded")
    )
    assert (await adapter.app.async_dispatch(req)).status == 404  # not the app's command
