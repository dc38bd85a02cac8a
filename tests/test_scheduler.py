"""Recap scheduling with a frozen clock: once per slot, survives restart, never double-posts."""

from __future__ import annotations

import asyncio
import datetime as dt
import os

import harness
import pytest
from conftest import close_engine, make_engine, upgraded_engine
from fakes.tiny_campaign import CANARY, make_tiny_campaign

from bot.cron import parse_cron
from bot.directory import Directory
from bot.scheduler import RecapScheduler, latest_slot, parse_target
from bot.service import BotService, IncomingMessage, Reply
from liminalis.errors import InvalidInput
from liminalis.testing import FrozenClock

FRIDAY_18 = dt.datetime(2026, 1, 2, 18, 0, 30, tzinfo=dt.UTC)


class Recorder:
    def __init__(self) -> None:
        self.posts: list[tuple[str, Reply]] = []

    async def __call__(self, channel_id: str, reply: Reply) -> None:
        self.posts.append((channel_id, reply))


@pytest.fixture
async def setup(tmp_path):
    root = make_tiny_campaign(tmp_path / "campaigns")
    toml = (
        (root / "campaign.toml")
        .read_text()
        .replace('cron = ""', 'cron = "0 18 * * 5"')
        .replace('channel = ""', 'channel = "discord:4242"')
    )
    (root / "campaign.toml").write_text(toml)
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    await Directory(harness.db(engine)).link(
        "discord", "4242", "greyhold"
    )  # recaps go only to a linked channel
    yield tmp_path, engine
    await close_engine(engine)


def scheduler(engine, clock, rec, **kw) -> RecapScheduler:
    return RecapScheduler(
        BotService(engine), posters={"discord": rec}, clock=clock, tick_seconds=0, **kw
    )


async def test_fires_once_per_slot_from_campaign_config(setup):
    _, engine = setup
    clock = FrozenClock(FRIDAY_18 - dt.timedelta(hours=1))
    rec = Recorder()
    s = scheduler(engine, clock, rec)
    assert await s.run_due() == []  # before the slot
    clock.set(FRIDAY_18)
    assert await s.run_due() == [("greyhold", "2026-01-02T18:00Z")]
    assert await s.run_due() == []  # same slot again
    clock.advance(minutes=30)
    assert await s.run_due() == []
    clock.advance(days=7)
    assert [p for _, p in await s.run_due()] == ["2026-01-09T18:00Z"]
    assert [c for c, _ in rec.posts] == ["4242", "4242"]
    reply = rec.posts[0][1]
    assert reply.title == "Previously on Greyhold" and "Greyhold keep" in reply.text
    assert CANARY not in reply.text


async def test_restart_neither_loses_nor_double_posts(setup):
    tmp_path, engine = setup
    clock = FrozenClock(FRIDAY_18)
    rec = Recorder()
    await scheduler(engine, clock, rec).run_due()
    # restart: a new engine and scheduler on the same database file
    engine2 = await make_engine(tmp_path, milvus=False)
    try:
        s2 = scheduler(engine2, clock, rec)
        await s2.start()  # start-up catch-up must not repost the slot
        await s2.close()
        assert len(rec.posts) == 1
        # down over the next slot; back up two hours later: the missed slot is posted once
        clock.set(FRIDAY_18 + dt.timedelta(days=7, hours=2))
        s3 = scheduler(engine2, clock, rec)
        await s3.start()
        assert "recap:greyhold" in s3.jobs()
        await s3.close()
        assert len(rec.posts) == 2
        s4 = scheduler(engine2, clock, rec)
        await s4.start()
        await s4.close()
        assert len(rec.posts) == 2
        # a slot older than the grace window is skipped, not posted days late
        clock.set(FRIDAY_18 + dt.timedelta(days=15))
        assert await scheduler(engine2, clock, rec).run_due() == []
    finally:
        await close_engine(engine2)


async def test_platform_off_waits_without_claiming(setup):
    _, engine = setup
    clock = FrozenClock(FRIDAY_18)
    rec = Recorder()
    s = RecapScheduler(BotService(engine), posters={}, clock=clock, tick_seconds=0)
    assert await s.run_due() == []
    s.posters["discord"] = rec
    assert len(await s.run_due()) == 1


async def test_a_failed_post_is_posted_again_by_the_next_run(setup):
    """At least once: a post that failed leaves its slot claimed, and the next run posts it;
    once it is out, no run posts it again."""
    _, engine = setup
    clock = FrozenClock(FRIDAY_18)
    calls = 0
    rec = Recorder()

    async def flaky(channel_id: str, reply: Reply) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("network down mid-send")
        await rec(channel_id, reply)

    s = RecapScheduler(BotService(engine), posters={"discord": flaky}, clock=clock, tick_seconds=0)
    assert await s.run_due() == []
    assert await s.run_due() == [("greyhold", "2026-01-02T18:00Z")]
    assert await s.run_due() == [] and calls == 2 and len(rec.posts) == 1


class Died(BaseException):
    """The process ending where it stands: nothing after it runs (no ``except Exception``
    catches it, as none survives a SIGKILL)."""


@pytest.fixture
async def discord_api(setup, monkeypatch):
    """The real Discord adapter, logged in to the fake Discord REST API, as the recap poster."""
    import discord
    from fakes.discord_api import FakeDiscordApi

    from bot.discord_adapter import DiscordAdapter

    _, engine = setup
    api = FakeDiscordApi()
    url = await api.start()
    monkeypatch.setattr(discord.http.Route, "BASE", f"{url}/api/v10")
    adapter = DiscordAdapter(BotService(engine), sync_commands=False)
    await adapter.client.login("fake-token")
    yield api, adapter
    await adapter.client.close()
    await api.close()


def _posted_to_4242(api) -> list:
    return api.find("POST", "/channels/4242/messages")


async def test_a_recap_claimed_but_not_posted_when_the_process_died_is_posted_once(
    setup, discord_api
):
    _, engine = setup
    api, adapter = discord_api
    clock = FrozenClock(FRIDAY_18)

    async def dies_before_posting(channel_id: str, reply: Reply) -> str:
        raise Died

    first = scheduler(engine, clock, dies_before_posting)
    with pytest.raises(Died):
        await first.run_due()
    assert _posted_to_4242(api) == []
    again = scheduler(engine, clock, adapter.post)  # the restart
    assert await again.run_due() == [("greyhold", "2026-01-02T18:00Z")]
    assert (
        await again.run_due() == [] and await scheduler(engine, clock, adapter.post).run_due() == []
    )
    assert len(_posted_to_4242(api)) == 1


async def test_a_recap_out_before_its_mark_is_posted_once_more_then_never(setup, discord_api):
    """The process dies after the platform took the post, before the mark: nothing stored
    says it went out, so the restart posts it once (at least once), and marks it."""
    _, engine = setup
    api, adapter = discord_api
    clock = FrozenClock(FRIDAY_18)

    async def posts_then_dies(channel_id: str, reply: Reply) -> str:
        await adapter.post(channel_id, reply)
        raise Died

    with pytest.raises(Died):
        await scheduler(engine, clock, posts_then_dies).run_due()
    assert len(_posted_to_4242(api)) == 1
    assert await scheduler(engine, clock, adapter.post).run_due() == [
        ("greyhold", "2026-01-02T18:00Z")
    ]
    assert await scheduler(engine, clock, adapter.post).run_due() == []
    assert len(_posted_to_4242(api)) == 2


async def test_a_recap_marked_with_its_message_id_is_never_posted_again(setup, discord_api):
    _, engine = setup
    api, adapter = discord_api
    clock = FrozenClock(FRIDAY_18)
    assert len(await scheduler(engine, clock, adapter.post).run_due()) == 1
    (sent,) = _posted_to_4242(api)
    state = await engine.db.schedules.slot_state("greyhold", "2026-01-02T18:00Z")
    assert state is not None and state[0] == "posted" and state[1] and state[1].isdigit()
    for _ in range(2):  # restarts, and a later run inside the grace window
        assert await scheduler(engine, clock, adapter.post).run_due() == []
    clock.advance(hours=2)
    assert await scheduler(engine, clock, adapter.post).run_due() == []
    assert len(_posted_to_4242(api)) == 1


async def test_a_recap_being_posted_is_not_posted_again_by_an_overlapping_run(setup):
    """A cron job and the tick may run at once in one process: the slot one of them is
    posting (claimed, not yet marked) is not the other's to post."""
    _, engine = setup
    clock = FrozenClock(FRIDAY_18)
    entered, release = asyncio.Event(), asyncio.Event()
    rec = Recorder()

    async def slow(channel_id: str, reply: Reply) -> str:
        if not entered.is_set():  # the first post waits; a second would go straight out
            entered.set()
            await release.wait()
        await rec(channel_id, reply)
        return "1"

    s = scheduler(engine, clock, slow)
    first = asyncio.create_task(s.run_due())
    await entered.wait()
    assert await s.run_due() == []
    release.set()
    assert await first == [("greyhold", "2026-01-02T18:00Z")] and len(rec.posts) == 1


async def test_discord_posts_nothing_before_login_and_the_slot_waits_for_the_next_run(
    setup, monkeypatch
):
    """The scheduler's start-up catch-up runs before the client logs in: the post is refused
    (nothing sent), the slot stays claimed, and the first run after the login posts it."""
    import discord
    from fakes.discord_api import FakeDiscordApi

    from bot.discord_adapter import DiscordAdapter

    _, engine = setup
    api = FakeDiscordApi()
    monkeypatch.setattr(discord.http.Route, "BASE", f"{await api.start()}/api/v10")
    adapter = DiscordAdapter(BotService(engine), sync_commands=False)
    clock = FrozenClock(FRIDAY_18)
    try:
        assert await scheduler(engine, clock, adapter.post).run_due() == []
        assert _posted_to_4242(api) == []
        await adapter.client.login("fake-token")
        assert len(await scheduler(engine, clock, adapter.post).run_due()) == 1
        assert len(_posted_to_4242(api)) == 1
    finally:
        await adapter.client.close()
        await api.close()


async def test_recap_schedule_command_persists_and_is_gm_only(setup):
    tmp_path, engine = setup
    clock = FrozenClock(dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC))  # a Monday
    rec = Recorder()
    service = BotService(engine)
    s = RecapScheduler(service, posters={"slack": rec}, clock=clock, tick_seconds=0)
    service.scheduler = s
    await service.directory.link("slack", "C9", "greyhold")
    player = IncomingMessage(
        platform="slack", channel_id="C9", user_id="UPLAYER", text="/recap schedule 0 9 * * 1"
    )
    gm = IncomingMessage(
        platform="slack", channel_id="C9", user_id="UGM00001", text="/recap schedule 0 9 * * 1"
    )
    assert "Only a GM" in (await service.handle(player)).text
    bad = await service.handle(
        IncomingMessage(
            platform="slack",
            channel_id="C9",
            user_id="UGM00001",
            text="/recap schedule every tuesday",
        )
    )
    assert bad.error and "cron" in bad.text
    ok = await service.handle(gm)
    assert not ok.error and ok.ephemeral and "next Mon 12 Jan 09:00" in ok.text
    # setting a schedule does not immediately post the slot that just passed (09:00 today)
    assert await s.run_due() == []
    clock.advance(days=7)
    assert await s.run_due() == [("greyhold", "2026-01-12T09:00Z")]
    assert rec.posts[0][0] == "C9"
    # a restarted scheduler reads the persisted schedule, which overrides campaign.toml
    s2 = RecapScheduler(BotService(engine), posters={"slack": rec}, clock=clock, tick_seconds=0)
    (sched,) = await s2.schedules()
    assert (sched.cron, sched.platform, sched.channel_id, sched.source) == (
        "0 9 * * 1",
        "slack",
        "C9",
        "db",
    )
    off = await service.handle(
        IncomingMessage(
            platform="slack", channel_id="C9", user_id="UGM00001", text="/recap schedule off"
        )
    )
    assert "removed" in off.text
    assert (await s2.schedules())[0].source == "config"


async def test_tick_ingests_pending_files_and_survives_a_failing_task(setup):
    tmp_path, engine = setup
    ran = []

    async def broken() -> None:
        raise RuntimeError("analysis pass failed")

    async def after() -> None:
        ran.append(True)

    s = RecapScheduler(
        BotService(engine), clock=FrozenClock(), tick_seconds=0, tick_tasks=[broken, after]
    )
    (tmp_path / "campaigns" / "greyhold" / "tower.md").write_text(
        "# The River Tower\n\nA tall tower of black stone.\n"
    )
    await s.tick()
    assert ran == [True]
    titles = [t for _, t in await engine.titles("greyhold", frozenset({"players"}), "tower")]
    assert "The River Tower" in titles


async def test_one_broken_campaign_does_not_stall_the_ticks_ingest_of_the_others(setup):
    tmp_path, engine = setup
    broken = make_tiny_campaign(tmp_path / "campaigns", slug="aaa")  # listed before greyhold
    await engine.ingest("aaa")
    (broken / "campaign.toml").write_text("lenses = 5\n")  # a hand edit gone wrong
    (tmp_path / "campaigns" / "greyhold" / "tower.md").write_text(
        "# The River Tower\n\nA tall tower of black stone.\n"
    )
    await RecapScheduler(BotService(engine), clock=FrozenClock(), tick_seconds=0).ingest_pending()
    titles = [t for _, t in await engine.titles("greyhold", frozenset({"players"}), "tower")]
    assert "The River Tower" in titles


async def test_the_ticks_ingest_and_an_upload_never_interleave(setup):
    """The tick's ingest and a GM's upload ingest of one campaign run one after the other (one
    run's sweep of orphaned vectors could delete the other's new vectors)."""
    tmp_path, engine = setup
    active = peak = 0
    real = harness.indexer(engine).ingest

    async def counted(*args, **kw):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            await asyncio.sleep(0.01)
            return await real(*args, **kw)
        finally:
            active -= 1

    harness.indexer(engine).ingest = counted
    (tmp_path / "campaigns" / "greyhold" / "tower.md").write_text(
        "# The River Tower\n\nA tall tower of black stone.\n"
    )
    tick = RecapScheduler(BotService(engine), clock=FrozenClock(), tick_seconds=0)
    await asyncio.gather(
        tick.ingest_pending(), engine.ingest("greyhold"), engine.ingest("greyhold")
    )
    assert peak == 1
    titles = [t for _, t in await engine.titles("greyhold", frozenset({"players"}), "tower")]
    assert "The River Tower" in titles


async def test_recap_is_of_the_latest_session_by_number(setup):
    """With ten sessions, session-10 is the latest (sorted as text, session-9 was)."""
    tmp_path, engine = setup
    for n in (2, 9, 10):
        (tmp_path / "campaigns" / "greyhold" / "sessions" / f"session-{n:d}.md").write_text(
            f"---\ntitle: Session {n}\ntype: session\n---\n# Session {n}\n\nThe party rested at the inn.\n"
        )
    await engine.ingest("greyhold")
    service = BotService(engine)
    _, sources = await service.recap("greyhold")
    assert [s.title for s in sources] == ["Session 10"]
    _, sources = await service.recap("greyhold", sessions=3)
    assert [s.title for s in sources] == ["Session 2", "Session 9", "Session 10"]


async def test_tick_reindexes_a_campaign_built_with_another_embedder(tmp_path):
    """A release that ships a new embedder: the first tick re-embeds every set-up campaign."""
    from liminalis.testing import HashEmbedder

    upgraded = await upgraded_engine(tmp_path, HashEmbedder(model_id="hash-256-v2"))
    try:
        assert await upgraded.was_indexed("greyhold") and not await upgraded.is_indexed("greyhold")
        await RecapScheduler(BotService(upgraded), clock=FrozenClock(), tick_seconds=0).tick()
        assert await upgraded.is_indexed("greyhold")
        assert not await upgraded.was_indexed("never-set-up")
    finally:
        await close_engine(upgraded)


async def test_start_arms_jobs_with_cron_trigger(setup):
    _, engine = setup
    s = RecapScheduler(
        BotService(engine),
        posters={"discord": Recorder()},
        clock=FrozenClock(FRIDAY_18),
        tick_seconds=60,
    )
    await s.start()
    try:
        assert set(s.jobs()) == {"recap:greyhold", "tick"}
        job = s._aps.get_job("recap:greyhold")
        assert str(job.trigger.fields[4]) == "fri" or "5" in str(job.trigger)
    finally:
        await s.close()


def test_natural_key_orders_numbers_by_value_and_survives_odd_digits():
    from liminalis.text import natural_key

    assert sorted(["session-10", "session-9", "session-1"], key=natural_key) == [
        "session-1",
        "session-9",
        "session-10",
    ]
    assert natural_key("x1²") and natural_key(
        "٣"
    )  # a superscript is text; an Arabic-Indic digit a number


def test_helpers():
    trig = parse_cron("0 18 * * 5")
    assert latest_slot(trig, FRIDAY_18, dt.timedelta(hours=1)) == FRIDAY_18.replace(second=0)
    assert latest_slot(trig, FRIDAY_18 - dt.timedelta(minutes=1), dt.timedelta(hours=1)) is None
    with pytest.raises(InvalidInput):
        parse_cron("61 * * * *")
    with pytest.raises(InvalidInput):
        parse_cron("* * *")
    assert parse_target("slack:C1") == ("slack", "C1")
    assert parse_target("C1") is None and parse_target("irc:x") is None


def test_cron_keeps_crontabs_either_day_rule_and_refuses_a_date_that_never_comes():
    """``0 18 1 * 5`` is the 1st of the month *and* every Friday (crontab), not only a 1st that
    is a Friday; ``0 0 31 2 *`` is refused rather than replacing a working schedule with silence."""
    trig = parse_cron("0 18 1 * 5")
    t, fires = dt.datetime(2026, 6, 1, tzinfo=dt.UTC), []  # Monday 1 June
    for _ in range(3):
        t = trig.get_next_fire_time(None, t)
        fires.append(t.date().isoformat())
        t += dt.timedelta(seconds=1)
    assert fires == ["2026-06-01", "2026-06-05", "2026-06-12"]
    with pytest.raises(InvalidInput, match="never fires"):
        parse_cron("0 0 31 2 *")
    assert parse_cron("0 0 29 2 *")  # leap days come


async def test_a_recap_that_cannot_be_built_is_retried_not_lost(setup):
    """A campaign.toml mid-edit at recap time, in a process that never read a good version of it
    and a data directory that kept none (written by a release that kept none; a kept one would
    serve): the slot is not claimed, so the next tick (the file fixed, within the grace window)
    posts it."""
    tmp_path, _ = setup
    toml = tmp_path / "campaigns" / "greyhold" / "campaign.toml"
    good = toml.read_text()
    toml.write_text(good + "\nname = [unclosed\n")
    restarted = await make_engine(tmp_path, milvus=False)
    await restarted.db.execute("DELETE FROM campaign_configs")
    try:
        rec = Recorder()
        clock = FrozenClock(FRIDAY_18)
        service = BotService(restarted)
        s = RecapScheduler(service, posters={"discord": rec}, clock=clock, tick_seconds=0)
        await s.set_schedule("greyhold", cron="0 19 * * 5", platform="discord", channel_id="4242")
        clock.advance(hours=1)
        assert await s.run_due() == [] and rec.posts == []
        toml.write_text(good)
        clock.advance(minutes=20)
        assert await s.run_due() == [("greyhold", "2026-01-02T19:00Z")]
    finally:
        await close_engine(restarted)


async def test_a_recap_due_while_campaign_toml_is_mid_edit_is_posted_on_time(setup):
    """A process that read a good campaign.toml goes on with it while the file is mid-edit:
    the recap is posted on time, not held until the GM saves a valid file."""
    tmp_path, engine = setup
    rec = Recorder()
    clock = FrozenClock(FRIDAY_18)
    s = RecapScheduler(BotService(engine), posters={"discord": rec}, clock=clock, tick_seconds=0)
    await s.set_schedule("greyhold", cron="0 19 * * 5", platform="discord", channel_id="4242")
    toml = tmp_path / "campaigns" / "greyhold" / "campaign.toml"
    stamp = toml.stat().st_mtime + 10  # a later version of the file, however coarse the clock
    toml.write_text(toml.read_text() + "\nname = [unclosed\n")
    os.utime(toml, (stamp, stamp))
    clock.advance(hours=1)
    assert await s.run_due() == [("greyhold", "2026-01-02T19:00Z")] and rec.posts
    assert "campaign.toml of greyhold" in engine.config_errors["greyhold"]


async def test_relinking_a_channel_drops_the_other_campaigns_recap_schedule(setup):
    """#table had greyhold's weekly recap; a GM links #table to another campaign: greyhold's
    recaps must not be posted to that campaign's players (and unlink ends the schedule too)."""
    tmp_path, engine = setup
    make_tiny_campaign(tmp_path / "campaigns", slug="saltmarsh")
    rec = Recorder()
    clock = FrozenClock(FRIDAY_18 - dt.timedelta(hours=2))
    service = BotService(engine)
    s = RecapScheduler(service, posters={"slack": rec}, clock=clock, tick_seconds=0)
    await service.directory.link("slack", "C9", "greyhold")
    await s.set_schedule("greyhold", cron="0 18 * * 5", platform="slack", channel_id="C9")
    await service.directory.link("slack", "C9", "saltmarsh")
    clock.set(FRIDAY_18)
    assert all(sched.channel_id != "C9" for sched in await s.schedules()) and rec.posts == []
    await s.run_due()
    assert rec.posts == []
    await service.directory.link("slack", "C9", "greyhold")
    await s.set_schedule("greyhold", cron="0 18 * * 5", platform="slack", channel_id="C9")
    await service.directory.unlink("slack", "C9")
    assert all(sched.channel_id != "C9" for sched in await s.schedules())
    # A schedule row that outlived its link (written before links cleaned up after themselves),
    # and campaign.toml's own channel linked to another campaign: neither is posted to.
    await service.directory.link("slack", "C9", "saltmarsh")
    await harness.db(engine).execute(
        "INSERT INTO recap_schedules (campaign, cron, platform, channel_id) "
        "VALUES ('greyhold', '0 18 * * 5', 'slack', 'C9')"
    )
    assert await s.run_due() == [] and rec.posts == []
    await harness.db(engine).execute("DELETE FROM recap_schedules")
    s.posters["discord"] = rec
    clock.advance(days=7)  # a slot nobody claimed
    await service.directory.link("discord", "4242", "saltmarsh")  # greyhold's [recap] channel
    assert await s.run_due() == [] and rec.posts == []
    await service.directory.unlink("discord", "4242")
    clock.advance(days=7)  # (that slot was passed over for good, said once)
    assert await s.run_due() == [] and rec.posts == []  # unlinked: it may hold anyone now
    await service.directory.link("discord", "4242", "greyhold")
    clock.advance(days=7)
    assert [c for c, _ in await s.run_due()] == ["greyhold"]  # linked to it again: posted to


async def test_the_tick_arms_recap_jobs_from_the_current_schedules(setup):
    """``/recap schedule off`` brings campaign.toml's [recap] back at once, and an edited
    [recap] cron applies on the next tick, without a restart."""
    tmp_path, engine = setup
    service = BotService(engine)
    s = RecapScheduler(
        service, posters={"discord": Recorder()}, clock=FrozenClock(FRIDAY_18), tick_seconds=0
    )
    await s.start()
    try:
        await s.set_schedule("greyhold", cron="0 9 * * 1", platform="discord", channel_id="77")
        assert await s.remove_schedule("greyhold")
        assert "hour='18'" in str(
            s._aps.get_job("recap:greyhold").trigger
        )  # the config's Friday recap again
        toml = tmp_path / "campaigns" / "greyhold" / "campaign.toml"
        toml.write_text(toml.read_text().replace('cron = "0 18 * * 5"', 'cron = "30 7 * * 2"'))
        await s.tick()
        assert "minute='30'" in str(s._aps.get_job("recap:greyhold").trigger)
    finally:
        await s.close()


async def test_a_stored_schedule_that_never_fires_does_not_stop_the_scheduler(setup):
    """A schedule saved before such crons were refused (``0 0 31 2 *``) is skipped with a
    warning; the start, the tick and the other schedules go on."""
    _, engine = setup
    await harness.db(engine).execute(
        "INSERT INTO recap_schedules (campaign, cron, platform, channel_id) "
        "VALUES ('ghost', '0 0 31 2 *', 'discord', '1')"
    )
    rec = Recorder()
    s = RecapScheduler(
        BotService(engine), posters={"discord": rec}, clock=FrozenClock(FRIDAY_18), tick_seconds=0
    )
    await s.start()
    try:
        assert "recap:greyhold" in s.jobs() and "recap:ghost" not in s.jobs()
        assert len(rec.posts) == 1  # greyhold's slot, caught up at start
    finally:
        await s.close()


async def test_a_schedule_of_a_deleted_campaign_is_skipped_once_per_slot(setup, caplog):
    """Its folder gone, a campaign's stored schedule logs one warning a slot, not a traceback
    on every tick of the grace window."""
    _, engine = setup
    await harness.db(engine).execute(
        "INSERT INTO recap_schedules (campaign, cron, platform, channel_id) "
        "VALUES ('ghost', '0 18 * * 5', 'discord', '1')"
    )
    s = RecapScheduler(
        BotService(engine),
        posters={"discord": Recorder()},
        clock=FrozenClock(FRIDAY_18),
        tick_seconds=0,
    )
    with caplog.at_level("WARNING"):
        for _ in range(3):
            await s.run_due()
    ghost = [r for r in caplog.records if "ghost" in r.getMessage()]
    assert len(ghost) == 1 and "no such campaign" in ghost[0].getMessage() and not ghost[0].exc_info
