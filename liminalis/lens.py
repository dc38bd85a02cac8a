"""The one visibility rule: who may see what.

Two barriers, decided here and nowhere else:

* **GM-only wall** — the ``gm`` lens sees everything; no other lens ever sees a document whose
  visibility is GM-only, nor anything derived from it (passages, windows, titles, summaries).
* **Lens barrier** — a document names the lenses that may read it (``players`` for every
  player, or personal lenses such as ``mirel``). A member holding several lenses sees the union
  of what each allows, never more.

Default-deny: an unknown or malformed visibility value, or a document in a GM folder, is GM-only.

A document with hidden sections is read through views (:mod:`liminalis.ingest.sections`): the
GM reads its whole text, and the shared view the other readers get carries :data:`NOT_GM`, so
the GM never reads the same document twice. The rule, which every store filter applies too::

    visible(V, L) = NOT_GM ∉ V                  if gm ∈ L
                    (V ∖ {gm, NOT_GM}) ∩ L ≠ ∅  otherwise
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "GM",
    "PLAYERS",
    "NOT_GM",
    "Lens",
    "visible",
    "narrowest",
    "parse_visibility",
    "players_lens",
    "gm_lens",
]

GM = "gm"
PLAYERS = "players"
#: In a visibility set: the GM reads this document's whole text in another view, not this one.
NOT_GM = "-gm"


class Lens(frozenset[str]):
    """The set of lens names a member holds (e.g. ``{"players", "mirel"}``)."""

    @property
    def is_gm(self) -> bool:
        return GM in self

    @property
    def is_private(self) -> bool:
        """Whether this lens sees more than every player does (the GM, or a personal lens).

        Its answers may hold text others in a shared channel must not read — a GM secret, or
        one player's backstory — so they are only ever delivered privately there.
        """
        return self.is_gm or bool(self - {PLAYERS})

    def describe(self) -> str:
        return "gm" if self.is_gm else ", ".join(sorted(self))


def players_lens(*personal: str) -> Lens:
    return Lens({PLAYERS, *personal} - {GM})


def gm_lens() -> Lens:
    return Lens({GM})


def visible(visibility: Iterable[str], lens: Iterable[str]) -> bool:
    """Return whether a document with ``visibility`` may be shown to ``lens``.

    ``visibility`` is the set of lens names allowed to read the document; ``gm`` is implicit,
    save for a shared view marked :data:`NOT_GM` (the GM reads the whole text instead).
    """
    lens_set = set(lens)
    vis = set(visibility)
    if GM in lens_set:
        return NOT_GM not in vis
    return bool((vis - {GM, NOT_GM}) & lens_set)


def narrowest(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    """The more restrictive of two visibilities: who both let read. ``players`` (every player)
    contains each personal lens; two personal lenses that differ leave only the GM."""
    na, nb = set(a) - {GM, NOT_GM}, set(b) - {GM, NOT_GM}
    if PLAYERS in na:
        na = nb if PLAYERS not in nb else na
    elif PLAYERS in nb:
        nb = na
    both = na & nb
    return frozenset(both | {GM}) if both else frozenset({GM})


def parse_visibility(
    raw: object, *, known_lenses: Iterable[str], gm_path: bool, default: object = PLAYERS
) -> frozenset[str]:
    """Normalise a front-matter ``visibility`` value.

    Args:
        raw: the front-matter value (``"gm"``, ``"players"``, a list, or ``None``).
        known_lenses: lens names the campaign defines besides ``gm`` and ``players``.
        gm_path: the document lies under one of the campaign's GM folders.
        default: the value a document that names none gets (an upload's is GM-only).

    Returns:
        The allowed lens names. GM-only is ``{"gm"}``. Anything not understood is GM-only.
    """
    if gm_path:
        return frozenset({GM})
    if raw is None:
        if default == PLAYERS:
            return frozenset({PLAYERS})
        return parse_visibility(default, known_lenses=known_lenses, gm_path=False, default=GM)
    values: list[object] = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    known = {GM, PLAYERS, *known_lenses}
    names: set[str] = set()
    for value in values:
        if not isinstance(value, str):
            return frozenset({GM})
        name = value.strip().lower()
        if name in {"player", "public", "all"}:
            name = PLAYERS
        if name not in known:
            return frozenset({GM})
        names.add(name)
    if not names:
        return frozenset({GM})
    return frozenset(names | {GM})
