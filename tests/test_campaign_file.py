"""campaign.toml written by the bot: a new campaign's file, GMs added and removed,
settings set — comments and unknown keys kept, every write atomic and readable, a hand edit
read afresh — and ``Engine.create_campaign``/``edit_campaign`` over real folders."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import SAMPLE, close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from liminalis.campaign import load_campaign, parse_campaign
from liminalis.campaign_file import (
    GmRef,
    add_gm,
    new_campaign_toml,
    remove_gm,
    set_settings,
    slug_for,
    write_atomically,
)
from liminalis.errors import ConfigError, InvalidInput

ALICE = GmRef("discord", "user", "123456789012345678")
TABLE_ROLE = GmRef("discord", "role", "223456789012345678")


def test_a_slug_comes_from_the_name():
    assert slug_for("L'Été des Cendres") == "l-ete-des-cendres"
    assert slug_for("  The Greyhold   Chronicles!! ") == "the-greyhold-chronicles"
    assert len(slug_for("x" * 200)) == 63
    with pytest.raises(InvalidInput) as err:
        slug_for("!!! ???")
    assert "letters or digits" in err.value.user_message


def test_a_new_campaign_reads_back_with_its_gm_and_a_name_that_needs_quoting():
    text = new_campaign_toml('The "Bell" \\ Candle', ALICE)
    cfg = parse_campaign(text, Path("."), "bell")
    assert cfg.name == 'The "Bell" \\ Candle'
    assert cfg.roles.discord_gm_users == (ALICE.id,)
    assert cfg.upload_visibility == "gm" and cfg.gm_paths == ("gm/**",) and not cfg.recap_cron
    assert "# Written by `/campaign create`" in text  # a person reading it is told what it is
    slack = parse_campaign(new_campaign_toml("x", GmRef("slack", "user", "U1")), Path("."), "x")
    assert slack.roles.slack_gm_users == ("U1",) and not slack.roles.discord_gm_users


def test_gms_are_added_and_removed_keeping_comments_and_unknown_keys():
    original = (SAMPLE / "campaign.toml").read_text(encoding="utf-8")
    original += '\n[house_rules]\ncrits = "double dice"  # a key this code does not know\n'
    text, changed = add_gm(original, ALICE)
    assert changed and add_gm(text, ALICE) == (text, False)  # twice is once
    text, _ = add_gm(text, TABLE_ROLE)
    text, _ = add_gm(text, GmRef("slack", "usergroup", "S0GMS"))
    for line in original.splitlines():
        if line.startswith("#") or "double dice" in line:
            assert line in text, line  # every comment, and the unknown key, kept
    cfg = parse_campaign(text, Path("."), "emberfall")
    assert cfg.roles.discord_gm_users == (ALICE.id,)
    assert cfg.roles.discord_gm_role_ids == (TABLE_ROLE.id,)
    assert cfg.roles.discord_gm_role_names == ("GM", "Game Master")  # names stay beside ids
    assert cfg.roles.slack_gm_usergroups == ("S0GMS",)
    assert cfg.description == load_campaign(SAMPLE).description
    text, removed = remove_gm(text, ALICE)
    assert removed and remove_gm(text, ALICE) == (text, False)
    assert parse_campaign(text, Path("."), "emberfall").roles.discord_gm_users == ()


def test_the_last_gm_is_never_removed():
    text = new_campaign_toml("Greyhold", ALICE)
    text, _ = add_gm(text, TABLE_ROLE)
    text, _ = remove_gm(text, TABLE_ROLE)
    with pytest.raises(InvalidInput) as err:
        remove_gm(text, ALICE)
    assert "at least one GM" in err.value.user_message


def test_settings_are_written_where_campaign_toml_keeps_them():
    text = set_settings(
        new_campaign_toml("Greyhold", ALICE),
        recap_cron="0 18 * * 5",
        recap_channel="discord:700000000000000001",
        upload_visibility="players",
    )
    cfg = parse_campaign(text, Path("."), "greyhold")
    assert (cfg.recap_cron, cfg.recap_channel, cfg.upload_visibility) == (
        "0 18 * * 5",
        "discord:700000000000000001",
        "players",
    )
    off = parse_campaign(set_settings(text, recap_cron="", recap_channel=""), Path("."), "g")
    assert off.recap_cron == "" and off.upload_visibility == "players"
    bare = parse_campaign(set_settings("", upload_visibility="players"), Path("."), "g")
    assert bare.upload_visibility == "players"  # a campaign with no file yet gets one


def test_a_file_the_bot_cannot_edit_is_refused_with_what_to_do():
    with pytest.raises(ConfigError) as err:
        add_gm("name = \n", ALICE)
    assert "syntax error" in err.value.user_message
    with pytest.raises(ConfigError) as err:
        add_gm('roles = "everyone"\n', ALICE)
    assert "`roles`" in err.value.user_message and "by hand" in err.value.user_message


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "c" / "campaign.toml"
    write_atomically(path, 'name = "a"\n')
    write_atomically(path, 'name = "b"\n')
    assert path.read_text() == 'name = "b"\n'
    assert [p.name for p in path.parent.iterdir()] == ["campaign.toml"]


@pytest.fixture
async def engine(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    eng = await make_engine(
        tmp_path, milvus=False, created_campaigns_dir=tmp_path / "data" / "campaigns"
    )
    yield eng
    await close_engine(eng)


async def test_a_created_campaign_lives_under_the_data_directory_and_is_found(engine, tmp_path):
    cfg = await engine.create_campaign("The Salt Road", gm=ALICE)
    assert cfg.slug == "the-salt-road" and cfg.name == "The Salt Road"
    assert cfg.root == tmp_path / "data" / "campaigns" / "the-salt-road"
    assert (cfg.root / "campaign.toml").is_file()
    assert "the-salt-road" in await engine.list_campaigns()
    assert (await engine.campaign("the-salt-road")).roles.discord_gm_users == (ALICE.id,)
    assert not await engine.was_indexed("the-salt-road")  # nothing to index until a document
    for taken in ("The Salt Road", "Greyhold"):  # made here, or a folder of campaigns_dir
        with pytest.raises(InvalidInput) as err:
            await engine.create_campaign(taken, gm=ALICE)
        assert "exists already" in err.value.user_message
    other = await engine.create_campaign("Salt", gm=ALICE, slug="salt-2")
    assert other.slug == "salt-2"


async def test_a_tagged_slug_is_drawn_again_while_taken(engine, tmp_path):
    """From chat a slug is tagged: a taken one (made here, a folder of campaigns_dir) is drawn
    again, a long name is cut to keep the slug a slug, and only taken draws give up."""
    drawn = iter(["aa", "aa", "zz", "bb", "cc"])
    (tmp_path / "campaigns" / "greyhold-zz").mkdir()
    first = await engine.create_campaign("Greyhold", gm=ALICE, tag=lambda: next(drawn))
    again = await engine.create_campaign("Greyhold", gm=ALICE, tag=lambda: next(drawn))
    assert (first.slug, again.slug) == ("greyhold-aa", "greyhold-bb")
    long = await engine.create_campaign("x" * 100, gm=ALICE, tag=lambda: next(drawn))
    assert long.slug == "x" * 60 + "-cc" and (await engine.campaign(long.slug)).name == "x" * 100
    with pytest.raises(InvalidInput) as err:
        await engine.create_campaign("Greyhold", gm=ALICE, tag=lambda: "aa")
    assert "try again" in err.value.user_message


async def test_two_campaigns_made_at_once_are_one(engine):
    results = await asyncio.gather(
        engine.create_campaign("Twins", gm=ALICE),
        engine.create_campaign("Twins", gm=TABLE_ROLE),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["CampaignConfig", "InvalidInput"]


async def test_edits_at_once_all_land_and_a_hand_edit_is_kept(engine):
    await engine.create_campaign("Greyhold Two", gm=ALICE)
    refs = [GmRef("discord", "user", f"30000000000000000{i}") for i in range(5)]
    await asyncio.gather(
        *(engine.edit_campaign("greyhold-two", lambda t, r=r: add_gm(t, r)[0]) for r in refs)
    )
    cfg = await engine.campaign("greyhold-two")
    assert set(cfg.roles.discord_gm_users) == {ALICE.id, *(r.id for r in refs)}
    path = cfg.root / "campaign.toml"
    path.write_text(path.read_text().replace("lenses = []", 'lenses = ["mirel"]  # by hand'))
    assert (await engine.campaign("greyhold-two")).lenses == ("mirel",)  # read on the next message
    cfg = await engine.edit_campaign(
        "greyhold-two", lambda t: set_settings(t, upload_visibility="players")
    )
    assert cfg.lenses == ("mirel",) and cfg.upload_visibility == "players"
    assert 'lenses = ["mirel"]  # by hand' in path.read_text()
