"""Context assembly: budget degrade order and floors, tiering guards, prompt layout, rolling memory."""

from __future__ import annotations

import asyncio
import json

import pytest

from liminalis.context.budget import CLIP_MARKER, BudgetParams, clip_text, fit_budget
from liminalis.context.material import ContextDoc, count_blocks, plain
from liminalis.context.prompt import build_prompt
from liminalis.context.rolling import RollingMemory, is_follow_up, memory_key
from liminalis.context.tiering import TierParams, extractive_summary, tier_documents
from liminalis.context.tokens import count_tokens
from liminalis.ports import Message
from liminalis.store.sqlite import Database
from liminalis.testing import FrozenClock
from liminalis.types import Span

FILLER = (
    "The river fog rolled over the quays and the lamplighters went about their slow rounds. "
    "Merchants argued about the price of tallow while the gulls quarrelled on the pilings. "
)


def para(i: int) -> str:
    return f"Paragraph {i}. " + FILLER * 2


def doc(
    doc_id: str, *, rank: int, paras: int = 6, pin: str = "", type: str = "lore", extra: str = ""
) -> ContextDoc:
    text = "\n\n".join([para(i) for i in range(paras)] + ([extra] if extra else []))
    return ContextDoc(
        doc_id=doc_id, title=doc_id.title(), type=type, segments=plain(text), pin=pin, rank=rank
    )


# -- budget ------------------------------------------------------------------------------------


def test_within_budget_changes_nothing():
    docs = [doc("a", rank=0), doc("b", rank=1)]
    fitted = fit_budget(docs, 100_000)
    assert fitted.documents == tuple(docs)
    assert not fitted.dropped and not fitted.clipped and not fitted.over_budget
    assert fitted.tokens == sum(count_blocks(docs))


def test_drops_weakest_recalled_first_and_never_a_pin():
    docs = [doc("pin", rank=0, pin="pinned"), doc("a", rank=1), doc("b", rank=2), doc("c", rank=3)]
    sizes = count_blocks(docs)
    budget = sum(sizes) - sizes[3] + 5  # dropping the weakest is enough
    fitted = fit_budget(docs, budget, params=BudgetParams(doc_floor=1))
    assert fitted.dropped == ("c",)
    assert fitted.clipped == ()
    assert [d.doc_id for d in fitted.documents] == ["pin", "a", "b"]
    assert fitted.total <= budget


def test_drops_down_to_floor_then_clips_largest_with_markers():
    docs = [
        doc("a", rank=0, paras=12),
        doc("b", rank=1, paras=4),
        doc("c", rank=2, paras=4),
        doc("d", rank=3, paras=4),
    ]
    sizes = count_blocks(docs)
    budget = sizes[0] // 2 + sizes[1] + 10
    fitted = fit_budget(
        docs, budget, params=BudgetParams(doc_floor=2, clip_floor=100, clip_weakest_first=False)
    )
    assert fitted.dropped == ("d", "c")  # weakest first, stopping at the floor of 2
    assert fitted.clipped[0] == "a"  # the largest is clipped first
    a = next(d for d in fitted.documents if d.doc_id == "a")
    assert a.tier == "clipped" and CLIP_MARKER.search(a.text)
    assert fitted.total <= budget and not fitted.over_budget


def test_clips_weakest_first_and_leaves_the_strongest_hit_whole():
    docs = [doc("a", rank=0, paras=12), doc("b", rank=1, paras=6), doc("c", rank=2, paras=6)]
    sizes = count_blocks(docs)
    budget = sum(sizes) - sizes[2] // 2
    fitted = fit_budget(
        docs, budget, params=BudgetParams(doc_floor=3, clip_floor=100, clip_weakest_first=True)
    )
    assert fitted.dropped == () and fitted.clipped == ("c",)
    assert fitted.documents[0] == docs[0]  # the strongest (and largest) hit reads in full
    assert CLIP_MARKER.search(fitted.documents[2].text) and fitted.total <= budget


def test_too_small_budget_returns_more_than_asked_and_says_so():
    docs = [
        doc("pin", rank=0, pin="always", paras=8),
        doc("a", rank=1, paras=8),
        doc("b", rank=2, paras=8),
    ]
    fitted = fit_budget(docs, 50, params=BudgetParams(doc_floor=1, clip_floor=120))
    assert [d.doc_id for d in fitted.documents] == ["pin", "a"]  # pin survives, floor of 1 recalled
    assert fitted.over_budget and fitted.total > 50
    assert any("below the floors" in n for n in fitted.notes)
    for d in fitted.documents:
        assert count_tokens(d.block()) <= 120 + 60  # clipped down to (about) the floor
        assert CLIP_MARKER.search(d.text)


def test_clip_keeps_what_matches_the_question():
    needle = "The Drowned Bell rang thirteen times on the ice before the ice broke."
    text = "\n\n".join([para(i) for i in range(5)] + [needle] + [para(i) for i in range(5, 10)])
    out, n = clip_text(text, 150, query="How many times did the Drowned Bell ring?")
    assert needle in out
    assert "Paragraph 9" not in out
    assert len(CLIP_MARKER.findall(out)) == 2  # before and after the kept unit
    assert n == count_tokens(out) and n < count_tokens(text)


def test_clip_keeps_a_scene_together():
    scene = [
        "Wren met the ferryman at the old bell tower at dusk.",
        "He said nothing for a long while; the water slapped at the stones below them.",
        "Then Wren paid the ferryman in river silver, and he took her across.",
    ]
    text = "\n\n".join([para(i) for i in range(4)] + scene + [para(i) for i in range(4, 8)])
    query = "What did Wren pay the ferryman?"
    out, _ = clip_text(text, 90, query=query)
    assert all(s in out for s in scene)  # the connective line between the matches survives
    assert len(CLIP_MARKER.findall(out)) == 2  # one contiguous run
    scattered, _ = clip_text(text, 90, query=query, contiguous=False)
    assert scene[1] not in scattered  # what the old unit-by-unit choice lost


# -- tiering -----------------------------------------------------------------------------------

MATCH = "Corran Vey went down into the river with the Drowned Bell and never came back."


def background(
    doc_id: str, *, rank: int, type: str = "lore", pin: str = ""
) -> tuple[ContextDoc, str, Span]:
    full = "\n\n".join([para(i) for i in range(4)] + [MATCH] + [para(i) for i in range(4, 8)])
    start = full.index(MATCH)
    rendered = ContextDoc(doc_id, doc_id.title(), type, plain(full), rank=rank, pin=pin)
    return rendered, full, Span(start, start + len(MATCH))


def run_tiering(docs: list[tuple[ContextDoc, str, Span]], **kw):
    return tier_documents(
        [d for d, _, _ in docs],
        {d.doc_id: f for d, f, _ in docs},
        {d.doc_id: (s,) for d, _, s in docs},
        params=TierParams(**kw),
    )


def test_background_prose_becomes_summary_plus_matched_passage():
    docs = [background("strong", rank=0), background("bg", rank=1)]
    out, report = run_tiering(docs, keep_full=1, context_chars=0)
    assert report.tiered == ("bg",)
    bg = out[1]
    assert bg.tier == "tiered" and bg.text.startswith("Summary: ")
    assert MATCH in bg.text  # guard 1: the matched passage is kept verbatim
    assert "characters omitted" in bg.text
    assert count_tokens(bg.text) < count_tokens(docs[1][0].text) / 2
    assert out[0] == docs[0][0]  # guard 4: the strongest hit is untouched


def test_background_passage_is_widened_to_its_neighbouring_paragraphs():
    docs = [background("strong", rank=0), background("bg", rank=1)]
    out, report = run_tiering(docs, keep_full=1, context_chars=200)
    bg = out[1].text
    assert report.tiered == ("bg",)
    assert MATCH in bg and para(3) in bg and para(4) in bg  # the paragraphs either side
    assert "Paragraph 2." not in bg and "Paragraph 5." not in bg
    assert bg.count("characters omitted") == 2


def test_character_sheet_is_exempt_but_prose_is_not():
    docs = [
        background("strong", rank=0),
        background("sheet", rank=1, type="sheet"),
        background("story", rank=2),
    ]
    out, report = run_tiering(docs, keep_full=1)
    assert out[1] == docs[1][0]
    assert ("sheet", "exempt type") in report.refused
    assert report.tiered == ("story",)


def test_pins_are_never_tiered():
    docs = [background("strong", rank=0), background("pinned", rank=1, pin="pinned")]
    out, report = run_tiering(docs, keep_full=0)
    assert out[1] == docs[1][0]
    assert ("pinned", "pinned") in report.refused
    assert report.tiered == ("strong",)  # keep_full=0: even rank 0 tiers; the pin never does


def test_document_without_matched_passages_is_not_tiered():
    d, full, _ = background("bg", rank=3)
    out, report = tier_documents([d], {"bg": full}, {"bg": ()}, params=TierParams(keep_full=0))
    assert out == [d] and ("bg", "no matched passages") in report.refused


def test_compression_guard_refuses_a_summary_larger_than_what_it_replaces():
    full = "\n\n".join([MATCH, "A short coda follows here at the end."])
    d = ContextDoc("bg", "Bg", "lore", plain(full), rank=3)
    out, report = tier_documents(
        [d], {"bg": full}, {"bg": (Span(0, len(full)),)}, params=TierParams(keep_full=0)
    )
    assert out == [d]
    assert any(g.startswith("compression") for _, g in report.refused)
    # A long summary from the summarization pass is refused too when the passages are most of it.
    d2, full2, s2 = background("bg2", rank=3)
    huge = "An enormous summary sentence that goes on. " * 200
    out2, report2 = tier_documents(
        [d2],
        {"bg2": full2},
        {"bg2": (s2,)},
        summaries={"bg2": huge},
        params=TierParams(keep_full=0),
    )
    assert ("bg2", "compression: summary") in report2.refused
    assert huge not in out2[0].text and MATCH in out2[0].text


def test_extractive_summary_leads_and_fits():
    text = (
        "Emberfall is a river city of bells. "
        + FILLER * 20
        + "The bells of Emberfall ring for the drowned."
    )
    s = extractive_summary(text, 40)
    assert s.startswith("Emberfall is a river city of bells.")
    assert count_tokens(s) <= 40


def test_extractive_summary_of_zero_or_one_token_terminates():
    # A summary budget of 0 (summaries off) once looped forever on the lead-cutting step.
    text = "Emberfall is a river city of bells, old and drowned. " + FILLER * 5
    assert extractive_summary(text, 0) == ""
    assert extractive_summary(text, 1).endswith("…")


def test_summary_from_the_pass_is_preferred():
    docs = [background("strong", rank=0), background("bg", rank=1)]
    out, _ = tier_documents(
        [d for d, _, _ in docs],
        {d.doc_id: f for d, f, _ in docs},
        {d.doc_id: (s,) for d, _, s in docs},
        summaries={"bg": "A written summary."},
        params=TierParams(keep_full=1),
    )
    assert out[1].text.startswith("Summary: A written summary.")


# -- prompt ------------------------------------------------------------------------------------


def test_stable_half_is_byte_identical_and_breakpoint_fixed():
    stable = [
        ContextDoc(
            "overview",
            "Overview",
            "overview",
            plain("Emberfall is a river city."),
            pin="always",
            tier="whole",
        )
    ]
    p1 = build_prompt(
        instructions="Rules.",
        stable=stable,
        volatile=[doc("a", rank=0)],
        question="Who rang the bell?",
        budget=6000,
    )
    p2 = build_prompt(
        instructions="Rules.",
        stable=stable,
        volatile=[doc("b", rank=0, paras=2)],
        question="Where?",
        story="- Asked: who rang the bell",
        recent=[Message("user", "q"), Message("assistant", "a")],
        budget=6000,
    )
    assert p1.cache_upto == p2.cache_upto == 2
    assert p1.system[:2] == p2.system[:2]
    assert p1.system[2] != p2.system[2]
    assert "Where?" not in p2.stable and "story so far" not in p2.stable
    assert [m.role for m in p2.messages] == ["user", "assistant", "user"]
    assert p2.messages[-1].content == "Where?"


def _three_hits() -> tuple[list[ContextDoc], dict[str, str], dict[str, tuple[Span, ...]]]:
    volatile, texts, matched = [], {}, {}
    for i, name in enumerate(["first", "second", "third"]):
        full = "\n\n".join(
            [para(j) for j in range(6)] + [f"{MATCH} ({name})"] + [para(j) for j in range(6, 12)]
        )
        texts[name] = full
        start = full.index(MATCH)
        matched[name] = (Span(start, start + len(MATCH)),)
        volatile.append(ContextDoc(name, name.title(), "lore", plain(full), rank=i))
    return volatile, texts, matched


def test_budget_tiers_the_second_hit_before_clipping_the_first():
    volatile, texts, matched = _three_hits()
    whole = count_tokens(texts["first"])
    p = build_prompt(
        instructions="Rules.",
        stable=[],
        volatile=volatile,
        question="Who went into the river?",
        texts=texts,
        matched=matched,
        budget=whole + 900,
        tier=TierParams(keep_full=3, context_chars=0),
    )
    first = p.documents[0]
    assert first.doc_id == "first" and first.text == texts["first"]  # read whole, not clipped
    assert [d.tier for d in p.documents[1:]] == ["tiered", "tiered"]
    assert p.tokens <= whole + 900 and not (p.fitted and p.fitted.clipped)
    unbudgeted = build_prompt(
        instructions="Rules.",
        stable=[],
        volatile=volatile,
        question="q",
        texts=texts,
        matched=matched,
        tier=TierParams(keep_full=3, context_chars=0),
    )
    assert all(
        d.text == texts[d.doc_id] for d in unbudgeted.documents
    )  # no budget: all three whole


def test_budget_drops_background_summaries_before_clipping_passages():
    volatile, texts, matched = _three_hits()
    kw = dict(
        instructions="Rules.",
        stable=[],
        volatile=volatile,
        question="Who went into the river?",
        texts=texts,
        matched=matched,
    )
    with_summaries = build_prompt(**kw, tier=TierParams(keep_full=1, context_chars=0)).tokens
    without = build_prompt(
        **kw, tier=TierParams(keep_full=1, context_chars=0, summary_tokens=0)
    ).tokens
    assert with_summaries - without > 60  # two summaries to give up
    budget = (with_summaries + without) // 2
    p = build_prompt(**kw, budget=budget, tier=TierParams(keep_full=1, context_chars=0))
    assert p.documents[0].text == texts["first"]
    for d in p.documents[1:]:
        assert d.tier == "tiered" and "Summary:" not in d.text and MATCH in d.text
    assert not (p.fitted and p.fitted.clipped) and p.tokens <= budget
    kept = build_prompt(
        **kw,
        budget=budget,
        tier=TierParams(keep_full=1, context_chars=0, drop_summaries_to_fit=False),
    )
    assert kept.fitted is not None and kept.fitted.clipped  # keeping the summaries costs a clip


def test_budget_counts_the_whole_prompt():
    volatile = [doc(c, rank=i, paras=10) for i, c in enumerate("abcdefg")]
    p = build_prompt(
        instructions="Rules.",
        stable=[],
        volatile=volatile,
        question="q",
        budget=1500,
        budget_params=BudgetParams(doc_floor=2),
        tier=TierParams(enabled=False),
    )
    assert p.tokens <= 1500 + 30  # separators between blocks are the only slack
    assert p.fitted is not None and p.fitted.dropped


# -- rolling memory ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("and what did she do next?", True),
        ("What did he say?", True),
        ("who took his body away?", True),
        ("What did Tobin hear when he touched the bell?", False),  # names someone new
        ("Who is the Lantern Queen?", False),  # no pronoun
        (
            "and what did she tell the harbourmaster about the old bells in the winter of the freeze?",
            False,
        ),  # long
        ("what about @Vessa?", False),
    ],
)
def test_is_follow_up(question, expected):
    assert is_follow_up(question) is expected


async def test_memory_persists_across_restart_and_rolls_into_story(tmp_path):
    clock = FrozenClock()
    players = frozenset({"players"})
    async with Database(tmp_path / "m.sqlite3") as db:
        mem_store = RollingMemory(db, clock=clock, recent_turns=2)
        mem = await mem_store.load("emberfall", "discord:1", players)
        for i in range(4):
            await mem_store.record(
                mem,
                question=f"Question {i} about Vessa?",
                answer=f"Answer {i}: Vessa paid the fine.",
                documents=[
                    ContextDoc(
                        "factions/ashen-watch",
                        "The Ashen Watch",
                        "faction",
                        plain("t"),
                        section="Reputation",
                    )
                ],
                stable=["overview"],
                sources=["The Ashen Watch — Reputation"],
                generation=7,
            )
            clock.advance(seconds=10)
    async with Database(tmp_path / "m.sqlite3") as db:  # a restart: new connection, new objects
        mem = await RollingMemory(db, clock=clock, recent_turns=2).load(
            "emberfall", "discord:1", players
        )
    assert [q for q, _ in mem.turns] == ["Question 2 about Vessa?", "Question 3 about Vessa?"]
    assert [m.role for m in mem.recent_messages()] == ["user", "assistant", "user", "assistant"]
    assert (
        len(mem.story) == 2 and "Question 0" in mem.story[0][1] and "Question 1" in mem.story_text()
    )
    assert mem.doc_scores["factions/ashen-watch"] > 1.0
    assert mem.entity_scores["Vessa"] > 1.0
    assert mem.sections == {"factions/ashen-watch": ["Reputation"]}
    assert [d.doc_id for d in mem.loaded_documents()] == ["factions/ashen-watch"]
    assert mem.loaded_stable == ["overview"] and mem.loaded_generation == 7


async def test_an_old_turn_joins_the_story_with_its_own_sources(tmp_path):
    async with Database(tmp_path / "m.sqlite3") as db:
        store = RollingMemory(db, clock=FrozenClock(), recent_turns=1)
        mem = await store.load("c", "chat", frozenset({"players"}))
        await store.record(
            mem,
            question="Who rang the bell?",
            answer="Mirel.",
            documents=[],
            stable=[],
            sources=["The Bells"],
            generation=1,
        )
        mem = await store.load("c", "chat", frozenset({"players"}))  # across a restart, too
        await store.record(
            mem,
            question="Where is the ferry?",
            answer="At the quay.",
            documents=[],
            stable=[],
            sources=["The Ferry"],
            generation=1,
        )
    assert len(mem.story) == 1
    assert "Who rang the bell?" in mem.story[0][1] and "The Bells" in mem.story[0][1]
    assert "The Ferry" not in mem.story_text()


async def test_two_answers_at_once_in_one_chat_are_both_kept(tmp_path):
    """Two players with one lens ask at the same moment: both load the same state, and both
    exchanges are recorded (numbering from the loaded state made the second one collide)."""
    async with Database(tmp_path / "m.sqlite3") as db:
        store = RollingMemory(db, clock=FrozenClock(), recent_turns=4)
        first, second = [await store.load("c", "chat", frozenset({"players"})) for _ in range(2)]
        await asyncio.gather(
            store.record(
                first,
                question="Who rang the bell?",
                answer="Mirel.",
                documents=[],
                stable=[],
                sources=[],
                generation=1,
            ),
            store.record(
                second,
                question="Where is the tower?",
                answer="By the river.",
                documents=[],
                stable=[],
                sources=[],
                generation=1,
            ),
        )
        mem = await store.load("c", "chat", frozenset({"players"}))
    assert sorted(mem.turns) == [
        ("Where is the tower?", "By the river."),
        ("Who rang the bell?", "Mirel."),
    ]


async def test_writers_never_share_a_transaction(tmp_path):
    """One coroutine's failed write is rolled back alone: another's write waits for it instead
    of committing its half-done statements (the service shares one connection)."""
    async with Database(tmp_path / "m.sqlite3") as db:
        inside = asyncio.Event()

        async def failing() -> None:
            with pytest.raises(RuntimeError):
                async with db.write() as conn:
                    await conn.execute("INSERT INTO budgets VALUES ('half', 'done', 1)")
                    inside.set()
                    await asyncio.sleep(0.05)
                    raise RuntimeError("the rest of the swap failed")

        async def other() -> None:
            await inside.wait()
            await db.execute("INSERT INTO budgets VALUES ('other', 'write', 2)")

        await asyncio.gather(failing(), other())
        assert [r["campaign"] for r in await db.fetchall("SELECT campaign FROM budgets")] == [
            "other"
        ]


async def test_story_stays_bounded_hierarchically(tmp_path):
    async with Database(tmp_path / "m.sqlite3") as db:
        store = RollingMemory(db, clock=FrozenClock(), recent_turns=1, story_lines=3)
        mem = await store.load("c", "chat", frozenset({"players"}))
        for i in range(10):
            await store.record(
                mem,
                question=f"q{i}?",
                answer=f"a{i}.",
                documents=[],
                stable=[],
                sources=[],
                generation=1,
            )
    levels = [lv for lv, _ in mem.story]
    assert 1 in levels and levels.count(0) <= 3
    assert "q0" in mem.story_text()  # folded, not forgotten


async def test_memory_is_walled_by_lens(tmp_path):
    async with Database(tmp_path / "m.sqlite3") as db:
        store = RollingMemory(db, clock=FrozenClock())
        gm = await store.load("c", "chat", frozenset({"gm"}))
        await store.record(
            gm,
            question="secret?",
            answer="The ninth bell is hollow.",
            documents=[],
            stable=[],
            sources=[],
            generation=1,
        )
        players = await store.load("c", "chat", frozenset({"players"}))
        assert players.turns == [] and players.story == []
        # A turn written under the players key but carrying a GM lens (corruption) is skipped on load.
        await db.execute(
            "INSERT INTO chat_turns (chat_key, seq, role, content, lens) "
            "VALUES (?, 0, 'user', 'q', ?), (?, 1, 'assistant', 'hollow', ?)",
            (
                memory_key("c", "chat", frozenset({"players"})),
                json.dumps(["gm"]),
                memory_key("c", "chat", frozenset({"players"})),
                json.dumps(["gm"]),
            ),
        )
        players = await store.load("c", "chat", frozenset({"players"}))
        assert players.turns == []
        assert (await store.load("c", "chat", frozenset({"gm"}))).turns == [
            ("secret?", "The ninth bell is hollow.")
        ]


def test_long_texts_are_counted_once():
    """A whole document is counted on every question that retrieves it: long texts are
    remembered (same count), short ones are not kept."""
    from liminalis.context.tokens import _MEMO_CHARS, default_counter

    c = default_counter()
    long_text = "The drowned bell rang beneath the ice. " * (_MEMO_CHARS // 30)
    before = c._count_long.cache_info()
    first, second = c.count(long_text), c.count(long_text)
    after = c._count_long.cache_info()
    assert first == second == len(c._tok.encode(long_text, add_special_tokens=False).ids)
    assert after.hits == before.hits + 1 and after.misses == before.misses + 1
    c.count("short text")
    assert c._count_long.cache_info().currsize == after.currsize


class _Recording:
    """The real counter, recording the length of every text it tokenizes."""

    def __init__(self) -> None:
        from liminalis.context.tokens import default_counter

        self.inner = default_counter()
        self.lengths: list[int] = []

    def count(self, text: str) -> int:
        self.lengths.append(len(text))
        return self.inner.count(text)


def _huge_document() -> str:
    return "\n\n".join(
        f"Chapter {i}. The Vigil Key passed from the ferryman to the abbess, who hid it "
        f"beneath the {i}th bell of the drowned chapel."
        for i in range(12_000)
    )


def test_word_floor_bounds_the_count_and_at_most_agrees_with_it():
    from liminalis.context.tokens import at_most, default_counter, word_floor

    c = default_counter()
    for text in [
        "",
        "one",
        "Don't—stop! The ninth bell's hollow.",
        para(3),
        MATCH * 40,
        "ünïcödé wörds ﬁne",
        "bad bytes \ufffd\ufffd here \ufffd",
    ]:
        n = c.count(text)
        assert word_floor(text) <= n
        assert [at_most(c, text, k) for k in (n - 1, n, n + 1)] == [False, True, True]


def test_a_huge_document_is_never_tokenized_whole():
    """A multi-megabyte document retrieved (or pinned) for the first time cost 3–6 s a question
    in token counting alone. Its whole text is compared with caps by its word count; a standing
    copy is clipped from paragraph-sized counts, once."""
    from liminalis.context.material import ContextDoc
    from liminalis.context.prompt import stable_document

    huge = _huge_document()
    start = huge.index("Chapter 7000.")
    span = Span(start, start + 40)
    strongest = ContextDoc("big", "Big", "lore", plain(huge[start : start + 200]), rank=0)
    background_doc = ContextDoc("big2", "Big two", "lore", plain(huge[start : start + 200]), rank=1)
    c = _Recording()
    out, report = tier_documents(
        [strongest, background_doc],
        {"big": huge, "big2": huge},
        {"big": (span,), "big2": (span,)},
        params=TierParams(keep_full=1),
        counter=c,
    )
    assert out[0].tier != "whole"  # far over the whole-document cap
    assert report.tiered == ("big2",) and "Chapter 7000." in out[1].text
    assert max(c.lengths) < 20_000
    c.lengths.clear()
    standing = stable_document(ContextDoc("big", "Big", "lore"), huge, cap_tokens=600, counter=c)
    assert (
        standing.tier == "clipped"
        and standing.text.startswith("Chapter 0.")
        and CLIP_MARKER.search(standing.text)
    )
    assert c.lengths and max(c.lengths) < 20_000
    c.lengths.clear()
    again = stable_document(ContextDoc("big", "Big", "lore"), huge, cap_tokens=600, counter=c)
    assert again.text == standing.text
    assert not c.lengths  # the next question pays nothing


def test_clip_keeps_what_retrieval_matched_even_without_the_questions_words():
    """Evidence found by meaning shares few words with the question; clipping by word overlap
    alone kept the document's head and cut the matched paragraph."""
    paras = [
        f"Harbour note {i}: the gulls circled the pier and the tide went out again."
        for i in range(40)
    ]
    paras[30] = "The monarch of the night bazaar wears a mask of hammered silver and never speaks."
    text = "\n\n".join(paras)
    question = "Who rules the moonlit market?"
    kept, _ = clip_text(text, 150, query=question, prefer=[paras[30]])
    assert "monarch of the night bazaar" in kept
    head, _ = clip_text(text, 150, query=question)
    assert "monarch" not in head and "Harbour note 0" in head
