"""The command tree: one slash command per command the service declares (``bot/commands/``), in
the ``/lore`` and ``/gm`` groups, and one table-driven autocomplete factory for every option
that names a source of choices."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal, Optional, Union

import discord
from discord import app_commands

from bot.commands import Command, Option
from bot.discord_adapter._components import Components
from bot.service import BotService

__all__ = ["AUTOCOMPLETE", "GM_PERMISSIONS", "GROUP_DESCRIPTIONS", "CommandTree"]

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

#: Up to 25 choices of up to 100 characters each: Discord's limits for an autocomplete answer.
MAX_CHOICES, MAX_NAME = 25, 100

Incoming = Callable[[], Any]
#: One source of choices: (service, the asker's request, what they typed) → (name, value) pairs.
ChoiceSource = Callable[[BotService, Incoming, str], Awaitable[Sequence[tuple[str, str]]]]


async def _titles(service: BotService, asker: Incoming, current: str) -> list[tuple[str, str]]:
    return [(t, t) for t in await service.complete_titles(asker(), current, limit=MAX_CHOICES)]


async def _entities(service: BotService, asker: Incoming, current: str) -> list[tuple[str, str]]:
    return [(n, n) for n in await service.complete_entities(asker(), current, limit=MAX_CHOICES)]


async def _visibilities(
    service: BotService, asker: Incoming, current: str
) -> list[tuple[str, str]]:
    names = await service.visibility_choices(asker())
    return [(n, n) for n in names if current.lower() in n]


async def _commands(service: BotService, asker: Incoming, current: str) -> list[tuple[str, str]]:
    return list(service.command_choices(current, platform="discord"))


async def _crons(service: BotService, asker: Incoming, current: str) -> list[tuple[str, str]]:
    return list(service.cron_choices(current))


async def _campaigns(service: BotService, asker: Incoming, current: str) -> list[tuple[str, str]]:
    return [(name, slug) for slug, name in await service.campaign_choices(asker(), current)]


#: Every ``Option.autocomplete`` source, by name: a new source is one row here.
AUTOCOMPLETE: dict[str, ChoiceSource] = {
    "titles": _titles,
    "entities": _entities,
    "visibilities": _visibilities,
    "commands": _commands,
    "crons": _crons,
    "campaigns": _campaigns,
}


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


def _mention(value: Any) -> Any:
    """A picked user or role as text writes it (``<@id>``, ``<@&id>``): the one form commands
    read, typed or written."""
    if isinstance(value, discord.Role):
        return f"<@&{value.id}>"
    if isinstance(value, (discord.Member, discord.User)):
        return f"<@{value.id}>"
    return value


class CommandTree(Components):
    """The slash commands, built from the service's command registry."""

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
        for option in command.options:
            if option.autocomplete is not None:
                app.autocomplete(option.name)(self.autocomplete(option.autocomplete))
        return app

    def autocomplete(
        self, source: str
    ) -> Callable[[discord.Interaction, str], Coroutine[Any, Any, list[app_commands.Choice[str]]]]:
        """The autocomplete handler of ``source`` (a row of :data:`AUTOCOMPLETE`): the asker's
        request is read from the interaction only when the source needs it, the choices capped
        to Discord's limits."""
        choices = AUTOCOMPLETE[source]

        async def complete(
            interaction: discord.Interaction, current: str
        ) -> list[app_commands.Choice[str]]:
            pairs = await choices(self.service, lambda: self.from_interaction(interaction), current)
            return [
                app_commands.Choice(name=name[:MAX_NAME], value=value)
                for name, value in pairs[:MAX_CHOICES]
            ]

        return complete
