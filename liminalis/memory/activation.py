"""ACT-R base-level learning: a chunk's resting activation from its history of uses.

The textbook equation (Anderson & Schooler 1991; Anderson & Lebiere 1998, *The Atomic
Components of Thought*, ch. 4), with ``t_j`` the age of the j-th use and ``d`` the decay::

    B = ln( Σ_j t_j^(−d) )

Two implementations, chosen by dependency injection (both satisfy
:class:`liminalis.ports.BaseLevelModel`):

* :class:`EventLog` keeps every use time and evaluates the sum exactly (state grows with uses).
* :class:`LeakyIntegrator` keeps ``m`` leaky traces, one per time scale ``τ_i = 1/s_i`` spaced
  geometrically (``s_{i+1} = s_i·e^{−h}``), and the time of the last update, so its state is
  constant in the number of uses. It rests on the Laplace identity for the power law::

      t^(−d) = 1/Γ(d) ∫_0^∞ s^(d−1) e^(−s t) ds
             ≈ h/Γ(d) Σ_i s_i^d e^(−s_i t)                  (trapezoid rule in ln s)

  so ``Σ_j t_j^(−d) ≈ Σ_i w_i x_i`` with ``w_i = h s_i^d / Γ(d)`` and traces
  ``x_i = Σ_j e^(−s_i t_j)``. Between uses each trace decays, ``x_i ← x_i e^(−s_i Δ)``; a use
  adds one, ``x_i ← x_i + 1``. The decay ``d`` enters only the read-out weights, so one state
  serves every decay rate (per-type decay costs nothing).

  **Error bound.** For a smooth integrand the trapezoid rule's relative error is set by the
  integrand's Fourier transform at ``2π/h``: ``|ε| ≤ 2|Γ(d + 2πi/h)|/Γ(d)`` (≈ ``2e^{−π²/h}``
  times a polynomial factor), for every age inside the covered band
  ``[1/s_max, 1/s_min]`` shrunk by a few scales at each end. With ``h = ln 3`` and
  ``d ∈ [0.2, 0.8]`` that is below 0.5% (measured in the tests), so each term, hence the sum,
  is within 0.5% and ``|B̂ − B| ≤ ln(1.005) < 0.005``. Outside the band the estimate saturates:
  an age below ``1/s_max`` counts as that age (the textbook model clamps at ``min_age`` for the
  same reason: a use at age 0 is infinitely active), an age past ``1/s_min`` (years) fades
  faster than the power law. The slowest trace also carries the tail
  ``∫_0^{s_min} s^(d−1) ds / Γ(d) = s_min^d / Γ(d+1)``, which a small ``d`` makes too large
  to drop.

Ages are in seconds from an injected clock (:class:`liminalis.ports.Clock`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NEG_INF", "DecayRates", "EventLog", "LeakyIntegrator", "base_level"]

#: The activation of a chunk never used.
NEG_INF = -math.inf


@dataclass(frozen=True, slots=True)
class DecayRates:
    """Decay ``d`` per chunk kind: identity and structure fade slower than episodes."""

    entity: float = 0.3
    type: float = 0.2
    summary: float = 0.35
    passage: float = 0.5
    fact: float = 0.4
    turn: float = 0.6
    session: float = 0.55
    association: float = 0.5

    def of(self, kind: str) -> float:
        return float(getattr(self, kind, self.passage))


def base_level(ages: Sequence[float], d: float, *, min_age: float = 1.0) -> float:
    """The textbook ``ln Σ t_j^(−d)`` over ``ages`` (seconds), each clamped to ``min_age``."""
    total = sum(max(a, min_age) ** (-d) for a in ages)
    return math.log(total) if total > 0 else NEG_INF


class EventLog:
    """The exact model: the state is every use time (``(t_1, …, t_n)``)."""

    name = "event-log"

    def __init__(self, *, min_age: float = 1.0) -> None:
        self.min_age = min_age

    def empty(self) -> tuple[float, ...]:
        return ()

    def record(self, state: Sequence[float], t: float, *, weight: float = 1.0) -> tuple[float, ...]:
        # A fractional weight has no exact event-log form; it records one use (weight ≥ 0.5).
        return (*state, t) if weight >= 0.5 else tuple(state)

    def value(self, state: Sequence[float], t: float, d: float) -> float:
        return base_level([t - s for s in state], d, min_age=self.min_age)


class LeakyIntegrator:
    """The O(1) model: ``m`` leaky traces plus the last update time (see the module docstring).

    State layout: ``(t_last, x_1, …, x_m)``.
    """

    name = "leaky-integrator"

    def __init__(
        self,
        *,
        min_age: float = 1.0,
        max_age: float = 3.2e7,
        h: float = math.log(3.0),
        margin: int = 3,
    ) -> None:
        s_max = math.exp(h * margin) / min_age
        s_min = math.exp(-h * margin) / max_age
        m = math.ceil(math.log(s_max / s_min) / h) + 1
        self.h = h
        self.rates = tuple(s_max * math.exp(-h * i) for i in range(m))
        self._weights: dict[float, tuple[float, ...]] = {}

    def weights(self, d: float) -> tuple[float, ...]:
        w = self._weights.get(d)
        if w is None:
            g = math.gamma(d)
            ws = [self.h * s**d / g for s in self.rates]
            # The slowest trace also carries the integral's tail ∫_0^{s_min} (its half step of
            # the trapezoid rule plus s_min^d / Γ(d+1)): with a small d that tail holds a share
            # of the mass no finite band covers.
            s_min = self.rates[-1]
            ws[-1] = self.h * s_min**d / (2 * g) + s_min**d / math.gamma(d + 1)
            w = tuple(ws)
            self._weights[d] = w
        return w

    def empty(self) -> tuple[float, ...]:
        return (0.0,) + (0.0,) * len(self.rates)

    def _decayed(self, state: Sequence[float], t: float) -> list[float]:
        dt = max(0.0, t - state[0])
        return [x * math.exp(-s * dt) if x else 0.0 for x, s in zip(state[1:], self.rates)]

    def record(self, state: Sequence[float], t: float, *, weight: float = 1.0) -> tuple[float, ...]:
        if len(state) != len(self.rates) + 1:
            state = self.empty()
        return (t, *(x + weight for x in self._decayed(state, t)))

    def value(self, state: Sequence[float], t: float, d: float) -> float:
        if len(state) != len(self.rates) + 1:
            return NEG_INF
        total = sum(w * x for w, x in zip(self.weights(d), self._decayed(state, t)))
        return math.log(total) if total > 1e-300 else NEG_INF
