"""Ingest against real SQLite and real Milvus Lite (hash embedder; the real model is in test_sample)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import harness
import numpy as np
import pytest
from conftest import ROOT, close_engine, make_engine

from liminalis.ingest.indexer import IngestOptions
from liminalis.lens import gm_lens, players_lens

pytestmark = pytest.mark.slow  # real models or Milvus Lite throughout


async def test_reingest_after_one_paragraph_edit_embeds_at_most_two(tmp_path, campaign_copy):
    engine = await make_engine(tmp_path)
    try:
        first = await engine.ingest("emberfall")
        # A file with hidden sections is stored as its views; a passage both views share is
        # embedded once.
        assert first.documents >= 25 and 0 < first.embedded <= first.passages_added
        assert first.hidden_sections >= 3
        again = await engine.ingest("emberfall")
        assert again.embedded == 0 and again.windows_embedded == 0 and again.passages_added == 0
        chapter = campaign_copy / "lore" / "the-long-winter-chronicle.md"
        text = chapter.read_text()
        paras = text.split("\n\n")
        mid = len(paras) // 2
        paras[mid] += " The wind turned cold again that night, and nobody slept."
        chapter.write_text("\n\n".join(paras))
        edited = await engine.ingest("emberfall")
        assert 1 <= edited.embedded <= 2
        assert edited.passages_added == edited.embedded
        assert edited.passages_removed <= 2
        hits = await engine.retrieve("emberfall", "wind turned cold nobody slept", players_lens())
        assert any("nobody slept" in d.text for d in hits.documents)
    finally:
        await close_engine(engine)


async def test_deleting_a_file_removes_its_passages(tmp_path, campaign_copy):
    engine = await make_engine(tmp_path)
    try:
        await engine.ingest("emberfall")
        doc = "places/the-copper-kettle"
        assert await harness.db(engine).documents.passages("emberfall", doc)
        (campaign_copy / f"{doc}.md").unlink()
        report = await engine.ingest("emberfall")
        assert report.documents_removed == 1 and report.passages_removed >= 1
        assert not await harness.db(engine).documents.passages("emberfall", doc)
        vec_ids = await engine.store.ids("emberfall")
        assert not [i for i in vec_ids if doc in i]
        b = await engine.retrieve("emberfall", "Copper Kettle tavern", gm_lens())
        assert doc not in b.ranked_doc_ids
    finally:
        await close_engine(engine)


async def test_bad_files_are_reported_and_skipped(tmp_path, campaign_copy):
    bad = campaign_copy / "bad"
    bad.mkdir()
    (bad / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR")
    (bad / "latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (bad / "empty.md").write_text("   \n")
    (bad / "frontonly.md").write_text("---\ntitle: Nothing\n---\n")
    (bad / "broken-front.md").write_text("---\ntitle: [unclosed\n---\nBody text.")
    (bad / "image.png").write_bytes(b"\x89PNG")
    (bad / "huge.md").write_text("word " * 300_000)
    from liminalis.ingest.indexer import IngestOptions

    engine = await make_engine(tmp_path, ingest_options=IngestOptions(max_bytes=1_000_000))
    try:
        report = await engine.ingest("emberfall")
        reasons = {s.path: s.reason for s in report.skipped}
        assert "binary" in reasons["bad/binary.md"]
        assert "bad/latin1.md" not in reasons  # a Windows code page is read, accents right
        latin = await harness.db(engine).documents.get("emberfall", "bad/latin1")
        assert latin is not None and latin.text == "café au lait"
        assert "empty" in reasons["bad/empty.md"]
        assert "empty" in reasons["bad/frontonly.md"]
        assert "front matter" in reasons["bad/broken-front.md"]
        assert "unsupported" in reasons["bad/image.png"]
        assert "too large" in reasons["bad/huge.md"]
        assert report.documents >= 25  # the rest completed
        # a later broken edit of a good file keeps the previous version searchable
        kettle = campaign_copy / "places" / "the-copper-kettle.md"
        kettle.write_bytes(b"\xff\xfe broken")
        report2 = await engine.ingest("emberfall")
        (kept,) = [s.reason for s in report2.skipped if s.path == "places/the-copper-kettle.md"]
        assert kept.endswith("its previous version stays searchable")
        assert not reasons["bad/empty.md"].endswith("searchable")  # a file never ingested has none
        assert await harness.db(engine).documents.passages("emberfall", "places/the-copper-kettle")
    finally:
        await close_engine(engine)


async def test_ingest_of_a_path_outside_the_campaign_is_refused(tmp_path, campaign_copy):
    engine = await make_engine(tmp_path)
    try:
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (outside / "x.md").write_text("Some text here.")
        report = await engine.ingest("emberfall", outside)
        assert report.documents == 0 and report.skipped
        assert "outside" in report.skipped[0].reason
    finally:
        await close_engine(engine)


async def test_campaign_isolation(tmp_path):
    campaigns = tmp_path / "campaigns"
    for slug in ("alpha", "beta"):
        (campaigns / slug).mkdir(parents=True)
        (campaigns / slug / "campaign.toml").write_text(f'name = "{slug}"\n')
    (campaigns / "alpha" / "bell.md").write_text(
        "The silver bell hangs in the north tower of Alpha keep."
    )
    (campaigns / "beta" / "bell.md").write_text(
        "The silver bell hangs in the north tower of Alpha keep."
    )
    (campaigns / "beta" / "only-beta.md").write_text("The copper gong of Beta sounds at dusk.")
    engine = await make_engine(tmp_path)
    try:
        await engine.ingest("alpha")
        await engine.ingest("beta")
        a = await engine.retrieve("alpha", "copper gong dusk", gm_lens())
        assert "only-beta" not in a.ranked_doc_ids
        assert set(a.ranked_doc_ids) <= {"bell"}
        b = await engine.retrieve("beta", "silver bell north tower", gm_lens())
        assert set(b.ranked_doc_ids) <= {"bell", "only-beta"}
        rows = await harness.rows(
            engine, "SELECT DISTINCT campaign FROM passages WHERE doc_id = 'only-beta'"
        )
        assert [r["campaign"] for r in rows] == ["beta"]
        assert not [i for i in await engine.store.ids("alpha") if "only-beta" in i]
    finally:
        await close_engine(engine)


KILL_SCRIPT = r"""
import asyncio, sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from pathlib import Path
from conftest import make_engine
from liminalis.testing import HashEmbedder

class SlowEmbedder(HashEmbedder):
    async def embed_passages(self, texts):
        print("EMBEDDING", flush=True)
        await asyncio.sleep(0.5)
        return await super().embed_passages(texts)

async def main():
    engine = await make_engine(Path({tmp!r}), embedder=SlowEmbedder())
    await engine.ingest("emberfall")
    print("DONE", flush=True)

asyncio.run(main())
"""


async def test_sigkill_mid_ingest_leaves_previous_state_and_rerun_completes(
    tmp_path, campaign_copy
):
    engine = await make_engine(tmp_path)
    await engine.ingest("emberfall")
    before = await harness.db(engine).documents.passage_ids("emberfall")
    await close_engine(engine)
    from liminalis.adapters.milvus import MilvusVectorStore  # noqa: F401  (lock released by process exit below)

    # Edit many files, then kill a second process in the middle of re-ingesting them.
    for f in sorted((campaign_copy / "sessions").glob("*.md")):
        f.write_text(f.read_text() + "\n\nA brand new closing line about lanterns and rain.\n")
    # Milvus Lite holds a per-process lock on its path; free it by running the first ingest in
    # this process only through a subprocess from here on.
    from pymilvus.milvus_client import milvus_client  # noqa: F401

    try:
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(str(tmp_path / "milvus.db"))
    except Exception:
        pass
    script = KILL_SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"), tmp=str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, cwd=tmp_path
    )
    assert proc.stdout is not None
    deadline = time.time() + 120
    seen = 0
    while time.time() < deadline:
        line = proc.stdout.readline().decode()
        if "EMBEDDING" in line:
            seen += 1
            if seen == 1:
                time.sleep(0.2)
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    engine = await make_engine(tmp_path)
    try:
        assert (
            await harness.db(engine).documents.passage_ids("emberfall") == before
        )  # previous state, intact
        b = await engine.retrieve("emberfall", "Salt Stairs steps", players_lens())
        assert b.ranked_doc_ids
        report = await engine.ingest("emberfall")
        assert report.passages_added >= 1
        after = await harness.db(engine).documents.passage_ids("emberfall")
        vec_passages = {
            i.split(":", 1)[1].rsplit(":", 1)[0].split("@")[0]
            for i in await engine.store.ids("emberfall")
            if not i.startswith("t:")
        }
        assert vec_passages == after  # no orphans left behind
        b = await engine.retrieve(
            "emberfall", "brand new closing line lanterns rain", players_lens()
        )
        assert any("brand new closing line" in d.text for d in b.documents)
    finally:
        await close_engine(engine)


async def test_an_emptied_vector_store_is_rebuilt_on_next_ingest(tmp_path, campaign_copy):
    engine = await make_engine(tmp_path)
    try:
        await engine.ingest("emberfall")
        before = await engine.store.ids("emberfall")
        await engine.store.delete("emberfall", sorted(before))
        await engine.store.flush("emberfall")
        report = await engine.ingest("emberfall")
        assert report.embedded == 0  # vectors come back from the embedding cache
        assert await engine.store.ids("emberfall") == before
    finally:
        await close_engine(engine)


async def test_retitling_a_document_replaces_its_vectors(tmp_path, campaign_copy):
    engine = await make_engine(tmp_path)
    try:
        await engine.ingest("emberfall")
        kettle = campaign_copy / "places" / "the-copper-kettle.md"
        before = {i for i in await engine.store.ids("emberfall") if "places/the-copper-kettle" in i}
        kettle.write_text(
            kettle.read_text().replace("title: The Copper Kettle", "title: The Tin Kettle", 1)
        )
        await engine.ingest("emberfall")
        after = {i for i in await engine.store.ids("emberfall") if "places/the-copper-kettle" in i}
        assert before and after and len(after) == len(before)
        assert before != after
    finally:
        await close_engine(engine)


async def test_changing_what_is_embedded_reindexes_without_re_embedding(tmp_path, campaign_copy):
    from dataclasses import replace

    engine = await make_engine(tmp_path, ingest_options=IngestOptions(windows=True))
    try:
        first = await engine.ingest("emberfall")
        assert first.windows_embedded > 0
        assert any(i.startswith("w:") for i in await engine.store.ids("emberfall"))
        harness.indexer(engine).options = replace(harness.indexer(engine).options, windows=False)
        # Blue/green: the old generation goes on serving while the next one is built.
        assert await engine.is_indexed("emberfall")
        embedded = engine.embedder.calls if hasattr(engine.embedder, "calls") else None
        report = await engine.upgrade_index("emberfall")
        assert report is not None and report.published and not report.failed
        if embedded is not None:  # passages come back from the embedding cache
            assert engine.embedder.calls == embedded
        # what questions are served from now: the new generation's collection
        ids = await harness.retriever(engine).store.ids("emberfall")
        assert ids and not any(i.startswith("w:") for i in ids)
        assert await engine.is_indexed("emberfall")
        assert await engine.upgrade_index("emberfall") is None  # up to date
    finally:
        await close_engine(engine)


async def test_a_changed_tokenizer_retokenizes_the_stored_bm25_tokens(tmp_path, campaign_copy):
    """Stored tokens made by another tokenizer would never match the new query tokens: the
    tokenizer is part of the index profile, and a profile change rebuilds the tokens."""
    from liminalis.text import Tokenizer

    engine = await make_engine(tmp_path)
    try:
        await engine.ingest("emberfall")
        stemmed = {
            r["tokens"]
            for r in await harness.rows(
                engine, "SELECT tokens FROM passages WHERE campaign = ?", ("emberfall",)
            )
        }
        assert any("carri" in t.split() for t in stemmed)  # "carries" stemmed
        harness.indexer(engine).tokenizer = Tokenizer(stem=False)
        assert not await engine.is_indexed("emberfall")
        report = await engine.ingest("emberfall")
        assert report.embedded == 0  # no model work: vectors come from the cache
        plain = {
            r["tokens"]
            for r in await harness.rows(
                engine, "SELECT tokens FROM passages WHERE campaign = ?", ("emberfall",)
            )
        }
        assert not any("carri" in t.split() for t in plain) and any(
            "carries" in t.split() for t in plain
        )
        assert await engine.is_indexed("emberfall")
    finally:
        await close_engine(engine)


def test_editing_a_summary_or_tags_changes_the_content_hash(tmp_path):
    """The summary feeds the contextual embeddings: an edit to it alone must re-embed."""
    from liminalis.campaign import load_campaign
    from liminalis.ingest.loaders import parse_document

    (tmp_path / "campaign.toml").write_text('name = "T"\n')
    cfg = load_campaign(tmp_path)

    def digest(front: str) -> str:
        return parse_document(
            f"---\ntitle: Bell\n{front}---\nThe bell rang.\n".encode(), "bell.md", cfg
        ).content_hash

    plain = digest("")
    assert (
        len(
            {
                plain,
                digest("summary: A bell.\n"),
                digest("summary: A cracked bell.\n"),
                digest("tags: [ice]\n"),
                digest("tags: [fire]\n"),
            }
        )
        == 5
    )
    assert digest("") == plain


def test_front_matter_of_a_file_saved_on_windows_is_read(tmp_path):
    """CRLF (or old-Mac CR) line endings: the front matter still holds, visibility included."""
    from liminalis.campaign import load_campaign
    from liminalis.ingest.loaders import parse_document

    (tmp_path / "campaign.toml").write_text('name = "T"\n')
    cfg = load_campaign(tmp_path)
    for eol in ("\r\n", "\r"):
        raw = eol.join(
            ["---", "title: Plot", "visibility: gm", "---", "The baron is the cult leader.", ""]
        ).encode()
        doc = parse_document(raw, "lore/plot.md", cfg)
        assert doc.visibility == frozenset({"gm"}) and doc.title == "Plot", eol
        assert "visibility" not in doc.text and doc.text.startswith("The baron")


async def test_a_revealed_document_is_found_by_the_dense_arm_too(tmp_path):
    """A GM opens a document to players without touching its text: the vector rows (same ids)
    are rewritten with the new visibility, or the store would go on hiding them from players."""
    import numpy as np
    from fakes.tiny_campaign import make_tiny_campaign

    root = make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path)  # Milvus Lite
    try:
        await engine.ingest("greyhold")

        async def players_docs() -> set[str]:
            hits = await engine.store.search(
                "greyhold",
                np.ones(engine.embedder.dim, dtype=np.float32),
                lens=players_lens(),
                top_k=1000,
            )
            return {h.doc_id for h in hits}

        assert "mirel" not in await players_docs()
        mirel = root / "mirel.md"
        mirel.write_text(mirel.read_text().replace("visibility: [mirel]", "visibility: players"))
        await engine.ingest("greyhold")
        assert "mirel" in await players_docs()
    finally:
        await close_engine(engine)


async def test_odd_file_names_keep_their_vectors_and_one_id_is_one_file(tmp_path, caplog):
    """Document ids holding '@', '#', ':', quotes, a backslash, '%' or accents keep their vectors
    when a neighbour is re-indexed, are found by every search, and lose theirs when retitled;
    a.md beside a.txt is one id: the second is reported, not ingested over the first; a symlink
    to lore outside the campaign is ingested in its place, not a failed ingest."""
    from liminalis.ingest.indexer import vector_doc

    root = tmp_path / "campaigns" / "odd"
    root.mkdir(parents=True)
    (root / "campaign.toml").write_text('name = "Odd"\n')
    names = [
        "contact@guild",
        "npc",
        "npc#2",
        "Act 1",
        "Act 1: Prologue",
        'the "bell"',
        "back\\slash",
        "Vex'ahlia",
        "100%22",
        "café",
    ]
    for n in names:
        (root / f"{n}.md").write_text(f"# {n}\n\nThe {n} document speaks of bells and rivers.\n")
    (root / "npc.txt").write_text("A text file with the same id as npc.md.\n")
    shared = tmp_path / "shared-lore.md"
    shared.write_text("# Shared\n\nLore shared by two campaigns.\n")
    (root / "linked.md").symlink_to(shared)
    engine = await make_engine(tmp_path)
    try:
        report = await engine.ingest("odd")
        assert report.documents == 11
        assert [(s.path, "same name as npc.md" in s.reason) for s in report.skipped] == [
            ("npc.txt", True)
        ]

        async def owners() -> dict[str, int]:
            out: dict[str, int] = {}
            for vid in await engine.store.ids("odd"):
                out[vector_doc(vid)] = out.get(vector_doc(vid), 0) + 1
            return out

        before = await owners()
        assert set(before) == {*names, "linked"}
        with caplog.at_level("WARNING"):
            for n in names:  # the ranker's exact search names each candidate document
                bundle = await engine.retrieve("odd", f"the {n} document", frozenset({"players"}))
                assert n in {d.doc_id for d in bundle.documents}, n
        assert not [r for r in caplog.records if "failed" in r.getMessage()]
        retitled = ("npc", "Act 1", 'the "bell"', "back\\slash", "Vex'ahlia")
        for n in retitled:  # their own vectors are replaced, nobody else's
            (root / f"{n}.md").write_text(
                f"---\ntitle: {n} renamed\n---\n# {n}\n\nThe {n} document speaks of bells.\n"
            )
        again = await engine.ingest("odd")
        assert not [s for s in again.skipped if s.path != "npc.txt"]
        after = await owners()
        assert {n: after[n] for n in names if n not in retitled} == {
            n: before[n] for n in names if n not in retitled
        }
        assert all(after[n] == before[n] for n in retitled)  # the old rows went, the new came
    finally:
        await close_engine(engine)


async def test_a_quoted_document_indexed_by_an_older_version_is_re_embedded_under_escaped_ids(
    tmp_path, caplog
):
    """An older version stored 'the "bell"'s vectors under raw ids, which Milvus's iterator cannot
    page past: every exact search naming the document failed. The upgrade re-embeds that document
    once (its hash carries the id scheme), drops the raw rows, and leaves every other id as it was."""
    from liminalis.ingest.indexer import vector_doc
    from liminalis.ports import VectorRecord

    root = tmp_path / "campaigns" / "q"
    root.mkdir(parents=True)
    (root / "campaign.toml").write_text('name = "Q"\n')
    (root / 'the "bell".md').write_text(
        "# The Bell\n\nThe bell of the drowned abbey rings at dusk.\n"
    )
    (root / "50% off.md").write_text("# Market\n\nThe market sells lanterns at half price.\n")
    engine = await make_engine(tmp_path)
    try:
        await engine.ingest("q")
        plain_before = {v for v in await engine.store.ids("q") if vector_doc(v) == "50% off"}
        legacy = [
            VectorRecord(
                f'p:the "bell"#{n:020x}:0123456789',
                f'the "bell"#{n:020x}',
                'the "bell"',
                "passage",
                frozenset({"players", "gm"}),
                np.ones(engine.embedder.dim, dtype=np.float32),
            )
            for n in range(2)
        ]
        await engine.store.upsert("q", legacy)
        # The hash an older version stored: the same file's, without the id scheme in it.
        from liminalis.ingest.loaders import parse_document

        cfg = await engine.campaign("q")
        raw = (root / 'the "bell".md').read_bytes()
        old_hash = parse_document(raw, "bell.md", cfg).content_hash
        assert old_hash != parse_document(raw, 'the "bell".md', cfg).content_hash
        await harness.db(engine).execute(
            "UPDATE documents SET content_hash = ? WHERE doc_id = ?", (old_hash, 'the "bell"')
        )
        await engine.ingest("q")
        ids = await engine.store.ids("q")
        assert not any(r.id in ids for r in legacy)
        assert {v for v in ids if vector_doc(v) == 'the "bell"'} and all(
            v[0].isupper() for v in ids if vector_doc(v) == 'the "bell"'
        )
        assert {v for v in ids if vector_doc(v) == "50% off"} == plain_before
        with caplog.at_level("WARNING"):
            bundle = await engine.retrieve(
                "q", "the bell of the drowned abbey", frozenset({"players"})
            )
        assert bundle.documents[0].doc_id == 'the "bell"'
        assert not [r for r in caplog.records if "failed" in r.getMessage()]
    finally:
        await close_engine(engine)
