"""BotService helpers the adapters rely on, the render helpers, and `serve`'s startup report."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import harness
import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import GM_TITLE, make_tiny_campaign

from bot.render import ZWSP, sanitize, split_text, truncate
from bot.serve import platform_plan, serve
from bot.service import BotService, IncomingMessage
from bot.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
async def service(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    svc = BotService(engine)
    await svc.directory.link("discord", "C1", "greyhold")
    yield svc
    await close_engine(engine)


def msg(
    text: str, *, roles=(), channel="C1", dm=False, known=True, guild=None, user="9", bot_dm=None
) -> IncomingMessage:
    """A Discord message; a DM is the member's own with the bot unless ``bot_dm`` says not."""
    return IncomingMessage(
        bot_dm=dm if bot_dm is None else bot_dm,
        platform="discord",
        channel_id=channel,
        user_id=user,
        text=text,
        roles=tuple(roles),
        is_dm=dm,
        roles_known=known,
        guild_id=guild,
    )


async def test_discord_role_names_count_only_on_the_campaigns_home_servers(service):
    """The first message from a linked channel claims its server; another server's role named
    "GM" neither links the campaign nor sees as a GM; a GM by user id may link there (adding
    that server); ``[roles.discord] guilds`` in campaign.toml overrides every claim."""
    assert "GM view" in (await service.handle(msg("/lens", roles=["GM"], guild="1000"))).text
    assert await service.directory.homes("discord", "greyhold") == {"1000"}
    refused = await service.handle(
        msg("/campaign link greyhold", roles=["GM"], channel="C2", guild="2000")
    )
    assert refused.error and "Only a GM" in refused.text and "Greyhold" not in refused.text
    assert await service.directory.campaign_for("discord", "C2") is None
    assert (
        "GM view"
        not in (await service.handle(msg("/lens", roles=["GM"], channel="C1", guild="2000"))).text
    )
    linked = await service.handle(
        msg("/campaign link greyhold", channel="C2", guild="2000", user="111")
    )
    assert not linked.error and await service.directory.homes("discord", "greyhold") == {
        "1000",
        "2000",
    }
    assert (
        "GM view"
        in (await service.handle(msg("/lens", roles=["GM"], channel="C2", guild="2000"))).text
    )

    class Pinned(BotService):
        async def config(self, slug):
            cfg = await super().config(slug)
            return replace(cfg, roles=replace(cfg.roles, discord_guilds=("3000",)))

    pinned = Pinned(service.engine, directory=service.directory)
    assert "GM view" not in (await pinned.handle(msg("/lens", roles=["GM"], guild="1000"))).text
    assert "GM view" in (await pinned.handle(msg("/lens", roles=["GM"], guild="3000"))).text
    assert (
        "GM view" in (await pinned.handle(msg("/lens", guild="1000", user="111"))).text
    )  # ids count anywhere


async def test_will_be_ephemeral_predicts_handle(service):
    cases = [
        (msg("/ask who is the baron"), False),
        (msg("/ask who is the baron", roles=["GM"]), True),
        (msg("/ask who is the baron", roles=["Mirel"]), True),  # a personal lens: private too
        (
            msg("/ask who is the baron", roles=["Mirel"], dm=True),
            False,
        ),  # (the member's own DM with the bot is private already)
        (msg("/ask who is the baron", roles=["Mirel"], dm=True, bot_dm=False), True),  # not so
        (msg("/help"), True),
        (msg("/recap"), False),
        (msg("/campaign status"), True),
        (msg("/campaign link greyhold", roles=["GM"]), False),
        (msg("/ask x", channel="unlinked"), True),  # an error reply: predicted private
    ]
    for m, expected in cases:
        assert await service.will_be_ephemeral(m) is expected, m.text
        assert (await service.handle(m)).ephemeral is expected, m.text


async def test_complete_titles_respects_lens_and_limit(service):
    players = await service.complete_titles(msg(""), "baron")
    gm = await service.complete_titles(msg("", roles=["GM"]), "baron")
    assert "Baron Aldric" in players and GM_TITLE not in players
    assert GM_TITLE in gm
    assert await service.complete_titles(msg("", roles=["GM"], known=False), "baron") == players
    assert await service.complete_titles(msg("", channel="nowhere"), "") == []


async def test_handle_never_raises_on_hostile_input(service):
    for text in [
        "",
        "/",
        "/nope",
        "/pin add",
        "/budget set lots",
        "/recap 99",
        "/campaign link ../../etc",
        "/recap schedule 0 9 * * 1",
    ]:
        reply = await service.handle(msg(text))
        assert reply.text and reply.error, text
    assert (await service.handle(msg("\x00" * 10))).text


def test_a_command_name_ends_at_any_whitespace():
    from bot.commands import REGISTRY

    assert REGISTRY.split("/ask\nwho is the baron?") == ("ask", "who is the baron?")
    assert REGISTRY.split("/PIN\tadd Baron") == ("pin", "add Baron")
    assert REGISTRY.split("/help") == ("help", "")


def test_sanitize_and_split():
    d = sanitize("@everyone @here <@&1> <@2> <@!3>", platform="discord")
    assert (
        "@everyone" not in d
        and "@here" not in d
        and "<@&1>" not in d
        and "<@2>" not in d
        and "<@!3>" not in d
    )
    assert d.replace(ZWSP, "") == "@everyone @here <@&1> <@2> <@!3>"
    s = sanitize("<!channel> & <@U1> @here", platform="slack")
    assert "<" not in s and "&amp;" in s and "@here" not in s
    parts = split_text("para one.\n\n" + "x" * 50 + " " + "y" * 50, 60)
    assert all(0 < len(p) <= 60 for p in parts) and parts[0] == "para one."
    assert split_text("z" * 130, 50) == ["z" * 50, "z" * 50, "z" * 30]
    assert truncate("abcdef", 4) == "abc…" and truncate("abc", 4) == "abc"
    # A code block split across chunks is closed and reopened, each chunk still within the limit.
    block = (
        "Stat block:\n```\n"
        + "\n".join(f"STR {i:02d} DEX {i:02d} CON {i:02d}" for i in range(60))
        + "\n```\nDone."
    )
    parts = split_text(block, 400)
    assert len(parts) > 2 and all(0 < len(p) <= 400 and p.count("```") % 2 == 0 for p in parts)
    assert "".join(p.replace("```\n", "").replace("\n```", "") for p in parts).count("STR") == 60


async def test_serve_reports_off_platforms(capsys):
    lines: list[str] = []
    assert await serve(Settings(), out=lines.append) == 1
    assert lines[0] == "discord: off (DISCORD_TOKEN is not set)"
    assert lines[1].startswith("slack: off (SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set")
    plan = {
        p.name: p
        for p in platform_plan(
            Settings(discord_token="t", discord_guild_ids=(5,), discord_shards=True)
        )
    }
    assert (
        plan["discord"].enabled
        and "5" in plan["discord"].reason
        and "AutoSharded" in plan["discord"].reason
    )
    assert "t" not in plan["discord"].reason.split()  # the token itself never prints


def test_python_m_bot_says_which_platforms_are_off(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "bot"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert "discord: off (DISCORD_TOKEN is not set)" in r.stdout
    assert "slack: off" in r.stdout


def test_campaign_toml_names_home_servers(tmp_path):
    from liminalis.campaign import load_campaign

    root = make_tiny_campaign(tmp_path)
    toml = root / "campaign.toml"
    toml.write_text(
        toml.read_text().replace(
            'gm_users = ["111"]', 'gm_users = ["111"]\nguilds = ["3000", 4000]'
        )
    )
    assert load_campaign(root).roles.discord_guilds == (
        "3000",
        "4000",
    )  # an unquoted id is read as text


def test_gm_folders_match_without_regard_to_case(tmp_path):
    """On a case-insensitive disk GM/ is gm/: its files are GM-only, never published."""
    from liminalis.campaign import load_campaign

    cfg = load_campaign(make_tiny_campaign(tmp_path))
    assert cfg.gm_paths == ("gm/**",)
    assert all(cfg.is_gm_path(p) for p in ("gm/plot.md", "GM/plan.md", "Gm/deep/Notes.MD"))
    assert not any(cfg.is_gm_path(p) for p in ("baron.md", "gmnotes.md", "sessions/session-01.md"))


async def test_budget_and_pin_commands_say_what_they_did(service):
    gm = dict(roles=["GM"])
    assert "6,000" in (await service.handle(msg("/budget show"))).text
    service.responder.budget_tokens = 12_000  # LIMINALIS_CONTEXT_BUDGET_TOKENS: what /ask uses
    assert "12,000" in (await service.handle(msg("/budget show"))).text
    for bad in ["/budget set ²", "/budget set 4000 lots", "/budget set 4000 5000"]:
        reply = await service.handle(msg(bad, **gm))
        assert reply.error and "Usage" in reply.text, bad
    reply = await service.handle(msg("/budget set 4,000 CHAT", **gm))
    assert "for this chat set to 4,000" in reply.text
    assert "4,000" in (await service.handle(msg("/budget show"))).text
    reply = await service.handle(msg("/pin remove Baron Aldric", **gm))
    assert reply.error and "not pinned" in reply.text
    assert not (await service.handle(msg("/pin add Baron Aldric", **gm))).error
    reply = await service.handle(msg("/pin remove Baron Aldric", **gm))
    assert not reply.error and "Unpinned" in reply.text


def test_budget_settings_are_checked_at_start():
    from liminalis.errors import ConfigError

    for env in (
        {"LIMINALIS_CONTEXT_BUDGET_TOKENS": "0"},
        {"LIMINALIS_CONTEXT_BUDGET_TOKENS": "10000000"},
        {"LIMINALIS_DAILY_TOKEN_BUDGET": "-5"},
    ):
        with pytest.raises(ConfigError):
            Settings.from_env(env)
    ok = Settings.from_env(
        {"LIMINALIS_CONTEXT_BUDGET_TOKENS": "12000", "LIMINALIS_DAILY_TOKEN_BUDGET": "0"}
    )
    assert ok.context_budget_tokens == 12000 and ok.daily_token_budget == 0


def test_settings_read_a_dotenv_file_under_the_environment(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text(
        "# copied from .env.example\nLIMINALIS_CONTEXT_BUDGET_TOKENS=9000\n"
        'export LIMINALIS_LOG_LEVEL="WARNING"\nANTHROPIC_API_KEY=sk-from-file\n'
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    settings = Settings.from_env(env_file=tmp_path / ".env")
    assert settings.context_budget_tokens == 9000 and settings.log_level == "WARNING"
    assert settings.anthropic_api_key == "sk-from-env"  # the real environment wins
    monkeypatch.delenv("LIMINALIS_CONTEXT_BUDGET_TOKENS", raising=False)
    assert Settings.from_env(env_file=tmp_path / "missing.env").context_budget_tokens == 6000


async def test_serve_indexes_every_campaign_and_skips_a_broken_one(tmp_path):
    """`serve` indexes all campaigns, not only the console's default (emberfall need not exist),
    and a campaign that fails to load is reported, not a failed start."""
    from bot.serve import index_campaigns

    make_tiny_campaign(tmp_path / "campaigns")
    broken = make_tiny_campaign(tmp_path / "campaigns", slug="broken")
    (broken / "campaign.toml").write_text("lenses = 5\n")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        lines: list[str] = []
        assert await index_campaigns(engine, lines.append) == ["greyhold"]
        assert "indexing greyhold …" in lines and any(
            x.startswith("broken: skipped") for x in lines
        )
        assert await engine.is_indexed("greyhold")
    finally:
        await close_engine(engine)


async def test_numbers_a_user_types_never_reach_int_unchecked_and_a_thread_unlink_says_what_it_did(
    service,
):
    gm = dict(roles=["GM"])
    for bad in ["/recap ²", "/recap " + "9" * 3990, "/budget set " + "9" * 3980]:
        reply = await service.handle(msg(bad, **gm))
        assert reply.error and "Usage" in reply.text and "wrong on my side" not in reply.text, bad[
            :20
        ]
    # Past int()'s 4,300 digits the message is longer than any command reads: refused by length.
    reply = await service.handle(msg("/budget set " + "9" * 5000, **gm))
    assert reply.error and "too long" in reply.text
    thread = IncomingMessage(
        platform="discord",
        channel_id="T1",
        parent_id="C1",
        user_id="9",
        roles=("GM",),
        text="/campaign unlink",
    )
    reply = await service.handle(thread)
    assert "follows its channel" in reply.text
    assert (
        await service.directory.campaign_for("discord", "T1", "C1") == "greyhold"
    )  # still linked, as it says


async def test_a_question_in_a_dm_says_where_to_ask(service):
    """A DM can never be linked (/campaign link needs a GM, and a DM is always the players lens):
    "a GM can link it" sent people to a dead end."""
    for text in ["who guards the keep?", "/campaign status"]:
        reply = await service.handle(msg(text, channel="D5", dm=True))
        assert (
            "ask in your campaign's channel" in reply.text and "/campaign link" not in reply.text
        ), text


async def test_a_campaign_with_no_discord_server_yet_is_not_claimed_by_a_role_name(service):
    """No Discord channel linked, no server claimed: whoever invites the public bot first and
    names a role "GM" used to claim the campaign and read its secrets. The first link now takes
    a GM by user (or role) id; that link claims the server, where role names then count."""
    await service.directory.unlink("discord", "C1")  # (the fixture's link) no Discord channel left
    rogue = await service.handle(
        msg("/campaign link greyhold", roles=["GM"], channel="R1", guild="6666")
    )
    assert rogue.error and "Only a GM" in rogue.text and "Greyhold" not in rogue.text
    assert await service.directory.campaign_for("discord", "R1") is None
    assert (
        "GM view"
        not in (await service.handle(msg("/lens", roles=["GM"], channel="R1", guild="6666"))).text
    )
    gm = await service.handle(
        msg("/campaign link greyhold", channel="C1", guild="1000", user="111")
    )
    assert not gm.error and await service.directory.homes("discord", "greyhold") == {"1000"}
    assert (
        "GM view"
        in (await service.handle(msg("/lens", roles=["GM"], channel="C1", guild="1000"))).text
    )
    assert (
        "GM view"
        not in (await service.handle(msg("/lens", roles=["GM"], channel="R1", guild="6666"))).text
    )


async def test_sigterm_stops_serving_with_cleanup():
    """`docker stop` / systemd send SIGTERM: serving stops, everything it opened closes on the
    way out, and the exit is clean (before, no cleanup ran; as PID 1 it was ignored)."""
    import asyncio
    import os
    import signal

    from bot.serve import stop_on_sigterm

    closed: list[bool] = []

    async def work() -> int:
        try:
            await asyncio.sleep(60)
            return 5
        finally:
            closed.append(True)

    lines: list[str] = []
    asyncio.get_running_loop().call_later(0.2, os.kill, os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(stop_on_sigterm(work(), lines.append), 10) == 0
    assert closed == [True] and lines == ["SIGTERM: shutting down"]


async def test_a_data_directory_from_before_servers_were_recorded(tmp_path):
    """Its links have no server, and its ``campaign_homes`` rows claimed servers for good. Those
    rows no longer count: a server is a home only while a channel of it is linked, and a link
    made before servers were recorded has its server recorded from its first message."""
    import sqlite3

    make_tiny_campaign(tmp_path / "campaigns")
    old = sqlite3.connect(tmp_path / "db.sqlite3")
    old.executescript("""
        CREATE TABLE channel_links (platform TEXT NOT NULL, channel_id TEXT NOT NULL, campaign TEXT NOT NULL,
            linked_at REAL, PRIMARY KEY (platform, channel_id));
        CREATE TABLE campaign_homes (platform TEXT NOT NULL, campaign TEXT NOT NULL, home_id TEXT NOT NULL,
            claimed_at REAL, PRIMARY KEY (platform, campaign, home_id));
        CREATE TABLE recap_schedules (campaign TEXT PRIMARY KEY, cron TEXT NOT NULL, platform TEXT NOT NULL,
            channel_id TEXT NOT NULL);
        INSERT INTO channel_links VALUES ('discord', 'C1', 'greyhold', 0);
        INSERT INTO campaign_homes VALUES ('discord', 'greyhold', '6666', 0);
        INSERT INTO recap_schedules VALUES ('greyhold', '0 18 * * 5', 'discord', 'C1');
    """)
    old.commit()
    old.close()
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        service = BotService(engine)
        # the server an unlinked claim named: a role named GM there is no GM, so cannot link
        refused = await service.handle(
            msg("/campaign link greyhold", roles=["GM"], channel="R1", guild="6666")
        )
        assert refused.error and await service.directory.campaign_for("discord", "R1") is None
        assert await service.directory.homes("discord", "greyhold") == frozenset()
        # the linked channel's own server, learned from its first message, is the home
        assert (
            "GM view"
            in (await service.handle(msg("/lens", roles=["GM"], channel="C1", guild="1000"))).text
        )
        assert await service.directory.homes("discord", "greyhold") == {"1000"}
        rows = await harness.rows(engine, "SELECT channel_id, parent_id FROM recap_schedules")
        assert [(r["channel_id"], r["parent_id"]) for r in rows] == [
            ("C1", None)
        ]  # kept, its new column empty
    finally:
        await close_engine(engine)


async def test_homes_from_campaign_toml_are_listed_and_outlast_a_release(service):
    """``[roles.discord] guilds`` lists the homes itself: the GM's status says so, and a release
    unlinks that server's channels but cannot undo the host's list (the reply says where to)."""

    class Listed(BotService):
        async def config(self, slug):
            cfg = await super().config(slug)
            return replace(cfg, roles=replace(cfg.roles, discord_guilds=("100000000000000000",)))

    listed = Listed(service.engine, directory=service.directory)
    gm = {"user": "111", "channel": "C1", "guild": "100000000000000000"}
    await listed.handle(msg("/lens", **gm))  # (C1's server is learned)
    status = (await listed.handle(msg("/campaign status", **gm))).text
    assert (
        "`100000000000000000`: listed in campaign.toml" in status
        and "1 channel(s) linked" in status
    )
    assert (
        "100000000000000000"
        not in (await listed.handle(msg("/campaign status", channel="C1"))).text
    )
    assert (await listed.handle(msg("/campaign release 12", **gm))).error
    released = await listed.handle(msg("/campaign release 100000000000000000", **gm))
    assert "Unlinked 1 channel(s)" in released.text and "stays a home" in released.text
    assert await service.directory.campaign_for("discord", "C1") is None


async def test_a_thread_schedule_from_before_parents_were_recorded_learns_its_parent(service):
    """A recap schedule set in a thread by an earlier version has no parent, so the thread follows
    no link and its recaps would stop; the thread's next message records the parent."""
    from liminalis.store.rows import ScheduleRow

    await harness.db(service.engine).schedules.set(
        ScheduleRow(
            campaign="greyhold",
            cron="0 18 * * 5",
            platform="discord",
            channel_id="T1",
            parent_id=None,
        )
    )
    await service.handle(
        IncomingMessage(
            platform="discord", channel_id="T1", parent_id="C1", user_id="9", text="/lens"
        )
    )
    (row,) = await harness.db(service.engine).schedules.all()
    assert row.parent_id == "C1"
    assert (
        await service.directory.campaign_for("discord", row.channel_id, row.parent_id) == "greyhold"
    )
