"""The one visibility rule: who may see what.

Two barriers, decided here and nowhere else:

* **GM-only wall** — the ``gm`` lens sees everything; no other lens ever sees a document whose
  visibility is GM-only, nor anything derived from it (passages, windows, titles, summaries).
* **Lens barrier** — a document names the lenses that may read it (``players`` for every
  player, or personal lenses such as ``mirel``). A member holding several lenses sees the union
  of what each allows, never more.

Default-deny: an unknown or malformed visibility value, or a document in a GM folder, is GM-only.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["GM", "PLAYERS", "Lens", "visible", "parse_visibility", "players_lens", "gm_lens"]

GM = "gm"
PLAYERS = "players"


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

    ``visibility`` is the set of lens names allowed to read the document; ``gm`` is implicit.
    """
    lens_set = set(lens)
    if GM in lens_set:
        return True
    allowed = set(visibility) - {GM}
    return bool(allowed & lens_set)


def parse_visibility(
    raw: object, *, known_lenses: Iterable[str], gm_path: bool
) -> frozenset[str]:
    """Normalise a front-matter ``visibility`` value.

    Args:
        raw: the front-matter value (``"gm"``, ``"players"``, a list, or ``None``).
        known_lenses: lens names the campaign defines besides ``gm`` and ``players``.
        gm_path: the document lies under one of the campaign's GM folders.

    Returns:
        The allowed lens names. GM-only is ``{"gm"}``. Anything not understood is GM-only.
    """
    if gm_path:
        return frozenset({GM})
    if raw is None:
        return frozenset({PLAYERS})
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
