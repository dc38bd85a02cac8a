"""After an ingest that changed a campaign, its snapshot and the players' and GM's BM25 indexes
are rebuilt in the background, so the next question does not wait for them."""

from __future__ import annotations

from conftest import close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from liminalis import research

PLAYERS = frozenset({"players"})
GM = frozenset({"gm"})


async def test_an_edit_is_indexed_for_the_next_question_in_the_background(tmp_path):
    root = make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        await engine.prewarmed("greyhold")
        first = await research.catalog(engine, "greyhold")
        assert {PLAYERS, GM} <= set(first._lexical)
        players = set(first.lexical(PLAYERS).ids)
        assert players and not any("gm/plot" in e for e in players)  # the wall holds here too

        await engine.ingest("greyhold")  # nothing changed: nothing to rebuild
        assert await research.catalog(engine, "greyhold") is first

        (root / "baron.md").write_text(
            "# Baron Aldric\n\nThe baron breeds white ravens in the north tower.\n",
            encoding="utf-8",
        )
        await engine.ingest("greyhold")
        await engine.prewarmed("greyhold")
        cat = await research.catalog(engine, "greyhold")
        assert cat is not first and cat.generation > first.generation
        assert {PLAYERS, GM} <= set(cat._lexical)
        bundle = await engine.retrieve("greyhold", "who breeds white ravens?", PLAYERS)
        assert "white ravens" in bundle.documents[0].text
    finally:
        await close_engine(engine)
