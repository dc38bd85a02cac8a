"""Secrets inside documents: every hidden-section syntax, front matter that fails closed, and a
players-lens probe over every output path that finds none of a hidden section's canary while the
GM lens quotes it."""

from __future__ import annotations

import json

import harness
import pytest
from conftest import close_engine, make_engine
from fakes.anthropic_server import FakeAnthropic
from fakes.tiny_campaign import make_tiny_campaign

from bot.service import BotService, IncomingMessage
from liminalis.adapters.anthropic import AnthropicModel
from liminalis.answer import Responder
from liminalis.campaign import load_campaign
from liminalis.ingest.loaders import LoadError, parse_file
from liminalis.ingest.sections import find_hidden_sections, split_views
from liminalis.testing import ScriptedModel

SECRET = "zanzibar-canary"
MIREL_SECRET = "quokka-canary"
PLAYERS = frozenset({"players"})
MIREL = frozenset({"players", "mirel"})
GM = frozenset({"gm"})

# (name, text): each hides SECRET from the players; the text around it stays theirs.
SYNTAX = [
    ("html inline", f"Vessa smiles. <!-- GM: {SECRET} --> She pours ale."),
    ("html multi-line", f"Vessa smiles.\n\n<!--\nGM notes:\n{SECRET}\n-->\n\nShe pours ale."),
    ("html lens-less at start", f"<!-- {SECRET} -->\nVessa smiles. She pours ale."),
    ("obsidian inline", f"Vessa smiles. %%{SECRET}%% She pours ale."),
    ("obsidian multi-line", f"Vessa smiles.\n%%\n{SECRET}\n%%\nShe pours ale."),
    ("callout gm", f"Vessa smiles.\n\n> [!gm]\n> {SECRET}\n\nShe pours ale."),
    (
        "callout secret titled",
        f"Vessa smiles.\n\n> [!Secret] Her past\n> line one\n> {SECRET}\n\nShe pours ale.",
    ),
    ("callout gm-only upper", f"Vessa smiles.\n\n> [!GM-ONLY]-\n> {SECRET}\n\nShe pours ale."),
    (
        "callout lazy line",
        f"Vessa smiles.\n\n> [!secret]\n> first\n{SECRET} continues lazily\n\nShe pours ale.",
    ),
    ("callout in list", f"Vessa smiles.\n\n- She pours ale.\n  > [!gm]\n  > {SECRET}\n- She hums."),
    ("callout nested in quote", f"> Vessa smiles.\n> > [!secret]\n> > {SECRET}\n> She pours ale."),
    ("callout no space", f"Vessa smiles.\n\n>[!GM]\n>{SECRET}\n\nShe pours ale."),
    ("fence gm", f"Vessa smiles.\n\n```gm\n{SECRET}\n```\n\nShe pours ale."),
    ("fence secret tilde", f"Vessa smiles.\n\n~~~secret\n{SECRET}\n~~~\n\nShe pours ale."),
    (
        "heading (GM)",
        f"Vessa smiles. She pours ale.\n\n## Her plans (GM)\n\n{SECRET}\n\n### Deeper\n\nmore {SECRET}",
    ),
    (
        "heading [GM] then public",
        f"## Her plans [GM]\n\n{SECRET}\n\n## Manner\n\nVessa smiles. She pours ale.",
    ),
    ("heading lower case", f"Vessa smiles. She pours ale.\n\n# Notes (gm)\n{SECRET}"),
    (
        "setext heading",
        f"Vessa smiles. She pours ale.\n\nHer plans (GM)\n--------------\n\n{SECRET}",
    ),
    ("at the end", f"Vessa smiles. She pours ale.\n<!-- {SECRET} -->"),
    (
        "unterminated comment",
        f"Vessa smiles. She pours ale.\n\n<!-- GM: {SECRET}\n\nand everything after",
    ),
    ("unterminated obsidian", f"Vessa smiles. She pours ale. %% {SECRET}\n\nstill hidden"),
    ("unterminated fence", f"Vessa smiles. She pours ale.\n\n```secret\n{SECRET}\n"),
    ("lens to an unknown lens", f"Vessa smiles. She pours ale. <!-- lens:nobody {SECRET} -->"),
    ("crlf", f"Vessa smiles.\r\n\r\n> [!gm]\r\n> {SECRET}\r\n\r\nShe pours ale."),
    # found by a hostile review
    (
        "heading mark then a comment",
        f"Vessa smiles.\n\n## Trap (GM) <!-- balance later -->\n\n{SECRET}",
    ),
    ("heading mark then obsidian", f"Vessa smiles.\n\n## Plans (GM) %%todo%%\n\n{SECRET}"),
    ("bold heading mark", f"Vessa smiles.\n\n## **The Truth (GM)**\n\n{SECRET}"),
    ("italic heading mark and colon", f"Vessa smiles.\n\n## Plans *(GM)*:\n\n{SECRET}"),
    ("heading block id", f"Vessa smiles.\n\n## Plans (GM) ^id1\n\n{SECRET}"),
    ("heading (DM)", f"Vessa smiles.\n\n## Plans (DM)\n\n{SECRET}"),
    (
        "a heading inside a comment",
        f"Vessa smiles.\n\n## Secrets (GM)\n\n<!--\n## Old draft\n-->\n\n{SECRET}",
    ),
    (
        "a heading inside obsidian",
        f"Vessa smiles.\n\n## Secrets (GM)\n\n%%\n## old\n%%\n\n{SECRET}",
    ),
    ("%% in inline code", f"Vessa smiles. Wrap it in `%%`.\n\n%% {SECRET} %%"),
    ("%% in a code block", f"Vessa smiles.\n\n```\nuse %%\n```\n\n%% {SECRET} %%"),
    ("a fence inside a comment", f"Vessa smiles.\n\n<!--\n```\n-->\n\n## Plans (GM)\n{SECRET}"),
    ("an unclosed fence in a quote", f"Vessa smiles.\n\n> ```\n> code\n\n## Plans (GM)\n{SECRET}"),
    ("an unclosed fence in a list", f"Vessa smiles.\n\n- ```\n  code\n\n## Plans (GM)\n{SECRET}"),
    (
        "a players comment holding a GM one",
        f"Vessa smiles.\n\n<!-- lens:players reminder\n\n<!-- GM: {SECRET} -->",
    ),
    (
        "lazy line at a shallower depth",
        f"Vessa smiles.\n\n> [!note] Tavern\n> > [!gm]\n> > The barkeep is a spy\n> and {SECRET}.",
    ),
    (
        "setext rule inside a gm section",
        f"Vessa smiles.\n\n## Secrets (GM)\n\nThe duke is {SECRET}.\n---\nmore",
    ),
    ("fence with words after gm", f"Vessa smiles.\n\n```gm Duke\n{SECRET}\n```"),
    ("fence in braces", f"Vessa smiles.\n\n```{{secret}}\n{SECRET}\n```"),
    ("heading in a quote", f"Vessa smiles.\n\n> ## Plans (GM)\n> {SECRET}"),
    ("heading in a list item", f"Vessa smiles.\n\n- ## Plans (GM)\n  {SECRET}"),
]


def views_of(text: str, tmp_path, *, front: str = "title: Vessa\n"):
    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    parsed = parse_file(f"---\n{front}---\n{text}\n".encode(), "npcs/vessa.md", config)
    return parsed, {d.doc_id: d for d in parsed.views}


@pytest.mark.parametrize("name,text", SYNTAX, ids=[n for n, _ in SYNTAX])
def test_every_secret_syntax_is_cut_from_the_players_view(tmp_path, name, text):
    parsed, views = views_of(text, tmp_path)
    shared = views["npcs/vessa"]
    assert (
        SECRET not in shared.text and SECRET not in shared.title and SECRET not in shared.synopsis
    )
    if name not in {
        "%% in inline code",
        "%% in a code block",
        "lazy line at a shallower depth",
    }:  # code, a [!note]
        assert "<!--" not in shared.text and "%%" not in shared.text and "[!" not in shared.text
    assert "Vessa smiles" in shared.text and shared.visibility & {"players"}
    whole = views["npcs/vessa//gm"]
    assert SECRET in whole.text and whole.visibility == GM  # the GM reads it in place
    assert parsed.hidden_sections >= 1
    if name.startswith("unterminated"):
        assert parsed.warnings and "never closed" in parsed.warnings[0]
        assert "everything after" not in shared.text and "still hidden" not in shared.text


def test_a_personal_section_reaches_its_lens_and_the_gm_only(tmp_path):
    text = (
        f"Vessa smiles.\n\n> [!lens:mirel] For Mirel\n> {MIREL_SECRET}\n\n"
        f"She pours ale. <!-- lens:mirel and {MIREL_SECRET} again --> <!-- GM: {SECRET} -->"
    )
    _, views = views_of(text, tmp_path)
    assert set(views) == {"npcs/vessa", "npcs/vessa//gm", "npcs/vessa//lens:mirel"}
    assert MIREL_SECRET not in views["npcs/vessa"].text
    mine = views["npcs/vessa//lens:mirel"]
    assert MIREL_SECRET in mine.text and SECRET not in mine.text and "<!--" not in mine.text
    assert mine.visibility & {"mirel"} and not mine.visibility & {"players", "gm"}
    assert MIREL_SECRET in views["npcs/vessa//gm"].text


def test_sections_in_ordinary_code_and_public_callouts_stay(tmp_path):
    text = "Vessa smiles.\n\n```\n# not a heading (GM)\n```\n\n> [!note]\n> The ale is good.\n\n## Manner\n\nBrisk."
    parsed, views = views_of(text, tmp_path)
    assert parsed.hidden_sections == 0 and list(views) == ["npcs/vessa"]
    assert "The ale is good" in views["npcs/vessa"].text and "Brisk" in views["npcs/vessa"].text


def test_nested_and_unterminated_personal_sections_fail_closed(tmp_path):
    """A GM callout inside Mirel's callout is the GM's; an unterminated personal comment (its
    end may be the GM's next comment's) is GM-only."""
    nested = (
        f"Vessa smiles.\n\n> [!lens:mirel]\n> You recognise the ferryman.\n> > [!gm]\n"
        f"> > The ferryman {SECRET} is Mirel's real father."
    )
    _, views = views_of(nested, tmp_path)
    assert "recognise the ferryman" in views["npcs/vessa//lens:mirel"].text
    assert (
        SECRET not in views["npcs/vessa//lens:mirel"].text
        and SECRET not in views["npcs/vessa"].text
    )
    _, views = views_of(
        f"Vessa smiles.\n\n<!-- lens:mirel your sister\n\nMore.\n\n<!-- GM: {SECRET} -->", tmp_path
    )
    assert all(SECRET not in v.text for k, v in views.items() if k != "npcs/vessa//gm")


def test_a_gm_only_file_with_sections_is_one_gm_only_document(tmp_path):
    parsed, views = views_of(f"Plot. <!-- {SECRET} -->", tmp_path, front="visibility: gm\n")
    assert list(views) == ["npcs/vessa"] and views["npcs/vessa"].visibility == GM
    assert parsed.hidden_sections == 1


def test_pathological_input_is_parsed():
    """Inputs that took minutes (a heading with a long run of spaces, thousands of comments and
    sections); asserted by completing under the suite's hang guard, not by timing."""
    text = ("> [!gm]\n" + "> x\n" * 2000 + "<!-- " * 2000 + "%%" * 1001 + "# h (GM)\n" * 2000) * 3
    assert find_hidden_sections(text)
    assert find_hidden_sections("## Ambush" + " " * 20000 + "x\n") == []
    many = "Intro <!-- a --> text\n" * 20000
    sections = find_hidden_sections(many)
    assert len(sections) == 20000
    assert "<!--" not in split_views(many, sections, frozenset({"players"}))[1].text


# Front matter a GM meant: each is refused with a reason or GM-only, never published.
SLIPS = [
    "---\ntitle: Plot\n---\nvisibility: gm\n\n",
    "---\ntitle: Plot\n---\n\nvisibility: gm\n\n",
    "# Plot\n---\nvisibility: gm\n---\n\n",
    "# Plot\n\n---\ntitle: Plot\nvisibility: gm\n---\n\n",
    "---\nvisiblity: gm\n---\n",
    "---\nVisibilty: gm\n---\n",
    "---\nvisible: false\n---\n",
    "---\nsecret: true\n---\n",
    "---\ngm: true\n---\n",
    "---\nhidden: yes\n---\n",
    "---\nprivate: true\n---\n",
    "--- # meta\nvisibility: gm\n---\n",
    "---yaml\nvisibility: gm\n---\n",
    "---toml\nvisibility = 'gm'\n---\n",
    ";;;\nvisibility: gm\n;;;\n",
    '{\n  "title": "Plot",\n  "visibility": "gm"\n}\n\n',
    '{"title": "Plot", "visibility": "gm"}\n\n',
    "---\u2028visibility: gm\u2028---\u2028",
    "---\u2029visibility: gm\u2029---\u2029",
    "---\x85visibility: gm\x85---\x85",
    "---\rvisibility: gm\r---\r",
    "**Visibility:** GM only\n\n",
    "Visibility: GM only\n\n",
    "secret: yes\n\n",
    # found by a hostile review
    "# Sir Hale\n---\ntitle: Sir Hale\naliases: [a, b, c]\ntags: [t1, t2, t3, t4, t5]\nx1: 1\nx2: 2\nx3: 3\nx4: 4\n"
    "x5: 5\nx6: 6\nx7: 7\nx8: 8\nvisibility: gm\n---\n\n",
    "---\nGM Only: true\n---\n",
    "---\ngm-only: yes\n---\n",
    # Notion-like properties with no title above them: a front matter without its fences.
    "Visibility: GM\nType: NPC\n\n# Duke\n\n",
]


@pytest.mark.parametrize("text", SLIPS)
def test_front_matter_slips_never_publish(tmp_path, text):
    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    try:
        parsed = parse_file(
            f"{text}The vault key is under the {SECRET}.".encode(), "lore/vault.md", config
        )
    except LoadError as exc:
        assert "front matter" in exc.reason and len(exc.reason) < 300
        return
    assert all(d.visibility == GM for d in parsed.views), text


@pytest.mark.parametrize(
    "text",
    [
        "DM: roll initiative.\n\nThe harbour is quiet tonight.",
        "Secret: the duke keeps doves.\n\nThe harbour is quiet tonight.",
        "---\ntitle: Harbour\nsecret: false\n---\nThe harbour is quiet tonight.",
        "---\ntitle: Harbour\n---\n# Harbour\n\nVisibility: poor (fog)\n\nThe harbour is quiet tonight.",
        "# Harbour\n\nVisibility: none (magical darkness)\n\nThe harbour is quiet tonight.",
        "# Harbour\n\n**Visibility:** only 30 ft\n\nThe harbour is quiet tonight.",
        "# Harbour\n\nVisibility: clear all around, for everyone\n\nThe harbour is quiet tonight.",
        "# Harbour\n\n**Visibility:**\n\nThe harbour is quiet tonight.",
        "# Harbour\n\nInvisible: all the time\nVisible: only at night\nHidden: yes\nPrivate: yes\n\nThe harbour is quiet tonight.",
        "GM: Yes, roll athletics.\nDM: yes\n\nThe harbour is quiet tonight.",
    ],
)
def test_ordinary_first_lines_are_not_refused(tmp_path, text):
    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    parsed = parse_file(text.encode(), "lore/harbour.md", config)
    # Not refused, and the page is the players': a `DM:` or `Secret:` line is held back alone.
    shared = [v for v in parsed.views if v.visibility & {"players"}]
    assert shared and "harbour is quiet" in shared[0].text


NPC = f"""---
title: Vessa Coldwater
aliases: [the innkeeper]
type: character
---
# Vessa Coldwater

Vessa keeps the Copper Kettle inn at the top of the river stairs. <!-- GM: {SECRET} is her real name -->
She hums while she works and pours eel soup for the watchmen.

> [!secret] Her scar
> The scar on her palm is a brand: {SECRET} was branded by the smugglers.

## Manner

Brisk and practical, fond of proverbs about the river.

> [!lens:mirel]
> Mirel knows her from the river: {MIREL_SECRET} is what Mirel saw.

## What she plans (GM)

She will betray the party to the smugglers; {SECRET} is the password at the river gate.
"""


def leaked(text: str, *secrets: str) -> list[str]:
    low = text.lower()
    return [s for s in secrets if s in low]


@pytest.fixture
async def npc_engine(tmp_path):
    root = make_tiny_campaign(tmp_path / "campaigns")
    (root / "npcs").mkdir()
    (root / "npcs" / "vessa.md").write_text(NPC, encoding="utf-8")
    engine = await make_engine(tmp_path)  # real Milvus Lite
    report = await engine.ingest("greyhold")
    assert report.hidden_sections == 4 and report.as_dict()["hidden_sections"] == 4
    yield engine
    await close_engine(engine)


def msg(text: str, lens: str) -> IncomingMessage:
    roles = ("gm",) if lens == "gm" else (("mirel",) if lens == "mirel" else ())
    return IncomingMessage(
        platform="console", channel_id="console", user_id="u", text=text, roles=roles
    )


async def test_a_players_lens_probe_over_every_path_finds_no_hidden_canary(npc_engine):
    engine = npc_engine
    service = BotService(engine, default_campaign="greyhold")
    questions = [
        f"What is {SECRET}?",
        "Who is Vessa Coldwater?",
        "What is the password at the river gate?",
        "What does the innkeeper plan?",
        "Tell me about @npcs/vessa",
        "@[Vessa Coldwater] her scar?",
        "What is the scar on her palm?",
        "Who betrays the party?",
    ]
    seen = []
    for q in questions:
        bundle = await engine.retrieve("greyhold", q, PLAYERS)
        seen += [
            bundle.text,
            " ".join(bundle.ranked_doc_ids),
            " ".join(h.passage_id for h in bundle.hits),
            " ".join(d.title for d in bundle.documents),
        ]
        gm_bundle = await engine.retrieve("greyhold", q, GM)
        assert "npcs/vessa" not in gm_bundle.ranked_doc_ids  # the GM reads the whole text instead
    gm = await engine.retrieve("greyhold", "What is the password at the river gate?", GM)
    assert SECRET in gm.text  # the GM quotes it
    # pins: the GM pins the file; players get their view
    pinned = await service.handle(msg("/pin add Vessa Coldwater", "gm"))
    assert not pinned.error, pinned.text
    seen.append((await service.handle(msg("/pin list", "players"))).text)
    assert "Vessa Coldwater" in seen[-1]
    pinned_bundle = await engine.retrieve("greyhold", "What does she sell?", PLAYERS)
    assert "npcs/vessa" in pinned_bundle.ranked_doc_ids
    seen.append(pinned_bundle.text)
    # autocomplete, explain, recap, lens, status
    seen += await service.complete_titles(msg("/ask", "players"), "Ves")
    seen += [
        (await service.handle(msg(t, "players"))).text
        for t in (
            "/explain what is the password?",
            "/recap",
            "/campaign status",
            "/lens",
            "/pin add the password",
        )
    ]
    # the offline answerer and chat-memory follow-ups
    responder = Responder(engine)
    for q in questions[1:4] + ["and what does she plan?"]:  # (a question's own words are no leak)
        answer = await responder.respond("greyhold", q, PLAYERS, chat="console:1")
        seen += [answer.text, " ".join(f"{s.doc_id} {s.title}" for s in answer.sources)]
    # the model prompt through the fake Messages API, with memory replayed
    async with FakeAnthropic(reply="She keeps the inn [Vessa Coldwater].") as fake:
        async with AnthropicModel(
            "sk-test", base_url=fake.url, models={"reply": "claude-test"}
        ) as model:
            modelled = Responder(engine, model=model)
            for q in questions[1:4] + ["and her scar?"]:
                seen.append((await modelled.respond("greyhold", q, PLAYERS, chat="discord:5")).text)
        seen += [json.dumps(r["body"]) for r in fake.requests]
        assert len(fake.requests) >= 3
    everything = "\n".join(seen)
    assert [x[:300] for x in seen if leaked(x, SECRET, MIREL_SECRET)] == []
    assert "<!--" not in everything and "[!secret]" not in everything
    assert "Vessa keeps the Copper Kettle" in everything  # the players' view is really there
    # Mirel reads her own section, never the GM's
    mirel = await engine.retrieve("greyhold", f"{MIREL_SECRET} what did Mirel see?", MIREL)
    assert MIREL_SECRET in mirel.text and SECRET not in mirel.text


async def test_an_edit_inside_a_hidden_section_leaves_the_players_vectors_alone(
    npc_engine, tmp_path
):
    engine = npc_engine
    path = tmp_path / "campaigns" / "greyhold" / "npcs" / "vessa.md"
    cat = await harness.catalog(engine, "greyhold")
    players_passages = set(cat.by_doc["npcs/vessa"])
    vectors = {
        v
        for v in await engine.store.ids("greyhold")
        if ":npcs/vessa#" in v or v.endswith(":npcs/vessa")
    }
    assert vectors
    path.write_text(
        NPC.replace("is the password at the river gate", "opens the river gate at night"),
        encoding="utf-8",
    )
    report = await engine.ingest("greyhold")
    assert 1 <= report.embedded <= 2 and report.passages_added <= 2
    after = await engine.store.ids("greyhold")
    assert vectors <= after  # the players' rows untouched
    cat = await harness.catalog(engine, "greyhold")
    assert set(cat.by_doc["npcs/vessa"]) == players_passages
    assert "opens the river gate" in cat.documents["npcs/vessa//gm"].text


@pytest.mark.slow  # real Milvus Lite
async def test_hiding_a_paragraph_players_read_takes_it_out_and_forgets(tmp_path):
    root = make_tiny_campaign(tmp_path / "campaigns")
    plain = "# Vessa\n\nVessa keeps the inn.\n\nVessa once sold the river key to the smugglers.\n"
    (root / "vessa.md").write_text(plain, encoding="utf-8")
    engine = await make_engine(tmp_path)
    try:
        await engine.ingest("greyhold")
        responder = Responder(
            engine, model=ScriptedModel(replies=["She sold the river key [Vessa]."])
        )
        await responder.respond("greyhold", "Who sold the river key?", PLAYERS, chat="discord:1")
        assert await harness.rows(engine, "SELECT * FROM chat_turns")
        (root / "vessa.md").write_text(
            plain.replace("Vessa once", "<!-- GM: Vessa once").rstrip() + " -->\n", encoding="utf-8"
        )
        await engine.ingest("greyhold")
        bundle = await engine.retrieve(
            "greyhold", "Who sold the river key to the smugglers?", PLAYERS
        )
        assert "river key" not in bundle.text.lower()
        assert (
            await harness.rows(engine, "SELECT * FROM chat_turns") == []
        )  # the players' memory forgot
        gm = await engine.retrieve("greyhold", "Who sold the river key to the smugglers?", GM)
        assert "river key" in gm.text
        # revealing it again brings it back for players, and the GM view goes
        (root / "vessa.md").write_text(plain, encoding="utf-8")
        await engine.ingest("greyhold")
        cat = await harness.catalog(engine, "greyhold")
        assert "vessa//gm" not in cat.documents and "river key" in cat.documents["vessa"].text
        assert (
            "river key" in (await engine.retrieve("greyhold", "Who sold the river key?", GM)).text
        )
    finally:
        await close_engine(engine)


def test_upload_options_parse_and_never_widen(tmp_path):
    from bot.commands.upload import parse_upload_options
    from liminalis.errors import InvalidInput
    from liminalis.ingest.loaders import with_front_matter

    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    assert parse_upload_options("players session", config) == (
        frozenset({"players", "gm"}),
        "session",
    )
    assert parse_upload_options("visibility=mirel type:lore", config) == (
        frozenset({"mirel", "gm"}),
        "lore",
    )
    assert parse_upload_options("", config) == (None, None)
    for bad in ("gm players", "visibility=nobody", "type=gm", "everything"):
        with pytest.raises(InvalidInput):
            parse_upload_options(bad, config)
    # a visibility option keeps the file's own type; front matter narrower than the option wins
    raw = b"---\ntitle: S3\ntype: session\nvisibility: [mirel]\n---\nThe party slept.\n"
    parsed = parse_file(raw, "uploads/s3.md", config, visibility=frozenset({"players", "gm"}))
    saved = with_front_matter(raw, visibility=parsed.visibility)
    again = parse_file(saved, "uploads/s3.md", config)
    assert (
        again.type == "session"
        and again.visibility & {"mirel"}
        and not again.visibility & {"players"}
    )
    # an upload that says nothing is GM-only, even one saved by an earlier version
    assert parse_file(b"The party slept.", "uploads/old.md", config).visibility == GM


# GM habits a red-team hunt found leaking after the recogniser first landed: each holds CANARY.
HABITS = [
    (
        "lore/duke.md",
        "# Duke\n\nThe duke rules.\n\n## Secrets and Clues\n\n- The duke is a {c} vampire.",
    ),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## GM notes & hooks\n\nHe is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nGM:\n- The duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nGM Notes:\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n*GM Notes*\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nGM - The duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n**DM** — the duke is a {c} vampire."),
    ("npcs/duke-aldric-gm.md", "# Duke\n\nThe duke is a {c} vampire."),
    ("npcs/gm-duke.md", "# Duke\n\nThe duke is a {c} vampire."),
    ("sessions/session-03-prep.md", "# Session 3\n\nThe duke is a {c} vampire."),
    ("Session Prep/duke.md", "# Duke\n\nThe duke is a {c} vampire."),
    (
        "lore/duke.md",
        "# Duke\n\nThe duke rules.\n\n## Duke Aldric: GM notes\n\nHe is a {c} vampire.",
    ),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## Duke Aldric—GM\n\nHe is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nGM hint: the duke is a {c} vampire."),
    ("lore/duke.md", "# Duque\n\nEl duque manda.\n\nNota del DJ: el duque es un {c} vampiro."),
    ("lore/duke.md", "# Herzog\n\nDer Herzog herrscht.\n\n## Meisterinformationen\n\n{c} Vampir."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n```ad-secret\nThe duke is a {c} vampire.\n```"),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n> [!gm|wide]\n> The duke is a {c} vampire."),
    ("lore/duke.md", "---\nmj: true\n---\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "---\nstatus: secret\n---\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "---\npublic: false\n---\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "---\ntags: [[npc, gm]]\n---\n# Duke\n\nThe duke is a {c} vampire."),
    # Switches in any of the vocabulary's languages, and a flag's unknown value: held.
    ("lore/duke.md", "---\nsecret: s\u00ed\n---\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "---\nspoiler: maybe\n---\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "---\nrevealed: nein\n---\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "---\nshare: nobody\n---\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "---\naccess:\n  players: never\n---\n# Duke\n\nA {c} vampire."),
    (
        "lore/duke.md",
        "# Duke\n\nThe duke rules.\n\n<details><summary>Spoilers! Click</summary>\n{c}\n</details>",
    ),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n<div class=gm>The duke is a {c} vampire.</div>"),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## <u>GM Notes</u>\n\nHe is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n\u00a0GM: the duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## G\u200bM Notes\n\nHe is a {c} vampire."),
    # A table's GM column: its cells are held, the rest of the table stays the players'.
    (
        "lore/duke.md",
        "# Duke\n\n| NPC | Role | GM notes |\n|---|---|---|\n| Duke | ruler | a {c} vampire |",
    ),
    ("lore/duke.md", "# Duke\n\n| NPC | Secret |\n| :-- | --: |\n| Duke | a {c} vampire |"),
    ("lore/duke.md", "# Duke\n\n| NPC | Secret Motive |\n|---|---|\n| Duke | a {c} vampire |"),
    (
        "lore/duke.md",
        "# Duke\n\n| NPC | Info |\n|---|---|\n| | DM only |\n| Duke | a {c} vampire |",
    ),
    ("lore/duke.md", "# Duke\n\n| Key | Value |\n|---|---|\n| Secrets | a {c} vampire |"),
    ("lore/duke.md", "# Duke\n\n> | NPC | GM notes |\n> |---|---|\n> | Duke | a {c} vampire |"),
    (
        "lore/duke.md",
        "# Duke\n\n<table><tr><th>NPC</th><th>Secret</th></tr>"
        "<tr><td>Duke</td><td><b>a {c}</b> vampire</td></tr></table>",
    ),
    ("lore/duke.txt", "Duke\n\nNPC\tDM notes\nDuke\ta {c} vampire\nWren\tspy\n"),
    ("lore/duke.txt", "Duke\n\nNPC\tSecret\nDuke\ta {c} vampire\tragged\n"),
    ("lore/npcs.csv", 'NPC,Role,Secret\nDuke,"ruler, old","a {c} vampire"\n'),
    ("handouts/duke.json", '{{"name": "Duke", "gmnotes": {{"text": "a {c} vampire"}}}}'),
    # Obsidian tags in the body: the paragraph, or the section a tag under a heading opens.
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nThe duke is a {c} vampire. #gm"),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n#secret The duke is a\n{c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## Blood\n#dm-only\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## Blood\n\n#gm\n\nA {c} vampire."),
    ("lore/duke.md", "\n#npc #secret\n# Duke\n\nThe duke rules.\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## Blood\n\n\\#secret\n\nA {c} vampire."),
    # Hugo's TOML front matter, with the keys YAML front matter has.
    ("lore/duke.md", "+++\ntitle = 'Duke'\nsecret = true\n+++\n# Duke\n\nA {c} vampire."),
    ("lore/duke.md", "+++\nvisibility = 'gm'\n+++\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "+++\ntags = ['npc', 'gm']\n+++\n# Duke\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "+++\ndraft = true\n+++\n# Duke\n\nThe duke is a {c} vampire."),
    # Dataview inline fields and a Notion export's properties.
    ("lore/duke.md", "# Duke\n\nvisibility:: gm\n\nThe duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nGM:: the duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nSecret:: true\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nVisibility: GM\nType: NPC\n\nThe duke is a {c} vampire."),
    # BBCode.
    ("lore/duke.md", "# Duke\n\nThe duke rules. [spoiler]He is a {c} vampire.[/spoiler] Yes."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n[gm]\nHe is a {c} vampire.\n[/gm]"),
    ("lore/duke.md", "# Duke\n\nThe duke rules. [SECRET=Duke]a {c} vampire[/SECRET]"),
    ("lore/duke.md", "# Duke\n\nThe duke rules. [spoiler]He is a {c} vampire."),
    # Asides.
    ("lore/duke.md", "# Duke\n\nThe duke rules (GM, he is a {c} vampire) the city."),
    ("lore/duke.md", "# Duke\n\nThe duke rules (DM; he is a {c} vampire) the city."),
    ("lore/duke.md", "# Duke\n\nThe duke rules. [GM note: he is a {c} vampire] Yes."),
    # Other tools' block syntaxes: Homebrewery, Pandoc, World Anvil, comment pairs, Discord.
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n{{{{note,gm\nHe is a {c} vampire.\n}}}}\n"),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n::: {{.gm}}\nHe is a {c} vampire.\n:::\n"),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n[section:gm-notes]\nA {c} vampire.\n[/section]"),
    (
        "lore/duke.md",
        "# Duke\n\nThe duke rules.\n\n<!-- secret -->\nA {c} vampire.\n<!-- /secret -->",
    ),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n<!-- GM start -->\nA {c} vampire.\n"),
    ("lore/duke.md", "# Duke\n\nThe duke rules. <span data-gm>A {c} vampire.</span> Yes."),
    (
        "lore/duke.md",
        "# Duke\n\nThe duke rules.\n\n<div>\n<b>Secrets</b>\n\nA {c} vampire.\n</div>\n",
    ),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n~~~text secret\nA {c} vampire.\n~~~\n"),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n> [!private]\n> He is a {c} vampire.\n"),
    # Look-alike letters: Cyrillic, Greek, fullwidth.
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## G\u041c Notes\n\nHe is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n\u0500M: the duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## \u0405\u0435cr\u0435ts\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## G\u039c only\n\nHe is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n\uff27\uff2d: the duke is a {c} vampire."),
    # Lisu, Armenian, invisible code points, a right-to-left override drawing `GM`.
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## \ua4d6\ua4df Notes\n\nHe is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## \u054fecrets\n\nHe is a {c} vampire."),
    (
        "lore/duke.md",
        "# Duke\n\nThe duke rules.\n\n## G\ufe0eM\u2064 Notes\n\nHe is a {c} vampire.",
    ),
    (
        "lore/duke.md",
        "# Duke\n\nThe duke rules.\n\n## \u202eMG\u202c Notes\n\nHe is a {c} vampire.",
    ),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nSecret\u2236 the duke is a {c} vampire."),
    # Headings that are marks although they read like topics or miss Markdown's syntax.
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## Don't share with the players\n\nA {c}."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## What the DM knows\n\nA {c}."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## Plans #secret\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## The Game Master's Notebook\n\nA {c}."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n### DM intel\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n###Secrets\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## D. M. only\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n<h3 id='x'>Secrets</h3>\n\nA {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n## \u2067MD\u2069 only\n\nA {c} vampire."),
    # Label lines the `Label:` rule alone misses.
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nSECRETS\nThe duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n[DM only] The duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n(Secret) The duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nGM NOTE \u2192 the duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nPS (DM): the duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nRules.[^a]\n\n[^a]: Secret: he is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nSecret\n: The duke is a {c} vampire.\n"),
    ("lore/duke.md", "#secret\n\n# Duke\n\nThe duke is a {c} vampire.\n"),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nDM\uff1a the duke is a {c} vampire."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n> __Secret__\n> The duke is a {c} vampire.\n"),
    ("lore/duke.md", "# Duke\n\nRules.\n\n<p><b>Secrets</b></p>\n<p>A {c} vampire.</p>\n"),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\nThe duke is a {c} vampire. \\#secret\n"),
    ("lore/duke.txt", "Duke\n\nThe duke rules.\n\n*** SECRETS ***\nThe duke is a {c} vampire.\n"),
    (
        "lore/duke.md",
        "# Duke\n\nRules.\n\n<aside>\n💡 <strong>Secrets</strong>\n\nA {c}.\n</aside>\n",
    ),
]

KEPT = [
    ("lieux/le-jardin-secret.md", "# Le Jardin secret\n\nUn jardin clos, {c}."),
    ("sessions/recap.md", "# Recap\n\nPresent: Alice (DM), Bob, Carol.\nWe fought {c} goblins."),
    ("places/the-secret-garden.md", "# The Secret Garden\n\nA walled garden, {c}."),
    ("lore/keeper.md", "# Keeper\n\nKeeper: welcome, travellers. {c}"),
    ("lore/inn.md", "# Inn\n\nA private room at the inn costs a silver, {c}."),
    # A heading about the role as a topic is no mark.
    ("rules/guide.md", "# The Dungeon Master\n\nThe DM describes the world, {c}."),
    # A place named like a GM's corner, a `#hashtag` body tag, an HTML heading naming no mark.
    ("places/corner.md", "# Hidden Corner\n\nA quiet tavern, {c}."),
    ("lore/duke.md", "# Duke\n\nThe duke rules.\n\n##Plans\n\nHe sails at dawn, {c}."),
    ("lore/duke.md", "# Duke\n\n<h2>Court</h2>\n\nThe duke rules, {c}.\n\n#court #npc"),
    # A bracketed aside that is no mark, an arrow in prose, a quote with a bold speaker.
    ("lore/duke.md", "# Duke\n\nIntro.\n\n(Optional) The duke rules, {c}.\n"),
    ("lore/duke.md", "# Duke\n\nIntro.\n\nDocks -> the duke's palace, {c}.\n"),
    ("lore/duke.md", "# Duke\n\nIntro.\n\n> **Alice**\n> The duke rules, {c}.\n"),
    ("lore/duke.md", "# Duke\n\nINTRO\nThe duke rules, {c}.\n"),
    ("lore/duke.md", "# Duke\n\nRules.\n\n<aside>\n💡 **Tip**\n\nThe duke rules, {c}.\n</aside>\n"),
    # The roster and a sentence about the GM; a Notion page's property naming every player.
    ("rules/house.md", "# Rules\n\nIntro.\n\nDM: Bob Stone. PCs: Alice, {c}.\n"),
    ("rules/house.md", "# Rules\n\nIntro.\n\nOur DM asks: no phones, {c}.\n"),
    ("lore/duke.md", "# Duke\n\nVisibility: Everyone\n\nThe duke rules, {c}.\n"),
    ("rules/guide.md", "# Guide\n\nIntro.\n\n## The Game Master\n\nRuns the game, {c}."),
    ("rules/guide.md", "# Guide\n\nIntro.\n\n## GM and Players\n\nThey share it, {c}."),
    (
        "rules/guide.md",
        "# Guide\n\nIntro.\n\n## How the GM and players share the table\n\nTurns, {c}.",
    ),
    # An empty or false flag says nothing.
    ("lore/duke.md", "---\nsecret:\n---\n# Duke\n\nThe duke rules, {c}."),
    ("lore/duke.md", "---\ngm: false\n---\n# Duke\n\nThe duke rules, {c}."),
    ("lore/duke.md", "---\nspoiler: no\n---\n# Duke\n\nThe duke rules, {c}."),
    ("lore/duke.md", "---\nsecret: n\u00e3o\n---\n# Duke\n\nThe duke rules, {c}."),
    ("lore/duke.md", "---\npublic: oui\n---\n# Duke\n\nThe duke rules, {c}."),
    ("lore/duke.md", "---\nspoilers: none\n---\n# Duke\n\nThe duke rules, {c}."),
    # A session's GM and players by name, a publishing date: no switch.
    ("sessions/s4.md", "---\ngm: Alice\nplayers: Bob, Carol\n---\n# Session 4\n\nWe won, {c}."),
    ("lore/duke.md", "---\npublished: 2024-01-05\n---\n# Duke\n\nThe duke rules, {c}."),
    ("lore/duke.md", "+++\ntitle = 'Duke'\nsecret = false\n+++\n# Duke\n\nThe duke rules, {c}."),
    # A GM column's neighbours, a tag that is no GM word, a BBCode tag that is not a mark.
    ("lore/duke.md", "# Duke\n\n| NPC | Role | GM notes |\n|---|---|---|\n| {c} | ruler | x |"),
    ("lore/duke.md", "# Duke\n\n| Key | Value |\n|---|---|\n| GM | x |\n| Name | {c} |"),
    ("lore/duke.md", "# Duke\n\n> | NPC | Secret Motive |\n> |---|---|\n> | {c} | x |"),
    (
        "lore/duke.md",
        "# Duke\n\n<table><tr><th>NPC</th><th>GM notes</th></tr>"
        "<tr><td>{c}</td><td>x</td></tr></table>",
    ),
    ("lore/duke.txt", "Duke\n\nNPC\tGM notes\n{c}\tx\n"),
    ("lore/duke.txt", "Duke\n\nNPC\tRole\nDuke\t{c}\n"),
    ("lore/npcs.csv", 'NPC,Role,GM notes\nDuke,"ruler, {c}",x\n'),
    ("handouts/duke.json", '{{"name": "Duke", "notes": "The duke rules, {c}.", "gmnotes": ""}}'),
    ("lore/duke.md", "# Duke\n\nThe duke rules, {c}. #npc #secret-garden"),
    ("lore/duke.md", "#npc\n\n# Duke\n\nThe duke rules, {c}."),
    ("lore/duke.md", "# Duke\n\nThe duke rules, {c}. \\#npc \\#secret-garden"),
    ("lore/duke.md", "# Duke\n\nThe duke rules, [b]{c}[/b]."),
    ("lore/duke.md", "# Duke\n\nThe duke rules (Alice, Bob; {c}) the city."),
    # Other tools' blocks that name no GM word, a table's empty cell, a shell's `||` in code.
    ("lore/duke.md", "# Duke\n\n{{{{monster,frame\nThe duke rules, {c}.\n}}}}\n"),
    ("lore/duke.md", "# Duke\n\n::: note\nThe duke rules, {c}.\n:::\n"),
    ("lore/duke.md", "# Duke\n\n| a | b | c |\n|---|---|---|\n| x || {c} |\n"),
    ("lore/duke.md", "# Duke\n\nRun `make ||{c}||` now."),
    ("lore/duke.md", '# Duke\n\n<p data-id="secret-door">The duke rules, {c}.</p>'),
    ("lore/duke.md", "# Duke\n\n> [!quote] Hidden\n> The duke rules, {c}.\n"),
    ("lore/duke.md", "# Duke\n\n<aside>\n\U0001f4a1 Tip\n\nThe duke rules, {c}.\n</aside>\n"),
    ("lore/duke.md", "# Duke\n\n```python secrets.py\nprint('{c}')\n```\n"),
]

# A dialogue transcript: a `DM:` speaker's lines are speech the table heard.
TRANSCRIPT = (
    "# Session 4 transcript\n\n"
    "DM: The gate creaks open, {c}.\n"
    "Alice: I light a torch.\n"
    "Bob: I keep watch at the back.\n"
    "DM: Roll perception.\n"
    "Carol: Seventeen.\n"
    "Alice: What do we see?\n"
    "DM: Bones, and a door.\n"
)
KEPT.append(("sessions/session-04-transcript.md", TRANSCRIPT))

# Where a GM's mark still holds although the heading names the role.
STILL_HELD = [
    ("rules/guide.md", "# Guide\n\nIntro.\n\n## The GM's Secrets\n\nRuns the game, {c}."),
    ("rules/guide.md", "# Guide\n\nIntro.\n\n## For the GM\n\nRuns the game, {c}."),
    ("rules/guide.md", "# Guide\n\nIntro.\n\n## GM\n\nRuns the game, {c}."),
]


# Not clearly a transcript (one other speaker, or mostly prose), or a note inside one: held.
NOT_DIALOGUE = [
    (
        "lore/duke.md",
        "# Duke\n\nDM: the duke is a {c} vampire.\nAlice: I ask.\nDM: He smiles.\n"
        "Alice: Again.\nDM: No.\nAlice: Fine.\n",
    ),
    (
        "lore/duke.md",
        "# Duke\n\nThe duke rules the city.\n\nHe hunts at night.\n\nHe owns ships.\n\n"
        "DM: the duke is a {c} vampire.\nAlice: I ask.\nBob: Me too.\n\nHe is old.\n\n"
        "He is rich.\n\nHe is cruel.\n",
    ),
    (
        "sessions/session-04-transcript.md",
        TRANSCRIPT.replace("{c}", "x") + "GM note: the door is a {c} mimic.\n",
    ),
]
STILL_HELD += NOT_DIALOGUE
# A GM label that is no roster (a secret before `Players:`), a GM verb that is no speech.
STILL_HELD += [
    ("rules/house.md", "# Rules\n\nIntro.\n\nGM: the duke is a {c} vampire. Players: no.\n"),
    ("rules/house.md", "# Rules\n\nIntro.\n\nThe GM knows: the duke is a {c} vampire.\n"),
    ("lore/duke.md", "# Duke\n\nVisibility: Players, GM\n\nThe duke is a {c} vampire.\n"),
]


@pytest.mark.parametrize("path,text", HABITS + STILL_HELD)
def test_a_gm_habit_holds_its_text_and_the_gm_reads_it(tmp_path, path, text):
    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    parsed = parse_file(text.format(c=SECRET).encode(), path, config)
    assert not [v for v in parsed.views if v.visibility & {"players"} and SECRET in v.text]
    assert any(SECRET in v.text for v in parsed.views)


@pytest.mark.parametrize("path,text", KEPT)
def test_players_prose_with_gm_words_stays_theirs(tmp_path, path, text):
    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    parsed = parse_file(text.format(c=SECRET).encode(), path, config)
    assert [v for v in parsed.views if v.visibility & {"players"} and SECRET in v.text]


def test_a_ragged_table_with_a_gm_column_is_held_whole(tmp_path):
    """A row whose cells do not line up with the header cannot say which cell is the GM's: the
    whole table is held (fail closed), the text around it stays the players'."""
    text = (
        "# Watch\n\nThe watch patrols the quays.\n\n"
        f"| Name | GM notes |\n|---|---|\n| Holt | takes bribes |\n| Wren | {SECRET} | spy |\n\n"
        "They wear blue coats.\n"
    )
    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    parsed = parse_file(text.encode(), "npcs/watch.md", config)
    (shared,) = [v for v in parsed.views if v.visibility & {"players"}]
    assert "patrols the quays" in shared.text and "blue coats" in shared.text
    assert SECRET not in shared.text and "Holt" not in shared.text
    assert any(SECRET in v.text for v in parsed.views if v.visibility == GM)
    assert [h.rule for h in parsed.held_back] == ["table column “GM notes”"]
