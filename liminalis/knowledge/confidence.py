"""How far a relation is trusted, and the line below which it is kept but not drawn.

A relation the notes state as a list item under a ``Relationships``/``Members`` heading, or
as kinship ("Vessa is the Lantern Queen's daughter"), is nearly always right; one read from
two names around a preposition ("the Vell at the Salt Stairs") often is not. The confidence is a
pure function of what a stored relation records (its kind, its two name keys and the sentence
or item that states it), so relations stored before need no migration and a model's relations
are scored by the same rule:

    conf(r) = min(1, base(kind) + listed(r) + cue(r)) · subject(r)

* ``base``: the kind's prior (:data:`_BASE`); for ``located-in`` the words between the two
  names decide it instead: a verb of standing ("stands on … in") 0.85, "in"/"inside"/"under"
  0.6, a bare "at" 0.4 ("the Art Professor at the University", "the chapel of Ovel at
  Lessmoor": at says where someone stood, rarely where something is);
* ``listed`` = 0.1 when the evidence is a bold list label naming one end (``**Tobin Harrow:**``);
* ``cue`` = 0.1 when an ally or enemy relation's evidence holds an unmistakable word
  ("friend", "mentor", "hostile", "at war");
* ``subject`` = 0.8 when the subject's name is not in the evidence (a pronoun stood for it).

Relations under :data:`DRAW_CONFIDENCE` are kept (retrieval and the GM's cards read them) but
not drawn on the map and not listed to players; ``python -m bench.relations`` picks the value
(the best F0.5 of its sweep on the labelled set, bench/RESULTS.md).
"""

from __future__ import annotations

import re

from liminalis.knowledge.facts import RelationFact

__all__ = ["DRAW_CONFIDENCE", "relation_confidence", "drawn"]

#: Relations at or above this are drawn on the map and listed to players.
DRAW_CONFIDENCE = 0.5

_BASE = {
    "parent-of": 0.9,
    "grandparent-of": 0.9,
    "sibling-of": 0.85,
    "kin-of": 0.8,
    "leader-of": 0.8,
    "member-of": 0.7,
    "employs": 0.8,
    "ally-of": 0.65,
    "enemy-of": 0.65,
}
_STANDS = re.compile(r"\b(?:stands|stood|lies|lay|sits|sat|hangs|is|was|are|were)\b")
_IN = re.compile(r"\b(?:in|inside|within|beneath|under|below|above|on)\b")
_CUE = re.compile(
    r"\b(?:friends?|ally|allies|alliance|mentor|enem(?:y|ies)|hostile|at war|hates?|betray\w*)\b",
    re.I,
)


def _at(evidence: str, key: str) -> int:
    """Where a name key stands in the evidence (lower case, ``-1`` when it does not)."""
    words = key.split()
    if not words:
        return -1
    m = re.search(r"\W+".join(map(re.escape, words)), evidence)
    return m.start() if m else -1


def _located(evidence: str, src: str, dst: str) -> float:
    a, b = _at(evidence, src), _at(evidence, dst)
    between = evidence[a:b] if 0 <= a < b else evidence
    if _STANDS.search(between) and _IN.search(between):
        return 0.85
    if _IN.search(between):
        return 0.6
    return 0.4


def relation_confidence(fact: RelationFact) -> float:
    """How far ``fact`` is trusted, 0–1 (see the module for the equation)."""
    low = fact.evidence.lower()
    if fact.kind == "located-in":
        base = _located(low, fact.src, fact.dst)
    else:
        base = _BASE.get(fact.kind, 0.5)
    label = re.match(r"\W*(.+?)\W*\*\*", fact.evidence)
    named = label.group(1).lower() if label else ""
    listed = bool(named) and any(_at(named, key) >= 0 for key in (fact.src, fact.dst))
    cue = fact.kind in {"ally-of", "enemy-of"} and bool(_CUE.search(fact.evidence))
    conf = min(1.0, base + 0.1 * listed + 0.1 * cue)
    if _at(low, fact.src) < 0 and not listed:
        conf *= 0.8
    return round(conf, 3)


def drawn(fact: RelationFact) -> bool:
    """Whether ``fact`` is drawn on the map and listed to players."""
    return relation_confidence(fact) >= DRAW_CONFIDENCE
