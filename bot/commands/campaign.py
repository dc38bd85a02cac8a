"""``/campaign link <slug>|unlink|status|release <server id>``: which campaign a channel plays,
and (for its GMs) the Discord servers where its GM role names count."""

from __future__ import annotations

import logging

from bot.commands._base import Command, Need, Option, Request, Scope
from bot.messages import OptionValue, Reply
from liminalis.campaign import CampaignConfig, is_discord_id, validate_slug
from liminalis.errors import InvalidInput, LiminalisError, PermissionDenied
from liminalis.ingest.sections import source_of

__all__ = ["command", "DM_NOT_LINKED"]

_log = logging.getLogger(__name__)

DM_NOT_LINKED = "Direct messages are not linked to a campaign: ask in your campaign's channel."
# One answer to every refused link, whether the campaign exists or not: a stranger learns neither.
_LINK_REFUSED = (
    "Only a GM of that campaign can link a channel to it, and only if the name is right. On a server "
    "where no channel is linked to the campaign, a GM role *name* does not count: a GM listed by user id "
    "or role id in campaign.toml links first, or the host adds the server's id to `[roles.discord] guilds`."
)
_ACTIONS = ("status", "link", "unlink", "release")


def _parse(arg: str) -> dict[str, OptionValue]:
    parts = arg.split()
    action = parts[0].lower() if parts else "status"
    options: dict[str, OptionValue] = {"action": action}
    if action == "link":
        if len(parts) != 2:
            raise InvalidInput("bad link", user_message="Usage: `/campaign link <slug>`")
        options["slug"] = parts[1]
    elif action == "release":
        if len(parts) != 2:
            raise InvalidInput(
                "bad release",
                user_message="Usage: `/campaign release <server id>` (see `/campaign status`)",
            )
        options["server"] = parts[1]
    return options


def _need(request: Request) -> Need:
    action = request.string("action")
    if action == "status":
        return "optional"  # an unlinked channel is told so, not refused
    return (
        "required" if action in {"unlink", "release"} else "none"
    )  # link reads the campaign it names


async def run(request: Request, scope: Scope) -> Reply:
    action = request.string("action", "status")
    if action == "status":
        return await _status(request, scope)
    if action == "link":
        return await _link(request, scope)
    if action == "unlink":
        return await _unlink(request, scope)
    if action == "release":
        return await _release(request, scope)
    raise InvalidInput(
        "bad campaign sub",
        user_message="Usage: `/campaign link <slug>|unlink|status|release <server id>`",
    )


async def _status(request: Request, scope: Scope) -> Reply:
    cfg, msg = scope.campaign, request.msg
    if cfg is None:
        return Reply(
            text=DM_NOT_LINKED
            if msg.is_dm
            else "This channel is not linked to a campaign. A GM can run `/campaign link <slug>`."
        )
    titles = await scope.services.engine.titles(cfg.slug, scope.lens, limit=25)
    files = len({source_of(d) for d, _ in titles})  # a personal view is part of its file
    text = f"This channel plays **{cfg.name}** (`{cfg.slug}`); {files}{'+' if len(titles) == 25 else ''} documents visible to you."
    if scope.lens.is_gm:
        text += "\n" + await _homes_report(scope, cfg)
    return Reply(text=text)


async def _link(request: Request, scope: Scope) -> Reply:
    services, msg = scope.services, request.msg
    given = request.string("slug")
    if not given:
        raise InvalidInput("bad link", user_message="Usage: `/campaign link <slug>`")
    slug = validate_slug(given)
    try:
        cfg = await services.config(slug)
    except LiminalisError as exc:  # no such campaign, or a broken campaign.toml: said alike
        _log.info("link to %s refused: %s", slug, exc)
        raise PermissionDenied(
            "link to a campaign that cannot be read", user_message=_LINK_REFUSED
        ) from exc
    # The GM wall of the campaign named, not of the channel's: this command resolves no scope.
    if not (await services.lens_of(msg, cfg)).is_gm:
        raise PermissionDenied("link by a non-GM", user_message=_LINK_REFUSED)
    await services.directory.link(
        msg.platform,
        msg.channel_id,
        cfg.slug,
        guild_id=msg.guild_id if msg.platform == "discord" else None,
    )
    return Reply(text=f"Linked this channel to **{cfg.name}**.")


async def _unlink(request: Request, scope: Scope) -> Reply:
    cfg, directory, msg = scope.config, scope.services.directory, request.msg
    if not await directory.unlink(msg.platform, msg.channel_id):
        return Reply(
            text="This thread follows its channel's link: unlink the channel itself.",
            ephemeral=True,
        )
    text = "Unlinked this channel."
    if (
        msg.platform == "discord"
        and msg.guild_id is not None
        and msg.guild_id not in cfg.roles.discord_guilds
        and msg.guild_id not in await directory.homes("discord", cfg.slug)
    ):
        text += f" No channel of this server is linked to **{cfg.name}** now: its role names no longer count."
    return Reply(text=text)


async def _release(request: Request, scope: Scope) -> Reply:
    cfg = scope.config
    guild = request.string("server")
    if not is_discord_id(guild):
        raise InvalidInput(
            "bad release",
            user_message="Usage: `/campaign release <server id>` (see `/campaign status`)",
        )
    n = await scope.services.directory.release("discord", cfg.slug, guild)
    if guild in cfg.roles.discord_guilds:
        return Reply(
            text=f"Unlinked {n} channel(s) of server `{guild}` from **{cfg.name}**. It stays a home "
            "while campaign.toml lists it in `[roles.discord] guilds`: its host can remove it there."
        )
    if not n:
        return Reply(
            text=f"Server `{guild}` is not a home of **{cfg.name}**: none of its channels is linked."
        )
    return Reply(
        text=f"Released server `{guild}`: unlinked {n} channel(s) from **{cfg.name}**; its role names "
        "no longer count."
    )


async def _homes_report(scope: Scope, cfg: CampaignConfig) -> str:
    """The campaign's Discord homes, for its GMs: where role names count, and why."""
    directory = scope.services.directory
    linked = await directory.linked_guilds("discord", cfg.slug)
    listed = cfg.roles.discord_guilds
    lines: list[str] = []
    for guild in listed:
        n = linked.get(guild, 0)
        lines.append(
            f"• `{guild}`: listed in campaign.toml `guilds`"
            + (f", {n} channel(s) linked" if n else "")
        )
    for guild, n in sorted(linked.items()):
        if guild not in listed:
            lines.append(
                f"• `{guild}`: {n} channel(s) linked"
                + (" (not a home: campaign.toml `guilds` lists the homes)" if listed else "")
            )
    unplaced = await directory.unplaced("discord", cfg.slug)
    if unplaced:
        lines.append(
            f"• {unplaced} channel(s) linked before servers were recorded: each adds its server "
            "on its next message"
        )
    if not lines:
        return "Discord homes: none (role names count on no server)."
    return (
        "Discord homes (GM role names count there):\n"
        + "\n".join(lines)
        + "\nA GM can release a server with `/campaign release <server id>`."
    )


command = Command(
    name="campaign",
    description="Link this channel to a campaign (GM), unlink it, or show it",
    run=run,
    options=(
        Option(
            "action",
            "string",
            "status, link, unlink, or release a server",
            choices=_ACTIONS,
            default="status",
        ),
        Option("slug", "string", "link: the campaign", autocomplete="campaigns", low=1, high=63),
        Option("server", "string", "release: the server id (see status)", low=1, high=25),
    ),
    usage=(
        "`/campaign link <slug>|unlink|status` — link this channel to a campaign (GM)",
        "`/campaign release <server id>` — GM: unlink a Discord server, ending its GM role names",
    ),
    example="/campaign link greyhold",
    gm_only=lambda request: request.string("action") in {"unlink", "release"},
    private=lambda request, scope: request.string("action") in {"status", "release"},
    need=_need,
    parse=_parse,
    group="gm",
)
