"""Campaign configuration: ``campaigns/<slug>/campaign.toml``.

A campaign is a folder of documents plus this file, which names its lenses, the folders whose
documents are GM-only, the always-include documents, and how platform roles map to lenses.
"""

from __future__ import annotations

import fnmatch
import logging
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from liminalis.errors import ConfigError, UnknownCampaign
from liminalis.ingest.ids import LENS_NAME_BYTES
from liminalis.lens import GM

_log = logging.getLogger(__name__)

__all__ = [
    "CampaignConfig",
    "load_campaign",
    "read_campaign_text",
    "parse_campaign",
    "has_gm",
    "walls_dropped",
    "is_blank",
    "validate_slug",
    "RoleMap",
    "split_role_refs",
    "is_discord_id",
]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_DISCORD_ID = re.compile(r"[0-9]{17,20}")


def is_discord_id(value: str) -> bool:
    """Whether ``value`` is written like a Discord id (a snowflake: 17 to 20 ASCII digits)."""
    return bool(_DISCORD_ID.fullmatch(value))


def split_role_refs(
    entries: tuple[str, ...] | list[str],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(ids, names)`` of the Discord roles a campaign.toml list names.

    One list holds both, as GMs write it (``gm = ["GM", "123456789012345678"]``): an entry of
    17 to 20 ASCII digits is a role *id*, anything else a role *name*. The two are matched
    apart, ids against the member's role ids and names against their role names, so a role
    someone *named* "123456789012345678" is never the role with that id. (A role whose real
    name is such a number can only be given by its id.)
    """
    ids = tuple(e for e in entries if is_discord_id(e))
    return ids, tuple(e for e in entries if not is_discord_id(e))


def validate_slug(slug: str) -> str:
    """Return ``slug`` if it is a safe campaign identifier, else raise ``UnknownCampaign``."""
    s = (slug or "").strip().lower()
    if not _SLUG.match(s):
        raise UnknownCampaign(
            f"invalid campaign slug {slug!r}", user_message="That is not a valid campaign name."
        )
    return s


@dataclass(frozen=True, slots=True)
class RoleMap:
    """Who holds which lens on each platform.

    Discord roles are given by id or by name in one list (:func:`split_role_refs`); the ids and
    the names are kept apart here and never compared with each other.
    """

    discord_gm_role_ids: tuple[str, ...] = ()
    #: Role *names*: they count only on the campaign's home servers (``bot.directory``).
    discord_gm_role_names: tuple[str, ...] = ()
    discord_gm_users: tuple[str, ...] = ()
    #: The Discord servers (guild ids) whose role *names* count. Anyone can create a role named
    #: "GM" on a server of their own, so names only mean something on the campaign's servers;
    #: empty: the servers where a channel is linked to it now (the last unlink releases one).
    discord_guilds: tuple[str, ...] = ()
    slack_gm_users: tuple[str, ...] = ()
    slack_gm_usergroups: tuple[str, ...] = ()
    # lens name -> {"discord_roles": [...], "discord_users": [...], "slack_users": [...]}
    # (discord_roles mixes ids and names like ``gm``: see split_role_refs)
    lens_members: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CampaignConfig:
    slug: str
    name: str
    root: Path
    description: str = ""
    lenses: tuple[str, ...] = ()
    gm_paths: tuple[str, ...] = ("gm/**",)
    always_include: tuple[str, ...] = ()
    roles: RoleMap = field(default_factory=RoleMap)
    recap_cron: str = ""
    recap_channel: str = ""
    whole_document_chars: int = 2400
    #: Who reads an uploaded file that says nothing itself (no front matter ``visibility``) and
    #: was uploaded without a visibility option: GM-only unless ``upload_visibility`` says so.
    upload_visibility: str = "gm"
    # Runtime uploads live outside the (git-tracked) campaign folder, under the data directory;
    # their documents get ids under ``uploads/``.
    uploads_root: Path | None = None
    #: Digests of text the wall held by habit that a GM reviewed and chose to show to players
    #: (:func:`liminalis.ingest.sections.section_digest`): kept in the store, not in the file.
    released: frozenset[str] = frozenset()

    def path_of(self, rel_path: str) -> Path:
        if self.uploads_root is not None and rel_path.startswith("uploads/"):
            return self.uploads_root / rel_path[len("uploads/") :]
        return self.root / rel_path

    def is_gm_path(self, rel_path: str) -> bool:
        """Whether ``rel_path`` lies under one of the GM folders. Matched without regard to case:
        on a case-insensitive disk (macOS, Windows) ``GM/plan.md`` *is* in ``gm/``, and a GM who
        names the folder so must not publish its contents (erring toward GM-only is the safe side)."""
        p = str(PurePosixPath(rel_path)).lower()
        for pattern in (g.lower() for g in self.gm_paths):
            if fnmatch.fnmatchcase(p, pattern):
                return True
            prefix = pattern.split("/**")[0].rstrip("/*")
            if prefix and "*" not in prefix and p.startswith(prefix + "/"):
                return True
        return False


def has_gm(config: CampaignConfig) -> bool:
    """Whether ``config`` names any GM (a user, a role or a user group on some platform)."""
    r = config.roles
    return any(
        (
            r.discord_gm_role_ids,
            r.discord_gm_role_names,
            r.discord_gm_users,
            r.slack_gm_users,
            r.slack_gm_usergroups,
        )
    )


def walls_dropped(good: CampaignConfig, new: CampaignConfig) -> tuple[str, ...]:
    """What ``new`` drops of the walls ``good`` keeps, in words for the campaign's GMs.

    A file cut short, emptied, or half copied parses as the defaults for every key it lost, and
    each default is the open side of its wall: no GM folder but ``gm/``, no personal lens, no GM.
    A tick alone must not publish what such a file forgot, so a new config that drops any of these
    waits for a GM's word (``Engine.accept_campaign``): a GM folder (compared as written, without
    regard to case: another pattern may not cover the same files), a personal lens (its readers
    would lose it, which is how a cut file looks, and a lens no longer known stops the loader
    refusing a misplaced ``visibility`` that names it), uploads that say nothing read more widely,
    every GM, or the list of servers where GM role names count. A wall or a reader added (a GM,
    a lens member, a server) is applied at once: a cut or emptied file can only lose keys, and
    a host's hand edit counts from the next message as it always has.
    """
    dropped: list[str] = []
    gm_paths = {g.lower() for g in new.gm_paths}
    if lost := [g for g in good.gm_paths if g.lower() not in gm_paths]:
        dropped.append("it drops the GM folder(s) " + ", ".join(f"`{g}`" for g in lost))
    if lost := [lens for lens in good.lenses if lens not in new.lenses]:
        dropped.append("it drops the lens(es) " + ", ".join(f"`{lens}`" for lens in lost))
    if new.upload_visibility not in {good.upload_visibility, GM}:
        dropped.append(f"uploads that say nothing would be read by `{new.upload_visibility}`")
    if has_gm(good) and not has_gm(new):
        dropped.append("it names no GM")
    if good.roles.discord_guilds and not new.roles.discord_guilds:
        # Without the list, role names count on every server a channel is linked from.
        dropped.append(
            "it drops `[roles.discord] guilds`: GM role names would count on every server "
            "linked to the campaign"
        )
    return tuple(dropped)


def is_blank(text: str) -> bool:
    """Whether a ``campaign.toml`` text sets nothing (empty, blank, or comments only)."""
    return not any(
        line.strip() and not line.lstrip().startswith("#")
        for line in text.removeprefix("\ufeff").splitlines()
    )


def _strs(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(str(v) for v in value)


def _table(value: Any, where: str) -> dict[str, Any]:
    """A TOML table, or a :class:`ConfigError` that names the key (a GM edits this file by hand)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table ([{where}] with keys under it)")
    return value


def load_campaign(root: Path, slug: str | None = None) -> CampaignConfig:
    """Read ``root/campaign.toml``; a folder without one is a campaign with defaults."""
    slug = validate_slug(slug or root.name)
    if not root.is_dir():
        raise UnknownCampaign(
            f"campaign folder {root} missing", user_message=f"No campaign named `{slug}`."
        )
    return parse_campaign(read_campaign_text(root, slug) or "", root, slug)


def read_campaign_text(root: Path, slug: str) -> str | None:
    """The text of ``root/campaign.toml``, ``None`` when there is none; raises
    :class:`ConfigError` when it cannot be read. Blocking."""
    cfg_path = root / "campaign.toml"
    try:
        # utf-8-sig: an editor on Windows may begin the file with a byte-order mark, which
        # TOML itself refuses ("Invalid statement" on line 1 of a file that looks right).
        return cfg_path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise _toml_error(slug, str(exc)) from exc
    except OSError as exc:
        raise _toml_error(slug, f"unreadable ({exc.strerror or 'I/O error'})") from None


def parse_campaign(text: str, root: Path, slug: str) -> CampaignConfig:
    """The config a ``campaign.toml`` text gives (``""``: the defaults). A text a GM must fix
    raises :class:`ConfigError` naming the campaign and the reason (a TOML position or a key)."""
    try:
        data: dict[str, Any] = tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(slug, str(exc)) from exc
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise _toml_error(slug, "values nested too deeply") from None
    try:
        return _config(data, root, slug)
    except ConfigError as exc:
        raise _toml_error(slug, exc.detail) from exc
    except (RecursionError, OverflowError, ValueError, TypeError) as exc:
        # A value of a shape no key expects (nested hundreds deep, an infinite number): the
        # campaign's config, not the bot, is at fault, and one campaign's must not stop the rest.
        raise _toml_error(slug, f"a value cannot be read ({type(exc).__name__})") from exc


def _toml_error(slug: str, reason: str) -> ConfigError:
    """A campaign.toml a GM must fix: ``detail`` names the campaign and the reason (a TOML
    position or a key, never a path or a value), which the GM is shown by ``/campaign status``."""
    return ConfigError(
        f"campaign.toml of {slug}: {reason}",
        user_message="This campaign's settings file (campaign.toml) has an error; a GM can fix it.",
    )


def _config(data: dict[str, Any], root: Path, slug: str) -> CampaignConfig:
    """The config ``data`` (parsed campaign.toml) describes; raises :class:`ConfigError`."""
    roles = _table(data.get("roles"), "roles")
    discord = _table(roles.get("discord"), "roles.discord")
    slack = _table(roles.get("slack"), "roles.slack")
    gm_role_ids, gm_role_names = split_role_refs(_strs(discord.get("gm"), "roles.discord.gm"))
    members: dict[str, dict[str, tuple[str, ...]]] = {}
    for lens, spec in _table(data.get("lens_members"), "lens_members").items():
        spec = _table(spec, f"lens_members.{lens}")
        members[str(lens)] = {k: _strs(v, f"lens_members.{lens}.{k}") for k, v in spec.items()}
    named = [
        lens.lower()
        for lens in _strs(data.get("lenses"), "lenses")
        if lens.lower() not in {"gm", "players"}
    ]
    # A lens name is an element of the vector store's visibility array and part of a personal
    # view's id (liminalis.ingest.ids): a longer one would fail every document it could read.
    lenses = tuple(
        lens
        for lens in named
        if re.fullmatch(r"[a-z0-9][\w-]*", lens) and len(lens.encode()) <= LENS_NAME_BYTES
    )
    if len(lenses) < len(named):
        _log.warning(
            "%s: lens names are letters, digits, - and _ only, at most %d bytes; ignored: %s",
            slug,
            LENS_NAME_BYTES,
            ", ".join(sorted(set(named) - set(lenses))),
        )
    recap = _table(data.get("recap"), "recap")
    try:
        whole_chars = int(data.get("whole_document_chars", 2400))
    except (TypeError, ValueError):
        raise ConfigError("whole_document_chars must be a number") from None
    return CampaignConfig(
        slug=slug,
        name=str(data.get("name") or slug),
        root=root,
        description=str(data.get("description", "")),
        lenses=lenses,
        gm_paths=_strs(data.get("gm_paths", ["gm/**"]), "gm_paths"),
        always_include=_strs(data.get("always_include"), "always_include"),
        roles=RoleMap(
            discord_gm_role_ids=gm_role_ids,
            discord_gm_role_names=gm_role_names,
            discord_gm_users=_strs(discord.get("gm_users"), "roles.discord.gm_users"),
            discord_guilds=_strs(discord.get("guilds"), "roles.discord.guilds"),
            slack_gm_users=_strs(slack.get("gm_users"), "roles.slack.gm_users"),
            slack_gm_usergroups=_strs(slack.get("gm_usergroups"), "roles.slack.gm_usergroups"),
            lens_members=members,
        ),
        recap_cron=str(recap.get("cron", "")),
        recap_channel=str(recap.get("channel", "")),
        whole_document_chars=whole_chars,
        upload_visibility=str(data.get("upload_visibility", "gm")).strip().lower() or "gm",
    )
