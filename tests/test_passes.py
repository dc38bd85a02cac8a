"""Passes are data: validation at save, the executor's caps, credit, pause, traces,
a user-defined pass run without code changes, and the GM wall on derived facts.

Real SQLite, documents written through the real loader (so hidden sections become real ``//gm``
views), a scripted pass model, a frozen clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from liminalis.campaign import CampaignConfig
from liminalis.errors import InvalidInput, ModelUnavailable
from liminalis.ingest.loaders import parse_file
from liminalis.lens import gm_lens, players_lens
from liminalis.passes import (
    RECORDS,
    TEXTS,
    NodeContext,
    NodeRegistry,
    Passes,
    Record,
    builtin_registry,
    parse_definition,
)
from liminalis.passes.nodes import install as install_builtins
from liminalis.ports import Usage
from liminalis.store.sqlite import Database
from liminalis.testing import FrozenClock

SLUG = "vale"
CONFIG = CampaignConfig(slug=SLUG, name="Vale", root=Path("/nowhere"), lenses=("mirel",))
CANARY = "the abbess poisoned the well"


class FakePassModel:
    """Replies with ``reply(prompt)``; counts calls; each call costs 10 + 5 tokens."""

    def __init__(self, reply: Callable[[str], str] = lambda p: "{}") -> None:
        self.reply = reply
        self.prompts: list[str] = []
        self.down = False

    async def complete(
        self,
        role: str,
        system: str,
        prompt: str,
        *,
        campaign: str,
        pass_id: str,
        node: str,
        max_tokens: int,
        requested: bool = False,
    ) -> tuple[str, Usage]:
        if self.down:
            raise ModelUnavailable("scripted outage")
        self.prompts.append(prompt)
        return self.reply(prompt), Usage(input_tokens=10, output_tokens=5)


class CreditsGate:
    """One credit per model call; refuses background work once they are spent."""

    def __init__(self, credits: int) -> None:
        self.credits = credits

    async def allow_background(self, campaign: str, *, requested: bool = False) -> bool:
        return self.credits > 0

    async def charge(
        self, campaign: str, *, pass_id: str, node: str, role: str, usage: Usage
    ) -> None:
        self.credits -= 1


@pytest.fixture
async def db(tmp_path):
    async with Database(tmp_path / "db.sqlite3") as database:
        yield database


async def put(db: Database, rel_path: str, text: str) -> None:
    """Store a file's views as the indexer would (passages are not what passes read)."""
    for view in parse_file(text.encode(), rel_path, CONFIG).views:
        await db.documents.replace(SLUG, view, [], {})


def npc(name: str, mood: str, extra: str = "") -> str:
    return f"---\ntitle: {name}\ntype: npc\n---\n# {name}\n\n{name} is {mood}.{extra}\n"


def make(db: Database, model: FakePassModel | None = None, **kw: Any) -> Passes:
    return Passes(db, clock=FrozenClock(), model=model or FakePassModel(), **kw)


def graph(*nodes: dict[str, Any], **top: Any) -> str:
    return json.dumps({"name": top.pop("name", "probe"), "nodes": list(nodes), **top})


SELECT = {"id": "docs", "type": "select-documents"}
WHOLE = {"id": "whole", "type": "split", "params": {"by": "whole"}, "inputs": {"views": "docs"}}
ASK = {
    "id": "ask",
    "type": "prompt-model",
    "params": {"prompt": "$text"},
    "inputs": {"items": "whole"},
}
PARSE = {"id": "parse", "type": "parse-json", "inputs": {"items": "ask"}}
WRITE = {
    "id": "write",
    "type": "write-facts",
    "params": {"key": "k"},
    "inputs": {"records": "parse"},
}


# -- validation at save ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "node", "says"),
    [
        (
            # ask ← loop ← ask: the two prompt nodes feed each other
            [
                {"id": "ask", "type": "prompt-model", "params": {"prompt": "$text"}},
                {"id": "loop", "type": "prompt-model", "params": {"prompt": "$text"}},
            ],
            "ask",
            "cycle (ask → loop → ask)",
        ),
        ([SELECT, {"id": "zap", "type": "summon-demon"}], "zap", "unknown type `summon-demon`"),
        (
            [SELECT, {"id": "ents", "type": "extract-entities", "inputs": {"items": "docs"}}],
            "ents",
            "not registered yet",
        ),
        ([SELECT, {"id": "whole", "type": "split"}], "whole", "input `views` is not connected"),
        (
            [SELECT, {"id": "parse", "type": "parse-json", "inputs": {"items": "docs"}}],
            "parse",
            "takes `texts` but node `docs` makes `views`",
        ),
        (
            [SELECT, WHOLE, ASK, PARSE, {**WRITE, "params": {}}],
            "write",
            "exactly one of params.key",
        ),
        ([SELECT, {**WHOLE, "inputs": {"vews": "docs"}}], "whole", "no input `vews`"),
    ],
    ids=["cycle", "unknown", "placeholder", "missing", "mismatch", "params", "no-such-input"],
)
async def test_a_bad_definition_is_refused_at_save_naming_the_node(db, nodes, node, says):
    edges = (
        [
            {"from": "loop", "to": "ask", "input": "items"},
            {"from": "ask", "to": "loop", "input": "items"},
        ]
        if nodes[0]["id"] == "ask"
        else []
    )
    # The built-in node types alone: importing liminalis.knowledge.passes (another test may
    # have) registers the reserved knowledge types in the process's registry.
    builtins = NodeRegistry()
    install_builtins(builtins)
    passes = make(db, registry=builtins)
    with pytest.raises(InvalidInput) as info:
        await passes.save(SLUG, graph(*nodes, edges=edges))
    assert f"node `{node}`" in info.value.user_message
    assert says in info.value.user_message
    assert await db.passes.definitions(SLUG) == []


async def test_json_and_toml_are_one_definition(db):
    toml = """
name = "probe"
[[nodes]]
id = "docs"
type = "select-documents"
[[nodes]]
id = "whole"
type = "split"
params = { by = "whole" }
inputs = { views = "docs" }
"""
    as_toml = parse_definition(toml)
    as_json = parse_definition(graph(SELECT, WHOLE))
    assert as_toml.digest() == as_json.digest()
    assert await make(db).save(SLUG, as_toml) is True
    assert await make(db).save(SLUG, as_json) is False  # unchanged: nothing to redo


# -- a pass nobody wrote code for ------------------------------------------------------------

MOODS_PASS = {
    "name": "npc-moods",
    "description": "each NPC's mood, as the model reads it",
    "triggers": ["changed"],
    "caps": {"model_calls": 20},
    "nodes": [
        {"id": "npcs", "type": "select-documents", "params": {"types": ["npc"], "views": "shared"}},
        {"id": "whole", "type": "split", "params": {"by": "whole"}},
        {
            "id": "ask",
            "type": "prompt-model",
            "params": {
                "system": "You read tabletop notes.",
                "prompt": 'Give {"name": ..., "mood": ...} for $title:\n$text',
            },
        },
        {
            "id": "parse",
            "type": "parse-json",
            "params": {
                "schema": {
                    "type": "object",
                    "required": ["name", "mood"],
                    "properties": {"name": {"type": "string"}, "mood": {"type": "string"}},
                }
            },
        },
        {
            "id": "write",
            "type": "write-facts",
            "params": {"key_field": "name", "value_field": "mood"},
        },
    ],
    "edges": [
        {"from": "npcs", "to": "whole", "input": "views"},
        {"from": "whole", "to": "ask", "input": "items"},
        {"from": "ask", "to": "parse", "input": "items"},
        {"from": "parse", "to": "write", "input": "records"},
    ],
}


def mood_reply(prompt: str) -> str:
    """The model of the test: reads "X is MOOD." back as JSON, wrapped in prose as models do."""
    title = prompt.split(" for ", 1)[1].split(":", 1)[0]
    mood = prompt.split(f"{title} is ", 1)[1].split(".", 1)[0]
    return f'Sure! ```json\n{{"name": "{title}", "mood": "{mood}"}}\n```'


async def test_a_user_defined_pass_with_its_own_key_runs_without_code_changes(db):
    await put(db, "npcs/odo.md", npc("Odo", "wary"))
    await put(db, "npcs/wren.md", npc("Wren", "cheerful"))
    await put(db, "lore/river.md", "# River\n\nThe river is cold.\n")  # not an NPC: no call
    model = FakePassModel(mood_reply)
    passes = make(db, model)
    assert await passes.save(SLUG, json.dumps(MOODS_PASS))

    result = await passes.run(SLUG, "npc-moods")

    assert (result.status, result.documents_done, result.documents_left) == ("done", 3, 0)
    assert len(model.prompts) == 2
    facts = await passes.facts(SLUG, players_lens(), pass_name="npc-moods")
    assert {(f.key, f.value) for f in facts} == {("Odo", "wary"), ("Wren", "cheerful")}
    assert (await passes.facts(SLUG, players_lens(), key="Odo"))[0].doc_id == "npcs/odo"
    # nothing pending now; an edit makes one document pending, and only it is asked again
    assert (await passes.run(SLUG, "npc-moods", trigger="changed")).status == "idle"
    await put(db, "npcs/odo.md", npc("Odo", "furious"))
    again = await passes.run(SLUG, "npc-moods", trigger="changed")
    assert (again.documents_done, len(model.prompts)) == (1, 3)
    facts = await passes.facts(SLUG, players_lens(), key="Odo")
    assert [f.value for f in facts] == ["furious"]  # replaced, not added


async def test_every_node_execution_is_traced(db):
    for i in range(3):
        await put(db, f"npcs/n{i}.md", npc(f"N{i}", "calm"))
    passes = make(db, FakePassModel(mood_reply))
    await passes.save(SLUG, json.dumps(MOODS_PASS))
    result = await passes.run(SLUG, "npc-moods")
    assert result.run_id is not None

    trace = await db.passes.trace(result.run_id)

    node_ids = [n["id"] for n in MOODS_PASS["nodes"]]
    assert [(t.doc_id, t.node_id) for t in trace] == [
        (f"npcs/n{i}", node) for i in range(3) for node in node_ids
    ]
    assert [t.seq for t in trace] == list(range(1, 16))
    ask = [t for t in trace if t.node_id == "ask"]
    assert all(
        (t.model_calls, t.tokens, t.inputs, t.output_size) == (1, 15, {"items": 1}, 1) for t in ask
    )
    assert all(t.error == "" for t in trace)
    assert result.node_executions == 15 and result.model_calls == 3 and result.tokens == 45
    shown = (await passes.report(SLUG, "npc-moods")).render()
    assert f"last run #{result.run_id} (requested): done" in shown
    assert "ask (prompt-model): 3×, 3 items out, 0 with errors, 3 calls, 45 tokens" in shown


async def test_a_reply_that_breaks_the_schema_is_dropped_and_its_error_traced(db):
    await put(db, "npcs/odo.md", npc("Odo", "wary"))
    passes = make(db, FakePassModel(lambda p: '{"name": "Odo"}'))
    await passes.save(SLUG, json.dumps(MOODS_PASS))
    result = await passes.run(SLUG, "npc-moods")
    assert (result.status, result.documents_done, result.facts) == ("done", 1, 0)
    [parse] = [t for t in await db.passes.trace(result.run_id or 0) if t.node_id == "parse"]
    assert "missing 'mood'" in parse.error and parse.output_size == 0


# -- caps ------------------------------------------------------------------------------------


def fanout(**caps: int) -> str:
    """A runaway: one model call per sentence of every document."""
    return graph(
        SELECT,
        {
            "id": "sentences",
            "type": "split",
            "params": {"by": "sentences"},
            "inputs": {"views": "docs"},
        },
        {**ASK, "inputs": {"items": "sentences"}},
        name="fanout",
        caps=caps,
        concurrency=1,
    )


async def test_a_cap_stops_a_runaway_fanout_and_says_why(db):
    body = " ".join(f"Sentence number {i} is here." for i in range(50))
    for name in ("a", "b", "c"):
        await put(db, f"{name}.md", f"# {name}\n\n{body}\n")
    model = FakePassModel()
    passes = make(db, model)
    await passes.save(SLUG, fanout(model_calls=5))

    result = await passes.run(SLUG, "fanout")

    assert result.status == "capped" and "model_calls cap (5)" in result.reason
    assert (len(model.prompts), result.model_calls) == (5, 5)
    assert (result.documents_done, result.documents_left) == (0, 3)
    [run] = await db.passes.runs(SLUG, "fanout")
    assert (run.status, run.reason, run.documents_left) == ("capped", result.reason, 3)
    pending, _ = await passes.executor.pending(SLUG, "fanout")
    assert [p[0] for p in pending] == ["a", "b", "c"]  # nothing marked done
    [ask] = [t for t in await db.passes.trace(run.run_id) if t.node_id == "ask"]
    assert ask.error.startswith("stopped: model_calls cap")


async def test_node_execution_and_token_caps_stop_cleanly(db):
    for name in ("a", "b", "c"):
        await put(db, f"{name}.md", f"# {name}\n\nOne. Two.\n")
    passes = make(db)
    await passes.save(SLUG, fanout(node_executions=4))
    by_nodes = await passes.run(SLUG, "fanout")
    # a: docs, sentences, ask (3 executions); b: docs, then the cap
    assert by_nodes.status == "capped" and "node_executions cap (4)" in by_nodes.reason
    assert (by_nodes.documents_done, by_nodes.documents_left, by_nodes.node_executions) == (1, 2, 4)

    model = FakePassModel()
    passes = make(db, model)
    # each call reserves ~403 (its prompt and max_tokens 400) and costs 15: the third would
    # pass 420 (30 spent + 403), so it is never made
    await passes.save(SLUG, graph(SELECT, WHOLE, ASK, name="tokens", caps={"tokens": 420}))
    by_tokens = await passes.run(SLUG, "tokens")
    assert by_tokens.status == "capped" and "tokens cap (420)" in by_tokens.reason
    assert by_tokens.tokens <= 420 and by_tokens.documents_done == len(model.prompts) == 2


# -- credit ----------------------------------------------------------------------------------


async def test_credit_exhaustion_stops_new_documents_and_a_top_up_picks_up_the_rest(db):
    for i in range(5):
        await put(db, f"npcs/n{i}.md", npc(f"N{i}", "calm"))
    model, gate = FakePassModel(mood_reply), CreditsGate(credits=2)
    passes = make(db, model, gate=gate)
    await passes.save(SLUG, json.dumps(MOODS_PASS))

    first = await passes.run(SLUG, "npc-moods", trigger="changed")

    assert first.status == "credit" and "credit gate" in first.reason
    assert (first.documents_done, first.documents_left, len(model.prompts)) == (2, 3, 2)
    assert len(await passes.facts(SLUG, gm_lens(), pass_name="npc-moods")) == 2
    # still refused: the next trigger starts nothing new
    assert (await passes.run(SLUG, "npc-moods", trigger="changed")).documents_done == 0

    gate.credits = 10
    second = await passes.run(SLUG, "npc-moods", trigger="changed")

    assert (second.status, second.documents_done, second.documents_left) == ("done", 3, 0)
    assert len(model.prompts) == 5  # each document asked once over both runs
    facts = await passes.facts(SLUG, players_lens(), pass_name="npc-moods")
    assert sorted(f.key for f in facts) == [f"N{i}" for i in range(5)]


async def test_a_model_outage_stops_the_run_and_leaves_documents_pending(db):
    await put(db, "npcs/odo.md", npc("Odo", "wary"))
    model = FakePassModel(mood_reply)
    model.down = True
    passes = make(db, model)
    await passes.save(SLUG, json.dumps(MOODS_PASS))
    down = await passes.run(SLUG, "npc-moods")
    assert down.status == "failed" and "model unavailable" in down.reason
    assert down.documents_left == 1
    model.down = False
    assert (await passes.run(SLUG, "npc-moods", trigger="changed")).documents_done == 1


# -- pause -----------------------------------------------------------------------------------


async def test_pause_is_lossless(db):
    model = FakePassModel(mood_reply)
    passes = make(db, model)
    await passes.save(SLUG, json.dumps({**MOODS_PASS, "cron": "0 4 * * *"}))
    await put(db, "npcs/odo.md", npc("Odo", "wary"))
    await passes.run(SLUG, "npc-moods", trigger="changed")

    await passes.pause(SLUG)
    await put(db, "npcs/odo.md", npc("Odo", "furious"))
    await put(db, "npcs/wren.md", npc("Wren", "cheerful"))
    assert [r.status for r in await passes.run_triggered(SLUG, "changed")] == ["paused"]
    assert [r.status for r in await passes.run_triggered(SLUG, "scheduled")] == ["paused"]
    passes.on_ingested(SLUG)
    await passes.idle()
    assert len(model.prompts) == 1  # nothing ran while paused
    pending, _ = await passes.executor.pending(SLUG, "npc-moods")
    assert [p[0] for p in pending] == ["npcs/odo", "npcs/wren"]

    assert await passes.resume(SLUG)
    passes.on_ingested(SLUG)  # the next ingest after the pause
    await passes.idle()

    facts = await passes.facts(SLUG, players_lens(), pass_name="npc-moods")
    assert {(f.key, f.value) for f in facts} == {("Odo", "furious"), ("Wren", "cheerful")}
    assert len(model.prompts) == 3


async def test_a_requested_run_runs_on_a_paused_campaign(db):
    await put(db, "npcs/odo.md", npc("Odo", "wary"))
    passes = make(db, FakePassModel(mood_reply))
    await passes.save(SLUG, json.dumps(MOODS_PASS))
    await passes.pause(SLUG)
    result = await passes.run(SLUG, "npc-moods")  # "run now"
    assert (result.status, result.documents_done) == ("done", 1)
    assert await passes.paused(SLUG)


# -- the GM wall -----------------------------------------------------------------------------


async def test_a_fact_from_a_gm_view_is_invisible_to_players(db):
    await put(
        db,
        "places/abbey.md",
        f"# The Abbey\n\nThe abbey stands on the hill.\n\n<!-- {CANARY} -->\n\nMonks sing at dusk.\n",
    )
    await put(db, "gm/plot.md", "# Plot\n\nThe bishop funds the bandits.\n")
    passes = make(db, FakePassModel(lambda p: json.dumps({"said": p})))
    await passes.save(
        SLUG,
        graph(SELECT, WHOLE, ASK, PARSE, {**WRITE, "params": {"key": "claim"}}, name="claims"),
    )
    await passes.run(SLUG, "claims")

    def said(facts: list[Any]) -> str:
        return " ".join(json.dumps(f.value) for f in facts)

    seen_by_players = await passes.facts(SLUG, players_lens("mirel"), key="claim")
    seen_by_gm = await passes.facts(SLUG, gm_lens(), key="claim")
    assert {f.view_id for f in seen_by_players} == {"places/abbey"}
    assert CANARY not in said(seen_by_players) and "bishop" not in said(seen_by_players)
    assert {f.view_id for f in seen_by_gm} == {"places/abbey//gm", "gm/plot"}
    assert CANARY in said(seen_by_gm) and "bishop" in said(seen_by_gm)
    # the wall is in the store: a read by doc, pass or key goes through the lens too
    assert await passes.facts(SLUG, players_lens(), doc_id="gm/plot") == []


# -- extension points ------------------------------------------------------------------------


async def test_a_registered_node_type_and_a_hook_join_definitions(db):
    registry = builtin_registry().copy()

    async def shout(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Record, ...]:
        return tuple(Record(view=p.view, data={"loud": p.text.upper()}) for p in inputs["items"])

    async def explode(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Record, ...]:
        if "boom" in ctx.document.doc_id:
            raise RuntimeError("hook failed")
        return tuple(inputs["items"])

    registry.register("shout", {"items": TEXTS}, RECORDS, shout)
    registry.register_hook("maybe-explode", explode, inputs={"items": RECORDS}, output=RECORDS)
    await put(db, "a.md", "# A\n\nquiet words\n")
    await put(db, "boom.md", "# Boom\n\nloud words\n")
    passes = make(db, registry=registry)
    await passes.save(
        SLUG,
        graph(
            SELECT,
            WHOLE,
            {"id": "shout", "type": "shout", "inputs": {"items": "whole"}},
            {
                "id": "hook",
                "type": "callable",
                "params": {"hook": "maybe-explode"},
                "inputs": {"items": "shout"},
            },
            {
                **WRITE,
                "params": {"key": "loud", "value_field": "loud"},
                "inputs": {"records": "hook"},
            },
            name="loud",
        ),
    )
    result = await passes.run(SLUG, "loud")
    assert (result.documents_done, result.documents_failed) == (1, 1)
    assert [f.value for f in await passes.facts(SLUG, gm_lens(), key="loud")] == [
        "# A\n\nQUIET WORDS"
    ]
    states = await db.passes.states(SLUG, "loud")
    assert states["boom"].status == "failed" and "hook failed" in states["boom"].error
    # not retried until it changes
    assert (await passes.run(SLUG, "loud", trigger="changed")).status == "idle"
    with pytest.raises(InvalidInput, match="not a registered hook"):
        await passes.save(
            SLUG,
            graph(SELECT, {"id": "h", "type": "callable", "params": {"hook": "nope"}}, name="x"),
        )


async def test_a_changed_definition_runs_again_and_a_removed_document_loses_its_facts(db):
    await put(db, "npcs/odo.md", npc("Odo", "wary"))
    await put(db, "npcs/wren.md", npc("Wren", "calm"))
    model = FakePassModel(mood_reply)
    passes = make(db, model)
    await passes.save(SLUG, json.dumps(MOODS_PASS))
    await passes.run(SLUG, "npc-moods")
    assert await passes.save(SLUG, json.dumps({**MOODS_PASS, "description": "v2"}))
    for view in ("npcs/wren",):
        await db.documents.remove(SLUG, view)
    again = await passes.run(SLUG, "npc-moods", trigger="changed")
    assert again.documents_done == 1 and len(model.prompts) == 3
    assert [f.key for f in await passes.facts(SLUG, gm_lens())] == ["Odo"]


async def test_a_run_cancelled_at_shutdown_is_recorded_and_its_documents_stay_pending(db):
    await put(db, "npcs/odo.md", npc("Odo", "wary"))
    started, release = asyncio.Event(), asyncio.Event()

    class HeldModel(FakePassModel):
        async def complete(self, *args: Any, **kw: Any) -> tuple[str, Usage]:
            started.set()
            await release.wait()
            return await super().complete(*args, **kw)

    passes = make(db, HeldModel(mood_reply))
    await passes.save(SLUG, json.dumps(MOODS_PASS))
    passes.on_ingested(SLUG)
    await started.wait()

    await passes.close()

    [run] = await db.passes.runs(SLUG, "npc-moods")
    assert (run.status, run.documents_done, run.documents_left) == ("cancelled", 0, 1)
    pending, _ = await passes.executor.pending(SLUG, "npc-moods")
    assert [p[0] for p in pending] == ["npcs/odo"]


async def test_a_pass_run_tells_its_watchers_documents_done_of_pending(db):
    """``liminalis pass run`` draws these on a terminal (``ProgressReporter``)."""
    for name, mood in (("Odo", "wary"), ("Wren", "cheerful"), ("Ash", "tired")):
        await put(db, f"npcs/{name.lower()}.md", npc(name, mood))
    passes = make(db, FakePassModel(mood_reply))
    assert await passes.save(SLUG, json.dumps(MOODS_PASS))
    seen: list[tuple[str, int, int | None]] = []
    passes.watch_progress(lambda p: seen.append((p.stage, p.done, p.total)))

    await passes.run(SLUG, "npc-moods")

    assert seen[0] == ("pass npc-moods", 0, 3) and seen[-1] == ("pass npc-moods", 3, 3)
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
