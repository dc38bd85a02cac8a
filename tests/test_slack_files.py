"""Slack gets the map's picture and streams a mention's answer in its thread, through
slack-bolt's ``AsyncApp.async_dispatch``, the real ``slack_sdk`` client (``files_upload_v2``)
and the local mock Web API; the answer's model is the real Anthropic client against the local
Messages API. A private reply's picture goes to the member's DM with the app, never the
channel."""

from __future__ import annotations

import asyncio
import json
import re
import shutil

import pytest
from conftest import SAMPLE, close_engine, make_engine
from fakes.anthropic_server import FakeAnthropic
from fakes.slack_api import BOT_USER, SIGNING_SECRET, MockSlackApi, event_body
from fakes.tiny_campaign import SLACK_GM, make_tiny_campaign
from slack_sdk.web.async_client import AsyncWebClient
from test_knowledge_wiring import console, wire
from test_slack_surface import CHANNEL, PLAYER, dispatch, dump, lore

from bot.service import BotService
from bot.slack_adapter import ChannelRateLimiter, SlackAdapter
from bot.slack_adapter._render import DM_FILES_NOTE, FILES_NOTE
from bot.streaming import EDIT_INTERVAL_S
from liminalis.adapters.anthropic import AnthropicModel
from liminalis.answer import Responder

SLUG = "emberfall"
PNG = b"\x89PNG\r\n\x1a\n"
_NAME = re.compile(r"^- (.+?) —[a-z-]+→ (.+)$", re.MULTILINE)


def adapter_for(service: BotService, api: MockSlackApi) -> SlackAdapter:
    return SlackAdapter(
        service,
        client=AsyncWebClient(token="xoxb-test", base_url=api.api_url),
        signing_secret=SIGNING_SECRET,
        limiter=ChannelRateLimiter(interval=0.0),
    )


@pytest.fixture(scope="module")
async def mapped(tmp_path_factory):
    """The sample campaign with its knowledge passes run, a Slack GM, linked to ``CHANNEL``."""
    tmp = tmp_path_factory.mktemp("slackmap")
    root = tmp / "campaigns" / SLUG
    shutil.copytree(SAMPLE, root)
    toml = root / "campaign.toml"
    text = toml.read_text()
    toml.write_text(
        text.replace("[roles.slack]\ngm_users = []", f'[roles.slack]\ngm_users = ["{SLACK_GM}"]')
    )
    engine = await make_engine(tmp, milvus=False)
    passes, _ = await wire(engine)
    await engine.ingest(SLUG)
    await passes.idle()
    service = BotService(engine)
    await service.directory.link("slack", CHANNEL, SLUG)
    yield service
    await passes.close()
    await close_engine(engine)


@pytest.fixture
async def api():
    server = MockSlackApi()
    await server.start()
    yield server
    await server.close()


def names(text: str) -> set[str]:
    return {n.strip() for pair in _NAME.findall(text) for n in pair}


def public_payloads(api: MockSlackApi) -> str:
    """Everything sent where more than the asker can see: no ephemeral reply, nothing to a DM,
    no file's bytes before a share says where they go."""
    out = []
    for c in api.calls:
        args = c.args
        private = (
            "chat.postEphemeral" in c.path
            or args.get("response_type") == "ephemeral"
            or str(args.get("channel_id") or args.get("channel") or "").startswith("D")
            or c.path.startswith("/upload/")
            or "files.getUploadURLExternal" in c.path  # a name, not yet shared anywhere
            or "conversations.open" in c.path
        )
        if not private:
            out.append(dump(args))
    return "\n".join(out)


async def test_a_players_map_in_a_channel_is_posted_with_its_picture(mapped, api):
    adapter = adapter_for(mapped, api)
    reply = await lore(adapter, api, "map", user=PLAYER, tag="m")
    assert reply["response_type"] == "in_channel" and "relations" in dump(reply)
    assert FILES_NOTE[:30] not in dump(reply)  # the picture follows, in the same channel
    (complete,) = await api.wait_for("files.completeUploadExternal")
    assert complete.args["channel_id"] == CHANNEL
    (shared,) = api.shared
    assert shared.channel == CHANNEL and shared.thread_ts is None
    assert shared.data.startswith(PNG) and shared.title.endswith(".png")
    (url,) = api.find("files.getUploadURLExternal")
    assert int(url.args["length"]) == len(shared.data)
    assert not api.find("conversations.open")


async def test_a_players_map_asked_in_a_thread_lands_in_that_thread(mapped, api):
    adapter = adapter_for(mapped, api)
    event = {
        "type": "app_mention",
        "user": PLAYER,
        "text": f"<@{BOT_USER}> /map Vessa",
        "channel": CHANNEL,
        "ts": "1700000002.000200",
        "thread_ts": "1700000001.000100",
        "event_ts": "1700000002.000200",
    }
    assert await dispatch(adapter, event_body(event), "application/json") == 200
    await api.wait_for("files.completeUploadExternal")
    (post,) = api.find("chat.postMessage")
    assert post.args["thread_ts"] == "1700000001.000100" and "Vessa" in dump(post.args)
    (shared,) = api.shared
    assert (shared.channel, shared.thread_ts) == (CHANNEL, "1700000001.000100")
    assert shared.data.startswith(PNG)


async def test_a_gms_map_in_a_shared_channel_goes_to_the_gms_dm_never_the_channel(mapped, api):
    adapter = adapter_for(mapped, api)
    players_map = (await mapped.handle(console("/map"))).text
    gm = await lore(adapter, api, "map", user=SLACK_GM, tag="g")
    assert gm["response_type"] == "ephemeral" and DM_FILES_NOTE in dump(gm)
    blocks = gm["blocks"] if isinstance(gm["blocks"], list) else json.loads(gm["blocks"])
    said = "\n".join(b["text"]["text"] for b in blocks if b["type"] == "section")
    hidden = names(said) - names(players_map)
    assert hidden, "the GM's map shows names no player sees (the canary)"
    # and by @-mention in a thread: the words privately, the picture in the DM again
    event = {
        "type": "app_mention",
        "user": SLACK_GM,
        "text": f"<@{BOT_USER}> /map",
        "channel": CHANNEL,
        "ts": "1700000003.000300",
        "event_ts": "1700000003.000300",
    }
    assert await dispatch(adapter, event_body(event), "application/json") == 200
    await api.wait_for("chat.postEphemeral")
    for _ in range(250):
        if len(api.shared) == 2:
            break
        await asyncio.sleep(0.02)
    (opened,) = api.find("conversations.open")  # the app's DM with a member is looked up once
    assert opened.args["users"] == SLACK_GM
    assert [(s.channel, s.thread_ts) for s in api.shared] == [(f"D{SLACK_GM}", None)] * 2
    assert all(s.data.startswith(PNG) for s in api.shared)
    assert not api.find("chat.postMessage")
    public = public_payloads(api)
    leaked = [n for n in hidden if n in public]
    assert not leaked, leaked


async def test_without_a_dm_a_gms_map_stays_words_only(mapped, api):
    api.dm_ok = False
    adapter = adapter_for(mapped, api)
    gm = await lore(adapter, api, "map", user=SLACK_GM, tag="g")
    assert gm["response_type"] == "ephemeral" and "here it is in words" in dump(gm)
    assert not api.shared and not api.find("files.completeUploadExternal")


async def test_a_refused_upload_leaves_the_public_answer_standing(mapped, api):
    api.no_uploads.add(CHANNEL)  # the app is not in the channel
    adapter = adapter_for(mapped, api)
    reply = await lore(adapter, api, "map", user=PLAYER, tag="m")
    assert reply["response_type"] == "in_channel"
    await api.wait_for("files.completeUploadExternal")
    assert not api.shared


# -- a mention's answer streamed in its thread ---------------------------------------------------


class Ticks:
    """A clock that moves ``step`` each time it is read; keeps every reading."""

    def __init__(self, step: float) -> None:
        self.t, self.step, self.read = 0.0, step, []

    def __call__(self) -> float:
        self.t += self.step
        self.read.append(self.t)
        return self.t


def throttled(readings: list[float], interval: float) -> int:
    """How many edits ``StreamedEdits`` makes for these clock readings."""
    edits, last = 0, None
    for t in readings:
        if last is None or t - last >= interval:
            edits, last = edits + 1, t
    return edits


async def test_a_mention_in_a_thread_streams_its_answer_in_place_and_ends_whole(tmp_path, api):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        service = BotService(engine)
        await service.directory.link("slack", CHANNEL, "greyhold")
        adapter = adapter_for(service, api)
        adapter.clock = clock = Ticks(0.3)
        reply = "The baron rules Greyhold keep from the river tower [Baron Aldric]. " * 6
        async with FakeAnthropic(reply=reply) as fake:
            async with AnthropicModel(
                "sk-test", base_url=fake.url, models={"reply": "claude-test"}
            ) as model:
                service.engine.use_answerer(Responder(service.engine, model=model))
                event = {
                    "type": "app_mention",
                    "user": PLAYER,
                    "text": f"<@{BOT_USER}> Who rules Greyhold keep?",
                    "channel": CHANNEL,
                    "ts": "1700000005.000500",
                    "thread_ts": "1700000004.000400",
                    "event_ts": "1700000005.000500",
                }
                assert await dispatch(adapter, event_body(event), "application/json") == 200
                for _ in range(500):  # a hang guard, not a threshold
                    updates = api.find("chat.update")
                    if updates and "Sources" in dump(updates[-1].args):
                        break
                    await asyncio.sleep(0.02)
            assert fake.requests and fake.requests[-1]["body"].get("stream") is True
    finally:
        await close_engine(engine)
    (posted,) = api.find("chat.postMessage")
    assert posted.args["thread_ts"] == "1700000004.000400" and posted.args["channel"] == CHANNEL
    assert "▌" in dump(posted.args)
    updates = [c.args for c in api.find("chat.update")]
    # the post and each in-stream update at the injected clock's rate, then the whole answer
    shown = throttled(clock.read, EDIT_INTERVAL_S)
    assert 1 + (len(updates) - 1) == shown and len(clock.read) > shown > 2
    assert len({u["ts"] for u in updates}) == 1  # one message, updated in place
    final = updates[-1]
    assert "▌" not in dump(final) and "Sources" in dump(final) and "Baron Aldric" in dump(final)
    assert reply.split(" [")[0] in dump(final)
    await api.wait_quiet()
    assert len(api.find("chat.postMessage")) == 1 and not api.find("chat.postEphemeral")


async def test_a_players_timeline_is_uploaded_and_holds_no_gm_only_event(mapped, api):
    from test_timeline import png_text

    adapter = adapter_for(mapped, api)
    reply = await lore(adapter, api, "timeline", user=PLAYER, tag="t")
    assert reply["response_type"] == "in_channel" and "Sessions (7)" in dump(reply)
    await api.wait_for("files.completeUploadExternal")
    (shared,) = api.shared
    assert shared.data.startswith(PNG) and shared.title == "emberfall-timeline.png"
    labels = png_text(shared.data)["Description"]
    assert "Session 7" in labels and "19 Highsun 524" in labels
    # Dated only in GM material (gm/, a hidden section): neither drawn nor listed.
    for secret in ("Guildmaster Hale", "winter of 518", "walked into the Vell"):
        assert secret not in labels and secret not in dump(reply)
    gm = await lore(adapter, api, "timeline", user=SLACK_GM, tag="g")
    assert "Guildmaster Hale" in dump(gm)  # the GM's timeline has them, privately
