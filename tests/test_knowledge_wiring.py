"""The knowledge layer wired into the product: the seeded passes after every ingest,
the commands that read them, time questions, the overview in the cached prefix, and the GM wall
across all of it. Real SQLite, the real sample campaign, the hash embedder, frozen clocks."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from dataclasses import replace

import harness
import pytest
from conftest import SAMPLE, close_engine, make_engine
from fakes.anthropic_server import FakeAnthropic
from fakes.tiny_campaign import make_tiny_campaign
from test_hidden_sections import MIREL_SECRET, NPC, SECRET
from test_knowledge import DATA, GM_ONLY_NAMES, LENS_ONLY_NAMES

from bot.commands import REGISTRY, Scope
from bot.console import format_reply, save_files
from bot.discord_adapter._render import render_reply
from bot.messages import Attachment, IncomingMessage, Reply
from bot.service import BotService
from bot.slack_adapter._render import FILES_NOTE, render_blocks
from liminalis.adapters.anthropic import AnthropicModel
from liminalis.adapters.relmap_png import render_png
from liminalis.answer import Responder
from liminalis.context.prompt import build_prompt
from liminalis.ingest.sections import source_of
from liminalis.knowledge.passes import (
    KNOWLEDGE_PASSES,
    KnowledgePasses,
    merge_model_entities,
    seeded_definitions,
)
from liminalis.knowledge.service import extract_parts
from liminalis.lens import Lens
from liminalis.passes import LanguageModelPassModel, Passes
from liminalis.testing import FrozenClock, ScriptedModel
from liminalis.types import Document

SLUG = "emberfall"
PLAYERS = frozenset({"players"})
MIREL = frozenset({"players", "mirel"})
GM = frozenset({"gm"})


async def wire(engine, *, model=None) -> tuple[Passes, KnowledgePasses]:
    """Passes over the engine's store with the knowledge passes attached, listening to ingests
    (what ``bot.main.open_passes`` does, with a frozen clock)."""
    passes = Passes(
        harness.db(engine),
        clock=FrozenClock(),
        model=LanguageModelPassModel(model) if model is not None else None,
    )
    knowledge = KnowledgePasses(passes, model=model is not None).attach()
    engine.ingest_listeners.append(passes.on_ingested)
    return passes, knowledge


@pytest.fixture(scope="module")
async def wired(tmp_path_factory):
    """The sample campaign ingested once, its seeded passes run in the background."""
    tmp = tmp_path_factory.mktemp("wired")
    shutil.copytree(SAMPLE, tmp / "campaigns" / SLUG)
    engine = await make_engine(tmp, milvus=False)
    passes, _ = await wire(engine)
    await engine.ingest(SLUG)
    await passes.idle()
    yield engine, passes
    await passes.close()
    await close_engine(engine)


@pytest.fixture
async def fresh(tmp_path):
    """A writable copy of the sample campaign, ingested, its passes wired and run."""
    shutil.copytree(SAMPLE, tmp_path / "campaigns" / SLUG)
    engine = await make_engine(tmp_path, milvus=False)
    passes, knowledge = await wire(engine)
    await engine.ingest(SLUG)
    await passes.idle()
    yield engine, passes, knowledge
    await passes.close()
    await close_engine(engine)


def console(text: str, lens: str = "players") -> IncomingMessage:
    roles = {"players": (), "gm": ("gm",), "mirel": ("mirel",)}[lens]
    return IncomingMessage(
        platform="console", channel_id="console", user_id="u", text=text, roles=roles
    )


async def sources(engine) -> set[str]:
    return {source_of(d) for d in await harness.db(engine).documents.hashes(SLUG)}


# -- the seeded passes -------------------------------------------------------------------------


async def test_an_ingest_runs_the_seeded_passes_and_the_knowledge_tables_hold_their_facts(wired):
    engine, passes = wired
    files = await sources(engine)
    for name in KNOWLEDGE_PASSES:
        [run] = await harness.db(engine).passes.runs(SLUG, name)
        assert (run.trigger, run.status, run.documents_done) == ("changed", "done", len(files))
        report = await passes.report(SLUG, name)
        assert report.pending == 0 and report.last_run is not None
    views = await harness.db(engine).knowledge.views(SLUG)
    assert {v.doc_id for v in views} == set(await harness.db(engine).documents.hashes(SLUG))
    assert all(v.summary and v.summary_method for v in views)
    # GM-only inputs make GM-only outputs; a hidden section lives only in the X//gm view
    by_id = {v.doc_id: v for v in views}
    assert by_id["gm/secrets"].visibility == {"gm"}
    assert by_id["factions/bellwrights-guild//gm"].visibility == {"gm"}
    assert "gm" not in by_id["factions/bellwrights-guild"].visibility
    # the per-lens overviews, built from the stored facts of what each lens reads
    keys = await harness.db(engine).knowledge.overview_keys(SLUG)
    assert keys == ["gm", "mirel,players", "players", "players,tobin"]
    stored = await engine.knowledge.stored_overview(SLUG, PLAYERS)
    assert stored == await engine.knowledge.overview(SLUG, PLAYERS, max_chars=4000)
    assert "Session 7" in stored and "secrets/" not in stored
    assert "gm/ 2, (top level)/ 1, secrets/ 1" in await engine.knowledge.stored_overview(SLUG, GM)


async def test_seeding_is_idempotent_and_a_new_variant_runs_everything_again(fresh):
    engine, passes, knowledge = fresh
    before = await harness.db(engine).passes.states(SLUG, "entities")
    assert await knowledge.seed(SLUG) == []
    assert await knowledge.seed(SLUG) == []
    assert await harness.db(engine).passes.states(SLUG, "entities") == before
    assert await knowledge.pending(SLUG) == 0
    results = await passes.run_triggered(SLUG, "changed")
    assert {r.status for r in results} == {"idle"}
    # a model configured later: the model-backed variants replace the offline ones, and every
    # document is pending for them (and only the knowledge passes were touched)
    modelled = KnowledgePasses(passes, model=True)
    assert sorted(await modelled.seed(SLUG)) == sorted(KNOWLEDGE_PASSES)
    assert await modelled.pending(SLUG) == len(await sources(engine))


async def test_an_edit_reruns_that_file_alone_and_a_removed_file_or_section_is_forgotten(
    fresh, tmp_path
):
    engine, passes, _ = fresh
    root = tmp_path / "campaigns" / SLUG
    rebuilt_before = await harness.db(engine).knowledge.overview(SLUG, "players")
    s7 = root / "sessions" / "session-07.md"
    s7.write_text(s7.read_text() + "\n\nLater that night Hettie Gall counted the bells.\n")
    await engine.ingest(SLUG)
    await passes.idle()
    for name in KNOWLEDGE_PASSES:
        assert (await harness.db(engine).passes.runs(SLUG, name))[0].documents_done == 1
    after = await harness.db(engine).knowledge.overview(SLUG, "players")
    assert after is not None and rebuilt_before is not None and after[0] != rebuilt_before[0]
    # a hidden section taken out: its //gm view and the facts of it go
    guild = root / "factions" / "bellwrights-guild.md"
    text = guild.read_text()
    assert "<!-- lens:mirel" in text
    guild.write_text("\n".join(ln for ln in text.splitlines() if "<!-- lens:mirel" not in ln))
    (root / "places" / "the-salt-stairs.md").unlink()
    await engine.ingest(SLUG)
    await passes.idle()
    ids = set(await harness.db(engine).knowledge.hashes(SLUG))
    assert ids == set(await harness.db(engine).documents.hashes(SLUG))
    assert "places/the-salt-stairs" not in ids
    assert "factions/bellwrights-guild//lens:mirel" not in ids
    views = await harness.db(engine).knowledge.views(SLUG)
    assert "Ilse" not in repr([v for v in views if v.doc_id.startswith("factions/bellwrights")])


async def test_the_overview_is_rebuilt_only_when_its_inputs_change_and_is_no_pass_input(fresh):
    engine, passes, knowledge = fresh
    assert await engine.knowledge.refresh_overviews(SLUG) == []  # nothing changed
    await knowledge.after(SLUG, [])
    assert await engine.knowledge.refresh_overviews(SLUG) == []
    # it is no document and no view: no pass reads it, and it makes nothing pending
    assert not [d for d in await harness.db(engine).documents.hashes(SLUG) if d.startswith("@")]
    assert not [d for d in await harness.db(engine).knowledge.hashes(SLUG) if d.startswith("@")]
    assert await knowledge.pending(SLUG) == 0
    overview = await engine.knowledge.stored_overview(SLUG, PLAYERS)
    assert "Who and what matters" not in json.dumps(
        [e.name for e in await engine.knowledge.entities(SLUG, GM)]
    )
    assert overview  # (and a players lens with two personal lenses reads the players' one)
    assert (
        await engine.knowledge.stored_overview(SLUG, frozenset({"players", "mirel", "tobin"}))
        == overview
    )


# -- model-backed passes -----------------------------------------------------------------------


class RoleModel(ScriptedModel):
    """Replies by role and document: JSON for most, prose (unusable) for session 2."""

    async def complete(self, *, system, messages, cache_upto=0, max_tokens=800, role="reply"):
        prompt = messages[-1].content
        if "Session 2 —" in prompt.splitlines()[0]:
            self.replies = ["I would rather not say."]
        elif role == "summarize":
            self.replies = [json.dumps({"summary": "MODEL SUMMARY of " + prompt.splitlines()[0]})]
        elif "themes" in system[0]:
            self.replies = [json.dumps({"themes": ["bells", "zeppelin"], "threads": []})]
        else:
            self.replies = [
                json.dumps(
                    {
                        "entities": [
                            {"name": "Tobin Harrow", "type": "character", "aliases": ["Tobin"]},
                            {"name": "Zorblax the Invented", "type": "character"},
                        ],
                        "relations": [
                            {"source": "Tobin Harrow", "kind": "ally-of", "target": "Mirel"},
                            {"source": "Tobin Harrow", "kind": "loves", "target": "Mirel"},
                        ],
                    }
                )
            ]
        return await super().complete(
            system=system,
            messages=messages,
            cache_upto=cache_upto,
            max_tokens=max_tokens,
            role=role,
        )


async def test_model_backed_passes_ask_for_json_validate_it_and_fall_back_per_view(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "campaigns" / SLUG)
    engine = await make_engine(tmp_path, milvus=False)
    model = RoleModel()
    passes, _ = await wire(engine, model=model)
    try:
        await engine.ingest(SLUG)
        await passes.idle()
        roles = {r["role"] for r in model.requests}
        assert roles == {"extract", "summarize"}
        assert all("JSON" in r["system"][0] for r in model.requests)
        views = {v.doc_id: v for v in await harness.db(engine).knowledge.views(SLUG)}
        assert views["sessions/session-07"].summary.startswith("MODEL SUMMARY of # Session 7")
        assert views["sessions/session-07"].summary_method == "model"
        # an unusable reply keeps the offline facts, and says so in the trace
        assert views["sessions/session-02"].summary_method != "model"
        report = await passes.report(SLUG, "summaries")
        assert any("sessions/session-02" in e and "parse" in e for e in report.errors)
        # a name the text does not hold, a relation kind not asked for: dropped
        everything = json.dumps([repr(v) for v in views.values()])
        assert "Zorblax" not in everything and "loves" not in everything
        assert "zeppelin" not in everything
        ents = {e.name for e in await engine.knowledge.entities(SLUG, PLAYERS)}
        assert "Tobin Harrow" in ents and "Corvina Coldwater" not in ents
        # the GM wall holds for model output too: a players view's reply was made from it alone
        players_prompts = [r for r in model.requests if "Corvina" in r["messages"][-1].content]
        assert players_prompts and all(
            "gm" in v.visibility for v in views.values() if "Corvina" in repr(v.mentions)
        )
    finally:
        await passes.close()
        await close_engine(engine)


def test_a_models_entities_are_checked_against_the_text():
    doc = Document(
        "places/inn",
        "places/inn.md",
        "The Inn",
        "# The Inn\n\nVessa Coldwater keeps the inn. Vessa trusts Tobin Harrow.\n",
        frozenset({"players"}),
        content_hash="h",
    )
    base = extract_parts(doc, parts={"entities"})
    merged, dropped = merge_model_entities(
        base,
        doc,
        {
            "entities": [
                {"name": "Vessa Coldwater", "type": "npc", "aliases": ["Vessa"]},
                {"name": "Tobin Harrow", "type": "character"},
                {"name": "The Ghost King", "type": "character"},
            ],
            "relations": [
                {"source": "Vessa Coldwater", "kind": "ally-of", "target": "Tobin Harrow"},
                {"source": "Vessa Coldwater", "kind": "enemy-of", "target": "The Ghost King"},
            ],
        },
    )
    assert any("Ghost King" in d for d in dropped)
    vessa = [m for m in merged.mentions if m.key == "vessa coldwater"]
    assert {m.surface for m in vessa} == {"Vessa Coldwater", "Vessa"}
    assert all(m.hint == "character" and not m.initial for m in vessa)
    [rel] = [r for r in merged.relations if r.kind == "ally-of" and r.src == "vessa coldwater"]
    assert rel.evidence == "Vessa trusts Tobin Harrow."


# -- time questions ----------------------------------------------------------------------------


async def test_what_happened_in_the_last_session_cites_the_latest_session(wired):
    engine, _ = wired
    responder = Responder(engine)
    answer = await responder.respond(SLUG, "What happened in the last session?", PLAYERS)
    cited = [s.doc_id for s in answer.sources]
    assert cited[0] == "sessions/session-07"
    assert "sessions/session-03" not in cited
    assert "The Night Market Burns" in answer.text
    prompt = responder.last_prompt
    assert "# The sessions this question refers to" in prompt.system[-1]
    assert "sessions/session-07" in {d.doc_id for d in prompt.all_documents}
    for question, want in [
        ("Remind me what happened in session 4", ["sessions/session-04"]),
        ("What happened previously?", ["sessions/session-07"]),
        ("What has happened so far?", ["sessions/session-04", "sessions/session-07"]),
    ]:
        # The sessions a time question names reach the answer's material; which of them the
        # answer cites is the answerer's (sources are only what it cites).
        await responder.respond(SLUG, question, PLAYERS)
        got = [d.doc_id for d in responder.last_prompt.all_documents]
        assert set(want) <= set(got), (question, got)


async def test_a_time_follow_up_is_retrieved_anew_with_its_sessions(wired):
    engine, _ = wired
    responder = Responder(engine)
    chat = "console:time"
    await responder.respond(SLUG, "Who is the Lantern Queen?", PLAYERS, chat=chat)
    follow = await responder.respond(SLUG, "and what did she do last session?", PLAYERS, chat=chat)
    assert "sessions/session-07" in [s.doc_id for s in follow.sources]
    assert not any("reused" in n for n in follow.notes)


async def test_a_model_reads_the_briefing_and_the_overview_in_its_cached_prefix(wired):
    engine, _ = wired
    model = ScriptedModel(replies=["They burned the market [Session 7 — The Night Market Burns]."])
    responder = Responder(engine, model=model)
    await responder.respond(SLUG, "What happened in the last session?", PLAYERS)
    first = model.requests[-1]
    await responder.respond(SLUG, "Who leads the Lantern Court?", PLAYERS)
    second = model.requests[-1]
    cached = first["system"][: first["cache_upto"]]
    assert cached == second["system"][: second["cache_upto"]]  # the prefix holds across turns
    assert "What the campaign's documents hold" in cached[0] and "## The arc so far" in cached[0]
    assert "Session 7 — The Night Market Burns:" in first["system"][-1]


# -- the overview and summaries in the prompt --------------------------------------------------


async def test_players_prompts_hold_the_players_overview_and_gms_the_gms(wired):
    engine, _ = wired
    responder = Responder(engine)
    await responder.respond(SLUG, "Who is Vessa Coldwater?", PLAYERS)
    players = responder.last_prompt.system[0]
    await responder.respond(SLUG, "Who is Vessa Coldwater?", GM)
    gm = responder.last_prompt.system[0]
    assert "## Who and what matters" in players and "## Who and what matters" in gm
    assert "secrets/ 1" in gm and "secrets/" not in players
    for canary in [*DATA["gm_canaries"], *GM_ONLY_NAMES]:
        assert canary.lower() not in players.lower(), canary
    # sized to a cap, by whole lines
    small = Responder(engine, overview_tokens=60)
    await small.respond(SLUG, "Who is Vessa Coldwater?", PLAYERS)
    capped = small.last_prompt.system[0]
    assert "## Who and what matters" in capped and "## How the documents" not in capped


async def test_tiering_reads_the_stored_summaries_of_the_lens(wired, monkeypatch):
    engine, _ = wired
    import liminalis.context.prompt as prompt_module

    handed: list[dict[str, str] | None] = []
    tier = prompt_module.tier_documents

    def spy(*args, **kw):
        handed.append(kw.get("summaries"))
        return tier(*args, **kw)

    monkeypatch.setattr(prompt_module, "tier_documents", spy)
    responder = Responder(engine)
    await responder.respond(SLUG, "Who is the Lantern Queen?", PLAYERS)
    volatile = {d.doc_id for d in responder.last_prompt.documents}
    given = handed[0]
    assert given, "the summaries hook is empty"
    heads = {v.doc_id: v for v in await harness.db(engine).knowledge.heads(SLUG)}
    for doc_id, text in given.items():
        assert doc_id in volatile and "players" in heads[doc_id].visibility
        assert heads[doc_id].summary.startswith(text)  # whole leading sentences, capped
    await responder.respond(SLUG, "Who is the Lantern Queen?", GM)
    assert all(not d.endswith("//lens:mirel") for d in handed[-1] or {})


async def test_without_the_passes_the_prompts_are_the_ones_built_before(wired, tmp_path):
    """Benchmark identity: an engine whose passes never ran (the benches) builds byte-identical
    prompts to one that reads no knowledge at all."""
    engine, _ = wired
    shutil.copytree(SAMPLE, tmp_path / "campaigns" / SLUG)
    bare = await make_engine(tmp_path, milvus=False)
    try:
        await bare.ingest(SLUG)
        for q in ["What happened in the last session?", "Who is the Lantern Queen?"]:
            plain = Responder(bare)
            await plain.respond(SLUG, q, PLAYERS)
            off = Responder(engine, knowledge_enabled=False)
            await off.respond(SLUG, q, PLAYERS)
            assert plain.last_prompt.text() == off.last_prompt.text(), q
        # and build_prompt with no summaries/briefing is the old call
        args = dict(instructions="I", stable=[], volatile=[], question="q", budget=500)
        assert (
            build_prompt(**args).text() == build_prompt(**args, briefing="", summaries=None).text()
        )
    finally:
        await close_engine(bare)


# -- commands ----------------------------------------------------------------------------------


async def test_the_knowledge_commands(wired, tmp_path):
    engine, _ = wired
    service = BotService(engine, default_campaign=SLUG)
    listed = await service.handle(console("/entities"))
    assert "**Characters**" in listed.text and "Tobin Harrow" in listed.text
    factions = await service.handle(console("/entities faction"))
    assert "The Lantern Court" in factions.text and "Tobin Harrow" not in factions.text
    card = await service.handle(console("/entity mirel's"))
    assert card.title == "Mirel Ashcombe" and "ally-of" in card.text and card.sources
    missing = await service.handle(console("/entity Corvina Coldwater"))
    nobody = await service.handle(console("/entity Nobody Atall"))
    assert missing.error and missing.text == nobody.text  # never says a GM-only name exists
    summary = await service.handle(console("/summary Session 7"))
    assert "lying low" in summary.text and summary.sources[0].doc_id == "sessions/session-07"
    recap = await service.handle(console("/recap 2"))
    assert [s.doc_id for s in recap.sources] == ["sessions/session-06", "sessions/session-07"]
    assert recap.text.index("Session 6") < recap.text.index("Session 7")
    assert "Who rang Old Vigil through a locked door?" in recap.text
    mapped = await service.handle(console("/map Mirel"))
    [png] = mapped.files
    assert png.data.startswith(b"\x89PNG") and png.filename.endswith(".png")
    assert "Mirel Ashcombe —ally-of→ Tobin Harrow" in mapped.text
    # a GM's card (and map, list, summary) is private in a shared channel, as a GM's answer is
    shared = IncomingMessage(platform="discord", channel_id="C1", user_id="1", text="/entity Vessa")
    cfg = await service.config(SLUG)
    for name in ("entity", "entities", "summary", "map"):
        request = REGISTRY.request(replace(shared, text=f"/{name} Vessa"))
        assert REGISTRY[name].is_private(request, Scope(service, cfg, Lens({"gm"})))
        assert not REGISTRY[name].is_private(request, Scope(service, cfg, Lens({"players"})))
    # autocomplete over the lens's entities
    assert "Mirel Ashcombe" in await service.complete_entities(console(""), "mir")
    assert "Tobin Harrow" in await service.complete_entities(console(""), "harr")
    # the console writes the picture and prints its path
    saved = save_files(mapped, tmp_path / "files")
    assert saved[0].read_bytes() == png.data and f"File: {saved[0]}" in format_reply(mapped, saved)


def test_discord_attaches_a_replys_files_and_slack_says_where_they_are():
    reply = Reply(text="3 names", title="Map", files=(Attachment("map.png", b"\x89PNG..."),))
    outs = render_reply(reply)
    assert outs[0].files == reply.files and all(not o.files for o in outs[1:])
    [file] = outs[0].file_kwargs()["files"]
    assert file.filename == "map.png" and file.fp.read() == b"\x89PNG..."
    assert outs[0].file_kwargs()["files"][0].fp.read() == b"\x89PNG..."  # fresh for a retry
    assert render_reply(Reply(text="x"))[0].file_kwargs() == {}
    blocks = json.dumps([m.blocks for m in render_blocks(reply)])
    assert "on Discord" in FILES_NOTE and json.dumps(FILES_NOTE)[1:-1] in blocks


# -- the GM wall -------------------------------------------------------------------------------


async def _surface(service: BotService, engine, lens: str) -> str:
    """Everything the knowledge commands, the prompt and the map give ``lens``, as one text."""
    out = []
    frozen = {"players": PLAYERS, "mirel": MIREL}[lens]
    for text in ["/entities", "/recap 10", "/map"]:
        reply = await service.handle(console(text, lens))
        out += [reply.text, repr(reply.sources)]
    for e in await engine.knowledge.entities(SLUG, frozen):
        for text in (f"/entity {e.name}", f"/map {e.name}"):
            reply = await service.handle(console(text, lens))
            out += [reply.text, repr(reply.sources), reply.title]
    for probe in [*GM_ONLY_NAMES, *LENS_ONLY_NAMES, "Vessa", "Lantern Queen"]:
        out.append((await service.handle(console(f"/entity {probe}", lens))).text)
        rel = await engine.knowledge.relation_map(SLUG, frozen, centre=probe)
        if rel is not None:
            out += [repr(rel.nodes), *rel.lines()]
            assert render_png(rel).startswith(b"\x89PNG")  # the picture of exactly these labels
    for doc_id in sorted(await sources(engine)):
        out.append((await service.handle(console(f"/summary {doc_id}", lens))).text)
    out.append(repr(await engine.knowledge.motifs(SLUG, frozen, top_k=50)))
    out.append(await engine.knowledge.stored_overview(SLUG, frozen))
    for prefix in ["", "c", "v", "s", "h", "j", "w", "i", "m"]:
        out += await service.complete_entities(console("", lens), prefix)
    responder = Responder(engine)
    for q in ["What happened in the last session?", "Who is Vessa's mother?", "So far?"]:
        await responder.respond(SLUG, q, frozen)
        out.append(responder.last_prompt.text())
    return "\n".join(out)


async def test_a_players_lens_probe_over_the_wired_knowledge_finds_no_gm_canary(wired):
    engine, _ = wired
    service = BotService(engine, default_campaign=SLUG)
    players = (await _surface(service, engine, "players")).lower()
    # GM-only files' titles and folders are GM knowledge too (the GM's overview counts them)
    catalog = await harness.catalog(engine, SLUG)
    titles = {d.title for d in catalog.documents.values() if catalog.visible_doc(d.doc_id, PLAYERS)}
    gm_titles = [
        d.title
        for d in catalog.documents.values()
        if not catalog.visible_doc(d.doc_id, PLAYERS) and d.title not in titles
    ]
    assert len(gm_titles) >= 3
    gm_only = [*DATA["gm_canaries"], *GM_ONLY_NAMES, *LENS_ONLY_NAMES, *gm_titles]
    for canary in [*gm_only, "secrets/", "gm/"]:
        assert canary.lower() not in players, canary
    for canaries in DATA["lens_canaries"].values():
        for canary in canaries:
            assert canary.lower() not in players, canary
    assert "tobin harrow" in players and "session 7" in players  # the surface is really there
    mirel = (await _surface(service, engine, "mirel")).lower()
    assert "ilse" in mirel
    for canary in [*DATA["gm_canaries"], *DATA["lens_canaries"]["tobin"], *GM_ONLY_NAMES]:
        assert canary.lower() not in mirel, canary


async def test_a_hidden_section_reaches_no_players_knowledge(tmp_path):
    root = make_tiny_campaign(tmp_path / "campaigns")
    (root / "npcs").mkdir()
    (root / "npcs" / "vessa.md").write_text(NPC, encoding="utf-8")
    engine = await make_engine(tmp_path, milvus=False)
    passes, _ = await wire(engine)
    try:
        await engine.ingest("greyhold")
        await passes.idle()
        service = BotService(engine, default_campaign="greyhold")
        seen = []
        for text in ["/entities", "/entity Vessa Coldwater", "/summary Vessa Coldwater", "/map"]:
            seen.append((await service.handle(console(text))).text)
        seen.append(await engine.knowledge.stored_overview("greyhold", PLAYERS))
        seen.append(repr(await engine.knowledge.motifs("greyhold", PLAYERS)))
        seen.append(repr(await engine.knowledge.entity("greyhold", PLAYERS, "Vessa Coldwater")))
        seen += await service.complete_entities(console(""), "")
        everything = "\n".join(seen).lower()
        assert SECRET not in everything and MIREL_SECRET not in everything
        assert "vessa coldwater" in everything
        gm = repr(await engine.knowledge.entity("greyhold", GM, "Vessa Coldwater"))
        assert SECRET in gm  # the GM's card reads the whole text
    finally:
        await passes.close()
        await close_engine(engine)


# -- cost --------------------------------------------------------------------------------------


async def test_the_cost_of_model_backed_passes_per_document(tmp_path, capsys):
    """Model-backed passes over the sample campaign through the real Anthropic client and the
    local Messages API: what each document cost, from the runs' traces (``liminalis pass
    show`` reads the same)."""
    shutil.copytree(SAMPLE, tmp_path / "campaigns" / SLUG)
    engine = await make_engine(tmp_path, milvus=False)
    reply = json.dumps({"entities": [], "relations": [], "summary": "A summary.", "themes": []})
    try:
        async with FakeAnthropic(reply=reply) as fake:
            async with AnthropicModel(
                "sk-test", base_url=fake.url, models={"reply": "claude-test"}
            ) as model:
                passes, _ = await wire(engine, model=model)
                await engine.ingest(SLUG)
                await passes.idle()
                await passes.close()
            calls: dict[str, int] = defaultdict(int)
            tokens: dict[str, int] = defaultdict(int)
            runs = {}
            for name in KNOWLEDGE_PASSES:
                [run] = await harness.db(engine).passes.runs(SLUG, name)
                runs[name] = run
                for t in await harness.db(engine).passes.trace(run.run_id):
                    calls[t.doc_id] += t.model_calls
                    tokens[t.doc_id] += t.tokens
            assert (
                len(fake.requests)
                == sum(r.model_calls for r in runs.values())
                == sum(calls.values())
            )
            shown = (await passes.report(SLUG, "summaries")).render()
            assert f"{runs['summaries'].model_calls} model calls" in shown
        views = await harness.db(engine).documents.hashes(SLUG)
        per_file = defaultdict(int)
        for v in views:
            per_file[source_of(v)] += 1
        for doc_id, n in per_file.items():
            assert calls[doc_id] == 3 * n  # one call per view per pass
        with capsys.disabled():
            print(f"\nmodel-backed knowledge passes over {SLUG}: calls and tokens per document")
            print(f"{'document':42} {'views':>5} {'calls':>5} {'tokens':>8}")
            for doc_id in sorted(calls):
                print(f"{doc_id:42} {per_file[doc_id]:>5} {calls[doc_id]:>5} {tokens[doc_id]:>8}")
            total_c, total_t = sum(calls.values()), sum(tokens.values())
            print(
                f"{'total (' + str(len(calls)) + ' documents)':42} {len(views):>5} {total_c:>5} "
                f"{total_t:>8}  mean {total_t / len(calls):.0f} tokens/document"
            )
            for name, run in runs.items():
                print(f"  pass {name}: {run.model_calls} calls, {run.tokens} tokens")
    finally:
        await close_engine(engine)


def test_the_seeded_definitions_validate_and_ask_for_json():
    for model in (False, True):
        for d in seeded_definitions(model=model):
            assert d.triggers == ("changed",)
            if model:
                ask = d.node("ask")
                assert "JSON" in ask.params["system"] and ask.params["role"] in {
                    "extract",
                    "summarize",
                }
                assert d.node("parse").params["schema"]["type"] == "object"


async def test_a_part_never_outlives_the_visibility_it_was_extracted_under(tmp_path):
    """A document made GM-only (or public) under the same id: the parts not written yet for its
    new content are cleared, so its old summary is not read under its new visibility."""
    from liminalis.store.sqlite import Database

    def doc(text: str, vis: set[str]) -> Document:
        return Document(
            "lore/tower", "lore/tower.md", "The Tower", text, frozenset(vis), content_hash=text
        )

    async with Database(tmp_path / "db.sqlite3") as db:
        secret = doc(
            "# The Tower\n\nCorvina Coldwater hid the key in the tower. It is cold.", {"gm"}
        )
        await db.knowledge.write_parts(
            SLUG,
            [extract_parts(secret, parts={"summary", "motifs", "entities"})],
            parts={"summary", "motifs", "entities"},
        )
        public = doc("# The Tower\n\nThe tower is old and cold. Gulls nest in it.", {"players"})
        await db.knowledge.write_parts(
            SLUG, [extract_parts(public, parts={"entities"})], parts={"entities"}
        )
        [view] = await db.knowledge.views(SLUG)
        assert view.visibility == {"players"} and view.summary == "" and view.motifs == ()
        assert "Corvina" not in repr(view)
        # the same content written part by part keeps the parts already there
        await db.knowledge.write_parts(
            SLUG, [extract_parts(public, parts={"summary"})], parts={"summary"}
        )
        [view] = await db.knowledge.views(SLUG)
        assert view.summary and view.mentions == extract_parts(public, parts={"entities"}).mentions


async def test_a_model_recap_reads_players_summaries_only_and_books_its_spend(wired):
    from liminalis.spend import DailyTokenGate

    engine, _ = wired
    model = ScriptedModel(replies=["Previously: the market burned."])
    gate = DailyTokenGate(harness.db(engine), 1_000_000, clock=FrozenClock())
    service = BotService(
        engine, responder=Responder(engine, model=model, gate=gate), default_campaign=SLUG
    )
    try:
        reply = await service.handle(console("/recap 3"))
        assert reply.text == "Previously: the market burned."
        assert [s.doc_id for s in reply.sources][-1] == "sessions/session-07"
        [request] = model.requests
        material = request["messages"][0].content
        assert request["role"] == "summarize" and "## Session 7" in material
        for canary in [*DATA["gm_canaries"], *GM_ONLY_NAMES, *LENS_ONLY_NAMES]:
            assert canary.lower() not in material.lower(), canary
        assert await gate.spent_today() > 0
        # a spent budget: the offline recap, from the same stored summaries
        tight = DailyTokenGate(harness.db(engine), 1, clock=FrozenClock())
        offline = BotService(
            engine, responder=Responder(engine, model=model, gate=tight), default_campaign=SLUG
        )
        again = await offline.handle(console("/recap 3"))
        assert len(model.requests) == 1 and "**Session 7" in again.text
    finally:
        engine.use_answerer(Responder(engine))


async def test_a_document_made_gm_only_keeps_no_public_facts_while_its_passes_wait(fresh, tmp_path):
    engine, passes, _ = fresh
    path = tmp_path / "campaigns" / SLUG / "lore" / "the-quiet-gods.md"
    before = {e.name for e in await engine.knowledge.entities(SLUG, PLAYERS)}
    await passes.pause(SLUG)  # the passes wait (as they would for a model, or for credits)
    path.write_text(path.read_text().replace("visibility: players", "visibility: gm", 1))
    await engine.ingest(SLUG)
    await passes.idle()
    assert (await harness.db(engine).passes.runs(SLUG, "entities"))[0].run_id == 1  # nothing ran
    heads = {v.doc_id: v for v in await harness.db(engine).knowledge.heads(SLUG)}
    assert "lore/the-quiet-gods" not in heads  # forgotten, not left public
    assert "lore/ 3," in await engine.knowledge.stored_overview(SLUG, PLAYERS)  # was lore/ 4
    summary = await engine.knowledge.summary(SLUG, PLAYERS, "lore/the-quiet-gods")
    assert summary is None
    await passes.resume(SLUG)
    await passes.run_triggered(SLUG, "changed")
    [view] = [
        v
        for v in await harness.db(engine).knowledge.heads(SLUG)
        if v.path.endswith("quiet-gods.md")
    ]
    assert view.visibility == {"gm"}
    assert {e.name for e in await engine.knowledge.entities(SLUG, PLAYERS)} <= before
