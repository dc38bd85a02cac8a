"""The command registry: every command declared once, and what is derived from it (the help,
the privacy and GM-only pre-checks, the text parser that must give the typed request)."""

from __future__ import annotations

import pytest
from conftest import close_engine, make_engine
from fakes.tiny_campaign import make_tiny_campaign

from bot.commands import COMMANDS, REGISTRY
from bot.messages import IncomingMessage
from bot.service import BotService
from liminalis.errors import InvalidInput


def text(t: str, *, user_id: str = "9", **kw) -> IncomingMessage:
    return IncomingMessage(platform="discord", channel_id="C1", user_id=user_id, text=t, **kw)


def typed(command: str, options: dict) -> IncomingMessage:
    return IncomingMessage(
        platform="discord", channel_id="C1", user_id="9", text="", command=command, options=options
    )


def test_the_help_lists_every_command_and_every_option_is_described():
    overview = REGISTRY.help_text()
    assert COMMANDS == REGISTRY.names
    for command in REGISTRY:
        assert command.group in {"lore", "gm"}, command.name
        assert f"`/{command.name}" in overview, command.name
        assert command.description and len(command.description) <= 100, command.name
        assert command.usage and command.example.startswith(f"/{command.name}"), command.name
        one = REGISTRY.help_text(command.name)
        assert one.startswith(f"**/{command.name}**") and command.example in one
        for option in command.options:
            assert option.description.strip() and len(option.description) <= 100, (
                command.name,
                option.name,
            )
            assert f"`{option.name}`" in one, (command.name, option.name)
        assert ("Only a GM" in one) is (command.gm_only is True), command.name
    assert REGISTRY.help_text("/PIN") == REGISTRY.help_text("pin") == REGISTRY.help_text("gm pin")
    assert REGISTRY.help_text("nosuch") == overview
    assert REGISTRY.help_text("lens") == REGISTRY.help_text("view")  # an alias names its command


def test_the_groups_hold_the_commands_each_platform_writes_with_them():
    """Discord lists commands under `/lore` (everyone) and `/gm` (the GM's work), Slack under its
    one `/lore`; the help and the examples are written as each platform calls them."""
    lore = {c.name for c in REGISTRY.group("lore")}
    gm = {c.name for c in REGISTRY.group("gm")}
    assert {"ask", "search", "show", "recap", "view", "help"} <= lore
    assert {"upload", "pin", "budget", "explain", "memory", "campaign", "pass"} <= gm
    assert not lore & gm and lore | gm == set(REGISTRY.names)
    discord = REGISTRY.help_text(platform="discord")
    assert "`/lore ask <question>`" in discord and "`/gm upload`" in discord
    assert "For GMs" in discord and "`/ask" not in discord
    slack = REGISTRY.help_text("upload", platform="slack")
    assert slack.startswith("**/lore upload**") and "Example: `/lore upload players" in slack
    assert "`/ask <question>`" in REGISTRY.help_text()  # the console keeps the short names
    for command in REGISTRY:  # player words: never "lens" or "budget" in what Discord shows
        shown = [command.description, *(o.description for o in command.options)]
        assert not any("lens" in t.lower() or "budget" in t.lower() for t in shown), command.name


@pytest.mark.parametrize(
    ("words", "command", "options"),
    [
        ("/ask who is the baron?", "ask", {"question": "who is the baron?"}),
        ("who is the baron?", "ask", {"question": "who is the baron?"}),
        ("/pin", "pin", {}),
        ("/pin add Baron Aldric", "pin", {"action": "add", "document": "Baron Aldric"}),
        ("/budget", "budget", {}),
        ("/budget set 9,000 chat", "budget", {"action": "set", "tokens": 9000, "scope": "chat"}),
        ("/budget set 9000", "budget", {"action": "set", "tokens": 9000}),
        ("/upload players session", "upload", {"visibility": "players", "type": "session"}),
        ("/upload visibility=mirel type:lore", "upload", {"visibility": "mirel", "type": "lore"}),
        ("/recap 3", "recap", {"sessions": 3}),
        ("/recap schedule 0 18 * * 5", "recap", {"schedule": "0 18 * * 5"}),
        ("/explain the bell", "explain", {"question": "the bell"}),
        ("/campaign", "campaign", {}),
        ("/campaign link greyhold", "campaign", {"action": "link", "slug": "greyhold"}),
        (
            "/campaign link greyhold confirm",
            "campaign",
            {"action": "link", "slug": "greyhold", "confirm": "yes"},
        ),
        (
            "/campaign release 800000000000000001",
            "campaign",
            {"action": "release", "server": "800000000000000001"},
        ),
        (
            "/campaign create The Salt Road",
            "campaign",
            {"action": "create", "name": "The Salt Road"},
        ),
        ("/campaign list", "campaign", {"action": "list"}),
        (
            "/campaign gm add <@&600000000000000001>",
            "campaign",
            {"action": "gm", "change": "add", "member": "<@&600000000000000001>"},
        ),
        ("/campaign settings budget 9,000", "campaign", {"action": "settings", "budget": 9000}),
        (
            "/campaign settings uploads Players",
            "campaign",
            {"action": "settings", "uploads": "players"},
        ),
        (
            "/campaign settings recap 0 18 * * 5",
            "campaign",
            {"action": "settings", "recap": "0 18 * * 5"},
        ),
        ("/budget model claude-Opus-4", "budget", {"action": "model", "model": "claude-Opus-4"}),
        ("/gm budget model default", "budget", {"action": "model", "model": "default"}),
        ("/gm pass", "pass", {}),
        ("/pass run Echo", "pass", {"action": "run", "name": "Echo"}),
        ("/gm pass RESUME", "pass", {"action": "resume"}),
        ("/log", "log", {}),
        ("/log 14", "log", {"days": 14}),
        ("/lens", "view", {}),
        ("/view", "view", {}),
        ("/help pin", "help", {"command": "pin"}),
        ("/lore ask who is the baron?", "ask", {"question": "who is the baron?"}),
        ("/lore who is the baron?", "ask", {"question": "who is the baron?"}),
        ("lore ask who is the baron?", "ask", {"question": "who is the baron?"}),
        ("lore of the baron?", "ask", {"question": "lore of the baron?"}),
        ("/gm upload players", "upload", {"visibility": "players"}),
        ("/lore gm upload players", "upload", {"visibility": "players"}),
        ("/lore upload players", "upload", {"visibility": "players"}),
        ("/lore", "help", {}),
        ("/lore search silver bell", "search", {"text": "silver bell"}),
        ("/show Session 1", "show", {"document": "Session 1"}),
        ("/show Baron Aldric page 2", "show", {"document": "Baron Aldric", "page": 2}),
    ],
)
def test_the_text_parser_and_the_typed_path_give_the_same_request(words, command, options):
    parsed = REGISTRY.request(text(words))
    given = REGISTRY.request(typed(command, options))
    assert (parsed.command, dict(parsed.options), parsed.error) == (
        given.command,
        dict(given.options),
        None,
    )


def test_typed_options_are_cleaned_and_unknown_ones_dropped():
    request = REGISTRY.request(
        typed("pin", {"action": "add", "document": "  Baron \ud800 ", "nosuch": "x", "tokens": 5})
    )
    assert dict(request.options) == {
        "action": "add",
        "document": "Baron \ufffd",
    }  # as text is cleaned
    wrong = REGISTRY.request(typed("budget", {"action": "set", "tokens": True, "scope": 3}))
    assert dict(wrong.options) == {"action": "set", "scope": "campaign"}


def test_words_that_mean_nothing_are_kept_for_the_command_to_refuse():
    request = REGISTRY.request(text("/upload type=gm"))
    assert isinstance(request.error, InvalidInput) and "Usage" in request.error.user_message
    with pytest.raises(InvalidInput):
        REGISTRY.request(text("/nosuch"))


@pytest.fixture
async def service(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    svc = BotService(engine)
    await svc.directory.link("discord", "C1", "greyhold")
    yield svc
    await close_engine(engine)


class Counting(BotService):
    """Counts the campaign-config loads and lens resolutions each request makes."""

    configs = 0
    lenses = 0

    async def config(self, slug):
        self.configs += 1
        return await super().config(slug)

    async def lens_of(self, msg, cfg):
        self.lenses += 1
        return await super().lens_of(msg, cfg)


async def test_one_config_load_and_one_lens_per_request(service, monkeypatch):
    counting = Counting(service.engine, directory=service.directory)
    engine_loads = 0
    load = service.engine.campaign

    async def counted(slug):  # the engine's own reads count too: the request's scope is passed down
        nonlocal engine_loads
        engine_loads += 1
        return await load(slug)

    monkeypatch.setattr(service.engine, "campaign", counted)
    for t in (
        "/ask who guards the keep?",
        "who is the baron?",
        "/budget set 9000 chat",
        "/pin add Baron Aldric",
        "/recap",
        "/lens",
        "/campaign status",
        "/explain who guards the keep?",
        "/pin list",
    ):
        counting.configs = counting.lenses = engine_loads = 0
        reply = await counting.handle(text(t, user_id="111", roles=("GM",)))
        assert not reply.error, (t, reply.text)
        assert (counting.configs, counting.lenses) == (1, 1), t
        assert engine_loads == 1, t
    counting.configs = counting.lenses = 0
    pending = await counting.begin(text("/ask who guards the keep?", roles=("GM",)))
    assert pending.private and pending.is_gm  # what the adapters ask before they answer …
    await pending.finish()
    assert (counting.configs, counting.lenses) == (1, 1)  # … costs no second resolution
    counting.configs = 0
    await counting.handle(text("/help"))
    assert counting.configs == 0  # the help reads no campaign


async def test_help_with_a_command_explains_it(service):
    reply = await service.handle(text("/help pin"))
    assert (
        reply.ephemeral
        and "Example: `/gm pin add Baron Aldric`" in reply.text  # as Discord calls it
        and "`document`" in reply.text
    )
    assert "`/gm campaign link" in (await service.handle(text("/help"))).text
