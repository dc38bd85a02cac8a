"""AnthropicModel through the real ``anthropic`` client against a local Messages API server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLE, close_engine, make_engine
from fakes.anthropic_server import FakeAnthropic

from liminalis.adapters.anthropic import AnthropicModel
from liminalis.answer import Responder
from liminalis.errors import ConfigError, ModelUnavailable
from liminalis.ports import Message, Usage


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def model(fake: FakeAnthropic, **kw) -> AnthropicModel:
    kw.setdefault("sleep", Sleeps())
    return AnthropicModel(
        "sk-test-key",
        base_url=fake.url,
        models={"reply": "claude-test-reply", "summarize": "claude-test-small"},
        **kw,
    )


async def test_request_shape_usage_and_role_models():
    async with FakeAnthropic(reply="Thirteen times [The Long Winter].") as fake:
        async with model(fake) as m:
            done = await m.complete(
                system=["rules", "standing docs", "recalled"],
                messages=[Message("user", "q?")],
                cache_upto=2,
            )
            await m.complete(system=["s"], messages=[Message("user", "sum")], role="summarize")
    assert done.text == "Thirteen times [The Long Winter]." and done.model == "claude-test-reply"
    body = fake.requests[0]["body"]
    assert [b.get("cache_control") for b in body["system"]] == [None, {"type": "ephemeral"}, None]
    assert body["messages"] == [{"role": "user", "content": "q?"}]
    assert fake.requests[0]["headers"]["Authorization"] == "Bearer sk-test-key"
    assert fake.requests[1]["body"]["model"] == "claude-test-small"
    assert done.usage.cache_creation_input_tokens > 0 and done.usage.cache_read_input_tokens == 0
    assert set(m.usage_by_role) == {"reply", "summarize"}
    assert "sk-test-key" not in repr(m)


async def test_overloaded_then_ok_is_retried_with_backoff():
    async with FakeAnthropic() as fake:
        fake.script = [529, 429]
        sleeps = Sleeps()
        async with model(fake, sleep=sleeps, backoff_s=0.01) as m:
            done = await m.complete(system=["s"], messages=[Message("user", "q")])
    assert done.text == fake.reply
    assert len(fake.requests) == 3
    assert sleeps.delays == [0.01, 0.02]


async def test_persistent_overload_gives_the_user_safe_message():
    async with FakeAnthropic() as fake:
        fake.script = [529, 529, 529]
        async with model(fake, max_retries=2) as m:
            with pytest.raises(ModelUnavailable) as info:
                await m.complete(system=["s"], messages=[Message("user", "q")])
    assert len(fake.requests) == 3
    assert info.value.user_message == ModelUnavailable.default_user_message
    assert isinstance(info.value.__cause__, Exception)  # translated at the boundary, cause kept


async def test_timeout_gives_the_user_safe_message():
    async with FakeAnthropic() as fake:
        fake.script = ["hang", "hang"]
        async with model(fake, timeout_s=0.3, max_retries=1) as m:
            with pytest.raises(ModelUnavailable) as info:
                await m.complete(system=["s"], messages=[Message("user", "q")])
    assert len(fake.requests) == 2
    assert "busy or unreachable" in info.value.user_message
    assert "timed out" in str(info.value)


async def test_bad_key_is_a_config_error_not_retried():
    async with FakeAnthropic() as fake:
        fake.script = [401]
        async with model(fake) as m:
            with pytest.raises(ConfigError):
                await m.complete(system=["s"], messages=[Message("user", "q")])
    assert len(fake.requests) == 1


async def test_a_refused_request_is_a_config_error_not_busy():
    """404 (say, a model name that does not exist) is the host's to fix: not retried, and not
    "busy, try again in a minute"."""
    async with FakeAnthropic() as fake:
        fake.script = [404]
        async with model(fake) as m:
            with pytest.raises(ConfigError) as info:
                await m.complete(system=["s"], messages=[Message("user", "q")])
    assert len(fake.requests) == 1 and "LIMINALIS_MODEL_REPLY" in str(info.value)
    assert "busy" not in info.value.user_message


async def test_an_overloaded_model_still_gets_the_question_a_quoted_answer(pinned_engine):
    async with FakeAnthropic() as fake:
        fake.script = [529, 529, 529]
        async with model(fake, max_retries=2, backoff_s=0.0) as m:
            answer = await Responder(pinned_engine, model=m).respond(
                "emberfall",
                "Who paid her fine after the Watch arrested her?",
                frozenset({"players"}),
            )
    assert len(fake.requests) == 3
    assert answer.model == "offline" and "unavailable right now" in answer.text and answer.sources
    assert "quoted, not paraphrased" in answer.text


async def test_an_empty_reply_or_a_refused_request_gets_a_quoted_answer_and_the_chat_goes_on(
    pinned_engine,
):
    """A reply with no text was recorded as an empty assistant turn, and the API refuses any
    request holding an empty message: every later question in that chat failed as "the bot is
    misconfigured". A refused request (400) also answered only that. Both now quote the
    documents, and the next question in the chat gets the model's answer."""
    async with FakeAnthropic() as fake:
        fake.script = ["empty", 400]
        async with model(fake, max_retries=0, backoff_s=0.0) as m:
            responder = Responder(pinned_engine, model=m)
            players = frozenset({"players"})
            q = "Who paid her fine after the Watch arrested her?"
            empty = await responder.respond("emberfall", q, players, chat="discord:C1")
            assert empty.model == "offline" and "gave no answer" in empty.text and empty.sources
            refused = await responder.respond("emberfall", q, players, chat="discord:C1")
            assert (
                refused.model == "offline"
                and "could not answer" in refused.text
                and refused.sources
            )
            ok = await responder.respond(
                "emberfall", "And who arrested her?", players, chat="discord:C1"
            )
            fake.script = ["cut"]
            cut = await responder.respond("emberfall", "Who paid her fine?", players)
    # The chat goes on with the model's answer (its citation may name a document this follow-up's
    # prompt did not hold: then it is no source, and the answer says so after the text).
    assert ok.model != "offline" and ok.text.startswith(fake.reply.strip())
    assert cut.text.startswith(fake.reply.strip()) and "cut short at its length limit" in cut.text
    assert "model answer cut at max_tokens" in cut.notes
    assert all(msg["content"] for msg in fake.requests[-1]["body"]["messages"])


async def test_a_hung_model_gives_the_quoted_answer_by_the_answer_deadline(pinned_engine):
    """The client's timeout is per attempt: a model that hangs, with its retries, kept the asker
    waiting minutes. The answer's own deadline ends the wait with the quoted answer."""
    import time

    async with FakeAnthropic() as fake:
        fake.script = ["hang"] * 4
        async with model(fake, timeout_s=20.0, max_retries=3, backoff_s=0.0) as m:
            t = time.perf_counter()
            answer = await Responder(pinned_engine, model=m, answer_deadline_s=0.5).respond(
                "emberfall",
                "Who paid her fine after the Watch arrested her?",
                frozenset({"players"}),
            )
            waited = time.perf_counter() - t
    assert answer.model == "offline" and "unavailable right now" in answer.text and answer.sources
    assert waited < 10


async def test_stream_yields_text_and_records_cache_read():
    async with FakeAnthropic(reply="The bell rang thirteen times on the ice.") as fake:
        fake.script = [529]
        async with model(fake) as m:
            for _ in range(2):
                parts = [
                    t
                    async for t in m.stream(
                        system=["rules", "docs", "vol"],
                        messages=[Message("user", "q")],
                        cache_upto=2,
                    )
                ]
                assert "".join(parts) == fake.reply and len(parts) > 1
    assert fake.requests[-1]["body"]["stream"] is True
    assert len(fake.requests) == 3  # the 529 was retried before any text
    assert m.last_usage.cache_read_input_tokens > 0


@pytest.fixture
async def pinned_engine(tmp_path):
    root = tmp_path / "campaigns" / "emberfall"
    shutil.copytree(SAMPLE, root)
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("emberfall")
    await engine.add_pin("emberfall", "The Drowned Bell", frozenset({"players"}))
    yield engine
    await close_engine(engine)


async def test_two_turns_send_an_identical_stable_prefix_and_read_the_cache(pinned_engine):
    async with FakeAnthropic() as fake:
        async with model(fake) as m:
            responder = Responder(pinned_engine, model=m)
            first = await responder.respond(
                "emberfall",
                "Who paid her fine after the Watch arrested her?",
                frozenset({"players"}),
                chat="discord:42",
            )
            second = await responder.respond(
                "emberfall",
                "What did Tobin hear when he touched the crown of the bell?",
                frozenset({"players"}),
                chat="discord:42",
            )
    b1, b2 = (r["body"] for r in fake.requests)

    def stable(body):
        i = next(i for i, b in enumerate(body["system"]) if b.get("cache_control"))
        return i, json.dumps(body["system"][: i + 1], ensure_ascii=False)

    assert stable(b1) == stable(b2)
    assert stable(b1)[0] == 1  # instructions, then the standing documents carry the breakpoint
    assert "The Drowned Bell" in stable(b1)[1]
    assert b1["system"][2] != b2["system"][2]  # the volatile half moved
    assert len(b2["messages"]) == 3 and b2["messages"][0]["content"].startswith("Who paid her fine")
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert (
        second.usage.cache_read_input_tokens > 0 and second.usage.cache_creation_input_tokens == 0
    )
    assert second.model == "claude-test-reply"


async def test_the_services_daily_token_budget_gates_the_real_client(pinned_engine):
    """LIMINALIS_DAILY_TOKEN_BUDGET wires the gate: past it, no request reaches the API."""
    from bot.main import build_responder
    from bot.settings import Settings

    async with FakeAnthropic() as fake:
        settings = Settings(
            anthropic_api_key="sk-test-key", anthropic_base_url=fake.url, daily_token_budget=10
        )
        responder = build_responder(settings, pinned_engine)
        assert responder.gate is not None and responder.gate.limit == 10
        question = "Who paid her fine after the Watch arrested her?"
        first = await responder.respond("emberfall", question, frozenset({"players"}))
        second = await responder.respond("emberfall", question, frozenset({"players"}))
        assert len(fake.requests) == 1 and first.model != "offline"
        assert second.model == "offline" and "budget is spent" in second.text
        await responder.model.close()
    unlimited = build_responder(
        Settings(anthropic_api_key="k", daily_token_budget=0), pinned_engine
    )
    assert unlimited.gate is None
    await unlimited.model.close()


async def test_the_offline_fallbacks_hold_the_gm_wall(pinned_engine):
    """Budget spent, or the model overloaded: the quoted answer a player gets instead holds no
    GM-only text, for questions aimed straight at the GM's secrets."""
    data = json.loads((Path(__file__).parent / "data" / "emberfall_questions.json").read_text())
    canaries = [c.lower() for c in data["gm_canaries"]]
    from bot.main import build_responder
    from bot.settings import Settings

    async with FakeAnthropic() as fake:
        spent = build_responder(
            Settings(anthropic_api_key="k", anthropic_base_url=fake.url, daily_token_budget=1),
            pinned_engine,
        )
        await spent.gate.charge(Usage(input_tokens=5))
        fake.script = [529] * 100
        async with model(fake, max_retries=0, backoff_s=0.0) as m:
            busy = Responder(pinned_engine, model=m)
            for q in data["gm_secret_questions"]:
                for responder in (spent, busy):
                    answer = await responder.respond(
                        "emberfall", q["question"], frozenset({"players"})
                    )
                    shown = " ".join(
                        [answer.text, *(f"{s.title} {s.doc_id}" for s in answer.sources)]
                    ).lower()
                    assert answer.model == "offline" and not [c for c in canaries if c in shown], q[
                        "question"
                    ]
        await spent.model.close()


async def test_answers_asked_at_once_see_each_others_booking_of_the_daily_budget(pinned_engine):
    """The gate was checked before a call and charged after it, so every answer in flight read
    "under the limit" and a busy minute could spend it many times over. A call now books its
    estimate first: the second answer asked meanwhile is quoted, and the booking settles to the
    reported usage afterwards."""
    import asyncio

    from liminalis.spend import DailyTokenGate, tokens_of
    from liminalis.testing import FrozenClock, HeldModel

    gate = DailyTokenGate(pinned_engine.db, 1, clock=FrozenClock())
    model = HeldModel(replies=["Ilsa paid it [The Drowned Bell]."])
    started, release = model.started, model.release
    responder = Responder(pinned_engine, model=model, gate=gate)
    players = frozenset({"players"})
    first = asyncio.create_task(responder.respond("emberfall", "Who paid her fine?", players))
    await asyncio.wait_for(started.wait(), 30)
    assert await gate.spent_today() > 1000  # booked: the prompt and the reply's room
    second = await responder.respond("emberfall", "Who arrested her?", players)
    assert second.model == "offline" and "budget is spent" in second.text
    release.set()
    answer = await first
    assert answer.model == "scripted" and len(model.requests) == 1
    assert await gate.spent_today() == tokens_of(answer.usage)


# -- every fault of a reply falls back -----------------------------------------------------------

STREAM_FAULTS = ("drop", "malformed", "error-event", "stall")


@pytest.mark.parametrize(
    ("call", "fault"),
    [
        *(("stream", f) for f in (*STREAM_FAULTS, "not-json")),
        *(("complete", f) for f in ("drop", "malformed", "not-json", "stall")),
    ],
)
async def test_every_fault_of_a_reply_is_a_model_unavailable_of_the_tree(call, fault):
    """A connection cut mid-body, a malformed SSE line, a 200 that is not JSON, an error event,
    a reply that stops coming: none leaves the adapter as the transport's or the parser's own
    exception (those became "something went wrong", and the quoted fallback never ran)."""
    async with FakeAnthropic() as fake:
        fake.script = [fault]
        async with model(fake, max_retries=0, timeout_s=1.0) as m:  # the timeout: a hang guard
            got: list[str] = []
            asked = {"system": ["rules " * 100], "messages": [Message("user", "q")]}
            with pytest.raises(ModelUnavailable) as info:
                if call == "stream":
                    async for text in m.stream(**asked):
                        got.append(text)
                else:
                    await m.complete(**asked)
    assert info.value.user_message == ModelUnavailable.default_user_message
    if call == "stream" and fault != "not-json":
        assert info.value.partial == "".join(got) == fake.reply[: fake.partial]
        used = info.value.used
        assert used is not None and used.input_tokens > 0
        assert used.output_tokens == -(-fake.partial // 4)
    else:
        assert info.value.partial == "" and not got


async def test_a_fault_before_any_text_is_retried():
    async with FakeAnthropic() as fake:
        fake.script = ["not-json", "drop"]
        async with model(fake, backoff_s=0.0) as m:
            done = await m.complete(system=["s"], messages=[Message("user", "q")])
            fake.script = ["not-json"]
            streamed = "".join(
                [t async for t in m.stream(system=["s"], messages=[Message("user", "q")])]
            )
    assert done.text == streamed == fake.reply and len(fake.requests) == 5


@pytest.mark.parametrize("fault", STREAM_FAULTS)
async def test_a_stream_that_breaks_keeps_its_text_marked_cut_then_quotes_and_settles(
    pinned_engine, fault
):
    """Through the composition root's responder: the text the asker was reading stays, marked
    as cut, the quoted answer follows, and the call is settled at what it used (no booking
    left holding the day's budget)."""
    from bot.main import build_responder
    from bot.settings import Settings

    async with FakeAnthropic(reply="Ilsa paid her fine [The Drowned Bell], in silver.") as fake:
        fake.script = [fault]
        responder = build_responder(
            Settings(
                anthropic_api_key="sk-test-key",
                anthropic_base_url=fake.url,
                daily_token_budget=1_000_000,
                llm_timeout_s=1.0,  # a hang guard for the stalled stream
            ),
            pinned_engine,
        )
        seen: list[str] = []

        async def on_text(text: str) -> None:
            seen.append(text)

        try:
            answer = await responder.respond(
                "emberfall",
                "Who paid her fine after the Watch arrested her?",
                frozenset({"players"}),
                on_text=on_text,
            )
        finally:
            await responder.model.close()
    partial = fake.reply[: fake.partial]
    assert seen and seen[-1] == partial
    assert answer.text.startswith(partial.strip() + " …")
    assert "broke off there, so I quote the documents" in answer.text
    assert "model stream cut: partial answer, then offline answer" in answer.notes
    assert answer.sources
    (call,) = await pinned_engine.db.fetchall(
        "SELECT input_tokens, output_tokens, ok FROM model_calls"
    )
    assert call["input_tokens"] > 0 and call["output_tokens"] == -(-len(partial) // 4)
    assert call["ok"] == 0
    assert await pinned_engine.db.fetchall("SELECT id FROM model_bookings") == []


async def test_a_stream_cut_by_the_answer_deadline_keeps_its_text_and_settles_what_it_used(
    pinned_engine,
):
    """The reply stops coming after some text and the answer's own deadline ends the wait (the
    client would wait longer): the text stays, marked as cut, before the quotes, and the call
    is settled at the booked prompt plus the text sent, never at nothing."""
    async with FakeAnthropic(reply="Ilsa paid her fine [The Drowned Bell], in silver.") as fake:
        fake.script = ["stall"]
        async with model(fake, timeout_s=30.0, max_retries=0) as m:
            responder = Responder(pinned_engine, model=m, answer_deadline_s=0.5)
            shown: list[str] = []

            async def on_text(text: str) -> None:
                shown.append(text)

            answer = await responder.respond(
                "emberfall",
                "Who paid her fine after the Watch arrested her?",
                frozenset({"players"}),
                on_text=on_text,
            )
    partial = fake.reply[: fake.partial]
    assert shown[-1] == partial and answer.text.startswith(partial.strip() + " …")
    assert "broke off there" in answer.text and answer.sources
    (call,) = await pinned_engine.db.fetchall(
        "SELECT input_tokens, output_tokens, ok FROM model_calls"
    )
    assert call["input_tokens"] > 0 and call["output_tokens"] == -(-len(partial) // 4)
    assert call["ok"] == 0
    assert await pinned_engine.db.fetchall("SELECT id FROM model_bookings") == []
