"""Roles: the jobs a model call does, and the model each is assigned.

A role names what a call is for, so the host can put each job on the model worth its price:

* ``reply`` — the answer to a player's question (foreground, the capable model);
* ``chat`` — base chat, a conversational turn without retrieval (defaults to the reply model);
* ``scaffolding``, ``critique``, ``summarize``, ``extract``, ``narration``, ``analysis`` — the
  background roles of the passes (campaign digestion, critique of a draft, recaps): many calls,
  none of them a player waiting, so each defaults to the cheap model.

A per-chat override (:meth:`RoleTable.with_reply`) moves the ``reply`` role only: a GM who puts
one chat on a stronger model does not move the campaign's background work onto it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["BACKGROUND_ROLES", "FOREGROUND_ROLES", "ROLES", "RoleTable"]

#: Every role, in the order ``liminalis models`` prints them.
ROLES: tuple[str, ...] = (
    "reply",
    "chat",
    "scaffolding",
    "critique",
    "summarize",
    "extract",
    "narration",
    "analysis",
)
FOREGROUND_ROLES = frozenset({"reply", "chat"})
BACKGROUND_ROLES = frozenset(ROLES) - FOREGROUND_ROLES


@dataclass(frozen=True, slots=True)
class RoleTable:
    """The model of every role, and where each assignment came from (for ``liminalis models``).

    Build it with :meth:`build`; ``models`` and ``sources`` hold every role of :data:`ROLES`.
    """

    models: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls, *, reply: str, cheap: str, assigned: Mapping[str, str] | None = None
    ) -> RoleTable:
        """``reply`` and ``chat`` default to ``reply``, the background roles to ``cheap``;
        ``assigned`` (role → model, empty values ignored) sets any of them.

        Raises:
            ValueError: ``assigned`` names a role that does not exist, or a model is empty.
        """
        if not reply or not cheap:
            raise ValueError("the reply and cheap models must be named")
        assigned = {r: m.strip() for r, m in (assigned or {}).items() if m and m.strip()}
        unknown = sorted(set(assigned) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown roles {unknown}; the roles are {', '.join(ROLES)}")
        models: dict[str, str] = {}
        sources: dict[str, str] = {}
        for role in ROLES:
            if role in assigned:
                models[role], sources[role] = assigned[role], "set"
            elif role == "reply":
                models[role], sources[role] = reply, "set"
            elif role in FOREGROUND_ROLES:
                models[role], sources[role] = reply, "default: the reply model"
            else:
                models[role], sources[role] = cheap, "default: the cheap model"
        return cls(models=models, sources=sources)

    def model_for(self, role: str) -> str:
        """The model of ``role``.

        Raises:
            ValueError: no such role (a typo in a pass must fail, not bill the reply model).
        """
        try:
            return self.models[role]
        except KeyError:
            raise ValueError(f"unknown role {role!r}; the roles are {', '.join(ROLES)}") from None

    def with_reply(self, model: str | None) -> RoleTable:
        """This table with ``reply`` on ``model`` (a per-chat override); ``None`` or empty: as is."""
        if not model:
            return self
        return RoleTable(
            models={**self.models, "reply": model},
            sources={**self.sources, "reply": "this chat's override"},
        )

    def rows(self) -> list[tuple[str, str, str]]:
        """``(role, model, source)`` for every role, in :data:`ROLES` order."""
        return [(r, self.models[r], self.sources.get(r, "")) for r in ROLES if r in self.models]

    def render(self) -> str:
        """The table as aligned text, one role a line."""
        rows = self.rows()
        width = max((len(r) for r, _, _ in rows), default=0)
        mwidth = max((len(m) for _, m, _ in rows), default=0)
        return "\n".join(
            f"{r:<{width}}  {m:<{mwidth}}  {'background' if r in BACKGROUND_ROLES else 'foreground'}"
            f"  ({s})"
            for r, m, s in rows
        )
