"""The rerank stage: fail-soft by contract.

Any reranker error or timeout returns the fused order unchanged and logs once per reranker
instance, so a broken model degrades quality, never availability. Pinned hits are never passed
through here, so they can never be reordered or dropped by it.

Mixing: with ``mix=None`` the reranker's score alone orders the candidates. With a weight, the
order is ``prior + mix · z(score)``: the reranker's scores standardised within the query, added
to a prior from the stage before. The prior is the learned document ranker's score of each
candidate's document when that stage ran (the product path), else ``−ln(fused position)``. A
small cross-encoder trained on little data is a noisy judge on its own (below the learned ranker
on both dev sets); as a correction to the learned score it helps on both (bench/results/
rerank.json). The weight is chosen on the dev sets with ``bench.rerank_sweep`` and belongs to the
shipped ranker's score scale: retraining either model means sweeping it again.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence

from liminalis.ports import Reranker
from liminalis.types import Hit

__all__ = ["rerank_hits", "mix_scores"]

_log = logging.getLogger(__name__)
_warned: set[int] = set()


async def rerank_hits(
    reranker: Reranker | None,
    query: str,
    hits: Sequence[Hit],
    texts: Sequence[str],
    *,
    timeout_s: float = 5.0,
    mix: float | None = None,
    prior: Sequence[float] | None = None,
    score: Callable[[str, list[str]], Awaitable[list[float]]] | None = None,
) -> tuple[list[Hit], bool]:
    """Reorder ``hits`` by the reranker's score; returns ``(hits, reranked)``.

    ``texts`` are the passage texts aligned with ``hits``. On any failure the input order is
    returned with ``reranked=False``. ``score``: the scoring call (default ``reranker.score``),
    e.g. one that keeps a queue's turn until the model's worker is really done.
    """
    if reranker is None or not hits:
        return list(hits), False
    try:
        scores = await asyncio.wait_for(
            (score or reranker.score)(query, list(texts)), timeout=timeout_s
        )
        if len(scores) != len(hits):
            raise ValueError(f"reranker returned {len(scores)} scores for {len(hits)} passages")
    except Exception as exc:  # fail-soft: any failure keeps the fused order
        key = id(reranker)
        if key not in _warned:
            _warned.add(key)
            _log.warning(
                "reranker %s failed (%s); keeping fused order",
                getattr(reranker, "model_id", "?"),
                exc,
            )
        else:
            _log.debug("reranker failed again: %s", exc)
        return list(hits), False
    final = mix_scores([float(s) for s in scores], mix, prior)
    order = sorted(range(len(hits)), key=lambda i: (-final[i], i))
    return [
        Hit(passage_id=hits[i].passage_id, doc_id=hits[i].doc_id, score=final[i]) for i in order
    ], True


def mix_scores(
    scores: Sequence[float], mix: float | None, prior: Sequence[float] | None = None
) -> list[float]:
    """Reranker scores (in the given order) combined with a prior; see module doc. ``prior``
    defaults to the log-rank of the given order."""
    if mix is None:
        return list(scores)
    n = len(scores)
    mean = sum(scores) / n
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / n) or 1.0
    base = list(prior) if prior is not None else [-math.log(i + 1) for i in range(n)]
    return [base[i] + mix * (s - mean) / sd for i, s in enumerate(scores)]
