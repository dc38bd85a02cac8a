"""``BotService.handle``: the one entry point every adapter calls.

Adapters turn a platform event into one neutral :class:`IncomingMessage` (typed command or text,
who, where, attachments) and render the neutral :class:`Reply`. The commands themselves live in
:mod:`bot.commands`, one module each; this module only dispatches: it builds the structured
request, resolves the campaign and the asker's lens once, holds the GM wall, runs the command and
turns errors into user-safe replies, so Discord, Slack and the console behave identically.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from bot.commands import (
    COMMANDS,
    REGISTRY,
    Command,
    Need,
    RecapScheduling,
    Registry,
    Request,
    Scope,
)
from bot.commands.budget import effective_budget
from bot.commands.campaign import DM_NOT_LINKED, your_id
from bot.commands.recap import recap_text
from bot.commands.upload import looks_like_upload_options, visibility_choices
from bot.directory import Directory, gm_by_id, lens_for
from bot.messages import Attachment, IncomingMessage, Reply
from liminalis.answer import Responder, Source
from liminalis.campaign import CampaignConfig
from liminalis.engine import Engine
from liminalis.errors import (
    ConfigError,
    InvalidInput,
    LiminalisError,
    PermissionDenied,
    UnknownCampaign,
)
from liminalis.lens import GM, PLAYERS, Lens
from liminalis.text import clean_text

__all__ = [
    "IncomingMessage",
    "Attachment",
    "Reply",
    "BotService",
    "COMMANDS",
    "HELP",
    "Pending",
    "RecapScheduling",
]

_log = logging.getLogger(__name__)

HELP = REGISTRY.help_text()
NEUTRAL = "Sorry, something went wrong on my side. The error has been logged."


class BotService:
    """Commands over the engine, for any platform."""

    def __init__(
        self,
        engine: Engine,
        *,
        responder: Responder | None = None,
        directory: Directory | None = None,
        max_upload_bytes: int = 5 * 1024 * 1024,
        default_campaign: str | None = None,
        scheduler: RecapScheduling | None = None,
        registry: Registry = REGISTRY,
        campaign_creators: frozenset[str] = frozenset(),
    ) -> None:
        self.engine = engine
        self.scheduler = scheduler
        if responder is not None:
            engine.use_answerer(responder)
        self.responder = engine.answerer
        self.directory = directory or Directory(engine.database)
        self.max_upload_bytes = max_upload_bytes
        self.default_campaign = default_campaign
        self.registry = registry
        #: User ids the host lets ``/campaign create`` besides server managers and workspace
        #: admins (``LIMINALIS_CAMPAIGN_CREATORS``).
        self.campaign_creators = campaign_creators

    # -- scope -------------------------------------------------------------------------------

    async def config(self, slug: str) -> CampaignConfig:
        return await self.engine.campaign(slug)

    async def lens_of(self, msg: IncomingMessage, cfg: CampaignConfig) -> Lens:
        try:
            at_home = await self.at_home(msg, cfg)
            return lens_for(
                cfg,
                platform=msg.platform,
                user_id=msg.user_id,
                roles=msg.roles,
                role_ids=msg.role_ids,
                usergroups=msg.usergroups,
                is_dm=msg.is_dm,
                roles_known=msg.roles_known,
                at_home=at_home,
            )
        except Exception:  # a failed role lookup is default-deny: players
            _log.exception("lens lookup failed; using players lens")
            return Lens({PLAYERS})

    async def at_home(self, msg: IncomingMessage, cfg: CampaignConfig) -> bool:
        """Whether ``msg`` comes from one of the campaign's home Discord servers, where role
        names count (bot.directory): one listed in ``[roles.discord] guilds``, else one with a
        channel linked to the campaign now. A campaign linked on no server is at home nowhere,
        so its first Discord link takes a GM known by user or role *id*. A channel linked before
        servers were recorded has its server recorded from its first message."""
        if msg.platform != "discord" or msg.guild_id is None:
            return True
        await self.directory.learn_guild("discord", msg.guild_id, msg.channel_id, msg.parent_id)
        if cfg.roles.discord_guilds:
            return msg.guild_id in cfg.roles.discord_guilds
        return msg.guild_id in await self.directory.homes("discord", cfg.slug)

    async def gm_campaigns(self, msg: IncomingMessage) -> list[CampaignConfig]:
        """The campaigns ``msg``'s sender is a GM of, where they are (their lens) or by an id
        that holds anywhere (a DM: ``gm_by_id``). A campaign whose config cannot be read is left
        out (and logged)."""
        out: list[CampaignConfig] = []
        for slug in await self.engine.list_campaigns():
            try:
                cfg = await self.config(slug)
            except LiminalisError as exc:
                _log.warning("campaign %s left out of a GM's list: %s", slug, exc)
                continue
            by_id = gm_by_id(
                cfg, platform=msg.platform, user_id=msg.user_id, usergroups=msg.usergroups
            )
            if by_id or (not msg.is_dm and (await self.lens_of(msg, cfg)).is_gm):
                out.append(cfg)
        return out

    async def scope_of(self, msg: IncomingMessage, need: Need = "required") -> Scope:
        """The campaign of ``msg``'s channel and the asker's lens in it, loaded once.

        Raises:
            UnknownCampaign: ``need`` is ``required`` and the channel (or DM) is linked to none.
        """
        if need == "none":
            return Scope(self, None, Lens({PLAYERS}))
        slug = msg.campaign_override or await self.directory.campaign_for(
            msg.platform, msg.channel_id, msg.parent_id
        )
        if slug is None and msg.platform == "console":
            slug = self.default_campaign
        if slug is None:
            if need == "optional":
                return Scope(self, None, Lens({PLAYERS}))
            if msg.is_dm:  # a DM is never linked (a GM's roles don't reach it): say where to ask
                raise UnknownCampaign("dm not linked", user_message=DM_NOT_LINKED)
            raise UnknownCampaign("channel not linked")
        cfg = await self.config(slug)
        return Scope(self, cfg, await self.lens_of(msg, cfg))

    # -- entry point -------------------------------------------------------------------------

    async def begin(self, msg: IncomingMessage) -> Pending:
        """Resolve ``msg``'s command, scope and privacy, without running it; never raises.

        For adapters that must answer before the reply exists: Discord chooses at ``defer`` time
        whether "thinking…" is private, and an adapter downloads a message's files only for a
        GM. ``Pending.finish`` then runs the command on the same scope. Anything uncertain (a
        parse error, an unlinked channel) is private and not a GM.
        """
        try:
            # Platform JSON can carry lone surrogates and control characters: clean once, here.
            msg = replace(msg, text=clean_text(msg.text or ""))
            if msg.parent_id and msg.platform != "console":
                await self.directory.learn_parent(msg.platform, msg.channel_id, msg.parent_id)
            if msg.is_dm and msg.file_count and msg.command is None:
                upload = await self._dm_upload(msg)
                if upload is not None:
                    return upload
            request = self.registry.request(msg)
            command = self.registry[request.command]
            scope = await self.scope_of(msg, command.needs(request))
            return Pending(
                msg,
                command=command,
                request=request,
                scope=scope,
                private=command.is_private(request, scope),
            )
        except Exception as exc:
            return Pending(msg, error=exc)

    async def _dm_upload(self, msg: IncomingMessage) -> Pending | None:
        """A DM with files, as a GM's private upload: to the one campaign they are a GM of by id,
        or to the one their message names (``greyhold players session``); the rest of the words
        are ``/upload``'s. ``None``: not an upload (a player's question with a screenshot, or
        another command), which goes the usual way and whose files are never fetched. A non-GM
        who sends files with nothing to ask is refused: nothing is fetched or stored."""
        words = msg.text.split()
        if words and words[0].lower() == "/upload":
            words = words[1:]
        elif words and words[0].startswith("/"):
            return None
        mine = await self.gm_campaigns(msg)
        if not mine:
            if not looks_like_upload_options(" ".join(words)):
                return None
            return Pending(
                msg,
                error=PermissionDenied(
                    "dm upload by a non-GM",
                    user_message="Only a GM can upload, and in a direct message I know a GM by "
                    "user id only. Ask a GM of your campaign to run `/campaign gm add @you` in its "
                    f"channel ({your_id(msg)}), or upload there with `/upload`. Nothing was stored.",
                ),
            )
        said = {w.lower() for w in words}
        named = [c for c in mine if c.slug in said]
        if len(named) > 1 or (not named and len(mine) > 1):
            slugs = ", ".join(f"`{c.slug}`" for c in (named or mine))
            return Pending(
                msg,
                error=InvalidInput(
                    "dm upload to which campaign",
                    user_message=f"You are a GM of several campaigns ({slugs}): name one in the "
                    f"message with the files, e.g. `{(named or mine)[0].slug} players session`. "
                    "Nothing was stored.",
                ),
            )
        target = named[0] if named else mine[0]
        rest = " ".join(w for w in words if w.lower() != target.slug)
        request = self.registry.request(replace(msg, text=f"/upload {rest}".strip()))
        return Pending(
            msg,
            command=self.registry[request.command],
            request=request,
            scope=Scope(self, target, Lens({GM})),  # a GM by id of this campaign: checked above
            private=True,
        )

    async def handle(self, msg: IncomingMessage) -> Reply:
        """Run one command. Never raises: errors become user-safe replies."""
        return await (await self.begin(msg)).finish()

    async def will_be_ephemeral(self, msg: IncomingMessage) -> bool:
        """Whether ``handle(msg)`` answers privately (``begin(msg).private``)."""
        return (await self.begin(msg)).private

    async def is_gm(self, msg: IncomingMessage) -> bool:
        """Whether ``msg``'s author holds the GM lens where they are; ``False`` on any failure."""
        try:
            return (await self.scope_of(msg)).lens.is_gm
        except Exception:
            return False

    # -- what adapters offer while a command is typed ----------------------------------------

    async def complete_titles(
        self, msg: IncomingMessage, prefix: str, *, limit: int = 25
    ) -> list[str]:
        """Document titles for autocomplete, filtered by the caller's lens (never GM-only for players).

        Never raises: an unlinked channel or any failure offers no choices.
        """
        try:
            scope = await self.scope_of(msg)
            titles = await self.engine.titles(
                scope.config.slug, scope.lens, prefix.strip()[:100], limit=min(limit, 25)
            )
        except Exception:
            _log.debug("autocomplete failed", exc_info=True)
            return []
        out: list[str] = []
        for _, title in titles:
            if title not in out:
                out.append(title[:100])
        return out[: min(limit, 25)]

    async def complete_campaigns(
        self, msg: IncomingMessage, prefix: str, *, limit: int = 25
    ) -> list[str]:
        """The slugs of the campaigns ``msg``'s sender is a GM of (autocomplete of ``/campaign
        link``): a stranger is offered none, so no campaign's name leaks. Never raises."""
        try:
            mine = await self.gm_campaigns(msg)
        except Exception:
            _log.debug("campaign autocomplete failed", exc_info=True)
            return []
        p = prefix.strip().lower()
        return [c.slug for c in mine if c.slug.startswith(p) or p in c.name.lower()][
            : min(limit, 25)
        ]

    async def complete_entities(
        self, msg: IncomingMessage, prefix: str, *, limit: int = 25
    ) -> list[str]:
        """Entity names for autocomplete, from the entities the caller's lens knows (never a
        GM-only name for players): names, or other names, starting with ``prefix`` first, then
        containing it. Never raises: a failure offers no choices."""
        try:
            scope = await self.scope_of(msg)
            known = await self.engine.knowledge.entities(scope.config.slug, scope.lens)
        except Exception:
            _log.debug("entity autocomplete failed", exc_info=True)
            return []
        p = prefix.strip().lower()[:100]
        starts, contains = [], []
        for e in known:
            names = [e.name.lower(), *(a.lower() for a in e.aliases)]
            if not p or any(n.startswith(p) for n in names):
                starts.append(e.name[:100])
            elif any(p in n for n in names):
                contains.append(e.name[:100])
        return list(dict.fromkeys(starts + contains))[: min(limit, 25)]

    async def visibility_choices(self, msg: IncomingMessage) -> list[str]:
        """The visibilities an upload may be given in ``msg``'s campaign (autocomplete)."""
        try:
            scope = await self.scope_of(msg)
        except Exception:
            return visibility_choices(None, is_gm=False)
        return visibility_choices(scope.campaign, is_gm=scope.lens.is_gm)

    # -- for the scheduler and the console ---------------------------------------------------

    async def budget(self, slug: str, chat_key: str | None, default: int = 6000) -> int:
        return await effective_budget(self.engine, slug, chat_key, default)

    async def recap(self, slug: str, sessions: int = 1) -> tuple[str, tuple[Source, ...]]:
        """A "previously on" over the latest session notes — players lens only (the scheduler's
        post: nobody waits on it, so a model writes it as background work)."""
        return await recap_text(
            self.engine, slug, sessions, responder=self.responder, foreground=False
        )


@dataclass(frozen=True, slots=True)
class Pending:
    """A request whose command, scope and privacy are resolved (``BotService.begin``); ``finish``
    runs it. ``error`` is what stopped the resolution, turned into a reply by ``finish``."""

    msg: IncomingMessage
    command: Command | None = None
    request: Request | None = None
    scope: Scope | None = None
    private: bool = True
    error: Exception | None = None

    @property
    def is_gm(self) -> bool:
        """Whether the asker holds the GM lens in the request's campaign (adapters fetch files only then)."""
        return self.scope is not None and self.scope.campaign is not None and self.scope.lens.is_gm

    async def finish(self, attachments: tuple[Attachment, ...] | None = None) -> Reply:
        """Run the command (with ``attachments`` when the adapter fetched them); never raises."""
        try:
            if self.error is not None:
                raise self.error
            assert self.command is not None and self.request is not None and self.scope is not None
            request = (
                self.request
                if attachments is None
                else self.request.with_attachments(tuple(attachments))
            )
            if self.command.is_gm_only(request) and not self.scope.lens.is_gm:
                raise PermissionDenied(
                    f"players lens tried /{self.command.name}",
                    user_message="Only a GM can do that. A GM can make you one with "
                    f"`/campaign gm add @you` ({your_id(self.msg)}).",
                )
            if request.error is not None:
                raise request.error
            reply = await self.command.run(request, self.scope)
            return replace(reply, ephemeral=reply.ephemeral or self.private)
        except LiminalisError as exc:
            # A host's misconfiguration is an error to act on; a user's mistake is not.
            _log.log(
                logging.ERROR if isinstance(exc, ConfigError) else logging.INFO,
                "%s on %s: %s",
                type(exc).__name__,
                self.msg.platform,
                exc,
            )
            return Reply(text=exc.user_message, ephemeral=True, error=True)
        except Exception:
            _log.exception("unhandled error handling %s command", self.msg.platform)
            return Reply(text=NEUTRAL, ephemeral=True, error=True)
