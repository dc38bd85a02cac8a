"""The Discord adapter: app commands, @-mentions and buttons → ``BotService`` → messages.

Thin by design: the app commands are registered from the service's command registry in two
groups, ``/lore`` for everyone and ``/gm`` for the GM's work (hidden by default from members
without :data:`GM_PERMISSIONS`; the run-time GM check stays the wall), each callback hands its
typed options to the service as one ``IncomingMessage`` (no text is rebuilt and parsed again),
and the ``Reply`` is rendered, its buttons as components whose presses go to
``BotService.press``. A streamed answer edits its message in place at most once a second. Rate limits: discord.py's bot HTTP client sleeps on 429 for
``retry_after`` itself (``discord/http.py``, ``HTTPClient.request``), and so does its webhook
adapter (interaction responses and followups) *when the 429 carries a ``Via`` header*; a 429
without it (a Cloudflare-level limit) surfaces as ``HTTPException`` — :func:`send_with_retry`
honours its ``Retry-After`` for our own followup and post loops.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, Optional, TypeVar, Union

import aiohttp
import discord
from discord import app_commands

from bot.commands import Command, Option
from bot.discord_adapter._render import render_partial, render_reply
from bot.messages import Action, Attachment, Form, IncomingMessage, OptionValue, Reply
from bot.presses import opens_form
from bot.service import BotService
from bot.streaming import EDIT_INTERVAL_S, StreamedEdits
from bot.upload_files import TooLarge, download_to_file
from liminalis.errors import NotReady

__all__ = ["DiscordAdapter", "GM_PERMISSIONS", "send_with_retry", "build_intents"]

_log = logging.getLogger(__name__)
T = TypeVar("T")
NEUTRAL = "Sorry, something went wrong on my side. The error has been logged."
DOWNLOAD_FAILED = "could not be downloaded from Discord; attach it again"
_MENTION = re.compile(r"<@!?(\d+)>")
NO_MENTIONS = discord.AllowedMentions.none()
DOWNLOAD_TIMEOUT = aiohttp.ClientTimeout(total=120)
#: Who sees ``/gm`` by default (Discord's ``default_member_permissions``): members who may
#: manage messages, the moderator-level permission a GM role usually holds in its channels —
#: narrower than Manage Server, which would hide ``/gm`` from GMs who are not server admins,
#: and one ordinary players lack. A server admin can open the group to a GM role in *Server
#: Settings → Integrations*. It only hides the group: the GM check at run time is the wall.
GM_PERMISSIONS = discord.Permissions(manage_messages=True)
GROUP_DESCRIPTIONS = {
    "lore": "Ask about the campaign, search and read its documents",
    "gm": "GM: upload notes, pins, answer length, campaign links",
}
#: How long a member fetched for a DM (their roles on a campaign's server) is reused.
MEMBER_TTL_S = 60.0
_STYLES = {
    "primary": discord.ButtonStyle.primary,
    "secondary": discord.ButtonStyle.secondary,
    "success": discord.ButtonStyle.success,
    "danger": discord.ButtonStyle.danger,
}


def build_intents() -> discord.Intents:
    """Guilds (channels, roles, threads) and guild/DM messages; no privileged intents.

    Without ``message_content`` Discord still delivers the content of messages that mention the
    bot and of DMs, which is all the mention path needs.
    """
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    return intents


async def send_with_retry(
    call: Callable[[], Awaitable[T]], *, attempts: int = 4, max_wait: float = 60.0
) -> T:
    """Run ``call``; on a 429 discord.py did not retry itself, wait ``retry_after`` and try again."""
    for attempt in range(attempts):
        try:
            return await call()
        except discord.RateLimited as exc:  # raised when retry_after exceeds max_ratelimit_timeout
            wait = exc.retry_after
        except discord.HTTPException as exc:
            if exc.status != 429 or attempt == attempts - 1:
                raise
            wait = _retry_after(exc)
        if wait > max_wait or attempt == attempts - 1:
            raise RuntimeError(f"rate limited for {wait:.1f}s; giving up")
        _log.warning("discord 429; retrying in %.2fs", wait)
        await asyncio.sleep(wait)
    raise AssertionError("unreachable")


def _retry_after(exc: discord.HTTPException) -> float:
    headers = getattr(exc.response, "headers", {}) or {}
    for key in ("Retry-After", "X-RateLimit-Reset-After"):
        try:
            return max(0.0, float(headers[key]))
        except (KeyError, TypeError, ValueError):
            continue
    return 1.0


class DiscordAdapter:
    """Slash commands and mentions for one ``BotService``.

    Args:
        service: the one entry point.
        guild_ids: sync commands to these guilds (instant; for testing); empty → global sync.
        shards: use ``AutoShardedClient`` (large deployments).
        sync_commands: sync the command tree in ``setup_hook`` (off in tests that don't need it).
        clock: monotonic seconds, for the spacing of a streamed answer's edits and the member
            cache (a fake one in tests).
        edit_interval: the least seconds between two edits of a streamed answer.
    """

    def __init__(
        self,
        service: BotService,
        *,
        guild_ids: Sequence[int] = (),
        shards: bool = False,
        sync_commands: bool = True,
        clock: Callable[[], float] = time.monotonic,
        edit_interval: float = EDIT_INTERVAL_S,
    ) -> None:
        self.service = service
        self.guild_ids = tuple(guild_ids)
        self.sync_commands = sync_commands
        cls = discord.AutoShardedClient if shards else discord.Client
        self.client: discord.Client = cls(intents=build_intents(), allowed_mentions=NO_MENTIONS)
        self.tree = app_commands.CommandTree(self.client)
        self.tree.on_error = self.on_tree_error  # type: ignore[method-assign]
        self.client.setup_hook = self.setup_hook  # type: ignore[method-assign]
        self.client.event(self.on_message)
        self.client.event(self.on_ready)
        self.client.event(self.on_interaction)
        self.clock = clock
        self.edit_interval = edit_interval
        self._members: dict[tuple[int, int], tuple[float, discord.Member | None]] = {}
        self._logged_in = (
            asyncio.Event()
        )  # set by setup_hook: the REST API can be used from then on
        self._register()
        service.use_seating("discord", self.seat)

    # -- lifecycle ---------------------------------------------------------------------------

    async def setup_hook(self) -> None:
        self._logged_in.set()
        if not self.sync_commands:
            return
        # A refused sync (a guild id the bot is not in, a Discord 5xx) is logged, never fatal: it
        # ran inside login, and its error stopped the whole bot, Slack included.
        if self.guild_ids:
            for gid in self.guild_ids:
                guild = discord.Object(id=gid)
                self.tree.copy_global_to(guild=guild)
                await self._sync(guild, f"to guild {gid}")
        else:
            await self._sync(None, "globally (may take up to an hour to appear)")

    async def _sync(self, guild: discord.Object | None, where: str) -> None:
        try:
            synced = await self.tree.sync(guild=guild)
        except discord.HTTPException as exc:
            _log.error("discord: syncing commands %s failed (%s); is the bot in it?", where, exc)
            return
        _log.info("discord: synced %d commands %s", len(synced), where)

    async def on_ready(self) -> None:
        _log.info(
            "discord: connected as %s to %d guild(s)", self.client.user, len(self.client.guilds)
        )

    async def run(self, token: str) -> None:
        """Log in, connect and serve until cancelled; closes the client on the way out."""
        async with self.client:
            await self.client.start(token)

    async def is_connected(self) -> bool:
        """READY received and the gateway open (every shard's, when sharded): the status file's
        probe (issue #26)."""
        client = self.client
        if not client.is_ready() or client.is_closed():
            return False
        if isinstance(client, discord.AutoShardedClient):
            return all(not shard.is_closed() for shard in client.shards.values())
        ws = client.ws
        return ws is not None and ws.open

    # -- neutral request ---------------------------------------------------------------------

    def incoming(
        self,
        *,
        user: discord.abc.User,
        channel: Any,
        guild_id: int | None,
        text: str,
        attachments: Iterable[Attachment] = (),
        file_count: int = 0,
        bot_dm: bool | None = None,
    ) -> IncomingMessage:
        """Map who and where to an ``IncomingMessage``: role ids and role names apart (names count
        only on the campaign's home servers, ``BotService.at_home``); DMs get no roles.

        ``bot_dm``: the DM is the author's own with the bot (default: any DM, as every message
        a bot receives in a DM is; an interaction says where it came from).

        A DM is told by its channel's type, never by a missing guild: discord.py has no guild
        object for a server it has not cached, and such a message is a shared channel's. A member
        whose roles cannot be read (an uncached guild resolves no role names) simply has fewer
        roles, so the lens falls back toward players, never toward gm.
        """
        names: tuple[str, ...] = ()
        role_ids: tuple[str, ...] = ()
        known = False
        manage = False
        dm = is_dm_channel(channel)
        if not dm and guild_id is not None and isinstance(user, discord.Member):
            try:
                listed = [r for r in user.roles if not r.is_default()]
                role_ids = tuple(
                    dict.fromkeys(
                        [
                            *(str(r) for r in getattr(user, "_roles", ())),
                            *(str(r.id) for r in listed),
                        ]
                    )
                )
                names = tuple(dict.fromkeys(r.name for r in listed))
                known = True
                manage = _manages_server(user)
            except Exception:
                _log.warning(
                    "discord: role lookup failed for %s; players lens", user.id, exc_info=True
                )
        channel_id = getattr(channel, "id", None)
        parent_id = getattr(channel, "parent_id", None)
        return IncomingMessage(
            platform="discord",
            channel_id=str(channel_id),
            user_id=str(user.id),
            text=text,
            parent_id=str(parent_id) if parent_id else None,
            roles=names,
            role_ids=role_ids,
            roles_known=known,
            guild_id=str(guild_id) if guild_id is not None and not dm else None,
            is_dm=dm,
            bot_dm=dm if bot_dm is None else dm and bot_dm,
            can_manage=manage,
            attachments=tuple(attachments),
            file_count=file_count,
        )

    def from_interaction(
        self,
        interaction: discord.Interaction,
        *,
        command: str | None = None,
        options: Mapping[str, OptionValue] | None = None,
    ) -> IncomingMessage:
        """The neutral request of an app command: typed, never text."""
        context = interaction.context
        msg = self.incoming(
            user=interaction.user,
            channel=interaction.channel or discord.Object(interaction.channel_id or 0),
            guild_id=interaction.guild_id,
            text="",
            # A user-installed app's commands also come from DMs between people and group DMs
            # (context PRIVATE_CHANNEL): only the bot's own DM (BOT_DM) is the author's alone.
            bot_dm=context.dm_channel and not context.private_channel,
        )
        return replace(msg, command=command, options=dict(options or {}))

    async def read_attachments(
        self, files: Iterable[discord.Attachment | None]
    ) -> list[Attachment]:
        out = []
        for f in files:
            if f is None:
                continue
            if f.size > self.service.max_upload_bytes:
                out.append(
                    Attachment(f.filename, b"", size=f.size)
                )  # rejected by size, never downloaded
                continue
            try:  # streamed to a temporary file, never whole in memory (bot.upload_files)
                path = await download_to_file(
                    f.url, max_bytes=self.service.max_upload_bytes, client_timeout=DOWNLOAD_TIMEOUT
                )
                out.append(Attachment(f.filename, b"", path=path))
            except TooLarge:  # more than it declared: refused by size, as a declared one is
                out.append(Attachment(f.filename, b"", size=self.service.max_upload_bytes + 1))
            except (TimeoutError, OSError, aiohttp.ClientError) as exc:
                # An expired or deleted attachment, a dropped connection: report that file alone.
                _log.warning("discord: downloading %s failed: %s", f.filename, exc)
                out.append(Attachment(f.filename, b"", error=DOWNLOAD_FAILED))
        return out

    # -- the one path for every app command --------------------------------------------------

    async def run_command(
        self,
        interaction: discord.Interaction,
        command: str,
        options: Mapping[str, OptionValue],
        files: Sequence[discord.Attachment | None] = (),
    ) -> None:
        """Defer within Discord's 3 s, answer with the service, then send followups. The campaign
        and lens are resolved once (``BotService.begin``): for the defer, for whether files are
        fetched (a GM's only), and for the command."""
        pending = await self.service.begin(
            self.from_interaction(interaction, command=command, options=options)
        )
        await interaction.response.defer(ephemeral=pending.private, thinking=True)
        attachments = await self.read_attachments(files) if any(files) and pending.is_gm else []

        async def edit(content: str) -> None:
            await interaction.edit_original_response(content=content, allowed_mentions=NO_MENTIONS)

        stream = StreamedEdits(
            edit, render=render_partial, interval=self.edit_interval, clock=self.clock
        )
        reply = await pending.finish(tuple(attachments), progress=stream)
        await self.followup(
            interaction, reply, deferred_private=pending.private, streamed=stream.edits > 0
        )

    async def followup(
        self,
        interaction: discord.Interaction,
        reply: Reply,
        *,
        deferred_private: bool,
        streamed: bool = False,
    ) -> None:
        """Send ``reply`` after a defer. A streamed answer's message becomes its first message
        (one complete message with its sources); the rest follow."""
        if reply.ephemeral and not deferred_private:
            # The public "thinking…" message cannot become private; replace it with a private one.
            await send_with_retry(interaction.delete_original_response)
            streamed = False
        ephemeral = reply.ephemeral or deferred_private
        outs = render_reply(reply)
        if streamed:
            first, outs = outs[0], outs[1:]
            await send_with_retry(
                lambda: interaction.edit_original_response(
                    content=first.content,
                    embeds=list(first.embeds),
                    view=_view(first.actions),
                    allowed_mentions=NO_MENTIONS,
                )
            )
        for out in outs:
            await send_with_retry(
                lambda out=out: interaction.followup.send(  # type: ignore[misc]
                    content=out.content,
                    embeds=list(out.embeds),
                    view=_view(out.actions),
                    ephemeral=ephemeral,
                    allowed_mentions=NO_MENTIONS,
                    **out.file_kwargs(),
                )
            )

    async def on_tree_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        """The one top-level handler: log with traceback, show a neutral message."""
        _log.error("discord command failed", exc_info=error)
        try:
            if interaction.response.is_done():
                await interaction.followup.send(
                    NEUTRAL, ephemeral=True, allowed_mentions=NO_MENTIONS
                )
            else:
                await interaction.response.send_message(
                    NEUTRAL, ephemeral=True, allowed_mentions=NO_MENTIONS
                )
        except discord.HTTPException:
            _log.warning("could not report the error to the user", exc_info=True)

    # -- mentions ----------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        """``@Liminalis <question>`` (or ``@Liminalis /upload`` with files) in a linked channel or a DM."""
        me = self.client.user
        if me is None or message.author.bot:
            return
        if not is_dm_channel(message.channel) and me.id not in message.raw_mentions:
            return
        try:
            text = _MENTION.sub(
                lambda m: "" if int(m.group(1)) == me.id else m.group(0), message.content
            ).strip()
            if not text and not message.attachments:  # files alone: a GM's DM upload
                text = "/help"
            async with message.channel.typing():
                msg = self.incoming(
                    user=message.author,
                    channel=message.channel,
                    guild_id=_guild_id(message),
                    text=text,
                    file_count=len(message.attachments),
                )
                pending = await self.service.begin(msg)
                attachments = (
                    await self.read_attachments(message.attachments)
                    if message.attachments and pending.is_gm
                    else []
                )
                # A public answer (or any in a DM) is written in place as it streams; a private
                # one in a shared channel goes to the author's DMs whole.
                posted: list[discord.Message] = []
                stream = None
                if not pending.private or is_dm_channel(message.channel):
                    stream = self._stream_reply(message, posted)
                reply = await pending.finish(tuple(attachments), progress=stream)
            if posted:
                await self._finish_streamed(message, posted[0], reply)
            else:
                await self.reply_to_message(message, reply)
        except Exception:
            _log.exception("discord mention failed")
            try:
                await _reply(message, NEUTRAL)
            except discord.HTTPException:
                pass

    def _stream_reply(
        self, message: discord.Message, posted: list[discord.Message]
    ) -> StreamedEdits:
        async def edit(content: str) -> None:
            if not posted:
                posted.append(await _reply(message, content))
            else:
                await posted[0].edit(content=content, allowed_mentions=NO_MENTIONS)

        return StreamedEdits(
            edit, render=render_partial, interval=self.edit_interval, clock=self.clock
        )

    async def _finish_streamed(
        self, message: discord.Message, streamed: discord.Message, reply: Reply
    ) -> None:
        """The streamed reply becomes the answer's first message, whole, with its sources and
        buttons. A reply that turned private (an error) takes the partial text down and goes
        the private way."""
        if reply.ephemeral and not is_dm_channel(message.channel):
            await send_with_retry(streamed.delete)
            await self.reply_to_message(message, reply)
            return
        first, *rest = render_reply(reply)
        await send_with_retry(
            lambda: streamed.edit(
                content=first.content,
                embeds=list(first.embeds),
                view=_view(first.actions) if first.actions else None,
                allowed_mentions=NO_MENTIONS,
            )
        )
        for out in rest:
            await send_with_retry(
                lambda out=out: message.channel.send(  # type: ignore[misc]
                    content=out.content,
                    embeds=list(out.embeds),
                    view=_view(out.actions),
                    allowed_mentions=NO_MENTIONS,
                )
            )

    async def reply_to_message(self, message: discord.Message, reply: Reply) -> None:
        """Reply in channel; a private (GM, personal lens) reply goes to the author's DMs with a
        pointer left behind, wherever the channel is not known to be a DM."""
        outs = render_reply(reply)
        if reply.ephemeral and not is_dm_channel(message.channel):
            try:
                for out in outs:
                    await send_with_retry(
                        lambda out=out: message.author.send(  # type: ignore[misc]
                            content=out.content,
                            embeds=list(out.embeds),
                            view=_view(out.actions),
                            allowed_mentions=NO_MENTIONS,
                            **out.file_kwargs(),
                        )
                    )
                note = "I sent you the answer in a direct message."
            except discord.Forbidden:
                note = "That answer is private, and I could not DM you. Use `/ask` here instead."
            await send_with_retry(lambda: _reply(message, note))
            return
        for i, out in enumerate(outs):
            if i == 0:
                await send_with_retry(
                    lambda out=out: _reply(  # type: ignore[misc]
                        message,
                        out.content,
                        embeds=list(out.embeds),
                        view=_view(out.actions),
                        **out.file_kwargs(),
                    )
                )
            else:
                await send_with_retry(
                    lambda out=out: message.channel.send(  # type: ignore[misc]
                        content=out.content,
                        embeds=list(out.embeds),
                        view=_view(out.actions),
                        allowed_mentions=NO_MENTIONS,
                        **out.file_kwargs(),
                    )
                )

    async def post(self, channel_id: str, reply: Reply) -> str:
        """Post a (public) reply to a channel by id: scheduled recaps; returns the id of its
        first message, which the scheduler stores so the slot is never posted again.

        The scheduler's start-up catch-up runs before the client has logged in: until then
        nothing is sent and :class:`NotReady` is raised, so the slot stays claimed and the next
        tick posts it (a post deferred in the background would be out of the scheduler's sight).
        """
        if not self._logged_in.is_set():
            raise NotReady("discord: not logged in yet")
        return await self._send(channel_id, reply)

    async def _send(self, channel_id: str, reply: Reply) -> str:
        channel = self.client.get_partial_messageable(int(channel_id))
        ids: list[str] = []
        for out in render_reply(reply):
            sent = await send_with_retry(
                lambda out=out: channel.send(  # type: ignore[misc]
                    content=out.content,
                    embeds=list(out.embeds),
                    allowed_mentions=NO_MENTIONS,
                    **out.file_kwargs(),
                )
            )
            ids.append(str(sent.id))
        return ids[0] if ids else ""

    # -- commands ----------------------------------------------------------------------------

    def _register(self) -> None:
        """One app command per command of the service's registry, from its option specs, in its
        group: ``/lore …`` for everyone, ``/gm …`` (server channels only, hidden by default from
        members without :data:`GM_PERMISSIONS`) for the GM's work."""
        groups = {
            "lore": app_commands.Group(name="lore", description=GROUP_DESCRIPTIONS["lore"]),
            "gm": app_commands.Group(
                name="gm",
                description=GROUP_DESCRIPTIONS["gm"],
                guild_only=True,
                default_permissions=GM_PERMISSIONS,
            ),
        }
        for command in self.service.registry:
            groups[command.group].add_command(self.app_command(command))
        for group in groups.values():
            if group.commands:
                self.tree.add_command(group)

    def app_command(self, command: Command) -> app_commands.Command[Any, ..., None]:
        """``command`` as a slash command: each option typed (a ``Literal`` where its values are
        known, a ``Range`` where bounded, an autocomplete where it declares a source), described,
        and its typed values handed to the service as they are."""
        parameters = [
            inspect.Parameter(
                "interaction",
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=discord.Interaction,
            )
        ]
        for option in command.options:
            annotation: Any = _annotation(option)
            default: Any = inspect.Parameter.empty if option.required else option.default
            if not option.required and option.default is None:
                annotation = Optional[annotation]  # noqa: UP007, UP045 (discord.py reads typing.Optional)
            parameters.append(
                inspect.Parameter(
                    option.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=annotation,
                    default=default,
                )
            )
        files = [o.name for o in command.options if o.kind == "attachment"]
        mentions = {o.name for o in command.options if o.kind == "mention"}
        run = self.run_command

        async def callback(interaction: discord.Interaction, **values: Any) -> None:
            options = {
                k: _mention(v) if k in mentions else v
                for k, v in values.items()
                if k not in files and v is not None
            }
            await run(interaction, command.name, options, [values.get(name) for name in files])

        callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        callback.__name__ = callback.__qualname__ = f"{command.name}_command"
        described = app_commands.describe(**{o.name: o.description for o in command.options})(
            callback
        )
        gm_only = command.gm_only is True
        app: app_commands.Command[Any, ..., None] = app_commands.Command(
            name=command.name,
            description=command.description,
            callback=described,
            extras={"gm_only": gm_only},
        )
        sources = {
            "titles": self._complete_titles,
            "visibilities": self._complete_visibilities,
            "commands": self._complete_commands,
            "crons": self._complete_crons,
            "campaigns": self._complete_campaigns,
            "entities": self._complete_entities,
        }
        for option in command.options:
            if option.autocomplete is not None:
                app.autocomplete(option.name)(sources[option.autocomplete])
        return app

    async def _complete_titles(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        titles = await self.service.complete_titles(
            self.from_interaction(interaction), current, limit=25
        )
        return [app_commands.Choice(name=t, value=t) for t in titles[:25]]

    async def _complete_entities(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        names = await self.service.complete_entities(
            self.from_interaction(interaction), current, limit=25
        )
        return [app_commands.Choice(name=n, value=n) for n in names[:25]]

    async def _complete_visibilities(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        names = await self.service.visibility_choices(self.from_interaction(interaction))
        return [app_commands.Choice(name=n, value=n) for n in names if current.lower() in n][:25]

    async def _complete_commands(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return [
            app_commands.Choice(name=name, value=value)
            for name, value in self.service.command_choices(current, platform="discord")
        ]

    async def _complete_crons(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return [
            app_commands.Choice(name=name, value=value)
            for name, value in self.service.cron_choices(current)
        ]

    async def _complete_campaigns(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        slugs = await self.service.campaign_choices(self.from_interaction(interaction), current)
        return [app_commands.Choice(name=name[:100], value=slug) for slug, name in slugs]

    # -- buttons and forms -------------------------------------------------------------------

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A press of one of our buttons (``lm:…``) or a form sent: checked and run by
        ``BotService.press``. A press that opens a form answers with the modal (Discord allows
        it only as the first response); every other press is acknowledged at once (a deferred
        update: no "thinking…" message) and answered privately, publicly or in place."""
        kind = interaction.type
        if kind not in (discord.InteractionType.component, discord.InteractionType.modal_submit):
            return
        data: Mapping[str, Any] = interaction.data or {}  # type: ignore[assignment]
        action = str(data.get("custom_id") or "")
        if not action.startswith("lm:"):
            return
        try:
            msg = self.from_interaction(interaction)
            if kind == discord.InteractionType.component and opens_form(action):
                reply = await self.service.press(msg, action)
                if reply.form is not None and not reply.error:
                    await interaction.response.send_modal(_modal(reply.form))
                else:
                    await interaction.response.send_message(
                        reply.text, ephemeral=True, allowed_mentions=NO_MENTIONS
                    )
                return
            await interaction.response.defer()
            value = _form_value(data) if kind == discord.InteractionType.modal_submit else ""
            reply = await self.service.press(msg, action, value)
            await self.deliver(interaction, reply)
        except Exception:
            _log.exception("discord button %s failed", action[:40])
            try:
                await interaction.followup.send(
                    NEUTRAL, ephemeral=True, allowed_mentions=NO_MENTIONS
                )
            except discord.HTTPException:
                pass

    async def deliver(self, interaction: discord.Interaction, reply: Reply) -> None:
        """A press's reply, after its deferred update: in place of the pressed message, to the
        whole channel, or to the presser alone."""
        outs = render_reply(reply)
        if reply.delivery == "replace" and not reply.error:
            first, outs = outs[0], outs[1:]
            await send_with_retry(
                lambda: interaction.edit_original_response(
                    content=first.content,
                    embeds=list(first.embeds),
                    view=_view(first.actions) if first.actions else None,
                    allowed_mentions=NO_MENTIONS,
                )
            )
        public = reply.delivery == "public" and not reply.error
        for out in outs:
            await send_with_retry(
                lambda out=out: interaction.followup.send(  # type: ignore[misc]
                    content=out.content,
                    embeds=list(out.embeds),
                    view=_view(out.actions),
                    ephemeral=not public,
                    allowed_mentions=NO_MENTIONS,
                )
            )

    # -- direct messages ---------------------------------------------------------------------

    async def seat(
        self, msg: IncomingMessage, channels: Sequence[tuple[str, str | None]]
    ) -> list[IncomingMessage]:
        """Where the author of a DM sits (``bot.service.Seating``): each linked channel, on a
        server the bot has cached, whose member they are (fetched by id: no privileged intent)
        and that they can read, as a message of theirs there with their roles. A server that
        cannot be asked counts as none."""
        by_guild: dict[int, list[int]] = {}
        for linked, server in channels:
            if server and server.isdigit() and linked.isdigit():
                by_guild.setdefault(int(server), []).append(int(linked))
        out: list[IncomingMessage] = []
        for guild_id, channel_ids in by_guild.items():
            guild = self.client.get_guild(guild_id)
            if guild is None or not msg.user_id.isdigit():
                continue
            member = await self._member(guild, int(msg.user_id))
            if member is None:
                continue
            for cid in channel_ids:
                channel = guild.get_channel_or_thread(cid)
                if channel is None or not channel.permissions_for(member).read_messages:
                    continue
                out.append(
                    self.incoming(user=member, channel=channel, guild_id=guild.id, text=msg.text)
                )
        return out

    async def _member(self, guild: discord.Guild, user_id: int) -> discord.Member | None:
        key = (guild.id, user_id)
        now = self.clock()
        cached = self._members.get(key)
        if cached is not None and now - cached[0] < MEMBER_TTL_S:
            return cached[1]
        member: discord.Member | None
        try:
            member = guild.get_member(user_id) or await guild.fetch_member(user_id)
        except (discord.NotFound, discord.Forbidden):
            member = None
        except discord.HTTPException as exc:
            _log.warning("discord: member %s of %s unreadable (%s)", user_id, guild.id, exc)
            return None
        self._members[key] = (now, member)
        return member


def _view(actions: Sequence[Action]) -> Any:
    """``actions`` as message components (``MISSING`` for none). The view is stopped before it
    is sent, so discord.py keeps no state for it: presses reach ``on_interaction`` by their ids,
    also after a restart."""
    if not actions:
        return discord.utils.MISSING
    view = discord.ui.View(timeout=None)
    for action in actions:
        view.add_item(
            discord.ui.Button(label=action.label, custom_id=action.id, style=_STYLES[action.style])
        )
    view.stop()
    return view


def _modal(form: Form) -> discord.ui.Modal:
    modal = discord.ui.Modal(title=form.title[:45], custom_id=form.id)
    modal.add_item(
        discord.ui.TextInput(
            label=form.label[:45],
            custom_id="value",
            placeholder=form.placeholder[:100] or None,
            required=False,
            max_length=form.max_length,
        )
    )
    modal.stop()
    return modal


def _form_value(data: Mapping[str, Any]) -> str:
    """The text of a submitted form's one input (rows or labels, as Discord nests them)."""
    stack = list(data.get("components") or [])
    while stack:
        item = stack.pop(0)
        if not isinstance(item, Mapping):
            continue
        if item.get("custom_id") == "value" and isinstance(item.get("value"), str):
            return str(item["value"])
        stack.extend(item.get("components") or [])
        if isinstance(item.get("component"), Mapping):
            stack.append(item["component"])
    return ""


def _annotation(option: Option) -> Any:
    if option.kind == "attachment":
        return discord.Attachment
    if option.kind == "mention":  # a user or a role: Discord's "mentionable" picker
        return Union[discord.Member, discord.User, discord.Role]  # noqa: UP007 (discord.py reads typing.Union)
    if option.choices:
        return Literal[option.choices]
    base = int if option.kind == "integer" else str
    if option.low is not None and option.high is not None:
        return app_commands.Range[base, option.low, option.high]
    return base


def _manages_server(member: discord.Member) -> bool:
    """Whether ``member`` may manage the server (``/campaign create``). An interaction carries
    the member's permissions; a mention's are computed from the cached roles (none cached: no
    permission, never a guess)."""
    perms = member.resolved_permissions
    if perms is None:
        perms = member.guild_permissions
    return bool(perms.manage_guild or perms.administrator)


def _mention(value: Any) -> Any:
    """A picked user or role as text writes it (``<@id>``, ``<@&id>``): the one form commands
    read, typed or written."""
    if isinstance(value, discord.Role):
        return f"<@&{value.id}>"
    if isinstance(value, (discord.Member, discord.User)):
        return f"<@{value.id}>"
    return value


def is_dm_channel(channel: Any) -> bool:
    """Whether ``channel`` is a direct message, by its type. A channel of unknown type (a partial
    one from an uncached server) is not: treated as shared, a private answer goes privately."""
    return (
        isinstance(channel, discord.DMChannel)
        or getattr(channel, "type", None) == discord.ChannelType.private
    )


def _guild_id(message: discord.Message) -> int | None:
    """The server of a message, also when discord.py has not cached it (no ``guild`` object, but
    the partial channel keeps the id)."""
    if message.guild is not None:
        return message.guild.id
    gid = getattr(message.channel, "guild_id", None)
    return gid if isinstance(gid, int) else None


def _reply(message: discord.Message, content: str | None, **kw: Any) -> Awaitable[discord.Message]:
    """A reply in the message's channel that still goes out when the message is gone: the asker
    deleting it while the bot thinks made Discord refuse the reply, and the answer was lost."""
    return message.channel.send(
        content,
        reference=message.to_reference(fail_if_not_exists=False),
        allowed_mentions=NO_MENTIONS,
        mention_author=False,
        **kw,
    )
