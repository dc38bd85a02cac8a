"""Commands, one module each, and the registry every adapter derives its commands from.

A command module builds one :class:`Command`: its name, description, typed :class:`Option` s,
whether only a GM may run it, whether its reply is private, and ``async run(request, scope) ->
Reply``. :data:`REGISTRY` holds them in the order the help lists them.
"""

from bot.commands import (
    ask,
    budget,
    campaign,
    entities,
    entity,
    explain,
    help,
    log,
    map,
    memory,
    passes,
    pin,
    recap,
    review,
    search,
    show,
    summary,
    timeline,
    upload,
    view,
)
from bot.commands._base import (
    Command,
    Group,
    Need,
    Option,
    OptionKind,
    RecapScheduling,
    Request,
    Scope,
    Services,
)
from bot.commands._registry import Registry

__all__ = [
    "COMMANDS",
    "Command",
    "Group",
    "Need",
    "Option",
    "OptionKind",
    "REGISTRY",
    "RecapScheduling",
    "Registry",
    "Request",
    "Scope",
    "Services",
]

REGISTRY = Registry(
    [
        # /lore: for everyone
        ask.command,
        search.command,
        show.command,
        recap.command,
        entities.command,
        entity.command,
        summary.command,
        map.command,
        timeline.command,
        view.command,
        help.command,
        # /gm: the GM's work
        upload.command,
        pin.command,
        budget.command,
        explain.command,
        memory.command,
        log.command,
        review.command,
        passes.command,
        campaign.command,
    ]
)
COMMANDS = REGISTRY.names
