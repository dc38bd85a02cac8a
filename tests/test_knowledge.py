"""The knowledge layer: entities, relations, summaries, motifs, sessions, overview and recaps,
over the sample campaign in real SQLite, and the GM wall across every one of them."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import harness
import pytest
from conftest import ROOT, SAMPLE, close_engine, make_engine

from liminalis.campaign import load_campaign
from liminalis.engine import Engine
from liminalis.ingest.loaders import parse_file
from liminalis.knowledge.entities import EntityIndex, extract_entities, extract_relations, name_key
from liminalis.knowledge.motifs import open_threads
from liminalis.knowledge.service import Knowledge, extract_view, lens_views
from liminalis.knowledge.sessions import SessionInfo, resolve_sessions
from liminalis.knowledge.summaries import (
    EXTRACTIVE,
    FRONT_MATTER,
    MODEL,
    SECTION,
    extractive_summary,
    is_metadata_line,
    summarize,
    summarize_with_model,
)
from liminalis.recap import build_model_recap, build_recap
from liminalis.store import LATEST
from liminalis.testing import ScriptedModel
from liminalis.types import Document

PLAYERS = frozenset({"players"})
MIREL = frozenset({"players", "mirel"})
GM = frozenset({"gm"})
DATA = json.loads((ROOT / "tests" / "data" / "emberfall_questions.json").read_text())
GOLD = json.loads((ROOT / "tests" / "data" / "emberfall_entities.json").read_text())
#: Names that exist only in GM material (or a hidden section) of the sample campaign.
GM_ONLY_NAMES = ["Corvina", "Saltborn", "Guildmaster Hale", "Jory Harrow", "Saltmarsh"]
LENS_ONLY_NAMES = ["Ilse", "Maud Harrow", "Widow of Kestrel Lane", "Cinder Ford"]


@pytest.fixture(scope="module")
async def sample(tmp_path_factory):
    """The sample campaign ingested (hash embedder, in-memory vectors) and its knowledge
    refreshed from the catalog."""
    tmp = tmp_path_factory.mktemp("knowledge")
    shutil.copytree(SAMPLE, tmp / "campaigns" / "emberfall")
    engine = await make_engine(tmp, milvus=False)
    await engine.ingest("emberfall")
    knowledge = Knowledge(harness.db(engine))
    await knowledge.refresh("emberfall", await harness.catalog(engine, "emberfall"))
    yield engine, knowledge
    await close_engine(engine)


def _doc(text: str, *, doc_id: str = "notes/x", title: str = "X", **kw) -> Document:
    return Document(
        doc_id=doc_id,
        path=f"{doc_id}.md",
        title=title,
        text=text,
        visibility=frozenset({"players"}),
        content_hash=str(hash(text)),
        **kw,
    )


def _views(docs: list[Document]):
    return [extract_view(d) for d in docs]


# -- entities ----------------------------------------------------------------------------------


def _matches(gold_entry: dict, name: str, aliases) -> bool:
    names = {name_key(n) for n in [gold_entry["name"], *gold_entry["also"]]}
    return bool(names & ({name_key(name)} | {name_key(a) for a in aliases}))


def precision_recall(entities, lenses: set[str]) -> tuple[float, float, list[str], list[str]]:
    """Precision and recall of ``entities`` against the hand-made list, for a lens that reads
    the gold entries whose narrowest lens is in ``lenses``. A second entity for an already
    matched gold entry counts against precision; ``ignore`` names count neither way."""
    gold = [g for g in GOLD["entities"] if g["lens"] in lenses]
    ignore = {name_key(n) for n in GOLD["ignore"]}
    matched: set[str] = set()
    tp = fp = 0
    wrong = []
    for e in entities:
        hit = next((g for g in gold if _matches(g, e.name, ())), None) or next(
            (g for g in gold if _matches(g, e.name, e.aliases)), None
        )
        if hit and hit["name"] not in matched:
            matched.add(hit["name"])
            tp += 1
        elif name_key(e.name) in ignore:
            continue
        else:
            fp += 1
            wrong.append(e.name)
    missed = [g["name"] for g in gold if g["name"] not in matched]
    return tp / max(1, tp + fp), len(matched) / max(1, len(gold)), wrong, missed


async def test_entity_precision_and_recall_on_the_sample(sample):
    _, knowledge = sample
    players = await knowledge.entities("emberfall", PLAYERS)
    p, r, wrong, missed = precision_recall(players, {"players"})
    print(f"\nplayers lens: P={p:.3f} R={r:.3f}\n  wrong: {wrong}\n  missed: {missed}")
    gm = await knowledge.entities("emberfall", GM)
    gp, gr, gwrong, gmissed = precision_recall(gm, {"players", "mirel", "tobin", "gm"})
    print(f"gm lens: P={gp:.3f} R={gr:.3f}\n  wrong: {gwrong}\n  missed: {gmissed}")
    assert p >= 0.75 and r >= 0.75
    assert gp >= 0.7 and gr >= 0.7


async def test_possessives_and_aliases_resolve_to_one_entity(sample):
    _, knowledge = sample
    idx = await knowledge.index("emberfall", PLAYERS)
    mirel = idx.find("Mirel Ashcombe")
    assert mirel is not None and mirel.type == "character"
    for name in ["Mirel's", "Mirel", "the Ash Witch", "mirel ashcombe", "Mirel’s"]:
        assert idx.find(name) is mirel, name
    assert name_key("Mirel's") == "mirel" and name_key("the Lantern Queen") == "lantern queen"
    assert name_key("Marshal Osric Dunmore") == "osric dunmore"
    assert name_key("the Warden's Chair") == "warden chair"  # a possessive title stays
    dunmore = idx.find("Marshal Osric Dunmore")
    assert dunmore is not None and idx.find("Dunmore") is dunmore
    assert idx.find("the Queen") is idx.find("The Lantern Queen")
    assert idx.find("Bellwrights' Guild") is idx.find("the Foundry Council")
    # The backstory page is about Mirel: no second Mirel, its aliases name no one.
    assert [e.name for e in idx.entities.values() if "Mirel" in e.name] == ["Mirel Ashcombe"]
    # A possessive mention counts for its entity: session 3's "Mirel's ward".
    s3 = [m for d, m in mirel.mentions if d == "sessions/session-03"]
    assert s3 and all(m.key == "mirel" for m in s3)
    _, ms = extract_entities(
        _doc("Later, Mirel’s ward held and the Bellwrights' Guild's men fled.")
    )
    assert [(m.surface, m.key) for m in ms] == [
        ("Mirel", "mirel"),
        ("Bellwrights' Guild", "bellwrights guild"),
    ]


def test_mentions_carry_offsets_and_passages():
    doc = _doc("# Notes\n\nThe bell rang. Mirel's ward held, and Mirel smiled at Tobin Harrow.")
    _, mentions = extract_entities(doc, [("p0", 0, 20), ("p1", 20, len(doc.text))])
    by_surface = {m.surface: m for m in mentions}
    m = by_surface["Tobin Harrow"]
    assert doc.text[m.start : m.end] == "Tobin Harrow" and m.passage_id == "p1"
    assert by_surface["Mirel"].key == "mirel"
    assert all(doc.text[x.start : x.end] == x.surface for x in mentions)


def test_names_in_metadata_and_dates_are_not_entities():
    docs = [
        _doc(
            f"**Played:** 6 March · **In-world date:** {n} Greenrise, 524\n"
            f"**Present:** Mirel (Dana)\n\nOn 4 Greenrise the party met Gideon Pike at the inn. "
            "Later, Gideon Pike left.",
            doc_id=f"sessions/s{n}",
        )
        for n in (1, 2)
    ]
    idx = EntityIndex(_views(docs))
    names = {e.name: e.type for e in idx.entities.values()}
    assert "Greenrise" not in names and "March" not in names
    assert names.get("Gideon Pike") == "character"
    assert names.get("Dana") == "player"


async def test_relations_the_text_states(sample):
    _, knowledge = sample
    card = await knowledge.entity("emberfall", PLAYERS, "Gideon Pike")
    assert card is not None
    kinds = {(r.src, r.kind, r.dst) for r in card.relations}
    assert ("Gideon Pike", "member-of", "The Lantern Court") in kinds
    mirel = await knowledge.entity("emberfall", PLAYERS, "Mirel")
    assert ("Mirel Ashcombe", "ally-of", "Tobin Harrow") in {
        (r.src, r.kind, r.dst) for r in mirel.relations
    }
    guild = await knowledge.entity("emberfall", PLAYERS, "the Guild")
    assert ("The Bellwrights' Guild", "enemy-of", "The Lantern Court") in {
        (r.src, r.kind, r.dst) for r in guild.relations
    }
    # Kinship stated only in GM material: the GM sees it, players do not.
    vessa_gm = await knowledge.entity("emberfall", GM, "Vessa")
    assert ("The Lantern Queen", "parent-of", "Vessa Coldwater") in {
        (r.src, r.kind, r.dst) for r in vessa_gm.relations
    }
    vessa = await knowledge.entity("emberfall", PLAYERS, "Vessa")
    assert all(r.kind != "parent-of" for r in vessa.relations)


def test_relation_patterns():
    text = (
        "Vessa is the Lantern Queen's daughter. Ilse Ashcombe, Mirel's missing sister, serves. "
        "Tobin's grandmother, Maud Harrow, gave him the pendant. Marshal Osric Dunmore commands "
        "the Ashen Watch. Brother Aldous Fenn is the abbot of Cinderhold Abbey. St. Amsel's Turret "
        "in the Drowned Quarter rang first. The Guild is hostile to the Lantern Court."
    )
    doc = _doc(text)
    _, mentions = extract_entities(doc)
    found = {(r.src, r.kind, r.dst) for r in extract_relations(doc, mentions)}
    assert {
        ("lantern queen", "parent-of", "vessa"),
        ("ilse ashcombe", "sibling-of", "mirel"),
        ("maud harrow", "grandparent-of", "tobin"),
        ("osric dunmore", "leader-of", "ashen watch"),
        ("aldous fenn", "leader-of", "cinderhold abbey"),
        ("amsel turret", "located-in", "drowned quarter"),
        ("guild", "enemy-of", "lantern court"),
    } <= found


# -- summaries ---------------------------------------------------------------------------------


def test_summary_uses_front_matter_then_recap_section_and_skips_metadata():
    config = load_campaign(SAMPLE)
    raw = (
        b"---\ntitle: Session 9\ntype: session\nsummary: The party sailed to Lessmoor.\n---\n"
        b"# Session 9\n\n## Recap\n\nThey argued about the bell all night long.\n"
    )
    own = parse_file(raw, "sessions/session-09.md", config).views[0]
    assert summarize(own) == summarize(own).__class__("The party sailed to Lessmoor.", FRONT_MATTER)
    raw = (
        b"# Session 9\n\n**Played:** 6 March \xc2\xb7 **In-world date:** 3 Greenrise, 524\n"
        b"Present: Mirel, Tobin\nDate: 524\n\n## Recap\n\nThe party argued about the bell all night."
        b" Tobin won the argument.\n\n## Later\n\nUnrelated prose about eels and the weather here.\n"
    )
    recap = parse_file(raw, "sessions/session-09.md", config).views[0]
    s = summarize(recap)
    assert s.method == SECTION
    assert s.text.startswith("The party argued about the bell") and "eels" not in s.text
    assert "Played" not in s.text and "Present" not in s.text and "Greenrise" not in s.text
    assert is_metadata_line("**Played:** 6 March")
    assert is_metadata_line("Present: Mirel, Tobin, Sera")
    assert not is_metadata_line("MATT: Welcome to the first episode. Tonight we play.")


def test_extractive_summary_covers_the_whole_document():
    parts = [
        "The harbour of Saltmere opened the season with a feast for the fishing fleet.",
        *[f"Filler sentence number {i} mentions nothing in particular today." for i in range(30)],
        "In the middle of the night the lighthouse keeper vanished from the harbour tower.",
        *[f"More filler, line {i}, about weather and nets and gulls." for i in range(30)],
        "At the end the fleet found the keeper alive on the harbour rocks at dawn.",
    ]
    text = "# Saltmere\n\n**Date:** 3 May\n\n" + " ".join(parts)
    s = summarize(_doc(text))
    assert s.method == EXTRACTIVE
    assert "Date" not in s.text
    # one sentence from each stretch: beginning, middle and end are all represented
    words = s.text.split(". ")
    assert len(words) >= 3
    first_third = " ".join(parts[:21])
    last_third = " ".join(parts[-21:])
    sentences = [x.strip(". ") for x in s.text.split(". ")]
    assert any(x in first_third for x in sentences)
    assert any(x in last_third for x in sentences)
    assert extractive_summary("") == ""


async def test_model_summary_is_validated_and_falls_back():
    doc = _doc("# A\n\n## Recap\n\nThe party crossed the river. Tobin rang Pip.")
    good = ScriptedModel(replies=['```json\n{"summary": "They crossed the river."}\n```'])
    s = await summarize_with_model(doc, good)
    assert s == s.__class__("They crossed the river.", MODEL)
    assert good.requests[0]["role"] == "summarize"
    for bad in ["no json here", '{"summary": 3}', '{"text": "x"}', '{"summary": ""}']:
        s = await summarize_with_model(doc, ScriptedModel(replies=[bad]))
        assert s.method == SECTION, bad


async def test_model_summaries_are_cached_by_content_hash(sample):
    _, knowledge = sample
    model = ScriptedModel(replies=['{"summary": "Tobin reads the Chronicle."}'])
    first = await knowledge.summary("emberfall", PLAYERS, "sessions/session-05", model=model)
    again = await knowledge.summary("emberfall", PLAYERS, "sessions/session-05", model=model)
    assert first is not None and first.method == MODEL and again == first
    assert len(model.requests) == 1


# -- motifs, sessions --------------------------------------------------------------------------


async def test_open_threads_and_themes(sample):
    _, knowledge = sample
    motifs = await knowledge.motifs("emberfall", PLAYERS)
    threads = [t for _, t in motifs.threads]
    assert motifs.threads[0][0] == "sessions/session-07"  # the latest session's threads first
    assert "Who rang Old Vigil through a locked door?" in threads
    assert "bell" in dict(motifs.themes) and "river" in dict(motifs.themes)
    doc = _doc("# X\n\n## Open Threads\n\nWho stole the key? Why now?\n\n## Other\n\nNo.")
    assert [m.text for m in open_threads(doc)] == ["Who stole the key?", "Why now?"]


async def test_session_order_of_the_sample(sample):
    _, knowledge = sample
    sessions = await knowledge.sessions("emberfall", PLAYERS)
    assert [s.number for s in sessions] == [1, 2, 3, 4, 5, 6, 7]
    assert sessions[-1].doc_id == "sessions/session-07"
    assert sessions[0].date.startswith("3–4 Greenrise")


def test_sessions_are_inferred_and_ordered_by_number_then_date_then_name():
    docs = [
        _doc("# Session 10\n\nThe end.", doc_id="sessions/session-10", title="Session 10"),
        _doc("# Session 9\n\nThe middle.", doc_id="notes/nine", title="Session 9"),
        _doc("# Foo\n\nText.", doc_id="sessions/session-2", title="Foo"),
        _doc("# Chapter\n\nNot a session.", doc_id="lore/chapter", title="Chapter"),
    ]
    views = _views(docs)
    assert views[3].session is None
    ordered = Knowledge._sessions(views)
    assert [s.doc_id for s in ordered] == [
        "sessions/session-2",
        "notes/nine",
        "sessions/session-10",
    ]
    dated = [
        _doc("Date: 2024-03-05\n\nLater.", doc_id="sessions/b", title="Late game", type="session"),
        _doc("Date: 2024-01-20\n\nEarlier.", doc_id="sessions/z", title="Early", type="session"),
    ]
    assert [s.doc_id for s in Knowledge._sessions(_views(dated))] == ["sessions/z", "sessions/b"]


def test_time_expressions_resolve_to_sessions_in_order():
    sessions = [SessionInfo(f"s/{n}", f"Session {n}", n, "", n) for n in range(1, 8)]
    cases = {
        "What happened last session?": ["s/7"],
        "in the previous session": ["s/7"],
        "previously, who did we meet": ["s/7"],
        "What happened previously?": ["s/7"],
        "Who previously ruled the city?": [],
        "what did we learn in session 4": ["s/4"],
        "session four": ["s/4"],
        "the first session": ["s/1"],
        "the third session": ["s/3"],
        "so far": [f"s/{n}" for n in range(1, 8)],
        "the last two sessions": ["s/6", "s/7"],
        "sessions 2 to 4": ["s/2", "s/3", "s/4"],
        "the session before last": ["s/6"],
        "session 12": [],
        "who is the Lantern Queen?": [],
    }
    for question, want in cases.items():
        assert resolve_sessions(question, sessions) == want, question


# -- store, overview, refresh ------------------------------------------------------------------


async def test_refresh_extracts_only_changed_views_and_forgets_removed(sample, tmp_path):
    engine, knowledge = sample
    assert await harness.db(engine).version() == LATEST >= 7
    catalog = await harness.catalog(engine, "emberfall")
    again = await knowledge.refresh("emberfall", catalog)
    assert again.extracted == 0 and again.unchanged == len(catalog.documents)
    docs = sorted(catalog.documents.values(), key=lambda d: d.doc_id)
    # a changed hash re-extracts that view alone; a view no longer given is forgotten
    changed = [
        replace(d, content_hash="changed") if d.doc_id == "places/the-salt-stairs" else d
        for d in docs
    ]
    report = await knowledge.refresh("emberfall", changed[:-1])
    assert (report.extracted, report.removed) == (1, 1)
    await knowledge.refresh("emberfall", catalog)  # restored for the other tests


async def test_overview_is_deterministic_capped_and_lens_built(sample):
    _, knowledge = sample
    text = await knowledge.overview("emberfall", PLAYERS, title="Emberfall", max_chars=3000)
    assert text == await knowledge.overview("emberfall", PLAYERS, title="Emberfall", max_chars=3000)
    assert len(text) <= 3000
    assert "Tobin Harrow" in text and "Session 7" in text and "## Open threads" in text
    assert text.index("Who and what matters") < text.index("The arc so far")
    big = await knowledge.overview("emberfall", PLAYERS, max_chars=20000)
    assert big.index("Session 1 —") < big.index("Session 7 —")


# -- the GM wall -------------------------------------------------------------------------------


async def _players_surface(engine: Engine, knowledge: Knowledge, lens: frozenset[str]) -> str:
    """Everything the knowledge layer and the recap give ``lens``, as one text."""
    out = []
    entities = await knowledge.entities("emberfall", lens)
    for e in entities:
        out.append(repr(e))
        card = await knowledge.entity("emberfall", lens, e.name)
        out.append(repr(card))
    for probe in [*GM_ONLY_NAMES, *LENS_ONLY_NAMES, "Vessa", "Old Vigil", "Tobin", "Lantern Queen"]:
        out.append(repr(await knowledge.entity("emberfall", lens, probe)))
    catalog = await harness.catalog(engine, "emberfall")
    for doc_id in sorted({d.split("//")[0] for d in catalog.documents}):
        out.append(repr(await knowledge.summary("emberfall", lens, doc_id)))
    out.append(repr(await knowledge.motifs("emberfall", lens, top_k=50)))
    out.append(await knowledge.overview("emberfall", lens, max_chars=50_000))
    out.append(repr(await knowledge.sessions("emberfall", lens)))
    out.append(build_recap(catalog, 10).text)
    model = ScriptedModel(replies=["(recap)"])
    await build_model_recap(catalog, model, 10)
    out.append(repr(model.requests))
    return "\n".join(out)


async def test_a_players_lens_probe_over_the_knowledge_layer_finds_no_gm_canary(sample):
    engine, knowledge = sample
    players = await _players_surface(engine, knowledge, PLAYERS)
    for canary in [*DATA["gm_canaries"], *GM_ONLY_NAMES]:
        assert canary.lower() not in players.lower(), canary
    for canaries in DATA["lens_canaries"].values():
        for canary in canaries:
            assert canary.lower() not in players.lower(), canary
    for name in LENS_ONLY_NAMES:
        assert name.lower() not in players.lower(), name
    # Mirel's lens reads her own secrets, never the GM's or Tobin's.
    mirel = await _players_surface(engine, knowledge, MIREL)
    assert "Ilse" in mirel
    for canary in [*DATA["gm_canaries"], *DATA["lens_canaries"]["tobin"], *GM_ONLY_NAMES]:
        assert canary.lower() not in mirel.lower(), canary
    # The GM sees what players do not: the wall is there, not an empty layer.
    gm_entities = {e.name for e in await knowledge.entities("emberfall", GM)}
    assert "Corvina Coldwater" in gm_entities
    assert "Corvina Coldwater" not in {
        e.name for e in await knowledge.entities("emberfall", PLAYERS)
    }


def test_lens_views_are_the_visible_views():
    def view(doc_id: str, vis: set[str]):
        return extract_view(
            Document(doc_id, "c/m.md", "M", "Text.", frozenset(vis), content_hash=doc_id)
        )

    views = [
        view("c/m", {"players", "-gm"}),
        view("c/m//gm", {"gm"}),
        view("c/m//lens:mirel", {"mirel", "-gm"}),
    ]
    assert [v.doc_id for v in lens_views(views, PLAYERS)] == ["c/m"]
    assert [v.doc_id for v in lens_views(views, MIREL)] == ["c/m", "c/m//lens:mirel"]
    assert [v.doc_id for v in lens_views(views, GM)] == ["c/m//gm"]


def test_lens_views_read_the_facts_only_of_documents_still_visible_now():
    """A view whose stored document is now GM-only, or gone, is not read by a player before
    the passes catch up; the GM still reads it."""
    views = [
        extract_view(Document(d, "c/m.md", "M", "Text.", frozenset({"players"}), content_hash=d))
        for d in ("c/a", "c/b", "c/c")
    ]
    current = {"c/a": frozenset({"players"}), "c/b": frozenset({"gm"})}
    assert [v.doc_id for v in lens_views(views, PLAYERS, current)] == ["c/a"]
    assert [v.doc_id for v in lens_views(views, PLAYERS)] == ["c/a", "c/b", "c/c"]


# -- recaps ------------------------------------------------------------------------------------


async def test_recap_is_the_last_sessions_in_order_with_open_threads(sample):
    engine, _ = sample
    catalog = await harness.catalog(engine, "emberfall")
    recap = build_recap(catalog, 3)
    assert [d for d, _ in recap.sources] == [
        "sessions/session-05",
        "sessions/session-06",
        "sessions/session-07",
    ]
    text = recap.text
    assert text.index("Session 5") < text.index("Session 6") < text.index("Session 7")
    # from the Recap section, not the metadata lines
    assert "Over the month of downtime Tobin read" in text and "Played" not in text
    assert "Who rang Old Vigil through a locked door?" in text
    assert build_recap(catalog, 1).sources == (
        ("sessions/session-07", catalog.documents["sessions/session-07"].title),
    )


async def test_recap_uses_front_matter_summary_and_session_numbers(tmp_path: Path):
    root = tmp_path / "campaigns" / "greyhold"
    (root / "sessions").mkdir(parents=True)
    (root / "campaign.toml").write_text('name = "Greyhold"\n')
    for n in (2, 9, 10):
        (root / "sessions" / f"session-{n}.md").write_text(
            f"---\ntitle: Session {n}\nsummary: In session {n} the party rested.\n---\n"
            f"# Session {n}\n\nThe party rested at the inn.\n"
        )
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        recap = await engine.recap("greyhold", 2)
        assert [t for _, t in recap.sources] == ["Session 9", "Session 10"]
        assert "In session 9 the party rested." in recap.text
        assert recap.text.index("Session 9") < recap.text.index("Session 10")
        model = ScriptedModel(replies=["Previously: they rested."])
        catalog = await harness.catalog(engine, "greyhold")
        written = await build_model_recap(catalog, model, 2)
        assert written.text == "Previously: they rested." and written.sources == recap.sources
        assert model.requests[0]["role"] == "summarize"
        assert "In session 10 the party rested." in repr(model.requests[0]["messages"])
    finally:
        await close_engine(engine)
