"""Cited means cited: an answer's sources are the documents its text cites, each checked against
the prompt the asker's lens built; an answer citing nothing shows no sources, says the notes do
not cover it, and is logged unanswered, so ``/gm log`` lists it under the gaps in the notes.

Through the real bot service, the real ``anthropic`` client and the fake Messages API
(tests/fakes/anthropic_server.py), on the tiny campaign with its GM-only page."""

from __future__ import annotations

import pytest
from conftest import close_engine, make_engine
from fakes.anthropic_server import FakeAnthropic
from fakes.tiny_campaign import CANARY, GM_TITLE, MIREL_CANARY, make_tiny_campaign

from bot.main import build_responder
from bot.messages import IncomingMessage
from bot.service import BotService
from bot.settings import Settings
from liminalis.answer.citations import NOT_COVERED
from liminalis.lens import PLAYERS
from liminalis.memory.recall import MemoryModel
from liminalis.store.graph import MemoryStore
from liminalis.testing import FrozenClock

QUESTION = "Who rules Greyhold keep?"


def ask(text: str, *, user: str = "222") -> IncomingMessage:
    return IncomingMessage(platform="discord", channel_id="C1", user_id=user, text=text)


@pytest.fixture
async def table(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    clock = FrozenClock()
    engine = await make_engine(tmp_path, milvus=False, clock=clock)
    engine.memory = MemoryModel(MemoryStore(engine.db), clock=clock)
    engine.memory_enabled = True
    await engine.ingest("greyhold")
    service = BotService(engine)
    await service.directory.link("discord", "C1", "greyhold")
    yield service
    await close_engine(engine)


async def _answer(service: BotService, reply: str, question: str = QUESTION):
    async with FakeAnthropic(reply=reply) as fake:
        responder = build_responder(
            Settings(anthropic_api_key="sk-test-key", anthropic_base_url=fake.url),
            service.engine,
        )
        service.engine.use_answerer(responder)
        try:
            out = await service.handle(ask(question))
        finally:
            await responder.model.close()
    assert fake.requests, "the model was asked"
    return out


async def _remembered(service: BotService) -> set[str]:
    acts = await service.engine.memory.store.activations("greyhold", PLAYERS)
    return {c.removeprefix("d:") for c in acts if c.startswith("d:")}


async def test_a_reply_that_cites_a_document_of_its_prompt_has_that_source(table):
    out = await _answer(table, "The baron rules it from the river tower [Baron Aldric].")
    assert not out.error and [s.doc_id for s in out.sources] == ["baron"]
    assert NOT_COVERED not in out.text
    (logged,) = (await table.engine.question_report("greyhold")).questions
    assert logged.found and logged.cited == ("baron",)
    assert await _remembered(table) == {"baron"}


async def test_a_citation_of_a_document_not_in_the_prompt_is_dropped(table):
    # The GM-only page is not in a player's prompt, and the second title names no document.
    out = await _answer(
        table, f"The baron is a vampire [{GM_TITLE}], crowned at [The Sunken Crown — Coronation]."
    )
    assert not out.error and out.sources == ()
    assert out.text.endswith(f"_{NOT_COVERED}_")
    (logged,) = (await table.engine.question_report("greyhold")).questions
    assert not logged.found and logged.cited == ()
    assert await _remembered(table) == set()


async def test_a_reply_citing_nothing_has_no_sources_is_a_gap_and_feeds_no_memory(table):
    where = "Where does the tunnel under the keep go?"
    out = await _answer(table, "The documents do not say where the tunnel goes.", where)
    assert not out.error and out.sources == () and NOT_COVERED in out.text
    report = await table.engine.question_report("greyhold")
    assert [q.found for q in report.questions] == [False]
    assert [g.question for g in report.gaps] == [where]
    assert await _remembered(table) == set()  # nothing cited, nothing learned
    log = await table.handle(ask("/log", user="111"))  # the tiny campaign's GM
    assert not log.error and "Gaps in your notes" in log.text and where in log.text


async def test_an_offline_answer_the_notes_do_not_cover_is_a_gap(table):
    """Without a model: a question whose words the notes barely hold gets "the notes don't
    cover that" and the closest notes, no sources, and is logged unanswered."""
    from liminalis.answer.offline import NOTES_SILENT

    teacup = "What is the name of the baron's favourite teacup?"
    out = await table.handle(ask(teacup))
    assert not out.error and out.sources == () and NOTES_SILENT in out.text
    assert "Closest notes" in out.text and "Baron Aldric" in out.text
    report = await table.engine.question_report("greyhold")
    assert [q.found for q in report.questions] == [False]
    assert [g.question for g in report.gaps] == [teacup]


@pytest.mark.parametrize(
    "question",
    [
        "Is the baron secretly a drowned vampire, per the baron plot secrets?",
        "What did Mirel pawn before Greyhold, the ninth bell?",
        "What is the name of the drowned vampire's favourite teacup?",
    ],
)
async def test_a_players_closest_notes_never_name_or_quote_what_only_others_read(table, question):
    """The closest notes a silent offline answer lists are drawn through the asker's lens: a
    player fishing with the GM page's (or another player's) own words gets neither its title
    nor its text, whether the answer quotes or falls silent."""
    out = await table.handle(ask(question))
    seen = (out.text + " ".join(s.title for s in out.sources)).lower()
    for secret in (CANARY, GM_TITLE, MIREL_CANARY, "Mirel's Past"):
        assert secret.lower() not in seen
