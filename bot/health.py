"""``liminalis health`` and ``liminalis doctor``: is the service up, and what is off.

``health`` is for a container's ``HEALTHCHECK`` or a supervisor: it loads no model weights
and opens nothing another process holds. It prints ``healthy …`` and exits 0, or one line per
problem and exits 1: the database opens read-only and passes SQLite's quick check, the data
directory takes a write, the vector store is reachable (the Milvus Lite folder, or a TCP
connection to the server), each model the settings ask for is on disk (``--deep`` loads them),
and ``serve``'s status file (:mod:`bot.heartbeat`) is fresh with every platform connected
(``--no-serve`` skips it).

``doctor`` is for the host setting up: everything above plus the Python version, free space,
each platform's tokens (verified with Discord and Slack when they answer), the API key and every
campaign's ``campaign.toml``. It prints one line per check, ``ok``, ``off`` (turned off by a
setting), ``warn`` (a stage off or degraded; the bot runs) or ``FAIL`` (the bot cannot run as
set), with a fix under each that needs one, and exits 1 when anything failed.

A model the settings ask for (``auto`` included) that is missing turns its stage off by design
(:mod:`liminalis.models`), so ``doctor`` warns; ``health`` fails, since the deployment is not
the one built: set the stage to ``none`` to run without it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.heartbeat import judge, read_status, status_path
from bot.main import load_models
from bot.serve import platform_plan
from bot.settings import Settings
from liminalis import models
from liminalis.campaign import load_campaign
from liminalis.clock import SystemClock
from liminalis.errors import LiminalisError
from liminalis.ports import Clock
from liminalis.store.sqlite import probe_database

__all__ = ["Check", "health", "doctor", "health_checks", "doctor_checks"]

_log = logging.getLogger(__name__)

#: Free space below which ``doctor`` fails, and below which it warns.
MIN_FREE_BYTES = 100 * 1024**2
LOW_FREE_BYTES = 1024**3
_SETTING = {
    "embedder": "LIMINALIS_EMBEDDER",
    "query adapter": "LIMINALIS_QUERY_ADAPTER",
    "ranker": "LIMINALIS_RANKER",
    "reranker": "LIMINALIS_RERANKER",
}


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: ``status`` is ``ok``, ``off``, ``warn`` or ``fail``; ``detail`` names the
    thing checked; ``fix`` says what to do (empty when nothing is to be done)."""

    status: str
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "fail"


# -- the checks -----------------------------------------------------------------------------


def check_python(version: tuple[int, int, int] | None = None) -> Check:
    major, minor, micro = version or sys.version_info[:3]
    text = f"python: {major}.{minor}.{micro}"
    if (3, 11) <= (major, minor) < (3, 13):
        return Check("ok", text)
    return Check("fail", f"{text} is not supported", "use Python 3.11 or 3.12")


def check_data_dir(data_dir: Path, *, free: bool = True) -> list[Check]:
    """The data directory takes a write (one that does not exist yet: its nearest existing
    parent, where ``serve`` will make it; nothing is left behind); with ``free``, the free space
    on its volume."""
    fix = (
        f"make {data_dir} writable by this user (uid {os.getuid()}) or set LIMINALIS_DATA_DIR; "
        "in the image, /data is a volume owned by uid 10001"
    )
    where = data_dir
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        if not where.is_dir():
            raise NotADirectoryError(20, "Not a directory")
        with tempfile.TemporaryFile(dir=where, prefix=".write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return [Check("fail", f"data directory: {data_dir} is not writable ({reason})", fix)]
    made = "writable" if where == data_dir else "made at the first start"
    checks = [Check("ok", f"data directory: {data_dir} ({made})")]
    if free:
        left = shutil.disk_usage(where).free
        text = f"free space: {left / 1024**3:.1f} GiB under {data_dir}"
        if left < MIN_FREE_BYTES:
            checks.append(Check("fail", text, "free space on that volume (SQLite needs room)"))
        elif left < LOW_FREE_BYTES:
            checks.append(Check("warn", text, "free space on that volume"))
        else:
            checks.append(Check("ok", text))
    return checks


def check_database(path: Path, *, must_exist: bool) -> Check:
    """The database opens read-only and passes its quick check (blocking)."""
    probe = probe_database(path)
    if not probe.exists:
        if must_exist:
            return Check("fail", f"database: {path} does not exist (serve has not started)")
        return Check("ok", f"database: {path} (created at the first start)")
    if probe.problem:
        fix = (
            "run the newer release, or restore a backup made by this one"
            if "newer release" in probe.problem
            else "restore a backup (README: Operations), or move the file away and re-ingest"
        )
        return Check("fail", f"database: {path} {probe.problem}", fix)
    return Check("ok", f"database: {path} (schema {probe.version}, quick check ok)")


def check_vector_store(settings: Settings, *, deep: bool = False) -> Check:
    """Milvus Lite's folder, or the server's port (blocking, a few seconds at most)."""
    from liminalis.adapters.milvus import probe_milvus

    probe = probe_milvus(settings.resolved_milvus_uri, token=settings.milvus_token, deep=deep)
    if probe.ok:
        return Check("ok", f"vector store: {probe.detail}")
    fix = (
        "start the Milvus server or correct LIMINALIS_MILVUS_URI (unset: Milvus Lite in the data "
        "directory)"
        if "://" in settings.resolved_milvus_uri
        else f"move {settings.resolved_milvus_uri} away: the next ingest rebuilds it from SQLite"
    )
    return Check("fail", f"vector store: {probe.detail}", fix)


def check_models(settings: Settings, *, strict: bool) -> list[Check]:
    """Each stage's model by its files (no torch). ``strict`` (``health``): a model asked for
    and missing fails; otherwise only one without which the service cannot start fails."""
    shipped = models.find_models_dir(settings.models_dir)
    checks = []
    for m in models.check_models(
        embedder=settings.embedder,
        query_adapter=settings.query_adapter,
        ranker=settings.ranker,
        reranker=settings.reranker,
        shipped=shipped,
    ):
        if m.state in {"present", "unverified"}:
            checks.append(Check("ok", m.detail))
        elif m.state == "off":
            checks.append(Check("off", m.detail))
        else:
            setting = _SETTING[m.stage]
            fix = "restore it (the release's models/ folder) or point LIMINALIS_MODELS_DIR at one"
            if not m.required:
                fix += f"; {setting}=none runs without it"
            status = "fail" if m.required or strict else "warn"
            checks.append(Check(status, m.detail, fix))
    return checks


def load_models_deep(settings: Settings) -> Check:
    """Load every model as ``serve`` does and embed one query (blocking: seconds of torch)."""
    try:
        embedder, _ranker, _reranker = load_models(settings)
        close = getattr(embedder, "close", None)
        dim = embedder.dim
        if close is not None:
            close()
    except Exception as exc:  # any load failure is the finding
        return Check("fail", f"models: loading failed ({type(exc).__name__}: {exc})")
    return Check("ok", f"models: loaded ({embedder.model_id}, {dim} dimensions)")


def check_serve(settings: Settings, clock: Clock) -> list[Check]:
    """``serve``'s status file: fresh, and every platform connected."""
    path = status_path(settings.data_dir)
    try:
        status = read_status(path)
    except (OSError, ValueError) as exc:
        return [Check("fail", f"serve: status file unreadable ({exc})")]
    problems = judge(status, now=clock.now(), where=path)
    if problems:
        return [Check("fail", p) for p in problems]
    assert status is not None
    up = ", ".join(sorted(status.platforms))
    checks = [Check("ok", f"serve: running (pid {status.pid}; {up} connected)")]
    for p in status.indexing:
        checks.append(
            Check(
                "ok", f"indexing {p.get('campaign')}: {p.get('done')} of {p.get('total')} documents"
            )
        )
    return checks


def check_api_key(settings: Settings) -> Check:
    if settings.anthropic_api_key:
        return Check("ok", f"ANTHROPIC_API_KEY: set (answers written by {settings.model_reply})")
    return Check(
        "off",
        "ANTHROPIC_API_KEY: not set (answers quote the documents, offline)",
        "set ANTHROPIC_API_KEY for written answers",
    )


def check_campaigns(settings: Settings) -> list[Check]:
    """Every campaign folder's ``campaign.toml`` loads."""
    root = settings.campaigns_dir
    folders = (
        sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if root.is_dir()
        else []
    )
    if not folders:
        return [
            Check(
                "warn",
                f"campaigns: none under {root}",
                "add one as <campaigns>/<slug>/campaign.toml with its documents "
                "(see campaigns/emberfall), or set LIMINALIS_CAMPAIGNS_DIR",
            )
        ]
    checks = []
    for folder in folders:
        try:
            cfg = load_campaign(folder)
        except LiminalisError as exc:
            checks.append(
                Check(
                    "fail",
                    f"campaign {folder.name}: does not load ({exc})",
                    f"fix {folder / 'campaign.toml'}; the bot skips this campaign meanwhile",
                )
            )
            continue
        checks.append(Check("ok", f"campaign {cfg.slug}: {cfg.name}"))
    return checks


async def check_discord(token: str, *, timeout_s: float) -> Check:
    """``DISCORD_TOKEN`` logs in (``GET /users/@me`` through discord.py's HTTP client)."""
    import aiohttp
    import discord

    fix = "reset the bot's token in the Discord Developer Portal (Bot) and set DISCORD_TOKEN"
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        me = await asyncio.wait_for(http.static_login(token), timeout_s)
    except discord.LoginFailure:
        return Check("fail", "discord: DISCORD_TOKEN was refused by Discord", fix)
    except (aiohttp.ClientError, OSError, TimeoutError, discord.HTTPException) as exc:
        reason = str(exc) or type(exc).__name__
        return Check("warn", f"discord: DISCORD_TOKEN set, not verified ({reason})")
    finally:
        await http.close()
    return Check("ok", f"discord: DISCORD_TOKEN accepted (bot {me.get('username', '?')})")


async def check_slack(
    bot_token: str, app_token: str, *, base_url: str | None, timeout_s: float
) -> list[Check]:
    """``SLACK_BOT_TOKEN`` (``auth.test``) and ``SLACK_APP_TOKEN`` (``apps.connections.open``)."""
    import aiohttp
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    api = base_url or AsyncWebClient.BASE_URL
    checks = []
    if not app_token.startswith("xapp-"):
        checks.append(
            Check(
                "fail",
                "slack: SLACK_APP_TOKEN is not an app-level token (xapp-…)",
                "create one under Basic Information → App-Level Tokens (connections:write)",
            )
        )
    calls = [
        (
            "SLACK_BOT_TOKEN",
            AsyncWebClient(token=bot_token, base_url=api, timeout=int(timeout_s)).auth_test,
            "reinstall the app and copy its Bot User OAuth Token (xoxb-…) into SLACK_BOT_TOKEN",
        )
    ]
    if not checks:
        app = AsyncWebClient(token=app_token, base_url=api, timeout=int(timeout_s))
        calls.append(
            (
                "SLACK_APP_TOKEN",
                functools.partial(app.apps_connections_open, app_token=app_token),
                "create a new app-level token (connections:write) and set SLACK_APP_TOKEN",
            )
        )
    for name, call, fix in calls:
        try:
            await asyncio.wait_for(call(), timeout_s)
        except SlackApiError as exc:
            error = exc.response.get("error", "?")
            checks.append(Check("fail", f"slack: {name} was refused by Slack ({error})", fix))
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            checks.append(Check("warn", f"slack: {name} set, not verified ({reason})"))
        else:
            checks.append(Check("ok", f"slack: {name} accepted"))
    return checks


async def check_platforms(
    settings: Settings, *, verify: bool, slack_api: str | None, timeout_s: float
) -> list[Check]:
    """Each platform's tokens: present (``serve``'s plan), and accepted when ``verify``."""
    checks = []
    for plan in platform_plan(settings):
        if not plan.enabled:
            status = "fail" if "is set but" in plan.reason else "off"
            checks.append(Check(status, f"{plan.name}: off ({plan.reason})"))
        elif not verify:
            checks.append(Check("ok", f"{plan.name}: {plan.reason}"))
        elif plan.name == "discord":
            checks.append(await check_discord(settings.discord_token, timeout_s=timeout_s))
        else:
            checks += await check_slack(
                settings.slack_bot_token,
                settings.slack_app_token,
                base_url=slack_api,
                timeout_s=timeout_s,
            )
    if not any(p.enabled for p in platform_plan(settings)):
        checks.append(
            Check(
                "warn",
                "platforms: none has a token, so `serve` has nothing to serve",
                "set DISCORD_TOKEN, or SLACK_BOT_TOKEN and SLACK_APP_TOKEN (the console chat "
                "needs neither)",
            )
        )
    return checks


# -- the commands ---------------------------------------------------------------------------


async def health_checks(
    settings: Settings, *, serve: bool = True, deep: bool = False, clock: Clock | None = None
) -> list[Check]:
    """The checks of ``liminalis health``, in order. Blocking parts run in worker threads."""
    checks = await asyncio.to_thread(check_data_dir, settings.data_dir, free=False)
    checks.append(await asyncio.to_thread(check_database, settings.sqlite_path, must_exist=serve))
    checks.append(await asyncio.to_thread(check_vector_store, settings, deep=deep))
    checks += await asyncio.to_thread(check_models, settings, strict=True)
    if deep:
        checks.append(await asyncio.to_thread(load_models_deep, settings))
    if serve:
        checks += await asyncio.to_thread(check_serve, settings, clock or SystemClock())
    return checks


async def doctor_checks(
    settings: Settings,
    *,
    verify: bool = True,
    deep: bool = False,
    slack_api: str | None = None,
    timeout_s: float = 5.0,
) -> list[Check]:
    """The checks of ``liminalis doctor``, in order. ``verify``: ask Discord and Slack whether
    they accept the tokens; ``slack_api``: the Slack Web API's base URL (tests)."""
    checks = [check_python()]
    checks += await asyncio.to_thread(check_models, settings, strict=False)
    if deep:
        checks.append(await asyncio.to_thread(load_models_deep, settings))
    checks += await asyncio.to_thread(check_data_dir, settings.data_dir)
    checks.append(await asyncio.to_thread(check_database, settings.sqlite_path, must_exist=False))
    checks.append(await asyncio.to_thread(check_vector_store, settings, deep=True))
    checks += await check_platforms(
        settings, verify=verify, slack_api=slack_api, timeout_s=timeout_s
    )
    checks.append(check_api_key(settings))
    checks += await asyncio.to_thread(check_campaigns, settings)
    return checks


async def health(
    settings: Settings,
    *,
    serve: bool = True,
    deep: bool = False,
    verbose: bool = False,
    clock: Clock | None = None,
    out: Callable[[str], object] = print,
) -> int:
    """Print ``healthy …`` and return 0, or one line per problem and return 1."""
    checks = await health_checks(settings, serve=serve, deep=deep, clock=clock)
    failed = [c for c in checks if c.failed]
    for c in checks if verbose else failed:
        out(c.detail if not verbose else f"{c.status:<5} {c.detail}")
    if failed:
        return 1
    if not verbose:
        notes = [c.detail for c in checks if c.detail.startswith(("serve:", "indexing "))]
        out("healthy" + (f": {'; '.join(notes)}" if notes else ""))
    return 0


async def doctor(
    settings: Settings,
    *,
    verify: bool = True,
    deep: bool = False,
    slack_api: str | None = None,
    out: Callable[[str], object] = print,
) -> int:
    """Print every check with its fix; return 1 when something required is broken."""
    checks = await doctor_checks(settings, verify=verify, deep=deep, slack_api=slack_api)
    for c in checks:
        out(f"{'FAIL' if c.failed else c.status:<5} {c.detail}")
        if c.fix and c.status != "ok":
            out(f"      fix: {c.fix}")
    failed = sum(c.failed for c in checks)
    degraded = sum(c.status in {"warn", "off"} for c in checks)
    if failed:
        out(f"{failed} problem(s) to fix before the bot runs as set; {degraded} off or degraded.")
        return 1
    out(f"ready; {degraded} off or degraded." if degraded else "ready.")
    return 0
