"""The campaign memory: activation, associations, spreading, walls, and the answer path."""

from __future__ import annotations

import math
import random

import harness
import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import CANARY, GM_TITLE, make_tiny_campaign

from liminalis.answer import Responder
from liminalis.lens import GM, PLAYERS
from liminalis.memory.activation import DecayRates, EventLog, LeakyIntegrator, base_level
from liminalis.memory.associations import HebbianParams, LearnedEdge, decayed, prune, strengthen
from liminalis.memory.graph import Chunk, Graph
from liminalis.memory.recall import MemoryModel, MemoryParams
from liminalis.memory.spreading import SpreadParams, resonance, spread
from liminalis.store.graph import MemoryStore
from liminalis.testing import FrozenClock

PLAYERS_LENS = frozenset({PLAYERS})
GM_LENS = frozenset({GM})


def _spearman(a: list[float], b: list[float]) -> float:
    def ranks(xs: list[float]) -> list[float]:
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        r = [0.0] * len(xs)
        for k, i in enumerate(order):
            r[i] = float(k)
        return r

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))


@pytest.mark.parametrize("model", [EventLog(), LeakyIntegrator()], ids=lambda m: m.name)
def test_recency_and_frequency_ordering(model):
    clock = FrozenClock()
    t0 = clock.now().timestamp()
    old = model.record(model.empty(), t0)
    recent = model.record(model.empty(), t0 + 3600)
    often = model.empty()
    for k in range(5):
        often = model.record(often, t0 + k * 60)
    now = t0 + 7200
    assert model.value(recent, now, 0.5) > model.value(old, now, 0.5)  # recency
    assert model.value(often, now, 0.5) > model.value(old, now, 0.5)  # frequency
    assert model.value(model.empty(), now, 0.5) == -math.inf


def test_integrator_tracks_the_textbook_equation_on_random_streams():
    """Both models driven by the same random event streams: rank correlation and the bound."""
    rng = random.Random(7)
    log, leaky = EventLog(), LeakyIntegrator()
    exact, approx, worst = [], [], 0.0
    for _ in range(200):
        s1, s2 = log.empty(), leaky.empty()
        t = 0.0
        for _ in range(rng.randint(1, 30)):
            t += rng.expovariate(1 / rng.choice([30.0, 600.0, 86400.0]))
            s1, s2 = log.record(s1, t), leaky.record(s2, t)
        now = t + rng.expovariate(1 / 3600.0) + 1
        for d in (0.3, 0.5):
            e, a = log.value(s1, now, d), leaky.value(s2, now, d)
            exact.append(e)
            approx.append(a)
            worst = max(worst, abs(e - a))
    rho = _spearman(exact, approx)
    print(f"spearman {rho:.5f}, max |ΔB| {worst:.5f}")
    assert rho > 0.999 and worst < 0.01
    assert len(leaky.empty()) == len(leaky.record(leaky.empty(), 1.0))  # constant state


def test_textbook_value():
    assert base_level([10.0, 100.0], 0.5) == pytest.approx(math.log(10**-0.5 + 100**-0.5))


def test_per_type_decay():
    rates = DecayRates()
    assert rates.of("entity") < rates.of("passage") < rates.of("turn")
    assert rates.of("type") < rates.of("session")
    m = LeakyIntegrator()
    st = m.record(m.empty(), 0.0)
    later = 86400.0 * 3
    assert m.value(st, later, rates.of("entity")) > m.value(st, later, rates.of("turn"))


def test_hebbian_increase_decay_and_pruning():
    m = LeakyIntegrator()
    p = HebbianParams(eta=0.3, half_life_s=100.0, floor=0.05)
    e = LearnedEdge("a", "b", "asked", 0.0, "[]", m.empty(), 0.0)
    strengthen(e, 0.0, 1.0, 1.0, eta=p.eta, half_life_s=p.half_life_s, model=m)
    w1 = e.weight
    strengthen(e, 0.0, 1.0, 1.0, eta=p.eta, half_life_s=p.half_life_s, model=m)
    assert 0 < w1 < e.weight < 1  # grows, bounded
    weak = LearnedEdge("a", "c", "asked", 0.0, "[]", m.empty(), 0.0)
    strengthen(weak, 0.0, 0.2, 1.0, eta=p.eta, half_life_s=p.half_life_s, model=m)
    assert weak.weight < w1  # proportional to co-activation
    assert decayed(e.weight, 100.0, p.half_life_s) == pytest.approx(e.weight / 2)
    assert prune([e, weak], 0.0, p) == []
    assert prune([e, weak], 1000.0, p) == [e, weak]  # unreinforced: under the floor


def _star(n: int) -> Graph:
    """A hub entity linked to ``n`` passages plus one passage reached from a single source."""
    vis = (frozenset({PLAYERS, GM}),)
    g = Graph("c", 1)
    g.chunks["e:hub"] = Chunk("e:hub", "entity", "hub", None, vis)
    for i in range(n):
        cid = f"p:x{i}"
        g.chunks[cid] = Chunk(cid, "passage", cid, f"x{i}", vis)
        g.link(cid, "e:hub", "mention", 1.0, vis)
    g.chunks["e:solo"] = Chunk("e:solo", "entity", "solo", None, vis)
    return g


def test_diminishing_returns_at_a_hub():
    g = _star(30)
    sources = {f"p:x{i}": 1.0 for i in range(30)}
    got = spread(g, sources, PLAYERS_LENS, resting=lambda c: 0.0, p=SpreadParams(steps=1, rho=0.5))
    single = spread(
        g, {"p:x0": 1.0}, PLAYERS_LENS, resting=lambda c: 0.0, p=SpreadParams(steps=1, rho=0.5)
    )
    # thirty arrivals count less than twice one (geometric series bound 1/(1-ρ))
    assert got["e:hub"] < 2 * single["e:hub"] + 1e-9
    assert got["e:hub"] > single["e:hub"]


def test_convergence_bucket_ranks_multi_pass_material_first():
    passes = {
        "dense": {"a": 1.0, "shared": 0.3},
        "lexical": {"b": 1.0, "shared": 0.3},
        "entity": {"c": 1.0},
    }
    assert resonance(passes)[0] == "shared"


def test_gate_by_resting_activation():
    vis = (frozenset({PLAYERS, GM}),)
    g = Graph("c", 1)
    for cid in ("e:s", "p:warm", "p:cold"):
        g.chunks[cid] = Chunk(
            cid, "passage" if cid.startswith("p") else "entity", cid, cid[2:], vis
        )
    g.link("e:s", "p:warm", "mention", 1.0, vis)
    g.link("e:s", "p:cold", "mention", 1.0, vis)
    got = spread(
        g, {"e:s": 1.0}, PLAYERS_LENS, resting=lambda c: 2.0 if c == "p:warm" else -math.inf
    )
    assert got["p:warm"] > 1.5 * got["p:cold"] > 0  # the cold end still gets the floor share


def test_walls_in_spreading():
    """A GM-only chunk neither receives nor relays activation for players."""
    pv, gv = (frozenset({PLAYERS, GM}),), (frozenset({GM}),)
    g = Graph("c", 1)
    g.chunks["e:a"] = Chunk("e:a", "entity", "a", None, pv)
    g.chunks["p:secret"] = Chunk("p:secret", "passage", "s", "secret", gv)
    g.chunks["p:beyond"] = Chunk("p:beyond", "passage", "b", "beyond", pv)
    g.link("e:a", "p:secret", "mention", 1.0, gv)
    g.link("p:secret", "p:beyond", "chain", 1.0, gv)
    got = spread(g, {"e:a": 1.0, "p:secret": 1.0}, PLAYERS_LENS, resting=lambda c: 0.0)
    assert "p:secret" not in got and "p:beyond" not in got
    assert "p:secret" in spread(g, {"e:a": 1.0}, GM_LENS, resting=lambda c: 0.0)


async def _memory_engine(tmp_path, name: str, clock: FrozenClock, **params):
    campaigns = tmp_path / name / "campaigns"
    make_tiny_campaign(campaigns)
    engine = await make_engine(tmp_path / name, milvus=False, campaigns_dir=campaigns)
    engine.memory = MemoryModel(
        MemoryStore(harness.db(engine)), clock=clock, params=MemoryParams(**params)
    )
    engine.memory_enabled = True
    await engine.ingest("greyhold")
    return engine


async def test_same_documents_different_histories_different_results(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    clock = FrozenClock()
    a = await _memory_engine(tmp_path, "a", clock, w_memory=4.0)
    b = await _memory_engine(tmp_path, "b", clock, w_memory=4.0)
    try:
        # Campaign a has talked about the session; campaign b about the baron's page.
        for _ in range(3):
            await a.remember_turn(
                await a.scope("greyhold", PLAYERS_LENS),
                "What happened in Session 1?",
                ["sessions/session-01"],
            )
            await b.remember_turn(
                await b.scope("greyhold", PLAYERS_LENS), "Who is Baron Aldric?", ["baron"]
            )
            clock.advance(seconds=60)
        q = "what about the tower and the bells?"
        ra = (await a.retrieve("greyhold", q, PLAYERS_LENS)).ranked_doc_ids
        rb = (await b.retrieve("greyhold", q, PLAYERS_LENS)).ranked_doc_ids
        assert ra != rb
        assert ra[0] == "sessions/session-01" and rb[0] == "baron"
        # isolation: a's history is nowhere in b's store
        assert (await b.memory.store.stats("greyhold"))["active_chunks"] < 10
        assert not any(
            "session-01" in c for c in (await b.memory.store.activations("greyhold", "players"))
        )
    finally:
        await close_engine(a)
        await close_engine(b)


async def test_players_conversation_about_a_secrets_neighbours_never_surfaces_it(tmp_path):
    clock = FrozenClock()
    engine = await _memory_engine(tmp_path, "w", clock, w_memory=1.0)
    try:
        r = Responder(engine, clock=clock)
        for q in [
            "Who is the baron?",
            "What happens in the river tower at night?",
            "Tell me about the baron's tower",
            "Does the baron feed at night?",
        ]:
            ans = await r.respond("greyhold", q, PLAYERS_LENS, chat="c1")
            assert CANARY not in ans.text and GM_TITLE not in ans.text
            clock.advance(seconds=30)
            bundle = await engine.retrieve("greyhold", q, PLAYERS_LENS)
            assert not any(d.startswith("gm/") for d in bundle.ranked_doc_ids)
            assert CANARY not in bundle.text
        store = engine.memory.store
        cat = await harness.catalog(engine, "greyhold")
        g = await engine.memory.graph(cat)
        for c in await store.activations("greyhold", "players"):
            assert c.startswith("q:") or g.visible(c, PLAYERS_LENS)
        for s, d, *_ in await store.edges("greyhold", "players"):
            assert "gm/" not in s and "gm/" not in d
        # The GM's own history lives apart and may lead there.
        gm = await engine.retrieve("greyhold", "the baron at night", GM_LENS)
        assert "gm/plot" in gm.ranked_doc_ids
    finally:
        await close_engine(engine)


async def test_cold_exact_match_stays_reachable(tmp_path):
    clock = FrozenClock()
    engine = await _memory_engine(tmp_path, "c", clock, w_memory=1.0)
    try:
        for _ in range(5):
            await engine.remember_turn(
                await engine.scope("greyhold", PLAYERS_LENS),
                "What happened in Session 1?",
                ["sessions/session-01"],
            )
        ranked = (
            await engine.retrieve("greyhold", "Who pays his guards in silver?", PLAYERS_LENS)
        ).ranked_doc_ids
        assert "baron" in ranked[:2]
    finally:
        await close_engine(engine)


async def test_answer_path_uses_memory_when_enabled_and_hidden_forgets(tmp_path):
    clock = FrozenClock()
    engine = await _memory_engine(tmp_path, "r", clock)
    try:
        r = Responder(engine, clock=clock)
        await r.respond("greyhold", "Who is Baron Aldric?", PLAYERS_LENS, chat="c1")
        stats = await engine.memory.store.stats("greyhold")
        assert (
            stats["active_chunks"] > 0
            and stats["learned_edges"] > 0
            and stats["chunks"]["passage"] >= 3
        )
        bundle = await engine.retrieve("greyhold", "and his tower?", PLAYERS_LENS)
        assert "memory" in bundle.timings_ms
        # The GM hides the baron's page: players' memory of it is forgotten.
        root = engine.campaign_root("greyhold")
        page = root / "baron.md"
        page.write_text(
            page.read_text().replace("title: Baron Aldric", "title: Baron Aldric\nvisibility: gm")
        )
        await engine.ingest("greyhold")
        acts = await engine.memory.store.activations("greyhold", "players")
        assert not any("baron" == c.removeprefix("d:") for c in acts)
        engine.memory_enabled = False
        off = await engine.retrieve("greyhold", "and his tower?", PLAYERS_LENS)
        assert "memory" not in off.timings_ms
    finally:
        await close_engine(engine)


async def test_console_memory_command_is_gms_and_shows_the_graph(tmp_path):
    from bot.console import ConsoleAdapter
    from bot.service import BotService

    clock = FrozenClock()
    engine = await _memory_engine(tmp_path, "s", clock)
    try:
        service = BotService(engine, default_campaign="greyhold")
        player = ConsoleAdapter(service, campaign="greyhold", lens="players")
        await player.ask("Who is Baron Aldric?")
        denied = await player.ask("/memory")
        assert "Most active" not in denied.text
        gm = ConsoleAdapter(service, campaign="greyhold", lens="gm")
        reply = await gm.ask("/memory players")
        assert (
            "Most active" in reply.text
            and "Baron Aldric" in reply.text
            and "Strongest associations" in reply.text
        )
        assert CANARY not in reply.text
    finally:
        await close_engine(engine)
