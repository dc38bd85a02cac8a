"""The router: roles, the one gate (slots, daily limit, credits, pauses), bookings with owners
and expiry, and the call log — on a real SQLite file, with a frozen clock and events, never
wall-clock thresholds."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import harness
import pytest
from fakes.anthropic_server import FakeAnthropic

from liminalis.errors import (
    BudgetSpent,
    CampaignPaused,
    ConfigError,
    CreditsExhausted,
)
from liminalis.ports import Completion, Message, Usage
from liminalis.routing import BACKGROUND_ROLES, ROLES, Limits, RoleTable, Router
from liminalis.spend import DailyTokenGate, tokens_of
from liminalis.store.sqlite import Database
from liminalis.testing import FrozenClock, HeldModel, ScriptedModel

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
Q = [Message("user", "What rang beneath the ice?")]
ROLE_TABLE = RoleTable.build(reply="claude-big", cheap="claude-small")


@dataclass
class Held:
    role: str
    release: asyncio.Event = field(default_factory=asyncio.Event)


class HoldingModel:
    """A ``LanguageModel`` holding each call of the roles in ``hold`` until its ``release`` is
    set; ``running`` lists the calls inside the model, ``until`` waits for a state of it."""

    name = "holding"

    def __init__(self, hold: set[str]) -> None:
        self.hold = hold
        self.running: list[Held] = []
        self.done: list[str] = []
        self._changed = asyncio.Condition()

    async def complete(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> Completion:
        held = Held(role)
        async with self._changed:
            self.running.append(held)
            self._changed.notify_all()
        if role in self.hold:
            await held.release.wait()
        async with self._changed:
            self.running.remove(held)
            self.done.append(role)
            self._changed.notify_all()
        return Completion(
            text=f"{role} done",
            model=model or self.name,
            usage=Usage(input_tokens=30, output_tokens=10),
        )

    async def until(self, ready: Callable[[], bool]) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(ready), 30)

    def of(self, role: str) -> list[Held]:
        return [h for h in self.running if h.role == role]


async def queued(router: Router, *, foreground: bool, n: int) -> None:
    """Until ``n`` calls wait for a slot (they reach the queue after a few database reads)."""
    for _ in range(3000):
        if router._slots.waiting(foreground) == n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{n} {'foreground' if foreground else 'background'} never queued")


@pytest.fixture
async def db(tmp_path):
    async with Database(tmp_path / "data" / "liminalis.sqlite3") as database:
        yield database


def router_for(db, model, **kw) -> Router:
    kw.setdefault("clock", FrozenClock(T0))
    kw.setdefault("limits", Limits(default_credits=1_000_000))
    return Router(model, db=db, **kw)


async def call(router: Router, role: str, *, foreground: bool | None = None, **kw) -> Completion:
    fg = role in {"reply", "chat"} if foreground is None else foreground
    return await router.complete(
        role,
        system=["rules"],
        messages=Q,
        campaign=kw.pop("campaign", "emberfall"),
        foreground=fg,
        **kw,
    )


# -- roles and config -----------------------------------------------------------------------


def test_background_roles_default_to_the_cheap_model_and_chat_to_the_reply_model():
    table = RoleTable.build(reply="big", cheap="small", assigned={"critique": "mid", "chat": ""})
    assert set(table.models) == set(ROLES)
    assert table.model_for("reply") == "big" and table.model_for("chat") == "big"
    assert table.model_for("critique") == "mid"
    assert {table.model_for(r) for r in BACKGROUND_ROLES - {"critique"}} == {"small"}
    assert dict((r, s) for r, _, s in table.rows())["critique"] == "set"
    with pytest.raises(ValueError, match="unknown roles"):
        RoleTable.build(reply="big", cheap="small", assigned={"sumarize": "x"})
    with pytest.raises(ValueError, match="unknown role"):
        table.model_for("sumarize")


def test_settings_assign_each_role_and_validate():
    from bot.settings import Settings

    table = Settings.from_env(
        {
            "LIMINALIS_MODEL_REPLY": "claude-r",
            "LIMINALIS_MODEL_CHEAP": "claude-c",
            "LIMINALIS_MODEL_NARRATION": "claude-n",
            "LIMINALIS_MODEL_SUMMARIZE": " ",  # blank: the default
        }
    ).role_table()
    assert table.model_for("reply") == "claude-r" and table.model_for("chat") == "claude-r"
    assert table.model_for("narration") == "claude-n"
    assert table.model_for("summarize") == table.model_for("analysis") == "claude-c"
    with pytest.raises(ConfigError, match="LIMINALIS_BACKGROUND_SHARE"):
        Settings.from_env({"LIMINALIS_BACKGROUND_SHARE": "1.5"})
    with pytest.raises(ConfigError, match="LIMINALIS_MODEL_CONCURRENCY"):
        Settings.from_env({"LIMINALIS_MODEL_CONCURRENCY": "1"})


def test_liminalis_models_prints_the_role_table(tmp_path, monkeypatch, capsys):
    from bot.cli import main

    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv("LIMINALIS_MODEL_CRITIQUE", "claude-critic")
    assert main(["models"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == list(ROLES)
    critique = next(line for line in out if line.startswith("critique"))
    assert "claude-critic" in critique and "background" in critique and "(set)" in critique
    summarize = next(line for line in out if line.startswith("summarize"))
    assert "claude-haiku-4-5" in summarize and "cheap model" in summarize


async def test_a_per_chat_override_moves_the_reply_role_only(db):
    """Through the real client against the local Messages API: the chat's override reaches the
    API for its reply; every other role, and the router itself, keep their models."""
    from liminalis.adapters.anthropic import AnthropicModel

    async with FakeAnthropic() as fake:
        async with AnthropicModel(
            "sk-test", base_url=fake.url, models=dict(ROLE_TABLE.models)
        ) as m:
            router = router_for(db, m, roles=ROLE_TABLE)
            chat = router.for_chat("claude-opus-special")
            await call(chat, "reply")
            await call(chat, "summarize")
            await call(chat, "chat")
            await call(router, "reply")
    sent = [r["body"]["model"] for r in fake.requests]
    assert sent == ["claude-opus-special", "claude-small", "claude-big", "claude-big"]
    assert (
        chat.model_for("reply") == "claude-opus-special"
        and router.model_for("reply") == "claude-big"
    )
    assert router.for_chat(None) is router and router.for_chat("") is router
    # The view shares the gate: one set of slots, one ledger.
    assert chat._slots is router._slots


# -- the one gate: slots ----------------------------------------------------------------------


async def test_a_reply_is_served_while_a_background_fan_out_saturates_the_gate(db):
    model = HoldingModel(hold={"summarize"})
    router = router_for(
        db, model, limits=Limits(concurrency=4, background_share=0.5, default_credits=10**9)
    )
    fan_out = [
        asyncio.create_task(call(router, "summarize", pass_id="digest", node=f"n{i}"))
        for i in range(6)
    ]
    await model.until(lambda: len(model.of("summarize")) == 2)  # B = 2 of C = 4 slots
    await queued(router, foreground=False, n=4)
    reply = await asyncio.wait_for(call(router, "reply"), 30)
    assert reply.text == "reply done"
    assert len(model.of("summarize")) == 2 and model.done == ["reply"]  # the fan-out still holds

    def held() -> list[Held]:
        return [h for h in model.of("summarize") if not h.release.is_set()]

    for _ in range(6):  # release the fan-out one by one: each freed slot goes to the next
        await model.until(lambda: bool(held()))
        held()[0].release.set()
        assert len(model.of("summarize")) <= 2
    assert all(r.text == "summarize done" for r in await asyncio.gather(*fan_out))


async def test_a_freed_slot_goes_to_a_waiting_reply_before_waiting_background_work(db):
    model = HoldingModel(hold={"reply", "summarize"})
    router = router_for(
        db, model, limits=Limits(concurrency=3, background_share=0.67, default_credits=10**9)
    )
    assert router.limits.background_slots == 2
    first = [asyncio.create_task(call(router, "reply")) for _ in range(2)]
    bg1 = asyncio.create_task(call(router, "summarize"))
    await model.until(lambda: len(model.running) == 3)  # every slot taken
    bg2 = asyncio.create_task(call(router, "summarize"))  # under its share, but no free slot
    await queued(router, foreground=False, n=1)
    fg3 = asyncio.create_task(call(router, "reply"))  # asked after bg2
    await queued(router, foreground=True, n=1)
    model.of("reply")[0].release.set()
    await model.until(lambda: len(model.done) == 1 and len(model.running) == 3)
    assert len(model.of("reply")) == 2 and len(model.of("summarize")) == 1  # fg3 went first
    assert router._slots.waiting(True) == 0 and router._slots.waiting(False) == 1
    for h in list(model.running):
        h.release.set()
    await model.until(lambda: len(model.of("summarize")) == 1 and len(model.done) >= 4)
    model.of("summarize")[0].release.set()
    await asyncio.gather(*first, bg1, bg2, fg3)


async def test_a_caller_cancelled_while_queued_gives_its_place_up(db):
    model = HoldingModel(hold={"summarize"})
    router = router_for(
        db, model, limits=Limits(concurrency=2, background_share=0.5, default_credits=10**9)
    )
    bg1 = asyncio.create_task(call(router, "summarize"))
    await model.until(lambda: len(model.running) == 1)
    bg2 = asyncio.create_task(call(router, "summarize"))
    await queued(router, foreground=False, n=1)
    bg2.cancel()
    with pytest.raises(asyncio.CancelledError):
        await bg2
    assert router._slots.waiting(False) == 0
    model.running[0].release.set()
    await bg1
    assert router._slots.background_active == 0 and router._slots.foreground_active == 0
    assert await db.spend.live_bookings(now=T0.timestamp()) == 0


# -- the one gate: daily limit, credits, pauses ---------------------------------------------------


async def test_background_work_takes_only_its_share_of_what_remains_of_the_day(db):
    clock = FrozenClock(T0)
    daily = DailyTokenGate(db, 10_000, clock=clock)
    router = router_for(db, ScriptedModel(), clock=clock, daily=daily)
    await daily.charge(Usage(input_tokens=7_000))  # 3,000 left: background may book 1,500
    with pytest.raises(BudgetSpent):
        await call(router, "summarize", estimate=1_600)
    assert await router.allow_background("emberfall")
    await call(router, "summarize", estimate=1_400)
    assert (await call(router, "reply", estimate=50_000)).text  # a reply is admitted while S < L


async def test_exhausted_credits_refuse_new_background_work_in_flight_work_finishes_top_up_resumes(
    db,
):
    model = HoldingModel(hold={"extract"})
    router = router_for(db, model, limits=Limits(default_credits=0))
    with pytest.raises(CreditsExhausted):  # never topped up
        await call(router, "extract", estimate=10)
    assert await router.add_credits("emberfall", 100) == 100
    in_flight = asyncio.create_task(call(router, "extract", pass_id="entities", estimate=150))
    await model.until(lambda: len(model.running) == 1)
    # The booking took the credits: new background work is refused, a reply is not.
    with pytest.raises(CreditsExhausted) as info:
        await call(router, "extract", estimate=1)
    assert info.value.campaign == "emberfall" and info.value.role == "extract"
    assert not await router.allow_background("emberfall")
    assert (await call(router, "reply")).text == "reply done"
    model.running[0].release.set()
    assert (await in_flight).text == "extract done"  # admitted before: it finishes
    assert await router.credits("emberfall") == 100 - 40  # charged what it cost
    model.hold = set()
    assert await router.add_credits("other", 0) == 0  # credits are per campaign
    with pytest.raises(CreditsExhausted):
        await call(router, "extract", campaign="other")
    # Spend the rest, go into overdraft, then a top-up lets the work go on.
    await router.add_credits("emberfall", -60)
    with pytest.raises(CreditsExhausted):
        await call(router, "extract")
    await router.add_credits("emberfall", 500)
    assert await router.allow_background("emberfall")
    assert (await call(router, "extract")).text == "extract done"
    assert await router.credits("emberfall") == 500 - 40


async def test_a_paused_campaign_refuses_autonomous_background_work_only(db):
    model = ScriptedModel()
    router = router_for(db, model)
    await router.pause("emberfall")
    assert await router.is_paused("emberfall") and not await router.is_paused("greyhold")
    with pytest.raises(CampaignPaused):
        await call(router, "narration")
    assert not await router.allow_background("emberfall")
    assert await router.allow_background("emberfall", requested=True)
    await call(router, "reply")  # a player's answer
    await call(router, "chat")  # base chat
    await call(router, "narration", requested=True)  # a GM asked for it
    await call(router, "narration", campaign="greyhold")  # another campaign
    assert [r["role"] for r in model.requests] == ["reply", "chat", "narration", "narration"]
    assert await router.resume("emberfall") and not await router.resume("emberfall")
    await call(router, "narration")
    assert len(model.requests) == 5


# -- the log and the report --------------------------------------------------------------------


async def test_every_call_is_logged_and_the_spend_report_sums_them_by_role_pass_and_node(
    db, tmp_path, monkeypatch, capsys
):
    clock = FrozenClock(T0)
    model = ScriptedModel(replies=["short", "a somewhat longer reply for the critique"])
    router = router_for(db, model, clock=clock, roles=ROLE_TABLE)
    usages = []
    for role, pass_id, node in [
        ("reply", None, None),
        ("critique", "digest", "session-3"),
        ("critique", "digest", "session-3"),
        ("summarize", "digest", "session-4"),
        ("reply", None, None),
    ]:
        usages.append((await call(router, role, pass_id=pass_id, node=node)).usage)
    greyhold = (await call(router, "reply", campaign="greyhold")).usage
    clock.advance(days=2)
    await call(router, "analysis", pass_id="threads", node="n1")
    report = await router.report("emberfall", days=1)
    assert [(x.role, x.pass_id, x.node, x.calls) for x in report.lines] == [
        ("analysis", "threads", "n1", 1)
    ]
    report = await router.report("emberfall", days=3)
    lines = {(x.role, x.pass_id, x.node): x for x in report.lines}
    assert {k: v.calls for k, v in lines.items()} == {
        ("reply", None, None): 2,
        ("critique", "digest", "session-3"): 2,
        ("summarize", "digest", "session-4"): 1,
        ("analysis", "threads", "n1"): 1,
    }
    logged = sum(tokens_of(u) for u in usages)
    assert report.tokens == logged + lines[("analysis", "threads", "n1")].tokens
    assert report.by_role()["critique"] == tokens_of(usages[1]) + tokens_of(usages[2])
    # The day's total is what the calls reported, bookings settled.
    assert await db.usage.spent("2026-03-01") == logged + tokens_of(greyhold)
    rows = await db.fetchall("SELECT role, model, foreground FROM model_calls ORDER BY id")
    assert [(r["role"], r["model"], r["foreground"]) for r in rows][:2] == [
        ("reply", "claude-big", 1),
        ("critique", "claude-small", 0),
    ]
    # The CLI prints the same report from the database alone.
    from bot.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMINALIS_DATA_DIR", str(tmp_path / "data"))
    await db.campaigns.upsert("emberfall", str(tmp_path))
    assert (
        await asyncio.to_thread(main, ["spend", "--campaign", "emberfall", "--days", "36500"]) == 0
    )
    out = capsys.readouterr().out
    assert f"{report.tokens:,} tokens in 6 calls" in out and "session-3" in out
    assert (
        await asyncio.to_thread(main, ["credits", "--campaign", "emberfall", "--add", "5000"]) == 0
    )
    # The router's default (a million) became the balance at the first charge; replies are
    # not charged to credits.
    balance = await db.credits.balance("emberfall", default=0)
    assert balance == 1_000_000 - (report.tokens - report.by_role()["reply"]) + 5_000
    assert f"background credits now {balance:,}" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["credits", "--campaign", "nowhere", "--add", "1"]) == 2


async def test_a_reply_through_the_responder_is_logged_as_a_foreground_reply(tmp_path):
    from conftest import close_engine, make_engine
    from fakes.tiny_campaign import make_tiny_campaign

    from liminalis.answer import Responder

    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        model = ScriptedModel(replies=["From the river tower."])
        router = Router(model, db=harness.db(engine), clock=FrozenClock(T0), roles=ROLE_TABLE)
        answer = await Responder(engine, router=router).respond(
            "greyhold", "Where does the baron rule from?", frozenset({"players"})
        )
        assert answer.model == "claude-big" and model.requests[0]["role"] == "reply"
        report = await router.report("greyhold")
        assert [(x.role, x.calls) for x in report.lines] == [("reply", 1)]
        assert report.tokens == tokens_of(answer.usage)
    finally:
        await close_engine(engine)


# -- bookings: owners, expiry, settling -------------------------------------------------------------


async def _book(db, *, owner: str, run_id: str, tokens: int, expires_at: float) -> int:
    return await db.spend.book(
        owner=owner,
        run_id=run_id,
        campaign="emberfall",
        day="2026-03-01",
        tokens=tokens,
        foreground=True,
        now=T0.timestamp(),
        expires_at=expires_at,
        default_credits=0,
        admit=lambda ledger: None,
    )


async def test_a_crashed_runs_booking_is_settled_at_start_and_does_not_hold_the_budget(db):
    """A process killed mid-answer left its booking; it used to count until midnight, and every
    later question was quoted. The owner's next start deletes it; another owner's stays."""
    clock = FrozenClock(T0)
    daily = DailyTokenGate(db, 5_000, clock=clock)
    far = (T0 + dt.timedelta(hours=1)).timestamp()
    await _book(db, owner="serve", run_id="killed", tokens=6_000, expires_at=far)
    await _book(db, owner="cli", run_id="other", tokens=100, expires_at=far)
    assert await daily.spent_today() == 6_100 and not await daily.allows()
    model = ScriptedModel()
    router = router_for(db, model, clock=clock, daily=daily, owner="serve", run_id="new")
    assert await router.start() == 1
    assert await router.start() == 0  # once per run
    assert await daily.spent_today() == 100
    assert (await call(router, "reply")).text == "(scripted answer)"
    assert await db.spend.live_bookings(now=T0.timestamp()) == 1  # the cli's


async def test_expired_bookings_do_not_count(db):
    clock = FrozenClock(T0)
    daily = DailyTokenGate(db, 5_000, clock=clock)
    router = router_for(
        db, ScriptedModel(), clock=clock, daily=daily, limits=Limits(booking_ttl_s=60)
    )
    await router.start()
    await _book(db, owner="elsewhere", run_id="x", tokens=9_000, expires_at=T0.timestamp() + 60)
    with pytest.raises(BudgetSpent):
        await call(router, "reply")
    clock.advance(seconds=61)
    assert await daily.spent_today() == 0
    assert (await call(router, "reply")).text


async def test_a_store_error_while_settling_keeps_the_computed_answer(db, caplog):
    model = HeldModel(replies=["Thirteen times."])
    router = router_for(db, model)
    task = asyncio.create_task(call(router, "reply"))
    await asyncio.wait_for(model.started.wait(), 30)
    await db.conn.execute("PRAGMA query_only = ON")  # the database stops taking writes
    model.release.set()
    try:
        done = await task
    finally:
        await db.conn.execute("PRAGMA query_only = OFF")
    assert done.text == "Thirteen times."
    assert "not settled" in caplog.text
    # Its booking is left to expire: it counts until then, and no longer.
    assert await db.spend.live_bookings(now=T0.timestamp()) == 1
    assert await db.spend.live_bookings(now=T0.timestamp() + router.limits.booking_ttl_s) == 0


async def test_an_unknown_role_fails_before_anything_is_booked(db):
    router = router_for(db, ScriptedModel())
    with pytest.raises(ValueError, match="unknown role"):
        await call(router, "sumarize", foreground=False)
    assert await db.spend.live_bookings(now=T0.timestamp()) == 0


async def test_budget_show_gives_a_gm_the_days_spend_and_credits_and_a_player_neither(tmp_path):
    from conftest import close_engine, make_engine
    from fakes.tiny_campaign import make_tiny_campaign

    from bot.console import ConsoleAdapter
    from bot.service import BotService
    from liminalis.answer import Responder

    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        router = Router(
            ScriptedModel(), db=harness.db(engine), clock=FrozenClock(T0), roles=ROLE_TABLE
        )
        service = BotService(
            engine, responder=Responder(engine, router=router), default_campaign="greyhold"
        )
        await router.add_credits("greyhold", 12_345)
        await call(router, "summarize", campaign="greyhold", pass_id="digest", node="s1")
        gm = await ConsoleAdapter(service, campaign="greyhold", lens="gm").ask("/budget")
        assert "Answer length" in gm.text and "Model spend of greyhold today" in gm.text
        assert "summarize" in gm.text and "digest" in gm.text and "s1" in gm.text
        assert "Background credits: 12,3" in gm.text
        player = await ConsoleAdapter(service, campaign="greyhold", lens="players").ask("/budget")
        assert "Answer length" in player.text and "Model spend" not in player.text
    finally:
        await close_engine(engine)


async def test_a_gm_gives_one_chat_its_reply_model_and_only_its_replies_move(tmp_path):
    """``/gm budget model`` through the service, the real client and the local Messages API: the
    chat's answers go to its model; its recap (summarize role) keeps the cheap model; another
    chat of the campaign keeps the configured one; ``default`` gives it back; a player may not
    choose."""
    from conftest import close_engine, make_engine
    from fakes.tiny_campaign import make_tiny_campaign

    from bot.messages import IncomingMessage
    from bot.service import BotService
    from liminalis.adapters.anthropic import AnthropicModel
    from liminalis.answer import Responder

    def msg(text: str, *, channel: str = "C1", user: str = "222") -> IncomingMessage:
        return IncomingMessage(platform="discord", channel_id=channel, user_id=user, text=text)

    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        async with (
            FakeAnthropic(reply="From the river tower [Baron Aldric].") as fake,
            AnthropicModel("sk-test", base_url=fake.url, models=dict(ROLE_TABLE.models)) as m,
        ):
            router = Router(
                m,
                db=harness.db(engine),
                clock=FrozenClock(T0),
                roles=ROLE_TABLE,
                limits=Limits(default_credits=100_000),
            )
            service = BotService(engine, responder=Responder(engine, router=router))
            for channel in ("C1", "C2"):
                await service.directory.link("discord", channel, "greyhold")

            async def sent(text: str, **kw) -> list[str]:
                before = len(fake.requests)
                reply = await service.handle(msg(text, **kw))
                assert not reply.error, reply.text
                return [r["body"]["model"] for r in fake.requests[before:]]

            refused = await service.handle(msg("/gm budget model claude-opus-special"))
            assert refused.error and "Only a GM" in refused.text
            assert await engine.chat_model("greyhold", "discord:C1") is None

            chose = await service.handle(msg("/gm budget model claude-opus-special", user="111"))
            assert chose.ephemeral and "claude-opus-special" in chose.text
            assert await sent("Where does the baron rule from?") == ["claude-opus-special"]
            assert await sent("/lore recap") == ["claude-small"]  # the summarize role
            assert await sent("Where does the baron rule from?", channel="C2") == ["claude-big"]
            shown = await service.handle(msg("/gm budget", user="111"))
            assert "`claude-opus-special`" in shown.text
            assert (
                "claude-opus-special"
                not in (await service.handle(msg("/gm budget", channel="C2", user="111"))).text
            )
            bad = await service.handle(msg("/gm budget model two words", user="111"))
            assert bad.error and "Usage" in bad.text

            back = await service.handle(msg("/gm budget model default", user="111"))
            assert "configured model again" in back.text
            assert await sent("Who collects old bells?") == ["claude-big"]
        report = await router.report("greyhold")
        assert {x.role for x in report.lines} == {"reply", "summarize"}
    finally:
        await close_engine(engine)
