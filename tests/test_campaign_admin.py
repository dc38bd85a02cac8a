"""Campaigns without a shell, through the service: `/campaign create` → `link` →
`/ask` on a fresh data directory without touching a file; GMs and settings from chat; refusals
that say what to do with the asker's own ids; a GM's private upload by DM, and a player's DM
files refused with nothing stored. Real SQLite, real folders, a frozen clock."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest
from conftest import Tags, close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from bot.messages import Attachment, IncomingMessage
from bot.scheduler import RecapScheduler
from bot.service import BotService
from liminalis.lens import PLAYERS
from liminalis.testing import FrozenClock

OWNER = "100000000000000001"  # manages the Discord server
PLAYER = "100000000000000002"
FRIEND = "100000000000000003"
GUILD = "800000000000000001"
NOTES = b"---\ntitle: The Ferry\n---\n# The Ferry\n\nOld Maren keeps the ferry across the Vell for a copper a head.\n"


def msg(text: str, *, user: str = PLAYER, channel: str = "C1", **kw) -> IncomingMessage:
    kw.setdefault("guild_id", GUILD)
    return IncomingMessage(platform="discord", channel_id=channel, user_id=user, text=text, **kw)


def owner(text: str, **kw) -> IncomingMessage:
    return msg(text, user=OWNER, can_manage=True, **kw)


def dm(user: str, text: str = "", *, files: int = 1, platform: str = "discord", **kw):
    return IncomingMessage(
        platform=platform,
        channel_id=f"D{user}",
        user_id=user,
        text=text,
        is_dm=True,
        file_count=files,
        **kw,
    )


@pytest.fixture
async def fresh(tmp_path):
    """A data directory with no campaign at all, as a host starts."""
    engine = await make_engine(
        tmp_path,
        milvus=False,
        campaigns_dir=tmp_path / "campaigns",
        created_campaigns_dir=tmp_path / "data" / "campaigns",
        clock=FrozenClock(dt.datetime(2026, 3, 6, tzinfo=dt.UTC)),
    )
    service = BotService(engine, campaign_creators=frozenset({FRIEND}), slug_tag=Tags())
    yield service
    await close_engine(engine)


async def test_create_then_link_then_ask_without_touching_a_file(fresh, tmp_path):
    service = fresh
    refused = await service.handle(msg("/campaign create The Salt Road"))
    assert refused.error and refused.ephemeral
    assert "Manage Server" in refused.text and f"your Discord user id is `{PLAYER}`" in refused.text
    assert await service.engine.list_campaigns() == []

    created = await service.handle(owner("/campaign create The Salt Road"))
    assert not created.error and created.ephemeral, created.text
    assert "Created **The Salt Road** (`the-salt-road-t1`)" in created.text
    assert (tmp_path / "data" / "campaigns" / "the-salt-road-t1" / "campaign.toml").is_file()
    assert not (tmp_path / "campaigns").exists()  # the campaigns folder (a checkout) is not written
    assert await service.directory.campaign_for("discord", "C1") == "the-salt-road-t1"
    assert await service.directory.homes("discord", "the-salt-road-t1") == {GUILD}
    assert (await service.handle(owner("/lens"))).text.startswith(
        "In **The Salt Road** you see everything: the GM view"
    )

    # the creator links a second channel: a GM by user id, no role needed
    linked = await service.handle(owner("/campaign link the-salt-road-t1", channel="C2"))
    assert "Linked this channel to **The Salt Road**" in linked.text
    early = await service.handle(msg("/ask who keeps the ferry?", channel="C2"))
    assert "no indexed documents yet" in early.text and "/upload" in early.text
    empty = await service.handle(owner("/log"))  # a campaign with nothing yet has a log too
    assert not empty.error and "no questions from players" in empty.text

    upload = owner("/upload players", attachments=(Attachment("ferry.md", NOTES),))
    uploaded = await service.handle(upload)
    assert "Ingested 1 file(s) into **The Salt Road**" in uploaded.text, uploaded.text
    answer = await service.handle(msg("/ask who keeps the ferry?", channel="C2"))
    assert not answer.error and "Maren" in answer.text
    assert [s.title for s in answer.sources] == ["The Ferry"]
    log = await service.handle(owner("/log"))
    assert "1 question from players" in log.text and "The Ferry — 1 answer(s)" in log.text

    # the same name again is a campaign of its own: a name is not first come, first served
    again = await service.handle(owner("/campaign create The salt road!", channel="C3"))
    assert not again.error and "(`the-salt-road-t2`)" in again.text
    busy = await service.handle(owner("/campaign create Another"))
    assert busy.error and "plays another campaign" in busy.text


async def test_the_host_allows_a_creator_and_a_dm_or_the_console_creates_nothing(fresh):
    service = fresh
    made = await service.handle(msg("/campaign create Friends", user=FRIEND))
    assert not made.error, made.text
    in_dm = await service.handle(dm(OWNER, "/campaign create Mine", files=0, can_manage=True))
    assert in_dm.error and "table's channel" in in_dm.text
    console = IncomingMessage(
        platform="console", channel_id="console", user_id="console", text="/campaign create X"
    )
    assert "Discord or Slack" in (await service.handle(console)).text
    bad = await service.handle(owner("/campaign create ???", channel="C9"))
    assert bad.error and "letters or digits" in bad.text
    assert await service.engine.list_campaigns() == ["friends-t1"]


async def test_list_and_autocomplete_show_a_gm_their_campaigns_and_a_stranger_none(fresh):
    service = fresh
    await service.handle(owner("/campaign create Salt Road"))
    await service.handle(msg("/campaign create Friends", user=FRIEND, channel="C2"))
    mine = await service.handle(owner("/campaign list", channel="C3"))
    assert "**Salt Road** (`salt-road-t1`): 1 linked channel(s)" in mine.text
    assert "friends" not in mine.text.lower()  # another group's campaign is not named
    stranger = await service.handle(msg("/campaign list", channel="C9"))
    assert "no campaign" in stranger.text and "salt" not in stranger.text.lower()
    assert f"your Discord user id is `{PLAYER}`" in stranger.text
    assert await service.complete_campaigns(owner(""), "sa") == ["salt-road-t1"]
    assert await service.complete_campaigns(owner(""), "zz") == []
    assert await service.complete_campaigns(msg(""), "") == []


async def test_gms_are_added_and_removed_from_chat(fresh):
    service = fresh
    await service.handle(owner("/campaign create Salt Road"))
    refused = await service.handle(msg(f"/campaign gm add <@{PLAYER}>"))
    assert refused.error and "Only a GM" in refused.text and f"`{PLAYER}`" in refused.text
    added = await service.handle(owner(f"/campaign gm add <@{PLAYER}>"))
    assert f"User `{PLAYER}` is a GM of **Salt Road** now." == added.text
    assert (await service.handle(msg("/lens"))).text.startswith(
        "In **Salt Road** you see everything: the GM view"
    )
    role = "600000000000000007"
    await service.handle(owner(f"/campaign gm add <@&{role}>"))
    cfg = await service.config("salt-road-t1")
    assert cfg.roles.discord_gm_users == (OWNER, PLAYER) and cfg.roles.discord_gm_role_ids == (
        role,
    )
    listed = await service.handle(msg("/campaign gm"))
    assert f"Discord user `{OWNER}`" in listed.text and f"Discord role `{role}`" in listed.text
    assert "already" in (await service.handle(owner(f"/campaign gm add {PLAYER}"))).text
    await service.handle(owner(f"/campaign gm remove <@&{role}>"))
    await service.handle(msg(f"/campaign gm remove <@{OWNER}>"))  # a GM removes another
    assert (await service.handle(owner("/lens"))).text.endswith("(the players view).")
    last = await service.handle(msg(f"/campaign gm remove <@{PLAYER}>"))
    assert last.error and "at least one GM" in last.text
    bad = await service.handle(msg("/campaign gm add @somebody"))
    assert bad.error and "/campaign gm add @user" in bad.text


async def test_a_linked_channel_or_its_thread_changes_campaign_only_by_its_gm_who_confirms(fresh):
    service = fresh
    await service.handle(owner("/campaign create Salt Road"))  # C1: salt-road-t1
    await service.handle(msg("/campaign create Friends", user=FRIEND, channel="C2"))
    for where in ({"channel": "C1"}, {"channel": "T1", "parent_id": "C1"}):
        taken = await service.handle(msg("/campaign link friends-t2", user=FRIEND, **where))
        assert taken.error and "only one of its GMs" in taken.text, taken.text
    assert await service.directory.campaign_for("discord", "T1", "C1") == "salt-road-t1"
    await service.handle(msg(f"/campaign gm add <@{OWNER}>", user=FRIEND, channel="C2"))
    asked = await service.handle(owner("/campaign link friends-t2"))
    assert not asked.error and asked.ephemeral and "This channel plays **Salt Road**" in asked.text
    assert (
        "GM role names stop counting" in asked.text
        and "`/campaign link friends-t2 confirm`" in (asked.text)
    )
    assert await service.directory.campaign_for("discord", "C1") == "salt-road-t1"
    done = await service.handle(owner("/campaign link friends-t2 confirm"))
    assert "Linked this channel to **Friends**" in done.text
    assert await service.directory.campaign_for("discord", "C1") == "friends-t2"


async def test_a_removed_gm_takes_what_they_set_up_but_not_what_the_asker_holds(fresh):
    service = fresh
    r1, r2, r3 = "600000000000000001", "600000000000000002", "600000000000000003"
    await service.handle(owner("/campaign create Salt Road"))  # C1 on GUILD
    await service.handle(owner(f"/campaign gm add <@{PLAYER}>"))
    for added in (f"<@{FRIEND}>", f"<@&{r1}>", f"<@&{r2}>"):  # an alt, their role, the owner's
        assert "is a GM" in (await service.handle(msg(f"/campaign gm add {added}"))).text
    elsewhere = {"channel": "C9", "guild_id": "800000000000000002"}  # the co-GM's own server
    await service.handle(msg("/campaign link salt-road-t1", **elsewhere))
    await service.handle(msg(f"/campaign gm add <@&{r3}>", user=FRIEND))  # the alt's own
    listed = await service.handle(owner("/campaign gm"))
    assert f"Discord role `{r3}` — added by user `{FRIEND}`" in listed.text, listed.text
    removed = await service.handle(owner(f"/campaign gm remove <@{PLAYER}>", role_ids=(r2,)))
    assert not removed.error, removed.text
    text = removed.text
    assert f"User `{PLAYER}` is no longer a GM" in text
    assert f"User `{FRIEND}`, added by user `{PLAYER}`" in text and "makes them a GM again" in text
    assert f"Role `{r1}`" in text and f"Role `{r3}`, added by user `{FRIEND}`" in text
    assert "server `800000000000000002`: unlinked 1 channel(s)" in text
    assert f"Kept, though they set it up:\n• Role `{r2}`" in text and f"remove role:{r2}" in text
    cfg = await service.config("salt-road-t1")
    assert cfg.roles.discord_gm_users == (OWNER,) and cfg.roles.discord_gm_role_ids == (r2,)
    assert await service.directory.homes("discord", "salt-road-t1") == {GUILD}
    assert (await service.handle(msg("/lens", user=FRIEND))).text.endswith("(the players view).")


async def test_settings_are_written_to_campaign_toml_and_a_hand_edit_wins(fresh):
    service = fresh
    clock = FrozenClock(dt.datetime(2026, 3, 6, tzinfo=dt.UTC))
    service.scheduler = RecapScheduler(service, clock=clock, tick_seconds=0)
    await service.handle(owner("/campaign create Salt Road"))
    shown = await service.handle(owner("/campaign settings"))
    assert "uploads that say nothing: GM-only" in shown.text and "6,000 tokens" in shown.text
    assert "No recap schedule" in shown.text
    assert "players" in (await service.handle(owner("/campaign settings uploads players"))).text
    assert (await service.config("salt-road-t1")).upload_visibility == "players"
    await service.handle(owner("/campaign settings budget 9,000"))
    assert await service.engine.budget("salt-road-t1") == 9000
    # a schedule /recap schedule stored would shadow campaign.toml's: the new one replaces it
    await service.handle(owner("/recap schedule 0 9 * * 1"))
    recap = await service.handle(owner("/campaign settings recap 0 18 * * 5"))
    assert "`0 18 * * 5`" in recap.text and not recap.error, recap.text
    cfg = await service.config("salt-road-t1")
    assert (cfg.recap_cron, cfg.recap_channel) == ("0 18 * * 5", "discord:C1")
    assert [(s.cron, s.source) for s in await service.scheduler.schedules()] == [
        ("0 18 * * 5", "config")
    ]
    assert "5-field" in (await service.handle(owner("/campaign settings recap soon"))).text
    thread = await service.handle(owner("/campaign settings recap 0 1 * * *", parent_id="C1"))
    assert thread.error and "channel itself" in thread.text
    assert "Only a GM" in (await service.handle(msg("/campaign settings uploads gm"))).text
    path = cfg.root / "campaign.toml"
    path.write_text(
        path.read_text().replace('upload_visibility = "players"', 'upload_visibility = "gm"')
    )
    assert "GM-only" in (await service.handle(owner("/campaign settings"))).text  # read afresh
    off = await service.handle(owner("/campaign settings recap off"))
    assert "No recap schedule" in off.text and not (await service.config("salt-road-t1")).recap_cron


async def test_typed_options_reach_the_same_actions(fresh):
    service = fresh

    def typed(options: dict, **kw) -> IncomingMessage:
        return replace(owner("", **kw), command="campaign", options=options)

    made = await service.handle(typed({"action": "create", "name": "Typed Road", "slug": "typed"}))
    assert "(`typed-t1`)" in made.text
    await service.handle(
        typed({"action": "gm", "change": "add", "member": "<@&600000000000000009>"})
    )
    await service.handle(typed({"action": "settings", "uploads": "players", "budget": 7000}))
    cfg = await service.config("typed-t1")
    assert cfg.roles.discord_gm_role_ids == ("600000000000000009",)
    assert cfg.upload_visibility == "players" and await service.engine.budget("typed-t1") == 7000


# -- a GM's private upload by DM ------------------------------------------------------------


@pytest.fixture
async def two(tmp_path):
    """The tiny campaign (Discord GM by id "111", Slack GM "UGM00001") and a second one."""
    make_tiny_campaign(tmp_path / "campaigns")
    make_tiny_campaign(tmp_path / "campaigns", "eastmarch")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    service = BotService(engine)
    yield service, tmp_path
    await close_engine(engine)


async def test_a_gm_uploads_privately_by_dm(two):
    service, tmp_path = two
    (tmp_path / "campaigns" / "eastmarch" / "campaign.toml").write_text(
        '[roles.discord]\ngm_users = ["999"]\n'
    )
    pending = await service.begin(dm("111", "players session"))
    assert pending.is_gm and pending.private  # the adapter fetches the files, and answers privately
    reply = await pending.finish((Attachment("ferry.md", NOTES),))
    assert "Ingested 1 file(s) into **Greyhold**" in reply.text and "players, session" in reply.text
    assert (tmp_path / "uploads" / "greyhold" / "ferry.md").is_file()
    titles = [t for _, t in await service.engine.titles("greyhold", frozenset({PLAYERS}))]
    assert "The Ferry" in titles
    slack = await service.begin(dm("UGM00001", "/upload", platform="slack"))
    assert slack.is_gm and slack.scope.config.slug == "greyhold"


async def test_a_gm_of_two_campaigns_names_one(two):
    service, tmp_path = two
    (tmp_path / "campaigns" / "eastmarch" / "campaign.toml").write_text(
        'name = "Eastmarch"\n[roles.discord]\ngm_users = ["111"]\n'
    )
    which = await service.begin(dm("111"))
    assert not which.is_gm
    reply = await which.finish()
    assert reply.error and "`greyhold`" in reply.text and "`eastmarch`" in reply.text
    named = await service.begin(dm("111", "eastmarch gm"))
    assert named.is_gm and named.scope.config.slug == "eastmarch"
    reply = await named.finish((Attachment("plans.md", NOTES),))
    assert "into **Eastmarch**" in reply.text and "GM-only" in reply.text


async def test_a_players_dm_files_are_refused_and_nothing_is_stored(two):
    service, tmp_path = two
    for text in ("", "players", "/upload"):
        pending = await service.begin(dm(PLAYER, text))
        assert not pending.is_gm  # the adapter never downloads them
        reply = await pending.finish((Attachment("notes.md", NOTES),))
        assert reply.error and "Only a GM can upload" in reply.text
        assert (
            f"your Discord user id is `{PLAYER}`" in reply.text
            and "Nothing was stored" in reply.text
        )
    assert not (tmp_path / "uploads").exists()
    # a GM by role name: roles do not reach a DM, and the refusal says how to be known by id
    role_gm = await service.begin(dm("777", roles=("GM",), role_ids=()))
    assert not role_gm.is_gm and "user id only" in (await role_gm.finish()).text
    # a question with a screenshot is a question, its file never fetched
    question = await service.begin(dm(PLAYER, "who guards the keep?"))
    assert not question.is_gm and "not linked to a campaign" in (await question.finish()).text
    assert not (tmp_path / "uploads").exists()
