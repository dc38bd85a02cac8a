"""Retrieval stack: tokenizer, RRF, pins, rerank fail-soft, rendering, lens wall on every arm."""

from __future__ import annotations

import pytest
from conftest import close_engine, make_engine

from liminalis.lens import gm_lens, players_lens
from liminalis.retrieval.fusion import rrf
from liminalis.retrieval.render import omission, render_spans, select_spans
from liminalis.retrieval.retriever import RetrievalParams, Trace
from liminalis.testing import BrokenReranker, KeywordReranker, SlowReranker
from liminalis.text import Tokenizer
from liminalis.types import Span

# -- tokenizer ---------------------------------------------------------------------------------


def test_tokenizer_splits_camel_case_underscores_and_folds_accents():
    tok = Tokenizer()
    assert tok("14.9__What_The_Map_Omits") == ["14", "9", "map", "omit"]
    assert set(tok("what the map omits")) <= set(tok("14.9__What_The_Map_Omits"))
    assert tok("CaféRenée") == ["cafe", "rene"]
    assert tok("HTTPServer xmlHttpRequest") == ["http", "server", "xml", "http", "request"]
    assert Tokenizer(stem=False, stop_words=False)("The Bells") == ["the", "bells"]


# -- fusion ------------------------------------------------------------------------------------


def test_rrf_on_hand_made_rankings():
    fused = rrf(["a", "b", "c"], ["c", "a", "d"], rrf_k=1)
    # a: 1/2 + 1/3 ; c: 1/4 + 1/2 ; b: 1/3 ; d: 1/4
    assert [x for x, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 2 + 1 / 3)


def test_rrf_weights_and_duplicates():
    fused = rrf(["a", "a", "b"], ["b"], rrf_k=10, weights=[1.0, 0.0])
    assert [x for x, _ in fused] == ["a", "b"]
    assert dict(fused)["b"] == pytest.approx(1 / 12)
    heavy = rrf(["a", "b"], ["b", "a"], rrf_k=60, weights=[0.2, 1.0])
    assert heavy[0][0] == "b"


# -- rendering ---------------------------------------------------------------------------------


def long_doc() -> tuple[str, int]:
    paras = []
    i = 0
    while sum(len(p) + 2 for p in paras) < 9000:
        paras.append(
            " ".join(f"Paragraph {i} sentence {j} describes the slow river." for j in range(5))
        )
        i += 1
    text = "\n\n".join(paras)
    pos = 4194
    fact = "The ferryman's true name was Oswin Pike."
    cut = text.rfind(" ", 0, pos) + 1
    text = text[:cut] + fact + " " + text[cut:]
    return text, text.index(fact)


def test_rendering_never_head_slices_and_marks_omissions():
    text, pos = long_doc()
    assert 4000 < pos < 4300 and len(text) > 9000
    spans = select_spans(text, [Span(pos - 100, pos + 60)])
    out = render_spans(text, spans)
    assert "Oswin Pike" in out
    assert not out.startswith(text[:200])  # not a head-slice
    assert out.startswith("[… ") and out.rstrip().endswith("omitted …]")
    omitted = sum(
        int(m.replace(",", "")) for m in __import__("re").findall(r"\[… ([\d,]+) characters", out)
    )
    shown = sum(s.end - s.start for s in spans)
    assert omitted + shown == len(text)


def test_rendering_merges_overlaps_and_snaps_to_edges():
    text, pos = long_doc()
    spans = select_spans(
        text, [Span(10, 300), Span(250, 500), Span(len(text) - 150, len(text) - 20)]
    )
    assert spans[0].start == 0 and spans[-1].end == len(text)
    assert len(spans) == 2
    small = "Short doc. Whole."
    assert render_spans(small, select_spans(small, [Span(0, 5)])) == small
    assert omission(3120) == "[… 3,120 characters omitted …]"


# -- the stack on a tiny campaign --------------------------------------------------------------


@pytest.fixture
async def tiny(tmp_path):
    root = tmp_path / "campaigns" / "tiny"
    (root / "gm").mkdir(parents=True)
    (root / "lore").mkdir()
    (root / "campaign.toml").write_text(
        'name = "Tiny"\nlenses = ["mirel"]\ngm_paths = ["gm/**"]\nalways_include = ["overview.md"]\n'
    )
    (root / "overview.md").write_text(
        "---\ntitle: Overview\ntype: overview\n---\nThe river city of Vell and its bells."
    )
    (root / "lore" / "bells.md").write_text(
        "---\ntitle: The Bells\naliases: [Bellhouse]\n---\nNine bells hang in the abbey tower. The ninth rings at dusk."
    )
    (root / "lore" / "ferry.md").write_text(
        "---\ntitle: The Ferry\n---\nThe ferryman crosses the river at dawn carrying salt and lanterns."
    )
    (root / "lore" / "mirel.md").write_text(
        "---\ntitle: Mirel Secret Past\nvisibility: [gm, mirel]\n---\nMirel swore the oath at Cinder Ford."
    )
    (root / "gm" / "plot.md").write_text(
        "---\ntitle: Hollow Crown Plot\naliases: [Crownplot]\n---\nThe Saltborn Compact will drown the ferry and the bells at dusk."
    )
    (root / "gm" / "bare.md").write_text(
        "# Obsidian Ledger\n\nThe Obsidian Ledger lists the Saltborn bribes paid to the ferryman."
    )
    engine = await make_engine(tmp_path)
    await engine.ingest("tiny")
    yield engine
    await close_engine(engine)


GM_TEXT = ("saltborn", "obsidian", "hollow crown", "crownplot", "gm/plot", "gm/bare")


def leaked(bundle) -> list[str]:
    blob = (
        bundle.text
        + " "
        + " ".join(bundle.ranked_doc_ids)
        + " "
        + " ".join(h.passage_id + h.doc_id for h in bundle.hits)
    ).lower()
    return [w for w in GM_TEXT if w in blob]


@pytest.mark.parametrize(
    "query",
    [
        "Saltborn Compact drown the ferry",  # lexical + dense
        "Hollow Crown Plot",  # named key (title) + title entry
        "what is the crownplot",  # alias
        "@gm/plot tell me",  # @-mention by path
        "@[Hollow Crown Plot] details",  # bracketed @-mention
        "Obsidian Ledger",  # no front matter, GM folder
        "gm plot bare",  # file names
    ],
)
async def test_gm_only_never_reaches_players_through_any_arm(tiny, query):
    arms = (
        RetrievalParams(),
        RetrievalParams(dense_enabled=False),
        RetrievalParams(lexical_enabled=False),
        RetrievalParams(dense_enabled=False, w_lexical=0.0, render_related_docs=8),
    )  # the document arm alone
    for params in arms:
        trace = Trace()
        b = await tiny.retrieve(
            "tiny",
            query,
            players_lens(),
            params=params,
            forced=["gm/plot", "Obsidian Ledger"],
            trace=trace,
        )
        assert leaked(b) == [], (query, params)
        assert not [d for d in trace.document_docs + trace.lexical_docs if d.startswith("gm/")], (
            query,
            params,
        )
        # related spans index into the document's own text: only documents the lens may see
        assert all(d.doc_id in b.ranked_doc_ids or d.pinned for d in b.documents if d.related)
    await tiny.db.execute("INSERT OR IGNORE INTO pins VALUES ('tiny', 'campaign', 'gm/plot', 0)")
    b = await tiny.retrieve("tiny", query, players_lens())
    assert leaked(b) == []
    assert (await tiny.list_pins("tiny", players_lens())) == [("overview", "Overview")]
    g = await tiny.retrieve("tiny", query, gm_lens())
    assert leaked(g), "the GM lens should see GM documents"


async def test_personal_lens_is_a_union_never_more(tiny):
    assert (
        "mirel"
        not in (await tiny.retrieve("tiny", "oath at Cinder Ford", players_lens())).ranked_doc_ids
    )
    own = await tiny.retrieve("tiny", "oath at Cinder Ford", players_lens("mirel"))
    assert own.ranked_doc_ids[0] == "lore/mirel"
    assert leaked(own) == []


async def test_pins_come_first_and_survive_rerank(tiny):
    b = await tiny.retrieve(
        "tiny",
        "ferryman salt lanterns",
        players_lens(),
        forced=["The Bells"],
        params=RetrievalParams(rerank_enabled=True),
    )
    assert [d.doc_id for d in b.documents][:2] == ["overview", "lore/bells"]
    assert b.documents[0].pinned and b.documents[1].pinned
    tiny.retriever.reranker = KeywordReranker("nine")  # would put the bells first if it could
    r = await tiny.retrieve("tiny", "ferryman salt lanterns", players_lens(), forced=["The Bells"])
    assert [d.doc_id for d in r.documents][:2] == ["overview", "lore/bells"]
    assert "lore/ferry" in [d.doc_id for d in r.documents]
    tiny.retriever.reranker = None


async def test_reranker_reorders_and_failure_keeps_fused_order(tiny, caplog):
    base = await tiny.retrieve("tiny", "river bells ferry dusk", players_lens(), use_pins=False)
    tiny.retriever.reranker = KeywordReranker("ferryman")
    trace = Trace()
    # A mix strong enough to lift a keyword match over the fused order of this tiny campaign.
    rr = await tiny.retrieve(
        "tiny",
        "river bells ferry dusk",
        players_lens(),
        use_pins=False,
        trace=trace,
        params=RetrievalParams(rerank_mix=0.5),
    )
    assert trace.reranked and rr.ranked_doc_ids[0] == "lore/ferry"
    for broken in (BrokenReranker(), SlowReranker()):
        tiny.retriever.reranker = broken
        p = RetrievalParams(rerank_timeout_s=0.2)
        b = await tiny.retrieve(
            "tiny", "river bells ferry dusk", players_lens(), use_pins=False, params=p
        )
        assert b.ranked_doc_ids == base.ranked_doc_ids
        assert "fused order kept" in " ".join(b.notes)
    tiny.retriever.reranker = None
    assert "keeping fused order" in caplog.text


async def test_explain_classifies_stages(tiny):
    ex = await tiny.explain(
        "tiny", "ferryman salt lanterns", relevant=["lore/ferry", "lore/mirel"], lens=players_lens()
    )
    by = {s.doc_id: s for s in ex.stages}
    assert by["lore/ferry"].verdict() == "rendered" and by["lore/ferry"].lexical_rank == 1
    assert by["lore/ferry"].document_rank == 1 and "document=1" in ex.render({})
    assert by["lore/mirel"].verdict() == "never retrieved"


async def test_empty_and_huge_queries_are_user_errors(tiny):
    from liminalis.errors import InvalidInput

    with pytest.raises(InvalidInput):
        await tiny.retrieve("tiny", "   ", players_lens())
    with pytest.raises(InvalidInput) as exc:
        await tiny.retrieve("tiny", "x" * 5000, players_lens())
    assert "2,000" in exc.value.user_message


async def test_unknown_campaign_is_a_user_error(tiny):
    from liminalis.errors import UnknownCampaign

    for slug in ("nope", "../etc", ""):
        with pytest.raises(UnknownCampaign):
            await tiny.retrieve(slug, "bells", players_lens())


def test_compiled_bm25_matches_rank_bm25_exactly():
    """Scores and IDFs equal rank-bm25's bit for bit: repeated terms within an entry, terms in
    most entries (negative IDF, floored at ε·mean IDF), one in exactly half (IDF 0, not
    floored), an entry without tokens (indexed as one "\\x00" token) and query terms no entry
    holds."""
    import random

    import numpy as np
    from rank_bm25 import BM25Okapi

    from liminalis.retrieval.lexical import BM25Index

    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(40)]
    entries = []
    for i in range(200):
        tokens = [rng.choice(vocab) for _ in range(rng.randint(1, 30))]
        tokens += ["common"] * rng.randint(1, 3) if i % 5 else []  # in 80% of entries
        tokens += ["usual"] if i % 3 else []  # in 2/3 of entries
        tokens += ["half"] if i % 2 == 0 else []  # in exactly half: IDF 0, which stays 0
        entries.append((f"d{i}", tokens))
    entries[17] = ("d17", [])
    for k1, b in ((1.2, 0.6), (0.6, 0.3)):
        index = BM25Index(entries, k1=k1, b=b)
        ref = BM25Okapi([t or ["\x00"] for _, t in entries], k1=k1, b=b)
        floor = 0.25 * ref.average_idf  # what the negative IDFs of common and usual become
        assert index.idf["common"] == index.idf["usual"] == floor > 0 == index.idf["half"]
        assert dict(index.idf) == ref.idf
        queries = [["common", "usual", "half"], ["\x00"], ["absent", "w1"], ["w2", "w2", "common"]]
        queries += [[rng.choice([*vocab, "absent"]) for _ in range(rng.randint(1, 6))]]
        for _ in range(20):
            queries.append([rng.choice([*vocab, "common", "usual", "nowhere"]) for _ in range(6)])
        for q in queries:
            want = ref.get_scores(q)
            assert np.array_equal(index.scores(q), want), q
            top = index.search(q, top_k=5)
            best = sorted(((s, -i) for i, s in enumerate(want) if s > 0), reverse=True)[:5]
            assert [d for d, _ in top] == [f"d{-i}" for _, i in best]
    assert not BM25Index([]).search(["w1"], top_k=5) and not BM25Index([]).idf


def test_bm25_from_a_shared_vocabulary_matches_rank_bm25_and_knows_only_its_entries():
    """An index built from ids of a vocabulary shared with other entries (a catalog's, shared by
    its lenses) scores exactly as rank-bm25 over its own entries: the mean IDF behind the floor
    is summed in its entries' order of first occurrence, not in the vocabulary's, and a term
    only other entries hold has no IDF and scores nothing."""
    import random

    import numpy as np
    from rank_bm25 import BM25Okapi

    from liminalis.retrieval.lexical import BM25Index, Vocabulary

    rng = random.Random(0)  # a corpus whose IDF sum depends on the order it is added in
    vocab = [f"w{i}" for i in range(60)]
    entries = [
        (f"d{i}", [rng.choice(vocab) for _ in range(rng.randint(0, 25))] + ["often"] * (i % 4 > 0))
        for i in range(150)
    ]
    shared = Vocabulary()
    shared.encode(["secret", *reversed(vocab)])  # ids in another order than the entries'
    index = BM25Index.from_encoded(
        [e for e, _ in entries], [shared.encode(t) for _, t in entries], shared, k1=0.9, b=0.4
    )
    ref = BM25Okapi([t or ["\x00"] for _, t in entries], k1=0.9, b=0.4)
    assert list(index.idf.items()) == list(ref.idf.items())
    assert index.idf["often"] == 0.25 * ref.average_idf
    for _ in range(30):
        q = [rng.choice([*vocab, "often", "secret"]) for _ in range(5)]
        assert np.array_equal(index.scores(q), ref.get_scores(q)), q
    assert "secret" not in index.idf and not index.scores(["secret"]).any()


def test_catalog_lens_indexes_equal_indexes_of_what_the_lens_may_see():
    """A catalog encodes its stored tokens once for all lenses; each lens's passage and
    document indexes still equal indexes built from only the entries that lens may see (GM
    documents, a GM section inside a players document, the GM's and the players' views of one
    file), empty entries included, whichever lens is built first."""
    from pathlib import PurePosixPath

    import numpy as np

    from liminalis.lens import GM, NOT_GM, PLAYERS
    from liminalis.retrieval.catalog import Catalog, PassageInfo
    from liminalis.retrieval.lexical import BM25Index, title_entry_id
    from liminalis.types import Document

    tok = Tokenizer()
    players, gm, shared = frozenset({PLAYERS}), frozenset({GM}), frozenset({PLAYERS, NOT_GM})
    spec = {  # doc id → (title, visibility, [(passage visibility, text)])
        "harbour": ("The Harbour", players, [(players, "bells ring at the harbour"), (gm, "")]),
        "vault": ("Vault", gm, [(gm, "the drowned duke hides in the vault"), (gm, "bells")]),
        "inn": ("Inn//players", shared, [(shared, "the inn keeper pours ale, bells toll")]),
        "inn//gm": ("Inn", gm, [(gm, "the inn keeper is the drowned duke's spy")]),
        "bells": ("", players, [(players, ""), (gm, "secret bells of the duke")]),
    }
    documents, passages, by_doc = {}, {}, {}
    for doc_id, (title, vis, parts) in spec.items():
        documents[doc_id] = Document(doc_id, f"lore/{doc_id}.md", title, "", vis)
        by_doc[doc_id] = []
        for i, (pvis, text) in enumerate(parts):
            pid = f"{doc_id}#{i}"
            passages[pid] = PassageInfo(
                pid, doc_id, i, 0, 0, "", pvis, tuple(tok(text)), None, None
            )
            by_doc[doc_id].append(pid)

    def may_see(lens, visibility):  # liminalis.lens.visible, spelled out for the two lenses
        return PLAYERS in visibility if lens == PLAYERS else NOT_GM not in visibility

    def expected(lens, *, whole):
        entries = []
        for doc_id, (title, vis, parts) in spec.items():
            if not may_see(lens, vis):
                continue
            seen = [(f"{doc_id}#{i}", tok(t)) for i, (v, t) in enumerate(parts) if may_see(lens, v)]
            if whole:
                entries.append((doc_id, tok(title) + [t for _, ts in seen for t in ts]))
            else:
                stem = PurePosixPath(documents[doc_id].path).stem  # title, aliases, file name
                entries += [(title_entry_id(doc_id), tok(f"{title} {stem}")), *seen]
        return entries

    for order in ((PLAYERS, GM), (GM, PLAYERS)):
        cat = Catalog("c", 1, documents, passages, by_doc, Tokenizer(), k1=0.9, b=0.4)
        for lens in order:
            for whole in (False, True):
                got = (
                    cat.doc_lexical(frozenset({lens})) if whole else cat.lexical(frozenset({lens}))
                )
                entries = expected(lens, whole=whole)
                want = BM25Index(entries, k1=0.6 if whole else 0.9, b=0.3 if whole else 0.4)
                assert got.ids == want.ids and list(got.idf.items()) == list(want.idf.items())
                for q in (["bell"], ["duke", "vault", "bell"], ["\x00"], ["inn", "keeper"]):
                    assert np.array_equal(got.scores(q), want.scores(q))
        for whole in (False, True):
            seen = cat.doc_lexical(players) if whole else cat.lexical(players)
            assert not {"duke", "drown", "vault", "secret", "spi"} & set(seen.idf)


async def test_further_pool_passages_of_a_document_ride_along_as_related_spans(tiny):
    text, _ = long_doc()
    paras = text.split("\n\n")
    for i in (3, 9, 15):  # three separate passages of one long document mention the keeper
        paras[i] = f"The lighthouse keeper Oswin tends the lamp. {paras[i]}"
    root = tiny.campaigns_dir / "tiny" / "lore"
    (root / "keeper.md").write_text("---\ntitle: The Keeper\n---\n" + "\n\n".join(paras))
    await tiny.ingest("tiny")
    p = RetrievalParams(rerank_keep=1, max_documents=1, render_related_docs=0)
    b = await tiny.retrieve(
        "tiny", "lighthouse keeper Oswin lamp", players_lens(), use_pins=False, params=p
    )
    doc = next(d for d in b.documents if d.doc_id == "lore/keeper")
    full = (root / "keeper.md").read_text().split("---\n", 2)[2]
    assert len(doc.matched) == 1 and len(doc.related) >= 1
    assert all(s.start >= 0 and s.end <= len(full) + 1 for s in doc.related)
    assert not set(doc.related) & set(doc.matched)
    shown = {
        i
        for i in (3, 9, 15)
        for s in doc.matched + doc.related
        if s.start <= full.find(paras[i][:60]) < s.end
    }
    assert len(shown) >= 2  # evidence beyond the one kept hit is handed on
    none = await tiny.retrieve(
        "tiny",
        "lighthouse keeper Oswin lamp",
        players_lens(),
        use_pins=False,
        params=RetrievalParams(rerank_keep=1, max_documents=1, related_per_doc=0),
    )
    assert next(d for d in none.documents if d.doc_id == "lore/keeper").related == ()
    top = await tiny.retrieve(
        "tiny",
        "lighthouse keeper Oswin lamp",
        players_lens(),
        use_pins=False,
        params=RetrievalParams(rerank_keep=1, max_documents=1, render_related_docs=1),
    )
    strongest = next(d for d in top.documents if d.doc_id == "lore/keeper")
    assert strongest.related == () and set(strongest.matched) == set(
        doc.matched + doc.related
    )  # rendered instead


def test_mix_scores_keeps_the_fused_prior_and_lets_a_confident_reranker_win():
    from liminalis.retrieval.rerank import mix_scores

    assert mix_scores([0.1, 0.9, 0.5], None) == [0.1, 0.9, 0.5]  # the reranker alone
    weak = mix_scores([0.0, 0.1, 0.0, 0.0], 0.25)  # a near-tie: fused order stands
    assert max(range(4), key=weak.__getitem__) == 0
    sure = mix_scores([0.0, 0.0, 0.0, 9.0], 2.0)  # one passage far above the rest: it rises
    assert max(range(4), key=sure.__getitem__) == 3
    assert mix_scores([1.0, 1.0], 1.0) == pytest.approx(
        [0.0, -0.6931], abs=1e-4
    )  # equal scores: prior only


async def test_rerank_depth_limits_what_the_reranker_sees(tiny):
    seen: list[int] = []

    class Counting(KeywordReranker):
        async def score(self, query, passages):
            seen.append(len(passages))
            return await super().score(query, passages)

    tiny.retriever.reranker = Counting("ferryman")
    b = await tiny.retrieve(
        "tiny",
        "river bells ferry dusk salt",
        players_lens(),
        use_pins=False,
        params=RetrievalParams(rerank_depth=2, rerank_mix=None),
    )
    assert seen == [2] and b.ranked_doc_ids
    tiny.retriever.reranker = None


async def test_document_level_arm_lifts_a_scene_whose_terms_spread_over_passages(tiny):
    text, _ = long_doc()
    paras = text.split("\n\n")
    clues = [
        "The smuggler hid by the harbor wall.",
        "At low tide the lantern signal came.",
        "Captain Rusk paid the smuggler in harbor coin.",
        "The tide turned and the lantern went dark.",
    ]
    for i, clue in zip((2, 8, 14, 20), clues, strict=True):
        paras[i] = f"{clue} {paras[i]}"
    root = tiny.campaigns_dir / "tiny" / "lore"
    (root / "scene.md").write_text("---\ntitle: Night at the Docks\n---\n" + "\n\n".join(paras))
    (root / "signal.md").write_text(
        "---\ntitle: Signals\n---\nA smuggler's lantern signal is a harbor custom."
    )
    await tiny.ingest("tiny")
    q = "smuggler lantern signal harbor tide Rusk"
    passages_only = await tiny.retrieve(
        "tiny",
        q,
        players_lens(),
        use_pins=False,
        params=RetrievalParams(dense_enabled=False, doc_lexical_enabled=False),
    )
    # RRF is rank-only: a document first in one arm and second in the other ties with its mirror
    # image, so the document arm's weight breaks the tie here.
    both = await tiny.retrieve(
        "tiny",
        q,
        players_lens(),
        use_pins=False,
        params=RetrievalParams(dense_enabled=False, w_doc=1.5),
    )
    assert (
        passages_only.ranked_doc_ids[0] == "lore/signal"
    )  # one dense passage wins at passage level
    assert both.ranked_doc_ids[0] == "lore/scene"  # the whole scene matches the question better
    assert both.timings_ms["doc_lexical"] >= 0


async def test_campaign_toml_whole_document_chars_is_honoured(tmp_path):
    text, _ = long_doc()
    for whole, expect_whole in ((20000, True), (None, False)):
        root = tmp_path / str(whole) / "campaigns" / "river"
        root.mkdir(parents=True)
        (root / "campaign.toml").write_text(
            'name = "River"\n' + (f"whole_document_chars = {whole}\n" if whole else "")
        )
        (root / "river.md").write_text("# The River\n\n" + text)
        engine = await make_engine(tmp_path / str(whole), milvus=False)
        try:
            await engine.ingest("river")
            doc = (
                await engine.retrieve("river", "the ferryman's true name", frozenset({"players"}))
            ).documents[0]
            assert doc.whole is expect_whole and ("Oswin Pike" in doc.text), whole
            assert ("omitted" not in doc.text) is expect_whole
        finally:
            await close_engine(engine)


async def test_a_pin_is_its_document_not_a_namesake_and_names_are_never_guessed(tmp_path):
    """A stored pin is a document id: another document aliased like that id is not pinned with
    it. Two documents of one title are never picked between silently: the GM is shown the paths."""
    from liminalis.errors import InvalidInput

    root = tmp_path / "campaigns" / "salt"
    (root / "gm").mkdir(parents=True)
    (root / "sessions").mkdir()
    (root / "campaign.toml").write_text('name = "Salt"\ngm_paths = ["gm/**"]\n')
    (root / "factions.md").write_text(
        "---\ntitle: Factions of Saltmarsh\n---\nThe guilds and the watch.\n"
    )
    (root / "guilds.md").write_text(
        "---\ntitle: The Guilds\naliases: [Factions]\n---\nThe salt guild.\n"
    )
    (root / "sessions" / "session-3.md").write_text(
        "---\ntitle: Session 3\n---\nThe party sailed.\n"
    )
    (root / "gm" / "session-3.md").write_text(
        "---\ntitle: Session 3\n---\nThe GM's plan for the sailing.\n"
    )
    engine = await make_engine(tmp_path, milvus=False)
    gm, players = frozenset({"gm"}), frozenset({"players"})
    try:
        await engine.ingest("salt")
        assert await engine.add_pin("salt", "Factions of Saltmarsh", gm) == "factions"
        assert [d for d, _ in await engine.list_pins("salt", players)] == ["factions"]
        bundle = await engine.retrieve("salt", "who sailed?", players)
        assert [d.doc_id for d in bundle.documents if d.pinned] == ["factions"]
        with pytest.raises(InvalidInput) as info:
            await engine.add_pin("salt", "Session 3", gm)
        assert (
            "`gm/session-3`" in info.value.user_message
            and "`sessions/session-3`" in info.value.user_message
        )
        assert await engine.add_pin("salt", "gm/session-3", gm) == "gm/session-3"
        assert (
            await engine.resolve_document("salt", "Session 3", players) == "sessions/session-3"
        )  # one for players
    finally:
        await close_engine(engine)
