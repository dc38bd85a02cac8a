"""Learned associations: bounded Hebbian strengthening, exponential decay, pruning.

A learned association ``i → j`` has a weight ``w ∈ [0, 1)`` per direction and its own
base-level history (each reinforcement is a use; :mod:`liminalis.memory.activation`). When
both ends are active together (activations ``a_i, a_j ∈ [0, 1]``), or a spread step carried
activation ``a`` along it (``a_i = a``, ``a_j = 1``), the weight grows by the bounded Hebbian
rule (Hebb 1949; the saturating form of Grossberg's outstar learning)::

    w ← w + η · a_i · a_j · (1 − w)

Unreinforced it decays towards zero, ``w(t) = w(t₀) · 2^{−(t − t₀)/h}`` with half-life ``h``,
evaluated lazily; under ``floor`` it is pruned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from liminalis.ports import BaseLevelModel

__all__ = ["HebbianParams", "LearnedEdge", "decayed", "strengthen"]


@dataclass(frozen=True, slots=True)
class HebbianParams:
    eta: float = 0.3
    #: Learning on each spread step that carried activation (smaller: it happens often).
    eta_spread: float = 0.05
    half_life_s: float = 7 * 24 * 3600.0
    floor: float = 0.02


@dataclass(slots=True)
class LearnedEdge:
    src: str
    dst: str
    kind: str
    weight: float
    visibility: str
    state: tuple[float, ...]
    updated_at: float


def decayed(weight: float, age_s: float, half_life_s: float) -> float:
    """``w · 2^(−age/h)``."""
    return float(weight * 0.5 ** (max(0.0, age_s) / half_life_s))


def strengthen(
    edge: LearnedEdge,
    now: float,
    a_i: float,
    a_j: float,
    *,
    eta: float,
    half_life_s: float,
    model: BaseLevelModel,
) -> LearnedEdge:
    """One Hebbian update at ``now`` (the decay since the last update applied first)."""
    w = decayed(edge.weight, now - edge.updated_at, half_life_s)
    edge.weight = w + eta * max(0.0, min(1.0, a_i)) * max(0.0, min(1.0, a_j)) * (1.0 - w)
    edge.state = model.record(edge.state, now)
    edge.updated_at = now
    return edge


def prune(edges: Sequence[LearnedEdge], now: float, params: HebbianParams) -> list[LearnedEdge]:
    """The edges whose decayed weight fell under the floor."""
    return [
        e for e in edges if decayed(e.weight, now - e.updated_at, params.half_life_s) < params.floor
    ]
