"""Responder end to end on the sample campaign (hash embedder, in-memory vectors)."""

from __future__ import annotations

import json
import shutil

import harness
import pytest
from conftest import ROOT, SAMPLE, close_engine, make_engine

from liminalis.answer import Responder
from liminalis.context.budget import CLIP_MARKER, BudgetParams
from liminalis.testing import FrozenClock, ScriptedModel

QUESTIONS = json.loads((ROOT / "tests" / "data" / "emberfall_questions.json").read_text())
CANARIES = [c.lower() for c in QUESTIONS["gm_canaries"]]
PLAYERS = frozenset({"players"})
GM = frozenset({"gm"})


@pytest.fixture
async def engine(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "campaigns" / "emberfall")
    eng = await make_engine(tmp_path, milvus=False)
    await eng.ingest("emberfall")
    yield eng
    await close_engine(eng)


class CountingRetrieve:
    """Counts engine.retrieve calls (the follow-up path must skip retrieval)."""

    def __init__(self, engine):
        self.inner = engine.retrieve
        self.calls = 0
        engine.retrieve = self

    async def __call__(self, *a, **kw):
        self.calls += 1
        return await self.inner(*a, **kw)


def request_text(req) -> str:
    return "\n".join([*req["system"], *(m.content for m in req["messages"])]).lower()


async def test_offline_answer_quotes_and_cites_sources(engine):
    answer = await Responder(engine).respond(
        "emberfall",
        "Which apprentice went down into the river with the Drowned Bell?",
        PLAYERS,
    )
    assert "corran vey" in answer.text.lower()
    assert answer.text.startswith("Here is what the campaign's documents say (quoted")
    assert "lore/the-long-winter-chronicle" in [s.doc_id for s in answer.sources]
    for s in answer.sources:
        assert f"— *{s.label()}*" in answer.text
    assert answer.model == "offline" and answer.lens == PLAYERS


async def test_offline_says_the_notes_are_silent_and_names_the_closest_notes(engine):
    """An offline answer whose best sentence covers little of the question says the notes do not
    cover it and lists the nearest documents as closest notes, never as sources; the sample's
    own questions (tests/data/emberfall_questions.json) still answer, with sources."""
    from liminalis.answer.offline import NOTES_SILENT

    responder = Responder(engine)
    silent = await responder.respond(
        "emberfall", "What is the name of the dragon's favourite teacup?", PLAYERS
    )
    assert silent.text.startswith(NOTES_SILENT) and "Closest notes" in silent.text
    assert silent.sources == () and not silent.answered and silent.closest
    assert "> " not in silent.text  # nothing quoted as if it answered
    for s in silent.closest:
        assert f"*{s.label()}*" in silent.text
    questions = json.loads((ROOT / "tests" / "data" / "emberfall_questions.json").read_text())
    for item in questions["questions"]:
        lens = PLAYERS | {item["lens"]} if item.get("lens", "players") != "players" else PLAYERS
        answer = await responder.respond("emberfall", item["question"], lens)
        assert answer.answered and not answer.text.startswith(NOTES_SILENT), item["question"]


async def test_model_answer_cites_titles_from_the_material(engine):
    model = ScriptedModel(replies=["Vessa paid her fine [The Ashen Watch — Reputation]."])
    answer = await Responder(engine, model=model).respond(
        "emberfall",
        "Who paid her fine after the Watch arrested her for climbing a chapel?",
        PLAYERS,
    )
    assert [s.doc_id for s in answer.sources] == ["factions/ashen-watch"]
    system = model.requests[0]["system"]
    assert "answer only from the campaign material" in system[0].lower()
    assert "say so plainly" in system[0]


@pytest.mark.parametrize("budget", [None, 1200], ids=["default-budget", "tight-budget"])
async def test_players_chat_prompt_never_holds_gm_text(engine, budget):
    chat = "discord:7"
    gm_responder = Responder(engine)  # offline: quotes GM documents into its answer and memory
    gm_answers = [
        await gm_responder.respond("emberfall", q["question"], GM, chat=chat)
        for q in QUESTIONS["gm_secret_questions"]
    ]
    gm_seen = (
        "\n".join(a.text for a in gm_answers).lower() + gm_responder.last_prompt.text().lower()
    )
    assert any(c in gm_seen for c in CANARIES)  # the GM side really did hold secrets

    model = ScriptedModel()
    # A tight budget runs the degrade path too: summaries dropped, documents clipped.
    players = Responder(engine, model=model, **({"budget_tokens": budget} if budget else {}))
    degraded = False
    for q in QUESTIONS["gm_secret_questions"]:
        await players.respond("emberfall", q["question"], PLAYERS, chat=chat)
        fitted = players.last_prompt.fitted
        degraded |= bool(fitted and (fitted.clipped or fitted.dropped))
    assert degraded or not budget
    await players.respond(
        "emberfall", "and what is she hiding?", PLAYERS, chat=chat
    )  # follow-up path
    await players.respond(
        "emberfall",
        "Tell me about @secrets/true-heir and @gm/villain-plan",
        PLAYERS,
        chat=chat,
        forced=["gm/secrets.md", "secrets/true-heir"],
    )
    assert len(model.requests) == 5
    for req in model.requests:
        text = request_text(req)
        leaked = [c for c in CANARIES if c in text]
        assert leaked == [], leaked
    assert len(model.requests[-1]["messages"]) > 1  # players memory is in use, just not the GM's


async def test_follow_up_reuses_loaded_material_without_retrieving(engine):
    counter = CountingRetrieve(engine)
    responder = Responder(engine, clock=FrozenClock())
    await responder.respond(
        "emberfall",
        "Whose body did the party find floating below the river stairs in the first session?",
        PLAYERS,
        chat="slack:C1",
    )
    assert counter.calls == 1
    first_docs = [d.doc_id for d in responder.last_prompt.documents]
    answer = await responder.respond(
        "emberfall", "and what word did he say?", PLAYERS, chat="slack:C1"
    )
    assert counter.calls == 1
    assert any("follow-up" in n for n in answer.notes)
    assert [d.doc_id for d in responder.last_prompt.documents] == first_docs
    assert "vigil" in responder.last_prompt.text().lower()
    await responder.respond("emberfall", "Who is the Lantern Queen?", PLAYERS, chat="slack:C1")
    assert counter.calls == 2  # a new subject retrieves again


async def test_a_lower_case_question_on_a_new_subject_is_not_a_follow_up(engine):
    """The channel's memory is shared: another player's short, pronoun-bearing question about
    something else must retrieve, not reuse the last asker's material."""
    counter = CountingRetrieve(engine)
    responder = Responder(engine, clock=FrozenClock())
    await responder.respond(
        "emberfall", "Who paid her fine after the Watch arrested her?", PLAYERS, chat="slack:C9"
    )
    await responder.respond(
        "emberfall", "how much does the ferry charge for those crossings?", PLAYERS, chat="slack:C9"
    )
    assert counter.calls == 2
    await responder.respond("emberfall", "and what did she do next?", PLAYERS, chat="slack:C9")
    assert counter.calls == 2  # a real follow-up still reuses


async def test_follow_up_expires_and_does_not_cross_chats(engine):
    clock = FrozenClock()
    counter = CountingRetrieve(engine)
    responder = Responder(engine, clock=clock)
    await responder.respond(
        "emberfall", "Who paid her fine after the Watch arrested her?", PLAYERS, chat="a"
    )
    await responder.respond(
        "emberfall", "and what did she do next?", PLAYERS, chat="b"
    )  # other chat: nothing loaded
    assert counter.calls == 2
    clock.advance(hours=2)
    await responder.respond("emberfall", "and what did she do next?", PLAYERS, chat="a")  # stale
    assert counter.calls == 3


FOLLOW_UPS = [
    (
        "Whose body did the party find floating below the river stairs in the first session?",
        "and what word did he say?",
        "vigil",
    ),
    (
        "Whose body did the party find floating below the river stairs in the first session?",
        "who took his body away?",
        "osric dunmore",
    ),
    (
        "Who paid her fine after the Watch arrested her for climbing a chapel?",
        "what job had she taken?",
        "courier job",
    ),
]


async def test_measure_when_reuse_helps(engine):
    """Reuse vs fresh retrieval of the bare follow-up: does the answer reach the prompt?"""
    reuse_hits = fresh_hits = 0
    for i, (first, follow, answer) in enumerate(FOLLOW_UPS):
        responder = Responder(engine, clock=FrozenClock())
        await responder.respond("emberfall", first, PLAYERS, chat=f"m:{i}")
        await responder.respond("emberfall", follow, PLAYERS, chat=f"m:{i}")
        reuse_hits += answer in responder.last_prompt.text().lower()
        await responder.respond(
            "emberfall", follow, PLAYERS
        )  # no chat: retrieve from the bare follow-up
        fresh_hits += answer in responder.last_prompt.text().lower()
    print(
        f"\nfollow-up detail recall: reuse {reuse_hits}/{len(FOLLOW_UPS)}, fresh {fresh_hits}/{len(FOLLOW_UPS)}"
    )
    assert reuse_hits == len(FOLLOW_UPS)
    assert reuse_hits >= fresh_hits


async def test_memory_survives_a_restart(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "campaigns" / "emberfall")
    eng = await make_engine(tmp_path, milvus=False)
    await eng.ingest("emberfall")
    await Responder(eng).respond("emberfall", "Who is Vessa Coldwater?", PLAYERS, chat="discord:9")
    await close_engine(eng)

    eng = await make_engine(tmp_path, milvus=False)  # same data directory, fresh process state
    try:
        await eng.ingest("emberfall")
        model = ScriptedModel()
        await Responder(eng, model=model).respond(
            "emberfall", "Who runs the Copper Kettle?", PLAYERS, chat="discord:9"
        )
        messages = model.requests[0]["messages"]
        assert [m.role for m in messages] == ["user", "assistant", "user"]
        assert messages[0].content == "Who is Vessa Coldwater?"
    finally:
        await close_engine(eng)


async def test_small_budget_clips_keeps_pins_and_says_so(engine):
    await engine.add_pin("emberfall", "The Long Winter Chronicle", PLAYERS)
    responder = Responder(engine, budget_tokens=600, budget_params=BudgetParams(doc_floor=2))
    answer = await responder.respond(
        "emberfall",
        "Which apprentice went down into the river with the Drowned Bell?",
        PLAYERS,
        chat="x",
    )
    prompt = responder.last_prompt
    # always-include (campaign.toml: overview.md) first, then the /pin
    assert [d.doc_id for d in prompt.stable_documents] == [
        "overview",
        "lore/the-long-winter-chronicle",
    ]
    assert prompt.fitted is not None and prompt.fitted.over_budget
    assert any("below the floors" in n for n in answer.notes)
    assert prompt.fitted.dropped and any(CLIP_MARKER.search(d.text) for d in prompt.documents)
    # The standing document is capped head-first, never query-clipped: identical on the next turn.
    stable = prompt.stable
    await responder.respond(
        "emberfall", "Who carried the Vigil Key out of Emberfall?", PLAYERS, chat="x"
    )
    assert responder.last_prompt.stable == stable


async def test_a_gm_pin_clipped_and_remembered_for_the_gm_never_reaches_players(engine):
    """A standing document is clipped once and remembered by its text. Whether a lens may see
    it is decided before that, on every question: the GM's warm copy never serves a player."""
    await engine.add_pin("emberfall", "gm/secrets.md", GM)
    model = ScriptedModel()
    responder = Responder(engine, model=model, stable_doc_tokens=120)
    question = "What is the truth behind the ninth bell?"
    await responder.respond("emberfall", question, GM, chat="gm")
    pinned = next(d for d in responder.last_prompt.stable_documents if d.doc_id == "gm/secrets")
    assert pinned.tier == "clipped"
    lines = [
        x.lower() for x in pinned.text.split("\n\n") if len(x) > 40 and not CLIP_MARKER.search(x)
    ]
    secret = lines[-1]  # the last whole paragraph the GM's copy kept
    assert secret in request_text(model.requests[-1])
    for chat in ("gm", "table"):  # the GM's own chat too: memory is per lens
        await responder.respond("emberfall", question, PLAYERS, chat=chat)
        assert "gm/secrets" not in [d.doc_id for d in responder.last_prompt.stable_documents]
        text = request_text(model.requests[-1])
        assert secret not in text
        assert [c for c in CANARIES if c in text] == []


async def test_the_daily_token_gate_quotes_the_documents_until_midnight(engine):
    """Once the day's model tokens are spent, answers come from the offline answerer (still
    grounded, with sources) and the model is not called; the next UTC day it is again. The
    count is in SQLite: a restarted service (a new gate) keeps the day's spend."""
    import datetime as dt

    from liminalis.spend import DailyTokenGate

    clock = FrozenClock(dt.datetime(2026, 1, 1, 22, 0, tzinfo=dt.UTC))
    model = ScriptedModel(replies=["Vessa paid her fine [The Ashen Watch — Reputation]."])
    responder = Responder(
        engine, model=model, clock=clock, gate=DailyTokenGate(harness.db(engine), 100, clock=clock)
    )
    question = "Who paid Vessa's fine after the Watch arrested her?"
    first = await responder.respond("emberfall", question, PLAYERS)
    assert first.model == "scripted" and len(model.requests) == 1
    restarted = DailyTokenGate(harness.db(engine), 100, clock=clock)
    assert await restarted.spent_today() >= 100 and not await restarted.allows()
    responder.gate = restarted
    second = await responder.respond("emberfall", question, PLAYERS)
    assert len(model.requests) == 1 and second.model == "offline"
    assert "budget is spent" in second.text and second.sources
    clock.advance(hours=3)  # past midnight UTC
    assert (await responder.respond("emberfall", question, PLAYERS)).model == "scripted"
    assert len(model.requests) == 2


def test_cited_sources_reads_the_bracketed_citations():
    from liminalis.answer import cited_sources
    from liminalis.context.material import ContextDoc

    docs = [
        ContextDoc("s3", "Session 3", "session"),
        ContextDoc("bell", "The Drowned Bell", "lore"),
        ContextDoc("tobin", "Tobin", "character"),
        ContextDoc("harrow", "Tobin Harrow", "character"),
        ContextDoc("other", "Other", "lore"),
    ]

    def ids(text):
        return [s.doc_id for s in cited_sources(text, docs)]

    assert ids("It rang thirteen times [Session 3 — The Drowned Bell].") == [
        "s3"
    ]  # a section, not the document
    assert ids("[The Drowned Bell — Ice] then [Session 3] and [Tobin Harrow]") == [
        "bell",
        "s3",
        "harrow",
    ]
    # Prose that names a title is not a citation, and nothing cited is no source: never the top
    # documents of the prompt standing in for a citation.
    assert ids("Tobin Harrow heard it.") == []
    assert ids("Nothing in the documents says.") == []
    # A citation of a document the prompt did not hold is dropped; the rest stand.
    assert ids("[The Sunken Crown] and [Other]") == ["other"]
    assert ids("[Tobin Harrow; The Drowned Bell — Ice]") == ["harrow", "bell"]
    assert cited_sources("", docs) == () and cited_sources("  \n", docs) == ()
    # A title that only begins another (from the story lines: not in the prompt) is not cited.
    assert ids("The finale [Session 31 — Finale], then [Tobin Harrow].") == ["harrow"]


async def test_a_pinned_long_document_still_gives_the_passage_the_question_matched(tmp_path):
    """A pinned document is sent whole up to a cap, head first (question-independent, for the
    prompt cache). Its passage past the cap that the question matched used to be dropped, so a
    pinned document hid more of itself than an unpinned one; it now joins the volatile half."""
    from fakes.tiny_campaign import make_tiny_campaign

    root = make_tiny_campaign(tmp_path / "campaigns")
    filler = "\n\n".join(
        f"Day {i}: the caravan walked the salt road and camped by the dunes." for i in range(400)
    )
    (root / "chronicle.md").write_text(
        f"# Chronicle\n\n{filler}\n\nThe vault key lies under the ninth bell of the "
        "drowned abbey.\n"
    )
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        players = frozenset({"players"})
        await engine.add_pin("greyhold", "Chronicle", players)
        model = ScriptedModel(replies=["Under the ninth bell [Chronicle]."])
        await Responder(engine, model=model).respond(
            "greyhold", "Where does the vault key lie?", players
        )
        sent = " ".join(
            [*model.requests[0]["system"], *(m.content for m in model.requests[0]["messages"])]
        )
        assert "Day 0: the caravan" in sent  # the standing head, as before
        assert "vault key lies under the ninth bell" in sent
    finally:
        await close_engine(engine)


async def test_a_failed_memory_write_never_costs_the_answer(tmp_path, caplog):
    """The answer is computed before its exchange is remembered: when the database stops taking
    writes (here: read-only from then on), the player still gets the answer, and the failure is
    logged for the host."""
    from fakes.tiny_campaign import make_tiny_campaign

    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        responder = Responder(
            engine, model=ScriptedModel(replies=["From the river tower [Baron Aldric]."] * 2)
        )
        players = frozenset({"players"})
        await responder.respond("greyhold", "Where does the baron rule from?", players, chat="C1")
        await harness.db(engine).conn.execute("PRAGMA query_only = ON")
        answer = await responder.respond(
            "greyhold", "What does the baron collect?", players, chat="C1"
        )
        assert answer.text == "From the river tower [Baron Aldric]."
        assert "not recorded; the answer is returned without it" in caplog.text
        await harness.db(engine).conn.execute("PRAGMA query_only = OFF")
        mem = await responder.memory.load("greyhold", "C1", players)
        assert [q for q, _ in mem.turns] == [
            "Where does the baron rule from?"
        ]  # the second was not kept
    finally:
        await close_engine(engine)
