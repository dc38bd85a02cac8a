"""The neutral request and reply every adapter speaks: :class:`IncomingMessage` in, :class:`Reply` out.

Adapters build one ``IncomingMessage`` per platform event (who, where, attachments, and either the
typed text or an already-typed command with its options) and render one ``Reply``. Nothing here
knows a platform.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from liminalis.answer import Source

__all__ = [
    "Action",
    "Attachment",
    "Delivery",
    "Form",
    "IncomingMessage",
    "OptionValue",
    "Progress",
    "Reply",
]

#: A typed option value: a string, or an integer (a token budget, a number of sessions).
OptionValue = str | int
#: Receives the text of a reply written as it goes (a streamed answer), the whole text so far.
Progress = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Attachment:
    """One file a message carries, as the adapter could hand it over."""

    filename: str
    data: bytes
    size: int | None = (
        None  # the platform's declared size when the data was not downloaded (too big)
    )
    #: Why the adapter could not hand the file over (a failed download), in words for the GM; the
    #: upload reports it beside the other files, which are still ingested.
    error: str = ""
    #: Where the adapter streamed the download (a temporary file, ``bot.upload_files``) instead
    #: of holding it in ``data``; the upload reads it in a worker and removes it.
    path: Path | None = None

    def byte_size(self) -> int:
        """The file's size as known before reading it: declared, held, or on disk."""
        on_disk = self.path.stat().st_size if self.path is not None else 0
        return max(len(self.data), self.size or 0, on_disk)

    def content(self) -> bytes:
        """The file's bytes (blocking where they are on disk: call it in a worker)."""
        return self.path.read_bytes() if self.path is not None else self.data


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A platform-neutral request.

    Text adapters (mentions, Slack slash commands, the console) set ``text``; a platform with typed
    commands (Discord's slash commands) sets ``command`` and ``options`` instead, so nothing it
    already typed is turned back into text and parsed again.
    """

    platform: str  # "discord" | "slack" | "console"
    channel_id: str
    user_id: str
    text: str  # "/ask who is …" or a bare question for mentions; "" for a typed command
    parent_id: str | None = None  # the thread's parent channel
    roles: tuple[str, ...] = ()  # role names (Discord), lens names (console); never ids
    role_ids: tuple[str, ...] = ()  # role ids (Discord); never names
    guild_id: str | None = None  # the Discord server the message came from
    usergroups: tuple[str, ...] = ()
    roles_known: bool = True
    is_dm: bool = False  # a direct message, by the platform's channel type
    #: The author's own DM with the app: nobody but they and the bot read it, so the one place a
    #: GM's or a personal view's answer may be a plain message. A DM between two people, a group
    #: DM or a channel is shared. Adapters set it only where the platform proves it.
    bot_dm: bool = False
    #: The sender administers where the message came from: Discord's Manage Server permission,
    #: a Slack workspace admin or owner (what ``/campaign create`` asks of the sender).
    can_manage: bool = False
    attachments: tuple[Attachment, ...] = ()
    #: How many files the message carries, known before any is downloaded (an adapter fetches
    #: them only for a GM: a DM with files is a GM's private upload, ``BotService.begin``).
    file_count: int = 0
    campaign_override: str | None = None  # console: --campaign
    command: str | None = None  # a typed command's name ("budget"); ``None`` → parse ``text``
    options: Mapping[str, OptionValue] = field(
        default_factory=dict
    )  # a typed command's option values

    @property
    def chat_key(self) -> str:
        return f"{self.platform}:{self.channel_id}"


@dataclass(frozen=True, slots=True)
class Action:
    """A button under a reply. ``id`` is what a press sends back (``lm:<verb>:<card>…``): it names
    a stored card and carries no secret; ``BotService.press`` checks the presser against it."""

    label: str
    id: str
    style: Literal["primary", "secondary", "success", "danger"] = "secondary"


@dataclass(frozen=True, slots=True)
class Form:
    """A one-line question the adapter asks in a modal (a 👎's reason); its answer comes back
    as a press of ``id`` with the text as the value."""

    id: str
    title: str
    label: str
    placeholder: str = ""
    max_length: int = 300


#: How the reply to a button press is delivered: to the presser only, to the whole channel, or
#: in place of the message whose button was pressed.
Delivery = Literal["private", "public", "replace"]


@dataclass(frozen=True, slots=True)
class Reply:
    """A platform-neutral response; adapters split and format it for their limits.

    ``question`` is shown above an answer; ``actions`` are its buttons (the last message of a
    split reply carries them); ``footer`` is a line under it (a page number). ``form`` asks the
    presser a question instead of replying; ``delivery`` says where a press's reply goes.
    """

    text: str
    sources: tuple[Source, ...] = ()
    ephemeral: bool = False
    title: str = ""
    lens: str = ""
    error: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: The question log's id of the answer (``/ask``): what a 👍/👎 on it is recorded against.
    question_id: int | None = None
    #: Files posted with the reply (the relationship map's PNG). Discord attaches them, Slack
    #: uploads them after the text (a private reply's to the member's DM, never the channel),
    #: the console writes them and prints their paths.
    files: tuple[Attachment, ...] = ()
    question: str = ""
    actions: tuple[Action, ...] = ()
    footer: str = ""
    form: Form | None = None
    delivery: Delivery = "private"
