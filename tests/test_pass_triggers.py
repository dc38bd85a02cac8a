"""The triggers of passes: after an ingest (tick and upload alike), on a cron job,
and on request from the command line; all over the tiny campaign's real ingest."""

from __future__ import annotations

import json

import harness
import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import CANARY, make_tiny_campaign

from bot.cli import pass_command
from bot.main import open_passes
from bot.messages import IncomingMessage
from bot.pass_jobs import PassJobs
from bot.scheduler import RecapScheduler
from bot.service import BotService
from liminalis.ingest.sections import source_of
from liminalis.lens import gm_lens, players_lens
from liminalis.routing import Limits, Router
from liminalis.testing import FrozenClock, ScriptedModel

SLUG = "greyhold"

ECHO = {
    "name": "echo",
    "nodes": [
        {"id": "docs", "type": "select-documents"},
        {"id": "whole", "type": "split", "params": {"by": "whole"}, "inputs": {"views": "docs"}},
        {
            "id": "ask",
            "type": "prompt-model",
            "params": {"prompt": "Restate: $text", "role": "analysis"},
            "inputs": {"items": "whole"},
        },
        {"id": "parse", "type": "parse-json", "inputs": {"items": "ask"}},
        {
            "id": "write",
            "type": "write-facts",
            "params": {"key": "said", "value_field": "said"},
            "inputs": {"records": "parse"},
        },
    ],
}


class EchoModel(ScriptedModel):
    """A ``LanguageModel`` that says back, as JSON, the prompt it was given."""

    async def complete(
        self, *, system, messages, cache_upto=0, max_tokens=800, role="reply", model=None
    ):
        self.replies = [json.dumps({"said": messages[-1].content})]
        return await super().complete(
            system=system,
            messages=messages,
            cache_upto=cache_upto,
            max_tokens=max_tokens,
            role=role,
            model=model,
        )


def routed(engine, model):
    """The model behind the router, as the service builds it: passes spend through its gate."""
    return Router(
        model, db=harness.db(engine), clock=FrozenClock(), limits=Limits(default_credits=100_000)
    )


@pytest.fixture
async def engine(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    yield engine
    await close_engine(engine)


async def sources(engine) -> set[str]:
    return {source_of(d) for d in await harness.db(engine).documents.hashes(SLUG)}


async def test_an_ingest_runs_the_changed_passes_in_the_background(engine, tmp_path):
    model = EchoModel()
    async with open_passes(engine, routed(engine, model), listen=True) as passes:
        await passes.save(SLUG, json.dumps(ECHO))
        await engine.ingest(SLUG)  # the scheduler's tick calls this
        await passes.idle()
        [first] = await harness.db(engine).passes.runs(SLUG, "echo")
        assert (first.trigger, first.status) == ("changed", "done")
        assert first.documents_done == len(await sources(engine)) > 0

        # an upload ingests one file: only it is processed
        new = tmp_path / "campaigns" / SLUG / "tavern.md"
        new.write_text("# The Tavern\n\nThe Drowned Bell serves river eel.\n", encoding="utf-8")
        # (the seeded knowledge passes run beside it, asking with their own roles)
        calls = len([r for r in model.requests if r["role"] == "analysis"])
        await engine.ingest(SLUG, new)
        await passes.idle()
        second = (await harness.db(engine).passes.runs(SLUG, "echo"))[0]
        assert second.run_id > first.run_id and second.documents_done == 1
        assert len([r for r in model.requests if r["role"] == "analysis"]) == calls + 1

        players = json.dumps([f.value for f in await passes.facts(SLUG, players_lens())])
        gm = json.dumps([f.value for f in await passes.facts(SLUG, gm_lens())])
        assert "river eel" in players and CANARY not in players and CANARY in gm
    assert engine.ingest_listeners == []  # the lifetime ends the listening


async def test_a_scheduled_pass_gets_a_cron_job_that_respects_a_pause(engine):
    await engine.ingest(SLUG)
    async with open_passes(engine, routed(engine, EchoModel())) as passes:
        await passes.save(SLUG, json.dumps({**ECHO, "cron": "0 4 * * *", "triggers": []}))
        scheduler = RecapScheduler(BotService(engine), clock=FrozenClock(), tick_seconds=0)
        jobs = PassJobs(passes, scheduler)
        async with scheduler:
            await jobs.sync()
            assert "pass:greyhold:echo" in scheduler.jobs()
            await passes.pause(SLUG)
            await jobs.fire(SLUG, "echo")
            assert await harness.db(engine).passes.runs(SLUG, "echo") == []
            await passes.resume(SLUG)
            await jobs.fire(SLUG, "echo")
            [run] = await harness.db(engine).passes.runs(SLUG, "echo")
            assert (run.trigger, run.status) == ("scheduled", "done")
            await passes.delete(SLUG, "echo")
            await jobs.sync()
            assert "pass:greyhold:echo" not in scheduler.jobs()


async def test_the_pass_commands(engine, tmp_path):
    await engine.ingest(SLUG)
    lines: list[str] = []
    file = tmp_path / "echo.json"
    file.write_text(json.dumps({**ECHO, "description": "says it back"}), encoding="utf-8")
    async with open_passes(engine, routed(engine, EchoModel())) as passes:

        async def cli(action: str, name: str | None = None) -> int:
            return await pass_command(passes, action, SLUG, name, out=lines.append)

        assert await cli("save", str(file)) == 0
        assert await cli("list") == 0
        assert await cli("pause") == 0
        assert await cli("run", "echo") == 0  # "run now" runs on a paused campaign
        assert await cli("show", "echo") == 0
        assert await cli("resume") == 0
        assert await cli("run") == 2
    text = "\n".join(lines)
    assert "pass echo saved" in text
    assert "- echo: changed; 5 nodes. says it back" in text
    assert "pass echo on greyhold: done;" in text
    assert "last run #1 (requested): done" in text
    assert "ask (prompt-model):" in text and "pending documents: 0" in text
    assert "passes of greyhold resumed" in text


async def test_passes_spend_through_the_router_its_credits_stop_them_and_a_top_up_resumes(engine):
    """The router is the passes' one gate: out of credits, a run stops taking documents and
    leaves them pending; after a top-up the next run finishes them; every call is in the
    campaign's spend report under its pass and node."""
    await engine.ingest(SLUG)
    router = Router(
        EchoModel(), db=harness.db(engine), clock=FrozenClock(), limits=Limits(default_credits=0)
    )
    async with open_passes(engine, router) as passes:
        await passes.save(SLUG, json.dumps(ECHO))
        stopped = await passes.run(SLUG, "echo", trigger="changed")
        assert stopped.status == "credit" and stopped.documents_done == 0
        assert stopped.documents_left == len(await sources(engine))
        await router.add_credits(SLUG, 50_000)
        done = await passes.run(SLUG, "echo", trigger="changed")
        assert done.status == "done" and done.documents_done == len(await sources(engine))
    report = await router.report(SLUG)
    assert report.calls == done.model_calls > 0
    assert {(line.pass_id, line.node) for line in report.lines} == {("echo", "ask")}


def discord(text: str, *, user: str) -> IncomingMessage:
    return IncomingMessage(platform="discord", channel_id="C1", user_id=user, text=text)


async def test_a_gm_runs_the_passes_from_chat_and_a_player_is_refused(engine):
    """``/gm pass`` through the service, as a Discord message in a shared channel: a GM lists,
    pauses (the router's flag: autonomous work is refused), runs on request through the pause,
    shows and resumes, each reply private and the same text ``liminalis pass`` prints; a player
    is refused and learns nothing of the passes."""
    await engine.ingest(SLUG)
    router = routed(engine, EchoModel())
    async with open_passes(engine, router) as passes:
        await passes.save(SLUG, json.dumps({**ECHO, "description": "says it back"}))
        service = BotService(engine, passes=passes)
        await service.directory.link("discord", "C1", SLUG)

        async def gm(text: str):
            pending = await service.begin(discord(text, user="111"))  # a GM by user id
            assert pending.private  # deferred privately: never "thinking…" in the channel
            reply = await pending.finish()
            assert reply.ephemeral and not reply.error, reply.text
            return reply

        listed = await gm("/gm pass list")
        assert "passes of greyhold:" in listed.text and "- echo: changed; 5 nodes." in listed.text
        assert "passes of greyhold paused" in (await gm("/gm pass pause")).text
        assert await router.is_paused(SLUG) and not await router.allow_background(SLUG)
        assert "(paused)" in (await gm("/gm pass list")).text
        ran = await gm("/gm pass run echo")  # requested: runs through the pause
        assert "pass echo on greyhold: done;" in ran.text and "0 left" in ran.text
        shown = await gm("/gm pass show echo")
        assert "last run #1 (requested): done" in shown.text
        assert "passes of greyhold resumed" in (await gm("/gm pass resume")).text
        assert not await router.is_paused(SLUG)

        printed: list[str] = []
        assert await pass_command(passes, "show", SLUG, "echo", out=printed.append) == 0
        assert printed == [shown.text]  # one text, built once

        unknown = await service.handle(discord("/gm pass show nosuch", user="111"))
        assert unknown.error and "No pass named `nosuch`" in unknown.text
        usage = await service.handle(discord("/gm pass run", user="111"))
        assert usage.error and "Usage: `/pass" in usage.text

        for words in ("/gm pass list", "/gm pass run echo", "/gm pass pause"):
            player = await service.handle(discord(words, user="222"))
            assert player.error and player.ephemeral and "Only a GM" in player.text
            assert "echo" not in player.text
        assert not await router.is_paused(SLUG)
        assert len(await harness.db(engine).passes.runs(SLUG, "echo", limit=10)) == 1

    # A process that runs no passes says so rather than pretend.
    bare = BotService(engine)
    reply = await bare.handle(discord("/gm pass list", user="111"))
    assert "not running in this process" in reply.text and reply.ephemeral
