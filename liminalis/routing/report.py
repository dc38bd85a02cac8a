"""A campaign's model spend over some days, decomposed by role, pass and node.

Read from the call log (``model_calls``): every call the router made for the campaign since
``since``, summed per ``(role, pass, node)``. A line's tokens are
``input + output + cache_write + cache_read``, the same sum the daily limit counts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from liminalis.store.spend import SpendLine

__all__ = ["SpendReport"]


@dataclass(frozen=True, slots=True)
class SpendReport:
    """The campaign's spend since ``since`` (the start of a UTC day), its credits and pause."""

    campaign: str
    since: dt.datetime
    days: int
    lines: tuple[SpendLine, ...]
    credits: int
    paused: bool

    @property
    def tokens(self) -> int:
        return sum(line.tokens for line in self.lines)

    @property
    def calls(self) -> int:
        return sum(line.calls for line in self.lines)

    def by_role(self) -> dict[str, int]:
        """Tokens per role, costliest first."""
        out: dict[str, int] = {}
        for line in self.lines:
            out[line.role] = out.get(line.role, 0) + line.tokens
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def render(self, *, limit: int | None = None) -> str:
        """Plain text: totals, then one line per (role, pass, node), costliest first."""
        span = "today" if self.days == 1 else f"the last {self.days} days"
        head = [
            f"Model spend of {self.campaign} {span} (since {self.since:%Y-%m-%d} UTC): "
            f"{self.tokens:,} tokens in {self.calls:,} calls.",
            f"Background credits: {self.credits:,} tokens"
            + ("; autonomous background work is paused." if self.paused else "."),
        ]
        lines = self.lines if limit is None else self.lines[:limit]
        body = [
            f"  {line.role:<12} {line.pass_id or '-':<16} {line.node or '-':<16} "
            f"{line.calls:>5} calls {line.tokens:>12,} tokens "
            f"(in {line.input_tokens:,}, out {line.output_tokens:,}, "
            f"cache write {line.cache_write:,}, cache read {line.cache_read:,})"
            for line in lines
        ]
        if body:
            head.append(f"  {'role':<12} {'pass':<16} {'node':<16}")
        more = len(self.lines) - len(lines)
        tail = [f"  … and {more} more"] if more > 0 else []
        return "\n".join([*head, *body, *tail])
