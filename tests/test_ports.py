"""Contract tests, once per port, against the fake and the real adapter."""

from __future__ import annotations

import numpy as np
import pytest

from liminalis.ports import VectorRecord
from liminalis.testing import HashEmbedder, KeywordReranker, MemoryVectorStore


def _rec(i: str, vis: set[str], vec: list[float], kind: str = "passage") -> VectorRecord:
    v = np.asarray(vec, dtype=np.float32)
    return VectorRecord(id=i, passage_id=f"p{i}", doc_id=f"d{i}", kind=kind, visibility=frozenset(vis), vector=v / np.linalg.norm(v))


@pytest.fixture(params=["memory", "milvus"])
async def store(request, tmp_path):
    if request.param == "memory":
        s = MemoryVectorStore()
    else:
        from liminalis.adapters.milvus import MilvusVectorStore

        s = MilvusVectorStore(str(tmp_path / "m.db"))
    yield s
    await s.close()


async def test_vector_store_contract(store):
    await store.ensure("c1", dim=4, model_id="m")
    await store.ensure("c2", dim=4, model_id="m")
    await store.upsert("c1", [
        _rec("a", {"gm"}, [1, 0, 0, 0]),
        _rec("b", {"gm", "players"}, [0.9, 0.1, 0, 0]),
        _rec("c", {"gm", "mirel"}, [0.8, 0.2, 0, 0], kind="window"),
    ])
    await store.upsert("c2", [_rec("z", {"gm", "players"}, [1, 0, 0, 0])])
    await store.flush("c1")
    await store.flush("c2")
    q = np.array([1, 0, 0, 0], dtype=np.float32)
    players = await store.search("c1", q, lens=frozenset({"players"}), top_k=10)
    assert [h.id for h in players] == ["b"]
    vis = [frozenset({"gm"}), frozenset({"gm", "players"}), frozenset({"gm", "mirel"})]
    scalar = await store.search("c1", q, lens=frozenset({"players"}), top_k=10, visibilities=vis)
    assert [h.id for h in scalar] == ["b"]
    both = await store.search("c1", q, lens=frozenset({"players", "mirel"}), top_k=10)
    assert [h.id for h in both] == ["b", "c"] and both[1].kind == "window"
    gm = await store.search("c1", q, lens=frozenset({"gm"}), top_k=10)
    assert [h.id for h in gm] == ["a", "b", "c"]
    assert gm[0].score == pytest.approx(1.0, abs=1e-4)
    assert await store.search("c1", q, lens=frozenset(), top_k=10) == []
    assert await store.ids("c1") == {"a", "b", "c"}
    assert await store.ids("c2") == {"z"}  # campaigns are isolated
    await store.delete("c1", ["b"])
    await store.flush("c1")
    assert await store.ids("c1") == {"a", "c"}
    assert [h.id for h in await store.search("c1", q, lens=frozenset({"players"}), top_k=10)] == []
    await store.upsert("c1", [_rec("a", {"gm", "players"}, [0, 1, 0, 0])])  # upsert replaces
    await store.flush("c1")
    hits = await store.search("c1", np.array([0, 1, 0, 0], dtype=np.float32), lens=frozenset({"players"}), top_k=1)
    assert hits[0].id == "a"


@pytest.fixture(params=["hash", "sentence-transformers"])
def embedder(request):
    if request.param == "hash":
        return HashEmbedder()
    return request.getfixturevalue("real_embedder")


async def test_embedder_contract(embedder):
    vecs = await embedder.embed_passages(["The bell rang at dusk.", "A ferry crossed the river."])
    assert vecs.shape == (2, embedder.dim)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    q = await embedder.embed_query("When did the bell ring?")
    assert q.shape == (embedder.dim,)
    assert float(vecs[0] @ q) > float(vecs[1] @ q)
    again = await embedder.embed_passages(["The bell rang at dusk."])
    assert np.allclose(again[0], vecs[0], atol=1e-5)
    assert (await embedder.embed_passages([])).shape[0] == 0
    assert embedder.model_id


async def test_reranker_contract_fake_and_cross_encoder():
    from liminalis.adapters.cross_encoder import CrossEncoderReranker
    from liminalis.adapters.sentence_transformers import resolve_model_path

    fake = KeywordReranker("bell")
    assert await fake.score("q", ["bell bell", "none"]) == [2.0, 0.0]
    # Any sentence-transformers CrossEncoder path loads offline through the same port (here the
    # bundled MiniLM with an untrained head: the scores are meaningless, the plumbing is real).
    ce = CrossEncoderReranker(resolve_model_path("bundled:all-MiniLM-L6-v2"), max_length=64)
    scores = await ce.score("who rang the bell?", ["The bell was rung by Tam.", "Fish swim."])
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
    assert await ce.score("q", []) == []
    broken = CrossEncoderReranker("/nonexistent/model")
    with pytest.raises(Exception):
        await broken.score("q", ["x"])
