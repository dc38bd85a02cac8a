"""The sample campaign through the real model and real Milvus Lite: lenses and known answers."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from liminalis.lens import gm_lens, players_lens

pytestmark = pytest.mark.slow  # real models or Milvus Lite throughout

QUESTIONS = json.loads((ROOT / "tests" / "data" / "emberfall_questions.json").read_text())


def lens_of(item) -> frozenset[str]:
    name = item.get("lens", "players")
    return players_lens() if name == "players" else players_lens(name)


def doc_ids(paths):
    return {p.rsplit(".", 1)[0] for p in paths}


async def test_sample_has_the_promised_shape(sample_engine):
    cat = await sample_engine.retriever.catalog("emberfall")
    docs = cat.documents.values()
    assert len(docs) >= 25
    assert sum(d.type == "session" for d in docs) >= 6
    assert any(d.type == "sheet" for d in docs)
    assert max(len(d.text) for d in docs) > 15000
    assert cat.documents["gm/villain-plan"].visibility == frozenset(
        {"gm"}
    )  # no front matter, GM folder


async def test_known_questions_find_their_documents(sample_engine):
    found = 0
    for item in QUESTIONS["questions"]:
        b = await sample_engine.retrieve("emberfall", item["question"], lens_of(item))
        if doc_ids(item["expected"]) & set(b.ranked_doc_ids[:5]):
            found += 1
    assert found / len(QUESTIONS["questions"]) >= 0.8


async def test_players_lens_never_returns_gm_text(sample_engine):
    canaries = [c.lower() for c in QUESTIONS["gm_canaries"]]
    asks = (
        [q["question"] for q in QUESTIONS["gm_secret_questions"]]
        + canaries
        + [f"@{d}" for d in ("gm/secrets", "secrets/true-heir", "gm/villain-plan")]
        + ["tell me about the true heir secrets", "villain plan", "@[Villain Plan] what happens?"]
    )
    for q in asks:
        b = await sample_engine.retrieve("emberfall", q, players_lens())
        text = (
            b.text + " ".join(b.ranked_doc_ids) + " ".join(h.passage_id for h in b.hits)
        ).lower()
        for c in canaries:
            assert c not in text, (q, c)
        assert not [d for d in b.ranked_doc_ids if d.startswith(("gm/", "secrets/"))], q
        # personal lenses see their backstory only
    for lens_name, phrases in QUESTIONS["lens_canaries"].items():
        other = next(n for n in QUESTIONS["lens_canaries"] if n != lens_name)
        for phrase in phrases:
            own = await sample_engine.retrieve("emberfall", phrase, players_lens(lens_name))
            assert phrase.lower() in own.text.lower()
            theirs = await sample_engine.retrieve("emberfall", phrase, players_lens(other))
            plain = await sample_engine.retrieve("emberfall", phrase, players_lens())
            assert phrase.lower() not in theirs.text.lower()
            assert phrase.lower() not in plain.text.lower()


async def test_gm_lens_sees_the_secrets(sample_engine):
    for item in QUESTIONS["gm_secret_questions"]:
        b = await sample_engine.retrieve("emberfall", item["question"], gm_lens())
        assert doc_ids(item["gm_expected"]) & set(b.ranked_doc_ids[:5]), item["question"]
