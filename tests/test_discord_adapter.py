"""Discord adapter through the real discord.py client against a local fake REST API.

Interactions are built from INTERACTION_CREATE payload dicts and run through the real
``CommandTree`` (option parsing, autocomplete, the response/followup webhooks); mention messages
are built from MESSAGE_CREATE payloads.
"""

from __future__ import annotations

import json
from dataclasses import replace

import discord
import harness
import pytest
from conftest import close_engine, make_engine
from fakes.discord_api import (
    CHANNEL_ID,
    GM_ROLE_ID,
    GUILD_ID,
    MIREL_ROLE_ID,
    ROGUE_CHANNEL_ID,
    ROGUE_GM_ROLE_ID,
    ROGUE_GUILD_ID,
    THREAD_ID,
    FakeDiscordApi,
    guild_payload,
    interaction_payload,
    message_payload,
    rogue_guild_payload,
    role_payload,
)
from fakes.tiny_campaign import CANARY, GM_TITLE, MIREL_CANARY, MIREL_USER, make_tiny_campaign

from bot.commands import REGISTRY, Registry
from bot.discord_adapter import DiscordAdapter, build_intents, render_reply, send_with_retry
from bot.service import BotService, Reply
from liminalis.answer import Source
from liminalis.context import DEFAULT_CONTEXT_TOKENS

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


def grouped(payload: dict) -> dict:
    """A command named flat (``"ask"``, or an alias, ``"lens"``) as Discord sends it: the
    subcommand of its group (``/lore ask``), its options nested under it."""
    data = payload["data"]
    command = REGISTRY.get(data.get("name", ""))
    if payload["type"] not in (2, 4) or command is None:
        return payload
    sub = {"name": command.name, "type": 1, "options": data.get("options", [])}
    return {**payload, "data": {**data, "name": command.group, "options": [sub]}}


async def invoke(adapter: DiscordAdapter, payload: dict) -> discord.Interaction:
    """Run an interaction through the real command tree; a command named flat is sent as the
    subcommand of its group (``grouped``), a button press or a form through ``on_interaction``."""
    interaction = discord.Interaction(data=grouped(payload), state=adapter.client._connection)
    if payload["type"] in (2, 4):
        await adapter.tree._call(interaction)
    else:
        await adapter.on_interaction(interaction)
    return interaction


def followups(api: FakeDiscordApi) -> list[dict]:
    return [c.json for c in api.find("POST", "/webhooks/") if isinstance(c.json, dict)]


def all_text(body: dict) -> str:
    return json.dumps(body, ensure_ascii=False)


async def test_login_synced_commands_per_guild_without_privileged_intents(env):
    api, adapter, _ = env
    synced = api.find("PUT", "/guilds/123/commands")
    assert synced, "per-guild sync expected when guild ids are configured"
    groups = {c["name"]: {o["name"] for o in c["options"]} for c in synced[0].json}
    assert set(groups) == {"lore", "gm"}  # two groups: the app squats on no bare name
    assert {"ask", "search", "show", "recap", "view", "help"} <= groups["lore"]
    assert {"upload", "pin", "budget", "explain", "memory", "campaign"} <= groups["gm"]
    assert not api.find("PUT", f"/applications/{adapter.client.application_id}/commands")
    intents = build_intents()
    assert not intents.message_content and not intents.members and not intents.presences


async def test_player_ask_defers_then_follows_up_publicly_without_gm_text(env):
    api, adapter, _ = env
    await invoke(
        adapter,
        interaction_payload(
            "ask",
            [{"name": "question", "type": 3, "value": "What is the truth about the baron?"}],
            user_id=PLAYER,
        ),
    )
    cb = api.find("POST", "/callback")
    assert cb[0].json["type"] == 5 and not cb[0].json.get("data", {}).get(
        "flags"
    )  # deferred, public
    assert cb[0].t <= api.find("POST", "/webhooks/")[0].t  # defer before the followup
    bodies = followups(api)
    assert bodies and not any(b.get("flags", 0) & 64 for b in bodies)
    text = " ".join(all_text(b) for b in bodies)
    assert "baron" in text.lower()
    assert CANARY not in text and GM_TITLE not in text
    assert all(b["allowed_mentions"]["parse"] == [] for b in bodies)


async def test_gm_answer_is_ephemeral_in_shared_channel_and_has_the_secret(env):
    api, adapter, _ = env
    await invoke(
        adapter,
        interaction_payload(
            "ask",
            [{"name": "question", "type": 3, "value": "What is the truth about the baron?"}],
            user_id=GM,
            roles=[GM_ROLE_ID],
        ),
    )
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
    await invoke(
        adapter, interaction_payload("ask", question, user_id=PLAYER, roles=[MIREL_ROLE_ID])
    )
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
    rogue = {
        "user_id": 444,
        "roles": [ROGUE_GM_ROLE_ID],
        "guild_id": ROGUE_GUILD_ID,
        "channel_id": ROGUE_CHANNEL_ID,
    }
    link = [
        {"name": "action", "type": 3, "value": "link"},
        {"name": "slug", "type": 3, "value": "greyhold"},
    ]
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


async def test_a_recap_posted_before_login_sends_nothing_and_after_it_returns_its_id(env):
    """The scheduler's start-up catch-up runs before the client logs in: the post is refused
    with nothing sent (the scheduler keeps the slot claimed and posts it on its next run), and
    once logged in the post returns the message id the scheduler stores."""
    from liminalis.errors import NotReady

    api, _, service = env
    fresh = DiscordAdapter(service, sync_commands=False)
    try:
        with pytest.raises(NotReady):
            await fresh.post("4242", Reply(text="Previously on Greyhold: the bell.", title="Recap"))
        assert not api.find("POST", "/channels/4242/messages")
        await fresh.client.login("fake-token")
        message_id = await fresh.post(
            "4242", Reply(text="Previously on Greyhold: the bell.", title="Recap")
        )
        (sent,) = api.find("POST", "/channels/4242/messages")
        assert "the bell" in all_text(sent.json) and message_id.isdigit()
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
    await invoke(
        adapter,
        interaction_payload("lens", user_id=GM, roles=[GM_ROLE_ID], channel_id=555, guild_id=42),
    )
    assert "GM view" not in all_text(followups(api)[0])


async def test_gm_only_commands_refused_for_players(env):
    api, adapter, service = env
    await invoke(
        adapter,
        interaction_payload(
            "explain", [{"name": "question", "type": 3, "value": "baron"}], user_id=PLAYER
        ),
    )
    await invoke(
        adapter,
        interaction_payload(
            "pin",
            [
                {"name": "action", "type": 3, "value": "add"},
                {"name": "document", "type": 3, "value": "Baron Aldric"},
            ],
            user_id=PLAYER,
        ),
    )
    await invoke(
        adapter,
        interaction_payload(
            "budget",
            [
                {"name": "action", "type": 3, "value": "set"},
                {"name": "tokens", "type": 4, "value": 9000},
            ],
            user_id=PLAYER,
        ),
    )
    bodies = followups(api)
    assert len(bodies) == 3
    assert all("Only a GM" in all_text(b) and b["flags"] & 64 for b in bodies)
    assert await service.engine.pins("greyhold") == []
    assert await service.engine.budget("greyhold", None) == DEFAULT_CONTEXT_TOKENS


async def test_public_prediction_wrong_sends_error_privately(env):
    api, adapter, _ = env
    # campaign link is public when it works; a player's attempt fails and must not stay public
    await invoke(
        adapter,
        interaction_payload(
            "campaign",
            [
                {"name": "action", "type": 3, "value": "link"},
                {"name": "slug", "type": 3, "value": "greyhold"},
            ],
            user_id=PLAYER,
        ),
    )
    assert api.find("DELETE", "/messages/@original")
    body = followups(api)[-1]
    assert body["flags"] & 64 and "Only a GM" in all_text(body)


async def test_autocomplete_never_offers_gm_titles_to_players(env):
    api, adapter, _ = env
    opts = [
        {"name": "action", "type": 3, "value": "add"},
        {"name": "document", "type": 3, "value": "baron", "focused": True},
    ]
    await invoke(
        adapter, interaction_payload("pin", opts, user_id=PLAYER, autocomplete=True, iid=1)
    )
    await invoke(
        adapter,
        interaction_payload("pin", opts, user_id=GM, roles=[GM_ROLE_ID], autocomplete=True, iid=2),
    )
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
    await invoke(
        adapter,
        interaction_payload(
            "pin",
            [
                {"name": "action", "type": 3, "value": "add"},
                {"name": "document", "type": 3, "value": "Baron Aldric"},
            ],
            user_id=GM,
            roles=[GM_ROLE_ID],
        ),
    )
    assert "Pinned **Baron Aldric**" in all_text(followups(api)[0])
    assert await service.engine.pins("greyhold") == ["baron"]


async def test_upload_by_gm_ingests_and_player_refused(env):
    api, adapter, service = env
    api.files["notes.md"] = (
        b"# Session 2\n\nThe party found the silver bell under the river tower.\n"
    )
    att = {
        "id": "11",
        "filename": "notes.md",
        "size": 70,
        "url": f"{api.url}/attachments/notes.md",
        "proxy_url": f"{api.url}/attachments/notes.md",
        "content_type": "text/markdown",
    }
    resolved = {"attachments": {"11": att}}
    opt = [{"name": "file", "type": 11, "value": "11"}]
    await invoke(
        adapter, interaction_payload("upload", opt, user_id=PLAYER, resolved=resolved, iid=5)
    )
    await invoke(
        adapter,
        interaction_payload(
            "upload", opt, user_id=GM, roles=[GM_ROLE_ID], resolved=resolved, iid=6
        ),
    )
    player, gm = followups(api)
    assert "Only a GM" in all_text(player)
    assert "notes.md — GM-only, lore: 1 passages added" in all_text(gm) and gm["flags"] & 64
    assert len(api.find("GET", "/attachments/notes.md")) == 1  # a player's file is never downloaded
    # A file that says nothing about who reads it is GM-only until its uploader says otherwise.
    assert "Session 2" not in [
        t for _, t in await service.engine.titles("greyhold", frozenset({"players"}))
    ]
    assert "Session 2" in [t for _, t in await service.engine.titles("greyhold", frozenset({"gm"}))]
    shared = opt + [
        {"name": "visibility", "type": 3, "value": "players"},
        {"name": "type", "type": 3, "value": "session"},
    ]
    await invoke(
        adapter,
        interaction_payload(
            "upload", shared, user_id=GM, roles=[GM_ROLE_ID], resolved=resolved, iid=8
        ),
    )
    again = followups(api)[-1]
    assert (
        "notes.md (replaced the earlier upload) — players, session: 0 passages added, 0 changed, 0 removed"
        in all_text(again)
    ), all_text(again)
    titles = [
        t for _, t in await service.engine.titles("greyhold", frozenset({"players"}), "session")
    ]
    assert "Session 2" in titles
    cat = await harness.catalog(service.engine, "greyhold")
    assert cat.documents["uploads/notes"].type == "session"
    assert "Baron Aldric" not in all_text(again)  # only the uploaded file is reported


async def test_a_failed_attachment_download_is_reported_not_a_crash(env):
    api, adapter, _ = env
    att = {
        "id": "12",
        "filename": "gone.md",
        "size": 70,
        "url": f"{api.url}/attachments/gone.md",
        "proxy_url": f"{api.url}/attachments/gone.md",
        "content_type": "text/markdown",
    }
    opt = [{"name": "file", "type": 11, "value": "12"}]
    await invoke(
        adapter,
        interaction_payload(
            "upload",
            opt,
            user_id=GM,
            roles=[GM_ROLE_ID],
            resolved={"attachments": {"12": att}},
            iid=7,
        ),
    )
    (gm,) = followups(api)
    assert "gone.md: could not be downloaded from Discord" in all_text(gm) and gm["flags"] & 64
    assert "something went wrong" not in all_text(gm)


async def test_a_dropped_download_loses_only_that_file(env):
    """A connection dropped mid-download (aiohttp's error, not discord.py's) failed the whole
    upload with "something went wrong"; the other files are ingested, that one is named."""
    api, adapter, _ = env
    api.files["keep.md"] = b"# Keep\n\nThe lantern burns blue at the ferry.\n"
    api.dropped.add("drop.md")
    atts = {
        str(i): {
            "id": str(i),
            "filename": n,
            "size": 50,
            "url": f"{api.url}/attachments/{n}",
            "proxy_url": f"{api.url}/attachments/{n}",
            "content_type": "text/markdown",
        }
        for i, n in ((21, "drop.md"), (22, "keep.md"))
    }
    opt = [
        {"name": "file", "type": 11, "value": "21"},
        {"name": "file2", "type": 11, "value": "22"},
    ]
    await invoke(
        adapter,
        interaction_payload(
            "upload", opt, user_id=GM, roles=[GM_ROLE_ID], resolved={"attachments": atts}, iid=8
        ),
    )
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
    m = discord.Message(
        state=state,
        channel=channel,
        data=message_payload("<@900000000000000002> what about the baron?", user_id=PLAYER),
    )
    await adapter.on_message(m)
    posted = api.find("POST", f"/channels/{CHANNEL_ID}/messages")
    assert posted and CANARY not in all_text(posted[0].json)
    assert posted[0].json["allowed_mentions"]["parse"] == []
    # A reply still goes out if the question was deleted meanwhile (Discord refused it, and the
    # answer was lost, when the reference had to exist).
    assert posted[0].json["message_reference"]["fail_if_not_exists"] is False
    m2 = discord.Message(
        state=state,
        channel=channel,
        data=message_payload(
            "<@900000000000000002> what is the truth about the baron?",
            user_id=GM,
            roles=[GM_ROLE_ID],
            mid=2,
        ),
    )
    await adapter.on_message(m2)
    assert api.find("POST", "/users/@me/channels")
    dm = api.find("POST", f"/channels/{GM + 1}/messages")
    assert dm and CANARY in all_text(dm[0].json)
    public = api.find("POST", f"/channels/{CHANNEL_ID}/messages")
    assert len(public) == 2 and CANARY not in all_text(public[1].json)


async def test_message_without_mention_is_ignored(env):
    api, adapter, _ = env
    m = discord.Message(
        state=adapter.client._connection,
        channel=adapter.client.get_channel(CHANNEL_ID),
        data=message_payload("@everyone baron", user_id=PLAYER, mentions_bot=False),
    )
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
    assert (
        "@everyone" not in joined
        and "@here" not in joined
        and "<@&123>" not in joined
        and "<@456>" not in joined
    )


def test_render_embeds_within_limits_sources_as_fields():
    sources = tuple(
        Source(f"doc{i}.md", f"Doc {i} " + "t" * 300, "section " + "s" * 1100) for i in range(40)
    )
    outs = render_reply(
        Reply(text="answer " * 1500, sources=sources, title="T" * 300, lens="players")
    )
    embeds = [e for o in outs for e in o.embeds]
    assert all(len(o.embeds) <= 10 and sum(len(e) for e in o.embeds) <= 6000 for o in outs)
    assert all(len(e.description or "") <= 4096 for e in embeds)
    assert all(len(e.fields) <= 25 for e in embeds)
    assert all(len(f.name) <= 256 and len(f.value) <= 1024 for e in embeds for f in e.fields)
    assert sum(len(e.fields) for e in embeds) == 40
    assert len(embeds[0].title) <= 256
    assert embeds[-1].footer.text == "What every player can see"


def test_auto_sharded_when_configured():
    class S:
        max_upload_bytes = 10
        registry = REGISTRY  # the adapter registers the service's commands

        def use_seating(self, platform, seating):
            pass

    assert isinstance(DiscordAdapter(S(), shards=True).client, discord.AutoShardedClient)  # type: ignore[arg-type]
    assert not isinstance(DiscordAdapter(S()).client, discord.AutoShardedClient)  # type: ignore[arg-type]


async def test_personal_lens_from_role_name(env):
    api, adapter, _ = env
    await invoke(adapter, interaction_payload("lens", user_id=PLAYER, roles=[MIREL_ROLE_ID]))
    text = all_text(followups(api)[0])
    assert "mirel" in text and "GM view" not in text


# -- homes that can be taken back --------------------------------------------------------------

ROGUE = {"guild_id": ROGUE_GUILD_ID, "channel_id": ROGUE_CHANNEL_ID}
ID_GM = 111  # greyhold's GM by user id (campaign.toml gm_users)


def opts(**values: str) -> list[dict]:
    return [{"name": k, "type": 3, "value": v} for k, v in values.items()]


def edit_campaign(service: BotService, old: str, new: str) -> None:
    """Rewrite greyhold's campaign.toml (a host's edit), seen on the next message."""
    import os

    toml = service.engine.campaigns_dir / "greyhold" / "campaign.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))
    st = toml.stat()
    os.utime(toml, (st.st_atime, st.st_mtime + 5))  # the config cache keys on the mtime


async def test_the_last_unlink_on_a_server_ends_its_home(env):
    """A GM by user id links a channel of another server, then unlinks it: while linked that
    server is a home (its role named "GM" is a GM there); once its last channel is unlinked it is
    a home no more, so the role named "GM" can neither link the campaign again nor read GM text.
    (A home claimed once used to be a home forever, even linked and unlinked at once.)"""
    api, adapter, service = env
    adapter.client._connection._add_guild_from_data(rogue_guild_payload())
    rogue_gm = {"user_id": 444, "roles": [ROGUE_GM_ROLE_ID], **ROGUE}
    await invoke(
        adapter,
        interaction_payload(
            "campaign", opts(action="link", slug="greyhold"), user_id=ID_GM, iid=1, **ROGUE
        ),
    )
    assert "Linked this channel" in all_text(followups(api)[-1])
    assert str(ROGUE_GUILD_ID) in await service.directory.homes("discord", "greyhold")
    await invoke(adapter, interaction_payload("lens", iid=2, **rogue_gm))
    assert "GM view" in all_text(followups(api)[-1])
    await invoke(
        adapter,
        interaction_payload("campaign", opts(action="unlink"), user_id=ID_GM, iid=3, **ROGUE),
    )
    unlinked = all_text(followups(api)[-1])
    assert str(ROGUE_GUILD_ID) not in await service.directory.homes("discord", "greyhold")
    api.calls.clear()
    await invoke(
        adapter,
        interaction_payload("campaign", opts(action="link", slug="greyhold"), iid=4, **rogue_gm),
    )
    assert "Only a GM" in all_text(followups(api)[-1])
    assert await service.directory.campaign_for("discord", str(ROGUE_CHANNEL_ID)) is None
    question = [{"name": "question", "type": 3, "value": "What is the truth about the baron?"}]
    await invoke(adapter, interaction_payload("ask", question, iid=5, **rogue_gm))
    await invoke(adapter, interaction_payload("explain", question, iid=6, **rogue_gm))
    await invoke(
        adapter, interaction_payload("recap", opts(schedule="0 18 * * 5"), iid=7, **rogue_gm)
    )
    text = " ".join(all_text(b) for b in followups(api))
    assert CANARY not in text and GM_TITLE not in text and "Recaps of" not in text
    assert "Unlinked this channel" in unlinked and "no longer count" in unlinked  # the GM was told


async def test_a_gm_removed_from_the_config_is_a_player_on_every_server(env):
    """The host takes a GM out of ``gm_users``: that user is a player at once, at home and on a
    server of their own where they had linked (and unlinked) a channel while a GM, even with a
    role they named "GM" there (it used to stay a home, so the name made them a GM again)."""
    api, adapter, service = env
    adapter.client._connection._add_guild_from_data(rogue_guild_payload())
    link = opts(action="link", slug="greyhold")
    await invoke(adapter, interaction_payload("campaign", link, user_id=ID_GM, iid=1, **ROGUE))
    await invoke(
        adapter,
        interaction_payload("campaign", opts(action="unlink"), user_id=ID_GM, iid=2, **ROGUE),
    )
    edit_campaign(service, 'gm_users = ["111"]', "gm_users = []")
    api.calls.clear()
    question = [{"name": "question", "type": 3, "value": "What is the truth about the baron?"}]
    places = [{}, {"channel_id": THREAD_ID}, {**ROGUE, "roles": [ROGUE_GM_ROLE_ID]}]
    for i, where in enumerate(places):
        await invoke(adapter, interaction_payload("lens", user_id=ID_GM, iid=10 + 3 * i, **where))
        await invoke(
            adapter, interaction_payload("ask", question, user_id=ID_GM, iid=11 + 3 * i, **where)
        )
        await invoke(
            adapter, interaction_payload("campaign", link, user_id=ID_GM, iid=12 + 3 * i, **where)
        )
    text = " ".join(all_text(b) for b in followups(api))
    assert "GM view" not in text and CANARY not in text and "Linked this channel" not in text
    assert await service.directory.campaign_for("discord", str(ROGUE_CHANNEL_ID)) is None


async def test_a_role_named_like_a_gm_role_id_is_not_that_role(env):
    """campaign.toml names the GM role by id as well; a server linked to the campaign (a home,
    where role names count) has a role someone *named* that id. Ids and names were one list,
    so the name matched the id; now a configured id matches only a member's role ids."""
    api, adapter, service = env
    edit_campaign(service, 'gm = ["GM"]', f'gm = ["GM", "{GM_ROLE_ID}"]')
    rogue = rogue_guild_payload()
    rogue["roles"][1] = role_payload(ROGUE_GM_ROLE_ID, str(GM_ROLE_ID), 1)
    adapter.client._connection._add_guild_from_data(rogue)
    await invoke(
        adapter,
        interaction_payload(
            "campaign", opts(action="link", slug="greyhold"), user_id=ID_GM, iid=1, **ROGUE
        ),
    )
    assert str(ROGUE_GUILD_ID) in await service.directory.homes("discord", "greyhold")
    api.calls.clear()
    impostor = {"user_id": 444, "roles": [ROGUE_GM_ROLE_ID], **ROGUE}
    question = [{"name": "question", "type": 3, "value": "What is the truth about the baron?"}]
    await invoke(adapter, interaction_payload("lens", iid=2, **impostor))
    await invoke(adapter, interaction_payload("ask", question, iid=3, **impostor))
    text = " ".join(all_text(b) for b in followups(api))
    assert "GM view" not in text and CANARY not in text
    # the real role, by id, is a GM (and a user whose roles are named otherwise)
    api.calls.clear()
    await invoke(
        adapter, interaction_payload("ask", question, user_id=GM, roles=[GM_ROLE_ID], iid=4)
    )
    assert CANARY in " ".join(all_text(b) for b in followups(api))


async def test_a_mention_from_an_uncached_server_is_not_a_dm_and_a_private_answer_stays_private(
    env,
):
    """discord.py has no guild object for a server it has not cached; such a mention was taken
    for a DM, so a personal lens's answer (one player's backstory) was posted in the channel, and
    a message that did not even mention the bot was answered. The channel's type decides."""
    api, adapter, service = env
    await service.directory.link(
        "discord", "555", "greyhold"
    )  # (its server learned from its messages)
    state = adapter.client._connection
    data = message_payload(
        "<@900000000000000002> who took the baron's ninth bell?",
        user_id=MIREL_USER,
        channel_id=555,
        guild_id=42,
    )
    channel, guild = state._get_guild_channel(data)
    assert guild is None  # (not cached)
    msg = adapter.incoming(
        user=discord.Message(state=state, channel=channel, data=data).author,
        channel=channel,
        guild_id=42,
        text="/lens",
    )
    assert not msg.is_dm and msg.guild_id == "42"
    await adapter.on_message(discord.Message(state=state, channel=channel, data=data))
    public = api.find("POST", "/channels/555/messages")
    assert public and all(MIREL_CANARY not in all_text(c.json) for c in public)
    assert "direct message" in all_text(public[-1].json)
    dm = api.find("POST", f"/channels/{MIREL_USER + 1}/messages")
    assert dm and MIREL_CANARY in all_text(dm[0].json)
    api.calls.clear()
    quiet = message_payload(
        "the baron's bell", user_id=PLAYER, channel_id=555, guild_id=42, mentions_bot=False, mid=3
    )
    await adapter.on_message(
        discord.Message(state=state, channel=state._get_guild_channel(quiet)[0], data=quiet)
    )
    assert not api.find("POST", "/messages")


async def test_thread_recap_schedules_end_with_their_channels_link_and_unlink(env, tmp_path):
    """A recap scheduled in a thread outlived its channel's re-link to another campaign (and its
    unlink), posting one campaign's recaps to another's players. Schedules now know their
    thread's parent, and a recap goes only where its campaign is linked when it is posted."""
    import datetime as dt

    from bot.scheduler import RecapScheduler
    from liminalis.testing import FrozenClock

    api, adapter, service = env
    make_tiny_campaign(tmp_path / "campaigns", slug="saltmarsh")
    posts: list[tuple[str, Reply]] = []

    async def poster(channel_id: str, reply: Reply) -> None:
        posts.append((channel_id, reply))

    clock = FrozenClock(dt.datetime(2026, 1, 2, 17, 0, tzinfo=dt.UTC))  # a Friday, before 18:00
    service.scheduler = scheduler = RecapScheduler(
        service, posters={"discord": poster}, clock=clock, tick_seconds=0
    )
    weekly = opts(schedule="0 18 * * 5")

    async def thread_schedules() -> list[str]:
        return [s.campaign for s in await scheduler.schedules() if s.channel_id == str(THREAD_ID)]

    await invoke(
        adapter, interaction_payload("recap", weekly, user_id=ID_GM, channel_id=THREAD_ID, iid=1)
    )
    assert "will be posted" in all_text(followups(api)[-1]) and await thread_schedules() == [
        "greyhold"
    ]
    relink = opts(action="link", slug="saltmarsh")
    await invoke(adapter, interaction_payload("campaign", relink, user_id=ID_GM, iid=2))
    asked = all_text(followups(api)[-1])  # a GM of the channel's campaign confirms first
    assert "the recap of **Greyhold** posted here stops (`0 18 * * 5`)" in asked, asked
    assert await thread_schedules() == ["greyhold"]
    relink += opts(confirm="yes")
    await invoke(adapter, interaction_payload("campaign", relink, user_id=ID_GM, iid=5))
    assert await thread_schedules() == []
    back = opts(action="link", slug="greyhold", confirm="yes")
    await invoke(adapter, interaction_payload("campaign", back, user_id=ID_GM, iid=3))
    await invoke(
        adapter, interaction_payload("recap", weekly, user_id=ID_GM, channel_id=THREAD_ID, iid=4)
    )
    clock.set(dt.datetime(2026, 1, 2, 18, 0, 30, tzinfo=dt.UTC))
    assert [c for c, _ in await scheduler.run_due()] == [
        "greyhold"
    ]  # the thread's parent is linked
    assert [c for c, _ in posts] == [str(THREAD_ID)]
    await invoke(
        adapter, interaction_payload("campaign", opts(action="unlink"), user_id=ID_GM, iid=5)
    )
    assert await thread_schedules() == []
    # a schedule that outlived its thread's link (stored before schedules knew their parents)
    await harness.db(service.engine).execute(
        "INSERT INTO recap_schedules (campaign, cron, platform, channel_id) VALUES ('greyhold', '0 18 * * 5', 'discord', ?)",
        (str(THREAD_ID),),
    )
    clock.advance(days=7)
    assert await scheduler.run_due() == [] and len(posts) == 1


async def test_a_strangers_link_says_the_same_whether_the_campaign_exists(env):
    """`/campaign link` told anyone whether a campaign existed, and its display name; a refusal
    is now one text for a real campaign and for a made-up one, at home and elsewhere."""
    api, adapter, _ = env
    adapter.client._connection._add_guild_from_data(rogue_guild_payload())
    seen = []
    for i, (who, slug) in enumerate(
        [(PLAYER, "greyhold"), (PLAYER, "nosuch"), (444, "greyhold"), (444, "nosuch")]
    ):
        where = {**ROGUE, "roles": [ROGUE_GM_ROLE_ID]} if who == 444 else {}
        await invoke(
            adapter,
            interaction_payload(
                "campaign", opts(action="link", slug=slug), user_id=who, iid=1 + i, **where
            ),
        )
        seen.append(followups(api)[-1]["content"].replace(f"`{who}`", "`<id>`"))
    # one text, but for the asker's own user id (said so they can pass it to a GM)
    assert (
        len(set(seen)) == 1
        and "Greyhold" not in seen[0]
        and "nosuch" not in seen[0]
        and "Only a GM" in seen[0]
        and "user id is `<id>`" in seen[0]
    )


async def test_campaign_status_lists_homes_to_gms_and_a_gm_releases_one(env):
    """A GM sees where role names count (each home server, and why); a player sees no servers.
    `/campaign release <server>` unlinks that server's channels, and with them its home."""
    api, adapter, service = env
    adapter.client._connection._add_guild_from_data(rogue_guild_payload())
    await invoke(
        adapter,
        interaction_payload(
            "campaign", opts(action="link", slug="greyhold"), user_id=ID_GM, iid=1, **ROGUE
        ),
    )
    await invoke(
        adapter,
        interaction_payload(
            "campaign", opts(action="status"), user_id=GM, roles=[GM_ROLE_ID], iid=2
        ),
    )
    gm = followups(api)[-1]
    assert (
        gm["flags"] & 64 and str(GUILD_ID) in gm["content"] and str(ROGUE_GUILD_ID) in gm["content"]
    )
    assert "/campaign release" in gm["content"]
    await invoke(
        adapter, interaction_payload("campaign", opts(action="status"), user_id=PLAYER, iid=3)
    )
    player = followups(api)[-1]["content"]
    assert (
        "Greyhold" in player and str(GUILD_ID) not in player and str(ROGUE_GUILD_ID) not in player
    )
    await invoke(
        adapter,
        interaction_payload(
            "campaign", opts(action="release", server=str(ROGUE_GUILD_ID)), user_id=PLAYER, iid=4
        ),
    )
    assert "Only a GM" in followups(api)[-1]["content"]
    assert str(ROGUE_GUILD_ID) in await service.directory.homes("discord", "greyhold")
    await invoke(
        adapter,
        interaction_payload(
            "campaign",
            opts(action="release", server=str(ROGUE_GUILD_ID)),
            user_id=GM,
            roles=[GM_ROLE_ID],
            iid=5,
        ),
    )
    released = followups(api)[-1]
    assert (
        released["flags"] & 64
        and "Released server" in released["content"]
        and "1 channel" in released["content"]
    )
    assert await service.directory.homes("discord", "greyhold") == {str(GUILD_ID)}
    assert await service.directory.campaign_for("discord", str(ROGUE_CHANNEL_ID)) is None
    await invoke(
        adapter, interaction_payload("lens", user_id=444, roles=[ROGUE_GM_ROLE_ID], iid=6, **ROGUE)
    )
    assert "GM view" not in all_text(followups(api)[-1])


async def test_slash_commands_are_registered_from_the_registry(env):
    """Every command and option of the registry is synced under its group, each option
    described, choices where the values are known, autocomplete where a source is declared;
    the `/gm` group is for server channels and hidden by default from members who may not
    manage messages (the run-time GM check stays the wall)."""
    api, adapter, _ = env
    synced = {c["name"]: c for c in api.find("PUT", "/guilds/123/commands")[0].json}
    assert set(synced) == {"lore", "gm"}
    gm, lore = synced["gm"], synced["lore"]
    assert int(gm["default_member_permissions"]) == discord.Permissions(manage_messages=True).value
    assert gm["dm_permission"] is False  # server channels only, where campaigns are linked
    assert lore.get("default_member_permissions") is None and lore["dm_permission"] is True
    for group in synced.values():
        assert group["description"] and group["description"] != "…"
    subcommands = {(g, o["name"]): o for g, c in synced.items() for o in c["options"]}
    assert {name for _, name in subcommands} == set(REGISTRY.names)
    for command in REGISTRY:
        payload = subcommands[(command.group, command.name)]
        assert payload["type"] == 1 and payload["description"] == command.description
        options = {o["name"]: o for o in payload.get("options", [])}
        assert set(options) == {o.name for o in command.options}, command.name
        for spec in command.options:
            got = options[spec.name]
            assert got["description"] == spec.description and got["description"] != "…"
            assert got.get("required", False) is spec.required
            assert [c["value"] for c in got.get("choices", [])] == list(spec.choices)
            assert got.get("autocomplete", False) is (spec.autocomplete is not None)
            assert (
                got["type"]
                == {"string": 3, "integer": 4, "attachment": 11, "mention": 9}[spec.kind]
            )
        app = adapter.tree.get_command(command.group).get_command(command.name)
        assert app is not None and app.extras["gm_only"] is (command.gm_only is True)
    assert all(
        subcommands[("gm", n)]["description"].startswith("GM:")
        for n in ("upload", "explain", "memory", "log")
    )
    tokens = {o["name"]: o for o in subcommands[("gm", "budget")]["options"]}["tokens"]
    assert (tokens["min_value"], tokens["max_value"]) == (500, 200_000)
    help_topic = {o["name"]: o for o in subcommands[("lore", "help")]["options"]}["command"]
    assert help_topic["autocomplete"] is True  # every command, others' new ones included


async def test_autocomplete_offers_commands_cron_presets_and_only_a_gms_campaigns(env):
    api, adapter, _ = env

    async def choices(name: str, option: str, value: str, **who) -> list[dict]:
        n = len(api.find("POST", "/callback"))
        opts = [{"name": option, "type": 3, "value": value, "focused": True}]
        await invoke(adapter, interaction_payload(name, opts, autocomplete=True, **who))
        return api.find("POST", "/callback")[n].json["data"]["choices"]

    helped = await choices("help", "command", "up", user_id=PLAYER)
    assert [c["value"] for c in helped] == ["upload"] and helped[0]["name"].startswith("/gm upload")
    crons = await choices("recap", "schedule", "", user_id=GM, roles=[GM_ROLE_ID])
    assert "0 18 * * 5" in [c["value"] for c in crons] and "off" in [c["value"] for c in crons]
    assert all(len(c["name"]) <= 100 for c in crons)
    assert await choices("campaign", "slug", "", user_id=PLAYER) == []  # a stranger learns none
    gm = await choices("campaign", "slug", "grey", user_id=GM, roles=[GM_ROLE_ID])
    assert [c["value"] for c in gm] == ["greyhold"]


async def test_a_typed_budget_set_reaches_the_command_without_text(env):
    """Discord's typed options go to the command as they are: no "/budget set …" text is built
    and parsed again (the parser here refuses to run)."""
    api, _, service = env
    seen: list = []
    budget = REGISTRY["budget"]

    def no_text(arg: str) -> dict:
        raise AssertionError(f"a typed command was parsed as text: {arg!r}")

    async def run(request, scope):
        seen.append(request)
        return await budget.run(request, scope)

    registry = Registry(
        [replace(c, parse=no_text, run=run) if c.name == "budget" else c for c in REGISTRY]
    )
    typed = BotService(service.engine, directory=service.directory, registry=registry)
    adapter = DiscordAdapter(typed, guild_ids=(123,), sync_commands=False)
    try:
        await adapter.client.login("fake-token")
        adapter.client._connection._add_guild_from_data(guild_payload())
        await invoke(
            adapter,
            interaction_payload(
                "budget",
                [
                    {"name": "action", "type": 3, "value": "set"},
                    {"name": "tokens", "type": 4, "value": 9000},
                    {"name": "scope", "type": 3, "value": "chat"},
                ],
                user_id=GM,
                roles=[GM_ROLE_ID],
            ),
        )
    finally:
        await adapter.client.close()
    (request,) = seen
    assert request.msg.text == "" and request.msg.command == "budget"
    assert dict(request.options) == {"action": "set", "tokens": 9000, "scope": "chat"}
    assert "set to 9,000 tokens" in all_text(followups(api)[-1])
    assert await service.engine.budget("greyhold", f"discord:{CHANNEL_ID}") == 9000
    assert await service.engine.budget("greyhold", None) == DEFAULT_CONTEXT_TOKENS


async def test_a_slash_ask_loads_the_campaign_config_once(env):
    """The defer's privacy, the file check and the answer share one scope: one config load and
    one lens per ``/ask``."""
    api, _, service = env
    calls = {"config": 0, "lens": 0}

    class Counting(BotService):
        async def config(self, slug):
            calls["config"] += 1
            return await super().config(slug)

        async def lens_of(self, msg, cfg):
            calls["lens"] += 1
            return await super().lens_of(msg, cfg)

    adapter = DiscordAdapter(
        Counting(service.engine, directory=service.directory), guild_ids=(123,), sync_commands=False
    )
    try:
        await adapter.client.login("fake-token")
        adapter.client._connection._add_guild_from_data(guild_payload())
        await invoke(
            adapter,
            interaction_payload(
                "ask",
                [{"name": "question", "type": 3, "value": "Who is the baron?"}],
                user_id=GM,
                roles=[GM_ROLE_ID],
            ),
        )
    finally:
        await adapter.client.close()
    assert (
        api.find("POST", "/callback")[0].json["data"]["flags"] & 64
    )  # the GM's answer: deferred privately
    assert "baron" in all_text(followups(api)[-1]).lower()
    assert calls == {"config": 1, "lens": 1}


async def test_the_relationship_map_is_attached_and_entity_autocomplete_keeps_the_wall(
    env, tmp_path
):
    from liminalis.knowledge.passes import KnowledgePasses
    from liminalis.passes import Passes
    from liminalis.testing import FrozenClock

    api, adapter, service = env
    root = tmp_path / "campaigns" / "greyhold"
    (root / "watch.md").write_text(
        "# Ilsa Marsh\n\nIlsa Marsh trusts Dobbin Reed. Ilsa Marsh commands the Greyhold Watch.\n"
        "Later Dobbin Reed and Ilsa Marsh walked the walls.\n"
    )
    (root / "gm" / "villain.md").write_text(
        "# Morwen Black\n\nMorwen Black trusts Corvin Ash. Morwen Black commands the Red Hand.\n"
        "Later Corvin Ash and Morwen Black burned the mill.\n"
    )
    passes = Passes(harness.db(service.engine), clock=FrozenClock())
    KnowledgePasses(passes).attach()
    await service.engine.ingest("greyhold")
    await passes.run_triggered("greyhold", "changed")
    opts = [{"name": "name", "type": 3, "value": "", "focused": True}]
    await invoke(adapter, interaction_payload("entity", opts, user_id=PLAYER, autocomplete=True))
    await invoke(
        adapter,
        interaction_payload(
            "entity", opts, user_id=GM, roles=[GM_ROLE_ID], autocomplete=True, iid=2
        ),
    )
    player_cb, gm_cb = [c.json for c in api.find("POST", "/callback")]
    player_names = [c["name"] for c in player_cb["data"]["choices"]]
    gm_names = [c["name"] for c in gm_cb["data"]["choices"]]
    assert "Ilsa Marsh" in player_names and "Morwen Black" not in player_names
    assert "Morwen Black" in gm_names
    await invoke(adapter, interaction_payload("map", [], user_id=PLAYER, iid=3))
    [sent] = [c for c in api.find("POST", "/webhooks/") if b"filename=" in c.raw]
    assert b'filename="greyhold-map.png"' in sent.raw and b"\x89PNG" in sent.raw
    assert b"Ilsa Marsh" in sent.raw and b"Morwen" not in sent.raw
