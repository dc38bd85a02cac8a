"""Writing ``campaign.toml``: a campaign made, its GMs and its settings changed from chat.

``campaign.toml`` stays the file a host may edit by hand, and these functions edit it the way a
person would: through tomlkit, a style-preserving TOML library, so the comments, the key order
and the keys this code does not know survive every edit (``tomllib`` only reads). Every edit
is parsed back with :func:`liminalis.campaign.parse_campaign` before it is written, so a write
never leaves a file the bot cannot read, and the file is replaced atomically (a temporary file
beside it, then a rename): a reader sees the old file or the new one, never half. Nothing here
caches the file: a hand edit is simply the newest text, read by the next edit and by
``Engine.campaign`` on the next message (which holds back one that drops a wall until a GM
accepts it).

Where GMs go: a Discord user in ``[roles.discord] gm_users``, a Discord role's id in
``[roles.discord] gm`` (beside any role names), a Slack user in ``[roles.slack] gm_users`` and a
Slack user group in ``[roles.slack] gm_usergroups``.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.exceptions import TOMLKitError

from liminalis.campaign import has_gm, parse_campaign, validate_slug
from liminalis.errors import ConfigError, InvalidInput
from liminalis.text import fold_accents

__all__ = [
    "GmRef",
    "add_gm",
    "new_campaign_toml",
    "remove_gm",
    "set_settings",
    "slug_for",
    "write_atomically",
]

GmKind = Literal["user", "role", "usergroup"]

#: (platform, kind) → where in campaign.toml such a GM is listed.
_PLACE: dict[tuple[str, str], tuple[str, str]] = {
    ("discord", "user"): ("discord", "gm_users"),
    ("discord", "role"): ("discord", "gm"),
    ("slack", "user"): ("slack", "gm_users"),
    ("slack", "usergroup"): ("slack", "gm_usergroups"),
}


@dataclass(frozen=True, slots=True)
class GmRef:
    """A GM given by id: a platform user, a Discord role or a Slack user group."""

    platform: str  # "discord" | "slack"
    kind: GmKind
    id: str

    def __post_init__(self) -> None:
        if (self.platform, self.kind) not in _PLACE:
            raise InvalidInput(
                f"no GM list for {self.platform} {self.kind}",
                user_message="GMs are Discord users or roles, or Slack users or user groups.",
            )

    def mention(self) -> str:
        """How the platform writes it (a chat renders it as the name)."""
        if self.kind == "role":
            return f"<@&{self.id}>"
        if self.kind == "usergroup":
            return f"<!subteam^{self.id}>"
        return f"<@{self.id}>"


def slug_for(name: str) -> str:
    """The campaign slug a name gives: ``"L'Été des Cendres"`` → ``l-ete-des-cendres``.

    Raises:
        InvalidInput: the name has no letter or digit a slug can keep.
    """
    folded = fold_accents(name).lower()
    slug = re.sub(r"[^a-z0-9]+", "-", folded).strip("-")[:63].rstrip("-")
    if not slug:
        raise InvalidInput(
            f"no slug in {name!r}",
            user_message="Give the campaign a name with letters or digits, e.g. `/campaign create Greyhold`.",
        )
    return validate_slug(slug)


_TEMPLATE = """\
# Written by `/campaign create`. `/campaign gm` and `/campaign settings` edit it, and so may you:
# a hand edit counts from the bot's next message on (comments and unknown keys are kept).
name = {name}
# Player-facing: it goes into the prompt of every answer, a player's included. Never a secret.
description = ""
# Lenses beyond the built-in "gm" and "players": one per player character with a private backstory.
lenses = []
# Documents under these folders are GM-only even without front matter.
gm_paths = ["gm/**"]
# Who reads an uploaded file that says nothing itself: gm or players.
upload_visibility = "gm"

[roles.discord]
# GM roles: an entry of 17-20 digits is a role id, anything else a role name (a name counts
# only on the campaign's home servers: those where a channel is linked to it).
gm = []
gm_users = []

[roles.slack]
gm_users = []
gm_usergroups = []

[recap]
# A "previously on…" posted on a 5-field cron (UTC) to "discord:<channel id>" or
# "slack:<channel id>": `/campaign settings recap:<cron>` in the channel sets both.
cron = ""
channel = ""
"""


def new_campaign_toml(name: str, gm: GmRef) -> str:
    """The ``campaign.toml`` of a new campaign named ``name`` with ``gm`` its first GM."""
    text = _TEMPLATE.format(name=tomlkit.item(name).as_string())
    return add_gm(text, gm)[0]


def _parse(text: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(
            f"campaign.toml does not parse: {exc}",
            user_message="This campaign's campaign.toml has a syntax error: fix it by hand first.",
        ) from exc


def _table(parent: Any, key: str, where: str) -> Any:
    """``parent[key]``, a table (created, as a header table, when missing)."""
    if key not in parent:
        parent[key] = tomlkit.table(is_super_table=(where == "roles"))
    value = parent[key]
    if not isinstance(value, dict):
        raise ConfigError(
            f"campaign.toml: {where} is not a table",
            user_message=f"This campaign's campaign.toml has `{where}` that is not a table: fix it by hand.",
        )
    return value


def _list(table: Any, key: str, where: str) -> Any:
    if key not in table:
        table[key] = tomlkit.array()
    value = table[key]
    if not isinstance(value, list):
        raise ConfigError(
            f"campaign.toml: {where} is not a list",
            user_message=f"This campaign's campaign.toml has `{where}` that is not a list: fix it by hand.",
        )
    return value


def _checked(doc: tomlkit.TOMLDocument, *, keep_a_gm: bool = False) -> str:
    """The document's text, once it reads as a campaign (a write never breaks the file) and,
    with ``keep_a_gm``, still names a GM (a removal never leaves a campaign nobody can manage
    from chat)."""
    text = tomlkit.dumps(doc)
    config = parse_campaign(text, Path("."), "check")
    if keep_a_gm and not has_gm(config):
        raise InvalidInput(
            "no GM left",
            user_message="A campaign keeps at least one GM: add another GM first.",
        )
    return text


def _gm_list(doc: tomlkit.TOMLDocument, gm: GmRef) -> Any:
    platform, key = _PLACE[(gm.platform, gm.kind)]
    roles = _table(doc, "roles", "roles")
    table = _table(roles, platform, f"roles.{platform}")
    return _list(table, key, f"roles.{platform}.{key}")


def add_gm(text: str, gm: GmRef) -> tuple[str, bool]:
    """``text`` with ``gm`` listed; and whether it was not listed before."""
    doc = _parse(text)
    entries = _gm_list(doc, gm)
    if gm.id in {str(e) for e in entries}:
        return text, False
    entries.append(gm.id)
    return _checked(doc), True


def remove_gm(text: str, gm: GmRef) -> tuple[str, bool]:
    """``text`` without ``gm``; and whether it was listed."""
    doc = _parse(text)
    entries = _gm_list(doc, gm)
    keep = [e for e in entries if str(e) != gm.id]
    if len(keep) == len(entries):
        return text, False
    for i in reversed(range(len(entries))):
        if str(entries[i]) == gm.id:
            del entries[i]
    return _checked(doc, keep_a_gm=True), True


def set_settings(
    text: str,
    *,
    recap_cron: str | None = None,
    recap_channel: str | None = None,
    upload_visibility: str | None = None,
) -> str:
    """``text`` with the settings given (``None``: left as they are; ``""`` clears a recap)."""
    doc = _parse(text)
    if recap_cron is not None or recap_channel is not None:
        recap = _table(doc, "recap", "recap")
        if recap_cron is not None:
            recap["cron"] = recap_cron
        if recap_channel is not None:
            recap["channel"] = recap_channel
    if upload_visibility is not None:
        doc["upload_visibility"] = upload_visibility
    return _checked(doc)


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: a temporary file beside it, flushed, then renamed over it
    (blocking: call it in a worker)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
