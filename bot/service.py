"""``BotService.handle``: the one entry point every adapter calls.

Adapters turn a platform event into one neutral :class:`IncomingMessage` (typed command or text,
who, where, attachments) and render the neutral :class:`Reply`. The commands themselves live in
:mod:`bot.commands`, one module each; this module only dispatches: it builds the structured
request, resolves the campaign and the asker's lens once, holds the GM wall, runs the command and
turns errors into user-safe replies, so Discord, Slack and the console behave identically.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from bot.cards import Cards, action_id
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
from bot.commands.campaign import DM_NOT_LINKED, your_id
from bot.commands.recap import recap_text
from bot.commands.upload import looks_like_upload_options, visibility_choices
from bot.directory import Directory, gm_by_id, lens_for
from bot.messages import Action, Attachment, IncomingMessage, Progress, Reply
from bot.presses import press
from bot.upload_files import DISK, UploadWriter, discard_all
from liminalis.answer import Responder, Source
from liminalis.campaign import CampaignConfig
from liminalis.engine import MAX_QUERY_CHARS, Engine
from liminalis.errors import (
    ConfigError,
    InvalidInput,
    LiminalisError,
    PermissionDenied,
    UnknownCampaign,
)
from liminalis.lens import GM, PLAYERS, Lens
from liminalis.passes import Passes
from liminalis.text import clean_text

__all__ = [
    "IncomingMessage",
    "Attachment",
    "Reply",
    "BotService",
    "COMMANDS",
    "ChooseCampaign",
    "HELP",
    "MAX_MESSAGE_CHARS",
    "Pending",
    "RecapScheduling",
    "Seat",
    "Seating",
]

_log = logging.getLogger(__name__)

HELP = REGISTRY.help_text()
NEUTRAL = "Sorry, something went wrong on my side. The error has been logged."
#: Recap schedules offered while one is typed (``/recap schedule``'s autocomplete), in UTC.
CRON_PRESETS = (
    ("Fridays 18:00 UTC", "0 18 * * 5"),
    ("Saturdays 17:00 UTC", "0 17 * * 6"),
    ("Sundays 16:00 UTC", "0 16 * * 0"),
    ("Every day 09:00 UTC", "0 9 * * *"),
    ("Mondays 12:00 UTC", "0 12 * * 1"),
    ("Stop posting recaps here", "off"),
)
#: The longest message any command reads (Discord's own limit with Nitro; a question is at most
#: ``MAX_QUERY_CHARS`` of it): anything longer is refused by its length before it is cleaned,
#: parsed or scoped, so a 10 MB message costs a length check, not seconds of the event loop.
MAX_MESSAGE_CHARS = 4000
#: The most linked channels a DM's author is looked for in (each may cost the adapter a lookup).
MAX_SEAT_CHANNELS = 50
#: How long a DM author's campaigns and views are reused before they are looked up again.
SEATS_TTL_S = 30.0
_TAG_LETTERS = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: a tag is read and typed


def random_tag() -> str:
    """Four letters or digits ending a campaign's slug made from chat (``/campaign create``)."""
    return "".join(secrets.choice(_TAG_LETTERS) for _ in range(4))


@dataclass(frozen=True, slots=True)
class Seat:
    """A campaign a DM's author plays, with the view they hold at its table."""

    config: CampaignConfig
    lens: Lens


#: How an adapter finds where the author of a DM sits: given the DM and the linked channels of
#: its platform (``(channel id, server id)``), the author's message as if written in each
#: channel they can read (their roles there filled in); none where they cannot, or on any doubt.
Seating = Callable[
    [IncomingMessage, Sequence[tuple[str, str | None]]], Awaitable[list[IncomingMessage]]
]


class ChooseCampaign(UnknownCampaign):
    """A DM from a member of several campaigns who has not picked one: they are asked which."""

    def __init__(self, seats: dict[str, Seat]) -> None:
        super().__init__(
            "dm: several campaigns",
            user_message="You play in several campaigns: ask in your campaign's channel.",
        )
        self.seats = seats


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
        cards: Cards | None = None,
        passes: Passes | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        slug_tag: Callable[[], str] = random_tag,
        upload_writer: UploadWriter = DISK,
    ) -> None:
        self.engine = engine
        self.upload_writer = upload_writer
        self.scheduler = scheduler
        if responder is not None:
            engine.use_answerer(responder)
        self.responder = engine.answerer
        self.directory = directory or Directory(engine.db)
        self.max_upload_bytes = max_upload_bytes
        self.default_campaign = default_campaign
        self.registry = registry
        #: User ids the host lets ``/campaign create`` besides server managers and workspace
        #: admins (``LIMINALIS_CAMPAIGN_CREATORS``).
        self.campaign_creators = campaign_creators
        #: Replies with buttons, feedback, DM choices (``bot.cards``).
        self.cards = cards or Cards(engine.db)
        #: The analysis passes this process runs (``/pass``); the composition root sets them
        #: once ``open_passes`` has them (``serve``, ``chat``).
        self.passes = passes
        #: Per platform, how its adapter finds where a DM's author sits (``use_seating``).
        self.seating: dict[str, Seating] = {}
        self._monotonic = monotonic
        #: Ends the slug of a campaign made from chat: ``/campaign create`` always succeeds with
        #: a slug of its own, so it tells nobody which campaigns others made.
        self.slug_tag = slug_tag
        self._seats: dict[tuple[str, str], tuple[float, list[IncomingMessage]]] = {}

    def use_seating(self, platform: str, seating: Seating) -> None:
        """Let DMs on ``platform`` be answered for the campaigns their author plays."""
        self.seating[platform] = seating

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
        if slug is None and msg.is_dm:
            seat = await self.dm_seat(msg)
            if seat is not None:
                return Scope(self, seat.config, seat.lens)
        if slug is None:
            if need == "optional":
                return Scope(self, None, Lens({PLAYERS}))
            if msg.is_dm:  # a DM is never linked (a GM's roles don't reach it): say where to ask
                raise UnknownCampaign("dm not linked", user_message=DM_NOT_LINKED)
            raise UnknownCampaign("channel not linked")
        cfg = await self.config(slug)
        return Scope(self, cfg, await self.lens_of(msg, cfg))

    # -- direct messages ---------------------------------------------------------------------

    async def seats(self, msg: IncomingMessage) -> dict[str, Seat]:
        """The campaigns ``msg``'s author plays on its platform (by slug), each with the view
        they hold at its table: found by the platform's adapter in the linked channels they can
        read, their lens there resolved as it would be there (roles count only at home). Where
        several channels give one campaign, the GM view wins, else their views join. ``{}``
        without an adapter's seating or on any failure."""
        seating = self.seating.get(msg.platform)
        if seating is None:
            return {}
        found: dict[str, Seat] = {}
        try:
            for there in await self._theres(msg, seating):
                slug = await self.directory.campaign_for(
                    there.platform, there.channel_id, there.parent_id
                )
                if slug is None:
                    continue
                try:
                    cfg = await self.config(slug)
                except LiminalisError:
                    _log.info("dm seats: campaign %s cannot be read; skipped", slug)
                    continue
                # Resolved now, never cached: a GM removed from campaign.toml is a player at once.
                lens = await self.lens_of(there, cfg)
                old = found.get(slug)
                if old is not None and not lens.is_gm:
                    lens = old.lens if old.lens.is_gm else Lens(old.lens | lens)
                found[slug] = Seat(cfg, lens)
        except Exception:
            _log.exception("dm seats of %s on %s failed; none", msg.user_id, msg.platform)
            return {}
        return found

    async def _theres(self, msg: IncomingMessage, seating: Seating) -> list[IncomingMessage]:
        """The adapter's lookups of where ``msg``'s author sits (each may cost a platform call),
        reused for :data:`SEATS_TTL_S` seconds."""
        key = (msg.platform, msg.user_id)
        now = self._monotonic()
        cached = self._seats.get(key)
        if cached is not None and now - cached[0] < SEATS_TTL_S:
            return cached[1]
        linked = await self.directory.linked(msg.platform)
        theres = await seating(msg, [(c, g) for c, _, g in linked[:MAX_SEAT_CHANNELS]])
        self._seats[key] = (now, theres)
        return theres

    async def dm_seat(self, msg: IncomingMessage) -> Seat | None:
        """The campaign a DM is about and the author's view there: their only campaign, else
        the one they picked. ``None`` when they play none.

        Raises:
            ChooseCampaign: they play several and have picked none of them.
        """
        seats = await self.seats(msg)
        if not seats:
            return None
        if len(seats) == 1:
            return next(iter(seats.values()))
        chosen = await self.cards.dm_choice(msg.platform, msg.user_id)
        if chosen in seats:
            return seats[chosen]
        raise ChooseCampaign(seats)

    async def choose_campaign(self, msg: IncomingMessage, seats: dict[str, Seat]) -> Reply:
        """Ask a DM's author which of their campaigns ``msg`` is about; picking one answers it
        there (``bot.presses``) and is remembered for their next DMs."""
        request = json.dumps(
            {"text": msg.text, "command": msg.command, "options": dict(msg.options)}
        )
        card = await self.cards.save(
            kind="dm", msg=msg, campaign="", lens=(PLAYERS,), question=request
        )
        actions = tuple(
            Action(seat.config.name[:80], action_id("pick", card.card_id, slug))
            for slug, seat in sorted(seats.items())[:20]
        )
        return Reply(
            text="You play in several campaigns. Which one is this about? "
            "I will remember it for your next messages.",
            actions=actions,
            ephemeral=True,
        )

    async def home(self, msg: IncomingMessage) -> list[tuple[Seat, str]]:
        """What a member's home page shows (Slack's App Home): each campaign they play, their
        view there and its recap schedule in words. Never raises."""
        out: list[tuple[Seat, str]] = []
        for slug, seat in sorted((await self.seats(msg)).items()):
            recaps = ""
            if self.scheduler is not None:
                try:
                    recaps = await self.scheduler.describe(slug)
                except Exception:
                    _log.exception("recap schedule of %s unreadable for the home page", slug)
            out.append((seat, recaps))
        return out

    # -- buttons -----------------------------------------------------------------------------

    async def press(self, msg: IncomingMessage, action: str, value: str = "") -> Reply:
        """A button pressed (``action``, its id) or a form sent (``value``, its text) by
        ``msg``'s author, where ``msg`` says. Never raises: errors become user-safe replies."""
        try:
            msg = replace(msg, text=clean_text(msg.text or ""))
            return await press(self, msg, action, clean_text(value or "").strip())
        except ChooseCampaign as exc:
            return await self.choose_campaign(msg, exc.seats)
        except LiminalisError as exc:
            _log.info("press %s on %s refused: %s", action[:40], msg.platform, exc)
            return Reply(text=exc.user_message, ephemeral=True, error=True)
        except Exception:
            _log.exception("unhandled error handling a %s button", msg.platform)
            return Reply(text=NEUTRAL, ephemeral=True, error=True)

    # -- entry point -------------------------------------------------------------------------

    async def begin(self, msg: IncomingMessage) -> Pending:
        """Resolve ``msg``'s command, scope and privacy, without running it; never raises.

        For adapters that must answer before the reply exists: Discord chooses at ``defer`` time
        whether "thinking…" is private, and an adapter downloads a message's files only for a
        GM. ``Pending.finish`` then runs the command on the same scope. Anything uncertain (a
        parse error, an unlinked channel) is private and not a GM.
        """
        try:
            if len(msg.text or "") > MAX_MESSAGE_CHARS:
                raise InvalidInput(
                    f"message of {len(msg.text):,} characters",
                    user_message=f"That message is too long ({len(msg.text):,} characters): "
                    f"questions are limited to {MAX_QUERY_CHARS:,} characters.",
                )
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
                service=self,
            )
        except Exception as exc:
            return Pending(msg, error=exc, service=self)

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
        """The slugs of :meth:`campaign_choices` (the console and Slack offer bare slugs)."""
        return [slug for slug, _ in await self.campaign_choices(msg, prefix)][: min(limit, 25)]

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

    def command_choices(self, prefix: str, *, platform: str) -> list[tuple[str, str]]:
        """``(shown, value)`` of the commands whose name starts with ``prefix`` (``/help``'s
        autocomplete), written as ``platform`` calls them."""
        p = prefix.strip().lstrip("/").lower()
        out = []
        for command in self.registry:
            if command.name.startswith(p) or command.group.startswith(p):
                call = f"/{command.group} {command.name}" if platform == "discord" else command.name
                out.append((f"{call} — {command.description}"[:100], command.name))
        return out[:25]

    @staticmethod
    def cron_choices(prefix: str) -> list[tuple[str, str]]:
        """``(shown, value)`` of the recap schedules offered while one is typed: the presets,
        then what is typed, as it is (the scheduler checks it)."""
        typed = prefix.strip()
        out = [
            (f"{label} — {cron}", cron)
            for label, cron in CRON_PRESETS
            if typed in cron or typed.lower() in label.lower()
        ]
        if typed and typed not in {cron for _, cron in CRON_PRESETS}:
            out.insert(0, (typed[:100], typed[:100]))
        return out[:25]

    async def campaign_choices(self, msg: IncomingMessage, prefix: str) -> list[tuple[str, str]]:
        """``(slug, "name (slug)")`` of the campaigns ``msg``'s author is a GM of
        (:meth:`gm_campaigns`; ``/campaign link``'s autocomplete): a stranger is offered none, so
        it tells nobody which campaigns exist. Never raises."""
        try:
            mine = await self.gm_campaigns(msg)
        except Exception:
            _log.debug("campaign autocomplete failed", exc_info=True)
            return []
        p = prefix.strip().lower()
        return [
            (c.slug, f"{c.name} ({c.slug})")
            for c in mine
            if c.slug.startswith(p) or p in c.slug or p in c.name.lower()
        ][:25]

    async def visibility_choices(self, msg: IncomingMessage) -> list[str]:
        """The visibilities an upload may be given in ``msg``'s campaign (autocomplete)."""
        try:
            scope = await self.scope_of(msg)
        except Exception:
            return visibility_choices(None, is_gm=False)
        return visibility_choices(scope.campaign, is_gm=scope.lens.is_gm)

    # -- for the scheduler and the console ---------------------------------------------------

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
    service: BotService | None = None

    @property
    def is_gm(self) -> bool:
        """Whether the asker holds the GM lens in the request's campaign (adapters fetch files only then)."""
        return self.scope is not None and self.scope.campaign is not None and self.scope.lens.is_gm

    async def finish(
        self,
        attachments: tuple[Attachment, ...] | None = None,
        *,
        progress: Progress | None = None,
    ) -> Reply:
        """Run the command (with ``attachments`` when the adapter fetched them; ``progress``
        shows a streamed answer's text so far); never raises. Downloads the adapter streamed
        to temporary files are removed after, whatever the command did with them."""
        try:
            return await self._run(attachments, progress)
        finally:
            streamed = [a.path for a in attachments or () if a.path is not None]
            if streamed:
                await asyncio.to_thread(discard_all, streamed)

    async def _run(
        self, attachments: tuple[Attachment, ...] | None, progress: Progress | None
    ) -> Reply:
        try:
            if self.error is not None:
                raise self.error
            assert self.command is not None and self.request is not None and self.scope is not None
            request = (
                self.request
                if attachments is None
                else self.request.with_attachments(tuple(attachments))
            )
            if progress is not None:
                request = replace(request, progress=progress)
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
        except ChooseCampaign as exc:
            if self.service is not None:
                try:
                    return await self.service.choose_campaign(self.msg, exc.seats)
                except Exception:
                    _log.exception("asking which campaign a DM is about failed")
            return Reply(text=exc.user_message, ephemeral=True, error=True)
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
