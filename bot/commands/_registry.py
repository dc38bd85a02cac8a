"""The registry: every command by name, the one text parser, and what is derived from the
declarations (the help, typed requests from typed platforms)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from bot.commands._base import Command, Option, Request
from bot.messages import IncomingMessage, OptionValue
from liminalis.errors import InvalidInput
from liminalis.text import clean_text

__all__ = ["GROUPS", "HELP_HEADER", "Registry"]

_log = logging.getLogger(__name__)

HELP_HEADER = "**Liminalis** answers questions from your campaign's own documents, with sources."


class Registry:
    """Commands by name, in the order the help lists them."""

    def __init__(self, commands: Sequence[Command]) -> None:
        self._commands = {c.name: c for c in commands}
        if len(self._commands) != len(commands):
            raise ValueError("two commands share a name")
        #: Every name a text form answers to: the names, then the aliases (``/lens`` → ``view``).
        self._names = dict(self._commands)
        if set(self._names) & set(GROUPS):
            raise ValueError("a command is named like a group")
        for c in commands:
            for alias in c.aliases:
                if alias in self._names or alias in GROUPS:
                    raise ValueError(f"alias {alias!r} of /{c.name} is taken")
                self._names[alias] = c

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._commands)

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def __getitem__(self, name: str) -> Command:
        return self._commands[name]

    def get(self, name: str) -> Command | None:
        """The command called ``name`` or one of its aliases."""
        return self._names.get(name)

    def group(self, group: str) -> tuple[Command, ...]:
        """The commands listed under ``group`` (``lore`` or ``gm``), in the help's order."""
        return tuple(c for c in self if c.group == group)

    # -- requests ----------------------------------------------------------------------------

    def split(self, text: str) -> tuple[str, str]:
        """``"/pin add Foo"`` → ``("pin", "add Foo")``; a bare text is an ``ask``.

        A group's name may come first, as the platforms with groups write it: ``/lore ask …``,
        ``/gm upload``, Slack's ``/lore gm upload`` and ``/lore <question>`` (an ask), and
        ``lore ask …`` typed bare (only when a command's name follows, so a question that starts
        with "lore" stays a question). An alias gives its command's name.
        """
        t = (text or "").strip()
        if not t:
            raise InvalidInput("empty message", user_message="Ask a question, or try `/lore help`.")
        head, rest = _first_word(t)
        if head.lower().lstrip("/") in GROUPS:
            following = _first_word(rest)[0].lower().lstrip("/")
            if head.startswith("/") or following in self._names or following in GROUPS:
                while rest:  # "/lore gm upload": every group word goes
                    head, after = _first_word(rest)
                    if head.lower().lstrip("/") not in GROUPS:
                        break
                    rest = after
                if not rest:
                    return "help", ""
                command = self._names.get(head.lower().lstrip("/"))
                if command is not None:
                    return command.name, after.strip()
                return "ask", rest  # "/lore who is the baron?"
        if not t.startswith("/"):
            return "ask", t
        head, rest = _first_word(t[1:])  # any whitespace ends the name: "/ask\nwho is…" is an ask
        command = self._names.get(head.lower())
        if command is None:
            raise InvalidInput(
                f"unknown command {head!r}",
                user_message=f"Unknown command `/{head[:40]}`. Try `/lore help`.",
            )
        return command.name, rest.strip()

    def request(self, msg: IncomingMessage) -> Request:
        """The structured request of ``msg``: its typed command, or its text parsed (the only
        text parser: mentions, Slack's slash commands and the console all come through here).

        Raises:
            InvalidInput: an empty text, or a command name no command has.
        """
        if msg.command is not None:
            return self._typed(msg)
        name, rest = self.split(msg.text)
        command = self._commands[name]
        error: InvalidInput | None = None
        try:
            options = command.parse(rest)
        except InvalidInput as exc:
            options, error = {}, exc
        return Request(name, self._with_defaults(command, options), msg, error)

    def _typed(self, msg: IncomingMessage) -> Request:
        assert msg.command is not None
        command = self.get(msg.command)
        if command is None:
            raise InvalidInput(
                f"unknown command {msg.command!r}",
                user_message="Unknown command. Try `/lore help`.",
            )
        options: dict[str, OptionValue] = {}
        for name, value in msg.options.items():
            spec = command.option(name)
            if spec is None or spec.kind == "attachment":
                continue
            if spec.kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
                options[name] = value
            elif spec.kind in {"string", "mention"} and isinstance(value, str):
                # Platform JSON can carry lone surrogates and control characters, as text can.
                cleaned = clean_text(value).strip()
                if cleaned:
                    options[name] = cleaned
            else:
                _log.info("typed option %s of /%s has the wrong type; ignored", name, command.name)
        return Request(command.name, self._with_defaults(command, options), msg)

    @staticmethod
    def _with_defaults(command: Command, options: dict[str, OptionValue]) -> dict[str, OptionValue]:
        for spec in command.options:
            if spec.default is not None:
                options.setdefault(spec.name, spec.default)
        return options

    # -- help --------------------------------------------------------------------------------

    def help_text(self, topic: str | None = None, *, platform: str = "console") -> str:
        """The overview of every command, or one command's options and an example, written as
        ``platform`` calls commands (Discord ``/lore ask``, ``/gm upload``; Slack ``/lore ask``;
        the console ``/ask``)."""
        words = (topic or "").strip().lower().split()
        while words and words[0].lstrip("/") in GROUPS:
            words = words[1:]
        command = self.get(words[0].lstrip("/")) if words else None
        if command is None:
            lines = [HELP_HEADER]
            for group, heading in (("lore", "For everyone"), ("gm", "For GMs")):
                members = self.group(group)
                if members:
                    lines.append(f"**{heading}**")
                    lines += [_as(line, c, platform) for c in members for line in c.usage]
            lines.append(
                f"`{_call(self['help'], platform)} <command>` shows one command with an example."
                if "help" in self._commands
                else ""
            )
            return "\n".join(line for line in lines if line)
        lines = [
            f"**{_call(command, platform)}** — {command.description}",
            *(_as(line, command, platform) for line in command.usage),
        ]
        if command.options:
            lines.append("Options:")
            lines += [
                f"• `{o.name}`{'' if o.required else ' (optional)'} — {_describe(o)}"
                for o in command.options
            ]
        if command.gm_only is True:
            lines.append("Only a GM of the campaign can run it.")
        if command.example:
            lines.append(f"Example: `{_as(command.example, command, platform)}`")
        return "\n".join(lines)


#: The command groups of the platforms that have them, and the words that name one in a text.
GROUPS = ("lore", "gm")


def _first_word(text: str) -> tuple[str, str]:
    parts = text.strip().split(None, 1)
    if not parts:
        return "", ""
    return parts[0], parts[1] if len(parts) == 2 else ""


def _call(command: Command, platform: str) -> str:
    """How ``platform`` calls ``command``: ``/gm upload`` (Discord's groups), ``/lore upload``
    (Slack's one namespaced command), ``/upload`` (the console and mentions)."""
    if platform == "discord":
        return f"/{command.group} {command.name}"
    if platform == "slack":
        return f"/lore {command.name}"
    return f"/{command.name}"


def _as(line: str, command: Command, platform: str) -> str:
    """A usage line or example written with ``/name`` as ``platform`` calls the command."""
    return line.replace(f"/{command.name}", _call(command, platform), 1)


def _describe(option: Option) -> str:
    text = option.description
    if option.choices:
        text += (
            f" ({', '.join(option.choices)}"
            + (f"; default {option.default}" if option.default is not None else "")
            + ")"
        )
    elif option.kind == "integer" and option.low is not None and option.high is not None:
        text += f" ({option.low:,}–{option.high:,})"
    return text
