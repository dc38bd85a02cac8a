"""The GM's view of the table: every answered question is logged; a GM reads what
players asked, the documents they keep asking about and the gaps in the notes (`/log`, the
console, `liminalis log`); a player never does. Real SQLite, the tiny campaign, a frozen clock."""

from __future__ import annotations

import datetime as dt

import harness
import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import CANARY, GM_TITLE, make_tiny_campaign

from bot.cli import log_command
from bot.console import ConsoleAdapter
from bot.messages import IncomingMessage
from bot.service import BotService
from liminalis.errors import StoreError
from liminalis.lens import GM, PLAYERS
from liminalis.questions import QuestionLog
from liminalis.store import LATEST
from liminalis.testing import FrozenClock

START = dt.datetime(2026, 3, 6, 18, 0, tzinfo=dt.UTC)
NOWHERE = "Where do the dragon eggs of Zanzibar hatch?"


def ask(text: str, *, user: str = "222", channel: str = "C1", **kw) -> IncomingMessage:
    return IncomingMessage(platform="discord", channel_id=channel, user_id=user, text=text, **kw)


def gm(text: str, **kw) -> IncomingMessage:
    return ask(text, user="111", **kw)  # a GM by user id in the tiny campaign


@pytest.fixture
async def table(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    clock = FrozenClock(START)
    engine = await make_engine(tmp_path, milvus=False, clock=clock)
    await engine.ingest("greyhold")
    service = BotService(engine)
    for channel in ("C1", "C2"):
        await service.directory.link("discord", channel, "greyhold")
    yield service, clock
    await close_engine(engine)


async def test_the_schema_has_the_log():
    assert LATEST >= 9


async def test_a_gm_reads_what_players_asked_the_gaps_and_the_documents(table):
    service, clock = table
    found = await service.handle(ask("Who rules Greyhold keep?"))
    assert not found.error and found.sources and found.question_id is not None
    clock.advance(minutes=5)
    nothing = await service.handle(ask(NOWHERE))
    assert "found nothing" in nothing.text and nothing.question_id == found.question_id + 1
    clock.advance(minutes=5)
    await service.handle(ask("Where did the dragon eggs of Zanzibar hatch?", channel="C2"))
    clock.advance(minutes=5)
    await service.handle(ask("Does the baron collect bells?", channel="C2"))
    await service.handle(gm("What is the truth about the baron?"))  # the GM's own: not the table's
    report = await service.engine.question_report("greyhold", days=7)
    assert [q.question for q in report.questions] == [
        "Does the baron collect bells?",
        "Where did the dragon eggs of Zanzibar hatch?",
        NOWHERE,
        "Who rules Greyhold keep?",
    ]
    assert [q.found for q in report.questions] == [True, False, False, True]
    assert all(GM not in q.lens for q in report.questions)
    (gap,) = report.gaps  # two wordings, one gap, asked in two chats
    assert (gap.times, gap.chats, gap.question) == (
        2,
        2,
        "Where did the dragon eggs of Zanzibar hatch?",
    )
    assert gap.last_asked == START + dt.timedelta(minutes=10)
    top = report.documents[0]
    assert (top.doc_id, top.title, top.answers, top.chats) == ("baron", "Baron Aldric", 2, 2)
    text = report.render(name="Greyhold")
    assert "4 questions from players in the last 7 days; 2 found nothing" in text
    assert "Gaps in your notes" in text and "asked 2× in 2 chats" in text
    assert "Baron Aldric — 2 answer(s) in 2 chats" in text
    assert "✗ “Where did the dragon eggs" in text and "Fri 06 Mar 18:10 UTC" in text
    assert "truth about the baron" not in text  # the GM's question is not the table's
    assert "👎" not in text  # no answer was marked down


async def test_a_report_covers_its_days_and_the_log_keeps_a_window(table):
    service, clock = table
    await service.handle(ask("Who rules Greyhold keep?"))
    clock.advance(days=10)
    await service.handle(ask(NOWHERE))
    assert [q.question for q in (await service.engine.question_report("greyhold")).questions] == [
        NOWHERE
    ]
    assert len((await service.engine.question_report("greyhold", days=14)).questions) == 2
    log = QuestionLog(harness.db(service.engine), clock=clock, retention_days=30)
    clock.advance(days=25)  # the first is 35 days old now, past the window
    await log.record("greyhold", "one more?", frozenset({PLAYERS}), chat="x", found=False, cited=())
    kept = await harness.db(service.engine).questions.since("greyhold", 0.0)
    assert [r.question for r in kept] == [NOWHERE, "one more?"]


async def test_the_log_is_a_gms_never_a_players(table):
    service, _ = table
    await service.handle(ask(NOWHERE))
    await service.handle(ask("Who rules Greyhold keep?"))
    player = await service.handle(ask("/log"))
    assert (
        player.error
        and "Only a GM" in player.text
        and "your Discord user id is `222`" in player.text
    )
    assert "dragon" not in player.text
    pending = await service.begin(gm("/log 14"))
    assert pending.private  # deferred privately: never "thinking…" in the channel
    reply = await pending.finish()
    assert reply.ephemeral and not reply.error and "dragon eggs" in reply.text
    assert "Baron Aldric" in reply.text and CANARY not in reply.text
    bad = await service.handle(gm("/log 365"))
    assert bad.error and "Usage: `/log" in bad.text


async def test_the_console_and_the_cli_show_the_same(table):
    service, _ = table
    await service.handle(ask(NOWHERE))
    chat = await ConsoleAdapter(service, campaign="greyhold", lens="gm").ask("/log")
    printed: list[str] = []
    assert await log_command(service.engine, "greyhold", 7, out=printed.append) == 0
    assert printed == [chat.text] and "Gaps in your notes" in chat.text
    player = await ConsoleAdapter(service, campaign="greyhold", lens="players").ask("/log")
    assert player.error and "dragon" not in player.text
    assert await log_command(service.engine, "greyhold", 0, out=printed.append) == 2


async def test_feedback_joins_through_its_seam(table):
    service, _ = table
    down = await service.handle(ask("Who rules Greyhold keep?"))
    await service.handle(ask("Does the baron collect bells?"))

    class Votes:
        async def thumbs_down(self, campaign, question_ids):
            assert campaign == "greyhold" and down.question_id in question_ids
            return {down.question_id: 2}

    service.engine.questions.feedback = Votes()
    report = await service.engine.question_report("greyhold")
    assert [(q.question, q.thumbs_down) for q in report.disliked] == [
        ("Who rules Greyhold keep?", 2)
    ]
    assert "Answers players marked 👎" in report.render()

    class Broken:
        async def thumbs_down(self, campaign, question_ids):
            raise RuntimeError("feedback table gone")

    service.engine.questions.feedback = Broken()
    report = await service.engine.question_report("greyhold")
    assert report.disliked is None and len(report.questions) == 2  # the report stands without


async def test_a_log_that_cannot_be_written_costs_no_answer(table, monkeypatch):
    service, _ = table

    async def broken(*args, **kw):
        raise StoreError("disk full")

    monkeypatch.setattr(service.engine.questions, "record", broken)
    reply = await service.handle(ask("Who rules Greyhold keep?"))
    assert not reply.error and reply.sources and reply.question_id is None


async def test_a_gm_only_document_players_ask_about_is_named_to_the_gm_only(table):
    """The log names the documents answers cited: a GM-only one appears in the GM's report
    (the GM may read its title), and the report never reaches a player."""
    service, _ = table
    await service.handle(gm("What is the truth about the baron?"))
    await service.engine.questions.record(
        "greyhold",
        "what is the baron hiding?",
        frozenset({PLAYERS}),
        chat="discord:C1",
        found=True,
        cited=("gm/plot",),
    )
    report = await service.engine.question_report("greyhold")
    assert [d.title for d in report.documents] == [GM_TITLE]


async def test_a_players_thumbs_down_on_an_answer_reaches_the_gms_log(table):
    """The 👎 a player presses under an answer (the chat surface's card) joins the question log
    by the answer's question id: the GM's report lists it, with no seam set by hand."""
    service, _ = table
    answer = await service.handle(ask("Who rules Greyhold keep?"))
    await service.handle(ask("Does the baron collect bells?"))
    down = next(a.id for a in answer.actions if a.id.startswith("lm:down:"))
    await service.press(ask("", user="333"), down, "It named the wrong baron")
    up = next(a.id for a in answer.actions if a.id.startswith("lm:up:"))
    await service.press(ask("", user="444"), up)
    report = await service.engine.question_report("greyhold")
    assert [(q.question, q.thumbs_down) for q in report.disliked] == [
        ("Who rules Greyhold keep?", 1)
    ]
    assert "Answers players marked 👎" in report.render()
