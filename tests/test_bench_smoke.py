"""A tiny smoke of every bench entry point, so they never rot (quality lives in bench/, not here)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from liminalis.testing import HashEmbedder


@pytest.fixture
def tiny_set(tmp_path: Path) -> Path:
    root = tmp_path / "tinyset"
    (root / "corpus").mkdir(parents=True)
    docs = {
        "bells": "# The Bells\n\nNine bells hang in the abbey tower. The ninth rings at dusk.",
        "ferry": "# The Ferry\n\nThe ferryman crosses the river at dawn carrying salt and lanterns.",
        "fox": "# The Fox\n\nA red fox steals eggs from the miller's henhouse every spring night.",
    }
    for k, v in docs.items():
        (root / "corpus" / f"{k}.md").write_text(v)
    queries = [
        {
            "id": "q1",
            "query": "When does the ninth bell ring?",
            "relevant": ["bells"],
            "answers": ["dusk"],
            "answer_in_passage": True,
            "passages": ["The ninth rings at dusk."],
        },
        {
            "id": "q2",
            "query": "What does the ferryman carry?",
            "relevant": ["ferry"],
            "answers": [],
            "passages": ["The ferryman crosses the river at dawn carrying salt and lanterns."],
        },
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    return root


async def test_bench_retrieval_smoke(tiny_set, tmp_path, capsys):
    from bench.retrieval import LADDER, print_table, run

    res = await run(
        [tiny_set],
        LADDER,
        progress=False,
        embedder=HashEmbedder(),
        cache_dir=tmp_path / "cache",
        reranker_spec="none",
    )
    rows = res["tinyset"]
    # rerank rungs skipped (no cross-encoder); the learned rung runs on the shipped ranker
    assert set(rows) == {
        "bm25",
        "lexical",
        "dense",
        "dense+contextual",
        "hybrid",
        "hybrid+contextual",
        "learned",
    }
    assert rows["bm25"]["mrr"] == 1.0 and rows["bm25"]["detail_recall"] == 1.0
    assert rows["hybrid"]["tokens"] > 0 and rows["hybrid"]["p95_ms"] >= rows["hybrid"]["p50_ms"]
    print_table(res)
    out = capsys.readouterr()
    assert "recall@5" in out.out
    assert "hybrid+rerank: skipped" in out.err and "full: skipped" in out.err


async def test_bench_reads_a_new_set_with_the_quirks_a_new_set_may_have(tiny_set, tmp_path, capsys):
    """What the judges' unseen sets may hold: a byte-order mark, ``relevant`` as one string, a
    relevant id with no file, an empty query, a document named beyond ASCII, and a second set
    with the same folder name. Each is read or reported (counted as a miss), none crashes the
    run, and the two sets keep their own rows."""
    from bench.retrieval import run

    other = tmp_path / "other" / "tinyset"
    (other / "corpus").mkdir(parents=True)
    (other / "corpus" / "café.md").write_text(
        "# Le Café\n\nThe innkeeper of the café brews bitter coffee at noon."
    )
    (other / "corpus" / "mill.md").write_text("# The Mill\n\nThe miller grinds grain by the river.")
    lines = [
        {
            "id": "a",
            "query": "Who brews bitter coffee?",
            "relevant": "café",
            "answers": "noon",
            "answer_in_passage": True,
        },
        {"id": "b", "query": "", "relevant": ["mill"]},
        {"id": "c", "query": "Who grinds grain?", "relevant": ["mill", "no-such-doc"]},
    ]
    (other / "queries.jsonl").write_text(
        "\ufeff" + "\n".join(json.dumps(q, ensure_ascii=False) for q in lines), encoding="utf-8"
    )
    res = await run(
        [tiny_set, other],
        ["bm25", "learned"],
        progress=False,
        embedder=HashEmbedder(),
        cache_dir=tmp_path / "cache",
        reranker_spec="none",
    )
    assert set(res) == {"tinyset", "other/tinyset"}
    assert res["tinyset"]["bm25"]["mrr"] == 1.0
    new = res["other/tinyset"]
    for rung in ("bm25", "learned"):
        # a: found first; b: refused (a miss); c: mill first, the missing id costs recall
        assert abs(new[rung]["mrr"] - 2 / 3) < 1e-9 and abs(new[rung]["recall@5"] - 0.5) < 1e-9, (
            rung
        )
        assert new[rung]["detail_recall"] == 1.0
    err = capsys.readouterr().err
    assert "1 relevant ids name no file" in err and "refused by the engine" in err


async def test_bench_ingest_smoke(tiny_set):
    from bench.ingest import run

    r = await run(tiny_set, limit=None, windows=True, embedder=HashEmbedder())
    assert r["documents"] == 3 and r["passages"] == 3
    assert r["edit_passages_reembedded"] == 1


async def test_bench_sweep_smoke(tiny_set, tmp_path):
    from bench.sweep import sweep_set

    res = await sweep_set(tiny_set, HashEmbedder(), cache_dir=tmp_path / "cache")
    assert res["lexical"] and set(res["fusion"]) == {"plain", "contextual"}
    assert max(r["mrr"] for r in res["lexical"]) == 1.0


async def test_bench_rerank_sweep_smoke(tiny_set, tmp_path):
    from bench.rerank_sweep import collect, grid
    from liminalis.testing import KeywordReranker

    rows = await collect(
        tiny_set,
        KeywordReranker("ferryman"),
        embedder=HashEmbedder(),
        progress=False,
        cache_dir=tmp_path / "cache",
    )
    assert len(rows) == 2 and all(len(r["docs"]) == len(r["scores"]) for r in rows)
    g = {(r["depth"], r["mix"]): r for r in grid(rows)}
    assert g[(0, "none")]["mrr"] == 1.0  # the fused order, no reranker
    # the keyword reranker puts the ferry first for every query: the bells question loses its answer
    assert g[(40, "none")]["mrr"] < 1.0


async def test_bench_rerank_sweep_regrids_kept_rows(tiny_set, tmp_path, capsys):
    """--rows re-grids kept scores on the asked depths and mixes, with no reranker pass."""
    from bench.rerank_sweep import collect, main
    from liminalis.testing import KeywordReranker

    rows = await collect(
        tiny_set,
        KeywordReranker("ferryman"),
        embedder=HashEmbedder(),
        progress=False,
        cache_dir=tmp_path / "cache",
    )
    (tmp_path / "rows.json").write_text(json.dumps({"tinyset": rows}))
    assert (
        main(
            [
                "--rows",
                str(tmp_path / "rows.json"),
                "--depths",
                "1",
                "3",
                "--mixes",
                "none",
                "0.5",
                "--out",
                str(tmp_path / "grid.json"),
            ]
        )
        == 0
    )
    table = json.loads((tmp_path / "grid.json").read_text())["tinyset"]
    assert [(r["depth"], r["mix"]) for r in table] == [
        (0, "none"),
        (1, "none"),
        (1, 0.5),
        (3, "none"),
        (3, 0.5),
    ]
    by = {(r["depth"], r["mix"]): r["mrr"] for r in table}
    assert by[(1, "none")] == 1.0 and by[(3, "none")] < 1.0  # one candidate cannot be re-ordered
    with pytest.raises(SystemExit):
        main(["--rows", str(tmp_path / "rows.json"), "--depths", "41"])
    with pytest.raises(SystemExit):
        main(["--rows", str(tmp_path / "rows.json"), "--mixes", "lots"])
    capsys.readouterr()


async def test_bench_rerank_data_mines_the_products_pool(tiny_set, tmp_path):
    """Training rows name the evidence passage as positive; dev pools round-trip through the
    portable file and sweep offline against precomputed scores."""
    from bench.rerank_data import mine, read, write
    from bench.rerank_sweep import grid, offline_rows

    rows, passages = await mine(
        tiny_set, embedder=HashEmbedder(), train=True, progress=False, cache_dir=tmp_path / "cache"
    )
    assert len(rows) == 2
    for r in rows:
        assert (
            r["positive"] in passages and r["docs"][r["pool"].index(r["positive"])] in r["relevant"]
        )
        assert len(r["pool"]) == len(r["docs"]) == 3  # the whole (tiny) corpus is the pool
    bells = next(r for r in rows if r["relevant"] == ["bells"])
    assert "ninth rings at dusk" in passages[bells["positive"]]
    write(tmp_path / "pools" / "dev-tinyset.jsonl.gz", rows, passages)
    again, texts = read(tmp_path / "pools" / "dev-tinyset.jsonl.gz")
    assert again == rows and texts == passages
    # scores that put the relevant document last: the reranker's own order loses, fused keeps
    scores = {"tinyset": [[-1.0 if d in r["relevant"] else 1.0 for d in r["docs"]] for r in rows]}
    g = {
        (x["depth"], x["mix"]): x for x in grid(offline_rows(tmp_path / "pools", scores)["tinyset"])
    }
    assert g[(0, "none")]["mrr"] == 1.0 and g[(40, "none")]["mrr"] < 1.0
    # the mix adds the reranker to the product's prior: a confident learned score holds its order,
    # the log-rank prior alone (no learned scores) does not
    sure = [
        {**r, "learned": {d: (50.0 if d in r["relevant"] else 0.0) for d in r["docs"]}}
        for r in again
    ]
    write(tmp_path / "sure" / "dev-tinyset.jsonl.gz", sure, passages)
    g = {
        (x["depth"], x["mix"]): x for x in grid(offline_rows(tmp_path / "sure", scores)["tinyset"])
    }
    assert g[(40, 0.5)]["mrr"] == 1.0
    bare = [{**r, "learned": {}} for r in again]
    write(tmp_path / "bare" / "dev-tinyset.jsonl.gz", bare, passages)
    g = {
        (x["depth"], x["mix"]): x for x in grid(offline_rows(tmp_path / "bare", scores)["tinyset"])
    }
    assert g[(40, 0.5)]["mrr"] < 1.0


async def test_bench_load_smoke(tmp_path, capsys):
    """Questions in flight at once through BotService.handle: every one answered, the reranker
    in turn (none skipped), a stall measured; the table prints and bad levels are refused."""
    from fakes.tiny_campaign import make_tiny_campaign

    from bench.load import main, print_table, run
    from liminalis.testing import KeywordReranker

    root = make_tiny_campaign(tmp_path / "campaigns")
    r = await run(
        root,
        questions=6,
        concurrency=(2, 6),
        embedder=HashEmbedder(),
        reranker=KeywordReranker("baron"),
        idle_s=0,
        heavy_mb=(6,),
    )
    assert (
        r["campaign"] == "greyhold" and r["reranker"] == "keyword" and r["ingest"]["documents"] == 4
    )
    assert [(x["load"], x["concurrency"]) for x in r["runs"]] == [
        ("idle", 2),
        ("idle", 6),
        ("busy", 2),
        ("busy", 6),
    ]
    # Heavy input is refused: a message by its length, an upload past the cap by its size.
    assert [(h["input"], h["mb"], h["refused"]) for h in r["heavy"]] == [
        ("message", 6, True),
        ("upload", 6, True),
    ]
    for x in r["runs"]:
        assert x["questions"] == x["answered"] == 6 and x["errors"] == 0 and x["skipped_stage"] == 0
        assert x["p50_ms"] <= x["p95_ms"] <= x["p99_ms"]
        assert isinstance(x["max_stall_ms"], float)  # measured (its size is bench.load's to report)
    print_table(r)
    assert "skipped_stage" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(root), "--concurrency", "0"])
    with pytest.raises(SystemExit):
        main([str(root), "--concurrency", "many"])


async def test_bench_memory_smoke(tmp_path, capsys):
    from bench.common import load_set
    from bench.memory import CASES, MODES, build_cases, group_of, print_table, run, strip_names

    root = tmp_path / "tales"
    (root / "corpus").mkdir(parents=True)
    stories = {"fox": ("Reynard", "hen"), "bear": ("Bruin", "honey")}
    queries = []
    for story, (name, thing) in stories.items():
        for s in range(1, 5):
            (root / "corpus" / f"{story}-s0{s}.md").write_text(
                f"# The {story.title()} (section {s} of 4)\n\n{name} went to the {thing} farm on day {s}. "
                f"{name} met the miller there and spoke of the {thing} number {s}."
            )
            queries.append(
                {
                    "id": f"{story}{s}",
                    "query": f"What did {name} find on day {s}?",
                    "relevant": [f"{story}-s0{s}"],
                    "answers": [],
                }
            )
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    assert group_of("black-sheep-s05") == "black-sheep" and group_of("C1E001_03") == "C1E001"
    assert (
        strip_names("What did Reynard's friend tell Reynard?", {"Reynard"})
        == "What did their friend tell they?"
    )
    cases = build_cases(load_set(root))
    assert cases["follow-up"] and cases["switch"]
    res = await run(
        [root],
        MODES,
        embedder=HashEmbedder(),
        cache_dir=tmp_path / "cache",
        progress=False,
        ranker_spec="none",
        per_case=3,
    )
    for mode in MODES:
        assert set(CASES) <= set(res["tales"][mode])
        assert 0.0 <= res["tales"][mode]["follow-up"]["group_hit@10"] <= 1.0
    print_table(res)
    assert "group_hit@10" in capsys.readouterr().out


async def test_bench_summaries_smoke(tmp_path: Path):
    from bench.summaries import entity_recall, main, rouge_l

    root = tmp_path / "mini"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "w1.md").write_text(
        "# Window 1\n\nMATT: Scanlan walks into the Pig Pits. The dwarves laugh at him.\n\n"
        "SAM: Scanlan asks for a room. The innkeeper gives him the key.\n"
    )
    (root / "queries.jsonl").write_text(
        json.dumps(
            {"id": "q1", "query": "Scanlan asks for a room at the Pig Pits.", "relevant": ["w1"]}
        )
    )
    assert rouge_l("a b c d", "a b c d") == 1.0 and rouge_l("x", "a b") == 0.0
    assert entity_recall("Scanlan went to the pig pits", "Scanlan visits the Pig Pits.") == 1.0
    out = tmp_path / "out.json"
    await asyncio.to_thread(main, [str(root), "--out", str(out), "--offline-only"])
    res = json.loads(out.read_text())["mini"]
    assert res["offline"]["windows"] == 1 and 0 < res["offline"]["rougeL"] <= 1
    assert "skipped" in res["model"]


async def test_bench_ingest_formats_smoke():
    from bench.ingest_formats import run

    r = await run(31)
    assert r["pages"] == 31 and r["views"] == 2  # page 31 opens chapter 3, marked (GM)
    assert r["passages"] > 0 and r["pages_with_page_heading"] == r["passages"]


async def test_bench_summaries_scores_the_model_variant_through_the_messages_api(tmp_path: Path):
    """The model variant of ``bench.summaries`` through the real client against the local fake
    Messages API: JSON asked for, validated, scored like the offline summaries."""
    from fakes.anthropic_server import FakeAnthropic

    from bench.summaries import run
    from liminalis.adapters.anthropic import AnthropicModel

    root = tmp_path / "mini"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "w1.md").write_text(
        "# Window 1\n\nMATT: Scanlan walks into the Pig Pits. The dwarves laugh at him.\n\n"
        "SAM: Scanlan asks for a room. The innkeeper gives him the key.\n"
    )
    (root / "queries.jsonl").write_text(
        json.dumps(
            {"id": "q1", "query": "Scanlan asks for a room at the Pig Pits.", "relevant": ["w1"]}
        )
    )
    async with FakeAnthropic(
        reply='{"summary": "Scanlan asks for a room at the Pig Pits."}'
    ) as fake:
        model = AnthropicModel("test-key", base_url=fake.url)
        res = (await run([root], model=model, model_limit=1, progress=False))["mini"]
        assert len(fake.requests) == 1
    assert res["model"]["fallbacks"] == 0 and res["model"]["windows"] == 1
    assert res["model"]["rougeL"] == 1.0 and res["model"]["entity_recall"] == 1.0


def test_bench_scale_campaigns_nest_and_keep_secrets(tiny_set):
    """Each size is the first N documents of one list (so 1,000 ⊂ 5,000 ⊂ 10,000), cut at
    paragraph ends, taken round-robin over the sources, one in ten under ``gm/``."""
    from bench.scale import build_documents

    corpus = tiny_set / "corpus"
    (corpus / "saga.md").write_text(
        "# The Saga\n\n" + "\n\n".join(f"Paragraph {i} of the long saga." for i in range(40))
    )
    ten = build_documents([corpus], 10, doc_chars=60)
    assert build_documents([corpus], 4, doc_chars=60) == ten[:4]
    assert [rel.split("/")[0] for rel, _ in ten].count("gm") == 1 and ten[9][0].startswith("gm/")
    assert [rel for rel, _ in ten[:4]] == [
        "tinyset/tinyset-bells-1.md",
        "tinyset/tinyset-ferry-1.md",
        "tinyset/tinyset-fox-1.md",
        "tinyset/tinyset-saga-1.md",
    ]
    assert ten[4][1].startswith("# The Saga, part 2\n\nParagraph")
    with pytest.raises(SystemExit):
        build_documents([corpus], 1000, doc_chars=60)


@pytest.mark.slow
async def test_bench_scale_smoke(tiny_set, tmp_path):
    from bench.scale import run_one

    r = await run_one(
        3,
        corpora=[tiny_set / "corpus"],
        doc_chars=500,
        questions=2,
        root=tmp_path,
        fake_embedder=True,
    )
    assert r["ingest"]["documents"] == 3 and r["tick_unchanged"]["passages_changed"] == 0
    assert r["tick_one_edit"]["passages_added"] >= 1 and r["full"]["asked"] == 2


def test_bench_wall_smoke(tmp_path, capsys):
    """The wall bench end to end on a tiny corpus: a paragraph with a GM comment in it is a
    held paragraph (it is no longer whole in the players' view), the others are not."""
    from bench.wall import main

    corpus = tmp_path / "prose" / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "a.md").write_text(
        "# A\n\nThe ferryman waits.\n\nHe sings. <!-- GM: he is dead -->\n"
    )
    (corpus / "b.md").write_text("# B\n\nThe secret garden is open on Sundays.\n")
    out = tmp_path / "wall.json"
    res = main(["--corpus", str(corpus), "--out", str(out), "--examples", "2"])
    fh = res["false_holds"]["prose"]
    assert (fh["documents"], fh["paragraphs"], fh["held"]) == (2, 5, 1)
    assert fh["examples"] == [{"file": "a.md", "paragraph": "He sings. <!-- GM: he is dead -->"}]
    assert json.loads(out.read_text())["set"]["gm_marked"] >= 120
    printed = capsys.readouterr().out
    assert "recall" in printed and "false holds, prose: 1/5" in printed


def test_bench_answers_scores_tokens_as_squad_does():
    from bench.answers import containment, token_f1

    assert containment("the dusk", "It rings at Dusk.") == 1.0
    assert containment("salt and lanterns", "salt only") == 1 / 3
    assert token_f1("dusk", "dusk") == 1.0 and token_f1("dusk", "dawn") == 0.0
    assert round(token_f1("red fox", "a red fox steals eggs"), 3) == round(2 * 0.5 * 1 / 1.5, 3)


@pytest.mark.slow  # bench.answers ingests into Milvus Lite
def test_bench_answers_smoke(tiny_set, tmp_path, capsys):
    from bench.answers import main

    explain = tmp_path / "explain"
    res = main(
        [
            str(tiny_set),
            "--sweep",
            "--explain",
            str(explain),
            "--ranker",
            "none",
            "--reranker",
            "none",
            "--quiet",
        ],
        embedder=HashEmbedder(),
        cache_dir=tmp_path / "cache",
    )
    after = res["sets"]["tinyset"]["after"]
    assert res["sets"]["tinyset"]["queries"] == 2
    assert after["contains"] == 1.0 and after["cite_r"] == 1.0  # "dusk", quoted from The Bells
    assert {"grid", "thresholds", "chosen"} <= set(res["sweep"])
    assert "containment" in capsys.readouterr().out
