"""Export and import: a campaign exported and imported into a fresh data directory
retrieves and answers exactly as before, for every lens, without embedding anything again; an
archive of another format, a newer release or with an unsafe member is refused before anything
is written.

Real SQLite, the hash embedder, the in-memory vector store, the sample campaign."""

from __future__ import annotations

import json
import shutil
import stat
import zipfile
from pathlib import Path
from typing import Any

import harness
import pytest
import yaml
from conftest import SAMPLE, close_engine, make_engine

from liminalis.engine import Engine
from liminalis.errors import InvalidInput, StoreError
from liminalis.knowledge.service import Knowledge
from liminalis.lens import Lens
from liminalis.memory.recall import MemoryModel, MemoryParams
from liminalis.passes import Passes
from liminalis.ports import Usage
from liminalis.store.graph import MemoryStore
from liminalis.store.schema import LATEST
from liminalis.store.sqlite import Database
from liminalis.store.transfer import REBUILT, UNCHECKED
from liminalis.testing import FrozenClock, HashEmbedder
from liminalis.transfer import FORMAT_VERSION

SLUG = "emberfall"
QUESTIONS = json.loads((Path(__file__).parent / "data" / "emberfall_questions.json").read_text())
ASKED = [q["question"] for q in QUESTIONS["questions"][:6]] + [
    q["question"] for q in QUESTIONS["gm_secret_questions"]
]
LENSES = (Lens({"players"}), Lens({"gm"}), Lens({"players", "mirel"}))
CHAT = "discord:77"
UPLOAD = "---\ntitle: Harbour Rumours\nvisibility: players\n---\n# Harbour\n\nThe ferryman owes the Lantern Court three bells.\n"


class TitleModel:
    """The pass model of these tests: every document is "calm"."""

    async def complete(self, role: str, system: str, prompt: str, **_: Any) -> tuple[str, Usage]:
        title = prompt.split(" for ", 1)[1].split(":", 1)[0]
        return json.dumps({"name": title, "mood": "calm"}), Usage(input_tokens=3, output_tokens=2)


MOODS = {
    "name": "moods",
    "triggers": ["changed"],
    "caps": {"model_calls": 100},
    "nodes": [
        {"id": "docs", "type": "select-documents", "params": {"views": "shared"}},
        {"id": "whole", "type": "split", "params": {"by": "whole"}},
        {"id": "ask", "type": "prompt-model", "params": {"prompt": "Mood for $title:\n$text"}},
        {"id": "parse", "type": "parse-json"},
        {"id": "write", "type": "write-facts", "params": {"key_field": "name"}},
    ],
    "edges": [
        {"from": "docs", "to": "whole", "input": "views"},
        {"from": "whole", "to": "ask", "input": "items"},
        {"from": "ask", "to": "parse", "input": "items"},
        {"from": "parse", "to": "write", "input": "records"},
    ],
}


async def engine_at(root: Path, embedder: HashEmbedder | None = None) -> Engine:
    engine = await make_engine(root, milvus=False, embedder=embedder or HashEmbedder())
    # The campaign memory on, over a clock that never moves: its state is part of the export.
    engine.memory = MemoryModel(
        MemoryStore(harness.db(engine)), clock=FrozenClock(), params=MemoryParams()
    )
    engine.memory_enabled = True
    return engine


async def lived_in(root: Path) -> Engine:
    """The sample campaign with everything a campaign gathers: an upload, pins, a budget, a
    channel link, chat memory, campaign memory, knowledge, a pass's facts and trace."""
    shutil.copytree(SAMPLE, root / "campaigns" / SLUG)
    (root / "uploads" / SLUG).mkdir(parents=True)
    (root / "uploads" / SLUG / "harbour.md").write_text(UPLOAD, encoding="utf-8")
    engine = await engine_at(root)
    await engine.ingest(SLUG)
    await engine.add_pin(SLUG, "Vessa Coldwater", Lens({"gm"}))
    await engine.add_pin(SLUG, "The Drowned Bell", Lens({"gm"}), scope=CHAT)
    await engine.set_budget(SLUG, 4321, chat=CHAT)
    await harness.db(engine).links.link("discord", "555", SLUG, guild_id="9")
    for q in ("Who is Vessa Coldwater?", "Where is the Copper Kettle?"):
        answer = await engine.answer(SLUG, q, Lens({"players"}), chat=CHAT)
        await engine.remember_turn(
            await engine.scope(SLUG, Lens({"players"})), q, [s.doc_id for s in answer.sources]
        )
    await Knowledge(harness.db(engine)).refresh(SLUG, await harness.catalog(engine, SLUG))
    passes = Passes(harness.db(engine), clock=FrozenClock(), model=TitleModel())
    await passes.save(SLUG, json.dumps(MOODS))
    assert (await passes.run(SLUG, "moods")).status == "done"
    await passes.close()
    return engine


async def outcomes(engine: Engine, slug: str, chat: str = CHAT) -> list[Any]:
    """Ranked documents, rendered bundles and offline answers for every question and lens, and a
    follow-up in ``chat``."""
    seen: list[Any] = []
    for lens in LENSES:
        for n, q in enumerate(ASKED):
            bundle = await engine.retrieve(slug, q, lens, chat=chat)
            seen.append((q, sorted(lens), bundle.ranked_doc_ids, bundle.text))
            if n % 2 == 0:  # the offline answerer: slower, and the bundle decides it
                answer = await engine.answer(slug, q, lens)
                seen.append((answer.text, answer.sources))
    follow = await engine.answer(
        slug, "and what does she sell there?", Lens({"players"}), chat=chat
    )
    seen.append((follow.text, follow.sources))
    return seen


def comparable(tables: dict[str, list[dict[str, Any]]], slug: str) -> dict[str, list[Any]]:
    """An export's rows, the campaign's own name taken out and the registry row left aside."""

    def norm(row: dict[str, Any]) -> Any:
        row = {
            k: (SLUG if v == slug else v)
            if k == "campaign"
            else (v.replace(f"{slug}:", f"{SLUG}:", 1) if k == "chat_key" else v)
            for k, v in row.items()
        }
        return sorted(row.items())

    return {t: sorted(map(norm, rows)) for t, rows in tables.items() if t != "campaigns"}


@pytest.fixture
async def source(tmp_path):
    engine = await lived_in(tmp_path / "a")
    yield engine
    await close_engine(engine)


@pytest.fixture(scope="module")
async def archive(tmp_path_factory):
    """One export of the lived-in campaign, for the tests that only read it."""
    root = tmp_path_factory.mktemp("export")
    engine = await lived_in(root / "a")
    try:
        await engine.export_campaign(SLUG, root / "emberfall.zip")
    finally:
        await close_engine(engine)
    return root / "emberfall.zip"


async def test_every_table_of_the_schema_is_placed(tmp_path):
    """A new table with no ``campaign`` column must be declared (a child, or shared) in
    liminalis/store/transfer.py, or it would silently stay behind in every export."""
    async with Database(tmp_path / "db.sqlite3") as db:
        assert await db.transfer.unplaced() == []


async def derived(engine: Engine, slug: str) -> dict[str, list[Any]]:
    """The rows an import derives again, by table, the campaign's name taken out."""
    out = {}
    for table in sorted(REBUILT - {"pass_state", "memory_chunks", "memory_links"}):
        rows = await harness.rows(engine, f"SELECT * FROM {table} WHERE campaign = ?", (slug,))
        out[table] = sorted(
            sorted((k, SLUG if k == "campaign" else r[k]) for k in r.keys()) for r in rows
        )
    return out


async def rederive(engine: Engine, slug: str = SLUG) -> None:
    """What the passes do after an import's ingest where they listen (``serve``): here the
    knowledge refresh and the pass the lived-in campaign ran."""
    await Knowledge(harness.db(engine)).refresh(slug, await harness.catalog(engine, slug))
    passes = Passes(harness.db(engine), clock=FrozenClock(), model=TitleModel())
    assert (await passes.run(slug, "moods")).status == "done"
    await passes.close()


#: Tables an import takes although their rows name a lens or a visibility, each for a reason: the
#: campaign memory's learned state names chunks, checked against the graph rebuilt from the
#: documents before anything reads it (``MemoryStore.purge_invisible``); the question log and the
#: feedback on answers are read by a GM only (``/log``).
LABELLED_AND_TAKEN = {"memory_activation", "memory_edges", "question_log", "answer_feedback"}


async def test_rows_claiming_a_visibility_are_not_taken_from_an_archive_unless_declared(tmp_path):
    """A new table whose rows carry a visibility or a lens is derived, or remembered text: a
    forged archive could claim players' sight for GM text in it. It travels only once declared
    here with its reason, or rebuilt (``REBUILT``) or left out (``UNCHECKED``)."""
    async with Database(tmp_path / "db.sqlite3") as db:
        taken = set(await db.transfer.export_rows("none")) - {"campaigns"}
        labelled = set()
        for table in taken:
            cols = {r[1] for r in await db.fetchall(f"PRAGMA table_info({table})")}
            if cols & {"visibility", "lens"}:
                labelled.add(table)
    assert labelled == LABELLED_AND_TAKEN
    assert not (REBUILT | UNCHECKED) & taken


async def test_export_then_import_into_a_fresh_data_directory_changes_nothing(source, tmp_path):
    archive = tmp_path / "emberfall.zip"
    before = await source.db.transfer.export_rows(SLUG)
    assert all(before[t] for t in ("pins", "channel_links", "budgets", "pass_definitions"))
    assert before["pass_trace"] and before["memory_activation"]
    # what the files give again, and what no one could check, is not in an archive
    assert not (REBUILT | UNCHECKED) & set(before)
    knowledge = await derived(source, SLUG)
    assert all(knowledge[t] for t in ("documents", "knowledge_entities", "pass_facts"))
    exported = await source.export_campaign(SLUG, archive)
    assert exported.embeddings > 0 and exported.files > 30 and exported.documents == 35

    embedder = HashEmbedder()
    target = await engine_at(tmp_path / "b", embedder)
    try:
        report = await target.import_campaign(archive)
        assert report.campaign == SLUG and report.same_embedder
        assert (report.embedded, embedder.texts_embedded, embedder.calls) == (0, 0, 0)
        assert report.ignored == {} and report.notes == ()
        # the rows, as they were (the registry row aside: a new root, a new generation)
        after = await target.db.transfer.export_rows(SLUG)
        assert comparable(after, SLUG) == comparable(before, SLUG)
        # the files: campaign folder (campaign.toml included) and uploads
        assert (tmp_path / "b" / "campaigns" / SLUG / "campaign.toml").read_text() == (
            SAMPLE / "campaign.toml"
        ).read_text()
        assert (tmp_path / "b" / "uploads" / SLUG / "harbour.md").read_text() == UPLOAD
        assert (await target.campaign(SLUG)).name == "Emberfall"
        assert await target.is_indexed(SLUG) and report.documents == 35
        # the documents, their knowledge and the pass's facts derived again, as they were
        await rederive(target)
        assert await derived(target, SLUG) == knowledge
        # and the same answers, for every lens, campaign memory included; chats start afresh
        assert await target.db.memory.keys(SLUG) == []
        assert await outcomes(target, SLUG, "discord:78") == await outcomes(
            source, SLUG, "discord:78"
        )
        assert embedder.texts_embedded == 0
    finally:
        await close_engine(target)


async def test_import_under_a_new_name_beside_the_original(source, tmp_path):
    archive = tmp_path / "emberfall.zip"
    await source.export_campaign(SLUG, archive)
    before = await source.db.transfer.export_rows(SLUG)
    report = await source.import_campaign(archive, "emberfall-copy")
    # the channel stays with the campaign it speaks for here; the copy gets everything else
    assert report.ignored == {"channel_links": 1}
    assert any("channel" in n for n in report.notes)
    copy = await source.db.transfer.export_rows("emberfall-copy")
    assert copy["channel_links"] == []
    before["channel_links"] = []
    assert comparable(copy, "emberfall-copy") != comparable(before, SLUG)  # run ids renumbered
    old_runs = {r["run_id"] for r in before["pass_runs"]}
    new_runs = {r["run_id"] for r in copy["pass_runs"]}
    assert old_runs.isdisjoint(new_runs)
    assert {r["run_id"] for r in copy["pass_trace"]} == new_runs
    for rows in (before, copy):
        for table in ("pass_runs", "pass_trace"):
            for r in rows[table]:
                r["run_id"] = 0
        for table in ("question_log", "model_calls"):  # numbered by the database too
            for r in rows.get(table, []):
                r["id"] = 0
    assert comparable(copy, "emberfall-copy") == comparable(before, SLUG)
    await rederive(source, "emberfall-copy")
    assert await outcomes(source, "emberfall-copy", "discord:78") == await outcomes(
        source, SLUG, "discord:78"
    )


async def test_another_embedder_re_embeds(archive, tmp_path):
    embedder = HashEmbedder(dim=64, model_id="hash-64")
    target = await engine_at(tmp_path / "b", embedder)
    try:
        report = await target.import_campaign(archive)
        assert not report.same_embedder and report.embedded > 0
        assert embedder.texts_embedded >= report.embedded
        assert any("re-embedded" in n for n in report.notes)
        bundle = await target.retrieve(SLUG, "Who carried the Vigil Key?", Lens({"players"}))
        assert bundle.ranked_doc_ids
    finally:
        await close_engine(target)


async def test_liminalis_import_derives_the_knowledge_again_and_says_so(archive, tmp_path):
    """The console's import runs the campaign's passes after indexing (what ``liminalis import``
    gives ``derive``): the knowledge an archive no longer carries is there when it returns."""
    import argparse

    from bot.cli import transfer_command
    from liminalis.knowledge.passes import KnowledgePasses

    target = await engine_at(tmp_path / "b")
    passes = Passes(target.db, clock=FrozenClock(), model=TitleModel())
    KnowledgePasses(passes).attach()
    lines: list[str] = []
    try:
        args = argparse.Namespace(command="import", file=archive, campaign=None)

        async def derive(slug: str) -> Any:
            return await passes.run_triggered(slug, "changed")

        assert await transfer_command(target, args, out=lines.append, derive=derive) == 0
        assert lines[0].startswith("imported emberfall: 35 documents")
        assert lines[-1].startswith("passes: ") and "entities" in lines[-1]
        assert "moods 31 done" in lines[-1]  # the archive's own pass, with its definition
        assert await target.knowledge.entities(SLUG, frozenset({"players"}))
    finally:
        await passes.close()
        await close_engine(target)


# -- refusals ----------------------------------------------------------------------------------


def rewrite(
    src: Path, dest: Path, *, manifest: dict[str, Any] | None = None, extra=(), drop: str = "\0"
) -> Path:
    """A copy of the archive ``src`` with its manifest changed, members under ``drop`` left out
    and members added."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            if info.filename.startswith(drop):
                continue
            data = zin.read(info)
            if info.filename == "manifest.json" and manifest is not None:
                data = json.dumps({**json.loads(data), **manifest}).encode()
            zout.writestr(info, data)
        for item in extra:
            if isinstance(item, zipfile.ZipInfo):
                zout.writestr(item, b"x")
            else:
                zout.writestr(item, b"x")
    return dest


def link_member(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"manifest": {"version": FORMAT_VERSION + 1}}, "newer release (format"),
        ({"manifest": {"schema": LATEST + 1}}, "newer release (database schema"),
        ({"manifest": {"format": "something-else"}}, "not a Liminalis campaign export"),
        ({"manifest": {"version": "one"}}, "format is unknown"),
        ({"extra": ["files/campaign/../../../escaped.md"]}, "unsafe path"),
        ({"extra": ["/etc/escaped.md"]}, "unsafe path"),
        ({"extra": ["files/campaign/..\\..\\escaped.md"]}, "unsafe path"),
        ({"extra": ["files/campaign/C:/escaped.md"]}, "unsafe path"),
        ({"extra": [link_member("files/campaign/lore/link.md")]}, "damaged"),
        ({"extra": ["elsewhere/file.md"]}, "unknown file"),
        ({"extra": ["tables/Robert'); DROP TABLE documents;--.jsonl"]}, "unknown file"),
    ],
)
async def test_a_foreign_newer_or_unsafe_archive_is_refused_before_anything_is_written(
    archive, tmp_path, change, says
):
    bad = rewrite(archive, tmp_path / "bad.zip", **change)
    target = await engine_at(tmp_path / "b")
    try:
        with pytest.raises(InvalidInput) as err:
            await target.import_campaign(bad, "fresh")
        assert says in err.value.user_message
        assert str(tmp_path) not in err.value.user_message
        assert await target.list_campaigns() == []
        assert not (tmp_path / "b" / "campaigns").exists() or not any(
            (tmp_path / "b" / "campaigns").iterdir()
        )
        assert not list(tmp_path.rglob("escaped.md"))
        assert await target.db.documents.all("fresh") == []
    finally:
        await close_engine(target)


async def test_not_a_zip_and_an_existing_campaign_are_refused(archive, tmp_path):
    junk = tmp_path / "junk.zip"
    junk.write_text("not a zip")
    target = await engine_at(tmp_path / "b")
    try:
        with pytest.raises(InvalidInput) as err:
            await target.import_campaign(junk, "fresh")
        assert "not a Liminalis campaign export" in err.value.user_message
        await target.import_campaign(archive)
        with pytest.raises(InvalidInput) as err:
            await target.import_campaign(archive)
        assert "already exists" in err.value.user_message and "--campaign" in err.value.user_message
    finally:
        await close_engine(target)


async def test_a_failed_import_leaves_nothing_behind_and_touches_no_folder_it_did_not_make(
    archive, tmp_path, monkeypatch
):
    target = await engine_at(tmp_path / "b")
    try:

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise StoreError("disk full")

        monkeypatch.setattr(target.db.transfer, "import_rows", broken)
        with pytest.raises(StoreError):
            await target.import_campaign(archive)
        assert not (tmp_path / "b" / "campaigns" / SLUG).exists()
        assert not (tmp_path / "b" / "uploads" / SLUG).exists()
        assert await target.list_campaigns() == []
        # a folder already there is never removed: an archive without uploads fails the same way
        keep = tmp_path / "b" / "uploads" / SLUG / "keep.md"
        keep.parent.mkdir(parents=True)
        keep.write_text("mine")
        bare = rewrite(archive, tmp_path / "bare.zip", drop="files/uploads/")
        with pytest.raises(StoreError):
            await target.import_campaign(bare)
        assert keep.read_text() == "mine"
        assert not (tmp_path / "b" / "campaigns" / SLUG).exists()
        monkeypatch.undo()
        # nor replaced: an archive with uploads is refused
        with pytest.raises(InvalidInput) as err:
            await target.import_campaign(archive)
        assert "already exists" in err.value.user_message
        assert keep.read_text() == "mine"
        assert not (tmp_path / "b" / "campaigns" / SLUG).exists()
    finally:
        await close_engine(target)


# -- a forged archive --------------------------------------------------------------------------

CANARY = "Quillon Vantablack sold the Vigil Key"
#: Text columns a forged row fills with the canary, and the visibility it claims for players.
_TEXT = frozenset(
    "title text synopsis summary name aliases surface evidence value label content state answer "
    "question key hint".split()
)


def forged_row(row: dict[str, Any], table: str) -> dict[str, Any]:
    """``row`` made to carry the canary as players-visible text."""
    out = dict(row)
    for col, v in row.items():
        if col == "visibility":
            out[col] = '[["players"]]' if table.startswith("memory_") else '["players"]'
        elif col == "lens":
            out[col] = '["players"]'
        elif col in _TEXT and isinstance(v, str):
            out[col] = {
                "state": json.dumps({"story": [CANARY]}),
                "aliases": json.dumps([CANARY]),
                "value": json.dumps({"name": CANARY, "mood": CANARY}),
            }.get(col, CANARY)
    return out


async def held_back(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """The rows an export leaves out, as an archive of an earlier release (or a forger) holds
    them."""
    out = {}
    for table in sorted(REBUILT | UNCHECKED):
        sql = (
            "SELECT t.* FROM chat_turns t JOIN chat_state s USING (chat_key) WHERE s.campaign = ?"
            if table == "chat_turns"
            else f"SELECT * FROM {table} WHERE campaign = ?"
        )
        out[table] = [dict(r) for r in await harness.rows(engine, sql, (SLUG,))]
    return out


def forge(src: Path, dest: Path, held: dict[str, list[dict[str, Any]]]) -> Path:
    """The archive ``src`` with the ``held`` tables added and a canary in the first row of every
    table that holds derived or remembered text (a GM-only document's rows among them), each
    claiming players' visibility, plus a stored answer card and summary."""
    held = {t: [dict(r) for r in rows] for t, rows in held.items()}
    for table, rows in held.items():
        secret = [r for r in rows if "players" not in str(r.get("visibility", "players"))]
        for row in [*rows[:1], *secret[:1]]:
            rows[rows.index(row)] = forged_row(row, table)
    held["knowledge_summaries"].append(
        {
            "campaign": SLUG,
            "doc_id": "characters/vessa-coldwater",
            "method": "extractive",
            "content_hash": "x",
            "summary": CANARY,
            "visibility": '["players"]',
        }
    )
    held["answer_cards"].append(
        {
            "card_id": "forged",
            "kind": "answer",
            "platform": "discord",
            "channel_id": "555",
            "campaign": SLUG,
            "user_id": "1",
            "lens": '["players"]',
            "question": CANARY,
            "answer": CANARY,
            "sources": "[]",
            "created_at": 4102444800.0,
            "question_id": None,
        }
    )
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            if info.filename.removeprefix("tables/").removesuffix(".jsonl") not in held:
                zout.writestr(info, zin.read(info))
        for table, rows in held.items():
            zout.writestr(f"tables/{table}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return dest


async def test_a_forged_archive_puts_no_derived_text_before_players(source, tmp_path):
    """Derived rows (documents' text and synopses, passages, knowledge, pass facts, the memory
    graph) and remembered text (chat memory, answer cards) are not taken from an archive: the
    documents are indexed from their files, the passes derive the rest again under each view's
    own visibility, and a forged row claiming players' visibility for GM text comes to nothing."""
    from test_knowledge_wiring import _surface, console, wire

    from bot.service import BotService

    await source.export_campaign(SLUG, tmp_path / "emberfall.zip")
    forged = forge(tmp_path / "emberfall.zip", tmp_path / "forged.zip", await held_back(source))
    with zipfile.ZipFile(forged) as zf:
        assert CANARY in zf.read("tables/knowledge_entities.jsonl").decode()
    target = await engine_at(tmp_path / "b")
    passes, _ = await wire(target)
    try:
        report = await target.import_campaign(forged)
        await passes.idle()
        held = await held_back(target)
        rows = json.dumps([await target.db.transfer.export_rows(SLUG), held], default=str)
        assert CANARY not in rows
        for table in ("knowledge_entities", "knowledge_views", "documents", "passages"):
            assert held[table]  # derived again from the files
        assert await target.knowledge.entities(SLUG, frozenset({"players"}))
        service = BotService(target, default_campaign=SLUG)
        seen = [await _surface(service, target, "players")]
        for text in (f"/search {CANARY}", "/search Quillon", "/show Vessa Coldwater"):
            seen.append((await service.handle(console(text))).text)
        for lens in LENSES:
            bundle = await target.retrieve(SLUG, CANARY, lens, chat=CHAT)
            answer = await target.answer(SLUG, CANARY, lens, chat=CHAT)
            seen += [bundle.text, answer.text, repr(answer.sources)]
        seen.append(repr(await passes.facts(SLUG, Lens({"players"}))))
        assert CANARY.lower() not in "\n".join(seen).lower()
        assert any("rebuilt" in n for n in report.notes)
    finally:
        await passes.close()
        await close_engine(target)


# -- uploads kept beside their options ---------------------------------------------------------

ALMANAC = "The almanac says the tide turns twice at Greyhold ford"
LEDGER = "The ledger shows the baron paid the drowned court in bells"


async def uploaded(root: Path) -> Engine:
    """The tiny campaign with two PDFs a GM uploaded: one for players, one that said nothing."""
    from fakes.tiny_campaign import make_tiny_campaign

    from bot.messages import Attachment, IncomingMessage
    from bot.service import BotService
    from liminalis.testing import text_pdf

    make_tiny_campaign(root / "campaigns")
    engine = await engine_at(root)
    await engine.ingest("greyhold")
    service = BotService(engine)
    await service.directory.link("discord", "C1", "greyhold")
    for name, text, options in (("Almanac.pdf", ALMANAC, " players"), ("Ledger.pdf", LEDGER, "")):
        reply = await service.handle(
            IncomingMessage(
                platform="discord",
                channel_id="C1",
                user_id="111",
                roles=("GM",),
                text=f"/upload{options}",
                attachments=(Attachment(filename=name, data=text_pdf([f"Notes\n{text}."])),),
            )
        )
        assert not reply.error, reply.text
    return engine


async def readers(engine: Engine) -> dict[str, set[str]]:
    """Which of the two uploads each lens reads."""
    out = {}
    for name, lens in (("players", Lens({"players"})), ("gm", Lens({"gm"}))):
        bundle = await engine.retrieve("greyhold", "almanac tide ledger baron bells", lens)
        text = " ".join(d.text for d in bundle.documents)
        out[name] = {t for t in (ALMANAC, LEDGER) if t in text}
    return out


async def test_uploaded_pdfs_keep_their_visibility_through_an_export(tmp_path):
    """A PDF's or Word document's visibility lives in a sidecar bound to its bytes: an export
    carries it, an import restores it only where it fits the file's bytes exactly."""
    source = await uploaded(tmp_path / "a")
    try:
        assert await readers(source) == {"players": {ALMANAC}, "gm": {ALMANAC, LEDGER}}
        exported = await source.export_campaign("greyhold", tmp_path / "greyhold.zip")
    finally:
        await close_engine(source)
    target = await engine_at(tmp_path / "b")
    try:
        report = await target.import_campaign(tmp_path / "greyhold.zip")
        assert report.notes == ()
        assert await readers(target) == {"players": {ALMANAC}, "gm": {ALMANAC, LEDGER}}
        with zipfile.ZipFile(tmp_path / "greyhold.zip") as zf:
            names = [n for n in zf.namelist() if n.startswith("files/")]
            bound = yaml.safe_load(zf.read("files/uploads/.Ledger.pdf.liminalis.yaml"))
        assert sorted(n for n in names if n.endswith(".liminalis.yaml")) == [
            "files/uploads/.Almanac.pdf.liminalis.yaml",
            "files/uploads/.Ledger.pdf.liminalis.yaml",
        ]
        assert exported.files == len(names) and bound["visibility"] == "gm"
        # a sidecar naming players for other bytes than its file's counts for nothing
        forged = rewrite(
            tmp_path / "greyhold.zip",
            tmp_path / "forged.zip",
            drop="files/uploads/.Ledger",
        )
        with zipfile.ZipFile(forged, "a") as zf:
            zf.writestr(
                "files/uploads/.Ledger.pdf.liminalis.yaml",
                yaml.safe_dump({"sha256": "0" * 64, "visibility": ["players"]}),
            )
        report = await target.import_campaign(forged, "greyhold-forged")
        assert any("Ledger.pdf" in n and "GM-only" in n for n in report.notes), report.notes
        players = await target.retrieve(
            "greyhold-forged", "almanac tide ledger baron bells", Lens({"players"})
        )
        assert LEDGER not in " ".join(d.text for d in players.documents)
        assert ALMANAC in " ".join(d.text for d in players.documents)
        # a dot file that is no upload's sidecar is no part of a campaign export
        stray = rewrite(
            tmp_path / "greyhold.zip", tmp_path / "stray.zip", extra=["files/campaign/.env"]
        )
        with pytest.raises(InvalidInput) as err:
            await target.import_campaign(stray, "greyhold-stray")
        assert "unknown file" in err.value.user_message
    finally:
        await close_engine(target)
