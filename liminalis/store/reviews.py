"""The GM's decisions on what the wall held back by habit (migration 16): ``show`` publishes a
section to the readers of its document, ``keep`` leaves it GM-only and stops asking. Stored on
the section's digest (:func:`liminalis.ingest.sections.section_digest`), so a decision survives
re-ingests and moves and is asked again once the section's text changes."""

from __future__ import annotations

from liminalis.store._base import Repository

__all__ = ["ReviewRepository", "SHOW", "KEEP"]

SHOW = "show"
KEEP = "keep"


class ReviewRepository(Repository):
    async def decisions(self, campaign: str) -> dict[str, str]:
        """``digest → "show" | "keep"`` for ``campaign``."""
        rows = await self._db.fetchall(
            "SELECT digest, decision FROM wall_reviews WHERE campaign = ?", (campaign,)
        )
        return {str(r["digest"]): str(r["decision"]) for r in rows}

    async def decide(
        self, campaign: str, digest: str, decision: str, *, by: str, at: float
    ) -> None:
        if decision not in (SHOW, KEEP):
            raise ValueError(f"unknown decision {decision!r}")
        await self._db.execute(
            "INSERT OR REPLACE INTO wall_reviews (campaign, digest, decision, decided_by, "
            "decided_at) VALUES (?, ?, ?, ?, ?)",
            (campaign, digest, decision, by, at),
        )
