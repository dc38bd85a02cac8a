"""Discord adapter through the real discord.py client against a local fake REST API.

Interactions are built from INTERACTION_CREATE payload dicts and run through the real
``CommandTree`` (option parsing, autocomplete, the response/followup webhooks); mention messages
are built from MESSAGE_CREATE payloads.
"""

from __future__ import annotations

import json

import discord
import pytest

from bot.discord_adapter import DiscordAdapter, build_intents, render_reply, send_with_retry
from bot.service import BotService, Reply
from conftest import close_engine, make_engine
from fakes.discord_api import (
    CHANNEL_ID, GM_ROLE_ID, MIREL_ROLE_ID, ROGUE_CHANNEL_ID, ROGUE_GM_ROLE_ID, ROGUE_GUILD_ID, THREAD_ID,
    FakeDiscordApi, guild_payload, interaction_payload, message_payload, rogue_guild_payload,
)
from fakes.tiny_campaign import CANARY, GM_TITLE, MIREL_CANARY, make_tiny_campaign
from liminalis.answer import Source

PLAYER = 222
GM = 333


@pytest.fixture
async def env(tmp_path, monkeypatch):
    api = FakeDiscordApi()
    url = await api.start()
    monkeypatch.setattr(discord.http.Route, "BASE", f"{url}/api/v10")
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    service = BotService(engine)
    await service.directory.link("discord", str(CHANNEL_ID), "greyhold")
    adapter = DiscordAdapter(service, guild_ids=(123,))
    await adapter.client.login("fake-token")
    adapter.client._connection._add_guild_from_data(guild_payload())
    yield api, adapter, service
    await adapter.client.close()
    await close_engine(engine)
    await api.close()


async def invoke(adapter: DiscordAdapter, payload: dict) -> discord.Interaction:
    interaction = discord.Interaction(data=payload, state=adapter.client._connection)
    await adapter.tree._call(interaction)
    return interaction


def followups(api: FakeDiscordApi) -> list[dict]:
    return [c.json for c in api.find("POST", "/webhooks/") if isinstance(c.json, dict)]


def all_text(body: dict) -> str:
    return json.dumps(body, ensure_ascii=False)


async def test_login_synced_commands_per_guild_without_privileged_intents(env):
    api, adapter, _ = env
    synced = api.find("PUT", "/guilds/123/commands")
    assert synced, "per-guild sync expected when guild ids are configured"
    names = {c["name"] for c in synced[0].json}
    assert {"ask", "pin", "budget", "upload", "recap", "explain", "campaign", "lens", "help"} <= names
    assert not api.find("PUT", f"/applications/{adapter.client.application_id}/commands")
    intents = build_intents()
    assert not intents.message_content and not intents.members and not intents.presences


async def test_player_ask_defers_then_follows_up_publicly_without_gm_text(env):
    api, adapter, _ = env
    await invoke(adapter, interaction_payload("ask", [{"name": "question", "type": 3, "value": "What is the truth about the baron?"}],
                                              user_id=PLAYER))
    cb = api.find("POST", "/callback")
    assert cb[0].json["type"] == 5 and not cb[0].json.get("data", {}).get("flags")  # deferred, public
    assert cb[0].t <= api.find("POST", "/webhooks/")[0].t  # defer before the followup
    bodies = followups(api)
    assert bodies and not any(b.get("flags", 0) & 64 for b in bodies)
    text = " ".join(all_text(b) for b in bodies)
    assert "baron" in text.lower()
    assert CANARY not in text and GM_TITLE not in text
    assert all(b["allowed_mentions"]["parse"] == [] for b in bodies)


async def test_gm_answer_is_ephemeral_in_shared_channel_and_has_the_secret(env):
    api, adapter, _ = env
    await invoke(adapter, interaction_payload("ask", [{"name": "question", "type": 3, "value": "What is the truth about the baron?"}],
                                              user_id=GM, roles=[GM_ROLE_ID]))
    cb = api.find("POST", "/callback")[0].json
    assert cb["type"] == 5 and cb["data"]["flags"] & 64
    bodies = followups(api)
    assert all(b.get("flags", 0) & 64 for b in bodies)
    assert CANARY in " ".join(all_text(b) for b in bodies)


async def test_personal_lens_answer_is_private_in_shared_channel(env):
    """One player's backstory is not the table's: a personal lens's answer is ephemeral like a
    GM's, and a plain player asking the same question neither sees it nor the private flag."""
    api, adapter, _ = env
    question = [{"name": "question", "type": 3, "value": "Who took the baron's ninth bell?"}]
    await invoke(adapter, interaction_payload("ask", question, user_id=PLAYER, roles=[MIREL_ROLE_ID]))
    assert api.find("POST", "/callback")[0].json["data"]["flags"] & 64  # deferred privately
    bodies = followups(api)
    assert bodies and all(b.get("flags", 0) & 64 for b in bodies)
    assert MIREL_CANARY in " ".join(all_text(b) for b in bodies)
    api.calls.clear()
    await invoke(adapter, interaction_payload("ask", question, user_id=PLAYER))
    bodies = followups(api)
    assert bodies and not any(b.get("flags", 0) & 64 for b in bodies)
    assert MIREL_CANARY not in " ".join(all_text(b) for b in bodies)


async def test_a_role_named_gm_on_another_server_is_not_a_gm(env):
    """Anyone can add the bot to a server of their own and name a role "GM": role names count
    only on a server where the campaign is linked, so that server can neither link the campaign
    (refused as any stranger is, without the campaign's name) nor read GM text. The campaign's
    real GM keeps the GM view at home."""
    api, adapter, service = env
    adapter.client._connection._add_guild_from_data(rogue_guild_payload())
    rogue = {"user_id": 444, "roles": [ROGUE_GM_ROLE_ID], "guild_id": ROGUE_GUILD_ID, "channel_id": ROGUE_CHANNEL_ID}
    link = [{"name": "action", "type": 3, "value": "link"}, {"name": "slug", "type": 3, "value": "greyhold"}]
    await invoke(adapter, interaction_payload("campaign", link, **rogue))
    refused = all_text(followups(api)[-1])
    assert "Only a GM" in refused and "Greyhold" not in refused and CANARY not in refused
    assert await service.directory.campaign_for("discord", str(ROGUE_CHANNEL_ID)) is None
    # the home server's GM, by role name, still holds the GM view
    await invoke(adapter, interaction_payload("lens", user_id=GM, roles=[GM_ROLE_ID]))
    assert "GM view" in all_text(followups(api)[-1])
    assert await service.directory.homes("discord", "greyhold") == {"800000000000000001"}
    api.calls.clear()
    question = [{"name": "question", "type": 3, "value": "What is the truth about the baron?"}]
    await invoke(adapter, interaction_payload("ask", question, **rogue))
    text = " ".join(all_text(b) for b in followups(api))
    assert "This channel is not linked" in text and CANARY not in text and GM_TITLE not in text


async def test_a_recap_posted_before_login_is_sent_once_logged_in(env):
    """The scheduler's start-up catch-up runs before the client logs in (and has claimed its
    slot): the post waits for the login instead of failing and losing the recap."""
    import asyncio

    api, _, service = env
    fresh = DiscordAdapter(service, sync_commands=False)
    try:
        await fresh.post("4242", Reply(text="Previously on Greyhold: the bell.", title="Recap"))
        await asyncio.sleep(0.05)
        assert not api.find("POST", "/channels/4242/messages")
        await fresh.client.login("fake-token")
        for _ in range(100):
            if api.find("POST", "/channels/4242/messages"):
                break
            await asyncio.sleep(0.02)
        (sent,) = api.find("POST", "/channels/4242/messages")
        assert "the bell" in all_text(sent.json)
    finally:
        await fresh.client.close()


async def test_gm_by_user_id_and_thread_inherits_parent_campaign(env):
    api, adapter, _ = env
    await invoke(adapter, interaction_payload("lens", user_id=111, channel_id=THREAD_ID))
    assert "GM view" in all_text(followups(api)[0])


async def test_dm_never_gets_gm_lens(env):
    api, adapter, service = env
    await service.directory.link("discord", "999", "greyhold")
    await invoke(adapter, interaction_payload("lens", user_id=111, dm=True, channel_id=999))
    text = all_text(followups(api)[0])
    assert "players" in text and "GM view" not in text


async def test_uncached_guild_roles_fall_back_to_players(env):
    api, adapter, service = env
    await service.directory.link("discord", "555", "greyhold")
    # guild 42 is not in the cache: role names cannot be resolved, so the GM role by name is unknown
    await invoke(adapter, interaction_payload("lens", user_id=GM, roles=[GM_ROLE_ID], channel_id=555, guild_id=42))
    assert "GM view" not in all_text(followups(api)[0])


async def test_gm_only_commands_refused_for_players(env):
    api, adapter, service = env
    await invoke(adapter, interaction_payload("explain", [{"name": "question", "type": 3, "value": "baron"}], user_id=PLAYER))
    await invoke(adapter, interaction_payload("pin", [{"name": "action", "type": 3, "value": "add"},
                                                      {"name": "document", "type": 3, "value": "Baron Aldric"}], user_id=PLAYER))
    await invoke(adapter, interaction_payload("budget", [{"name": "action", "type": 3, "value": "set"},
                                                         {"name": "tokens", "type": 4, "value": 9000}], user_id=PLAYER))
    bodies = followups(api)
    assert len(bodies) == 3
    assert all("Only a GM" in all_text(b) and b["flags"] & 64 for b in bodies)
    assert await service.engine.pins("greyhold") == []
    assert await service.budget("greyhold", None) == 6000


async def test_public_prediction_wrong_sends_error_privately(env):
    api, adapter, _ = env
    # campaign link is public when it works; a player's attempt fails and must not stay public
    await invoke(adapter, interaction_payload("campaign", [{"name": "action", "type": 3, "value": "link"},
                                                           {"name": "slug", "type": 3, "value": "greyhold"}], user_id=PLAYER))
    assert api.find("DELETE", "/messages/@original")
    body = followups(api)[-1]
    assert body["flags"] & 64 and "Only a GM" in all_text(body)


async def test_autocomplete_never_offers_gm_titles_to_players(env):
    api, adapter, _ = env
    opts = [{"name": "action", "type": 3, "value": "add"}, {"name": "document", "type": 3, "value": "baron", "focused": True}]
    await invoke(adapter, interaction_payload("pin", opts, user_id=PLAYER, autocomplete=True, iid=1))
    await invoke(adapter, interaction_payload("pin", opts, user_id=GM, roles=[GM_ROLE_ID], autocomplete=True, iid=2))
    player_cb, gm_cb = [c.json for c in api.find("POST", "/callback")]
    assert player_cb["type"] == 8 and gm_cb["type"] == 8
    player_names = [c["name"] for c in player_cb["data"]["choices"]]
    gm_names = [c["name"] for c in gm_cb["data"]["choices"]]
    assert "Baron Aldric" in player_names and GM_TITLE not in player_names
    assert GM_TITLE in gm_names


async def test_autocomplete_caps_at_25(env, tmp_path):
    api, adapter, service = env
    root = tmp_path / "campaigns" / "greyhold"
    for i in range(40):
        (root / f"extra-{i:02}.md").write_text(f"# Extra {i}\n\nFiller document number {i}.\n")
    await service.engine.ingest("greyhold")
    opts = [{"name": "document", "type": 3, "value": "extra", "focused": True}]
    await invoke(adapter, interaction_payload("pin", opts, user_id=PLAYER, autocomplete=True))
    choices = api.find("POST", "/callback")[0].json["data"]["choices"]
    assert len(choices) == 25


async def test_gm_pin_with_document(env):
    api, adapter, service = env
    await invoke(adapter, interaction_payload("pin", [{"name": "action", "type": 3, "value": "add"},
                                                      {"name": "document", "type": 3, "value": "Baron Aldric"}],
                                              user_id=GM, roles=[GM_ROLE_ID]))
    assert "Pinned **Baron Aldric**" in all_text(followups(api)[0])
    assert await service.engine.pins("greyhold") == ["baron"]


async def test_upload_by_gm_ingests_and_player_refused(env):
    api, adapter, service = env
    api.files["notes.md"] = b"# Session 2\n\nThe party found the silver bell under the river tower.\n"
    att = {"id": "11", "filename": "notes.md", "size": 70, "url": f"{api.url}/attachments/notes.md",
           "proxy_url": f"{api.url}/attachments/notes.md", "content_type": "text/markdown"}
    resolved = {"attachments": {"11": att}}
    opt = [{"name": "file", "type": 11, "value": "11"}]
    await invoke(adapter, interaction_payload("upload", opt, user_id=PLAYER, resolved=resolved, iid=5))
    await invoke(adapter, interaction_payload("upload", opt, user_id=GM, roles=[GM_ROLE_ID], resolved=resolved, iid=6))
    player, gm = followups(api)
    assert "Only a GM" in all_text(player)
    assert "Ingested 1 file" in all_text(gm) and gm["flags"] & 64
    assert len(api.find("GET", "/attachments/notes.md")) == 1  # a player's file is never downloaded
    titles = [t for _, t in await service.engine.titles("greyhold", frozenset({"players"}), "session")]
    assert "Session 2" in titles


async def test_a_failed_attachment_download_is_reported_not_a_crash(env):
    api, adapter, _ = env
    att = {"id": "12", "filename": "gone.md", "size": 70, "url": f"{api.url}/attachments/gone.md",
           "proxy_url": f"{api.url}/attachments/gone.md", "content_type": "text/markdown"}
    opt = [{"name": "file", "type": 11, "value": "12"}]
    await invoke(adapter, interaction_payload("upload", opt, user_id=GM, roles=[GM_ROLE_ID],
                                              resolved={"attachments": {"12": att}}, iid=7))
    (gm,) = followups(api)
    assert "gone.md: could not be downloaded from Discord" in all_text(gm) and gm["flags"] & 64
    assert "something went wrong" not in all_text(gm)


async def test_a_dropped_download_loses_only_that_file(env):
    """A connection dropped mid-download (aiohttp's error, not discord.py's) failed the whole
    upload with "something went wrong"; the other files are ingested, that one is named."""
    api, adapter, _ = env
    api.files["keep.md"] = b"# Keep\n\nThe lantern burns blue at the ferry.\n"
    api.dropped.add("drop.md")
    atts = {str(i): {"id": str(i), "filename": n, "size": 50, "url": f"{api.url}/attachments/{n}",
                     "proxy_url": f"{api.url}/attachments/{n}", "content_type": "text/markdown"}
            for i, n in ((21, "drop.md"), (22, "keep.md"))}
    opt = [{"name": "file", "type": 11, "value": "21"}, {"name": "file2", "type": 11, "value": "22"}]
    await invoke(adapter, interaction_payload("upload", opt, user_id=GM, roles=[GM_ROLE_ID],
                                              resolved={"attachments": atts}, iid=8))
    (gm,) = followups(api)
    text = all_text(gm)
    assert "Ingested 1 file" in text and "drop.md: could not be downloaded" in text, text


async def test_a_refused_command_sync_does_not_stop_the_bot(env):
    """A guild id the bot is not in (403 Missing Access) raised out of login and stopped the whole
    bot, Slack included; it is logged, and the other guilds are synced."""
    api, _, service = env
    other = DiscordAdapter(service, guild_ids=(999, 123))
    try:
        await other.client.login("fake-token")  # setup_hook syncs here
        assert api.find("PUT", "/guilds/123/commands") and api.find("PUT", "/guilds/999/commands")
    finally:
        await other.client.close()


async def test_mention_sanitized_and_gm_mention_goes_to_dm(env):
    api, adapter, _ = env
    state = adapter.client._connection
    channel = adapter.client.get_channel(CHANNEL_ID)
    m = discord.Message(state=state, channel=channel, data=message_payload(
        "<@900000000000000002> what about the baron?", user_id=PLAYER))
    await adapter.on_message(m)
    posted = api.find("POST", f"/channels/{CHANNEL_ID}/messages")
    assert posted and CANARY not in all_text(posted[0].json)
    assert posted[0].json["allowed_mentions"]["parse"] == []
    # A reply still goes out if the question was deleted meanwhile (Discord refused it, and the
    # answer was lost, when the reference had to exist).
    assert posted[0].json["message_reference"]["fail_if_not_exists"] is False
    m2 = discord.Message(state=state, channel=channel, data=message_payload(
        "<@900000000000000002> what is the truth about the baron?", user_id=GM, roles=[GM_ROLE_ID], mid=2))
    await adapter.on_message(m2)
    assert api.find("POST", "/users/@me/channels")
    dm = api.find("POST", f"/channels/{GM + 1}/messages")
    assert dm and CANARY in all_text(dm[0].json)
    public = api.find("POST", f"/channels/{CHANNEL_ID}/messages")
    assert len(public) == 2 and CANARY not in all_text(public[1].json)


async def test_message_without_mention_is_ignored(env):
    api, adapter, _ = env
    m = discord.Message(state=adapter.client._connection, channel=adapter.client.get_channel(CHANNEL_ID),
                        data=message_payload("@everyone baron", user_id=PLAYER, mentions_bot=False))
    await adapter.on_message(m)
    assert not api.find("POST", "/messages")


async def test_followup_honours_429_retry_after(env, monkeypatch):
    api, adapter, _ = env
    # Without a Via header discord.py's webhook adapter raises instead of retrying: our loop waits.
    api.rate_limit_next("POST", "/webhooks/", 0.2, via=False)
    await invoke(adapter, interaction_payload("help", user_id=PLAYER))
    posts = api.find("POST", "/webhooks/")
    assert len(posts) == 2
    assert posts[1].t - posts[0].t >= 0.19


async def test_discordpy_itself_retries_via_429(env):
    api, adapter, _ = env
    api.rate_limit_next("POST", "/webhooks/", 0.1, via=True)
    await invoke(adapter, interaction_payload("help", user_id=PLAYER))
    assert len(api.find("POST", "/webhooks/")) == 2


async def test_send_with_retry_gives_up_on_other_errors():
    class Resp:
        status = 500
        reason = "boom"
        headers: dict = {}

    calls = 0

    async def fail():
        nonlocal calls
        calls += 1
        raise discord.HTTPException(Resp(), {"message": "boom"})

    with pytest.raises(discord.HTTPException):
        await send_with_retry(fail)
    assert calls == 1


def test_render_splits_plain_text_at_2000_and_neutralizes_mentions():
    text = "@everyone look " + ("word " * 900) + "<@&123> <@456> @here"
    outs = render_reply(Reply(text=text))
    assert len(outs) > 1 and all(o.content and len(o.content) <= 2000 for o in outs)
    joined = "".join(o.content or "" for o in outs)
    assert "@everyone" not in joined and "@here" not in joined and "<@&123>" not in joined and "<@456>" not in joined


def test_render_embeds_within_limits_sources_as_fields():
    sources = tuple(Source(f"doc{i}.md", f"Doc {i} " + "t" * 300, "section " + "s" * 1100) for i in range(40))
    outs = render_reply(Reply(text="answer " * 1500, sources=sources, title="T" * 300, lens="players"))
    embeds = [e for o in outs for e in o.embeds]
    assert all(len(o.embeds) <= 10 and sum(len(e) for e in o.embeds) <= 6000 for o in outs)
    assert all(len(e.description or "") <= 4096 for e in embeds)
    assert all(len(e.fields) <= 25 for e in embeds)
    assert all(len(f.name) <= 256 and len(f.value) <= 1024 for e in embeds for f in e.fields)
    assert sum(len(e.fields) for e in embeds) == 40
    assert len(embeds[0].title) <= 256
    assert embeds[-1].footer.text == "lens: players"


def test_auto_sharded_when_configured():
    class S:
        max_upload_bytes = 10

    assert isinstance(DiscordAdapter(S(), shards=True).client, discord.AutoShardedClient)  # type: ignore[arg-type]
    assert not isinstance(DiscordAdapter(S()).client, discord.AutoShardedClient)  # type: ignore[arg-type]


async def test_personal_lens_from_role_name(env):
    api, adapter, _ = env
    await invoke(adapter, interaction_payload("lens", user_id=PLAYER, roles=[MIREL_ROLE_ID]))
    text = all_text(followups(api)[0])
    assert "mirel" in text and "GM view" not in text
