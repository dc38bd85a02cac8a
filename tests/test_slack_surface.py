"""The Slack chat surface through slack-bolt's ``AsyncApp.async_dispatch`` with signed
requests and the local mock Web API: one `/lore` command, answers with buttons checked on press,
the 👎 form, Share with table, streamed answers updated in place, DMs, and the App Home."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import close_engine, make_engine
from fakes.slack_api import (
    BOT_USER,
    SIGNING_SECRET,
    MockSlackApi,
    action_body,
    command_body,
    event_body,
    signed_headers,
    view_submission_body,
)
from fakes.tiny_campaign import CANARY, GM_TITLE, MIREL_CANARY, SLACK_GM, make_tiny_campaign
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.presses import REFUSED
from bot.service import BotService
from bot.slack_adapter import ChannelRateLimiter, SlackAdapter
from bot.slack_adapter._render import (
    HOME_BLOCKS_LIMIT,
    SECTION_LIMIT,
    HomeEntry,
    render_blocks,
    render_home,
)
from liminalis.answer import Responder, Source
from liminalis.testing import ScriptedModel

PLAYER = "UPLAYER01"
CHANNEL = "C0TABLE"
FORM = "application/x-www-form-urlencoded"
HIDDEN = "the baron pawned the river tower to the drowned court"


class Ticks:
    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


@pytest.fixture
async def env(tmp_path):
    api = MockSlackApi()
    await api.start()
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    service = BotService(engine)
    await service.directory.link("slack", CHANNEL, "greyhold")
    adapter = SlackAdapter(
        service,
        client=AsyncWebClient(token="xoxb-test", base_url=api.api_url),
        signing_secret=SIGNING_SECRET,
        limiter=ChannelRateLimiter(interval=0.0),
    )
    yield api, adapter, service
    await close_engine(engine)
    await api.close()


async def dispatch(adapter: SlackAdapter, body: str, content_type: str = FORM) -> int:
    req = AsyncBoltRequest(body=body, headers=signed_headers(body, content_type=content_type))
    return (await adapter.app.async_dispatch(req)).status


async def lore(
    adapter, api, text: str, *, user: str, tag: str, channel: str = CHANNEL, **kw: str
) -> dict:
    body = command_body(
        "/lore",
        text,
        user_id=user,
        channel_id=channel,
        response_url=f"{api.url}/respond/{tag}",
        **kw,
    )
    assert await dispatch(adapter, body) == 200
    return (await api.wait_for(f"/respond/{tag}"))[0].args


async def press(adapter, api, action_id: str, *, user: str, tag: str, **kw) -> None:
    body = action_body(action_id, user_id=user, response_url=f"{api.url}/respond/{tag}", **kw)
    assert await dispatch(adapter, body) == 200


def buttons(args: dict) -> dict[str, str]:
    blocks = args["blocks"] if isinstance(args["blocks"], list) else json.loads(args["blocks"])
    return {
        e["text"]["text"]: e["action_id"]
        for b in blocks
        if b["type"] == "actions"
        for e in b["elements"]
    }


def dump(args: dict) -> str:
    return json.dumps(args, ensure_ascii=False)


async def test_an_answer_carries_its_question_and_buttons_checked_on_press(env):
    api, adapter, _ = env
    player = await lore(adapter, api, "ask Who rules Greyhold keep?", user=PLAYER, tag="p")
    assert player["response_type"] == "in_channel"
    assert "❓ Who rules Greyhold keep?" in dump(player)
    assert set(buttons(player)) == {"Sources", "Open document", "👍", "👎"}
    await press(adapter, api, buttons(player)["Sources"], user=PLAYER, tag="src")
    (shown,) = [c.args for c in await api.wait_for("/respond/src")]
    assert shown["response_type"] == "ephemeral" and shown["replace_original"] is False
    assert "Baron Aldric" in dump(shown) and "river tower" in dump(shown)
    gm = await lore(adapter, api, "ask What is the truth about the baron?", user=SLACK_GM, tag="g")
    assert gm["response_type"] == "ephemeral" and CANARY in dump(gm)
    assert "Share with table" in buttons(gm)
    for i, cid in enumerate(buttons(gm).values()):
        await press(adapter, api, cid, user=PLAYER, tag=f"x{i}")
        (refused,) = [c.args for c in await api.wait_for(f"/respond/x{i}")]
        assert REFUSED in dump(refused) and CANARY not in dump(refused)
        assert refused["response_type"] == "ephemeral"
    assert not api.find("views.open")  # a refused 👎 opens no form


async def test_a_page_turn_replaces_a_public_answer_only_through_the_answers_own_view(
    env, tmp_path
):
    """A ``docp`` press pressed — or forged — on a players' answer by the GM or a member with a
    personal view reads the page through that wider view: it goes to the presser alone and
    never replaces the message the channel sees."""
    api, adapter, service = env
    baron = tmp_path / "campaigns" / "greyhold" / "baron.md"
    baron.write_text(baron.read_text() + f"\n<!-- GM: {HIDDEN} -->\n", encoding="utf-8")
    await service.engine.ingest("greyhold")
    player = await lore(adapter, api, "ask Who rules Greyhold keep?", user=PLAYER, tag="p")
    assert player["response_type"] == "in_channel" and HIDDEN not in dump(player)
    card = buttons(player)["Open document"].split(":")[2]
    forged = f"lm:docp:{card}:0:1"
    for who in (SLACK_GM, "UMIREL01"):
        await press(adapter, api, forged, user=who, tag=who)
        (page,) = [c.args for c in await api.wait_for(f"/respond/{who}")]
        assert page["replace_original"] is False and page["response_type"] == "ephemeral"
        assert "Baron Aldric" in dump(page)
        assert (HIDDEN in dump(page)) == (who == SLACK_GM)  # the GM's own view, privately
    await press(adapter, api, forged, user=PLAYER, tag="turn")
    (page,) = [c.args for c in await api.wait_for("/respond/turn")]
    assert page["replace_original"] is True and HIDDEN not in dump(page)


async def test_a_thumbs_down_asks_why_in_a_form_and_keeps_it_with_the_answer(env):
    api, adapter, service = env
    player = await lore(adapter, api, "Who rules Greyhold keep?", user=PLAYER, tag="p")
    await press(adapter, api, buttons(player)["👎"], user=PLAYER, tag="down")
    (opened,) = [c.args for c in await api.wait_for("views.open")]
    view = json.loads(opened["view"]) if isinstance(opened["view"], str) else opened["view"]
    assert view["type"] == "modal" and view["callback_id"].startswith("lm:why:")
    assert view["blocks"][0]["element"]["type"] == "plain_text_input"
    body = view_submission_body(
        view["callback_id"], "wrong baron", user_id=PLAYER, metadata=view["private_metadata"]
    )
    assert await dispatch(adapter, body) == 200
    (thanks,) = [c.args for c in await api.wait_for("chat.postEphemeral")]
    assert thanks["user"] == PLAYER and thanks["channel"] == CHANNEL and "Thanks" in dump(thanks)
    (vote,) = await service.cards.feedback("greyhold")
    assert (vote.vote, vote.reason, vote.question) == (
        -1,
        "wrong baron",
        "Who rules Greyhold keep?",
    )


async def test_share_with_table_posts_the_players_answer_never_the_gms(env):
    api, adapter, _ = env
    gm = await lore(adapter, api, "ask What is the truth about the baron?", user=SLACK_GM, tag="g")
    await press(adapter, api, buttons(gm)["Share with table"], user=SLACK_GM, tag="share")
    (post,) = [c.args for c in await api.wait_for("chat.postMessage")]
    assert post["channel"] == CHANNEL
    shared = dump(post)
    assert CANARY not in shared and GM_TITLE not in shared
    assert "What is the truth about the baron?" in shared and "What every player can see" in shared
    await api.wait_quiet()
    assert not api.find("/respond/share") and len(api.find("chat.postMessage")) == 1


async def test_a_streamed_public_answer_is_updated_in_place_and_ends_whole(env):
    api, adapter, service = env
    reply = "The baron rules Greyhold keep from the river tower [Baron Aldric]. " * 8
    service.engine.use_answerer(Responder(service.engine, model=ScriptedModel([reply])))
    adapter.clock = Ticks(0.3)
    body = command_body(
        "/lore", "ask Who rules?", user_id=PLAYER, response_url=f"{api.url}/respond/s"
    )
    assert await dispatch(adapter, body) == 200
    for _ in range(250):
        updates = api.find("chat.update")
        if updates and "Sources" in dump(updates[-1].args):
            break
        await asyncio.sleep(0.02)
    (posted,) = api.find("chat.postMessage")
    updates = [c.args for c in api.find("chat.update")]
    assert len(updates) >= 2 and len(updates) < len(reply) // 40  # throttled
    assert len({u["ts"] for u in updates}) == 1  # one message, updated
    final = updates[-1]
    assert "▌" not in dump(final) and "Sources" in dump(final) and "Baron Aldric" in dump(final)
    assert "❓ Who rules?" in dump(final) and "Sources" in buttons(final)
    assert reply.split(" [")[0] in dump(final)
    await api.wait_quiet()
    assert not api.find("/respond/s")  # one message: the streamed one


async def test_search_and_show_page_in_place(env, tmp_path):
    api, adapter, service = env
    root = tmp_path / "campaigns" / "greyhold"
    for i in range(12):
        (root / f"bell-{i:02}.md").write_text(f"# Bell {i}\n\nThe silver bell {i} rang.\n")
    await service.engine.ingest("greyhold")
    found = await lore(adapter, api, "search silver bell", user=PLAYER, tag="s")
    assert "Page 1 of 2" in dump(found) and "Bell" in dump(found)
    await press(adapter, api, buttons(found)["Next ▶"], user=PLAYER, tag="next")
    (page,) = [c.args for c in await api.wait_for("/respond/next")]
    assert page["replace_original"] is True and "Page 2 of 2" in dump(page)
    shown = await lore(adapter, api, "show Baron Aldric", user=PLAYER, tag="show")
    assert "river tower" in dump(shown) and shown["response_type"] == "in_channel"


async def test_a_dm_is_answered_for_the_members_campaign_or_asks_which(env, tmp_path):
    api, adapter, service = env

    async def dm(text: str, user: str, ts: str) -> dict:
        n = len(api.find("chat.postMessage"))
        event = {
            "type": "message",
            "channel_type": "im",
            "user": user,
            "text": text,
            "channel": f"D{user}",
            "ts": ts,
            "event_ts": ts,
        }
        assert await dispatch(adapter, event_body(event), "application/json") == 200
        return (await api.wait_for("chat.postMessage", n + 1))[n].args

    api.channel_members[CHANNEL] = [PLAYER, SLACK_GM, BOT_USER]
    refused = await dm("who rules the keep?", "USTRANGER", "1.1")  # in no linked channel
    assert "ask in your campaign's channel" in dump(refused)
    answered = await dm("what is the truth about the baron?", PLAYER, "2.1")
    assert "Greyhold" in dump(answered) and CANARY not in dump(answered)
    gm = await dm("what is the truth about the baron?", SLACK_GM, "3.1")
    assert CANARY in dump(gm)  # the GM's view at their table, in their own DM
    # a GM removed from campaign.toml is a player in their DM at once (nothing cached)
    toml = tmp_path / "campaigns" / "greyhold" / "campaign.toml"
    original = toml.read_text()
    toml.write_text(original.replace(f'gm_users = ["{SLACK_GM}"]', "gm_users = []"))
    demoted = await dm("what is the truth about the baron?", SLACK_GM, "3.2")
    assert "baron" in dump(demoted).lower() and CANARY not in dump(demoted)
    toml.write_text(original)
    salt = make_tiny_campaign(tmp_path / "campaigns", slug="saltmarsh")
    toml = salt / "campaign.toml"
    toml.write_text(toml.read_text().replace('name = "Greyhold"', 'name = "Saltmarsh"'))
    await service.engine.ingest("saltmarsh")
    await service.directory.link("slack", "C0SALT", "saltmarsh")
    api.channel_members["C0SALT"] = ["UBOTH001"]
    api.channel_members[CHANNEL].append("UBOTH001")
    adapter.clock = lambda: 1e9  # later: the channels' members are looked up again
    asked = await dm("who rules the keep?", "UBOTH001", "4.1")
    picks = buttons(asked)
    assert "Which one" in dump(asked) and set(picks) == {"Greyhold", "Saltmarsh"}
    await press(
        adapter, api, picks["Saltmarsh"], user="UBOTH001", tag="pick", channel_id="DUBOTH001"
    )
    (answer,) = [c.args for c in await api.wait_for("/respond/pick")]
    assert answer["replace_original"] is True and "Saltmarsh" in dump(answer)


async def test_a_private_answer_in_a_conversation_between_people_goes_to_its_asker_alone(env):
    """Only a member's own DM with the app is private. In a DM between two people, or a group
    DM, a GM's or a personal view's answer is ephemeral, never posted for the conversation."""
    api, adapter, service = env
    api.channel_members[CHANNEL] = [PLAYER, SLACK_GM, "UMIREL01", BOT_USER]
    people = "D0PEOPLE1"  # the GM's DM with a player (the app's own DM with a member: D<user>)
    asked = {
        "ask": "ask What is the truth about the baron?",
        "show": f"show {GM_TITLE}",
        "search": "search baron",
        "entity": "entity Baron Aldric",
    }
    for tag, text in asked.items():
        reply = await lore(adapter, api, text, user=SLACK_GM, tag=f"dm-{tag}", channel=people)
        assert reply["response_type"] == "ephemeral", text
        assert not api.find("chat.postMessage"), text  # nor streamed into the conversation
    assert CANARY in dump((await api.wait_for("/respond/dm-ask"))[0].args)
    bell = "ask Who took the baron's ninth bell?"
    mirel = await lore(adapter, api, bell, user="UMIREL01", tag="mirel", channel=people)
    assert mirel["response_type"] == "ephemeral" and MIREL_CANARY in dump(mirel)
    player = await lore(adapter, api, bell, user=PLAYER, tag="player", channel=people)
    assert player["response_type"] == "in_channel" and MIREL_CANARY not in dump(player)
    # a group DM linked to the campaign: a GM's answer is theirs alone there too
    await service.directory.link("slack", "G0GROUP1", "greyhold")
    group = await lore(
        adapter,
        api,
        asked["ask"],
        user=SLACK_GM,
        tag="group",
        channel="G0GROUP1",
        channel_name="mpdm-ugm00001--uplayer01-1",
    )
    assert group["response_type"] == "ephemeral" and CANARY in dump(group)
    # the GM's own DM with the app: nobody else reads it, so the answer is a plain message
    own = await lore(adapter, api, asked["ask"], user=SLACK_GM, tag="own", channel=f"D{SLACK_GM}")
    assert own["response_type"] == "in_channel" and CANARY in dump(own)


async def test_the_home_tab_shows_campaigns_views_recaps_and_quick_actions(env):
    api, adapter, _ = env
    api.channel_members[CHANNEL] = [PLAYER, SLACK_GM]
    event = {"type": "app_home_opened", "user": PLAYER, "channel": "DHOME01", "tab": "home"}
    assert await dispatch(adapter, event_body(event), "application/json") == 200
    (published,) = [c.args for c in await api.wait_for("views.publish")]
    view = (
        json.loads(published["view"]) if isinstance(published["view"], str) else published["view"]
    )
    assert published["user_id"] == PLAYER and view["type"] == "home"
    text = json.dumps(view)
    assert "Greyhold" in text and "What every player can see" in text and "GM view" not in text
    assert len(view["blocks"]) <= HOME_BLOCKS_LIMIT
    quick = buttons({"blocks": view["blocks"]})
    assert set(quick) == {"Ask a question", "Previously on…"}
    # Previously on…: the recap comes to the member's DM with the app
    await press(adapter, api, quick["Previously on…"], user=PLAYER, tag="h", home_dm="DHOME01")
    (recap,) = [c.args for c in await api.wait_for("chat.postMessage")]
    assert recap["channel"] == "DHOME01" and "Previously on Greyhold" in dump(recap)
    # Ask a question: a form, then the answer in the DM
    await press(adapter, api, quick["Ask a question"], user=PLAYER, tag="h2", home_dm="DHOME01")
    (opened,) = [c.args for c in await api.wait_for("views.open")]
    form = json.loads(opened["view"]) if isinstance(opened["view"], str) else opened["view"]
    body = view_submission_body(
        form["callback_id"],
        "Who rules Greyhold keep?",
        user_id=PLAYER,
        metadata=form["private_metadata"],
    )
    assert await dispatch(adapter, body) == 200
    answer = (await api.wait_for("chat.postMessage", 2))[1].args
    assert answer["channel"] == "DHOME01" and "baron" in dump(answer).lower()
    # a stranger's press of a campaign's quick action is refused
    await press(adapter, api, quick["Previously on…"], user="USTRANGER", tag="h3", home_dm="DX")
    refused = (await api.wait_for("chat.postMessage", 3))[2].args
    assert REFUSED in dump(refused) and refused["channel"] == "DX"
    # the GM's home says so
    event = {"type": "app_home_opened", "user": SLACK_GM, "channel": "DHOME02", "tab": "home"}
    await dispatch(adapter, event_body(event), "application/json")
    gm_view = (await api.wait_for("views.publish", 2))[1].args["view"]
    assert "GM view" in (gm_view if isinstance(gm_view, str) else json.dumps(gm_view))


def test_the_home_tab_and_messages_stay_within_block_kit_limits():
    entries = [
        HomeEntry(f"c{i}", "N" * 500, "What you can see: " + "x" * 4000, "R" * 5000)
        for i in range(40)
    ]
    for view in (render_home(entries), render_home([])):
        assert len(view["blocks"]) <= HOME_BLOCKS_LIMIT
        assert len(json.dumps(view)) < 250_000
        for block in view["blocks"]:
            if block["type"] == "section":
                assert len(block["text"]["text"]) <= SECTION_LIMIT
            if block["type"] == "actions":
                assert len(block["elements"]) <= 25
                assert all(len(e["text"]["text"]) <= 75 for e in block["elements"])
    from bot.messages import Action, Reply

    sources = tuple(Source(f"d{i}", f"Doc {i}") for i in range(300))
    actions = tuple(Action(f"Button {i} " + "b" * 90, f"lm:up:{i}") for i in range(30))
    messages = render_blocks(
        Reply(
            text="word " * 30000, sources=sources, title="T", question="q" * 5000, actions=actions
        )
    )
    assert all(len(m.blocks) <= 50 for m in messages)
    last = messages[-1].blocks[-1]
    assert last["type"] == "actions" and len(last["elements"]) == 25
    assert all(len(e["text"]["text"]) <= 75 for e in last["elements"])


def test_the_manifest_declares_what_the_adapter_listens_to():
    """One slash command (the adapter's), interactivity for the buttons and forms, the Home tab
    and its event, and the scopes the DM lookup needs."""
    from pathlib import Path

    import yaml

    from bot.slack_adapter._adapter import COMMAND

    manifest = yaml.safe_load((Path(__file__).parent.parent / "slack_manifest.yaml").read_text())
    features, settings = manifest["features"], manifest["settings"]
    assert [c["command"] for c in features["slash_commands"]] == [COMMAND]
    assert all(len(c["description"]) <= 100 for c in features["slash_commands"])
    assert settings["interactivity"]["is_enabled"] is True
    assert features["app_home"]["home_tab_enabled"] is True
    assert {"app_home_opened", "app_mention", "message.im"} <= set(
        settings["event_subscriptions"]["bot_events"]
    )
    assert {"channels:read", "groups:read", "chat:write", "commands"} <= set(
        manifest["oauth_config"]["scopes"]["bot"]
    )
