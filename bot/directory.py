"""Channel → campaign links, each campaign's home servers, and member → lens mapping.

Default-deny: a member with no GM role, a DM, an unknown role or a failed role lookup gets the
players lens (plus any personal lenses the campaign maps to them), never ``gm``.

Discord role *names* are not identities: anyone can add the bot to a server of their own and
create a role named "GM" there. So names count only on the campaign's home servers — those
``[roles.discord] guilds`` lists, else those where a GM linked a channel to it (the first link
claims the campaign). Role and user *ids* are global and count everywhere.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from liminalis.campaign import CampaignConfig, split_role_refs, validate_slug
from liminalis.lens import GM, PLAYERS, Lens
from liminalis.store.sqlite import Database

__all__ = ["Directory", "lens_for"]


def lens_for(
    config: CampaignConfig,
    *,
    platform: str,
    user_id: str,
    roles: Sequence[str] = (),
    role_ids: Sequence[str] = (),
    usergroups: Sequence[str] = (),
    is_dm: bool = False,
    roles_known: bool = True,
    at_home: bool = True,
) -> Lens:
    """The lens a member holds in ``config``'s campaign.

    Args:
        roles: the member's role *names* (Discord) or lens names (console).
        role_ids: the member's role *ids* (Discord); matched only against configured ids.
        at_home: the message comes from one of the campaign's home servers; elsewhere a role's
            name matches nothing.
    """
    r = config.roles
    names = {str(x) for x in roles} if at_home or platform != "discord" else set()
    ids = {str(x) for x in role_ids}
    is_gm = False
    if not is_dm and roles_known:
        if platform == "discord":
            is_gm = (bool(ids & set(r.discord_gm_role_ids)) or bool(names & set(r.discord_gm_role_names))
                     or user_id in r.discord_gm_users)
        elif platform == "slack":
            is_gm = user_id in r.slack_gm_users or bool(set(usergroups) & set(r.slack_gm_usergroups))
        elif platform == "console":
            is_gm = "gm" in names
    if is_gm:
        return Lens({GM})
    personal: set[str] = set()
    for lens_name, spec in r.lens_members.items():
        if lens_name not in config.lenses:
            continue
        if platform == "discord":
            spec_ids, spec_names = split_role_refs(spec.get("discord_roles", ()))
            if user_id in spec.get("discord_users", ()) or ids & set(spec_ids) or names & set(spec_names):
                personal.add(lens_name)
        elif platform == "slack" and user_id in spec.get("slack_users", ()):
            personal.add(lens_name)
        elif platform == "console" and lens_name in names:
            personal.add(lens_name)
    return Lens({PLAYERS, *personal})


class Directory:
    """Persistent channel links (threads inherit their parent channel's campaign)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._homes: dict[tuple[str, str], frozenset[str]] = {}

    async def link(self, platform: str, channel_id: str, campaign: str) -> None:
        """Link a channel; a recap schedule another campaign had in it goes (it would post that
        campaign's recaps to this one's players)."""
        async with self.db.write() as conn:
            await conn.execute("INSERT OR REPLACE INTO channel_links VALUES (?, ?, ?, ?)",
                               (platform, str(channel_id), validate_slug(campaign), time.time()))
            await conn.execute("DELETE FROM recap_schedules WHERE platform = ? AND channel_id = ? AND campaign <> ?",
                               (platform, str(channel_id), campaign))

    async def homes(self, platform: str, campaign: str) -> frozenset[str]:
        """The servers (Discord guild ids) that have claimed ``campaign`` by linking a channel.
        Asked on every Discord command (and autocomplete keystroke): remembered once read, and
        kept current by :meth:`claim`."""
        key = (platform, campaign)
        if key not in self._homes:
            rows = await self.db.fetchall("SELECT home_id FROM campaign_homes WHERE platform = ? AND campaign = ?",
                                          (platform, campaign))
            self._homes[key] = frozenset(str(r["home_id"]) for r in rows)
        return self._homes[key]

    async def claim(self, platform: str, campaign: str, home_id: str) -> None:
        await self.db.execute("INSERT OR IGNORE INTO campaign_homes VALUES (?, ?, ?, ?)",
                              (platform, validate_slug(campaign), str(home_id), time.time()))
        self._homes.pop((platform, campaign), None)

    async def unlink(self, platform: str, channel_id: str) -> bool:
        row = await self.db.fetchone(
            "SELECT campaign FROM channel_links WHERE platform = ? AND channel_id = ?", (platform, str(channel_id))
        )
        async with self.db.write() as conn:  # and its recap schedule, with it
            await conn.execute("DELETE FROM channel_links WHERE platform = ? AND channel_id = ?", (platform, str(channel_id)))
            await conn.execute("DELETE FROM recap_schedules WHERE platform = ? AND channel_id = ?", (platform, str(channel_id)))
        return row is not None

    async def campaign_for(self, platform: str, channel_id: str, parent_id: str | None = None) -> str | None:
        for cid in (channel_id, parent_id):
            if not cid:
                continue
            row = await self.db.fetchone(
                "SELECT campaign FROM channel_links WHERE platform = ? AND channel_id = ?", (platform, str(cid))
            )
            if row:
                return str(row["campaign"])
        return None

    async def links(self, campaign: str) -> list[tuple[str, str]]:
        rows = await self.db.fetchall("SELECT platform, channel_id FROM channel_links WHERE campaign = ?", (campaign,))
        return [(r["platform"], r["channel_id"]) for r in rows]
