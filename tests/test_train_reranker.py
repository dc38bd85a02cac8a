"""The training command runs end to end on a tiny slice, and its output loads through the port."""

from __future__ import annotations

import json
from pathlib import Path

from liminalis.adapters.cross_encoder import CrossEncoderReranker


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
        ("What did the smith cast?", "bell-s01", "The smith cast a great bell of bronze for the abbey."),
        ("What happened when the river froze?", "bell-s02", "the bell fell through the ice and was lost"),
        ("What did the fox steal?", "fox-s01", "A red fox stole eggs from the miller"),
        ("Who caught the fox?", "fox-s01", "until the dog caught him"),
        ("What did the ferryman carry?", "ferry-s01", "The ferryman crossed the river at dawn with salt, lanterns"),
        ("When did the bell ring?", "bell-s01", "It rang at dusk every day."),
        # a CRD3-style query longer than --max-length on its own
        (" ".join(["The party argued about the bell and the river and the ferryman."] * 12), "bell-s02",
         "the bell fell through the ice and was lost"),
    ]
    (root / "queries.jsonl").write_text("\n".join(
        json.dumps({"id": f"q{i}", "query": q, "relevant": [d], "answers": [], "passages": [p]}) for i, (q, d, p) in enumerate(qs)
    ))
    return root


async def test_train_command_end_to_end_on_a_tiny_slice(tmp_path):
    from bench.train_reranker import main

    data = make_train_dir(tmp_path / "train")
    out = tmp_path / "model"
    rc = main(["--train", str(data), "--out", str(out), "--max-queries", "7", "--layers", "1", "--max-length", "64",
               "--batch", "2", "--negatives", "1", "--eval-every", "0", "--quiet", "--lr", "1e-4", "--epochs", "2"])
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
    assert main(["--train", str(data), "--out", str(full), "--max-queries", "7", "--layers", "1", "--max-length", "64",
                 "--batch", "2", "--negatives", "1", "--eval-every", "0", "--quiet", "--lr", "1e-4", "--epochs", "2",
                 "--fp32"]) == 0
    ref = await CrossEncoderReranker(str(full), max_length=64).score("What did the fox steal?", ["A red fox stole eggs.", "The bell rang."])
    assert scores == __import__("pytest").approx(ref, abs=2e-2)  # same seed, same model, half precision
