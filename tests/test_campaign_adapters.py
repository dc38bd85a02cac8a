"""Campaigns without a shell and private GM uploads through the real platform
clients: discord.py against the local fake REST API (a server manager's `/campaign create`, the
slug autocomplete, a GM picked with Discord's mentionable option, a DM with files), and
slack-bolt against the local mock Web API (a workspace admin's `/campaign create`, DM uploads)."""

from __future__ import annotations

import json

import discord
import pytest
from conftest import Tags, close_engine, make_engine
from fakes.discord_api import (
    CHANNEL_ID,
    GUILD_ID,
    MANAGER_PERMISSIONS,
    ROGUE_CHANNEL_ID,
    ROGUE_GM_ROLE_ID,
    ROGUE_GUILD_ID,
    FakeDiscordApi,
    guild_payload,
    interaction_payload,
    member_payload,
    message_payload,
    rogue_guild_payload,
    role_payload,
    user_payload,
)
from fakes.slack_api import (
    SIGNING_SECRET,
    MockSlackApi,
    command_body,
    event_body,
    signed_headers,
)
from fakes.tiny_campaign import SLACK_GM, make_tiny_campaign
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient
from test_discord_adapter import grouped

from bot.discord_adapter import DiscordAdapter
from bot.service import BotService
from bot.slack_adapter import ChannelRateLimiter, SlackAdapter
from liminalis.lens import PLAYERS

OWNER = 333  # manages the Discord server
PLAYER = 222
NOTES = (
    b"---\ntitle: The Ferry\nvisibility: players\n---\n# The Ferry\n\nOld Maren keeps the ferry.\n"
)


def all_text(body) -> str:
    return json.dumps(body, ensure_ascii=False)


def followups(api: FakeDiscordApi) -> list[dict]:
    return [c.json for c in api.find("POST", "/webhooks/") if isinstance(c.json, dict)]


def opts(**values) -> list[dict]:
    return [{"name": k, "type": 3, "value": v} for k, v in values.items()]


async def invoke(adapter: DiscordAdapter, payload: dict) -> None:
    interaction = discord.Interaction(data=grouped(payload), state=adapter.client._connection)
    await adapter.tree._call(interaction)


@pytest.fixture
async def discord_env(tmp_path, monkeypatch):
    """A fresh data directory (no campaign) behind the real discord.py client."""
    api = FakeDiscordApi()
    url = await api.start()
    monkeypatch.setattr(discord.http.Route, "BASE", f"{url}/api/v10")
    engine = await make_engine(
        tmp_path, milvus=False, created_campaigns_dir=tmp_path / "data" / "campaigns"
    )
    service = BotService(engine, slug_tag=Tags())
    adapter = DiscordAdapter(service, guild_ids=(123,))
    await adapter.client.login("fake-token")
    adapter.client._connection._add_guild_from_data(guild_payload())
    yield api, adapter, service
    await adapter.client.close()
    await close_engine(engine)
    await api.close()


async def test_a_server_manager_creates_a_campaign_from_discord(discord_env, tmp_path):
    api, adapter, service = discord_env
    create = opts(action="create", name="The Salt Road")
    await invoke(adapter, interaction_payload("campaign", create, user_id=PLAYER, iid=1))
    refused = followups(api)[-1]
    assert refused["flags"] & 64 and "Manage Server" in refused["content"]
    assert f"your Discord user id is `{PLAYER}`" in refused["content"]
    assert await service.engine.list_campaigns() == []
    await invoke(
        adapter,
        interaction_payload(
            "campaign", create, user_id=OWNER, permissions=MANAGER_PERMISSIONS, iid=2
        ),
    )
    made = followups(api)[-1]
    assert made["flags"] & 64 and "Created **The Salt Road**" in made["content"]
    assert await service.directory.campaign_for("discord", str(CHANNEL_ID)) == "the-salt-road-t1"
    assert await service.directory.homes("discord", "the-salt-road-t1") == {str(GUILD_ID)}
    cfg = await service.config("the-salt-road-t1")
    assert cfg.roles.discord_gm_users == (str(OWNER),)
    assert cfg.root == tmp_path / "data" / "campaigns" / "the-salt-road-t1"
    # the channel answers at once: not "not linked", but "nothing indexed yet, /upload"
    question = [{"name": "question", "type": 3, "value": "Who keeps the ferry?"}]
    await invoke(adapter, interaction_payload("ask", question, user_id=PLAYER, iid=3))
    assert "no indexed documents yet" in all_text(followups(api)[-1])


async def test_link_autocompletes_a_gms_own_campaigns_only(discord_env):
    api, adapter, service = discord_env
    await invoke(
        adapter,
        interaction_payload(
            "campaign",
            opts(action="create", name="Salt Road"),
            user_id=OWNER,
            permissions=MANAGER_PERMISSIONS,
            iid=1,
        ),
    )
    typing = [
        {"name": "action", "type": 3, "value": "link"},
        {"name": "slug", "type": 3, "value": "sa", "focused": True},
    ]
    for iid, who in ((2, OWNER), (3, PLAYER)):
        await invoke(
            adapter,
            interaction_payload("campaign", typing, user_id=who, autocomplete=True, iid=iid),
        )
    owner_cb, player_cb = [c.json for c in api.find("POST", "/callback") if c.json["type"] == 8]
    assert [c["value"] for c in owner_cb["data"]["choices"]] == ["salt-road-t1"]
    assert player_cb["data"]["choices"] == []


async def test_a_gm_is_picked_with_discords_mentionable_option(discord_env):
    api, adapter, service = discord_env
    await invoke(
        adapter,
        interaction_payload(
            "campaign",
            opts(action="create", name="Salt Road"),
            user_id=OWNER,
            permissions=MANAGER_PERMISSIONS,
            iid=1,
        ),
    )
    member = member_payload(PLAYER, "player", [])
    member.pop("user")
    pick_user = [
        *opts(action="gm", change="add"),
        {"name": "member", "type": 9, "value": str(PLAYER)},
    ]
    await invoke(
        adapter,
        interaction_payload(
            "campaign",
            pick_user,
            user_id=OWNER,
            iid=2,
            resolved={
                "users": {str(PLAYER): user_payload(PLAYER, "player")},
                "members": {str(PLAYER): member},
            },
        ),
    )
    assert f"User `{PLAYER}` is a GM of **Salt Road** now." in all_text(followups(api)[-1])
    role_id = 600000000000000042
    pick_role = [
        *opts(action="gm", change="add"),
        {"name": "member", "type": 9, "value": str(role_id)},
    ]
    await invoke(
        adapter,
        interaction_payload(
            "campaign",
            pick_role,
            user_id=PLAYER,  # a GM now: by user id
            iid=3,
            resolved={"roles": {str(role_id): role_payload(role_id, "Co-GMs")}},
        ),
    )
    assert f"Role `{role_id}` is a GM" in all_text(followups(api)[-1])
    cfg = await service.config("salt-road-t1")
    assert cfg.roles.discord_gm_users == (str(OWNER), str(PLAYER))
    assert cfg.roles.discord_gm_role_ids == (str(role_id),)


async def test_a_channel_that_plays_a_campaign_changes_hands_only_by_its_gm_or_manager(
    discord_env,
):
    """A player who made a campaign on a server of their own cannot link the table's channel
    to it: that takes one of the table campaign's GMs, or who manages the table's server, and
    they first confirm what the channel loses (its players' campaign, the recap posted there,
    the GM role names that count on that server)."""
    api, adapter, service = discord_env
    root = make_tiny_campaign(service.engine.campaigns_dir)  # GM: user id 111, role name "GM"
    toml = root / "campaign.toml"
    toml.write_text(
        toml.read_text()
        .replace('cron = ""', 'cron = "0 18 * * 5"')
        .replace('channel = ""', f'channel = "discord:{CHANNEL_ID}"')
    )
    await service.directory.link("discord", str(CHANNEL_ID), "greyhold", guild_id=str(GUILD_ID))
    adapter.client._connection._add_guild_from_data(rogue_guild_payload())
    await invoke(
        adapter,
        interaction_payload(
            "campaign",
            opts(action="create", name="Mine"),
            user_id=PLAYER,
            guild_id=ROGUE_GUILD_ID,
            channel_id=ROGUE_CHANNEL_ID,
            permissions=MANAGER_PERMISSIONS,  # the player's own server
            iid=1,
        ),
    )
    assert "Created **Mine** (`mine-t1`)" in followups(api)[-1]["content"]
    take = opts(action="link", slug="mine-t1")
    await invoke(adapter, interaction_payload("campaign", take, user_id=PLAYER, iid=2))
    refused = followups(api)[-1]
    assert refused["flags"] & 64 and "GMs" in refused["content"], refused
    assert await service.directory.campaign_for("discord", str(CHANNEL_ID)) == "greyhold"
    assert await service.directory.homes("discord", "greyhold") == {str(GUILD_ID)}
    # the table server's manager (a GM of the other campaign) is asked to confirm first
    cfg = await service.config("mine-t1")
    path = cfg.root / "campaign.toml"
    path.write_text(path.read_text().replace(f'"{PLAYER}"', f'"{PLAYER}", "{OWNER}"'))
    manager = {"user_id": OWNER, "permissions": MANAGER_PERMISSIONS}
    await invoke(adapter, interaction_payload("campaign", take, iid=3, **manager))
    asked = followups(api)[-1]
    assert asked["flags"] & 64 and "**Greyhold**" in asked["content"], asked
    assert "0 18 * * 5" in asked["content"] and "role names" in asked["content"]
    assert "confirm" in asked["content"]
    assert await service.directory.campaign_for("discord", str(CHANNEL_ID)) == "greyhold"
    confirmed = [*take, *opts(confirm="yes")]
    await invoke(adapter, interaction_payload("campaign", confirmed, iid=4, **manager))
    assert "Linked this channel to **Mine**" in followups(api)[-1]["content"]
    assert await service.directory.campaign_for("discord", str(CHANNEL_ID)) == "mine-t1"


async def test_removing_a_co_gm_removes_the_grants_they_set_up(discord_env):
    """A co-GM who added a role id of their own and linked a channel of their own server (which
    made it a home, where a role they named "GM" counts) keeps nothing once removed: the role id
    and the link go with them, the reply names each, and status says who added each grant."""
    api, adapter, service = discord_env
    adapter.client._connection._add_guild_from_data(rogue_guild_payload())
    manager = {"user_id": OWNER, "permissions": MANAGER_PERMISSIONS}
    create = opts(action="create", name="Salt Road")
    await invoke(adapter, interaction_payload("campaign", create, iid=1, **manager))
    cfg = await service.config("salt-road-t1")
    toml = cfg.root / "campaign.toml"
    toml.write_text(toml.read_text().replace("gm = []", 'gm = ["GM"]'))  # the table's GM role
    member = member_payload(PLAYER, "player", [])
    member.pop("user")
    add_player = [
        *opts(action="gm", change="add"),
        {"name": "member", "type": 9, "value": str(PLAYER)},
    ]
    resolved = {"users": {str(PLAYER): user_payload(PLAYER, "p")}, "members": {str(PLAYER): member}}
    await invoke(
        adapter, interaction_payload("campaign", add_player, iid=2, resolved=resolved, **manager)
    )
    # the co-GM, on a server of their own: a link that makes it a home, then their role id
    rogue = {"guild_id": ROGUE_GUILD_ID, "channel_id": ROGUE_CHANNEL_ID}
    link = opts(action="link", slug="salt-road-t1")
    await invoke(adapter, interaction_payload("campaign", link, user_id=PLAYER, iid=3, **rogue))
    assert "Linked this channel" in followups(api)[-1]["content"]
    add_role = [
        *opts(action="gm", change="add"),
        {"name": "member", "type": 9, "value": str(ROGUE_GM_ROLE_ID)},
    ]
    roles = {"roles": {str(ROGUE_GM_ROLE_ID): role_payload(ROGUE_GM_ROLE_ID, "GM")}}
    await invoke(
        adapter,
        interaction_payload("campaign", add_role, user_id=PLAYER, iid=4, resolved=roles, **rogue),
    )
    assert "is a GM" in followups(api)[-1]["content"]
    status = opts(action="status")
    await invoke(adapter, interaction_payload("campaign", status, iid=5, **manager))
    shown = followups(api)[-1]["content"]
    assert f"Discord role `{ROGUE_GM_ROLE_ID}` — added by user `{PLAYER}`" in shown, shown
    assert f"`{ROGUE_GUILD_ID}`: 1 channel(s) linked by user `{PLAYER}`" in shown, shown

    async def view(user: int, iid: int) -> str:
        payload = interaction_payload(
            "view", user_id=user, roles=[ROGUE_GM_ROLE_ID], iid=iid, **rogue
        )
        await invoke(adapter, payload)
        return followups(api)[-1]["content"]

    assert "the GM view" in await view(444, 6)  # a member of their role, on their server
    remove = [
        *opts(action="gm", change="remove"),
        {"name": "member", "type": 9, "value": str(PLAYER)},
    ]
    await invoke(
        adapter, interaction_payload("campaign", remove, iid=7, resolved=resolved, **manager)
    )
    removed = followups(api)[-1]["content"]
    assert f"User `{PLAYER}` is no longer a GM" in removed, removed
    assert f"Role `{ROGUE_GM_ROLE_ID}`" in removed and f"`{ROGUE_GUILD_ID}`" in removed
    for user, iid in ((444, 8), (PLAYER, 9)):  # by the role id, or the role named "GM" there
        assert "the GM view" not in await view(user, iid)
    cfg = await service.config("salt-road-t1")
    assert cfg.roles.discord_gm_role_ids == () and cfg.roles.discord_gm_users == (str(OWNER),)
    assert await service.directory.homes("discord", "salt-road-t1") == {str(GUILD_ID)}


async def test_a_gm_uploads_by_discord_dm_and_a_players_file_is_never_fetched(
    discord_env, tmp_path
):
    api, adapter, service = discord_env
    make_tiny_campaign(service.engine.campaigns_dir)  # GM by user id "111"
    await service.engine.ingest("greyhold")
    api.files["ferry.md"] = NOTES
    state = adapter.client._connection

    def dm(user_id: int, mid: int, text: str = "") -> discord.Message:
        data = message_payload(
            text, user_id=user_id, channel_id=user_id + 1, mentions_bot=False, mid=mid
        )
        data.pop("guild_id")
        data.pop("member")
        data["attachments"] = [
            {
                "id": str(mid),
                "filename": "ferry.md",
                "size": len(NOTES),
                "url": f"{api.url}/attachments/ferry.md",
                "proxy_url": f"{api.url}/attachments/ferry.md",
                "content_type": "text/markdown",
            }
        ]
        channel, _ = state._get_guild_channel(data)
        return discord.Message(state=state, channel=channel, data=data)

    await adapter.on_message(dm(PLAYER, 1))
    refused = api.find("POST", f"/channels/{PLAYER + 1}/messages")
    assert refused and "Only a GM can upload" in all_text(refused[-1].json)
    assert f"your Discord user id is `{PLAYER}`" in all_text(refused[-1].json)
    assert not api.find("GET", "/attachments/ferry.md")  # never downloaded
    assert not (tmp_path / "uploads").exists()

    await adapter.on_message(dm(111, 2))
    posted = api.find("POST", "/channels/112/messages")
    assert posted and "Ingested 1 file(s) into **Greyhold**" in all_text(posted[-1].json)
    assert len(api.find("GET", "/attachments/ferry.md")) == 1
    titles = [t for _, t in await service.engine.titles("greyhold", frozenset({PLAYERS}))]
    assert "The Ferry" in titles  # the file's own front matter says players
    assert not api.find(
        "POST", f"/channels/{CHANNEL_ID}/messages"
    )  # nothing in the table's channel


# -- Slack -----------------------------------------------------------------------------------


@pytest.fixture
async def slack_env(tmp_path):
    api = MockSlackApi()
    await api.start()
    make_tiny_campaign(tmp_path / "campaigns")  # Slack GM by user id: SLACK_GM
    engine = await make_engine(
        tmp_path, milvus=False, created_campaigns_dir=tmp_path / "data" / "campaigns"
    )
    await engine.ingest("greyhold")
    service = BotService(engine, campaign_creators=frozenset({"UALLOWED1"}), slug_tag=Tags())
    client = AsyncWebClient(token="xoxb-test", base_url=api.api_url)
    adapter = SlackAdapter(
        service,
        client=client,
        signing_secret=SIGNING_SECRET,
        limiter=ChannelRateLimiter(interval=0),
    )
    yield api, adapter, service
    await close_engine(engine)
    await api.close()


async def slash(
    adapter: SlackAdapter, api: MockSlackApi, name: str, text: str, *, user: str, channel: str
):
    tag = text.split()[0] if name == "/lore" and text.split() else name[1:]
    body = command_body(
        name, text, user_id=user, channel_id=channel, response_url=f"{api.url}/respond/{tag}"
    )
    headers = signed_headers(body, content_type="application/x-www-form-urlencoded")
    return await adapter.app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))


async def event(adapter: SlackAdapter, ev: dict):
    body = event_body(ev)
    headers = signed_headers(body, content_type="application/json")
    return await adapter.app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))


async def test_a_workspace_admin_or_an_allowed_user_creates_a_campaign_from_slack(slack_env):
    api, adapter, service = slack_env
    api.users["UADMIN01"] = {"is_admin": True}
    api.users["UPLAYER1"] = {"is_admin": False}
    await slash(
        adapter, api, "/lore", "campaign create Salt Road", user="UPLAYER1", channel="C0NEW1"
    )
    refused = (await api.wait_for("/respond/campaign"))[-1]
    assert refused.args["response_type"] == "ephemeral"
    assert "workspace admin" in refused.args["text"] and "`UPLAYER1`" in refused.args["text"]
    await slash(
        adapter, api, "/lore", "campaign create Salt Road", user="UADMIN01", channel="C0NEW1"
    )
    made = (await api.wait_for("/respond/campaign", 2))[-1]
    assert "Created **Salt Road**" in made.args["text"], made.args
    assert await service.directory.campaign_for("slack", "C0NEW1") == "salt-road-t1"
    assert (await service.config("salt-road-t1")).roles.slack_gm_users == ("UADMIN01",)
    await slash(
        adapter, api, "/lore", "campaign create Friends", user="UALLOWED1", channel="C0NEW2"
    )
    assert "Created **Friends**" in (await api.wait_for("/respond/campaign", 3))[-1].args["text"]
    # the admin lookup is made for /campaign only, and cached
    assert len(api.find("users.info")) == 3
    await slash(adapter, api, "/lore", "view", user="UADMIN01", channel="C0NEW1")
    await api.wait_for("/respond/view")
    assert len(api.find("users.info")) == 3
    # a GM adds another by the mention Slack escapes for /campaign (should_escape)
    await slash(
        adapter,
        api,
        "/lore",
        "campaign gm add <@UPLAYER1|player>",
        user="UADMIN01",
        channel="C0NEW1",
    )
    assert (
        "User `UPLAYER1` is a GM" in (await api.wait_for("/respond/campaign", 4))[-1].args["text"]
    )


async def test_create_answers_alike_whether_a_name_is_taken_or_not(slack_env):
    """``/campaign create`` tells nobody which campaigns exist: a name another group took and a
    free one are answered alike, each with a campaign of its own (its slug tagged)."""
    api, adapter, service = slack_env
    api.users["UADMIN02"] = {"is_admin": True}
    said = {}
    for i, name in enumerate(("Greyhold", "Unclaimed")):  # greyhold: another group's campaign
        await slash(
            adapter,
            api,
            "/lore",
            f"campaign create {name}",
            user="UADMIN02",
            channel=f"C0MINE{i}",
        )
        reply = (await api.wait_for("/respond/campaign", i + 1))[-1].args
        slug = await service.directory.campaign_for("slack", f"C0MINE{i}")
        assert reply["response_type"] == "ephemeral" and slug and slug != name.lower(), reply
        assert slug.startswith(f"{name.lower()}-")
        said[name] = reply["text"].replace(name, "NAME").replace(slug, "SLUG")
    assert said["Greyhold"] == said["Unclaimed"] and "exists" not in said["Greyhold"]
    assert (await service.config("greyhold")).roles.slack_gm_users == (SLACK_GM,)


async def test_a_gm_uploads_by_slack_dm_and_a_players_file_is_refused(slack_env, tmp_path):
    api, adapter, service = slack_env
    api.files["ferry.md"] = NOTES
    f = {
        "id": "F1",
        "name": "ferry.md",
        "size": len(NOTES),
        "url_private_download": f"{api.url}/files/ferry.md",
    }

    def dm(user: str, ts: str) -> dict:
        return {
            "type": "message",
            "subtype": "file_share",
            "channel_type": "im",
            "user": user,
            "text": "",
            "channel": f"D{user}",
            "ts": ts,
            "event_ts": ts,
            "files": [f],
        }

    await event(adapter, dm("UPLAYER1", "1.1"))
    (refused,) = await api.wait_for("chat.postMessage")
    assert refused.args["channel"] == "DUPLAYER1" and "Only a GM can upload" in json.dumps(
        refused.args
    )
    assert not api.find("/files/ferry.md") and not (tmp_path / "uploads").exists()
    await event(adapter, dm(SLACK_GM, "2.1"))
    posted = await api.wait_for("chat.postMessage", 2)
    assert posted[-1].args["channel"] == f"D{SLACK_GM}"
    assert "Ingested 1 file(s) into **Greyhold**" in json.dumps(posted[-1].args, ensure_ascii=False)
    assert len(api.find("/files/ferry.md")) == 1
    assert not api.find("chat.postEphemeral")  # nothing went near the table's channel
    assert "The Ferry" in [
        t for _, t in await service.engine.titles("greyhold", frozenset({PLAYERS}))
    ]
