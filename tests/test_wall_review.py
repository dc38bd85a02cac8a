"""The GM decides what the wall held back by habit: held (players cannot read it), listed in
``/gm review`` with its rule and two buttons, shown (players read it after the campaign is indexed
again), kept (GM-only, no longer asked), edited (held and asked again) — pressed through the
Discord adapter and its fake REST API, and through the Slack adapter and its protocol fake; the
subcommands through Slack and the service for the console."""

from __future__ import annotations

import json

import discord
import pytest
from conftest import close_engine, make_engine
from fakes.discord_api import (
    CHANNEL_ID,
    GM_ROLE_ID,
    GUILD_ID,
    FakeDiscordApi,
    component_payload,
    guild_payload,
    interaction_payload,
)
from fakes.slack_api import (
    SIGNING_SECRET,
    MockSlackApi,
    action_body,
    command_body,
    signed_headers,
)
from fakes.tiny_campaign import SLACK_GM, make_tiny_campaign
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.discord_adapter import DiscordAdapter
from bot.messages import Attachment
from bot.presses import REFUSED
from bot.service import BotService, IncomingMessage
from bot.slack_adapter import ChannelRateLimiter, SlackAdapter

CHANNEL = "C0TABLE"
PLAYER = "UPLAYER01"
DISCORD_PLAYER = 222
DISCORD_GM = 333
HABIT = "glimmerwick-canary"  # under a `## GM Notes` heading: held by habit
LINE = "quillfeather-canary"  # on a `GM:` line: held by habit
EXPLICIT = "ironbloom-canary"  # in an HTML comment: the documented syntax, never asked
PAGE = f"""# Ysolde

Ysolde keeps the ferry at the Saltmarsh crossing.

## GM Notes

Ysolde is a spy for the Duke; {HABIT}.

## Manner

She hums old river songs.

GM: she carries the Duke's seal, {LINE}.

<!-- {EXPLICIT} -->
"""
SHOW_HABIT = "Show to players"
KEEP = "Keep GM-only"


@pytest.fixture
async def env(tmp_path):
    api = MockSlackApi()
    await api.start()
    root = make_tiny_campaign(tmp_path / "campaigns")
    (root / "ysolde.md").write_text(PAGE, encoding="utf-8")
    engine = await make_engine(tmp_path, milvus=False)
    report = await engine.ingest("greyhold")
    service = BotService(engine)
    await service.directory.link("slack", CHANNEL, "greyhold")
    adapter = SlackAdapter(
        service,
        client=AsyncWebClient(token="xoxb-test", base_url=api.api_url),
        signing_secret=SIGNING_SECRET,
        limiter=ChannelRateLimiter(interval=0.0),
    )
    yield api, adapter, engine, root, report
    await close_engine(engine)
    await api.close()


async def lore(adapter, api, text: str, *, user: str, tag: str, group: str = "/lore") -> str:
    body = command_body(
        group, text, user_id=user, channel_id=CHANNEL, response_url=f"{api.url}/respond/{tag}"
    )
    req = AsyncBoltRequest(
        body=body, headers=signed_headers(body, content_type="application/x-www-form-urlencoded")
    )
    assert (await adapter.app.async_dispatch(req)).status == 200
    args = (await api.wait_for(f"/respond/{tag}"))[0].args
    return json.dumps(args, ensure_ascii=False)


async def players_read(engine, text: str) -> bool:
    doc = await engine.document_text("greyhold", "ysolde", frozenset({"players"}))
    return text in doc[1]


class SlackTable:
    """The review as a Slack GM and player drive it: `/lore review` and its buttons."""

    def __init__(self, api: MockSlackApi, adapter: SlackAdapter) -> None:
        self.api, self.adapter, self.n = api, adapter, 0

    async def _dispatch(self, body: str) -> None:
        req = AsyncBoltRequest(
            body=body,
            headers=signed_headers(body, content_type="application/x-www-form-urlencoded"),
        )
        assert (await self.adapter.app.async_dispatch(req)).status == 200

    async def review(self, *, gm: bool) -> tuple[str, dict[str, str]]:
        self.n += 1
        url = f"{self.api.url}/respond/l{self.n}"
        user = SLACK_GM if gm else PLAYER
        await self._dispatch(
            command_body("/lore", "review", user_id=user, channel_id=CHANNEL, response_url=url)
        )
        args = (await self.api.wait_for(f"/respond/l{self.n}"))[0].args
        return json.dumps(args, ensure_ascii=False), _slack_buttons(args)

    async def press(self, action: str, *, gm: bool) -> str:
        self.n += 1
        url = f"{self.api.url}/respond/b{self.n}"
        user = SLACK_GM if gm else PLAYER
        await self._dispatch(action_body(action, user_id=user, response_url=url, ephemeral=True))
        args = (await self.api.wait_for(f"/respond/b{self.n}"))[0].args
        return json.dumps(args, ensure_ascii=False)


def _slack_buttons(args: dict) -> dict[str, str]:
    blocks = args.get("blocks") or []
    blocks = blocks if isinstance(blocks, list) else json.loads(blocks)
    return {
        e["text"]["text"]: e["action_id"]
        for b in blocks
        if b["type"] == "actions"
        for e in b["elements"]
    }


class DiscordTable:
    """The review as a Discord GM (the GM role) and player drive it: `/gm review` and its
    buttons, through discord.py's interaction handling and the fake REST API."""

    def __init__(self, api: FakeDiscordApi, adapter: DiscordAdapter) -> None:
        self.api, self.adapter, self.iid = api, adapter, 500

    def _who(self, gm: bool) -> dict:
        self.iid += 1
        if gm:
            return {"user_id": DISCORD_GM, "roles": [GM_ROLE_ID], "iid": self.iid}
        return {"user_id": DISCORD_PLAYER, "iid": self.iid}

    async def _run(self, payload: dict) -> list[dict]:
        n = len(self.api.calls)
        interaction = discord.Interaction(data=payload, state=self.adapter.client._connection)
        if payload["type"] == 2:
            await self.adapter.tree._call(interaction)
        else:
            await self.adapter.on_interaction(interaction)
        out = []
        for c in self.api.calls[n:]:
            if c.path.startswith("/webhooks/") and c.method in {"POST", "PATCH"}:
                out.append(c.json)
            elif c.path.endswith("/callback") and c.json.get("type") == 4:
                out.append(c.json["data"])
        return out

    async def review(self, *, gm: bool) -> tuple[str, dict[str, str]]:
        bodies = await self._run(interaction_payload("gm review", [], **self._who(gm)))
        return json.dumps(bodies, ensure_ascii=False), _discord_buttons(bodies)

    async def press(self, action: str, *, gm: bool) -> str:
        bodies = await self._run(component_payload(action, ephemeral=True, **self._who(gm)))
        return json.dumps(bodies, ensure_ascii=False)


def _discord_buttons(bodies: list[dict]) -> dict[str, str]:
    return {
        b["label"]: b["custom_id"]
        for body in bodies
        for row in body.get("components") or []
        for b in row.get("components", [])
    }


@pytest.fixture(params=["discord", "slack"])
async def table(request, tmp_path, monkeypatch):
    root = make_tiny_campaign(tmp_path / "campaigns")
    (root / "ysolde.md").write_text(PAGE, encoding="utf-8")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    service = BotService(engine)
    if request.param == "slack":
        api = MockSlackApi()
        await api.start()
        await service.directory.link("slack", CHANNEL, "greyhold")
        adapter = SlackAdapter(
            service,
            client=AsyncWebClient(token="xoxb-test", base_url=api.api_url),
            signing_secret=SIGNING_SECRET,
            limiter=ChannelRateLimiter(interval=0.0),
        )
        yield SlackTable(api, adapter), engine, root
    else:
        api = FakeDiscordApi()
        url = await api.start()
        monkeypatch.setattr(discord.http.Route, "BASE", f"{url}/api/v10")
        await service.directory.link("discord", str(CHANNEL_ID), "greyhold", guild_id=str(GUILD_ID))
        adapter = DiscordAdapter(service, guild_ids=(123,), sync_commands=False)
        await adapter.client.login("fake-token")
        adapter.client._connection._add_guild_from_data(guild_payload())
        yield DiscordTable(api, adapter), engine, root
        await adapter.client.close()
    await close_engine(engine)
    await api.close()


def _buttons_of(buttons: dict[str, str], key: str) -> tuple[str, str]:
    return buttons[f"{SHOW_HABIT} ({key})"], buttons[f"{KEEP} ({key})"]


async def test_the_review_buttons_show_keep_and_ask_again_on_both_platforms(table):
    chat, engine, root = table
    for canary in (HABIT, LINE, EXPLICIT):
        assert not await players_read(engine, canary)
    by_rule = {i.rule: i for i in await engine.review.queue("greyhold")}
    heading, line = by_rule["heading “GM Notes”"], by_rule["line “GM:”"]

    # Listed for the GM, each with Show to players / Keep GM-only; never the explicit comment.
    listing, buttons = await chat.review(gm=True)
    assert HABIT in listing and LINE in listing and EXPLICIT not in listing
    show_heading, keep_heading = _buttons_of(buttons, heading.key)
    show_line, keep_line = _buttons_of(buttons, line.key)

    # A player's press of the GM's button is refused, whatever the button says.
    refused = await chat.press(show_heading, gm=False)
    assert REFUSED in refused and HABIT not in refused
    assert not await players_read(engine, HABIT)
    assert len(await engine.review.queue("greyhold")) == 2

    # Show: players read it; the listing is shown again, less what was decided.
    shown = await chat.press(show_heading, gm=True)
    assert "Shown to players" in shown and LINE in shown
    assert await players_read(engine, HABIT)
    assert not await players_read(engine, LINE) and not await players_read(engine, EXPLICIT)

    # The section is edited: held again, and asked again with fresh buttons.
    (root / "ysolde.md").write_text(PAGE.replace("spy for the Duke", "spy for the Queen"), "utf-8")
    await engine.ingest("greyhold")
    assert not await players_read(engine, HABIT)
    listing, buttons = await chat.review(gm=True)
    again = {i.rule: i for i in await engine.review.queue("greyhold")}
    assert set(again) == {"heading “GM Notes”", "line “GM:”"}
    _, keep_edited = _buttons_of(buttons, again["heading “GM Notes”"].key)
    # The old Show button names the section's old text: it shows nothing now.
    stale = await chat.press(show_heading, gm=True)
    assert "Shown to players" not in stale
    assert not await players_read(engine, HABIT)

    # Keep: stays GM-only, and is no longer asked.
    kept = await chat.press(keep_edited, gm=True)
    assert "Kept GM-only" in kept
    assert not await players_read(engine, HABIT)
    assert [i.rule for i in await engine.review.queue("greyhold")] == ["line “GM:”"]
    await chat.press(keep_line, gm=True)
    assert await engine.review.queue("greyhold") == []
    assert not await players_read(engine, HABIT) and not await players_read(engine, LINE)
    assert show_line  # listed with both buttons


async def test_the_review_queue_holds_lists_shows_keeps_and_asks_again(env):
    api, adapter, engine, root, report = env
    held = report.as_dict()["held_back"]
    assert {h["rule"] for h in held if h["review"]} == {"heading “GM Notes”", "line “GM:”"}
    assert any(not h["review"] for h in held)  # the comment: explicit, no review
    for canary in (HABIT, LINE, EXPLICIT):
        assert not await players_read(engine, canary)

    # A player may not see the queue; the GM sees both habits, never the explicit comment.
    refused = await lore(adapter, api, "review", user=PLAYER, tag="p", group="/lore")
    assert HABIT not in refused and LINE not in refused
    listing = await lore(adapter, api, "review", user=SLACK_GM, tag="g1", group="/lore")
    assert HABIT in listing and LINE in listing and EXPLICIT not in listing
    assert "ephemeral" in listing
    queue = await engine.review.queue("greyhold")
    by_rule = {i.rule: i for i in queue}

    # Show the GM Notes section: players read it once the campaign is indexed again.
    shown = await lore(
        adapter,
        api,
        f"review show {by_rule['heading “GM Notes”'].key}",
        user=SLACK_GM,
        tag="g2",
        group="/lore",
    )
    assert "Shown to players" in shown
    assert await players_read(engine, HABIT)
    assert not await players_read(engine, LINE) and not await players_read(engine, EXPLICIT)
    # Keep the GM: line: still GM-only, no longer asked.
    await lore(
        adapter,
        api,
        f"review keep {by_rule['line “GM:”'].key}",
        user=SLACK_GM,
        tag="g3",
        group="/lore",
    )
    assert await engine.review.queue("greyhold") == []
    assert not await players_read(engine, LINE)

    # An edit to the shown section holds it again and asks again.
    (root / "ysolde.md").write_text(PAGE.replace("spy for the Duke", "spy for the Queen"), "utf-8")
    await engine.ingest("greyhold")
    assert not await players_read(engine, HABIT)
    again = await engine.review.queue("greyhold")
    assert [i.rule for i in again] == ["heading “GM Notes”"]

    # A player cannot decide either.
    denied = await lore(
        adapter, api, f"review show {again[0].key}", user=PLAYER, tag="p2", group="/lore"
    )
    assert "Shown" not in denied
    assert not await players_read(engine, HABIT)


async def test_an_unknown_id_is_a_clear_error(env):
    _, _, engine, _, _ = env
    service = BotService(engine, default_campaign="greyhold")
    msg = IncomingMessage(
        platform="console",
        channel_id="console",
        user_id="u",
        text="/review show zzzz",
        roles=("gm",),
    )
    reply = await service.handle(msg)
    assert "No held section" in reply.text


async def test_the_cli_lists_and_decides(env):
    from bot.cli import review_command

    _, _, engine, _, _ = env
    lines: list[str] = []
    assert await review_command(engine, "greyhold", out=lines.append) == 0
    assert any(HABIT in x for x in lines) and not any(EXPLICIT in x for x in lines)
    key = (await engine.review.queue("greyhold"))[0].key
    assert await review_command(engine, "greyhold", keep=key, out=lines.append) == 0
    assert "kept GM-only" in lines[-1]
    assert len(await engine.review.queue("greyhold")) == 1


async def test_a_plain_ingest_names_what_awaits_review_and_stops_once_decided(env):
    from bot.cli import ingest_lines

    _, _, engine, _, report = env
    lines = await ingest_lines(engine, "greyhold", report)
    assert lines[-1] == "2 sections held back as GM notes: `liminalis review --campaign greyhold`"
    for item in await engine.review.queue("greyhold"):
        await engine.review_decide("greyhold", item.key, show=False, by="cli")
    again = await ingest_lines(engine, "greyhold", await engine.ingest("greyhold"))
    assert not any("held back as GM notes" in x for x in again)


async def test_an_upload_names_what_awaits_review(env):
    _, _, engine, _, _ = env
    service = BotService(engine)
    await service.directory.link("discord", "C1", "greyhold")

    async def upload(name: str, text: str) -> str:
        msg = IncomingMessage(
            platform="discord",
            channel_id="C1",
            user_id="111",
            roles=("GM",),
            text="/upload players",
            attachments=(Attachment(filename=name, data=text.encode()),),
        )
        return (await service.handle(msg)).text

    held = await upload(
        "ferry.md", "# Ferry\n\nThe ferry crosses at dawn.\n\n## GM Notes\n\nSunk.\n"
    )
    assert "1 section held back as GM notes: `/gm review`" in held
    plain = await upload("inn.md", "# Inn\n\nThe inn serves eel pie.\n")
    assert "held back as GM notes" not in plain
