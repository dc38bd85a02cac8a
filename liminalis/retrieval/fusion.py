"""Weighted reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009).

    RRF(p) = Σ_a  w_a / (rrf_k + rank_a(p))        rank is 1-based; absent → no term

Plain RRF uses ``w_a = 1`` and ``rrf_k = 60``. On narrative text the dense arm is much weaker
than BM25, so both the arm weights and ``rrf_k`` are tuned on the dev sets (see bench/).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["rrf", "dedupe_ranking"]


def dedupe_ranking(items: Iterable[str]) -> list[str]:
    """Keep the first occurrence of each id, preserving order."""
    return list(dict.fromkeys(items))


def rrf(
    *rankings: Sequence[str],
    rrf_k: float = 60.0,
    weights: Sequence[float] | None = None,
    depth: Mapping[int, int] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked id lists; returns ``(id, score)`` best first (ties keep first-seen order).

    Args:
        rankings: each a best-first list of ids (duplicates after the first are ignored).
        rrf_k: the smoothing constant; larger flattens the head of each ranking.
        weights: one weight per ranking (default 1.0 each).
        depth: optional per-ranking cut (index → how many ranks count).
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    scores: dict[str, float] = {}
    for i, (ranking, w) in enumerate(zip(rankings, weights, strict=True)):
        if w == 0:
            continue
        limit = depth.get(i) if depth else None
        for rank, item in enumerate(dedupe_ranking(ranking), start=1):
            if limit is not None and rank > limit:
                break
            scores[item] = scores.get(item, 0.0) + w / (rrf_k + rank)
    order = {item: n for n, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
