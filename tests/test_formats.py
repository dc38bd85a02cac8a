"""The GM's material as it is: encodings, PDF, Word, zipped vaults, and bad input that
never crashes, never loses the previous version and never echoes GM-only text.

Fixture PDFs and Word documents are built here with :func:`liminalis.testing.text_pdf` (pypdf
alone) and :func:`liminalis.testing.word_document` (python-docx); nothing binary is committed.
"""

from __future__ import annotations

import io
import random
import zipfile

import harness
import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import CANARY, make_tiny_campaign

from bot.service import Attachment, BotService, IncomingMessage
from liminalis.campaign import load_campaign
from liminalis.context.material import from_rendered
from liminalis.ingest.archive import read_vault
from liminalis.ingest.chunking import chunk_document
from liminalis.ingest.formats import LoadError, ZipLimits, decode_text
from liminalis.ingest.loaders import SUPPORTED_SUFFIXES, parse_file
from liminalis.lens import GM, NOT_GM, PLAYERS, gm_lens, players_lens
from liminalis.testing import text_pdf, word_document

WORD_EXPORT = (
    "# Le Comt\xe9 de Vall\xe9e\n\n"
    "\u201cCr\xe8me br\xfbl\xe9e,\u201d said the na\xefve ma\xeetre d\u2019h\xf4tel \u2014 "
    "the se\xf1or\u2019s caf\xe9 serves it \xe0 la fran\xe7aise\u2026\n"
)


@pytest.fixture
def config(tmp_path):
    return load_campaign(make_tiny_campaign(tmp_path / "campaigns"))


# --- encodings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".md", ".txt"])
def test_a_windows_1252_word_export_ingests_with_its_accents_right(config, suffix):
    parsed = parse_file(WORD_EXPORT.encode("cp1252"), f"lore/comte{suffix}", config)
    assert parsed.views[0].text == WORD_EXPORT.strip()
    assert parsed.views[0].title == "Le Comté de Vallée"


@pytest.mark.parametrize("codec", ["utf-8", "utf-8-sig", "utf-16", "utf-16-be-bom", "utf-32"])
def test_utf8_with_or_without_bom_and_utf16_with_bom_keep_working(config, codec):
    text = f"---\nvisibility: gm\n---\n{WORD_EXPORT}Also: {CANARY}. Кириллица, 日本語."
    raw = b"\xfe\xff" + text.encode("utf-16-be") if codec == "utf-16-be-bom" else text.encode(codec)
    parsed = parse_file(raw, "lore/comte.md", config)
    # the front matter is read after the byte-order mark: GM-only, the text exact
    assert parsed.visibility == frozenset({GM})
    assert parsed.views[0].text.startswith(WORD_EXPORT.strip())
    assert parsed.views[0].text.endswith("Кириллица, 日本語.")


@pytest.mark.parametrize("seed", range(6))
def test_binary_garbage_is_refused_with_a_clear_reason(config, seed):
    rng = random.Random(seed)
    garbage = bytes(rng.randrange(256) for _ in range(rng.choice([64, 900, 20_000])))
    for raw in (garbage, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + garbage):
        with pytest.raises(LoadError) as err:
            parse_file(raw, "lore/blob.md", config)
        assert err.value.reason.startswith("binary file")


def test_short_western_texts_are_not_read_as_another_code_page():
    for text in [
        "Caf\xe9 cr\xe8me br\xfbl\xe9e",
        "Die K\xf6nigin \xfcber die Br\xfccke, Stra\xdfe.",
    ]:
        assert decode_text(text.encode("cp1252")) == text
    assert decode_text("Герои пришли в замок барона у тёмной реки.".encode("cp1251")).startswith(
        "Герои"
    )


# --- PDF ---------------------------------------------------------------------------------------

_LINES = [
    "The lamplighters of Greyhold walk the river wall at dusk and count the lanterns aloud.",
    "Each lantern has a keeper, a name and a small brass bell that rings when it goes out.",
    "The keepers meet at the Copper Kettle on feast days to trade oil and gossip.",
    "Nobody remembers who hung the first lantern, but every child can sing its song.",
    "The song has nine verses and the ninth is never sung after dark.",
    "Travellers who ask about the ninth verse are given tea and a change of subject.",
    "The wall is older than the keep, and the stones near the water are green with age.",
    "On winter nights the lanterns are trimmed twice, once at dusk and once at midnight.",
    "The guild keeps a ledger of every lantern that ever failed and why it did.",
    "Pages of the ledger are copied each spring and the old copies are burned.",
]


def _page(topic: str, n: int = 10) -> str:
    return "\n".join(f"{line} ({topic} {i})" for i, line in enumerate(_LINES[:n]))


def _rulebook(secret: bool = False) -> bytes:
    pages = [
        "Lamplighters\n" + _page("wall"),
        _page("ledger") + "\nThe ninth lantern hangs under the old bridge.",
        None,  # a scanned plate in the middle of the book
        ("The Drowned Lantern (GM)\n" + _page("secret") + f"\nIn truth, {CANARY}.")
        if secret
        else _page("bridge"),
        "Festivals\n" + _page("feast"),
    ]
    outline = [(0, "Lamplighters", 1), (4, "Festivals", 1)]
    if secret:
        outline.insert(1, (3, "The Drowned Lantern (GM)", 1))
    return text_pdf(pages, outline=outline, first_label=11)


def test_pdf_pages_end_the_heading_path_and_are_structure_not_text(config):
    parsed = parse_file(_rulebook(), "lore/rulebook.pdf", config)
    (doc,) = parsed.views
    assert "p. 12" not in doc.text and "p. 13" not in doc.text  # no markers in the text
    assert [label for _, label in doc.pages] == ["11", "12", "14", "15"]  # the scan is left out
    assert parsed.warnings and "p. 13" in parsed.warnings[0] and "scanned" in parsed.warnings[0]
    passages = chunk_document(doc.doc_id, doc.text, visibility=doc.visibility, pages=doc.pages)
    (ninth,) = [p for p in passages if "ninth lantern hangs" in p.text]
    assert ninth.heading.startswith("Lamplighters > ") and ninth.heading.endswith("12")
    (feast,) = [p for p in passages if p.text.startswith("# Festivals")]
    assert feast.heading == "Festivals > p. 15"


def test_a_pdf_chapter_marked_gm_is_hidden_across_its_pages(config):
    parsed = parse_file(_rulebook(secret=True), "lore/rulebook.pdf", config)
    gm, shared = parsed.views
    assert gm.visibility == frozenset({GM}) and CANARY in gm.text
    assert shared.visibility == frozenset({PLAYERS, NOT_GM}) and CANARY not in shared.text
    assert "Drowned Lantern" not in shared.text and "Festivals" in shared.text
    # each view's page offsets point at its own text
    for view in (gm, shared):
        for offset, _label in view.pages:
            assert offset == 0 or view.text[offset - 2 : offset] == "\n\n"
    assert [label for _, label in shared.pages] == ["11", "12", "15"]


def test_a_scanned_pdf_is_refused_not_ingested_empty(config):
    with pytest.raises(LoadError) as err:
        parse_file(text_pdf([None, None, None]), "lore/scan.pdf", config)
    assert "scanned PDF" in err.value.reason and "3 pages" in err.value.reason


def test_a_broken_pdf_or_word_document_is_refused_without_echoing_it(config):
    for name, raw in [
        ("lore/x.pdf", b"%PDF-1.7\n" + CANARY.encode() * 20),
        ("lore/x.docx", CANARY.encode() * 20),
        ("lore/x.docx", _zip({"word/document.xml": CANARY.encode()})),
    ]:
        with pytest.raises(LoadError) as err:
            parse_file(raw, name, config)
        assert CANARY not in err.value.reason and "baron" not in err.value.reason


# --- Word --------------------------------------------------------------------------------------


def test_word_text_in_a_hidden_character_or_paragraph_style_is_the_gms(config):
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    d = docx.Document()
    d.styles.add_style("Aside Text", WD_STYLE_TYPE.CHARACTER).font.hidden = True
    margin = d.styles.add_style("Margin", WD_STYLE_TYPE.PARAGRAPH)
    margin.font.hidden = True
    d.styles.add_style("Margin Two", WD_STYLE_TYPE.PARAGRAPH).base_style = margin
    p = d.add_paragraph("The lock opens at dawn. ")
    p.add_run("run-canary sells the codes.", style="Aside Text")
    d.add_paragraph("para-canary is her brother.", style="Margin")
    d.add_paragraph("based-canary freezes.", style="Margin Two")
    d.add_paragraph("She whistles at barges.")
    out = io.BytesIO()
    d.save(out)
    parsed = parse_file(out.getvalue(), "npcs/lockkeeper.docx", config)
    shared = [v for v in parsed.views if v.visibility & {PLAYERS}]
    assert shared and "The lock opens at dawn" in shared[0].text and "whistles" in shared[0].text
    for canary in ("run-canary", "para-canary", "based-canary"):
        assert canary not in shared[0].text
        assert any(canary in v.text for v in parsed.views if v.visibility == frozenset({GM}))


def test_a_word_tables_gm_column_and_a_bold_gm_line_are_the_gms_and_plain_ones_are_kept(config):
    import docx

    d = docx.Document()
    d.add_paragraph("The harbour has three captains.")
    table = d.add_table(rows=2, cols=3)
    cells = ["Name", "Ship", "GM notes", "Ysolde", "The Heron", "col-canary spies for the Duke"]
    for cell, text in zip(table._cells, cells):
        cell.text = text
    d.add_paragraph().add_run("The Secret Garden").bold = True
    d.add_paragraph("A walled garden behind the chapel.")
    d.add_paragraph().add_run("GM Notes").bold = True
    d.add_paragraph("bold-canary: the gardener is the thief.")
    out = io.BytesIO()
    d.save(out)
    parsed = parse_file(out.getvalue(), "lore/harbour.docx", config)
    shared = [v for v in parsed.views if v.visibility & {PLAYERS}]
    assert shared, "a file with GM columns keeps a players' view"
    text = shared[0].text
    for kept in ("Ysolde", "The Heron", "The Secret Garden", "walled garden"):
        assert kept in text
    for canary in ("col-canary", "bold-canary"):
        assert canary not in text
        assert any(canary in v.text for v in parsed.views if v.visibility == frozenset({GM}))


def test_word_headings_become_the_heading_path_and_a_gm_heading_hides_its_block(config):
    raw = word_document(
        [
            ("Title", "Greyhold Prep"),
            ("Heading 1", "Town"),
            ("Normal", "The market opens at dawn on the river square."),
            ("Heading 2", "Market"),
            ("List Bullet", "Fishmongers sell eels by the bucket."),
            ("Heading 2", "Baron's Plans (GM)"),
            ("Normal", f"The truth: {CANARY}."),
            ("Heading 1", "Harbour"),
            ("Normal", "Boats leave with the tide."),
        ]
    )
    parsed = parse_file(raw, "lore/prep.docx", config)
    assert parsed.doc_id == "lore/prep" and parsed.hidden_sections == 1
    gm, shared = parsed.views
    assert shared.title == "Greyhold Prep"
    assert CANARY in gm.text and CANARY not in shared.text and "Plans" not in shared.text
    assert "- Fishmongers sell eels" in shared.text and "Boats leave" in shared.text
    passages = chunk_document(
        shared.doc_id, shared.text, visibility=shared.visibility, params=_small()
    )
    headings = {p.heading for p in passages}
    assert "Town > Market" in headings and "Harbour" in headings, headings


def _small():
    from liminalis.ingest.chunking import ChunkingParams

    return ChunkingParams(min_chars=10, max_chars=60)


# --- zipped vaults -----------------------------------------------------------------------------


def _zip(members: dict[str, bytes], *, links: dict[str, str] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777) << 16
            zf.writestr(info, target)
    return out.getvalue()


def _read(raw: bytes, **kw):
    return read_vault(raw, suffixes=SUPPORTED_SUFFIXES, max_member_bytes=1_000_000, **kw)


@pytest.mark.parametrize(
    "name", ["../escape.md", "notes/../../escape.md", "/etc/escape.md", "C:/escape.md", "..\\x.md"]
)
def test_a_vault_naming_a_file_outside_itself_is_refused(name):
    with pytest.raises(LoadError) as err:
        _read(_zip({"ok.md": b"# Ok", name: f"# {CANARY}".encode()}))
    assert "outside itself" in err.value.reason and CANARY not in err.value.reason


def test_a_zip_bomb_and_too_many_members_are_refused_before_inflating():
    bomb = _zip({"bomb.md": b"\0" * 4_000_000})
    with pytest.raises(LoadError) as err:
        _read(bomb)
    assert "zip bomb" in err.value.reason
    with pytest.raises(LoadError) as err:
        _read(_zip({f"n{i}.md": b"# x" for i in range(30)}), limits=ZipLimits(max_members=20))
    assert "too many files" in err.value.reason
    with pytest.raises(LoadError) as err:
        _read(
            _zip({f"n{i}.md": bytes(range(256)) * 40 for i in range(4)}),
            limits=ZipLimits(max_total=30_000),
        )
    assert "unpacks to more than" in err.value.reason
    with pytest.raises(LoadError) as err:
        _read(CANARY.encode())
    assert err.value.reason == "not a readable zip archive"


def test_symlinks_settings_and_attachments_are_skipped_with_a_reason():
    vault = _read(
        _zip(
            {
                "Notes/Town.md": b"# Town",
                ".obsidian/app.json": b"{}",
                ".obsidian/plugins/x/main.js": b"",
                "Attachments/map.png": b"\x89PNG",
                "__MACOSX/Notes/._Town.md": b"",
            },
            links={"Notes/secret.md": "/etc/passwd"},
        )
    )
    assert [m.path for m in vault.members] == ["Notes/Town.md"]
    reasons = dict(vault.skipped)
    assert "symbolic link" in reasons["Notes/secret.md"]
    assert "Obsidian's settings" in reasons[".obsidian/"] and "2 files" in reasons[".obsidian/"]
    assert "attachment (.png)" in reasons["Attachments/map.png"]


# --- uploads, end to end -----------------------------------------------------------------------


@pytest.fixture
async def service(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        svc = BotService(engine)
        await svc.directory.link("discord", "C1", "greyhold")
        yield svc
    finally:
        await close_engine(engine)


async def _upload(service, *files: tuple[str, bytes], options: str = "") -> str:
    reply = await service.handle(
        IncomingMessage(
            platform="discord",
            channel_id="C1",
            user_id="111",
            roles=("GM",),
            text=f"/upload {options}".strip(),
            attachments=tuple(Attachment(filename=n, data=d) for n, d in files),
        )
    )
    return reply.text


async def test_an_uploaded_pdf_is_cited_by_page_and_keeps_its_visibility(service):
    reply = await _upload(service, ("Rulebook.pdf", _rulebook(secret=True)), options="players")
    assert "Rulebook.pdf — players" in reply and "1 hidden section" in reply, reply
    assert "no text layer" in reply  # the scanned plate is named
    engine = service.engine
    bundle = await engine.retrieve("greyhold", "where does the ninth lantern hang", players_lens())
    (book,) = [d for d in bundle.documents if d.doc_id == "uploads/Rulebook"]
    assert CANARY not in book.text
    label = from_rendered(book, rank=0).label()  # what the prompt asks the model to cite
    assert label.startswith("Rulebook — Lamplighters > p") and "12" in label, label
    player = await service.handle(
        IncomingMessage(
            platform="discord",
            channel_id="C1",
            user_id="222",
            text="/ask where does the ninth lantern hang?",
        )
    )
    cited = [s for s in player.sources if s.title == "Rulebook"]
    assert cited and "p" in cited[0].section and "12" in cited[0].section, player.sources
    assert CANARY not in player.text
    for _ in range(2):  # a re-read (the tick, a restart) gives it the same visibility
        await engine.ingest("greyhold")
        players = await engine.retrieve("greyhold", "drowned lantern truth", players_lens())
        assert all(CANARY not in d.text for d in players.documents)
        gm = await engine.retrieve("greyhold", "drowned lantern truth", gm_lens())
        assert any(CANARY in d.text for d in gm.documents)


async def test_a_pdf_replaced_on_disk_by_other_bytes_says_nothing_so_is_gm_only(service):
    await _upload(service, ("Rulebook.pdf", _rulebook()), options="players")
    cfg = await service.config("greyhold")
    (cfg.uploads_root / "Rulebook.pdf").write_bytes(
        text_pdf([f"Lamplighters\n{CANARY}, written on the lantern wall."])
    )
    await service.engine.ingest("greyhold")
    players = await service.engine.retrieve("greyhold", "lantern wall baron", players_lens())
    assert all(CANARY not in d.text for d in players.documents)


async def test_a_failed_upload_keeps_the_previous_version_searchable(service):
    engine = service.engine
    first = await _upload(service, ("Rulebook.pdf", _rulebook()), options="players")
    assert "Ingested 1 file" in first
    for bad in (text_pdf([None, None]), b"%PDF-1.4 truncated", b"\x00\x01" * 100):
        reply = await _upload(service, ("Rulebook.pdf", bad), options="players")
        assert "Nothing was ingested" in reply, reply
        hits = await engine.retrieve("greyhold", "ninth lantern old bridge", players_lens())
        assert any("ninth lantern hangs" in d.text for d in hits.documents)
    # a notes file too, and a vault
    await _upload(service, ("notes.md", b"# Notes\n\nThe ferry leaves at dawn."), options="players")
    assert "Nothing was ingested" in await _upload(service, ("notes.md", b"\xff\xfe\x00\xd8"))
    hits = await engine.retrieve("greyhold", "ferry", players_lens())
    assert any("ferry leaves at dawn" in d.text for d in hits.documents)
    await _upload(service, ("Vault.zip", _zip({"Harbour.md": b"# Harbour\n\nEels at the quay."})))
    broken = await _upload(service, ("Vault.zip", b"PK\x03\x04 not really"))
    assert "not a readable zip archive" in broken
    partly = await _upload(
        service,
        ("Vault.zip", _zip({"Harbour.md": b"\x00\x00garbage", "Quay.md": b"# Quay\n\nNets."})),
    )
    assert "Harbour.md: binary file" in partly, partly
    hits = await engine.retrieve("greyhold", "eels at the quay", gm_lens())
    assert any("Eels at the quay" in d.text for d in hits.documents)


async def test_a_vault_upload_applies_folder_rules_wikilinks_and_aliases(service):
    vault = _zip(
        {
            "Greyhold/People/Duke Orsin.md": b"# Duke Orsin\n\nThe duke keeps the harbour tolls.",
            "Greyhold/Places/Harbour.md": (
                b"# Harbour\n\nShips answer to [[Duke Orsin|the Harbour Lord]]; see "
                b"[[Places/Market#Stalls]] and ![[map.png]]."
            ),
            "Greyhold/Places/Market.md": b"# Market\n\n## Stalls\n\nEels by the bucket.",
            "Greyhold/gm/Orsin Secret.md": (
                f"# Orsin Secret\n\n[[Duke Orsin|the Drowned Duke]]: {CANARY}.".encode()
            ),
            "Greyhold/.obsidian/workspace.json": b"{}",
            "Greyhold/Attachments/map.png": b"\x89PNG\r\n",
        }
    )
    reply = await _upload(service, ("Greyhold Vault.zip", vault), options="players")
    assert "Greyhold-Vault/ — 4 notes (1 GM-only, 3 players)" in reply, reply
    assert "Obsidian's settings" in reply and "attachment (.png)" in reply
    engine = service.engine
    cfg = await service.config("greyhold")
    saved = (cfg.uploads_root / "Greyhold-Vault/Greyhold/People/Duke-Orsin.md").read_text()
    assert "the Harbour Lord" in saved and "Drowned Duke" not in saved
    catalog = await harness.catalog(engine, "greyhold")
    duke = "uploads/Greyhold-Vault/Greyhold/People/Duke-Orsin"
    assert duke in catalog.resolve_key("the Harbour Lord", players_lens())
    assert not catalog.resolve_key("the Drowned Duke", players_lens())
    harbour = catalog.documents["uploads/Greyhold-Vault/Greyhold/Places/Harbour"]
    assert "answer to the Harbour Lord; see Places/Market > Stalls and map.png." in harbour.text
    players = await engine.retrieve("greyhold", "who is the Drowned Duke", players_lens())
    assert all(CANARY not in d.text and "Orsin Secret" not in d.title for d in players.documents)
    # A new version of the vault: a note it no longer has is removed.
    smaller = _zip({"Greyhold/Places/Market.md": b"# Market\n\nEels."})
    again = await _upload(service, ("Greyhold Vault.zip", smaller), options="players")
    assert "(replaced the earlier upload) — 1 notes" in again, again
    catalog = await harness.catalog(engine, "greyhold")
    assert duke not in catalog.documents


async def test_upload_refusals_never_echo_gm_text(service):
    secret_name = f"{CANARY}.md"
    cases = [
        ("bad.zip", _zip({f"../{secret_name}": CANARY.encode()})),
        ("bomb.zip", _zip({secret_name: b"\0" * 3_000_000})),
        ("scan.pdf", text_pdf([None])),
        ("broken.pdf", b"%PDF-1.7 " + CANARY.encode()),
        ("broken.docx", CANARY.encode() * 10),
        ("blob.md", b"\x00" + CANARY.encode()),
        ("gm.docx", word_document([("Normal", "visibility: gm"), ("Normal", CANARY)])),
    ]
    for name, raw in cases:
        reply = await _upload(service, (name, raw))
        assert "Nothing was ingested" in reply, (name, reply)
        assert CANARY not in reply and "baron" not in reply, (name, reply)


@pytest.mark.parametrize("seed", range(3))
def test_mangled_pdfs_word_documents_and_vaults_never_crash_or_echo(config, seed, caplog):
    """Bytes flipped, cut or repeated in a good file: read, or refused with a reason that holds
    none of the file's text; never another exception."""
    rng = random.Random(seed)
    gm_pdf = text_pdf([f"Plans (GM)\n{CANARY}."], outline=[(0, "Plans (GM)", 1)])
    gm_docx = word_document([("Heading 1", "Plans (GM)"), ("Normal", CANARY)])
    vault = _zip({"gm/plot.md": CANARY.encode(), "town.md": b"# Town"})
    for name, good in (("lore/a.pdf", gm_pdf), ("lore/a.docx", gm_docx), ("v.zip", vault)):
        for _ in range(25):
            raw = bytearray(good)
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(raw))
                raw[i : i + rng.randint(1, 16)] = bytes(rng.randrange(256) for _ in range(4))
            if rng.random() < 0.3:
                raw = raw[: rng.randrange(len(raw))]
            try:
                if name.endswith(".zip"):
                    _read(bytes(raw))
                else:
                    parsed = parse_file(bytes(raw), name, config)
                    assert all(CANARY not in v.text for v in parsed.views[1:])
            except LoadError as exc:
                assert CANARY not in exc.reason and "Plans" not in exc.reason
    # pypdf's warnings quote the file's bytes: withheld from the host's logs too
    assert not [r for r in caplog.records if "Plans" in r.getMessage()]
