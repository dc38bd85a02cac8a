"""A local stand-in for Discord's REST API (aiohttp.web on 127.0.0.1), for adapter tests.

discord.py sends every REST call (bot HTTP client and interaction webhooks alike) to
``discord.http.Route.BASE``; tests point that at this server, so the real client library builds,
sends and parses every request. The server records each call and answers with minimal valid
payloads. ``rate_limit_next(method, path_part, retry_after, via=...)`` makes the next matching
call answer 429 once (with ``Via`` set, discord.py's webhook adapter retries by itself; without
it, discord.py raises and the adapter's own loop must honour ``retry_after``).
``members`` holds who is a member of which server, with their roles, as ``GET
/guilds/{guild}/members/{user}`` answers (a DM's author found on a campaign's server).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from fakes.local_http import CatchAllServer

APP_ID = 900000000000000001
BOT_ID = 900000000000000002
GUILD_ID = 800000000000000001
CHANNEL_ID = 700000000000000001
THREAD_ID = 700000000000000002
GM_ROLE_ID = 600000000000000001
MIREL_ROLE_ID = 600000000000000002
# Somebody else's server, with a role of their own that they named "GM".
ROGUE_GUILD_ID = 800000000000000009
ROGUE_CHANNEL_ID = 700000000000000009
ROGUE_GM_ROLE_ID = 600000000000000009
TIMESTAMP = "2026-01-01T00:00:00.000000+00:00"


def _json(obj: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # discord.py parses JSON only when Content-Type is exactly "application/json" (no charset).
    return web.Response(
        body=json.dumps(obj).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    json: Any
    raw: bytes
    t: float = 0.0


def user_payload(uid: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(uid),
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "bot": bot,
    }


@dataclass
class FakeDiscordApi(CatchAllServer):
    calls: list[Call] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    dropped: set[str] = field(
        default_factory=set
    )  # attachment names whose download drops the connection
    missing_guilds: set[int] = field(default_factory=lambda: {999})  # guilds the bot is not in
    token_ok: bool = True  # GET /users/@me answers 401 when False (a refused bot token)
    #: (guild id, user id) → role ids: the members ``GET /guilds/…/members/…`` finds.
    members: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    _limits: list[tuple[str, str, float, bool]] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(500000000000000001))
    url: str = ""
    _runner: web.AppRunner | None = None

    def rate_limit_next(
        self, method: str, path_part: str, retry_after: float, *, via: bool
    ) -> None:
        self._limits.append((method, path_part, retry_after, via))

    def find(self, method: str, path_part: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and path_part in c.path]

    async def wait_for(
        self, method: str, path_part: str, n: int = 1, timeout: float = 5.0
    ) -> list[Call]:
        for _ in range(int(timeout / 0.02)):
            found = self.find(method, path_part)
            if len(found) >= n:
                return found
            await asyncio.sleep(0.02)
        raise AssertionError(
            f"no {method} {path_part} after {timeout}s; calls: {[(c.method, c.path) for c in self.calls]}"
        )

    def message(self, channel_id: str, body: dict[str, Any] | None) -> dict[str, Any]:
        body = body or {}
        return {
            "id": str(next(self._ids)),
            "channel_id": str(channel_id),
            "type": 0,
            "content": body.get("content") or "",
            "author": user_payload(BOT_ID, "Liminalis", bot=True),
            "attachments": [],
            "embeds": body.get("embeds") or [],
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": False,
            "timestamp": TIMESTAMP,
            "edited_timestamp": None,
            "flags": body.get("flags", 0),
            "components": [],
        }

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: Any = None
        ctype = request.headers.get("Content-Type", "")
        if raw and "json" in ctype:
            body = json.loads(raw)
        elif raw and "multipart" in ctype:
            # payload_json part of a multipart request
            text = raw.decode("utf-8", "replace")
            start = text.find("{")
            body = {"multipart": text, "json_start": start}
        path = request.path.removeprefix("/api/v10")
        self.calls.append(
            Call(
                request.method,
                path,
                dict(request.query),
                body,
                raw,
                asyncio.get_running_loop().time(),
            )
        )
        for i, (m, part, retry_after, via) in enumerate(self._limits):
            if m == request.method and part in path:
                del self._limits[i]
                headers = {"Retry-After": str(retry_after), "X-RateLimit-Scope": "user"}
                if via:
                    headers["Via"] = "1.1 google"
                return _json(
                    {
                        "message": "You are being rate limited.",
                        "retry_after": retry_after,
                        "global": False,
                    },
                    status=429,
                    headers=headers,
                )
        m = request.method
        if path.startswith("/attachments/"):
            name = path.rsplit("/", 1)[-1]
            if name in self.dropped:  # the connection drops mid-download
                assert request.transport is not None
                request.transport.close()
                return web.Response(status=200)
            return (
                web.Response(body=self.files[name])
                if name in self.files
                else web.Response(status=404)
            )
        if m == "GET" and path == "/users/@me" and not self.token_ok:
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        if m == "GET" and path.startswith("/guilds/") and "/members/" in path:
            gid, uid = int(path.split("/")[2]), int(path.split("/")[4])
            if (gid, uid) not in self.members:
                return _json({"message": "Unknown Member", "code": 10007}, status=404)
            return _json(member_payload(uid, f"user{uid}", self.members[(gid, uid)]))
        if m == "GET" and path == "/users/@me":
            return _json(user_payload(BOT_ID, "Liminalis", bot=True))
        if m == "GET" and path == "/oauth2/applications/@me":
            return _json(
                {
                    "id": str(APP_ID),
                    "name": "Liminalis",
                    "description": "",
                    "icon": None,
                    "bot_public": False,
                    "bot_require_code_grant": False,
                    "owner": user_payload(1, "owner"),
                    "verify_key": "00",
                    "flags": 0,
                }
            )
        if (
            m == "PUT"
            and "/commands" in path
            and any(f"/guilds/{g}/" in path for g in self.missing_guilds)
        ):
            return _json(
                {"message": "Missing Access", "code": 50001}, status=403
            )  # a guild the bot is not in
        if m == "PUT" and "/commands" in path:
            return _json(
                [
                    {
                        **c,
                        "id": str(next(self._ids)),
                        "application_id": str(APP_ID),
                        "version": "1",
                        "type": c.get("type", 1),
                    }
                    for c in (body or [])
                ]
            )
        if m == "POST" and path.endswith("/callback"):
            iid = path.split("/")[2]
            return _json({"interaction": {"id": iid, "type": 2}})
        if m == "DELETE":
            return web.Response(status=204)
        if m == "POST" and path == "/users/@me/channels":
            rid = body["recipient_id"]
            return _json(
                {
                    "id": str(int(rid) + 1),
                    "type": 1,
                    "recipients": [user_payload(int(rid), "dm")],
                    "last_message_id": None,
                }
            )
        if m == "POST" and path.endswith("/typing"):
            return web.Response(status=204)
        if m in {"POST", "PATCH"} and path.startswith("/webhooks/"):
            return _json(self.message(str(CHANNEL_ID), body if isinstance(body, dict) else None))
        if m == "POST" and path.startswith("/channels/") and path.endswith("/messages"):
            return _json(self.message(path.split("/")[2], body if isinstance(body, dict) else None))
        if m == "PATCH" and path.startswith("/channels/") and "/messages/" in path:
            edited = self.message(path.split("/")[2], body if isinstance(body, dict) else None)
            return _json({**edited, "id": path.split("/")[4]})
        return _json({"message": f"fake: unhandled {m} {path}", "code": 0}, status=404)


def role_payload(
    rid: int, name: str, position: int = 1, *, permissions: str = "0"
) -> dict[str, Any]:
    return {
        "id": str(rid),
        "name": name,
        "color": 0,
        "hoist": False,
        "position": position,
        "permissions": permissions,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }


def guild_payload() -> dict[str, Any]:
    """A GUILD_CREATE payload: one text channel, one thread, @everyone, GM and Mirel roles."""
    return {
        "id": str(GUILD_ID),
        "name": "Emberfall table",
        "icon": None,
        "owner_id": "1",
        "afk_channel_id": None,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "features": [],
        "mfa_level": 0,
        "system_channel_id": None,
        "system_channel_flags": 0,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "nsfw_level": 0,
        "member_count": 3,
        "large": False,
        "unavailable": False,
        "roles": [
            # @everyone may view, send and read history (what a member's DM is checked against)
            role_payload(GUILD_ID, "@everyone", 0, permissions=str(1024 | 2048 | 65536)),
            role_payload(GM_ROLE_ID, "GM", 2),
            role_payload(MIREL_ROLE_ID, "Mirel", 1),
        ],
        "emojis": [],
        "stickers": [],
        "members": [],
        "presences": [],
        "voice_states": [],
        "channels": [
            {
                "id": str(CHANNEL_ID),
                "type": 0,
                "name": "table",
                "position": 0,
                "guild_id": str(GUILD_ID),
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
                "topic": None,
                "rate_limit_per_user": 0,
            }
        ],
        "threads": [
            {
                "id": str(THREAD_ID),
                "type": 11,
                "name": "side-quest",
                "guild_id": str(GUILD_ID),
                "parent_id": str(CHANNEL_ID),
                "owner_id": "1",
                "message_count": 0,
                "member_count": 1,
                "rate_limit_per_user": 0,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": TIMESTAMP,
                    "locked": False,
                },
            }
        ],
    }


def rogue_guild_payload() -> dict[str, Any]:
    """Another server: its own channel and a role it named "GM" (a different id)."""
    p = guild_payload()
    p.update(
        id=str(ROGUE_GUILD_ID),
        name="Not the table",
        threads=[],
        roles=[
            role_payload(ROGUE_GUILD_ID, "@everyone", 0, permissions=str(1024 | 2048 | 65536)),
            role_payload(ROGUE_GM_ROLE_ID, "GM", 1),
        ],
        channels=[
            {**p["channels"][0], "id": str(ROGUE_CHANNEL_ID), "guild_id": str(ROGUE_GUILD_ID)}
        ],
    )
    return p


#: A member's permissions in the payloads (no Manage Server, no Administrator).
MEMBER_PERMISSIONS = 2248473465835073
#: With Manage Server (``1 << 5``): may ``/campaign create``.
MANAGER_PERMISSIONS = MEMBER_PERMISSIONS | (1 << 5)


def member_payload(
    uid: int, name: str, roles: list[int], *, permissions: int = MEMBER_PERMISSIONS
) -> dict[str, Any]:
    return {
        "user": user_payload(uid, name),
        "roles": [str(r) for r in roles],
        "nick": None,
        "joined_at": TIMESTAMP,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "avatar": None,
        "premium_since": None,
        "pending": False,
        "permissions": str(permissions),
    }


def interaction_payload(
    name: str,
    options: list[dict[str, Any]] | None = None,
    *,
    user_id: int,
    roles: list[int] = (),  # type: ignore[assignment]
    channel_id: int = CHANNEL_ID,
    dm: bool = False,
    autocomplete: bool = False,
    resolved: dict[str, Any] | None = None,
    iid: int = 400000000000000001,
    guild_id: int = GUILD_ID,
    permissions: int = MEMBER_PERMISSIONS,
    private_channel: int | None = None,
) -> dict[str, Any]:
    """An INTERACTION_CREATE payload for a chat-input command (type 2) or its autocomplete (type
    4). ``name`` may name a group's subcommand, ``"lore ask"``: its options nest under it, as
    Discord sends them. ``private_channel`` (1: a DM, 3: a group DM) is a conversation between
    people the app is not a member of, where a user-installed app's commands come from
    (context 2, ``PRIVATE_CHANNEL``)."""
    group, _, sub = name.partition(" ")
    data: dict[str, Any] = {
        "id": "300000000000000001",
        "name": group,
        "type": 1,
        "options": [{"name": sub, "type": 1, "options": options or []}] if sub else options or [],
    }
    if resolved:
        data["resolved"] = resolved
    return _interaction(
        4 if autocomplete else 2,
        data,
        user_id=user_id,
        roles=roles,
        channel_id=channel_id,
        dm=dm,
        iid=iid,
        guild_id=guild_id,
        permissions=permissions,
        private_channel=private_channel,
    )


def component_payload(
    custom_id: str,
    *,
    user_id: int,
    roles: list[int] = (),  # type: ignore[assignment]
    channel_id: int = CHANNEL_ID,
    dm: bool = False,
    iid: int = 410000000000000001,
    guild_id: int = GUILD_ID,
    message_id: int = 460000000000000001,
    ephemeral: bool = False,
) -> dict[str, Any]:
    """An INTERACTION_CREATE payload for a press of the button ``custom_id`` (type 3) on a
    message of the bot's."""
    p = _interaction(
        3,
        {"custom_id": custom_id, "component_type": 2},
        user_id=user_id,
        roles=roles,
        channel_id=channel_id,
        dm=dm,
        iid=iid,
        guild_id=guild_id,
    )
    p["message"] = {
        **FakeDiscordApi().message(str(channel_id), None),
        "id": str(message_id),
        "flags": 64 if ephemeral else 0,
    }
    return p


def modal_payload(
    custom_id: str,
    value: str,
    *,
    user_id: int,
    roles: list[int] = (),  # type: ignore[assignment]
    channel_id: int = CHANNEL_ID,
    dm: bool = False,
    iid: int = 420000000000000001,
    guild_id: int = GUILD_ID,
) -> dict[str, Any]:
    """An INTERACTION_CREATE payload for a sent form (type 5): one text input, ``value``."""
    data = {
        "custom_id": custom_id,
        "components": [
            {"type": 1, "components": [{"type": 4, "custom_id": "value", "value": value}]}
        ],
    }
    return _interaction(
        5,
        data,
        user_id=user_id,
        roles=roles,
        channel_id=channel_id,
        dm=dm,
        iid=iid,
        guild_id=guild_id,
    )


def _interaction(
    kind: int,
    data: dict[str, Any],
    *,
    user_id: int,
    roles: list[int],
    channel_id: int,
    dm: bool,
    iid: int,
    guild_id: int,
    permissions: int = MEMBER_PERMISSIONS,
    private_channel: int | None = None,
) -> dict[str, Any]:
    dm = dm or private_channel is not None
    p: dict[str, Any] = {
        "id": str(iid),
        "application_id": str(APP_ID),
        "type": kind,
        "data": data,
        "token": f"tok{iid}",
        "version": 1,
        "locale": "en-US",
        "app_permissions": "2248473465835073",
        "channel_id": str(channel_id),
        "entitlements": [],
        "authorizing_integration_owners": {"0": str(guild_id)},
        "context": 2 if private_channel else 1 if dm else 0,
        "attachment_size_limit": 10485760,
    }
    if dm:
        p["user"] = user_payload(user_id, f"user{user_id}")
        p["channel"] = {
            "id": str(channel_id),
            "type": private_channel or 1,
            "recipients": [user_payload(user_id, "u")]
            + ([user_payload(user_id + 1, "friend")] if private_channel else []),
        }
    else:
        p["guild_id"] = str(guild_id)
        p["member"] = member_payload(
            user_id, f"user{user_id}", list(roles), permissions=permissions
        )
        p["channel"] = {
            "id": str(channel_id),
            "type": 11 if channel_id == THREAD_ID else 0,
            "guild_id": str(guild_id),
            "name": "x",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": str(CHANNEL_ID) if channel_id == THREAD_ID else None,
            "permissions": "2248473465835073",
        }
    return p


def message_payload(
    content: str,
    *,
    user_id: int,
    roles: list[int] = (),
    mentions_bot: bool = True,  # type: ignore[assignment]
    channel_id: int = CHANNEL_ID,
    attachments: list[dict[str, Any]] | None = None,
    mid: int = 450000000000000001,
    guild_id: int = GUILD_ID,
) -> dict[str, Any]:
    """A MESSAGE_CREATE payload in a guild (``GUILD_ID`` unless told)."""
    member = member_payload(user_id, f"user{user_id}", list(roles))
    member.pop("user")
    return {
        "id": str(mid),
        "channel_id": str(channel_id),
        "guild_id": str(guild_id),
        "type": 0,
        "content": content,
        "author": user_payload(user_id, f"user{user_id}"),
        "member": member,
        "attachments": attachments or [],
        "embeds": [],
        "mentions": [user_payload(BOT_ID, "Liminalis", bot=True)] if mentions_bot else [],
        "mention_roles": [],
        "mention_everyone": False,
        "pinned": False,
        "tts": False,
        "timestamp": TIMESTAMP,
        "edited_timestamp": None,
        "flags": 0,
        "components": [],
    }
