"""Channel links (which campaign a channel speaks for, and the Discord server it sits in, from
which a campaign's homes follow), recap schedules and the recap slots already posted."""

from __future__ import annotations

from collections.abc import Sequence

import aiosqlite

from liminalis.store._base import Repository
from liminalis.store.rows import LinkRow, ScheduleRow

__all__ = ["LinkRepository", "ScheduleRepository"]

# The recap schedules of a channel and of its threads, save one in a thread that is linked to
# the schedule's campaign itself (its own link, not the parent's, decides where it belongs).
# Params: platform, channel id, channel id.
_END_SCHEDULES = (
    "DELETE FROM recap_schedules WHERE platform = ? AND (channel_id = ? OR parent_id = ?) AND NOT EXISTS ("
    "SELECT 1 FROM channel_links l WHERE l.platform = recap_schedules.platform "
    "AND l.channel_id = recap_schedules.channel_id AND l.campaign = recap_schedules.campaign)"
)


async def _unlink(conn: aiosqlite.Connection, platform: str, channel_id: str) -> None:
    await conn.execute(
        "DELETE FROM channel_links WHERE platform = ? AND channel_id = ?", (platform, channel_id)
    )
    await conn.execute(_END_SCHEDULES, (platform, channel_id, channel_id))


class LinkRepository(Repository):
    async def link(
        self,
        platform: str,
        channel_id: str,
        campaign: str,
        *,
        guild_id: str | None,
        linked_by: str | None = None,
    ) -> None:
        """Link a channel (``linked_by``: the user who did, ``None`` for the host), ending the
        schedules another campaign had in it or its threads."""
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT OR REPLACE INTO channel_links (platform, channel_id, campaign, guild_id, linked_by) "
                "VALUES (?, ?, ?, ?, ?)",
                (platform, channel_id, campaign, guild_id, linked_by),
            )
            await conn.execute(
                _END_SCHEDULES + " AND campaign <> ?", (platform, channel_id, channel_id, campaign)
            )

    async def unlink(self, platform: str, channel_id: str) -> None:
        """Unlink a channel and end the schedules in it and its threads (a thread linked to the
        schedule's campaign itself keeps its own)."""
        async with self._db.write() as conn:
            await _unlink(conn, platform, channel_id)

    async def campaign(self, platform: str, channel_id: str) -> str | None:
        row = await self._db.fetchone(
            "SELECT campaign FROM channel_links WHERE platform = ? AND channel_id = ?",
            (platform, channel_id),
        )
        return str(row["campaign"]) if row else None

    async def guild_counts(self, platform: str, campaign: str) -> dict[str, int]:
        """Server id → how many of its channels are linked to ``campaign``."""
        rows = await self._db.fetchall(
            "SELECT guild_id, COUNT(*) AS n FROM channel_links WHERE platform = ? AND campaign = ? "
            "AND guild_id IS NOT NULL GROUP BY guild_id",
            (platform, campaign),
        )
        return {str(r["guild_id"]): int(r["n"]) for r in rows}

    async def unplaced(self, platform: str, campaign: str) -> int:
        """Links of ``campaign`` with no server recorded."""
        row = await self._db.fetchone(
            "SELECT COUNT(*) AS n FROM channel_links WHERE platform = ? AND campaign = ? AND guild_id IS NULL",
            (platform, campaign),
        )
        return int(row["n"]) if row else 0

    async def place(self, platform: str, guild_id: str, channel_ids: Sequence[str]) -> None:
        """Record ``guild_id`` as the server of those of ``channel_ids`` linked with none."""
        marks = ",".join("?" * len(channel_ids))
        row = await self._db.fetchone(
            f"SELECT 1 FROM channel_links WHERE platform = ? AND guild_id IS NULL AND channel_id IN ({marks})",
            (platform, *channel_ids),
        )
        if row is not None:  # a read first: this runs on every command, a write only once a channel
            await self._db.execute(
                f"UPDATE channel_links SET guild_id = ? WHERE platform = ? AND guild_id IS NULL AND channel_id IN ({marks})",
                (guild_id, platform, *channel_ids),
            )

    async def release(self, platform: str, campaign: str, guild_id: str) -> int:
        """Unlink every channel of ``guild_id`` from ``campaign`` (ending their schedules);
        returns how many."""
        async with self._db.write() as conn:
            async with conn.execute(
                "SELECT channel_id FROM channel_links WHERE platform = ? AND campaign = ? AND guild_id = ?",
                (platform, campaign, guild_id),
            ) as cur:
                channels = [str(r["channel_id"]) for r in await cur.fetchall()]
            for cid in channels:
                await _unlink(conn, platform, cid)
        return len(channels)

    async def on_platform(self, platform: str) -> list[tuple[str, str, str | None]]:
        """(channel id, campaign, server id or ``None``) of every channel linked on ``platform``."""
        rows = await self._db.fetchall(
            "SELECT channel_id, campaign, guild_id FROM channel_links WHERE platform = ? "
            "ORDER BY campaign, channel_id",
            (platform,),
        )
        return [
            (str(r["channel_id"]), str(r["campaign"]), r["guild_id"] and str(r["guild_id"]))
            for r in rows
        ]

    async def rows(self, platform: str, campaign: str) -> list[LinkRow]:
        """Every channel of ``platform`` linked to ``campaign``, with its server and who linked it."""
        rows = await self._db.fetchall(
            "SELECT platform, channel_id, campaign, guild_id, linked_by FROM channel_links "
            "WHERE platform = ? AND campaign = ? ORDER BY guild_id, channel_id",
            (platform, campaign),
        )
        return [
            LinkRow(
                platform=str(r["platform"]),
                channel_id=str(r["channel_id"]),
                campaign=str(r["campaign"]),
                guild_id=r["guild_id"] and str(r["guild_id"]),
                linked_by=r["linked_by"] and str(r["linked_by"]),
            )
            for r in rows
        ]

    async def of_campaign(self, campaign: str) -> list[tuple[str, str]]:
        """(platform, channel id) of every channel linked to ``campaign``."""
        rows = await self._db.fetchall(
            "SELECT platform, channel_id FROM channel_links WHERE campaign = ?", (campaign,)
        )
        return [(r["platform"], r["channel_id"]) for r in rows]


class ScheduleRepository(Repository):
    async def all(self) -> list[ScheduleRow]:
        rows = await self._db.fetchall(
            "SELECT campaign, cron, platform, channel_id, parent_id FROM recap_schedules"
        )
        return [
            ScheduleRow(
                campaign=r["campaign"],
                cron=r["cron"],
                platform=r["platform"],
                channel_id=r["channel_id"],
                parent_id=r["parent_id"],
            )
            for r in rows
        ]

    async def set(self, schedule: ScheduleRow) -> None:
        """Store ``schedule``, replacing the campaign's previous one."""
        await self._db.execute(
            "INSERT OR REPLACE INTO recap_schedules (campaign, cron, platform, channel_id, parent_id) VALUES (?, ?, ?, ?, ?)",
            (
                schedule.campaign,
                schedule.cron,
                schedule.platform,
                schedule.channel_id,
                schedule.parent_id,
            ),
        )

    async def place_parent(self, platform: str, channel_id: str, parent_id: str) -> None:
        """Record the parent of a thread whose schedule was set before parents were recorded:
        without it the thread follows no link, and its recaps would stop."""
        await self._db.execute(
            "UPDATE recap_schedules SET parent_id = ? WHERE platform = ? AND channel_id = ? AND parent_id IS NULL",
            (parent_id, platform, channel_id),
        )

    async def remove(self, campaign: str) -> bool:
        """Whether the campaign had a stored schedule."""
        return bool(
            await self._db.execute("DELETE FROM recap_schedules WHERE campaign = ?", (campaign,))
        )

    async def claim(self, campaign: str, slot: str) -> bool:
        """Claim ``slot`` for a post; True only for the one caller whose insert made the claim.
        The claim alone does not settle the slot: :meth:`mark_posted` does, once it is out."""
        return (
            await self._db.execute(
                "INSERT OR IGNORE INTO recap_posts (campaign, slot, state) VALUES (?, ?, 'claimed')",
                (campaign, slot),
            )
            == 1
        )

    async def settle(self, campaign: str, slot: str) -> bool:
        """Settle ``slot`` with nothing to post (a schedule set after it, a campaign gone, a
        channel no longer linked); True only where this call settled it (said once a slot)."""
        return (
            await self._db.execute(
                "INSERT INTO recap_posts (campaign, slot, state) VALUES (?, ?, 'settled') "
                "ON CONFLICT (campaign, slot) DO UPDATE SET state = 'settled' "
                "WHERE recap_posts.state = 'claimed'",
                (campaign, slot),
            )
            == 1
        )

    async def mark_posted(self, campaign: str, slot: str, message_id: str) -> None:
        """The post of ``slot`` reached the platform as ``message_id``: never post it again."""
        await self._db.execute(
            "UPDATE recap_posts SET state = 'posted', message_id = ? WHERE campaign = ? AND slot = ?",
            (message_id, campaign, slot),
        )

    async def slot_state(self, campaign: str, slot: str) -> tuple[str, str | None] | None:
        """``(state, message id)`` of a slot: ``claimed`` (not known to be out), ``posted`` or
        ``settled``; ``None`` for a slot nobody claimed."""
        row = await self._db.fetchone(
            "SELECT state, message_id FROM recap_posts WHERE campaign = ? AND slot = ?",
            (campaign, slot),
        )
        return None if row is None else (str(row["state"]), row["message_id"])

    async def posted(self, campaign: str, slot: str) -> bool:
        """Whether ``slot`` is done with: posted, or settled with nothing to post."""
        state = await self.slot_state(campaign, slot)
        return state is not None and state[0] != "claimed"
