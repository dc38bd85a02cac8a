"""A hostile tester's findings against the GM-only wall, each the smallest repro.

Every test asserts what the wall promises (a players lens never receives a GM-marked passage; a
player's own prose is not held) and is marked ``xfail(strict=True)`` while the product still
breaks that promise, so the branch stays green and a fix turns the test into an XPASS that must
be un-marked. The canary is planted only in the GM's text; a leak is the canary in any view a
players lens can read (text, title or synopsis), or in a players' command reply end to end.
"""

from __future__ import annotations

import io

import pytest
from conftest import close_engine, make_engine
from docx import Document as WordDocument
from docx.enum.style import WD_STYLE_TYPE
from fakes.tiny_campaign import make_tiny_campaign

from bot.service import BotService, IncomingMessage
from liminalis.campaign import load_campaign
from liminalis.ingest.loaders import parse_file

CANARY = "zanzibar-canary"
DUKE = "# Duke\n\nThe duke rules.\n\n"
PLAIN = "Duke\n\nThe duke rules.\n\n"


def _session(gm_line: str) -> str:
    """A clear dialogue transcript (eight `Name:` lines, three players) with one GM line."""
    return (
        "# Session 5\n\n"
        "DM: The gate creaks open.\n"
        "Alice: I light a torch.\n"
        "Bob: I keep watch.\n"
        f"{gm_line}\n"
        "Carol: Seventeen.\n"
        "Alice: What do we see?\n"
        "DM: Bones, and a door.\n"
    )


def players_read(tmp_path, path: str, text: str) -> bool:
    """Whether the canary reaches any view a players lens may read, through the real loader."""
    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    parsed = parse_file(text.replace("{c}", CANARY).encode(), path, config)
    assert any(CANARY in v.text for v in parsed.views)  # the text was loaded, not dropped
    return any(
        CANARY in v.text + v.title + (v.synopsis or "")
        for v in parsed.views
        if v.visibility & {"players"}
    )


def leak(reason: str):  # type: ignore[no-untyped-def]
    return pytest.mark.xfail(strict=True, reason=f"leak: {reason}")


def false_hold(reason: str):  # type: ignore[no-untyped-def]
    return pytest.mark.xfail(strict=True, reason=f"false hold: {reason}")


# --- the transcript rule swallows marks a GM writes inside a DM: line ----------------------------


def test_transcript_dm_line_marked_secret(tmp_path):
    text = _session("DM: (secret) the duke is a {c} vampire.")
    assert not players_read(tmp_path, "sessions/session-05.md", text)


def test_transcript_dm_line_marked_gm_only(tmp_path):
    text = _session("DM: [GM only] the duke is a {c} vampire.")
    assert not players_read(tmp_path, "sessions/session-05.md", text)


def test_transcript_dm_note_to_self_speaker(tmp_path):
    text = _session("DM (note to self): the duke is a {c} vampire.")
    assert not players_read(tmp_path, "sessions/session-05.md", text)


def test_transcript_dm_whisper_to_one_player(tmp_path):
    text = _session("DM (whispering to Bob): the duke is a {c} vampire.")
    assert not players_read(tmp_path, "sessions/session-05.md", text)


def test_prep_scene_in_dialogue_form_with_dm_aside(tmp_path):
    text = (
        "# Planned scene\n\n"
        "DM: (the duke is secretly a {c} vampire)\n"
        "Duke: Welcome.\nAlice: Hi.\nBob: Hello.\nDuke: Sit.\nCarol: Thanks.\nDM: He bites.\n"
    )
    assert not players_read(tmp_path, "notes/duke.md", text)


def test_transcript_dm_line_with_gm_label(tmp_path):
    text = _session("DM: GM: the door is a {c} mimic.")
    assert not players_read(tmp_path, "sessions/session-05.md", text)


STAT_BLOCK = (
    "# Duke Aldric\n\nRace: Human\nClass: Noble\nAlignment: Lawful evil\nAge: 52\n"
    "Faction: The Court\nLocation: Greyhold\n"
)


def test_stat_block_passes_for_a_transcript_gm_label(tmp_path):
    text = STAT_BLOCK + "GM: the duke is a {c} vampire.\n"
    assert not players_read(tmp_path, "npcs/duke.md", text)


def test_stat_block_passes_for_a_transcript_dm_label(tmp_path):
    text = STAT_BLOCK + "DM: the duke is a {c} vampire.\n"
    assert not players_read(tmp_path, "npcs/duke.md", text)


def test_transcript_reaches_a_later_section(tmp_path):
    text = _session("DM: Roll.").replace("# Session 5\n\n", "# Session 5\n\n## Play\n\n") + (
        "\n## After the session\n\nDM: remember the duke is a {c} vampire.\n"
    )
    assert not players_read(tmp_path, "sessions/session-05.md", text)


# --- headings that are marks --------------------------------------------------------------------


def test_heading_do_not_share_with_players(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "## Do not share with players\n\n{c}")


def test_heading_what_the_gm_knows(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "## What the GM Knows\n\nA {c}.")


def test_heading_with_gm_tag(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "## Blood #gm\n\nA {c} vampire.")


def test_heading_the_dms_corner(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "## The DM's Corner\n\nA {c} vampire.")


def test_heading_gm_intel(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "## GM Intel\n\nA {c} vampire.")


def test_heading_without_space_after_hashes(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "##GM Notes\n\nA {c} vampire.")


def test_heading_gm_with_dots(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "## G.M. Notes\n\nA {c} vampire.")


def test_html_heading_gm_notes(tmp_path):
    text = DUKE + "<h2>GM Notes</h2>\n\nThe duke is a {c} vampire.\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_caps_label_line_without_colon(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "GM NOTES\nThe duke is a {c} vampire.")


def test_plain_text_banner(tmp_path):
    text = PLAIN + "=== GM ===\nThe duke is a {c} vampire.\n"
    assert not players_read(tmp_path, "lore/duke.txt", text)


def test_plain_text_dashed_banner(tmp_path):
    text = PLAIN + "--- GM ONLY ---\nThe duke is a {c} vampire.\n--- END ---\n"
    assert not players_read(tmp_path, "lore/duke.txt", text)


def test_plain_text_gm_label_second_paragraph(tmp_path):
    text = PLAIN + "GM:\nThe duke is a vampire.\n\nAnd a {c} lich.\n"
    assert not players_read(tmp_path, "lore/duke.txt", text)


# --- line labels --------------------------------------------------------------------------------


def test_bracketed_gm_only_prefix(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "[GM ONLY] The duke is a {c} vampire.")


def test_parenthesised_gm_only_prefix(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "(GM only) The duke is a {c} vampire.")


def test_arrow_after_gm_label(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "GM -> the duke is a {c} vampire.\n")


def test_nb_gm_label(tmp_path):
    assert not players_read(
        tmp_path, "lore/duke.md", DUKE + "NB (GM): the duke is a {c} vampire.\n"
    )


def test_footnote_gm_label(tmp_path):
    text = DUKE + "The duke rules.[^1]\n\n[^1]: GM: he is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_definition_list_gm_term(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "GM\n: The duke is a {c} vampire.\n")


def test_gm_tag_line_at_the_top_of_a_note(tmp_path):
    text = "#gm\n\n# Duke\n\nThe duke is a {c} vampire.\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


# --- tables -------------------------------------------------------------------------------------


def test_html_table_gm_column(tmp_path):
    text = (
        "# Duke\n\n<table><tr><th>NPC</th><th>GM notes</th></tr>"
        "<tr><td>Duke</td><td>a {c} vampire</td></tr></table>"
    )
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_table_gm_column_in_second_header_row(tmp_path):
    text = (
        "# Duke\n\n| NPC | Info | Info |\n|---|---|---|\n"
        "| | Public | GM notes |\n| Duke | ruler | a {c} vampire |"
    )
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_table_gm_row_label(tmp_path):
    text = "# Duke\n\n| Field | Value |\n|---|---|\n| Name | Duke |\n| GM notes | a {c} vampire |"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_table_gm_column_in_a_callout(tmp_path):
    text = (
        "# Duke\n\n> [!info] NPCs\n> | NPC | Role | GM notes |\n> |---|---|---|\n"
        "> | Duke | ruler | a {c} vampire |\n"
    )
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_table_secret_motive_column(tmp_path):
    text = (
        "# Duke\n\n| NPC | Role | Secret Motive |\n|---|---|---|\n| Duke | ruler | a {c} vampire |"
    )
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_tab_separated_gm_column(tmp_path):
    text = "Duke\n\nNPC\tRole\tGM notes\nDuke\truler\ta {c} vampire\n"
    assert not players_read(tmp_path, "lore/duke.txt", text)


def test_csv_gm_column(tmp_path):
    text = "NPC,Role,GM notes\nDuke,ruler,a {c} vampire\n"
    assert not players_read(tmp_path, "lore/npcs.csv", text)


# --- front matter -------------------------------------------------------------------------------


def test_front_matter_players_false(tmp_path):
    text = "---\nplayers: false\n---\n# Duke\n\nThe duke is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_front_matter_player_visible_false(tmp_path):
    text = "---\nplayer_visible: false\n---\n# Duke\n\nThe duke is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_front_matter_nested_permissions(tmp_path):
    text = "---\npermissions:\n  players: none\n---\n# Duke\n\nThe duke is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_front_matter_secret_checkmark(tmp_path):
    text = "---\nsecret: \u2713\n---\n# Duke\n\nThe duke is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_front_matter_secret_oui(tmp_path):
    text = "---\nsecret: oui\n---\n# Duke\n\nThe duke is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_front_matter_public_never(tmp_path):
    text = "---\npublic: never\n---\n# Duke\n\nThe duke is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_front_matter_revealed_false(tmp_path):
    text = "---\nrevealed: false\n---\n# Duke\n\nThe duke is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


# --- block syntaxes of other tools --------------------------------------------------------------


def test_homebrewery_gm_block(tmp_path):
    assert not players_read(
        tmp_path, "lore/duke.md", DUKE + "{{gm\nThe duke is a {c} vampire.\n}}\n"
    )


def test_world_anvil_gm_container(tmp_path):
    text = DUKE + "[container:gm]\nThe duke is a {c} vampire.\n[/container]\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_fenced_div_secret(tmp_path):
    text = DUKE + "::: secret\nThe duke is a {c} vampire.\n:::\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_fence_info_gm_second_word(tmp_path):
    text = DUKE + "```md gm\nThe duke is a {c} vampire.\n```\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_callout_hidden(tmp_path):
    text = DUKE + "> [!hidden]\n> The duke is a {c} vampire.\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_paired_comment_markers(tmp_path):
    text = DUKE + "<!-- gm:start -->\nThe duke is a {c} vampire.\n<!-- gm:end -->\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_html_data_visibility_gm(tmp_path):
    text = DUKE + '<p data-visibility="gm">The duke is a {c} vampire.</p>\n'
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_discord_spoiler_bars(tmp_path):
    assert not players_read(tmp_path, "lore/duke.md", DUKE + "The duke is ||a {c} vampire||.\n")


def test_roll20_json_gmnotes(tmp_path):
    text = '{"name": "Duke", "notes": "The duke rules.", "gmnotes": "The duke is a {c} vampire."}'
    assert not players_read(tmp_path, "handouts/duke.json", text)


def test_bidi_override_heading(tmp_path):
    text = DUKE + "## \u202eMG\u202c Notes\n\nHe is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_lisu_lookalike_gm_heading(tmp_path):
    text = DUKE + "## \ua4d6\ua4df Notes\n\nHe is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_armenian_lookalike_secret_heading(tmp_path):
    text = DUKE + "## \u054fecret\n\nHe is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_variation_selector_inside_gm(tmp_path):
    text = DUKE + "## G\ufe0fM Notes\n\nHe is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_modifier_letter_colon_label(tmp_path):
    text = DUKE + "GM\ua789 the duke is a {c} vampire."
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_notion_aside_callout_gm_only(tmp_path):
    text = DUKE + "<aside>\n🔒 **GM only**\n\nThe duke is a {c} vampire.\n\n</aside>\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_blockquote_bold_gm_label_line(tmp_path):
    text = DUKE + "> **GM**\n>\n> The duke is a {c} vampire.\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_html_strong_gm_notes_paragraph(tmp_path):
    text = DUKE + "<p><strong>GM Notes</strong></p>\n<p>The duke is a {c} vampire.</p>\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


def test_google_docs_escaped_gm_tag(tmp_path):
    text = DUKE + "The duke is a {c} vampire. \\#gm\n"
    assert not players_read(tmp_path, "lore/duke.md", text)


# --- Word prep (.docx) ---------------------------------------------------------------------------


def word_players_read(tmp_path, build) -> bool:  # type: ignore[no-untyped-def]
    """Whether the canary reaches a players view of a Word file ``build`` adds GM text to."""
    doc = WordDocument()
    doc.add_heading("Duke", 1)
    doc.add_paragraph("The duke rules.")
    build(doc)
    buf = io.BytesIO()
    doc.save(buf)
    config = load_campaign(make_tiny_campaign(tmp_path / "campaigns"))
    parsed = parse_file(buf.getvalue(), "lore/duke.docx", config)
    assert any(CANARY in v.text for v in parsed.views)
    return any(CANARY in v.text for v in parsed.views if v.visibility & {"players"})


def test_word_table_gm_column(tmp_path):
    def build(doc):  # type: ignore[no-untyped-def]
        table = doc.add_table(rows=2, cols=2)
        for cell, text in zip(table._cells, ["NPC", "GM notes", "Duke", f"a {CANARY} vampire"]):
            cell.text = text

    assert not word_players_read(tmp_path, build)


def test_word_character_style_secret(tmp_path):
    def build(doc):  # type: ignore[no-untyped-def]
        doc.styles.add_style("Secret", WD_STYLE_TYPE.CHARACTER)
        para = doc.add_paragraph("The duke ")
        para.add_run(f"is a {CANARY} vampire", style="Secret")

    assert not word_players_read(tmp_path, build)


def test_word_bold_label_paragraph(tmp_path):
    def build(doc):  # type: ignore[no-untyped-def]
        doc.add_paragraph().add_run("GM Notes").bold = True
        doc.add_paragraph(f"He is a {CANARY} vampire.")

    assert not word_players_read(tmp_path, build)


# --- false holds a GM would be annoyed by -------------------------------------------------------


@false_hold("an NPC called Secret (`npcs/secret.md`) is held whole for its file name")
def test_false_hold_npc_named_secret(tmp_path):
    assert players_read(tmp_path, "npcs/secret.md", "# Secret the cat\n\nA black cat, {c}.\n")


def test_false_hold_roster_line(tmp_path):
    text = "# House rules\n\nIntro.\n\nGM: Alice. Players: Bob, Carol, {c}.\n"
    assert players_read(tmp_path, "rules/house.md", text)


def test_false_hold_notion_visibility_players(tmp_path):
    text = "# Duke\n\nVisibility: Players\nType: NPC\n\nThe duke rules, {c}.\n"
    assert players_read(tmp_path, "lore/duke.md", text)


@false_hold("the aside `(GM, Alice)` naming who ran the game is cut from a players' recap")
def test_false_hold_aside_naming_the_gm(tmp_path):
    text = "# Recap\n\nIntro.\n\nWe played at Bob's (GM, {c}) and won.\n"
    assert players_read(tmp_path, "sessions/recap.md", text)


@false_hold("a session header line `DM: Alice` above the date is held as a GM label")
def test_false_hold_session_header_dm_line(tmp_path):
    text = "# Recap\n\nDM: {c}\nDate: 2024-05-01\n\nWe fought goblins.\n"
    assert players_read(tmp_path, "sessions/recap.md", text)


def test_false_hold_the_gm_says(tmp_path):
    text = "# House rules\n\nIntro.\n\nThe GM says: bring snacks, {c}.\n"
    assert players_read(tmp_path, "rules/house.md", text)


# --- end to end: a player's /show ---------------------------------------------------------------


async def test_players_show_quotes_a_transcript_secret(tmp_path):
    root = make_tiny_campaign(tmp_path / "campaigns")
    (root / "sessions").mkdir(exist_ok=True)
    text = _session("DM: (secret) the duke is a {c} vampire.").replace("{c}", CANARY)
    (root / "sessions" / "session-05.md").write_text(text, encoding="utf-8")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        service = BotService(engine, default_campaign="greyhold")
        asked = IncomingMessage(
            platform="console", channel_id="console", user_id="u", text="/show Session 5", roles=()
        )
        reply = (await service.handle(asked)).text
        assert "gate creaks" in reply  # the players' page is really there
        assert CANARY not in reply
    finally:
        await close_engine(engine)


async def test_players_search_and_ask_quote_a_stat_block_gm_line(tmp_path):
    """An NPC page's `GM:` line under property lines was quoted by a player's /search and /ask
    (the properties made the page read as a transcript)."""
    root = make_tiny_campaign(tmp_path / "campaigns")
    (root / "npcs").mkdir(exist_ok=True)
    text = STAT_BLOCK + f"GM: the duke is a {CANARY} vampire.\n"
    (root / "npcs" / "duke.md").write_text(text, encoding="utf-8")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        service = BotService(engine, default_campaign="greyhold")
        replies = []
        for command in ("/search noble", "/ask Is Duke Aldric a vampire?"):
            asked = IncomingMessage(
                platform="console", channel_id="console", user_id="u", text=command, roles=()
            )
            replies.append((await service.handle(asked)).text)
        assert "Duke Aldric" in replies[0]  # the players' page is found
        assert not [r for r in replies if CANARY in r]
    finally:
        await close_engine(engine)
