"""The seams the long paths were split at: stages a test can call alone.

``render_document`` and ``fallback_passages`` are public retrieval functions (the campaign
memory renders its own candidates through them); ``_lens_filter`` decides the vector store's
filter for a lens before any search runs.
"""

from __future__ import annotations

from liminalis.adapters.milvus import _lens_filter
from liminalis.lens import GM, NOT_GM, PLAYERS
from liminalis.retrieval.catalog import Catalog, PassageInfo
from liminalis.retrieval.render import RenderParams, fallback_passages, render_document
from liminalis.text import Tokenizer
from liminalis.types import Document, Span

PLAYERS_ONLY = frozenset({PLAYERS})
TEXT = "The bells ring at dawn.\n\nThe drowned duke hides in the vault.\n\nAle at the inn."


def _catalog() -> Catalog:
    tok = Tokenizer()
    doc = Document("harbour", "lore/harbour.md", "The Harbour", TEXT, PLAYERS_ONLY)
    passages: dict[str, PassageInfo] = {}
    start = 0
    for i, (part, heading) in enumerate(
        zip(TEXT.split("\n\n"), ("Dawn", "Vault", ""), strict=True)
    ):
        begin = TEXT.index(part, start)
        start = begin + len(part)
        pid = f"harbour#{i}"
        passages[pid] = PassageInfo(
            pid, "harbour", i, begin, start, heading, PLAYERS_ONLY, tuple(tok(part)), None, None
        )
    by_doc = {"harbour": list(passages)}
    return Catalog("c", 1, {"harbour": doc}, passages, by_doc, tok, k1=0.9, b=0.4)


def test_fallback_passages_are_those_sharing_most_query_terms_else_the_first() -> None:
    cat = _catalog()
    tok = Tokenizer()
    assert fallback_passages(cat, "harbour", tok("where does the drowned duke hide")) == [
        "harbour#1"
    ]
    # Two passages share one term each: both, the earlier first.
    assert fallback_passages(cat, "harbour", tok("bells and ale")) == ["harbour#0", "harbour#2"]
    assert fallback_passages(cat, "harbour", tok("nothing matches")) == ["harbour#0"]


def test_render_document_renders_around_the_given_passages_with_their_headings() -> None:
    cat = _catalog()
    # Shorter than the document, no widening or snapping: the matched passage alone shows.
    params = RenderParams(whole_chars=10, expand_chars=0, merge_gap=0, snap_chars=0)
    doc = render_document(
        cat, "harbour", ["harbour#1"], pinned=False, score=0.5, params=params, related=["harbour#2"]
    )
    vault = cat.passages["harbour#1"]
    inn = cat.passages["harbour#2"]
    assert doc.headings == ("Vault",)
    assert doc.matched == (Span(vault.start, vault.end),)
    assert doc.related == (Span(inn.start, inn.end),)
    assert not doc.whole and (doc.title, doc.score, doc.pinned) == ("The Harbour", 0.5, False)
    shown = "".join(s.text for s in doc.segments if s.kind == "text")
    assert "drowned duke" in shown and "bells" not in shown


def test_the_lens_filter_sees_nothing_for_a_lens_without_names_and_walls_the_rest() -> None:
    assert _lens_filter(frozenset(), None) is None
    assert _lens_filter(frozenset({NOT_GM}), None) is None
    assert _lens_filter(PLAYERS_ONLY, None) == 'array_contains_any(vis, ["players"])'
    # With the campaign's visibility sets known, only the sets the lens may see, by key; none: no search.
    assert _lens_filter(PLAYERS_ONLY, [frozenset({GM})]) is None
    assert _lens_filter(PLAYERS_ONLY, [frozenset({GM}), PLAYERS_ONLY]).startswith("vkey in [")
    # The GM: the shared views of files with hidden sections are left out, unless known absent.
    assert _lens_filter(frozenset({GM}), None) == 'not array_contains(vis, "-gm")'
    assert _lens_filter(frozenset({GM}), [PLAYERS_ONLY]) == ""
    assert _lens_filter(frozenset({GM}), [frozenset({PLAYERS, NOT_GM})]).startswith("vkey in [")
