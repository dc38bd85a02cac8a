"""``liminalis serve`` / ``python -m bot``: start the platforms that have tokens.

Says, one line per platform, which are on and which are off and why, before anything heavy
loads. Each platform and the scheduler run as supervised tasks in one ``TaskGroup``: if one
fails, the others are cancelled and the error is logged, so the process never limps on half-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from bot.heartbeat import Heartbeat, Probe, status_path
from bot.main import build_engine, open_passes, open_service
from bot.pass_jobs import PassJobs
from bot.render import skipped_lines
from bot.scheduler import RecapScheduler
from bot.settings import Settings
from liminalis.clock import SystemClock
from liminalis.errors import LiminalisError

__all__ = [
    "serve",
    "platform_plan",
    "PlatformPlan",
    "stop_on_sigterm",
    "index_campaigns",
    "index_in_background",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PlatformPlan:
    name: str
    enabled: bool
    reason: str


def platform_plan(settings: Settings) -> list[PlatformPlan]:
    """Which platforms start, and why or why not (no secrets in the reasons)."""
    plans = []
    if settings.discord_token:
        where = (
            f"commands synced to guild(s) {', '.join(map(str, settings.discord_guild_ids))}"
            if settings.discord_guild_ids
            else "commands synced globally (up to an hour to appear)"
        )
        plans.append(
            PlatformPlan(
                "discord",
                True,
                f"DISCORD_TOKEN set; {where}"
                + ("; AutoShardedClient" if settings.discord_shards else ""),
            )
        )
    else:
        plans.append(PlatformPlan("discord", False, "DISCORD_TOKEN is not set"))
    if settings.slack_bot_token and settings.slack_app_token:
        plans.append(
            PlatformPlan("slack", True, "SLACK_BOT_TOKEN and SLACK_APP_TOKEN set; Socket Mode")
        )
    elif settings.slack_app_token:
        plans.append(
            PlatformPlan(
                "slack", False, "SLACK_APP_TOKEN is set but SLACK_BOT_TOKEN (xoxb-…) is not"
            )
        )
    else:
        plans.append(
            PlatformPlan("slack", False, "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set")
        )
    return plans


async def serve(
    settings: Settings, *, out: Callable[[str], None] = print, reset: bool = False
) -> int:
    """Run until cancelled; returns 1 when no platform can start. ``reset``: start over when
    the database was lost (:func:`bot.main.build_engine`)."""
    plans = platform_plan(settings)
    for p in plans:
        out(f"{p.name}: {'on' if p.enabled else 'off'} ({p.reason})")
    enabled = {p.name for p in plans if p.enabled}
    if not enabled:
        out(
            "No platform has a token; nothing to serve. Try `liminalis chat` for the console adapter."
        )
        return 1

    return await stop_on_sigterm(_serve_enabled(settings, enabled, out, reset=reset), out)


async def _serve_enabled(
    settings: Settings, enabled: set[str], out: Callable[[str], None], *, reset: bool = False
) -> int:

    # `liminalis health` reads "starting" while the models load.
    await Heartbeat(status_path(settings.data_dir), clock=SystemClock()).beat("starting")
    async with build_engine(settings, reset=reset) as engine:
        async with (
            open_service(settings, engine) as service,
            open_passes(
                engine, service.responder.router, listen=True
            ) as passes,  # the analysis passes follow every ingest
            index_in_background(engine, out),  # the platforms connect meanwhile
        ):
            service.passes = passes  # `/gm pass` reaches the passes this process runs
            # What the passes have not processed yet on a campaign indexed before this start (a
            # pause, a cap, a stop mid-run) runs in the background while the platforms come up;
            # a campaign indexed now triggers its passes when its ingest ends.
            for slug in await engine.list_campaigns():
                if await engine.is_indexed(slug):
                    passes.on_ingested(slug)
            return await _run_platforms(settings, service, enabled, out, passes)


async def stop_on_sigterm(work: Coroutine[Any, Any, int], out: Callable[[str], None]) -> int:
    """Run ``work``; SIGTERM (``docker stop``, systemd) cancels it, so every ``async with`` on the
    way out closes (platforms, scheduler, database), and returns 0. Without a handler Python dies
    on SIGTERM with no cleanup, and as a container's PID 1 it ignores it (killed 10 s later)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    termed = False

    def on_term() -> None:
        nonlocal termed
        termed = True
        out("SIGTERM: shutting down")
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_term)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
        installed = False
    try:
        return await task
    except asyncio.CancelledError:
        if termed and not asyncio.current_task().cancelling():  # type: ignore[union-attr]
            return 0
        raise
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGTERM)


async def index_campaigns(engine: Any, out: Callable[[str], None]) -> list[str]:
    """Index every campaign of the campaigns folder that is not indexed yet (the bot serves all
    of them; LIMINALIS_DEFAULT_CAMPAIGN is the console's). One that fails to load is reported and
    skipped, not a failed start. Returns the campaigns that are ready."""
    ready = []
    for slug in await engine.list_campaigns():
        try:
            await engine.ensure_indexed(slug, announce=lambda s: out(f"indexing {s} …"))
        except LiminalisError as exc:
            # The detail, not the players' message: the host reads this, and a campaign.toml
            # error says which line to fix.
            out(f"{slug}: skipped ({exc.detail or exc.user_message})")
            _log.warning("campaign %s not indexed at start: %s", slug, exc)
            continue
        except Exception:  # in the background: the others go on, the tick retries this one
            out(f"{slug}: not indexed (see the log)")
            _log.exception("campaign %s not indexed at start", slug)
            continue
        ready.append(slug)
        if error := engine.config_errors.get(slug):
            out(f"{slug}: {error}; the last good campaign.toml serves until it is fixed")
        if held := engine.config_holds.get(slug):
            out(
                f"{slug}: campaign.toml changed: {held}; the last good version serves until a "
                "GM applies it (/campaign accept) or it is restored"
            )
        for line in skipped_lines(engine.skipped_files(slug)):
            out(f"{slug}: {line}")
    if not ready:
        out(
            "No campaign could be indexed: add one under the campaigns folder (see campaigns/emberfall)."
        )
    return ready


@contextlib.asynccontextmanager
async def index_in_background(
    engine: Any, out: Callable[[str], None]
) -> AsyncIterator[asyncio.Task[list[str]]]:
    """:func:`index_campaigns` as a background task for the block's lifetime, so the platforms
    connect at once: a question meanwhile is told how far indexing has come (``NotReady``),
    and ``/campaign status`` shows it. Cancelled on exit (an ingest cut short resumes on the
    next run); a failure is logged, never left unobserved."""
    task = asyncio.create_task(index_campaigns(engine, out), name="first-index")
    task.add_done_callback(_log_index_failure)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def _log_index_failure(task: asyncio.Task[list[str]]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        _log.error("indexing at start failed; the scheduler's tick retries", exc_info=exc)


async def _run_platforms(
    settings: Settings,
    service: Any,
    enabled: set[str],
    out: Callable[[str], None],
    passes: Any = None,
) -> int:
    """Run the enabled platform adapters and the recap scheduler until they stop."""
    posters = {}
    runners = []
    probes: dict[str, Probe] = {}  # the status file's "connected" flags
    if "discord" in enabled:
        from bot.discord_adapter import DiscordAdapter

        discord_adapter = DiscordAdapter(
            service, guild_ids=settings.discord_guild_ids, shards=settings.discord_shards
        )
        posters["discord"] = discord_adapter.post
        probes["discord"] = discord_adapter.is_connected
        runners.append(discord_adapter.run(settings.discord_token))
    if "slack" in enabled:
        from slack_sdk.web.async_client import AsyncWebClient

        from bot.slack_adapter import SlackAdapter

        slack_adapter = SlackAdapter(
            service,
            client=AsyncWebClient(token=settings.slack_bot_token),
            signing_secret=settings.slack_signing_secret,
        )
        posters["slack"] = slack_adapter.post
        probes["slack"] = slack_adapter.is_connected
        runners.append(slack_adapter.run(settings.slack_app_token))
    scheduler = RecapScheduler(service, posters=posters, tick_seconds=settings.tick_seconds)
    service.scheduler = scheduler
    if passes is not None:  # a cron job per scheduled pass, kept in line every tick
        scheduler.tick_tasks.append(PassJobs(passes, scheduler).sync)
    failed = False
    heartbeat = Heartbeat(
        status_path(settings.data_dir),
        clock=SystemClock(),
        platforms=probes,
        indexing=service.engine.indexing,
    )
    async with scheduler, heartbeat:
        try:
            async with asyncio.TaskGroup() as tg:
                for coro in runners:
                    tg.create_task(coro)
        except* Exception as group:
            for exc in group.exceptions:
                _log.error("platform stopped", exc_info=exc)
            failed = True
    return 2 if failed else 0
