"""Channel → campaign links, each campaign's home servers, and member → lens mapping.

Default-deny: a member with no GM role, a DM, an unknown role or a failed role lookup gets the
players lens (plus any personal lenses the campaign maps to them), never ``gm``.

Discord role *names* are not identities: anyone can add the bot to a server of their own and
create a role named "GM" there. So names count only on the campaign's home servers — those
``[roles.discord] guilds`` lists, else those where a channel is linked to it *now*: the link
that makes a server a home is the one whose unlink (or ``/campaign release``) unmakes it, so a
home never outlives its links. Role and user *ids* are global and count everywhere; an id and a
name are never compared with each other.
"""

from __future__ import annotations

from collections.abc import Sequence

from liminalis.campaign import CampaignConfig, split_role_refs, validate_slug
from liminalis.lens import GM, PLAYERS, Lens
from liminalis.store.rows import GrantRow, LinkRow, ScheduleRow
from liminalis.store.sqlite import Database

__all__ = ["Directory", "gm_by_id", "lens_for"]


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
            is_gm = (
                bool(ids & set(r.discord_gm_role_ids))
                or bool(names & set(r.discord_gm_role_names))
                or user_id in r.discord_gm_users
            )
        elif platform == "slack":
            is_gm = user_id in r.slack_gm_users or bool(
                set(usergroups) & set(r.slack_gm_usergroups)
            )
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
            if (
                user_id in spec.get("discord_users", ())
                or ids & set(spec_ids)
                or names & set(spec_names)
            ):
                personal.add(lens_name)
        elif platform == "slack" and user_id in spec.get("slack_users", ()):
            personal.add(lens_name)
        elif platform == "console" and lens_name in names:
            personal.add(lens_name)
    return Lens({PLAYERS, *personal})


def gm_by_id(
    config: CampaignConfig, *, platform: str, user_id: str, usergroups: Sequence[str] = ()
) -> bool:
    """Whether ``user_id`` is a GM of ``config`` by an id that holds anywhere, a DM included: a
    Discord user id, a Slack user id or Slack user group. (Discord roles do not reach a DM.)

    This picks the campaign a GM's DM upload goes to; it gives no lens: a DM's lens stays the
    players' (``lens_for``)."""
    r = config.roles
    if platform == "discord":
        return user_id in r.discord_gm_users
    if platform == "slack":
        return user_id in r.slack_gm_users or bool(set(usergroups) & set(r.slack_gm_usergroups))
    return False


class Directory:
    """Persistent channel links (threads inherit their parent channel's campaign) and the
    Discord servers (guilds) they sit in, from which each campaign's homes follow."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._threads_seen: set[tuple[str, str]] = set()

    async def link(
        self,
        platform: str,
        channel_id: str,
        campaign: str,
        *,
        guild_id: str | None = None,
        linked_by: str | None = None,
    ) -> None:
        """Link a channel (of Discord server ``guild_id``; ``linked_by`` the user who did, kept
        so removing them as a GM can end the home it made); a recap schedule another campaign
        had in it or in one of its threads goes (it would post that campaign's recaps to this
        one's players)."""
        await self.db.links.link(
            platform,
            str(channel_id),
            validate_slug(campaign),
            guild_id=guild_id,
            linked_by=linked_by,
        )

    async def link_rows(self, platform: str, campaign: str) -> list[LinkRow]:
        """The channels of ``platform`` linked to ``campaign``, each with its server and who
        linked it (``None``: the host, or a link older than that record)."""
        return await self.db.links.rows(platform, campaign)

    async def grant(self, campaign: str, platform: str, kind: str, ref: str, *, by: str) -> None:
        """Record that user ``by`` listed ``ref`` (a user, role or user group) as a GM."""
        await self.db.grants.add(campaign, platform, kind, ref, added_by=by)

    async def revoke(self, campaign: str, platform: str, kind: str, ref: str) -> None:
        """Forget who listed ``ref`` (it is listed no more)."""
        await self.db.grants.remove(campaign, platform, kind, ref)

    async def grants(self, campaign: str) -> list[GrantRow]:
        """Who listed each GM of ``campaign`` added from chat (a GM written by hand has none)."""
        return await self.db.grants.of_campaign(campaign)

    async def unlink(self, platform: str, channel_id: str) -> bool:
        """Unlink a channel, and end the recap schedules in it and in its threads (a thread with
        a link of its own to the schedule's campaign keeps its schedule). The last linked channel
        of a Discord server takes the server's home with it."""
        was = await self.db.links.campaign(platform, str(channel_id))
        await self.db.links.unlink(platform, str(channel_id))
        return was is not None

    async def linked_guilds(self, platform: str, campaign: str) -> dict[str, int]:
        """Server id → how many of its channels are linked to ``campaign`` now."""
        return await self.db.links.guild_counts(platform, campaign)

    async def homes(self, platform: str, campaign: str) -> frozenset[str]:
        """The servers where a channel is linked to ``campaign`` now: its homes, unless
        campaign.toml lists them (``[roles.discord] guilds``). Read on every Discord command, so
        never stale: an unlink counts from the next message on."""
        return frozenset(await self.linked_guilds(platform, campaign))

    async def unplaced(self, platform: str, campaign: str) -> int:
        """Links of ``campaign`` whose server is not known yet (made before servers were
        recorded, or on a platform without them)."""
        return await self.db.links.unplaced(platform, campaign)

    async def learn_guild(
        self, platform: str, guild_id: str, channel_id: str, parent_id: str | None = None
    ) -> None:
        """Record the server of a channel (and of its thread's parent) linked before servers were
        recorded. Discord names the server of every message, and a channel lies in one server
        only, so this adds a fact, never a claim: the server is a home because that channel is
        linked, as it would be had the link recorded it."""
        await self.db.links.place(
            platform, str(guild_id), [str(c) for c in (channel_id, parent_id) if c]
        )

    async def learn_parent(self, platform: str, channel_id: str, parent_id: str) -> None:
        """Record a thread's parent on a recap schedule set in it before parents were recorded
        (learned, like a server, from the thread's first message after the upgrade). Once per
        thread a process: a later schedule set in the thread records its parent itself."""
        if (platform, str(channel_id)) in self._threads_seen:
            return
        await self.db.schedules.place_parent(platform, str(channel_id), str(parent_id))
        self._threads_seen.add((platform, str(channel_id)))

    async def release(self, platform: str, campaign: str, guild_id: str) -> int:
        """Unlink every channel of server ``guild_id`` from ``campaign`` (ending their recap
        schedules and their threads'), which ends the server's home; returns how many."""
        return await self.db.links.release(platform, campaign, str(guild_id))

    async def campaign_for(
        self, platform: str, channel_id: str, parent_id: str | None = None
    ) -> str | None:
        for cid in (channel_id, parent_id):
            if not cid:
                continue
            linked = await self.db.links.campaign(platform, str(cid))
            if linked:
                return linked
        return None

    async def schedules_in(self, platform: str, channel_id: str) -> list[ScheduleRow]:
        """The stored recap schedules that post in ``channel_id`` or in one of its threads."""
        return [
            s
            for s in await self.db.schedules.all()
            if s.platform == platform and str(channel_id) in (s.channel_id, s.parent_id)
        ]

    async def links(self, campaign: str) -> list[tuple[str, str]]:
        return await self.db.links.of_campaign(campaign)

    async def linked(self, platform: str) -> list[tuple[str, str, str | None]]:
        """(channel id, campaign, server id) of every channel linked on ``platform`` (where a
        DM's author may sit)."""
        return await self.db.links.on_platform(platform)
