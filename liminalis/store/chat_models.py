"""Per-chat reply models set with ``/budget model``: one row per chat that has its own."""

from __future__ import annotations

from liminalis.store._base import Repository

__all__ = ["ChatModelRepository"]


class ChatModelRepository(Repository):
    """The model a chat's answers use instead of the configured reply model (migration 11)."""

    async def get(self, campaign: str, chat: str) -> str | None:
        row = await self._db.fetchone(
            "SELECT model FROM chat_models WHERE campaign = ? AND chat = ?", (campaign, chat)
        )
        return str(row["model"]) if row else None

    async def set(self, campaign: str, chat: str, model: str, *, at: float) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO chat_models (campaign, chat, model, set_at) VALUES (?, ?, ?, ?)",
            (campaign, chat, model, at),
        )

    async def clear(self, campaign: str, chat: str) -> bool:
        """Drop the chat's model; ``False`` when it had none."""
        n = await self._db.execute(
            "DELETE FROM chat_models WHERE campaign = ? AND chat = ?", (campaign, chat)
        )
        return n > 0
