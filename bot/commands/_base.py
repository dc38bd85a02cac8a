"""What a command is: its typed options, its rules, and ``run(request, scope) -> Reply``.

Each module of :mod:`bot.commands` builds one :class:`Command`. Everything an adapter or the help
needs is derived from these declarations (``bot.commands._registry``): the slash-command
registrations, the help text, whether a reply will be private, whether the command is GM-only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from bot.messages import Attachment, IncomingMessage, OptionValue, Progress, Reply
from bot.upload_files import UploadWriter
from liminalis.campaign import CampaignConfig
from liminalis.errors import InvalidInput, UnknownCampaign
from liminalis.lens import Lens

if TYPE_CHECKING:
    from bot.cards import Cards
    from bot.commands._registry import Registry
    from bot.directory import Directory
    from liminalis.answer import Responder
    from liminalis.engine import Engine
    from liminalis.passes import Passes

__all__ = [
    "Command",
    "Group",
    "Need",
    "Option",
    "OptionKind",
    "RecapScheduling",
    "Request",
    "Scope",
    "Services",
    "private_in_shared",
    "shared_channel",
]

#: ``mention``: a user or a role, as the platform writes a mention in text (``<@id>``,
#: ``<@&id>``, Slack's ``<@U…>`` and ``<!subteam^S…>``); a typed platform offers a picker.
OptionKind = Literal["string", "integer", "attachment", "mention"]
#: Where an option's suggestions come from while it is typed (Discord autocomplete): document
#: titles through the caller's lens, an upload's visibilities, the commands (``help``), recap
#: schedule presets, the campaigns the caller is a GM of, the entities the caller's lens knows.
Autocomplete = Literal["titles", "visibilities", "commands", "crons", "campaigns", "entities"]
#: Where a command lives on a platform with command groups: ``lore`` for everyone (``/lore
#: ask``), ``gm`` for the GM's work (``/gm upload``), which Discord hides from members without
#: the group's default permission. The run-time GM check stays the wall; this is the signpost.
Group = Literal["lore", "gm"]
#: What a request needs resolved before it runs: the channel's campaign (``required``: an
#: unlinked channel is refused), the campaign if the channel has one (``optional``), or nothing.
Need = Literal["required", "optional", "none"]


@dataclass(frozen=True, slots=True)
class Option:
    """One typed option of a command.

    ``low``/``high`` bound an integer's value or a string's length. ``choices`` are the only
    values a platform with typed commands offers; ``autocomplete`` names a source of suggestions.
    """

    name: str
    kind: OptionKind
    description: str
    required: bool = False
    choices: tuple[str, ...] = ()
    default: OptionValue | None = None
    autocomplete: Autocomplete | None = None
    low: int | None = None
    high: int | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """One command invocation: its name, its typed option values, and who sent it from where.

    Typed commands and parsed text give equal requests. ``error`` is a text that did not parse
    (``/upload type=gm``): it is raised where the command refused it before, after the campaign
    and the GM wall, so a player is told "only a GM", never a GM command's usage.
    """

    command: str
    options: Mapping[str, OptionValue]
    msg: IncomingMessage
    error: InvalidInput | None = None
    #: Where a command that writes its reply as it goes (a streamed answer) shows the text so
    #: far; the adapter edits its message in place. ``None``: the reply comes whole.
    progress: Progress | None = None

    @property
    def attachments(self) -> tuple[Attachment, ...]:
        return self.msg.attachments

    def string(self, name: str, default: str = "") -> str:
        value = self.options.get(name)
        return value if isinstance(value, str) else default

    def integer(self, name: str) -> int | None:
        value = self.options.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def with_attachments(self, attachments: tuple[Attachment, ...]) -> Request:
        return replace(self, msg=replace(self.msg, attachments=attachments))


class RecapScheduling(Protocol):
    """What ``/recap schedule`` needs from the scheduler (``bot.scheduler.RecapScheduler``)."""

    async def set_schedule(
        self,
        campaign: str,
        *,
        cron: str,
        platform: str,
        channel_id: str,
        parent_id: str | None = None,
    ) -> str: ...

    async def remove_schedule(self, campaign: str) -> bool: ...

    async def describe(self, campaign: str) -> str: ...


class Services(Protocol):
    """What commands use of the bot (``bot.service.BotService``)."""

    engine: Engine
    directory: Directory
    responder: Responder
    scheduler: RecapScheduling | None
    max_upload_bytes: int
    #: Writes an upload's files (``bot.upload_files.DISK``; a test's may refuse as a full disk).
    upload_writer: UploadWriter
    registry: Registry
    #: User ids the host lets create campaigns besides server managers and workspace admins.
    campaign_creators: frozenset[str]
    cards: Cards
    #: The analysis passes of this process (``serve`` and ``chat`` run them); ``None`` where
    #: none run, and ``/pass`` says so rather than pretend.
    passes: Passes | None
    #: Draws the tag that ends a campaign's slug made from chat (random; fixed in tests).
    slug_tag: Callable[[], str]

    async def config(self, slug: str) -> CampaignConfig: ...

    async def lens_of(self, msg: IncomingMessage, cfg: CampaignConfig) -> Lens: ...

    async def gm_campaigns(self, msg: IncomingMessage) -> list[CampaignConfig]: ...


@dataclass(frozen=True, slots=True)
class Scope:
    """The campaign a request runs in, resolved once per request, and the asker's lens in it."""

    services: Services
    campaign: CampaignConfig | None
    lens: Lens

    @property
    def config(self) -> CampaignConfig:
        """The campaign; a command that declared ``need="required"`` always has one."""
        if self.campaign is None:
            raise UnknownCampaign("channel not linked")
        return self.campaign


def shared_channel(request: Request) -> bool:
    """Whether others may read the conversation the request comes from: anywhere but the
    asker's own DM with the app and the console. A DM between two people and a group DM are
    shared: a DM is not private by being a DM."""
    return not request.msg.bot_dm and request.msg.platform != "console"


def private_in_shared(request: Request, scope: Scope) -> bool:
    """Whether a reply drawn from the asker's lens must be private: a GM's or a personal lens's
    may hold what others in a shared conversation must not read (a GM secret, one player's
    backstory), so there only its asker reads it."""
    return scope.lens.is_private and shared_channel(request)


Run = Callable[[Request, Scope], Awaitable[Reply]]
Parse = Callable[[str], dict[str, OptionValue]]


def _no_text(arg: str) -> dict[str, OptionValue]:
    return {}


@dataclass(frozen=True, slots=True)
class Command:
    """A command's declaration and its ``run``.

    Args:
        name: the slash command's name.
        description: one line (Discord shows at most 100 characters).
        run: ``async run(request, scope) -> Reply``; raises ``LiminalisError`` with a user-safe message.
        options: typed options, in the order a text form gives them.
        usage: the help overview's lines for this command.
        example: one invocation shown by ``/help <name>``.
        gm_only: only a GM may run it (or a function of the request: ``/pin add`` is, ``/pin list`` not).
        private: the reply is shown to its asker only (or a function of the request and scope).
        need: what scope the request needs (or a function of the request).
        parse: the words after ``/name`` → option values; raises ``InvalidInput`` on words that
            mean nothing (kept in ``Request.error``).
        group: the command group it is listed under (``/lore ask``, ``/gm upload``).
        aliases: other names its text form answers to (``/lens`` for ``/view``).
    """

    name: str
    description: str
    run: Run
    options: tuple[Option, ...] = ()
    usage: tuple[str, ...] = ()
    example: str = ""
    gm_only: bool | Callable[[Request], bool] = False
    private: bool | Callable[[Request, Scope], bool] = False
    need: Need | Callable[[Request], Need] = "required"
    parse: Parse = field(default=_no_text)
    group: Group = "lore"
    aliases: tuple[str, ...] = ()

    def needs(self, request: Request) -> Need:
        return self.need(request) if callable(self.need) else self.need

    def is_gm_only(self, request: Request) -> bool:
        return self.gm_only(request) if callable(self.gm_only) else self.gm_only

    def is_private(self, request: Request, scope: Scope) -> bool:
        return self.private(request, scope) if callable(self.private) else self.private

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)
