"""The collector policy of the composition root (:mod:`liminalis.heap`): what has settled is
frozen out of the full collection's walk, a frozen object is still freed when dropped, and
cyclic garbage is never kept for good."""

from __future__ import annotations

import gc
import weakref

import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from liminalis import research
from liminalis.heap import FrozenHeap, LooseHeap
from liminalis.retrieval.catalog import Catalog, PassageInfo
from liminalis.retrieval.lexical import BM25Index
from liminalis.testing import MemoryVectorStore
from liminalis.types import Document


class _Node:
    def __init__(self) -> None:
        self.other: object = None


@pytest.fixture(autouse=True)
def _thawed():
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the suite runs with the collector as it found it


def test_what_settled_is_frozen_out_of_the_walk():
    heap = FrozenHeap()
    heap.start()
    kept = [[i] for i in range(1000)]
    heap.settle()
    tracked = {id(o) for o in gc.get_objects()}  # every generation but the permanent one
    assert not any(id(x) in tracked for x in kept)
    assert gc.get_freeze_count() >= len(kept)


def test_a_frozen_object_is_freed_when_dropped():
    heap = FrozenHeap()
    heap.start()
    node = _Node()
    ref = weakref.ref(node)
    heap.settle()
    del node
    assert ref() is None  # reference counting, not a collection


def test_cyclic_garbage_is_collected_not_frozen():
    heap = FrozenHeap()
    heap.start()
    young, old = _Node(), _Node()
    young.other, old.other = young, old
    gc.collect(1)  # ``old`` survives two young collections: it sits in the oldest generation
    refs = [weakref.ref(young), weakref.ref(old)]
    del young, old
    heap.prepare()  # a rebuild starts
    heap.settle()
    assert [r() for r in refs] == [None, None]


def test_cycles_that_die_frozen_go_once_the_frozen_heap_has_grown():
    heap = FrozenHeap(regrow=2.0)
    heap.start()
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    heap.settle()  # frozen while alive
    del a, b  # now garbage that no collection walks
    gc.collect()
    assert ref() is not None
    assert heap.full_collections == 1
    grown = [[i] for i in range(heap.baseline + 1000)]  # the frozen heap more than doubles
    heap.settle()
    assert heap.full_collections == 2
    assert ref() is None
    assert heap.baseline >= len(grown)
    heap.settle()  # no growth since: no further full collection
    assert heap.full_collections == 2


def test_regrow_must_leave_room():
    with pytest.raises(ValueError):
        FrozenHeap(regrow=1.0)
    LooseHeap().prepare()
    LooseHeap().settle()


class _Recorder:
    def __init__(self) -> None:
        self.settled = 0
        self.prepared = 0

    def prepare(self) -> None:
        self.prepared += 1

    def settle(self) -> None:
        self.settled += 1


async def test_the_engine_settles_after_each_rebuild_and_at_start(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    heap = _Recorder()
    store = MemoryVectorStore()
    engine = await make_engine(tmp_path, store=store, heap=heap)
    try:
        await engine.ingest("greyhold")
        await engine.prewarmed("greyhold")
        assert heap.settled == heap.prepared == 1
        await engine.ingest("greyhold")  # unchanged: nothing rebuilt, nothing to settle
        await engine.prewarmed("greyhold")
        assert heap.settled == 1
    finally:
        await close_engine(engine)
    # A start over an indexed campaign builds its snapshot before the first question.
    heap = _Recorder()
    engine = await make_engine(tmp_path, store=store, heap=heap)
    try:
        assert not await engine.ensure_indexed("greyhold")
        await engine.prewarmed("greyhold")
        assert heap.settled == 1
        assert {frozenset({"players"}), frozenset({"gm"})} <= set(
            (await research.catalog(engine, "greyhold"))._lexical
        )
    finally:
        await close_engine(engine)


async def test_a_replaced_snapshot_holds_no_cycles(tmp_path):
    """A frozen snapshot is freed by reference counting alone when the next replaces it; a
    cycle inside it would keep it frozen until the frozen heap doubles."""
    root = make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    try:
        await engine.ingest("greyhold")
        await engine.prewarmed("greyhold")
        cat = await research.catalog(engine, "greyhold")
        cat.doc_lexical(frozenset({"players"}))
        old_generation = cat.generation
        (root / "baron.md").write_text("# Baron\n\nThe baron keeps ravens.\n", encoding="utf-8")
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable stays to be read
        try:
            del cat
            await engine.ingest("greyhold")
            await engine.prewarmed("greyhold")
            gc.collect()
            kinds = {type(x) for x in gc.garbage}
            assert not kinds & {Catalog, Document, PassageInfo, BM25Index}
            snapshots = [o for o in gc.get_objects() if isinstance(o, Catalog)]
            assert snapshots and all(c.generation > old_generation for c in snapshots)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    finally:
        await close_engine(engine)


async def test_the_snapshot_is_frozen_once_rebuilt(tmp_path):
    """With the composition root's policy, a rebuilt snapshot is out of the collector's walk."""
    make_tiny_campaign(tmp_path / "campaigns")
    heap = FrozenHeap()
    heap.start()
    engine = await make_engine(tmp_path, milvus=False, heap=heap)
    try:
        await engine.ingest("greyhold")
        await engine.prewarmed("greyhold")
        cat = await research.catalog(engine, "greyhold")
        walked = {id(o) for o in gc.get_objects()}
        assert id(cat) not in walked
        assert not any(id(p) in walked for p in cat.passages.values())
    finally:
        await close_engine(engine)
