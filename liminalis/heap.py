"""Keeping a large campaign's snapshot out of the cyclic garbage collector's way.

CPython frees most objects by reference counting; its cyclic collector exists for reference
cycles. A *full* collection walks every tracked container in the heap while holding the GIL, so
every thread, the event loop's included, waits for it, for a time proportional to the heap. A
large campaign keeps its snapshot alive (documents, passages, keys, BM25 indexes; the files'
stat signatures), and CPython starts a full collection whenever the objects that survived young
collections since the last one reach a quarter of what that one kept, which a few questions'
temporaries do. Those walks find nothing: the snapshot is never garbage while it serves.

:class:`FrozenHeap` moves what is alive when the snapshot settles into the permanent generation
(``gc.freeze``), which no collection walks. Just before a rebuild starts it collects what is not
frozen yet (:meth:`FrozenHeap.prepare`: a walk of what came since the last settle, small), and
when the rebuild ends it collects the young generations and freezes (:meth:`FrozenHeap.settle`:
no walk of the new snapshot on the event loop). So the only cyclic garbage ever frozen is what
died in a cycle during the rebuild itself. A frozen object is still freed by reference counting
when the engine drops it (a snapshot replaced by the next one: the snapshot holds no cycles,
``tests/test_heap.py``); only a frozen object that joins a reference cycle and then dies stays
until the next unfreeze. Both are bounded: when the frozen heap has grown to ``regrow`` × its
size after the last full collection, :meth:`FrozenHeap.settle` unfreezes, collects everything
once and freezes again; a heap that grows because it holds more (a larger campaign) pays that
full walk once per doubling, not once per question.

:class:`LooseHeap` leaves the collector alone (tests, embedding the engine in another program).
"""

from __future__ import annotations

import gc
import logging

__all__ = ["FrozenHeap", "LooseHeap"]

_log = logging.getLogger(__name__)


class LooseHeap:
    """The default: no collector policy (the host program decides)."""

    def prepare(self) -> None:
        """Nothing: the collector runs as CPython schedules it."""
        return None

    def settle(self) -> None:
        """Nothing: the collector runs as CPython schedules it."""
        return None


class FrozenHeap:
    """Freeze what is alive whenever the long-lived objects settle; collect the frozen heap too
    only when it has grown ``regrow`` × since the last full collection (module doc).

    Call :meth:`start` once the program's own long-lived objects (models) are loaded."""

    def __init__(self, *, regrow: float = 2.0) -> None:
        if regrow <= 1.0:
            raise ValueError("regrow must be above 1")
        self.regrow = regrow
        #: Objects frozen just after the last full collection.
        self.baseline = 0
        self.full_collections = 0

    def start(self) -> None:
        """Collect everything once, then freeze: what loading left as garbage goes first (frozen,
        it would stay until the next full collection)."""
        self._full()

    def prepare(self) -> None:
        """Collect what is not frozen, before a rebuild adds to it: its cyclic garbage must not
        be frozen with the rebuilt objects."""
        gc.collect()

    def settle(self) -> None:
        """Freeze what is alive now. The young generations are collected first (they hold only
        recent objects: a short walk)."""
        gc.collect(1)
        gc.freeze()
        if gc.get_freeze_count() > self.regrow * max(self.baseline, 1):
            self._full()

    def _full(self) -> None:
        gc.unfreeze()
        found = gc.collect()
        gc.freeze()
        self.baseline = gc.get_freeze_count()
        self.full_collections += 1
        _log.debug("full collection: %d unreachable, %d objects frozen", found, self.baseline)
