"""The training command runs end to end on a tiny slice, and its output loads through the port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from liminalis.adapters.cross_encoder import CrossEncoderReranker

pytestmark = pytest.mark.slow  # real models or Milvus Lite throughout


def make_train_dir(root: Path) -> Path:
    (root / "corpus").mkdir(parents=True)
    stories = {
        "bell-s01": "# Bell (section 1)\n\nThe smith cast a great bell of bronze for the abbey. It rang at dusk every day.",
        "bell-s02": "# Bell (section 2)\n\nOne winter the river froze and the bell fell through the ice and was lost.",
        "fox-s01": "# Fox (section 1)\n\nA red fox stole eggs from the miller every spring night until the dog caught him.",
        "ferry-s01": "# Ferry (section 1)\n\nThe ferryman crossed the river at dawn with salt, lanterns and a grey cat.",
    }
    for k, v in stories.items():
        (root / "corpus" / f"{k}.md").write_text(v)
    qs = [
        (
            "What did the smith cast?",
            "bell-s01",
            "The smith cast a great bell of bronze for the abbey.",
        ),
        (
            "What happened when the river froze?",
            "bell-s02",
            "the bell fell through the ice and was lost",
        ),
        ("What did the fox steal?", "fox-s01", "A red fox stole eggs from the miller"),
        ("Who caught the fox?", "fox-s01", "until the dog caught him"),
        (
            "What did the ferryman carry?",
            "ferry-s01",
            "The ferryman crossed the river at dawn with salt, lanterns",
        ),
        ("When did the bell ring?", "bell-s01", "It rang at dusk every day."),
        # a CRD3-style query longer than --max-length on its own
        (
            " ".join(["The party argued about the bell and the river and the ferryman."] * 12),
            "bell-s02",
            "the bell fell through the ice and was lost",
        ),
    ]
    (root / "queries.jsonl").write_text(
        "\n".join(
            json.dumps({"id": f"q{i}", "query": q, "relevant": [d], "answers": [], "passages": [p]})
            for i, (q, d, p) in enumerate(qs)
        )
    )
    return root


async def test_train_command_end_to_end_on_a_tiny_slice(tmp_path):
    from bench.train_reranker import main

    data = make_train_dir(tmp_path / "train")
    out = tmp_path / "model"
    rc = main(
        [
            "--train",
            str(data),
            "--out",
            str(out),
            "--max-queries",
            "7",
            "--layers",
            "1",
            "--max-length",
            "64",
            "--batch",
            "2",
            "--negatives",
            "1",
            "--eval-every",
            "0",
            "--quiet",
            "--lr",
            "1e-4",
            "--epochs",
            "2",
        ]
    )
    assert rc == 0
    for f in ("config.json", "README.md", "training.json"):
        assert (out / f).exists(), f
    card = (out / "README.md").read_text()
    assert "CC BY-SA 4.0" in card and "--max-queries" in card
    report = json.loads((out / "training.json").read_text())
    assert report["train_examples"] + report["val_examples"] >= 4
    ce = CrossEncoderReranker(str(out))
    assert ce._max_length == 64  # scores at the length it was trained at (training.json)
    scores = await ce.score("What did the fox steal?", ["A red fox stole eggs.", "The bell rang."])
    assert len(scores) == 2
    long_query = " ".join(["Which bell fell through the river ice that winter?"] * 20)
    assert len(await ce.score(long_query, ["The bell fell through the ice."])) == 1
    # shipped weights are fp16 (half the repo size) and load back as fp32 with the same scores
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {str(f.get_tensor(k).dtype) for k in f.keys()} == {"torch.float16"}
    full = tmp_path / "fp32"
    assert (
        main(
            [
                "--train",
                str(data),
                "--out",
                str(full),
                "--max-queries",
                "7",
                "--layers",
                "1",
                "--max-length",
                "64",
                "--batch",
                "2",
                "--negatives",
                "1",
                "--eval-every",
                "0",
                "--quiet",
                "--lr",
                "1e-4",
                "--epochs",
                "2",
                "--fp32",
            ]
        )
        == 0
    )
    ref = await CrossEncoderReranker(str(full), max_length=64).score(
        "What did the fox steal?", ["A red fox stole eggs.", "The bell rang."]
    )
    assert scores == __import__("pytest").approx(
        ref, abs=2e-2
    )  # same seed, same model, half precision


async def test_train_from_mined_pools_with_a_teacher_and_score_dev_pools(tmp_path):
    """The GPU path (``--examples`` from bench.rerank_data, distillation, ``--score``) on CPU."""
    from bench.rerank_data import write
    from bench.train_reranker import main

    texts = {
        "s/bell1": "The smith cast a great bell of bronze for the abbey.",
        "s/bell2": "The bell fell through the ice.",
        "s/fox1": "A red fox stole eggs from the miller.",
        "s/ferry1": "The ferryman crossed the river with salt.",
        "s/cat1": "A grey cat slept by the mill wheel.",
        "s/oak1": "An old oak stood on the hill by the abbey.",
    }
    docs = {k: k.split("/")[1].rstrip("0123456789") for k in texts}
    qs = [
        ("What did the smith cast?", "s/bell1"),
        ("What did the fox steal?", "s/fox1"),
        ("Who crossed the river?", "s/ferry1"),
        ("Where did the cat sleep?", "s/cat1"),
        ("What stood on the hill?", "s/oak1"),
        ("What fell through the ice?", "s/bell2"),
    ]
    rows = [
        {
            "id": f"q{i}",
            "query": q,
            "relevant": [docs[pos]],
            "pool": list(texts),
            "docs": [docs[k] for k in texts],
            "positive": pos,
            "group": f"g{i}",
        }
        for i, (q, pos) in enumerate(qs)
    ]
    write(tmp_path / "pools" / "train.jsonl.gz", rows, texts)
    write(
        tmp_path / "pools" / "dev-tiny.jsonl.gz",
        [{k: v for k, v in r.items() if k not in {"positive", "group"}} for r in rows],
        texts,
    )
    common = [
        "--examples",
        str(tmp_path / "pools" / "train.jsonl.gz"),
        "--max-queries",
        "0",
        "--layers",
        "1",
        "--max-length",
        "48",
        "--batch",
        "2",
        "--negatives",
        "3",
        "--eval-every",
        "0",
        "--quiet",
        "--epochs",
        "1",
        "--device",
        "cpu",
    ]
    assert main([*common, "--out", str(tmp_path / "teacher")]) == 0
    assert (
        main(
            [
                *common,
                "--out",
                str(tmp_path / "student"),
                "--teacher",
                str(tmp_path / "teacher"),
                "--score",
                str(tmp_path / "pools" / "dev-tiny.jsonl.gz"),
            ]
        )
        == 0
    )
    report = json.loads((tmp_path / "student" / "training.json").read_text())
    assert report["train_examples"] + report["val_examples"] == len(qs)
    assert report["args"]["teacher"].endswith("teacher")
    scores = json.loads((tmp_path / "student" / "dev-scores.json").read_text())
    assert list(scores) == ["tiny"] and [len(s) for s in scores["tiny"]] == [len(texts)] * len(qs)
    # the word embeddings stayed frozen: identical to the base model's
    from safetensors import safe_open

    from liminalis.adapters.sentence_transformers import resolve_model_path

    key = "embeddings.word_embeddings.weight"
    with (
        safe_open(str(tmp_path / "student" / "model.safetensors"), "pt") as f,
        safe_open(
            str(Path(resolve_model_path("bundled:all-MiniLM-L6-v2")) / "model.safetensors"), "pt"
        ) as g,
    ):
        assert (
            f.get_tensor(key).float() - g.get_tensor(key).half().float()
        ).abs().max().item() == 0.0
    ce = CrossEncoderReranker(str(tmp_path / "student"))
    assert len(await ce.score("What did the fox steal?", list(texts.values()))) == len(texts)


def test_sibling_negatives_are_the_nearest_sections_of_the_positive_story(tmp_path):
    """``--sibling-negatives``: the positive's own story's sections from its pool, adjacent first,
    then uniform draws from the rest of the pool; other stories' sections are never siblings."""
    import random

    from bench.rerank_data import write
    from bench.train_reranker import draw_negatives, load_examples

    texts = {f"s/fox-s0{i}#h{i}": f"fox section {i}" for i in range(1, 6)}
    texts |= {"s/bear-s02#b": "bear section 2", "s/bear-s03#c": "bear section 3"}
    docs = [k.split("/")[1].split("#")[0] for k in texts]
    row = {
        "id": "q",
        "query": "What did the fox find?",
        "relevant": ["fox-s03"],
        "pool": list(texts),
        "docs": docs,
        "positive": "s/fox-s03#h3",
        "group": "s/fox",
    }
    write(tmp_path / "train.jsonl.gz", [row], texts)
    (e,) = load_examples(tmp_path / "train.jsonl.gz", max_queries=None, seed=1)
    assert e.siblings[:2] == ["fox section 2", "fox section 4"] or e.siblings[:2] == [
        "fox section 4",
        "fox section 2",
    ]
    assert set(e.siblings) == {"fox section 1", "fox section 2", "fox section 4", "fox section 5"}
    assert "fox section 3" not in e.negatives  # the positive's document is never a negative
    rng = random.Random(0)
    drawn = draw_negatives(e, 4, 2, rng)
    assert set(drawn[:2]) == {"fox section 2", "fox section 4"} and len(set(drawn)) == 4
    assert all(len(draw_negatives(e, 4, 0, rng)) == 4 for _ in range(5))
    assert len(draw_negatives(e, 9, 1, rng)) == 9  # a short pool repeats its own


def test_device_kit_round_trip(tmp_path, monkeypatch):
    """bench/device/kit.py: compact pools and word embeddings travel, a continuation of the
    shipped reranker trains from them with only torch/transformers, and the packed result comes
    back as a model the product loads with the wheel's exact word embeddings."""
    import asyncio
    import importlib.util

    from bench.rerank_data import read, write
    from bench.train_reranker import main

    spec = importlib.util.spec_from_file_location("kit", ROOT / "bench" / "device" / "kit.py")
    kit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kit)

    texts = {
        f"t/fox-s0{i}#h": f"The fox ran to the mill in part {i} of the tale." for i in range(1, 5)
    }
    texts |= {
        "t/bell-s01#b": "The smith cast a great bell of bronze.",
        "t/oak-s01#o": "An old oak stood on the hill.",
    }
    docs = [k.split("/")[1].split("#")[0] for k in texts]
    rows = [
        {
            "id": f"q{i}",
            "query": f"Where did the fox run in part {i}?",
            "relevant": [f"fox-s0{i}"],
            "pool": list(texts),
            "docs": docs,
            "positive": f"t/fox-s0{i}#h",
            "group": f"t/g{i}",
            "learned": {d: 0.0 for d in docs},
        }
        for i in range(1, 5)
    ]
    write(tmp_path / "rd" / "train.jsonl.gz", rows, texts)
    write(
        tmp_path / "rd" / "dev-tiny.jsonl.gz",
        [{k: v for k, v in r.items() if k not in {"positive", "group"}} for r in rows],
        texts,
    )
    kit.data(tmp_path / "rd", tmp_path / "kit")
    kit.pools(tmp_path / "kit", tmp_path / "rd2")
    back, passages = read(tmp_path / "rd2" / "train.jsonl.gz")
    assert [[passages[k] for k in r["pool"]] for r in back] == [list(texts.values())] * 4
    assert [passages[r["positive"]] for r in back] == [texts[r["positive"]] for r in rows]
    from bench.train_reranker import load_examples

    kept = load_examples(tmp_path / "rd2" / "train.jsonl.gz", max_queries=None, seed=1)
    assert all(
        len(e.siblings) == 3 for e in kept
    )  # the other fox sections, found after the trip too

    kit.init(ROOT / "models" / "reranker", tmp_path / "kit", tmp_path / "init")
    assert not (tmp_path / "init" / "liminalis_shared.json").exists()
    assert (
        main(
            [
                "--examples",
                str(tmp_path / "rd2" / "train.jsonl.gz"),
                "--init",
                str(tmp_path / "init"),
                "--max-queries",
                "0",
                "--max-length",
                "48",
                "--batch",
                "2",
                "--negatives",
                "2",
                "--sibling-negatives",
                "1",
                "--eval-every",
                "0",
                "--quiet",
                "--epochs",
                "1",
                "--device",
                "cpu",
                "--lr",
                "1e-5",
                "--score",
                str(tmp_path / "rd2" / "dev-tiny.jsonl.gz"),
                "--out",
                str(tmp_path / "m"),
            ]
        )
        == 0
    )

    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    (tmp_path / "out").mkdir()
    kit.pack(tmp_path / "m", "mt")
    kit.unpack(tmp_path / "out", "mt", tmp_path / "final")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "final" / "model.safetensors"), "pt") as f:
        assert kit.WORD not in f.keys()  # the product takes them from the wheel, hash-checked
    assert (tmp_path / "final" / "dev-scores.json").exists()
    ce = CrossEncoderReranker(str(tmp_path / "final"))
    scores = asyncio.run(
        ce.score("Where did the fox run?", ["The fox ran to the mill.", "An old oak stood."])
    )
    assert scores[0] > scores[1]
