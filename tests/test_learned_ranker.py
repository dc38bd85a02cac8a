"""The learned document ranker: ships in the repo, ranks, fails soft, holds the GM wall, trains."""

from __future__ import annotations

import logging
from pathlib import Path

import harness
import numpy as np
import pytest
from test_retrieval import leaked, tiny  # noqa: F401  (the tiny campaign fixture)
from test_train_reranker import make_train_dir

from liminalis.lens import players_lens
from liminalis.models import find_models_dir, load_learned_ranker
from liminalis.retrieval.learned import FEATURES, LearnedRanker, load_ranker
from liminalis.retrieval.retriever import RetrievalParams, Trace


def row(**values: float) -> np.ndarray:
    x = np.zeros(len(FEATURES))
    for k, v in values.items():
        x[FEATURES.index(k)] = v
    return x


def test_shipped_ranker_loads_offline_and_prefers_the_document_that_covers_the_question():
    ranker = load_learned_ranker("auto")
    assert ranker is not None, f"no shipped ranker at {find_models_dir().ranker}"
    # Fusion put B first on one dense passage; A holds every query term, in one scene, and leads
    # the document-level arm. A model that learned anything ranks A above B.
    common = dict(lex_present=1, doc_present=1, dense_present=1, dense_cos=0.4, log_length=7.0)
    a = row(
        fused_inv_rank=0.5,
        fused_log_rank=np.log(2),
        fused_rel=0.8,
        lex_rel=0.9,
        lex_log_rank=np.log(2),
        doc_rel=1.0,
        doc_log_rank=0.0,
        dense_gap=0.0,
        dense_log_rank=0.0,
        pool_count=np.log1p(4),
        coverage=1.0,
        window_coverage=1.0,
        title_coverage=0.3,
        window_rel=1.0,
        second_rel=0.8,
        passage_coverage=0.8,
        bigram_coverage=0.6,
        **common,
    )
    b = row(
        fused_inv_rank=1.0,
        fused_log_rank=0.0,
        fused_rel=1.0,
        lex_rel=1.0,
        lex_log_rank=0.0,
        doc_rel=0.3,
        doc_log_rank=np.log(12),
        dense_gap=-0.2,
        dense_log_rank=np.log(9),
        pool_count=np.log1p(1),
        coverage=0.35,
        window_coverage=0.3,
        title_coverage=0.0,
        window_rel=0.4,
        second_rel=0.05,
        passage_coverage=0.35,
        bigram_coverage=0.0,
        **common,
    )
    scores = ranker.score(np.stack([a, b]))
    assert scores[0] > scores[1]


def test_missing_or_broken_ranker_loads_as_none_and_says_so(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    assert load_ranker(tmp_path / "nowhere") is None
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "ranker.json").write_text("{not json")
    assert load_ranker(tmp_path / "bad") is None
    stale = LearnedRanker(np.ones(3), np.zeros(3), np.ones(3), features=("a", "b", "c")).to_json()
    (tmp_path / "stale.json").write_text(stale)
    assert load_ranker(tmp_path / "stale.json") is None
    assert caplog.text.count("keeping the fused order") == 3
    assert load_learned_ranker("none") is None


class ExplodingRanker:
    model_id = "exploding"

    def score(self, x: np.ndarray) -> np.ndarray:
        raise RuntimeError("weights on fire")


async def test_ranker_reorders_documents_and_a_failing_one_keeps_the_fused_order(tiny, caplog):  # noqa: F811
    q = "river bells ferry dusk"
    base = await tiny.retrieve("tiny", q, players_lens(), use_pins=False)
    # A hand-set model that prefers a lower fused rank: the fused order reversed.
    n = len(FEATURES)
    reverse = LearnedRanker(row(fused_log_rank=1.0), np.zeros(n), np.ones(n))
    tiny.retriever.ranker = reverse
    trace = Trace()
    got = await tiny.retrieve("tiny", q, players_lens(), use_pins=False, trace=trace)
    pool_docs = trace.fused_docs
    assert trace.learned_docs == pool_docs[::-1] and got.ranked_doc_ids[: len(pool_docs)] == tuple(
        pool_docs[::-1]
    )
    assert sorted(got.ranked_doc_ids) == sorted(base.ranked_doc_ids)  # re-ordered, nothing added
    ex = await tiny.explain("tiny", q, relevant=[pool_docs[-1]], lens=players_lens())
    assert ex.stages[0].learned_rank == 1 and "learned=1" in ex.render({})
    off = await tiny.retrieve(
        "tiny", q, players_lens(), use_pins=False, params=RetrievalParams(learned_enabled=False)
    )
    assert off.ranked_doc_ids == base.ranked_doc_ids
    caplog.set_level(logging.WARNING)
    tiny.retriever.ranker = ExplodingRanker()
    for _ in range(2):
        broken = await tiny.retrieve("tiny", q, players_lens(), use_pins=False)
        assert broken.ranked_doc_ids == base.ranked_doc_ids
    assert caplog.text.count("keeping the fused order") == 1  # logged once, not per query
    tiny.retriever.ranker = None


@pytest.mark.parametrize(
    "query", ["saltborn compact drown ferry", "Obsidian Ledger bribes", "hollow crown plot bells"]
)
async def test_the_learned_stage_cannot_surface_gm_only_documents(tiny, query):  # noqa: F811
    n = len(FEATURES)
    for weights in (
        row(fused_log_rank=1.0),
        row(coverage=5.0, title_coverage=5.0),
        -row(coverage=5.0),
        row(cand_dense_gap=5.0, cand_dense_log_rank=-5.0),
        row(pool_coverage=5.0, span_coverage=5.0),
        row(neighbour_rel=5.0),
        -row(neighbour_rel=5.0, fused_rel=1.0),
    ):
        tiny.retriever.ranker = LearnedRanker(weights, np.zeros(n), np.ones(n))
        trace = Trace(collect_features=True)
        b = await tiny.retrieve("tiny", query, players_lens(), trace=trace)
        assert leaked(b) == []
        assert not [d for d in trace.candidates + trace.learned_docs if d.startswith("gm/")]
        # The candidate dense search scored every candidate (the arm's top 20 would not have).
        if trace.candidates:  # (players may see nothing at all for a GM-only question)
            assert (
                trace.features is not None
                and (trace.features[:, FEATURES.index("cand_dense_gap")] > -1).all()
            )
    tiny.retriever.ranker = None


def test_train_ranker_end_to_end_on_a_tiny_slice(tmp_path: Path, real_embedder):
    from bench.train_ranker import main

    make_train_dir(tmp_path / "train" / "fairytaleqa-train")
    out = tmp_path / "model"
    report = main(
        [
            "--train-root",
            str(tmp_path / "train"),
            "--groups-dir",
            str(tmp_path / "groups"),
            "--valid",
            "--l2",
            "0.001",
            "--steps",
            "30",
            "--out",
            str(out),
            "--quiet",
        ],
        embedder=real_embedder,
        cache_dir=tmp_path / "cache",
    )
    assert sum(report["groups"].values()) >= 5
    model = load_ranker(out)
    assert (
        model is not None
        and model.weights.shape == (len(FEATURES),)
        and np.isfinite(model.weights).all()
    )
    assert 0.0 < report["validation_mrr"]["0.001"] <= 1.0
    # The same groups (features from the cache) with a hidden layer: written, loaded, scored.
    report = main(
        [
            "--train-root",
            str(tmp_path / "train"),
            "--groups-dir",
            str(tmp_path / "groups"),
            "--valid",
            "--l2",
            "0.01",
            "--hidden",
            "4",
            "--out",
            str(out),
            "--quiet",
        ],
        embedder=real_embedder,
        cache_dir=tmp_path / "cache",
    )
    model = load_ranker(out)
    assert report["hidden"] == 4 and model is not None and model.hidden is not None
    assert (
        model.hidden[0].shape == (len(FEATURES), 4)
        and np.isfinite(model.score(np.zeros((3, len(FEATURES))))).all()
    )


@pytest.mark.slow  # trains a ranker: seconds of CPU, not a unit test
def test_a_hidden_layer_learns_what_a_linear_ranker_cannot_and_round_trips():
    """The relevant document is the one whose two signals *agree* (both high or both low): no
    weighting of either alone finds it; a tanh layer does. Saved and loaded, it scores the same;
    a hidden layer of the wrong shape is refused (load_ranker keeps the fused order)."""
    from bench.train_ranker import evaluate, fit, fit_hidden

    rng = np.random.default_rng(0)
    examples = []
    for _ in range(300):
        x = np.zeros((6, len(FEATURES)))
        signs = rng.choice([-1.0, 1.0], size=(6, 2))
        signs[1:, 1] = -signs[1:, 0]  # the others disagree
        signs[0, 1] = signs[0, 0]  # the relevant one agrees
        x[:, :2] = signs * rng.uniform(0.5, 1.5, size=(6, 2))
        perm = rng.permutation(6)
        examples.append((x[perm], (np.arange(6) == 0).astype(float)[perm]))
    linear, hidden = (
        fit(examples, l2=0.01),
        fit_hidden(examples, units=8, l2=0.001, steps=600, lr=0.05),
    )
    assert evaluate(linear, examples) < 0.7 and evaluate(hidden, examples) > 0.95
    again = LearnedRanker.from_json(hidden.to_json())
    x = examples[0][0]
    assert np.allclose(again.score(x), hidden.score(x), atol=1e-4)
    broken = hidden.to_json().replace('"b1": [', '"b1": [0.5, ', 1)
    with pytest.raises(ValueError, match="hidden layer"):
        LearnedRanker.from_json(broken)


def test_ranker_feature_caches_are_keyed_by_a_fine_tuned_embedder():
    """Dense features from two embedders must never share a cache file (a refit after switching
    embedders would otherwise read the old model's features)."""
    from bench.train_ranker import _embedder_tag
    from liminalis.testing import HashEmbedder

    class Bundled:
        model_id = "bundled:all-MiniLM-L6-v2@b422673dc1bc"

    assert _embedder_tag(Bundled()) == ""  # the caches written before the tag existed stay valid
    a, b = (
        _embedder_tag(HashEmbedder(model_id="embedder@1")),
        _embedder_tag(HashEmbedder(model_id="embedder@2")),
    )
    assert a.startswith("-e") and b.startswith("-e") and a != b


def test_best_span_finds_query_terms_together():
    from liminalis.retrieval.learned import _best_span

    weight = {"bells": 1.0, "dusk": 2.0, "ferry": 4.0}
    # bells and dusk meet at 40-45; ferry is alone far away.
    positions = {"bells": [0, 40], "dusk": [45], "ferry": [200]}
    assert _best_span(positions, weight, 12) == 4.0  # ferry alone outweighs bells + dusk
    assert _best_span({"bells": [0, 40], "dusk": [45]}, weight, 12) == 3.0
    assert (
        _best_span({"bells": [0], "dusk": [45]}, weight, 12) == 2.0
    )  # too far apart to count together
    assert _best_span({}, weight, 12) == 0.0


async def test_pool_features_tell_apart_candidates_that_share_the_hero(tmp_path):
    """Every candidate that matches the question names the hero (Vell): weighted by the pool,
    that term counts for less than its corpus-wide rarity says, and the document holding the
    question's other terms close together scores highest on proximity."""
    filler = " ".join(f"word{i}" for i in range(60))
    files = {
        "near.md": "# One\n\nVell heard the abbey bells ring at dusk over the river.",
        "far.md": f"# Two\n\nVell heard the abbey bells. {filler}. Later came dusk.",
        "hero.md": "# Three\n\nVell walked the salt road to the harbour alone.",
        "other.md": "# Four\n\nVell sold lanterns at the market for copper.",
        # the rest of the campaign: Vell is a rare name corpus-wide
        **{
            f"misc{i}.md": f"# Misc {i}\n\nA ledger of grain{i} and timber{i} in storehouse{i}."
            for i in range(30)
        },
    }
    f, _, _ = await _pool_features(tmp_path, files, "when did Vell hear the bells at dusk")
    assert {"near", "far", "hero", "other"} <= set(f)
    assert f["hero"]["coverage"] > 0.1
    assert f["hero"]["pool_coverage"] < 0.9 * f["hero"]["coverage"]
    assert (
        f["near"]["pool_coverage"] == pytest.approx(f["far"]["pool_coverage"]) == pytest.approx(1.0)
    )
    assert f["near"]["span_coverage"] > f["far"]["span_coverage"] > 0


async def test_neighbours_are_the_adjacent_files_of_a_numbered_series_that_the_lens_may_see(
    tmp_path,
):
    """Numeric order within one series (part-9 before part-10); other folders, other series and
    files named without a number stand apart; a file the lens may not see is skipped: for
    players, its two sides are neighbours."""
    from conftest import close_engine, make_engine

    root = tmp_path / "campaigns" / "saga"
    (root / "sessions").mkdir(parents=True)
    (root / "places").mkdir()
    (root / "campaign.toml").write_text('name = "Saga"\ngm_paths = ["sessions/part-10.md"]\n')
    for n in (1, 2, 9, 10, 11):
        (root / "sessions" / f"part-{n}.md").write_text(
            f"# Part {n}\n\nThe party travelled on, day {n}."
        )
    (root / "places" / "harbour.md").write_text("# Harbour\n\nSalt, rope and gulls.")
    (root / "places" / "inn.md").write_text("# Inn\n\nAle and a fire.")
    (root / "sessions" / "notes-3.md").write_text("# Notes\n\nLoose notes.")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("saga")
        cat = await harness.catalog(engine, "saga")
        gm, players = frozenset({"gm"}), players_lens()
        assert cat.neighbours("sessions/part-9", gm) == ("sessions/part-2", "sessions/part-10")
        assert cat.neighbours("sessions/part-9", players) == ("sessions/part-2", "sessions/part-11")
        assert (
            cat.neighbours("sessions/part-10", players) == ()
        )  # hidden: no neighbours to speak of
        assert cat.neighbours("sessions/part-1", players) == ("sessions/part-2",)
        assert cat.neighbours("places/harbour", gm) == ()  # no number: in no series
        assert cat.neighbours("sessions/notes-3", gm) == ()  # another series in the same folder
        assert "sessions/notes-3" not in cat.neighbours("sessions/part-2", gm)
    finally:
        await close_engine(engine)


async def test_neighbour_rel_is_the_pool_score_of_the_strongest_neighbour(tmp_path):
    """A scene that runs across two session files: the second half's neighbour leads the pool,
    so its neighbour_rel is high; a file whose neighbours are not candidates gets 0."""
    files = {
        "sessions/s01.md": "# One\n\nThe party met the ferryman Odo at the drowned bell chapel.",
        "sessions/s02.md": "# Two\n\nOdo carried them across; the bell rang under the water.",
        "sessions/s03.md": "# Three\n\nA quiet market day, spent buying rope.",
        "sessions/s04.md": "# Four\n\nThey argued about the chapel bell over supper.",
        "sessions/s05.md": "# Five\n\nSnow, and a letter from the harbour master.",
        **{f"misc{i}.md": f"# Misc {i}\n\nA ledger of grain{i} and timber{i}." for i in range(20)},
    }
    f, candidates, cat = await _pool_features(tmp_path, files, "ferryman Odo drowned bell chapel")
    assert candidates[0] == "sessions/s01"
    assert f["sessions/s02"]["neighbour_rel"] == pytest.approx(
        1.0
    )  # its neighbour s01 leads the pool
    assert f["sessions/s01"]["neighbour_rel"] == pytest.approx(f["sessions/s02"]["fused_rel"])
    for d, x in f.items():  # each: its strongest neighbour's fused score, 0 without one in the pool
        near = [f[n]["fused_rel"] for n in cat.neighbours(d, players_lens()) if n in f]
        assert x["neighbour_rel"] == pytest.approx(max(near, default=0.0))


async def _pool_features(tmp_path: Path, files: dict[str, str], query: str):
    """Ingest ``files`` as the campaign "saga" and retrieve ``query`` for players: each
    candidate's features by name, the candidates in pool order, and the campaign's catalog."""
    from conftest import close_engine, make_engine

    root = tmp_path / "campaigns" / "saga"
    for rel, text in {"campaign.toml": 'name = "Saga"\n', **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("saga")
        trace = Trace(collect_features=True)
        await engine.retrieve("saga", query, players_lens(), trace=trace, use_pins=False)
        cat = await harness.catalog(engine, "saga")
    finally:
        await close_engine(engine)
    assert trace.features is not None
    features = {
        d: dict(zip(FEATURES, x, strict=True))
        for d, x in zip(trace.candidates, trace.features, strict=True)
    }
    return features, trace.candidates, cat


def test_a_refit_keeps_the_hand_written_why_section_of_the_card(tmp_path):
    from bench.train_ranker import write_card

    (tmp_path / "README.md").write_text(
        "# old card\n\n## Weights\n| a | 1 |\n\n## Why these features\nCV table.\n"
    )
    report = {
        "validation_mrr": {"0.001": 0.7},
        "validation_by_group": {},
        "features_from_cache": [],
        "groups": {"g": 1},
        "valid_groups": ["g"],
        "command": "cmd",
        "validation_fused_mrr": 0.6,
        "l2": 1e-3,
        "seconds": 1,
    }
    write_card(tmp_path, report, load_ranker(find_models_dir().ranker))
    card = (tmp_path / "README.md").read_text()
    assert (
        card.endswith("## Why these features\nCV table.\n")
        and card.lower().count("weights (standardised") == 1
    )
    assert "# old card" not in card


def test_ranker_cv_scores_each_group_with_a_model_that_never_saw_it():
    """Two groups that reward opposite features: each, scored by a model fit on the other, ranks
    its relevant document last. A model that had seen the group would rank it first."""
    from bench.ranker_cv import compare, held_out_scores

    def group(feature: int) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for k in range(20):
            x = np.zeros((6, len(FEATURES)))
            x[0, feature] = 3.0 + k / 20  # the relevant document stands out on this feature...
            x[0, 1 - feature] = -3.0  # ...and is the weakest on the other
            out.append((x, np.asarray([1.0, 0, 0, 0, 0, 0])))
        return out

    data = {"fairytaleqa-train-g0": group(0), "crd3-train-g0": group(1)}
    held = held_out_scores(data, steps=100)
    for g in data:
        assert held[g][:, 0].mean() < 0.3 and held[g][:, 1].mean() == 0.0  # RR, recall@5: last of 6
    report = compare(held, held_out_scores(data, drop=[0, 1], steps=100))
    assert report["crd3-train"]["mrr_diff"][0] > 0.3  # without the misleading features: fused order


def test_ranker_cv_end_to_end_on_a_tiny_slice(tmp_path: Path, real_embedder):
    """Dropping every feature leaves the pool's fused order: its held-out scores equal the fused
    order's, to the query."""
    from bench.ranker_cv import main
    from bench.train_ranker import evaluate, group_features

    make_train_dir(tmp_path / "train" / "fairytaleqa-train")
    args = [
        "--train-root",
        str(tmp_path / "train"),
        "--groups-dir",
        str(tmp_path / "groups"),
        "--steps",
        "30",
        "--quiet",
    ]
    report = main(
        [*args, "--without", ",".join(FEATURES), "coverage"],
        embedder=real_embedder,
        cache_dir=tmp_path / "cache",
    )
    assert len(report["groups"]) >= 2
    full = report["all"]["fairytaleqa-train"]
    assert 0.0 < full["mrr"] <= 1.0 and full["mrr_diff"] == [0.0, 0.0, 0.0]
    import argparse

    data, cached = group_features(
        argparse.Namespace(
            train_root=tmp_path / "train",
            groups_dir=tmp_path / "groups",
            only=None,
            query_adapter_folds=None,
            limit=None,
            quiet=True,
        ),
        real_embedder,
        cache_dir=tmp_path / "cache",
    )
    assert sorted(cached) == sorted(data)  # the second read is the cache's
    fused = evaluate(None, [e for ex in data.values() for e in ex])
    assert report[f"without {','.join(FEATURES)}"]["fairytaleqa-train"]["mrr"] == round(fused, 4)
