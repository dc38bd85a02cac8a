"""A local mock of Slack's Web API (aiohttp.web on 127.0.0.1), as slack-bolt's own tests use.

``AsyncWebClient(token=..., base_url=server.api_url)`` sends every Web API call here; slash
command ``response_url``s and file downloads point here too. Calls are recorded with their parsed
arguments; ``usergroups`` sets what ``usergroups.list`` returns (``None`` → an error response),
``users`` what ``users.info`` says of a user (``is_admin``, ``is_owner``).
``channel_members`` what ``conversations.members`` returns per channel (a channel not in it:
``channel_not_found``). ``chat.update``, ``views.open`` and ``views.publish`` are accepted and
recorded.

Files go up as ``files_upload_v2`` sends them: ``files.getUploadURLExternal`` hands out an id and
an upload URL on this same server (``/upload/<id>``), the bytes are POSTed there (kept in
``uploads``; recorded without them), and ``files.completeUploadExternal`` shares them in
``channel_id`` (and ``thread_ts``): each share is in ``shared``. ``conversations.open`` opens the
app's DM with a user (``D<user>``); ``dm_ok = False`` answers it ``missing_scope``.
``no_uploads`` holds channels where sharing a file is refused (``not_in_channel``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from aiohttp import web

from fakes.local_http import CatchAllServer

BOT_USER = "UBOT0001"
SIGNING_SECRET = "test-signing-secret"


@dataclass
class SlackCall:
    path: str
    args: dict[str, Any]
    headers: dict[str, str]
    t: float


@dataclass
class SharedFile:
    """A file shared by ``files.completeUploadExternal``."""

    file_id: str
    title: str
    channel: str
    thread_ts: str | None
    data: bytes


@dataclass
class MockSlackApi(CatchAllServer):
    calls: list[SlackCall] = field(default_factory=list)
    usergroups: list[dict[str, Any]] | None = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    token_ok: bool = True  # auth.test answers invalid_auth when False
    app_token_ok: bool = True  # apps.connections.open answers invalid_auth when False
    users: dict[str, dict[str, Any]] = field(default_factory=dict)  # users.info by id
    channel_members: dict[str, list[str]] = field(default_factory=dict)
    uploads: dict[str, bytes] = field(default_factory=dict)  # file id → the bytes POSTed
    shared: list[SharedFile] = field(default_factory=list)
    dm_ok: bool = True
    no_uploads: set[str] = field(default_factory=set)
    url: str = ""
    _runner: web.AppRunner | None = None

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def find(self, path_part: str) -> list[SlackCall]:
        return [c for c in self.calls if path_part in c.path]

    async def wait_for(self, path_part: str, n: int = 1, timeout: float = 5.0) -> list[SlackCall]:
        for _ in range(int(timeout / 0.02)):
            found = self.find(path_part)
            if len(found) >= n:
                return found
            await asyncio.sleep(0.02)
        raise AssertionError(
            f"no {path_part} after {timeout}s; calls: {[c.path for c in self.calls]}"
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if request.path.startswith("/upload/"):  # a file's bytes, not a form to parse
            file_id = request.path.rsplit("/", 1)[-1]
            self.calls.append(
                SlackCall(
                    request.path,
                    {"length": len(raw)},
                    dict(request.headers),
                    asyncio.get_running_loop().time(),
                )
            )
            if file_id not in self.uploads:
                return web.Response(status=404)
            self.uploads[file_id] = raw
            return web.Response(text="OK - " + str(len(raw)))
        ctype = request.headers.get("Content-Type", "")
        args: dict[str, Any] = {}
        if raw and "json" in ctype:
            args = json.loads(raw)
        elif raw:
            args = dict(parse_qsl(raw.decode()))
        args.update(request.query)
        self.calls.append(
            SlackCall(request.path, args, dict(request.headers), asyncio.get_running_loop().time())
        )
        path = request.path
        if path.startswith("/files/"):
            if request.headers.get("Authorization") != "Bearer xoxb-test":
                return web.Response(status=403)
            name = path.rsplit("/", 1)[-1]
            if name not in self.files:
                return web.Response(status=404)
            # Streamed in pieces, as a real file server over a real network delivers them.
            resp = web.StreamResponse()
            resp.content_length = len(self.files[name])
            await resp.prepare(request)
            for i in range(0, len(self.files[name]), 4096):
                await resp.write(self.files[name][i : i + 4096])
                await asyncio.sleep(0.002)
            await resp.write_eof()
            return resp
        if path.startswith("/respond/"):
            return web.Response(text="ok")
        method = path.removeprefix("/api/")
        if method == "auth.test" and not self.token_ok:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        if method == "auth.test":
            return web.json_response(
                {
                    "ok": True,
                    "url": "https://test.slack.com/",
                    "team": "T",
                    "user": "liminalis",
                    "team_id": "T0001",
                    "user_id": BOT_USER,
                    "bot_id": "B0001",
                }
            )
        if method == "apps.connections.open":
            if not self.app_token_ok:
                return web.json_response({"ok": False, "error": "invalid_auth"})
            return web.json_response({"ok": True, "url": "wss://localhost/link"})
        if method == "usergroups.list":
            if self.usergroups is None:
                return web.json_response({"ok": False, "error": "missing_scope"})
            return web.json_response({"ok": True, "usergroups": self.usergroups})
        if method == "users.info":
            user = self.users.get(str(args.get("user")))
            if user is None:
                return web.json_response({"ok": False, "error": "user_not_found"})
            return web.json_response({"ok": True, "user": {"id": args.get("user"), **user}})
        if method in {"chat.postMessage", "chat.postEphemeral"}:
            return web.json_response(
                {"ok": True, "channel": args.get("channel"), "ts": f"{time.time_ns() / 1e9:.6f}"}
            )
        if method == "chat.update":
            return web.json_response(
                {"ok": True, "channel": args.get("channel"), "ts": args.get("ts")}
            )
        if method in {"views.open", "views.publish"}:
            return web.json_response({"ok": True, "view": {"id": "V0001"}})
        if method == "files.getUploadURLExternal":
            file_id = f"F{len(self.uploads) + 1:08d}"
            self.uploads[file_id] = b""
            return web.json_response(
                {"ok": True, "file_id": file_id, "upload_url": f"{self.url}/upload/{file_id}"}
            )
        if method == "files.completeUploadExternal":
            channel = str(args.get("channel_id") or "")
            if channel in self.no_uploads:
                return web.json_response({"ok": False, "error": "not_in_channel"})
            done = []
            for f in json.loads(args.get("files") or "[]"):
                if f.get("id") not in self.uploads:
                    return web.json_response({"ok": False, "error": "file_not_found"})
                data = self.uploads[f["id"]]
                title = str(f.get("title") or "")
                self.shared.append(
                    SharedFile(f["id"], title, channel, args.get("thread_ts") or None, data)
                )
                done.append({"id": f["id"], "title": title, "size": len(data)})
            return web.json_response({"ok": True, "files": done})
        if method == "conversations.open":
            if not self.dm_ok:
                return web.json_response({"ok": False, "error": "missing_scope"})
            return web.json_response({"ok": True, "channel": {"id": f"D{args.get('users')}"}})
        if method == "conversations.members":
            channel = str(args.get("channel"))
            if channel not in self.channel_members:
                return web.json_response({"ok": False, "error": "channel_not_found"})
            return web.json_response(
                {
                    "ok": True,
                    "members": self.channel_members[channel],
                    "response_metadata": {"next_cursor": ""},
                }
            )
        return web.json_response({"ok": False, "error": "unknown_method"})


def signed_headers(
    body: str, *, content_type: str, secret: str = SIGNING_SECRET
) -> dict[str, list[str]]:
    """Headers of a request signed the way Slack signs them (v0 HMAC-SHA256 over ts and body)."""
    ts = str(int(time.time()))
    sig = "v0=" + hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "content-type": [content_type],
        "x-slack-signature": [sig],
        "x-slack-request-timestamp": [ts],
    }


def command_body(
    command: str,
    text: str,
    *,
    user_id: str,
    channel_id: str = "C0TABLE",
    response_url: str,
    channel_name: str | None = None,
) -> str:
    """A slash command's form body. ``channel_name`` as Slack sends it: ``directmessage`` for
    any DM (the app's or one between two people), ``mpdm-…`` for a group DM."""
    if channel_name is None:
        channel_name = "directmessage" if channel_id.startswith("D") else "table"
    return urlencode(
        {
            "token": "verification",
            "team_id": "T0001",
            "team_domain": "test",
            "channel_id": channel_id,
            "channel_name": channel_name,
            "user_id": user_id,
            "user_name": user_id.lower(),
            "command": command,
            "text": text,
            "api_app_id": "A0001",
            "response_url": response_url,
            "trigger_id": "1.2.3",
        }
    )


def event_body(event: dict[str, Any]) -> str:
    return json.dumps(
        {
            "token": "verification",
            "team_id": "T0001",
            "api_app_id": "A0001",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{time.time_ns()}",
            "event_time": int(time.time()),
            "authorizations": [
                {"enterprise_id": None, "team_id": "T0001", "user_id": BOT_USER, "is_bot": True}
            ],
        }
    )


def action_body(
    action_id: str,
    *,
    user_id: str,
    channel_id: str = "C0TABLE",
    response_url: str = "",
    home_dm: str | None = None,
    ephemeral: bool = False,
) -> str:
    """A ``block_actions`` payload (form-encoded, as Slack posts it): a press of the button
    ``action_id`` on a message in ``channel_id``, or on the Home tab when ``home_dm`` is given
    (the app's DM with the user, kept in the view's metadata)."""
    payload: dict[str, Any] = {
        "type": "block_actions",
        "team": {"id": "T0001", "domain": "test"},
        "user": {"id": user_id, "username": user_id.lower(), "team_id": "T0001"},
        "api_app_id": "A0001",
        "token": "verification",
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        "actions": [
            {
                "action_id": action_id,
                "block_id": "b1",
                "text": {"type": "plain_text", "text": "x"},
                "value": action_id,
                "type": "button",
                "action_ts": "1548426417.840180",
            }
        ],
    }
    if home_dm is not None:
        payload["container"] = {"type": "view", "view_id": "V0001"}
        payload["view"] = {"id": "V0001", "type": "home", "private_metadata": home_dm}
    else:
        payload["container"] = {
            "type": "message",
            "message_ts": "1548426417.000100",
            "channel_id": channel_id,
            "is_ephemeral": ephemeral,
        }
        payload["channel"] = {"id": channel_id, "name": "table"}
        payload["message"] = {"type": "message", "ts": "1548426417.000100", "text": "x"}
        payload["response_url"] = response_url
    return urlencode({"payload": json.dumps(payload)})


def view_submission_body(callback_id: str, value: str, *, user_id: str, metadata: str) -> str:
    """A ``view_submission`` payload: the form ``callback_id`` sent with ``value`` in its one
    input (block and action ``value``), ``metadata`` the view's ``private_metadata``."""
    payload = {
        "type": "view_submission",
        "team": {"id": "T0001", "domain": "test"},
        "user": {"id": user_id, "username": user_id.lower(), "team_id": "T0001"},
        "api_app_id": "A0001",
        "token": "verification",
        "trigger_id": "12345.98765.abcd2358fdea",
        "view": {
            "id": "VMODAL01",
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": metadata,
            "state": {"values": {"value": {"value": {"type": "plain_text_input", "value": value}}}},
        },
    }
    return urlencode({"payload": json.dumps(payload)})
