"""The registry: every command by name, the one text parser, and what is derived from the
declarations (the help, typed requests from typed platforms)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from bot.commands._base import Command, Option, Request
from bot.messages import IncomingMessage, OptionValue
from liminalis.errors import InvalidInput
from liminalis.text import clean_text

__all__ = ["Registry", "HELP_HEADER"]

_log = logging.getLogger(__name__)

HELP_HEADER = "**Liminalis** answers questions from your campaign's own documents, with sources."


class Registry:
    """Commands by name, in the order the help lists them."""

    def __init__(self, commands: Sequence[Command]) -> None:
        self._commands = {c.name: c for c in commands}
        if len(self._commands) != len(commands):
            raise ValueError("two commands share a name")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._commands)

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def __getitem__(self, name: str) -> Command:
        return self._commands[name]

    def get(self, name: str) -> Command | None:
        return self._commands.get(name)

    # -- requests ----------------------------------------------------------------------------

    def split(self, text: str) -> tuple[str, str]:
        """``"/pin add Foo"`` → ``("pin", "add Foo")``; a bare text is an ``ask``."""
        t = (text or "").strip()
        if not t:
            raise InvalidInput("empty message", user_message="Ask a question, or try `/help`.")
        if not t.startswith("/"):
            return "ask", t
        parts = t[1:].split(None, 1)  # any whitespace ends the name: "/ask\nwho is…" is an ask
        head, rest = (parts[0], parts[1]) if len(parts) == 2 else ((parts or [""])[0], "")
        name = head.lower()
        if name not in self._commands:
            raise InvalidInput(
                f"unknown command {head!r}",
                user_message=f"Unknown command `/{head[:40]}`. Try `/help`.",
            )
        return name, rest.strip()

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
        command = self._commands.get(msg.command)
        if command is None:
            raise InvalidInput(
                f"unknown command {msg.command!r}", user_message="Unknown command. Try `/help`."
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

    def help_text(self, topic: str | None = None) -> str:
        """The overview of every command, or one command's options and an example."""
        command = self._commands.get((topic or "").strip().lstrip("/").lower())
        if command is None:
            lines = [HELP_HEADER, *(line for c in self for line in c.usage)]
            return "\n".join(lines)
        lines = [f"**/{command.name}** — {command.description}", *command.usage]
        if command.options:
            lines.append("Options:")
            lines += [
                f"• `{o.name}`{'' if o.required else ' (optional)'} — {_describe(o)}"
                for o in command.options
            ]
        if command.gm_only is True:
            lines.append("Only a GM of the campaign can run it.")
        if command.example:
            lines.append(f"Example: `{command.example}`")
        return "\n".join(lines)


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
