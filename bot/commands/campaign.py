"""``/campaign``: make a campaign, link channels to it, name its GMs and set its settings, all
from chat (campaigns without a shell); and (for its GMs) the Discord servers where its
GM role names count.

``create <name>`` (Discord: Manage Server; Slack: a workspace admin or owner; or a user the host
allows) makes a campaign under the data directory with its creator as GM by user id, and links
the channel; ``list`` shows the campaigns the asker is a GM of; ``link <slug>|unlink|status|
release <server id>`` as before; ``gm add|remove @user|@role`` and ``settings`` (GM) write
``campaign.toml`` (:mod:`liminalis.campaign_file`: atomically, comments kept); ``accept`` (GM)
applies a hand edit that drops a wall, which the last good version holds back until then.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from bot.commands._base import Command, Need, Option, Request, Scope
from bot.commands.budget import HIGH, LOW
from bot.cron import parse_cron
from bot.messages import IncomingMessage, OptionValue, Reply
from bot.render import skipped_lines
from liminalis.campaign import CampaignConfig, is_discord_id, validate_slug
from liminalis.campaign_file import GmRef, add_gm, remove_gm, set_settings
from liminalis.engine import Engine
from liminalis.errors import InvalidInput, LiminalisError, PermissionDenied, UnknownCampaign
from liminalis.ingest.sections import source_of
from liminalis.store.rows import GrantRow, LinkRow

__all__ = ["command", "DM_NOT_LINKED", "parse_gm", "your_id"]

_log = logging.getLogger(__name__)

DM_NOT_LINKED = "Direct messages are not linked to a campaign: ask in your campaign's channel."
# One answer to every refused link, whether the campaign exists or not: a stranger learns neither.
_LINK_REFUSED = (
    "Only a GM of that campaign can link a channel to it, and only if the name is right. On a server "
    "where no channel is linked to the campaign, a GM role *name* does not count: a GM listed by user id "
    "or role id links first. Ask one of its GMs to run `/campaign gm add @you` ({you}), or make a "
    "campaign of your own with `/campaign create <name>`."
)
# A channel that plays a campaign is its table's: another campaign takes it only by a GM of the
# one it plays, or by who administers where it is.
_RELINK_REFUSED = (
    "This channel plays another campaign: only one of its GMs, or {admin}, can link it to another "
    "campaign ({you})."
)
_ADMIN = {"discord": "someone with Manage Server here", "slack": "a workspace admin or owner"}
_CONFIRM_WORDS = frozenset({"confirm", "yes"})
_ACTIONS = ("status", "link", "unlink", "release", "create", "list", "gm", "settings", "accept")
_USAGE = (
    "Usage: `/campaign create <name>`, `/campaign list`, `/campaign link <slug>|unlink|status`, "
    "`/campaign gm add|remove @user|@role`, `/campaign settings`, `/campaign release <server id>`, "
    "`/campaign accept`"
)
#: What only a campaign's GM may do (in a channel linked to it).
_GM_ACTIONS = frozenset({"unlink", "release", "gm", "settings", "accept"})
_GM_USAGE = "Usage: `/campaign gm add @user` or `/campaign gm remove @user` (a user or a role; or a user id)"
_SETTINGS_USAGE = (
    "Usage: `/campaign settings recap <cron>|off` (posts here), `/campaign settings uploads "
    "players|gm`, `/campaign settings budget <tokens>`"
)
_SETTING_WORDS = {
    "recap": "recap",
    "schedule": "recap",
    "uploads": "uploads",
    "upload": "uploads",
    "upload_visibility": "uploads",
    "budget": "budget",
    "length": "budget",
}
# A mention is unambiguous whatever its digits; a bare id must look like a Discord id.
_DISCORD_USER = re.compile(r"<@!?([0-9]{1,22})>|([0-9]{15,22})")
_DISCORD_ROLE = re.compile(r"<@&([0-9]{1,22})>|role:([0-9]{15,22})")
_SLACK_USER = re.compile(r"<@([UW][A-Z0-9]{2,})(?:\|[^>]*)?>|([UW][A-Z0-9]{2,})")
_SLACK_GROUP = re.compile(r"<!subteam\^([A-Z0-9]{2,})(?:\|[^>]*)?>|(S[A-Z0-9]{2,})")


def your_id(msg: IncomingMessage) -> str:
    """ "your Discord user id is `…`": said in every refusal, so the asker can pass it on."""
    where = {"discord": "Discord ", "slack": "Slack "}.get(msg.platform, "")
    return f"your {where}user id is `{msg.user_id}`"


def parse_gm(text: str, platform: str) -> GmRef:
    """A user or a role as written in ``platform``'s text (a mention, or a bare id).

    Raises:
        InvalidInput: nothing there names a user or a role of ``platform``.
    """
    t = text.strip()
    forms: tuple[tuple[re.Pattern[str], str], ...] = (
        ((_DISCORD_ROLE, "role"), (_DISCORD_USER, "user"))
        if platform == "discord"
        else ((_SLACK_GROUP, "usergroup"), (_SLACK_USER, "user"))
        if platform == "slack"
        else ()
    )
    for pattern, kind in forms:
        m = pattern.fullmatch(t)
        if m:
            return GmRef(platform, kind, m.group(1) or m.group(2))  # type: ignore[arg-type]
    raise InvalidInput(f"bad gm {t!r}", user_message=_GM_USAGE)


def _parse(arg: str) -> dict[str, OptionValue]:
    parts = arg.split()
    action = parts[0].lower() if parts else "status"
    options: dict[str, OptionValue] = {"action": action}
    rest = arg.strip()[len(parts[0]) :].strip() if parts else ""
    if action == "link":
        if len(parts) not in {2, 3} or (len(parts) == 3 and parts[2].lower() not in _CONFIRM_WORDS):
            raise InvalidInput("bad link", user_message="Usage: `/campaign link <slug>`")
        options["slug"] = parts[1]
        if len(parts) == 3:
            options["confirm"] = "yes"
    elif action == "release":
        if len(parts) != 2:
            raise InvalidInput(
                "bad release",
                user_message="Usage: `/campaign release <server id>` (see `/campaign status`)",
            )
        options["server"] = parts[1]
    elif action == "create":
        if not rest:
            raise InvalidInput(
                "bad create",
                user_message="Usage: `/campaign create <name>`, e.g. `/campaign create Greyhold`",
            )
        options["name"] = rest
    elif action == "gm" and len(parts) > 1:
        if len(parts) != 3 or parts[1].lower() not in {"add", "remove"}:
            raise InvalidInput("bad gm", user_message=_GM_USAGE)
        options["change"] = parts[1].lower()
        options["member"] = parts[2]
    elif action == "settings" and len(parts) > 1:
        key = _SETTING_WORDS.get(parts[1].lower())
        value = " ".join(parts[2:])
        if key is None or not value:
            raise InvalidInput("bad settings", user_message=_SETTINGS_USAGE)
        if key == "budget":
            digits = value.replace(",", "").replace("_", "")
            if not re.fullmatch(r"[0-9]{1,7}", digits):
                raise InvalidInput("bad budget", user_message=_SETTINGS_USAGE)
            options["budget"] = int(digits)
        else:
            options[key] = value.lower() if key == "uploads" else value
    return options


def _need(request: Request) -> Need:
    action = request.string("action")
    if action == "status":
        return "optional"  # an unlinked channel is told so, not refused
    # link and create read the campaign they name (create: none yet); list reads every one
    return "required" if action in _GM_ACTIONS else "none"


async def run(request: Request, scope: Scope) -> Reply:
    action = request.string("action", "status")
    run_action = {
        "status": _status,
        "link": _link,
        "unlink": _unlink,
        "release": _release,
        "create": _create,
        "list": _list,
        "gm": _gm,
        "settings": _settings,
        "accept": _accept,
    }.get(action)
    if run_action is None:
        raise InvalidInput("bad campaign sub", user_message=_USAGE)
    return await run_action(request, scope)


async def _create(request: Request, scope: Scope) -> Reply:
    services, msg = scope.services, request.msg
    name = request.string("name")
    if not name:
        raise InvalidInput(
            "bad create",
            user_message="Usage: `/campaign create <name>`, e.g. `/campaign create Greyhold`",
        )
    if msg.platform not in {"discord", "slack"}:
        raise InvalidInput(
            "create off a platform",
            user_message="Create a campaign from Discord or Slack; here, make a folder "
            "`campaigns/<slug>/` with a `campaign.toml`.",
        )
    if msg.is_dm:
        raise InvalidInput(
            "create in a dm",
            user_message="Create the campaign in your table's channel: it is linked to the campaign.",
        )
    if not (msg.can_manage or msg.user_id in services.campaign_creators):
        who = (
            "the Manage Server permission on this server"
            if msg.platform == "discord"
            else "a workspace admin or owner"
        )
        raise PermissionDenied(
            "create without the right",
            user_message=f"Creating a campaign takes {who}, or the host's leave "
            f"(`LIMINALIS_CAMPAIGN_CREATORS`; {your_id(msg)}). Ask someone who has it to run "
            "`/campaign create`; they can then make you a GM with `/campaign gm add @you`.",
        )
    here = await services.directory.campaign_for(msg.platform, msg.channel_id, msg.parent_id)
    if here is not None:
        raise InvalidInput(
            "create in a linked channel",
            user_message="This channel plays another campaign: create yours in another channel, "
            "or have a GM of this one run `/campaign unlink` first.",
        )
    slug = request.string("slug") or None
    # Tagged whatever else exists: a refusal for a taken name would tell anyone which
    # campaigns others made, and a group's name is theirs to choose, not first come.
    cfg = await services.engine.create_campaign(
        name, gm=GmRef(msg.platform, "user", msg.user_id), slug=slug, tag=services.slug_tag
    )
    await services.directory.grant(cfg.slug, msg.platform, "user", msg.user_id, by=msg.user_id)
    await services.directory.link(
        msg.platform,
        msg.channel_id,
        cfg.slug,
        guild_id=msg.guild_id if msg.platform == "discord" else None,
        linked_by=msg.user_id,
    )
    return Reply(
        text=f"Created **{cfg.name}** (`{cfg.slug}`) and linked this channel to it; you are its GM "
        f"({your_id(msg)}). Its short name ends in a tag of its own: other groups may have a "
        f"campaign named like yours.\nNext: `/upload` your notes (GM-only unless you say `players`), "
        "make co-GMs with `/campaign gm add @them`, and see `/campaign settings`."
    )


async def _list(request: Request, scope: Scope) -> Reply:
    services, msg = scope.services, request.msg
    mine = await services.gm_campaigns(msg)
    here = (
        await services.directory.campaign_for(msg.platform, msg.channel_id, msg.parent_id)
        if not msg.is_dm
        else None
    )
    lines: list[str] = []
    for cfg in mine:
        channels = len(await services.directory.links(cfg.slug))
        where = " — this channel" if cfg.slug == here else ""
        lines.append(f"• **{cfg.name}** (`{cfg.slug}`): {channels} linked channel(s){where}")
    if not lines:
        text = (
            "You are a GM of no campaign I know of. Make one with `/campaign create <name>`, or ask "
            f"a GM to run `/campaign gm add @you` ({your_id(msg)})."
        )
    else:
        text = "Your campaigns (you are a GM):\n" + "\n".join(lines)
        text += "\nLink a channel with `/campaign link <slug>`."
    if here is not None and here not in {c.slug for c in mine}:
        text += f"\nThis channel plays `{here}`."
    return Reply(text=text)


async def _status(request: Request, scope: Scope) -> Reply:
    cfg, msg = scope.campaign, request.msg
    if cfg is None:
        return Reply(
            text=DM_NOT_LINKED
            if msg.is_dm
            else "This channel is not linked to a campaign. A GM can run `/campaign link <slug>`, "
            "or make a new one with `/campaign create <name>`."
        )
    titles = await scope.services.engine.titles(cfg.slug, scope.lens, limit=25)
    files = len({source_of(d) for d, _ in titles})  # a personal view is part of its file
    text = f"This channel plays **{cfg.name}** (`{cfg.slug}`); {files}{'+' if len(titles) == 25 else ''} documents visible to you."
    if (
        progress := scope.services.engine.index_progress(cfg.slug)
    ) is not None:  # an ingest is running: say how far it has come
        text += f"\nIndexing: {progress.describe()}."
    if scope.lens.is_gm:
        text += "\n" + _gm_list(cfg, await scope.services.directory.grants(cfg.slug))
        text += "\n" + await _homes_report(scope, cfg)
        text += _health_report(scope.services.engine, cfg.slug)
    return Reply(text=text)


def _health_report(engine: Engine, slug: str) -> str:
    """For the campaign's GMs: a campaign.toml that cannot be read now, or that drops a wall (the
    last good version serves), and the files the latest ingests skipped, with why (they may name
    GM-only files)."""
    lines: list[str] = []
    if error := engine.config_errors.get(slug):
        lines.append(
            f"⚠ {error}. The last good version of campaign.toml is in use until it is fixed."
        )
    if held := engine.config_holds.get(slug):
        lines.append(
            f"⚠ campaign.toml of {slug} changed: {held}. The last good version is in use, so "
            "players see nothing more; if the change is meant, `/campaign accept` applies it."
        )
    lines += skipped_lines(engine.skipped_files(slug))
    return "".join("\n" + line for line in lines)


async def _accept(request: Request, scope: Scope) -> Reply:
    """A GM's word for a campaign.toml that drops walls: it is applied as it is now."""
    cfg, engine = scope.config, scope.services.engine
    held = engine.config_holds.get(cfg.slug)
    after, dropped = await engine.accept_campaign(cfg.slug)
    if not held and not dropped:
        return Reply(text=f"campaign.toml of **{after.name}** is in use as it is: nothing waited.")
    said = "; ".join(dropped) if dropped else held
    return Reply(text=f"Applied campaign.toml of **{after.name}** as it is now ({said}).")


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
            "link to a campaign that cannot be read",
            user_message=_LINK_REFUSED.format(you=your_id(msg)),
        ) from exc
    # The GM wall of the campaign named, not of the channel's: this command resolves no scope.
    if not (await services.lens_of(msg, cfg)).is_gm:
        raise PermissionDenied(
            "link by a non-GM", user_message=_LINK_REFUSED.format(you=your_id(msg))
        )
    here = await services.directory.campaign_for(msg.platform, msg.channel_id, msg.parent_id)
    if here is not None and here != cfg.slug:
        ask = await _relink(request, scope, here, cfg)
        if ask is not None:
            return ask
    await services.directory.link(
        msg.platform,
        msg.channel_id,
        cfg.slug,
        guild_id=msg.guild_id if msg.platform == "discord" else None,
        linked_by=msg.user_id,
    )
    return Reply(text=f"Linked this channel to **{cfg.name}**.")


async def _relink(request: Request, scope: Scope, here: str, cfg: CampaignConfig) -> Reply | None:
    """Whether the channel, which plays ``here``, may be linked to ``cfg``: by a GM of
    ``here``, or by who administers where it is, once they confirmed what the channel loses.
    Returns the confirmation to ask for, or ``None`` to go on.

    Raises:
        PermissionDenied: the asker is neither.
    """
    services, msg = scope.services, request.msg
    refused = PermissionDenied(
        "relink by a non-GM of the channel's campaign",
        user_message=_RELINK_REFUSED.format(
            admin=_ADMIN.get(msg.platform, "an administrator"), you=your_id(msg)
        ),
    )
    current: CampaignConfig | None = None
    try:
        current = await services.config(here)
    except UnknownCampaign:
        return None  # the campaign is gone: a link to nothing loses nothing
    except LiminalisError as exc:  # unreadable: its GMs cannot be told, an administrator can
        _log.info("relink of %s: campaign %s unreadable: %s", msg.channel_id, here, exc)
        if not msg.can_manage:
            raise refused from exc
    if current is not None and not (msg.can_manage or (await services.lens_of(msg, current)).is_gm):
        raise refused
    if request.string("confirm").lower() in _CONFIRM_WORDS:
        return None
    name = f"**{current.name}**" if current is not None else f"`{here}`"
    lost = await _what_a_relink_ends(request, scope, here, current)
    return Reply(
        text=f"This channel plays {name}. Linking it to **{cfg.name}** ends that here:\n"
        + "\n".join(f"• {line}" for line in lost)
        + f"\nTo go on, run `/campaign link {cfg.slug} confirm` (on Discord: `confirm: yes`).",
        ephemeral=True,
    )


async def _what_a_relink_ends(
    request: Request, scope: Scope, here: str, current: CampaignConfig | None
) -> list[str]:
    """What linking the channel to another campaign takes from ``here``, in words."""
    directory, msg = scope.services.directory, request.msg
    name = f"**{current.name}**" if current is not None else f"`{here}`"
    lost = [f"its players read the other campaign here, not {name}"]
    crons = [
        s.cron
        for s in await directory.schedules_in(msg.platform, msg.channel_id)
        if s.campaign == here
    ]
    if current is not None and current.recap_cron and current.recap_channel == msg.chat_key:
        crons.append(current.recap_cron)
    lost += [f"the recap of {name} posted here stops (`{c}`)" for c in crons]
    if (
        msg.platform == "discord"
        and msg.guild_id is not None
        and (current is None or not current.roles.discord_guilds)
        and await directory.campaign_for(msg.platform, msg.channel_id) == here
        and (await directory.linked_guilds("discord", here)).get(msg.guild_id) == 1
    ):
        lost.append(
            f"it is the last channel of this server linked to {name}: its GM role names stop "
            "counting on this server"
        )
    return lost


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


async def _gm(request: Request, scope: Scope) -> Reply:
    cfg, services, msg = scope.config, scope.services, request.msg
    change = request.string("change")
    if not change:
        return Reply(text=_gm_list(cfg, await services.directory.grants(cfg.slug)))
    if change not in {"add", "remove"}:
        raise InvalidInput("bad gm", user_message=_GM_USAGE)
    member = request.string("member")
    if not member:
        raise InvalidInput("bad gm", user_message=_GM_USAGE)
    ref = parse_gm(member, msg.platform)
    if change == "remove":
        return await _remove_gm(request, scope, ref)
    what = _named(ref.kind, ref.id)
    before = _gm_ids(cfg)
    after = await services.engine.edit_campaign(cfg.slug, lambda t: add_gm(t, ref)[0])
    if _gm_ids(after) == before:
        return Reply(text=f"{what} is a GM of **{cfg.name}** already.")
    # Kept so that removing whoever added it takes it too: a co-GM's own role id would
    # otherwise outlive them.
    await services.directory.grant(cfg.slug, ref.platform, ref.kind, ref.id, by=msg.user_id)
    return Reply(
        text=f"{what} is a GM of **{after.name}** now"
        + (
            ": role ids count on every server, in every channel linked to it."
            if ref.kind == "role"
            else "."
        )
    )


async def _remove_gm(request: Request, scope: Scope, ref: GmRef) -> Reply:
    """Remove ``ref`` and what a removed user set up: the GMs they listed (and theirs in turn),
    and on Discord the links that alone made a server a home (where a role they named like the
    GM role counts). What the asker is a GM through, and the server they ask from, stay: named,
    with the command that removes each."""
    cfg, services, msg = scope.config, scope.services, request.msg
    directory = services.directory
    removed, kept = (
        _set_up_by(await directory.grants(cfg.slug), ref, _held(msg))
        if ref.kind == "user"
        else ([], [])
    )
    refs = [ref, *(GmRef(ref.platform, g.kind, g.ref) for g in removed)]  # type: ignore[arg-type]

    def change(text: str) -> str:
        for r in refs:
            text = remove_gm(text, r)[0]
        return text

    before = _gm_ids(cfg)
    after = await services.engine.edit_campaign(cfg.slug, change)
    for r in refs:
        await directory.revoke(cfg.slug, r.platform, r.kind, r.id)
    gone_users = {ref.id} | {g.ref for g in removed if g.kind == "user"}
    released, stays = (
        await _end_homes_of(scope, gone_users, asked_from=msg.guild_id)
        if ref.kind == "user" and msg.platform == "discord" and not after.roles.discord_guilds
        else ([], [])
    )
    what = _named(ref.kind, ref.id)
    lines = [
        f"{what} is no longer a GM of **{after.name}**."
        if (ref.platform, ref.kind, ref.id) in before
        else f"{what} is not listed as a GM of **{cfg.name}** by id "
        "(a GM role *name* is removed in campaign.toml by hand)."
    ]
    listed = [g for g in removed if (g.platform, g.kind, g.ref) in before]
    if listed or released:
        lines.append("Removed with them, as they set it up:")
        lines += [
            f"• {_named(g.kind, g.ref)}, added by user `{g.added_by}`"
            + (
                f" (`/campaign gm add {_written(g.kind, g.ref)}` makes them a GM again)"
                if g.kind == "user"
                else ""
            )
            for g in listed
        ]
        lines += [
            f"• server `{guild}`: unlinked {n} channel(s) they linked; its role names no longer "
            "count"
            for guild, n in released
        ]
    if kept or stays:
        lines.append("Kept, though they set it up:")
        lines += [
            f"• {_named(g.kind, g.ref)}, added by user `{g.added_by}` (you are a GM through it): "
            f"`/campaign gm remove {_written(g.kind, g.ref)}` removes it"
            for g in kept
        ]
        lines += [
            f"• server `{guild}`, a home through their links only (you ask from it): "
            f"`/campaign release {guild}` ends it"
            for guild in stays
        ]
    return Reply(text="\n".join(lines))


def _held(msg: IncomingMessage) -> frozenset[tuple[str, str]]:
    """What the asker is a GM through, if listed: a removal never takes it from under them."""
    return frozenset(
        {
            ("user", msg.user_id),
            *(("role", r) for r in msg.role_ids),
            *(("usergroup", g) for g in msg.usergroups),
        }
    )


def _set_up_by(
    grants: Sequence[GrantRow], ref: GmRef, held: frozenset[tuple[str, str]]
) -> tuple[list[GrantRow], list[GrantRow]]:
    """The grants user ``ref`` listed, and in turn those of the users they listed: (what goes,
    what stays because the asker holds it)."""
    removed: list[GrantRow] = []
    kept: list[GrantRow] = []
    seen = {("user", ref.id)}
    adders = [ref.id]
    while adders:
        adder = adders.pop()
        for g in grants:
            if g.platform != ref.platform or g.added_by != adder or (g.kind, g.ref) in seen:
                continue
            seen.add((g.kind, g.ref))
            if (g.kind, g.ref) in held:
                kept.append(g)
                continue
            removed.append(g)
            if g.kind == "user":
                adders.append(g.ref)
    return removed, kept


async def _end_homes_of(
    scope: Scope, users: set[str], *, asked_from: str | None
) -> tuple[list[tuple[str, int]], list[str]]:
    """Unlink the channels ``users`` linked on each Discord server where nobody else linked one
    (a home they alone made, where role names count), but server ``asked_from``, where the asker
    is. Returns ((server, channels unlinked)…, servers kept)."""
    directory = scope.services.directory
    by_server: dict[str, list[LinkRow]] = {}
    for row in await directory.link_rows("discord", scope.config.slug):
        if row.guild_id is not None:
            by_server.setdefault(row.guild_id, []).append(row)
    released: list[tuple[str, int]] = []
    stays: list[str] = []
    for guild, rows in sorted(by_server.items()):
        if not all(r.linked_by in users for r in rows):
            continue  # someone else linked a channel there: the home is theirs too
        if guild == asked_from:
            stays.append(guild)
            continue
        for r in rows:
            await directory.unlink("discord", r.channel_id)
        released.append((guild, len(rows)))
    return released, stays


def _gm_ids(cfg: CampaignConfig) -> frozenset[tuple[str, str, str]]:
    """Every GM listed by id, as (platform, kind, id)."""
    r = cfg.roles
    return frozenset(
        {
            *(("discord", "user", u) for u in r.discord_gm_users),
            *(("discord", "role", g) for g in r.discord_gm_role_ids),
            *(("slack", "user", u) for u in r.slack_gm_users),
            *(("slack", "usergroup", g) for g in r.slack_gm_usergroups),
        }
    )


_KIND_NAMES = {"role": "Role", "usergroup": "User group", "user": "User"}


def _named(kind: str, ref: str) -> str:
    """``User `…```, ``Role `…``` or ``User group `…```: a GM as replies name it."""
    return f"{_KIND_NAMES.get(kind, 'User')} `{ref}`"


def _written(kind: str, ref: str) -> str:
    """``ref`` as ``/campaign gm`` reads it back (``parse_gm``)."""
    return f"role:{ref}" if kind == "role" else ref


def _gm_list(cfg: CampaignConfig, grants: Sequence[GrantRow] = ()) -> str:
    """The GMs, each with who added it from chat (a GM with no record was written by hand)."""
    by = {(g.platform, g.kind, g.ref): g.added_by for g in grants}

    def who(platform: str, kind: str, ref: str) -> str:
        adder = by.get((platform, kind, ref))
        if adder is None:
            return " — written in campaign.toml"
        return " — made the campaign" if adder == ref else f" — added by user `{adder}`"

    r = cfg.roles
    lines = [
        *(f"• Discord user `{u}`{who('discord', 'user', u)}" for u in r.discord_gm_users),
        *(f"• Discord role `{g}`{who('discord', 'role', g)}" for g in r.discord_gm_role_ids),
        *(
            f"• Discord role named “{g}” (on its home servers) — written in campaign.toml"
            for g in r.discord_gm_role_names
        ),
        *(f"• Slack user `{u}`{who('slack', 'user', u)}" for u in r.slack_gm_users),
        *(f"• Slack user group `{g}`{who('slack', 'usergroup', g)}" for g in r.slack_gm_usergroups),
    ]
    return f"GMs of **{cfg.name}**:\n" + "\n".join(lines or ["• none"])


async def _settings(request: Request, scope: Scope) -> Reply:
    cfg, services = scope.config, scope.services
    recap = request.string("recap").strip()
    uploads = request.string("uploads").strip().lower()
    budget = request.integer("budget")
    said: list[str] = []
    if uploads:
        if uploads not in {"players", "gm"}:
            raise InvalidInput("bad uploads", user_message=_SETTINGS_USAGE)
        cfg = await services.engine.edit_campaign(
            cfg.slug, lambda t: set_settings(t, upload_visibility=uploads)
        )
        said.append(
            "Uploads that say nothing are now read by "
            + ("the players." if uploads == "players" else "the GM only.")
        )
    if budget is not None:
        if not LOW <= budget <= HIGH:
            raise InvalidInput(
                "budget out of range",
                user_message=f"Budgets must be between {LOW:,} and {HIGH:,} tokens.",
            )
        await services.engine.set_budget(cfg.slug, budget)
        said.append(f"Answers are built from up to {budget:,} tokens of context.")
    if recap:
        said.append(await _set_recap(request, scope, recap))
        cfg = await services.config(cfg.slug)
    if said:
        return Reply(text="\n".join(said))
    shown = await services.engine.budget(cfg.slug, None, default=services.responder.budget_tokens)
    schedule = (
        await services.scheduler.describe(cfg.slug)
        if services.scheduler is not None
        else (f"`{cfg.recap_cron}` (UTC) to `{cfg.recap_channel}`" if cfg.recap_cron else "off")
    )
    return Reply(
        text=f"Settings of **{cfg.name}**:\n"
        f"• recap: {schedule}\n"
        f"• uploads that say nothing: {'players' if cfg.upload_visibility == 'players' else 'GM-only'}\n"
        f"• answer length (context budget): {shown:,} tokens\n{_SETTINGS_USAGE}"
    )


async def _set_recap(request: Request, scope: Scope, spec: str) -> str:
    """``[recap]`` of campaign.toml set to post here on ``spec`` (or cleared by ``off``). A
    schedule ``/recap schedule`` stored would shadow it: it goes."""
    cfg, services, msg = scope.config, scope.services, request.msg
    off = spec.lower() in {"off", "none", "stop"}
    if not off:
        if msg.platform not in {"discord", "slack"} or msg.is_dm:
            raise InvalidInput(
                "recap off a channel",
                user_message="Set the recap from the Discord or Slack channel it posts to.",
            )
        if msg.parent_id:
            raise InvalidInput(
                "recap in a thread",
                user_message="Set the recap in the channel itself (in a thread, `/recap schedule` "
                "posts there).",
            )
        parse_cron(spec)
    cron, channel = ("", "") if off else (spec, f"{msg.platform}:{msg.channel_id}")
    await services.engine.edit_campaign(
        cfg.slug, lambda t: set_settings(t, recap_cron=cron, recap_channel=channel)
    )
    if services.scheduler is not None:
        await services.scheduler.remove_schedule(cfg.slug)  # also re-arms from campaign.toml
        return await services.scheduler.describe(cfg.slug)
    return "Recaps are off." if off else f"Recaps will be posted here on `{cron}` (UTC)."


async def _homes_report(scope: Scope, cfg: CampaignConfig) -> str:
    """The campaign's Discord homes, for its GMs: where role names count, and why."""
    directory = scope.services.directory
    linked = await directory.linked_guilds("discord", cfg.slug)
    adders: dict[str, set[str | None]] = {}
    for row in await directory.link_rows("discord", cfg.slug):
        if row.guild_id is not None:
            adders.setdefault(row.guild_id, set()).add(row.linked_by)

    def by(guild: str) -> str:
        known = sorted(u for u in adders.get(guild, set()) if u is not None)
        said = ", ".join(f"user `{u}`" for u in known)
        if None in adders.get(guild, set()):
            said += (" and " if said else "") + "the host or before this was recorded"
        return f" by {said}" if said else ""

    listed = cfg.roles.discord_guilds
    lines: list[str] = []
    for guild in listed:
        n = linked.get(guild, 0)
        lines.append(
            f"• `{guild}`: listed in campaign.toml `guilds`"
            + (f", {n} channel(s) linked{by(guild)}" if n else "")
        )
    for guild, n in sorted(linked.items()):
        if guild not in listed:
            lines.append(
                f"• `{guild}`: {n} channel(s) linked{by(guild)}"
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
    description="Create a campaign, link this channel to one, name its GMs, change its settings",
    run=run,
    options=(
        Option(
            "action",
            "string",
            "status, create, list, link, unlink, gm, settings, release a server, accept campaign.toml",
            choices=_ACTIONS,
            default="status",
        ),
        Option(
            "slug",
            "string",
            "link: the campaign; create: its short name (default: from the name)",
            autocomplete="campaigns",
            low=1,
            high=63,
        ),
        Option("name", "string", "create: the campaign's name", low=1, high=100),
        Option("change", "string", "gm: add or remove a GM", choices=("add", "remove")),
        Option("member", "mention", "gm: the user or role to add or remove"),
        Option(
            "recap",
            "string",
            "settings: cron (UTC) to post a recap in this channel, or off",
            low=1,
            high=100,
        ),
        Option(
            "uploads",
            "string",
            "settings: who reads uploaded files that say nothing",
            choices=("gm", "players"),
        ),
        Option(
            "budget", "integer", "settings: answer length, in tokens of context", low=LOW, high=HIGH
        ),
        Option("server", "string", "release: the server id (see status)", low=1, high=25),
        Option(
            "confirm",
            "string",
            "link: yes, link a channel that plays another campaign",
            choices=("yes",),
        ),
    ),
    usage=(
        "`/campaign create <name>` — make a campaign with you as its GM and link this channel "
        "(Discord: Manage Server; Slack: a workspace admin)",
        "`/campaign list` — the campaigns you are a GM of",
        "`/campaign link <slug>|unlink|status` — link this channel to a campaign (GM; a channel "
        "that plays another campaign: its GM or a server admin, who confirms)",
        "`/campaign gm add|remove @user|@role` — GM: who else is a GM",
        "`/campaign settings [recap <cron>|off] [uploads players|gm] [budget <tokens>]` — GM",
        "`/campaign release <server id>` — GM: unlink a Discord server, ending its GM role names",
        "`/campaign accept` — GM: apply a hand-edited campaign.toml that drops a GM folder, a "
        "lens or a GM (shown in `/campaign status`)",
    ),
    example="/campaign create Greyhold",
    gm_only=lambda request: request.string("action") in _GM_ACTIONS,
    private=lambda request, scope: (
        request.string("action")
        in {"status", "release", "create", "list", "gm", "settings", "accept"}
    ),
    need=_need,
    parse=_parse,
    group="gm",
)
