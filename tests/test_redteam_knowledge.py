"""Red-team probes of the GM-only wall through the newly landed ingest and knowledge paths
(titles and aliases, PDF running heads, Markdown comment syntaxes per format, templates,
relation provenance, ``/lore timeline``).

Each confirmed leak is a test marked ``xfail(strict=True)``: it states what must hold and fails
today, so the branch stays green and the test turns red (XPASS) the moment the leak is fixed,
telling whoever fixes it to drop the mark. A canary string is planted in GM-only text and every
player-visible output is searched for it. Nothing of our own code is mocked: files go through
:func:`~liminalis.ingest.loaders.parse_file` as the indexer reads them, and through the bot
service the console drives.
"""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pytest
from conftest import close_engine, make_engine
from docx.enum.style import WD_STYLE_TYPE
from fakes.tiny_campaign import SLACK_GM
from pypdf import PdfReader, PdfWriter
from test_knowledge_wiring import console, wire
from test_slack_files import adapter_for, api, mapped, public_payloads  # noqa: F401
from test_slack_surface import CHANNEL, dump, lore

from bot.service import BotService
from liminalis.campaign import CampaignConfig, load_campaign
from liminalis.ingest.loaders import parse_file
from liminalis.lens import GM
from liminalis.testing import text_pdf

CANARY = "obsidian-heron-canary"
_WORDS = ["apple", "river", "stone", "crown", "ember", "frost", "tower", "lantern"]


@pytest.fixture
def config(tmp_path: Path) -> CampaignConfig:
    (tmp_path / "campaign.toml").write_text('name = "Keep"\n')
    return load_campaign(tmp_path)


def _player_texts(raw: bytes, rel_path: str, config: CampaignConfig) -> str:
    """Every text a lens without the GM reads of the file (the views players are given)."""
    parsed = parse_file(raw, rel_path, config)
    return "\n".join(
        v.text + v.title + " ".join(v.aliases) for v in parsed.views if GM not in v.visibility
    )


def _book(mark: str, *, foot: bool) -> bytes:
    """A four-page GM book: each page's own text (the canary on page 1) under ``mark`` as a
    running head, or above it as a running foot, and a page number."""
    pages = []
    for n in range(4):
        body = [
            f"The {_WORDS[n]} chamber shows {CANARY if n == 0 else 'roads'} beneath its floor.",
            f"Nobody but the {_WORDS[n + 1]} warden knows.",
            f"A {_WORDS[n + 2]} stair leads down.",
        ]
        pages.append("\n".join([*body, mark, str(n + 1)] if foot else [mark, *body, str(n + 1)]))
    return text_pdf(pages)


def _word(paragraphs: list[str]) -> bytes:
    document = docx.Document()
    document.add_paragraph("Guild Report", style="Heading 1")
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# --- titles and aliases -------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["lore/Harbor Notes.md", "lore/harbor-notes.md"])
@pytest.mark.parametrize(
    "aside", [f"(GM: {CANARY})", f"[secret: {CANARY}]", f"{{secret: {CANARY}}}"]
)
def test_a_gm_aside_in_a_first_heading_is_no_title_or_alias_a_player_reads(config, path, aside):
    raw = f"# Harbor Master {aside}\n\nThe harbour is busy at dawn.\n".encode()
    assert CANARY not in _player_texts(raw, path, config)


@pytest.mark.parametrize("aside", [f"(GM: {CANARY})", f"(GM - {CANARY})", f"[secret: {CANARY}]"])
def test_a_gm_aside_in_a_file_name_is_no_title_a_player_reads(config, aside):
    raw = b"# Harbor\n\nThe harbour is busy at dawn.\n"
    assert CANARY not in _player_texts(raw, f"lore/Villain {aside}.md", config)


async def test_a_players_answer_and_show_name_no_gm_aside_of_a_file_name(tmp_path):
    files = {f"lore/Villain (GM: {CANARY}).md": b"# Harbor\n\nThe harbour is busy at dawn.\n"}
    engine, passes, service = await _console_campaign(tmp_path, files)
    try:
        answer = await service.handle(console("/ask what is the harbour like?"))
        shown = await service.handle(console("/show Harbor"))
    finally:
        await passes.close()
        await close_engine(engine)
    assert "busy at dawn" in answer.text and "busy at dawn" in shown.text  # the note was read
    seen = "\n".join([answer.text, answer.title or "", shown.text, shown.title or ""])
    assert CANARY not in seen


def test_kept_a_heading_and_a_file_name_keep_their_words_around_a_gm_aside(config):
    """Kept: a heading's or a file name's words outside a GM aside stay its title, and a
    bracket that names no GM intent ("(a place)", "(the GM, of course)") is no aside."""
    raw = f"# Harbor Master (GM: {CANARY})\n\nThe harbour is busy at dawn.\n".encode()
    (view,) = [
        v for v in parse_file(raw, "lore/harbor-notes.md", config).views if GM not in v.visibility
    ]
    assert view.title == "Harbor Master" and "busy at dawn" in view.text
    raw = b"# The Secret Garden (a place)\n\nRoses grow by the wall.\n"
    (view,) = parse_file(raw, "lore/garden.md", config).views
    assert view.title == "The Secret Garden (a place)" and "Roses" in view.text
    parsed = parse_file(b"# Harbor\n\nBusy.\n", f"lore/Villain (GM: {CANARY}).md", config)
    assert [v.title for v in parsed.views] == ["Villain"]
    parsed = parse_file(b"# Harbor\n\nBusy.\n", "lore/Villain (the GM, of course).md", config)
    assert [v.title for v in parsed.views] == ["Villain (the GM, of course)"]


def test_a_gm_aside_in_a_declared_title_alias_or_pdf_metadata_title_is_cut(config):
    """Held: a GM aside in front matter's ``title``/``aliases`` or a PDF's metadata title is no
    part of the name players read; the words around it are."""
    raw = (
        f"---\ntitle: 'Harbor Master (GM: {CANARY})'\naliases: ['Old Pike [secret: {CANARY}]']\n"
        "---\n# Harbor\n\nThe harbour is busy at dawn.\n"
    ).encode()
    (view,) = parse_file(raw, "lore/harbor.md", config).views
    assert view.title == "Harbor Master" and "Old Pike" in view.aliases
    assert CANARY not in _player_texts(raw, "lore/harbor.md", config)
    writer = PdfWriter(
        clone_from=PdfReader(
            io.BytesIO(
                text_pdf(
                    ["The keep stands on the hill above the town.\nIts walls are old and grey."] * 2
                )
            )
        )
    )
    writer.add_metadata({"/Title": f"The Keep (GM: {CANARY})"})
    out = io.BytesIO()
    writer.write(out)
    views = parse_file(out.getvalue(), "lore/keep.pdf", config).views
    assert [v.title for v in views] == ["The Keep"]


def test_near_miss_a_gm_heading_mark_or_comment_in_a_first_heading_is_no_title_or_alias(config):
    """Held: a first heading marked ``(GM)``/``(secret)``/``[GM]`` hides its section, and a
    ``%%``/``<!--`` comment in it leaves the heading; neither the title nor an alias holds it."""
    for head in [
        f"# {CANARY} (GM)",
        f"# {CANARY} (secret)",
        f"# {CANARY} [GM]",
        f"# Harbor Master %% {CANARY} %%",
        f"# Harbor Master <!-- {CANARY} -->",
        f"<!-- # {CANARY} -->\n# Harbor Master",
    ]:
        raw = f"{head}\n\nThe harbour is busy at dawn.\n".encode()
        for path in ("lore/Harbor Notes.md", "lore/harbor-notes.md"):
            assert CANARY not in _player_texts(raw, path, config), head


# --- PDF running heads and feet ------------------------------------------------------------------


@pytest.mark.parametrize("mark", ["Spoilers - GM only", "Secrets of the Keep (GM only)", "(GM)"])
def test_a_pdf_whose_every_page_has_a_gm_running_foot_gives_players_none_of_it(config, mark):
    assert CANARY not in _player_texts(_book(mark, foot=True), "lore/keep.pdf", config)


@pytest.mark.parametrize("mark", ["GM ONLY", "Game Master Only", "Not for players"])
def test_a_pdf_whose_every_page_is_headed_gm_only_gives_players_none_of_it(config, mark):
    assert CANARY not in _player_texts(_book(mark, foot=False), "lore/keep.pdf", config)


@pytest.mark.parametrize(
    "head",
    [
        "Secrets of the Keep (GM only) · {n}",
        "The Keep (GM only) — page {n}",
        "The Keep (GM only)    {n}",
    ],
)
def test_a_gm_running_head_followed_by_its_page_number_gives_players_none_of_it(config, head):
    pages = []
    for n in range(4):
        body = f"The {_WORDS[n]} chamber shows {CANARY if n == 0 else 'roads'} beneath its floor."
        pages.append(
            f"{head.format(n=n + 1)}\n{body}\nNobody but the {_WORDS[n + 1]} warden knows."
        )
    assert CANARY not in _player_texts(text_pdf(pages), "lore/keep.pdf", config)


def test_near_miss_gm_running_heads_in_other_words_and_languages_hold(config):
    """Held: the running-head guard keeps every bracketed mark the wall reads, in French,
    German and Spanish too, and a head whose page number comes first."""
    for head in [
        "Le Donjon (MJ seulement)",
        "Die Burg (nur SL)",
        "La Fortaleza (secreto)",
        "The Keep (Keeper only)",
        "The Keep (not for players)",
        "{n} · The Keep (GM only)",
    ]:
        pages = [
            f"{head.format(n=n + 1)}\nThe {_WORDS[n]} chamber shows "
            f"{CANARY if n == 0 else 'roads'} below.\nA {_WORDS[n + 1]} stair.\n{n + 1}"
            for n in range(4)
        ]
        assert CANARY not in _player_texts(text_pdf(pages), "lore/keep.pdf", config), head


@pytest.mark.parametrize("title", ["Secrets of the Keep (GM only)", "Keep - GM Notes"])
def test_a_pdf_whose_metadata_title_marks_it_gm_only_gives_players_none_of_it(config, title):
    raw = text_pdf([f"The keep stands on the hill.\nIts lord is the {CANARY}.", "A crypt below."])
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(raw)))
    writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    assert CANARY not in _player_texts(out.getvalue(), "lore/keep.pdf", config)


def test_kept_a_players_rulebook_naming_the_gm_in_its_text_and_heads_is_public(config):
    """Kept: a rulebook whose running head is its own title with a page number, whose pages
    speak of "the GM" in prose, and whose metadata title names the role as a topic, is read by
    players: only a mark holds a book, not the word."""
    pages = [
        f"Player's Handbook · {n + 1}\nThe GM sets the {_WORDS[n]} scene.\n"
        f"Ask the GM before you climb the {_WORDS[n + 1]} tower.\n{n + 1}"
        for n in range(4)
    ]
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf(pages))))
    writer.add_metadata({"/Title": "The Dungeon Master and the Players"})
    out = io.BytesIO()
    writer.write(out)
    parsed = parse_file(out.getvalue(), "lore/handbook.pdf", config)
    assert parsed.held_back == () and GM not in parsed.visibility
    assert "ember tower" in _player_texts(out.getvalue(), "lore/handbook.pdf", config)


def test_kept_gm_chapter_titles_atop_some_pages_hold_their_chapters_not_the_book(config):
    """Kept: "GM Notes", "The Abbot (GM)" and "Secrets" each atop one page are chapter titles,
    no running head: the public pages between them stay the players'."""
    heads = ["The Sunken Abbey", "GM Notes", "Pilgrim Routes", "The Abbot (GM)", "Secrets"]
    pages = [f"{h}\nThe {_WORDS[n]} road runs east of the abbey." for n, h in enumerate(heads)]
    parsed = parse_file(text_pdf(pages), "lore/abbey.pdf", config)
    assert not any(h.line == 1 and "document mark" in h.rule for h in parsed.held_back)
    assert "apple road" in _player_texts(text_pdf(pages), "lore/abbey.pdf", config)


def test_kept_a_word_document_with_plain_styles_and_a_title_header_is_public(config):
    """Kept: a heading style, a character style and a page header that name no GM intent."""
    document = _word_doc()
    document.sections[0].header.paragraphs[0].text = "The Secret Garden · Chapter 2"
    style = document.styles.add_style("Place Name", WD_STYLE_TYPE.CHARACTER)
    document.add_paragraph("The toll was paid at").add_run(" Harrow Gate.").style = style
    document.add_paragraph("Roads", style="Heading 3")
    document.add_paragraph("The north road floods.")
    texts = _player_texts(_saved(document), "lore/report.docx", config)
    assert "Harrow Gate" in texts and "Roads" in texts and "north road" in texts


def test_near_miss_a_gm_running_head_naming_gm_holds_every_page(config):
    """Held: a running head the wall reads ("… (GM only)") stays in the text and hides the book."""
    raw = _book("Secrets of the Keep (GM only)", foot=False)
    assert CANARY not in _player_texts(raw, "lore/keep.pdf", config)


# --- Markdown comment syntaxes in a Word document -------------------------------------------------


@pytest.mark.parametrize(
    "para",
    [f"<!-- {CANARY} was bribed on 17 Greenrise 524. -->", f"%% {CANARY} was hired. %%"],
)
def test_a_gm_comment_typed_in_a_word_document_is_not_read_by_players(config, para):
    raw = _word(["The guild met on 2 Greenrise 524 in the hall.", para])
    assert CANARY not in _player_texts(raw, "lore/guild-report.docx", config)


def test_a_comment_closed_on_its_line_of_a_pdf_holds_and_an_unclosed_one_hides_nothing(config):
    """Held: ``<!-- … -->`` and ``%% … %%`` typed whole on one line of a PDF. Kept: a ``%%``
    that never closes on its line (a table's odds) hides nothing after it."""
    pages = [
        f"The keep stands. <!-- {CANARY}-a is its lord. -->\nOdds: 40 %%\nThe moat is deep.",
        f"A crypt below. %% {CANARY}-b sleeps there. %%\nThe stair is narrow.",
    ]
    texts = _player_texts(text_pdf(pages), "lore/keep.pdf", config)
    assert CANARY not in texts
    assert "The moat is deep" in texts and "The stair is narrow" in texts and "40" in texts


def test_near_miss_a_gm_label_and_a_hidden_run_in_a_word_document_hold(config):
    """Held: a ``GM:`` label inside ``%%`` and a hidden (vanish) run in a heading."""
    document = docx.Document()
    heading = document.add_paragraph("Guild Report", style="Heading 1")
    heading.add_run(f" of {CANARY}").font.hidden = True
    document.add_paragraph(f"%% GM: {CANARY} was hired on 16 Greenrise 524. %%")
    out = io.BytesIO()
    document.save(out)
    assert CANARY not in _player_texts(out.getvalue(), "lore/guild-report.docx", config)


def _word_doc() -> docx.document.Document:
    document = docx.Document()
    document.add_paragraph("Guild Report", style="Heading 1")
    document.add_paragraph("The guild met in the hall.")
    return document


def _saved(document: docx.document.Document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_run_hidden_by_its_word_character_style_is_not_read_by_players(config):
    document = _word_doc()
    style = document.styles.add_style("Whisper", WD_STYLE_TYPE.CHARACTER)
    style.font.hidden = True
    document.add_paragraph("The toll was paid.").add_run(f" {CANARY} paid it.").style = style
    assert CANARY not in _player_texts(_saved(document), "lore/report.docx", config)


def test_a_paragraph_hidden_by_its_word_style_is_not_read_by_players(config):
    document = _word_doc()
    style = document.styles.add_style("Aside", WD_STYLE_TYPE.PARAGRAPH)
    style.font.hidden = True
    document.add_paragraph(f"{CANARY} paid the toll.", style=style)
    assert CANARY not in _player_texts(_saved(document), "lore/report.docx", config)


def test_a_run_in_a_gm_named_word_character_style_is_not_read_by_players(config):
    document = _word_doc()
    style = document.styles.add_style("GM Note", WD_STYLE_TYPE.CHARACTER)
    document.add_paragraph("The toll was paid.").add_run(f" {CANARY} paid it.").style = style
    assert CANARY not in _player_texts(_saved(document), "lore/report.docx", config)


def test_a_paragraph_in_a_gm_named_heading_style_is_not_read_by_players(config):
    document = _word_doc()
    style = document.styles.add_style("GM Heading 3", WD_STYLE_TYPE.PARAGRAPH)
    document.add_paragraph(f"{CANARY} paid the toll.", style=style)
    assert CANARY not in _player_texts(_saved(document), "lore/report.docx", config)


def test_the_section_under_a_gm_named_heading_style_is_held_and_the_next_section_kept(config):
    """Held: the paragraphs under a 'GM Heading 2' heading, to the next heading of its level.
    Kept: the section after it."""
    document = _word_doc()
    document.styles.add_style("GM Heading 2", WD_STYLE_TYPE.PARAGRAPH)
    document.add_paragraph("The Plot", style="GM Heading 2")
    document.add_paragraph(f"{CANARY} paid the toll.")
    document.add_paragraph("Roads", style="Heading 2")
    document.add_paragraph("The north road floods.")
    texts = _player_texts(_saved(document), "lore/report.docx", config)
    assert CANARY not in texts and "The Plot" not in texts
    assert "Roads" in texts and "north road" in texts


def test_a_word_document_whose_page_header_marks_it_gm_only_gives_players_none_of_it(config):
    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = "Secrets of the Keep (GM only)"
    document.add_paragraph("Guild Report", style="Heading 1")
    document.add_paragraph(f"The {CANARY} sleeps below the hall.")
    assert CANARY not in _player_texts(_saved(document), "lore/report.docx", config)


def test_a_word_document_whose_even_page_footer_marks_it_gm_only_is_held_for_review(config):
    """Held: a GM mark in any page header or footer (here the even pages' footer, with a page
    number) holds the document whole, as a habit the GM may review."""
    document = docx.Document()
    document.settings.odd_and_even_pages_header_footer = True
    document.sections[0].even_page_footer.paragraphs[0].text = "GM ONLY · 2"
    document.add_paragraph("Guild Report", style="Heading 1")
    document.add_paragraph(f"The {CANARY} sleeps below the hall.")
    parsed = parse_file(_saved(document), "lore/report.docx", config)
    assert CANARY not in _player_texts(_saved(document), "lore/report.docx", config)
    assert [h.reviewable for h in parsed.held_back] == [True]


def test_near_miss_gm_named_paragraph_style_heading_mark_and_hidden_table_run_hold(config):
    """Held: a 'GM Notes' paragraph style, a '(GM)' heading, a hidden run in a table cell."""
    document = _word_doc()
    document.styles.add_style("GM Notes", WD_STYLE_TYPE.PARAGRAPH)
    document.add_paragraph(f"{CANARY} one.", style="GM Notes")
    document.add_paragraph("Plans (GM)", style="Heading 2")
    document.add_paragraph(f"{CANARY} two.")
    document.add_paragraph("Public", style="Heading 2")
    cell = document.add_table(rows=1, cols=2).cell(0, 1).paragraphs[0]
    cell.add_run(CANARY).font.hidden = True
    assert CANARY not in _player_texts(_saved(document), "lore/report.docx", config)


async def _console_campaign(tmp_path: Path, files: dict[str, bytes]):
    root = tmp_path / "campaigns" / "keep"
    root.mkdir(parents=True, exist_ok=True)
    (root / "campaign.toml").write_text('name = "Keep"\ngm_paths = ["gm/**"]\n')
    for rel, raw in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(raw)
    engine = await make_engine(tmp_path, milvus=False)
    passes, _ = await wire(engine)
    await engine.ingest("keep")
    await passes.idle()
    return engine, passes, BotService(engine, default_campaign="keep")


async def test_a_players_timeline_draws_no_dated_gm_comment_of_a_word_document(tmp_path):
    raw = _word(
        [
            "The guild met on 2 Greenrise 524 in the hall.",
            f"<!-- {CANARY} was bribed on 17 Greenrise 524. -->",
        ]
    )
    engine, passes, service = await _console_campaign(tmp_path, {"lore/guild-report.docx": raw})
    try:
        reply = await service.handle(console("/timeline"))
        shown = await service.handle(console("/show Guild Report"))
    finally:
        await passes.close()
        await close_engine(engine)
    assert "2 Greenrise 524" in reply.text  # the public event is there: the test reads the reply
    assert CANARY not in reply.text + shown.text


async def test_near_miss_a_gms_timeline_in_a_shared_slack_channel_never_reaches_it(
    mapped,  # noqa: F811
    api,  # noqa: F811
):
    """Held: Slack has no ephemeral file, so the GM's picture (GM-only events in its text and
    drawing) goes to the GM's DM; nothing sent to the channel names a GM-only event."""
    adapter = adapter_for(mapped, api)
    gm = await lore(adapter, api, "timeline", user=SLACK_GM, tag="rg")
    await api.wait_for("files.completeUploadExternal")
    assert "Guildmaster Hale" in dump(gm)  # the GM's own timeline does hold it
    assert api.shared and all(f.channel != CHANNEL for f in api.shared)
    assert "Guildmaster Hale" not in public_payloads(api)


async def test_a_note_made_gm_only_is_off_a_players_timeline_before_the_passes_run(tmp_path):
    files = {
        "lore/plan.md": b"# Plan\n\nOn 3 Greenrise 524 Ilsa Marsh began the plan.\n",
        "lore/ilsa.md": b"---\ntype: character\n---\n# Ilsa Marsh\n\nIlsa Marsh keeps the bell.\n",
    }
    engine, passes, service = await _console_campaign(tmp_path, files)
    try:
        before = await service.handle(console("/timeline"))
        (tmp_path / "campaigns" / "keep" / "lore" / "plan.md").write_text(
            "---\nvisibility: gm\n---\n# Plan\n\n"
            f"On 3 Greenrise 524 Ilsa Marsh began the plan.\n\nOn 4 Greenrise 524 {CANARY} struck.\n"
        )
        engine.ingest_listeners.clear()  # the passes have not reached the change yet (a busy queue)
        await engine.ingest("keep")
        after = await service.handle(console("/timeline"))
    finally:
        await passes.close()
        await close_engine(engine)
    assert "3 Greenrise 524" in before.text  # the public event was on the timeline
    assert CANARY not in after.text


async def test_near_miss_a_gm_only_name_or_title_is_no_existence_oracle(tmp_path):
    """Held: a player naming a GM-only note's file-name title or its heading (an alias) gets the
    very reply a name nobody wrote gets, from /timeline, /entity, /show and /map."""
    files = {
        "gm/Kraken Cult Dossier.md": b"# Oberon Quorvath\n\nOn 4 Greenrise 524 Oberon Quorvath "
        b"drowned the ferryman. Oberon Quorvath is the brother of Ilsa Marsh.\n",
        "lore/ilsa.md": b"---\ntype: character\n---\n# Ilsa Marsh\n\nIlsa Marsh keeps the bell.\n",
    }
    engine, passes, service = await _console_campaign(tmp_path, files)
    try:
        for cmd in ("/timeline", "/entity", "/show", "/map"):
            unknown = await service.handle(console(f"{cmd} Zzyzx Quobble"))
            for secret in ("Oberon Quorvath", "Kraken Cult Dossier"):
                reply = await service.handle(console(f"{cmd} {secret}"))
                assert (reply.title, reply.text) == (unknown.title, unknown.text), (cmd, secret)
            gm = await service.handle(console(f"{cmd} Oberon Quorvath", lens="gm"))
            assert gm.text != unknown.text or cmd == "/show"  # the GM's reply does differ
    finally:
        await passes.close()
        await close_engine(engine)


async def test_a_note_made_gm_only_is_off_a_players_entity_card_before_the_passes_run(tmp_path):
    files = {
        "lore/plan.md": f"# Plan\n\nIlsa Marsh signed the {CANARY} pact.\n".encode(),
        "lore/ilsa.md": b"---\ntype: character\n---\n# Ilsa Marsh\n\nIlsa Marsh keeps the bell.\n",
    }
    engine, passes, service = await _console_campaign(tmp_path, files)
    try:
        before = await service.handle(console("/entity Ilsa Marsh"))
        plan = tmp_path / "campaigns" / "keep" / "lore" / "plan.md"
        plan.write_text("---\nvisibility: gm\n---\n" + plan.read_text())
        # The passes are busy or not yet run: on_ingested only queues the next run, and the
        # facts of a view whose visibility moved are forgotten when that run starts.
        engine.ingest_listeners.clear()
        await engine.ingest("keep")
        after = await service.handle(console("/entity Ilsa Marsh"))
    finally:
        await passes.close()
        await close_engine(engine)
    assert CANARY in before.text  # public then: the card quoted it
    assert CANARY not in after.text


async def test_near_miss_dated_gm_sentences_in_the_usual_forms_are_off_a_players_timeline(
    tmp_path,
):
    """Held: a dated sentence a GM hid in the Markdown forms (``%%``, ``<!-- -->``, a ``GM:``
    label, a ``[!gm]`` callout, a ``(GM)`` heading, an inline aside), in a Word hidden run or in a
    GM-only session note is on the GM's timeline and never on a player's."""
    note = (
        "# Dates of the Vell\n\nThe great flood of 480 drowned the lower wards.\n\n"
        f"GM: On 11 Greenrise 524 the Watch paid {CANARY}-a.\n\n"
        f"The bell tolled on 12 Greenrise 524. %% It was {CANARY}-b on 12 Greenrise 524. %%\n\n"
        f"<!-- On 13 Greenrise 524 {CANARY}-c struck. -->\n\n"
        f"> [!gm]\n> On 14 Greenrise 524 {CANARY}-d happened.\n\n"
        f"The ferry sank on 16 Greenrise 524 (GM: {CANARY}-e sank it in 523).\n\n"
        f"## The plot (GM)\n\nOn 15 Greenrise 524 {CANARY}-f began.\n"
    )
    document = _word_doc()
    document.add_paragraph("The toll rose on 2 Greenrise 524.").add_run(
        f" On 17 Greenrise 524 {CANARY}-g paid it."
    ).font.hidden = True
    session = (
        "---\ntype: session\nvisibility: gm\n---\n# Session 9\n\n"
        f"**In-world date:** 30 Greenrise, 524\n\nOn 30 Greenrise 524 {CANARY}-h met the envoy.\n"
    )
    files = {
        "lore/dates.md": note.encode(),
        "lore/report.docx": _saved(document),
        "sessions/session-09.md": session.encode(),
    }
    engine, passes, service = await _console_campaign(tmp_path, files)
    try:
        players = await service.handle(console("/timeline"))
        gm = await service.handle(console("/timeline", lens="gm"))
    finally:
        await passes.close()
        await close_engine(engine)
    assert "480" in players.text and "2 Greenrise 524" in players.text
    assert CANARY not in players.text and "Session" not in players.text
    assert [x for x in "bcdefh" if f"{CANARY}-{x}" not in gm.text] == [], (
        gm.text
    )  # the GM reads them


async def test_near_miss_a_templates_folder_setting_only_ever_skips_files(tmp_path):
    """Held: an Obsidian templates setting pointing at the GM folder, at a folder beside it, or
    written oddly (a slash, a dot segment) only ever leaves files out; it never makes a GM file
    public (a symlink into the GM folder keeps the GM path)."""
    files = {
        ".obsidian/templates.json": b'{"folder": "./gm/"}',
        ".obsidian/plugins/templater-obsidian/data.json": b'{"templates_folder": "lore/"}',
        "gm/plan.md": f"# Plan\n\nThe harbour master is the {CANARY}.\n".encode(),
        "lore/plan.md": f"# Harbour Plan\n\nThe harbour master is the {CANARY}.\n".encode(),
        "notes/harbour.md": b"# Harbour\n\nThe harbour master greets every barge.\n",
    }
    root = tmp_path / "campaigns" / "keep"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "secret.md").symlink_to(root / "gm" / "plan.md")
    engine, passes, service = await _console_campaign(tmp_path, files)
    try:
        answer = await service.handle(console("/ask who is the harbour master?"))
        shown = await service.handle(console("/show Plan"))
    finally:
        await passes.close()
        await close_engine(engine)
    assert "greets every barge" in answer.text  # the campaign was read
    assert CANARY not in answer.text + shown.text
