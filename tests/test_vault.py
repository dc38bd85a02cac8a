"""A GM's vault as Obsidian users keep one: notes named by their file names, ``.obsidian/``
settings, a configured ``Templates/`` folder, an attachments folder and rulebook PDFs whose
tables hold ``%%`` and whose pages carry running heads.

Everything binary is built here (:func:`liminalis.testing.text_pdf`, python-docx).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import docx
import pytest
from conftest import close_engine, make_engine
from pypdf import PdfReader, PdfWriter

from liminalis.campaign import load_campaign
from liminalis.ingest.loaders import parse_file
from liminalis.ingest.titles import document_title, pdf_title
from liminalis.lens import gm_lens, players_lens
from liminalis.testing import text_pdf

CANARY = "quillfeather-canary"  # GM-only text: never in a players' view
TABLE_TAIL = "Greatsword 3d+2 cut"  # the rulebook's text after its `%%` table cell

SESSION_ZERO = """# World Description

The campaign opens in Varnholt, a frozen trading city ruled by the Salt Council.
Players make characters who owe the council a debt.

%% The council's treasurer is the {canary}. %%
"""

TEMPLATE = "# Session {{title}}\n\n## Recap\n\n## Loot\n\nPlaceholder for {{date}}.\n"


def _with_title(raw: bytes, title: str) -> bytes:
    """``raw`` with ``title`` as its metadata title (as a layout tool leaves one)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(raw)))
    writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _rulebook(title: str = "magicstyles.qxd:e23.qxd") -> bytes:
    """Four pages under a running head and a page number, a weapons table with ``%%`` odds."""
    body = [
        [
            "Combat is resolved with three six-sided dice rolled against a skill.",
            "A roll at or under the skill succeeds and a roll of 17 or 18 always fails.",
        ],
        [
            "Weapon | Damage | Odds",
            "Broadsword 2d cut | %% 62",
            TABLE_TAIL,
            "Spear 1d+2 imp | 50 %%",
        ],
        [
            "Fatigue points measure stamina and are spent to cast spells or sprint.",
            "A character at zero fatigue points falls unconscious until rested.",
        ],
        [
            "Magic styles are schools of spells taught by an order of wizards.",
            "Each style grants a set of spells and a secret handshake among its members.",
        ],
    ]
    pages = [
        "\n".join(["GURPS Lite Fourth Edition", *lines, str(n + 4)]) for n, lines in enumerate(body)
    ]
    return _with_title(text_pdf(pages), title)


def _word_with_hidden_run() -> bytes:
    document = docx.Document()
    document.add_paragraph("Odds on the ferry: %% 40 for the crossing.")
    para = document.add_paragraph("The ferryman is kind. ")
    para.add_run(f"He is the {CANARY}.").font.hidden = True
    document.add_paragraph("The river is wide and slow.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_vault(root: Path) -> Path:
    """An Obsidian vault under ``root/vault`` as a GM keeps one."""
    vault = root / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / ".obsidian" / "app.json").write_text('{"attachmentFolderPath": "attachments"}')
    (vault / ".obsidian" / "templates.json").write_text(json.dumps({"folder": "Templates"}))
    (vault / "Templates").mkdir()
    (vault / "Templates" / "Session Template.md").write_text(TEMPLATE)
    (vault / "attachments").mkdir()
    (vault / "attachments" / "varnholt-map.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (vault / "Session Zero Description.md").write_text(SESSION_ZERO.format(canary=CANARY))
    (vault / "NPCs").mkdir()
    (vault / "NPCs" / "Mirabel Fenwick.md").write_text(
        "Mirabel keeps the lighthouse on the Salt Council's pier.\n\n"
        f"<!-- She is the {CANARY}'s sister. -->\n"
    )
    (vault / "NPCs" / "harbour-watch.md").write_text(
        "# The Harbour Watch\n\nThe watch patrols the pier at night.\n\n"
        f"[//]: # (The watch captain is the {CANARY}.)\n"
    )
    (vault / "Rules").mkdir()
    (vault / "Rules" / "GURPS Lite.pdf").write_bytes(_rulebook())
    (vault / "Rules" / "ferry.docx").write_bytes(_word_with_hidden_run())
    (vault / "campaign.toml").write_text('name = "Varnholt"\n')
    return vault


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return make_vault(tmp_path / "campaigns")


def _parse(vault: Path, rel: str):
    return parse_file((vault / rel).read_bytes(), rel, load_campaign(vault))


# --- titles -------------------------------------------------------------------------------------


def test_a_note_is_titled_by_its_file_name_when_the_name_reads_as_a_title(vault):
    doc = _parse(vault, "Session Zero Description.md").views[-1]  # the players' view
    assert doc.title == "Session Zero Description"
    assert "World Description" in doc.aliases  # its first heading still finds it
    harbour = _parse(vault, "NPCs/harbour-watch.md").views[-1]
    assert harbour.title == "The Harbour Watch"  # a kebab-case name is no title: the heading is


@pytest.mark.parametrize(
    ("declared", "text", "path", "title", "aliases"),
    [
        ("", "# World Description\n\nText.", "Session Zero Description.md",
         "Session Zero Description", ("World Description",)),
        ("", "# Tobin Harrow\n\nText.", "characters/tobin-harrow.md", "Tobin Harrow", ()),
        ("", "No heading here.", "lore/the-copper-kettle.md", "The Copper Kettle", ()),
        ("Front Matter Title", "# Heading\n", "Some Note.md", "Front Matter Title",
         ("Heading", "Some Note")),
        ("", "# 🔗 Connections\n\nText.", "NPCs/Klem.md", "Klem", ()),
        ("", "# Background\n\nText.", "Nelo.md", "Nelo", ()),
    ],
)  # fmt: skip
def test_document_titles_follow_obsidians_convention(declared, text, path, title, aliases):
    assert document_title(declared, text, path) == (title, aliases)


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("magicstyles.qxd:e23.qxd", ""),
        ("Gurps 4Th   Lite", ""),
        ("GURPS 4Th Lite", ""),
        ("", ""),
        ("   ", ""),
        ("Microsoft Word - notes.docx", ""),
        ("Untitled", ""),
        ("Layout 1", ""),
        ("adventure_final.pdf", ""),
        ("GURPS Lite", "GURPS Lite"),
        ("The Lost Mines of Phandelver", "The Lost Mines of Phandelver"),
    ],
)
def test_a_pdf_metadata_title_counts_only_when_it_is_a_real_title(raw, kept):
    assert pdf_title(raw) == kept


def test_a_pdf_with_a_junk_metadata_title_is_titled_by_its_file_name(vault):
    parsed = _parse(vault, "Rules/GURPS Lite.pdf")
    assert parsed.views[0].title == "GURPS Lite"
    (vault / "Rules" / "core.pdf").write_bytes(_rulebook(title="Dungeon World Basic Moves"))
    assert _parse(vault, "Rules/core.pdf").views[0].title == "Dungeon World Basic Moves"


# --- comment syntaxes per format ----------------------------------------------------------------


def test_percent_signs_in_a_pdf_table_hide_nothing(vault):
    parsed = _parse(vault, "Rules/GURPS Lite.pdf")
    assert len(parsed.views) == 1 and parsed.hidden_sections == 0
    assert not parsed.warnings and not parsed.held_back
    (doc,) = parsed.views
    assert TABLE_TAIL in doc.text and "secret handshake" in doc.text


def test_markdown_and_text_comments_still_hide_from_players(vault):
    for rel in ("Session Zero Description.md", "NPCs/Mirabel Fenwick.md", "NPCs/harbour-watch.md"):
        parsed = _parse(vault, rel)
        shared = parsed.views[-1]
        assert parsed.hidden_sections == 1, rel
        assert CANARY not in shared.text and CANARY in parsed.views[0].text, rel
    txt = parse_file(
        f"Notes.\n\n%% {CANARY} %%\n\n<!-- {CANARY} -->\n".encode(),
        "notes.txt",
        load_campaign(vault),
    )
    assert txt.hidden_sections == 2 and CANARY not in txt.views[-1].text


def test_a_link_reference_comment_in_a_pdf_is_text_not_a_secret(vault):
    lines = ["[//]: # (Roll twice on the table below.)", "Then keep the higher roll."]
    raw = text_pdf(["\n".join(lines)])
    parsed = parse_file(raw, "Rules/odds.pdf", load_campaign(vault))
    assert parsed.hidden_sections == 0 and "Roll twice" in parsed.views[0].text


def test_word_keeps_its_own_hidden_runs_but_not_markdown_comments(vault):
    parsed = _parse(vault, "Rules/ferry.docx")
    gm, shared = parsed.views
    assert CANARY in gm.text and CANARY not in shared.text  # the hidden run stays GM-only
    assert "40 for the crossing" in shared.text  # a `%%` in Word text opens nothing
    assert "The river is wide" in shared.text and parsed.hidden_sections == 1


# --- running heads --------------------------------------------------------------------------------


def test_a_rulebooks_running_head_and_page_numbers_are_not_passages(vault):
    (doc,) = _parse(vault, "Rules/GURPS Lite.pdf").views
    assert "GURPS Lite Fourth Edition" not in doc.text
    lines = doc.text.split("\n")
    assert not [ln for ln in lines if ln.strip() in {"4", "5", "6", "7"}]
    assert "A roll at or under the skill succeeds and a roll of 17 or 18 always fails." in lines
    assert "Spear 1d+2 imp | 50 %%" in lines  # a table's last line is not furniture


# --- end to end ------------------------------------------------------------------------------------


async def test_an_obsidian_vault_ingests_with_titles_and_the_wall_and_no_templates(tmp_path, vault):
    engine = await make_engine(tmp_path, milvus=False)
    try:
        report = await engine.ingest("vault")
        stored = {d.doc_id: d for d in await engine.db.documents.all("vault")}
        found = await engine.search("vault", "Session Zero", players_lens())
        by_heading = await engine.search("vault", "World Description", players_lens())
        players = await engine.search("vault", CANARY, players_lens())
        gm = await engine.search("vault", CANARY, gm_lens())
    finally:
        await close_engine(engine)
    ids = {source.split("//")[0] for source in stored}
    assert not any(i.startswith("Templates/") for i in ids)  # the configured template folder
    assert not any(".obsidian" in i for i in ids)
    assert {"Session Zero Description", "Rules/GURPS Lite", "Rules/ferry"} <= ids
    assert [s.path for s in report.skipped] == ["attachments/varnholt-map.png"]
    assert found[0].doc_id.startswith("Session Zero Description")
    assert by_heading[0].doc_id.startswith("Session Zero Description")
    titles = {d.title for d in stored.values()}
    assert {"Session Zero Description", "GURPS Lite", "Mirabel Fenwick"} <= titles
    assert players == [] and gm  # the GM reads their comments; players never do


def test_a_running_head_that_marks_gm_text_is_never_left_out(vault):
    pages = [
        f"Secrets of the Keep (GM only)\nPage {n} tells how {CANARY} {n} works.\n{n}"
        for n in range(4)
    ]
    parsed = parse_file(text_pdf(pages), "Rules/keep.pdf", load_campaign(vault))
    whole = parsed.views[0].text
    assert whole.count("Secrets of the Keep (GM only)") == 4  # the mark stays for the wall
    assert "\n0\n" not in f"\n{whole}\n"  # the bare page numbers still go
