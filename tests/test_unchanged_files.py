"""A tick over an unchanged campaign reads no file: each file's stat signature, the campaign's
configuration and the stored hashes say it would parse to what is stored. Anything else (an
edit, a new config, a store that lost rows, a file changed too recently to trust its times)
sends the file back to be read, and the GM wall holds throughout."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import harness
import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import CANARY, GM_TITLE, make_tiny_campaign

import liminalis.ingest.indexer as indexer_module
from liminalis.ingest.indexer import IngestOptions

PLAYERS = frozenset({"players"})


@pytest.fixture
def reads(monkeypatch):
    """The campaign-relative paths ingest read and parsed (the real loader, observed)."""
    seen: list[str] = []
    real = indexer_module.load_file

    def spy(fpath, rel, *args, **kwargs):
        seen.append(rel)
        return real(fpath, rel, *args, **kwargs)

    monkeypatch.setattr(indexer_module, "load_file", spy)
    return seen


async def _engine(tmp_path, *, racy_s: float = 0.0):
    return await make_engine(tmp_path, milvus=False, ingest_options=IngestOptions(racy_s=racy_s))


async def test_an_unchanged_campaign_is_not_read_again(tmp_path, reads):
    root = make_tiny_campaign(tmp_path / "campaigns")
    engine = await _engine(tmp_path)
    try:
        first = await engine.ingest("greyhold")
        assert sorted(reads) == sorted(
            ["baron.md", "gm/plot.md", "mirel.md", "sessions/session-01.md"]
        )
        again = await engine.ingest("greyhold")  # as the second tick would run it
        reads.clear()
        third = await engine.ingest("greyhold")
        assert reads == []
        assert (third.documents, third.passages_unchanged, third.hidden_sections) == (
            again.documents,
            again.passages_unchanged,
            again.hidden_sections,
        )
        assert third.documents == first.documents == 4
        assert third.passages_added == third.passages_removed == 0
        assert sorted((f.path, f.unchanged, f.visibility) for f in third.files) == sorted(
            (f.path, f.unchanged, f.visibility) for f in again.files
        )

        # One edit: only that file is read, and its new text answers.
        (root / "baron.md").write_text(
            "---\ntitle: Baron Aldric\n---\n# Baron Aldric\n\nThe baron breeds white ravens in "
            "the north tower and trades them for salt.\n",
            encoding="utf-8",
        )
        edited = await engine.ingest("greyhold")
        assert reads == ["baron.md"] and edited.passages_added >= 1
        bundle = await engine.retrieve("greyhold", "who breeds white ravens?", PLAYERS)
        assert bundle.documents[0].title == "Baron Aldric"
        assert "white ravens" in bundle.documents[0].text

        # A removed file still goes, though nothing else is read.
        reads.clear()
        os.remove(root / "sessions" / "session-01.md")
        gone = await engine.ingest("greyhold")
        assert reads == [] and gone.documents_removed == 1
        titles = [d.title for d in (await engine.retrieve("greyhold", "dusk", PLAYERS)).documents]
        assert "Session 1" not in titles
    finally:
        await close_engine(engine)


async def test_a_config_change_reads_every_file_and_the_wall_follows_it(tmp_path, reads):
    """Moving a folder under ``gm_paths`` changes no file, yet hides every file in it."""
    root = make_tiny_campaign(tmp_path / "campaigns")
    engine = await _engine(tmp_path)
    try:
        await engine.ingest("greyhold")
        await engine.ingest("greyhold")
        question = "when did the party reach Greyhold keep at dusk?"
        before = await engine.retrieve("greyhold", question, PLAYERS)
        assert "Session 1" in [d.title for d in before.documents]
        toml = root / "campaign.toml"
        toml.write_text(
            toml.read_text().replace('gm_paths = ["gm/**"]', 'gm_paths = ["gm/**", "sessions/**"]')
        )
        reads.clear()
        await engine.ingest("greyhold")
        assert len(reads) == 4  # every file, under the new configuration
        after = await engine.retrieve("greyhold", question, PLAYERS)
        assert all(
            d.title not in {"Session 1", GM_TITLE} and CANARY not in d.text for d in after.documents
        )
        gm = await engine.retrieve("greyhold", question, frozenset({"gm"}))
        assert "Session 1" in [d.title for d in gm.documents]
    finally:
        await close_engine(engine)


async def test_vectors_the_store_lost_are_refilled_though_no_file_changed(tmp_path, reads):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await _engine(tmp_path)
    try:
        await engine.ingest("greyhold")
        await engine.ingest("greyhold")
        store = engine.store
        rows = store.rows["greyhold"]
        lost = sorted(i for i in rows if i.startswith("p:baron"))
        assert lost
        await store.delete("greyhold", lost)
        reads.clear()
        report = await engine.ingest("greyhold")
        assert reads == ["baron.md"] and report.documents_repaired == 1
        assert set(lost) <= set(store.rows["greyhold"])
        # Orphans (a killed run's rows no passage refers to) go though no file changed.
        orphan = dataclasses.replace(rows[lost[0]], id="p:ghost#0000:0000000000", doc_id="ghost")
        await store.upsert("greyhold", [orphan])
        reads.clear()
        await engine.ingest("greyhold")
        assert reads == [] and orphan.id not in store.rows["greyhold"]
        await engine.ingest("greyhold")
        assert reads == []
    finally:
        await close_engine(engine)


async def test_a_file_changed_within_the_racy_window_is_read_every_time(tmp_path, reads):
    """File times come from a coarse clock: a file changed just now could change again within
    the same tick of it at the same size, so it is read until it is older than the window."""
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await _engine(tmp_path, racy_s=3600.0)
    try:
        await engine.ingest("greyhold")
        reads.clear()
        await engine.ingest("greyhold")
        assert len(reads) == 4
    finally:
        await close_engine(engine)


async def test_an_upload_sidecar_changed_alone_is_read_again(tmp_path):
    """A PDF's or Word file's sidecar says who may read it; a host may narrow or delete it
    without touching the file, and the wall must follow at the next tick."""
    import io

    import docx

    from liminalis.ingest.loaders import sidecar_of, write_sidecar

    make_tiny_campaign(tmp_path / "campaigns")
    doc = docx.Document()
    doc.add_paragraph("The vault password is zanzibar-quartz, hidden in the crypt.")
    buf = io.BytesIO()
    doc.save(buf)
    raw = buf.getvalue()
    upload = tmp_path / "uploads" / "greyhold" / "notes.docx"
    upload.parent.mkdir(parents=True)
    upload.write_bytes(raw)
    write_sidecar(upload, raw, visibility=frozenset({"players"}))
    engine = await _engine(tmp_path)
    question = "what is the vault password in the crypt?"

    async def players_read() -> bool:
        bundle = await engine.retrieve("greyhold", question, PLAYERS)
        return any("zanzibar" in d.text for d in bundle.documents)

    try:
        await engine.ingest("greyhold")
        await engine.ingest("greyhold")
        assert await players_read()
        write_sidecar(upload, raw, visibility=frozenset({"gm"}))
        await engine.ingest("greyhold")
        assert not await players_read()
        write_sidecar(upload, raw, visibility=frozenset({"players"}))
        await engine.ingest("greyhold")
        assert await players_read()
        sidecar_of(upload).unlink()  # an upload that says nothing is GM-only
        await engine.ingest("greyhold")
        assert not await players_read()
    finally:
        await close_engine(engine)


async def _restarted(tmp_path, store):
    """A new process over the same data directory and vector store."""
    return await make_engine(tmp_path, store=store, ingest_options=IngestOptions(racy_s=0.0))


async def test_a_restart_reads_only_what_changed_while_it_was_down(tmp_path, reads):
    """Each file's signature is kept in SQLite: a new process's first tick reads the files
    edited, added or moved while it was down, and no other."""
    from liminalis.testing import MemoryVectorStore

    root = make_tiny_campaign(tmp_path / "campaigns")
    store = MemoryVectorStore()
    engine = await _restarted(tmp_path, store)
    try:
        await engine.ingest("greyhold")
        before = await engine.ingest("greyhold")
    finally:
        await close_engine(engine)

    reads.clear()
    engine = await _restarted(tmp_path, store)
    try:
        after = await engine.ingest("greyhold")
        assert reads == []
        assert (after.documents, after.passages_unchanged, after.hidden_sections) == (
            before.documents,
            before.passages_unchanged,
            before.hidden_sections,
        )
        assert sorted((f.path, f.unchanged, f.visibility, f.type) for f in after.files) == sorted(
            (f.path, f.unchanged, f.visibility, f.type) for f in before.files
        )
    finally:
        await close_engine(engine)

    # While it is down: one file edited, one moved under the GM folder, one added.
    (root / "baron.md").write_text(
        "---\ntitle: Baron Aldric\n---\n# Baron Aldric\n\nThe baron breeds white ravens.\n",
        encoding="utf-8",
    )
    (root / "sessions" / "session-01.md").rename(root / "gm" / "session-01.md")
    (root / "harbour.md").write_text("# Harbour\n\nGulls over the grey harbour.\n")
    reads.clear()
    engine = await _restarted(tmp_path, store)
    try:
        report = await engine.ingest("greyhold")
        assert sorted(reads) == ["baron.md", "gm/session-01.md", "harbour.md"]
        assert report.documents_removed == 1
        bundle = await engine.retrieve("greyhold", "who breeds white ravens?", PLAYERS)
        assert "white ravens" in bundle.documents[0].text
        dusk = await engine.retrieve("greyhold", "the party reached the keep at dusk", PLAYERS)
        assert all(
            d.title not in {"Session 1", GM_TITLE} and CANARY not in d.text for d in dusk.documents
        )
    finally:
        await close_engine(engine)


async def test_an_upgrade_or_a_damaged_row_reads_the_file_again(tmp_path, reads, monkeypatch):
    """A row is trusted only under the reader that wrote it (this code's version and the
    campaign's configuration); one that does not decode sends its file back to be read."""
    from liminalis.testing import MemoryVectorStore

    make_tiny_campaign(tmp_path / "campaigns")
    store = MemoryVectorStore()
    engine = await _restarted(tmp_path, store)
    try:
        await engine.ingest("greyhold")
        async with harness.db(engine).write() as conn:
            await conn.execute(
                "UPDATE file_signatures SET views = 'not json' WHERE path = 'baron.md'"
            )
            await conn.execute("UPDATE file_signatures SET views = '[]' WHERE path = 'mirel.md'")
    finally:
        await close_engine(engine)
    reads.clear()
    engine = await _restarted(tmp_path, store)
    try:
        await engine.ingest("greyhold")
        assert sorted(reads) == ["baron.md", "mirel.md"]
    finally:
        await close_engine(engine)

    monkeypatch.setattr(indexer_module, "_code_version", lambda: "a later release")
    reads.clear()
    engine = await _restarted(tmp_path, store)
    try:
        await engine.ingest("greyhold")
        assert len(reads) == 4
    finally:
        await close_engine(engine)


async def test_a_config_changed_while_down_reads_every_file_and_the_wall_follows(tmp_path, reads):
    from liminalis.testing import MemoryVectorStore

    root = make_tiny_campaign(tmp_path / "campaigns")
    store = MemoryVectorStore()
    engine = await _restarted(tmp_path, store)
    try:
        await engine.ingest("greyhold")
    finally:
        await close_engine(engine)
    toml = root / "campaign.toml"
    toml.write_text(
        toml.read_text().replace('gm_paths = ["gm/**"]', 'gm_paths = ["gm/**", "sessions/**"]')
    )
    reads.clear()
    engine = await _restarted(tmp_path, store)
    try:
        await engine.ingest("greyhold")
        assert len(reads) == 4
        question = "when did the party reach Greyhold keep at dusk?"
        after = await engine.retrieve("greyhold", question, PLAYERS)
        assert all(
            d.title not in {"Session 1", GM_TITLE} and CANARY not in d.text for d in after.documents
        )
    finally:
        await close_engine(engine)


def test_the_reader_is_the_code_that_reads(tmp_path):
    """A deploy that changes any source of the package, or a parsing library, reads every file
    once: a fix to how hidden sections are read must reach files nobody edits."""
    from liminalis.ingest import sections

    pkg = tmp_path / "pkg"
    (pkg / "ingest").mkdir(parents=True)
    (pkg / "ingest" / "sections.py").write_text("HIDDEN = 'gm'\n")
    first = indexer_module.sources_digest(pkg, ["PyYAML"])
    assert indexer_module.sources_digest(pkg, ["PyYAML"]) == first
    (pkg / "ingest" / "sections.py").write_text("HIDDEN = 'secret'\n")
    assert indexer_module.sources_digest(pkg, ["PyYAML"]) != first
    assert indexer_module.sources_digest(pkg, ["PyYAML", "pypdf"]) != indexer_module.sources_digest(
        pkg, ["PyYAML"]
    )
    # The shipped reader is the whole package, the modules that read hidden sections included.
    root = Path(indexer_module.__file__).resolve().parent.parent
    assert Path(sections.__file__).resolve().is_relative_to(root)
    assert indexer_module._code_version() == indexer_module.sources_digest(
        root, indexer_module._READER_LIBRARIES
    )
