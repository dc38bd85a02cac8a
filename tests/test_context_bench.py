"""Smoke of ``python -m bench.context`` on a three-document folder (hash embedder, tmp cache)."""

from __future__ import annotations

import json

import pytest

from bench.context import main
from liminalis.testing import HashEmbedder

STORY = "The miller's daughter spun straw into gold for three nights in the king's tower. " * 3


@pytest.mark.slow  # bench.context ingests into Milvus Lite
def test_bench_context_smoke(tmp_path, capsys):
    root = tmp_path / "tiny"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "d1.md").write_text(
        "# The Miller\n\n"
        + "\n\n".join(
            [STORY] * 12
            + ["The little man's name was Rumpelstiltskin, and he stamped through the floor."]
            + [STORY] * 12
        )
    )
    (root / "corpus" / "d2.md").write_text(
        "# The Goose Girl\n\nThe goose girl combed her golden hair by the stream.\n"
    )
    (root / "corpus" / "d3.md").write_text(
        "# The Frog\n\nThe frog fetched the golden ball from the well.\n"
    )
    queries = [
        {
            "id": "q1",
            "query": "What was the little man's name?",
            "relevant": ["d1"],
            "answers": ["Rumpelstiltskin"],
            "answer_in_passage": True,
            "passages": ["The little man's name was Rumpelstiltskin"],
        },
        {
            "id": "q2",
            "query": "What did the frog fetch?",
            "relevant": ["d3"],
            "answers": ["the golden ball"],
            "answer_in_passage": True,
            "passages": ["The frog fetched the golden ball from the well."],
        },
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    out = tmp_path / "ctx.json"
    results = main(
        [str(root), "--out", str(out), "--quiet"],
        embedder=HashEmbedder(),
        cache_dir=tmp_path / "cache",
    )
    saved = json.loads(out.read_text())
    assert saved == results
    assert set(saved["tiny"]) == {"full", "tiered", "6k", "3k"}
    for row in saved["tiny"].values():
        assert {"tokens", "detail_recall", "recall@5", "mrr"} <= set(row)
        assert row["detail_recall"] == 1.0 and row["recall@5"] == 1.0 and row["tokens"] > 0
    assert "tiny" in capsys.readouterr().out
