"""One bounded worker pool for the engine's CPU work, off the event loop.

Retrieval's scoring, the learned ranker's features, context building, the offline answerer and
ingest's chunking are pure Python: on the event loop, a burst of questions held it for seconds
(no heartbeat, no acknowledgement of a Discord interaction). In threads they still hold the GIL
while they run, which is why the pool is small: every runnable thread competes with the event
loop for the GIL, and with CPython's switch interval (5 ms) the loop waits about one interval per
competitor each time it wants to run. Two workers let one thread's GIL-free stretches (the
tokenizer, numpy) overlap another's Python; more add contention, not throughput.

The pool is process-wide, like asyncio's default executor, and its threads start on first use;
an idle worker does not hold up the interpreter's exit.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["WORKERS", "run_cpu"]

P = ParamSpec("P")
T = TypeVar("T")

#: Threads in the pool (see the module docstring for why so few).
WORKERS = 2

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="liminalis-cpu")
        return _pool


async def run_cpu(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in the engine's worker pool (context variables carried over,
    as ``asyncio.to_thread`` does)."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(_executor(), call)
