"""The GM decides what the wall held back by habit: held (players cannot read it), listed in
``/gm review`` with its rule, shown (players read it after the campaign is indexed again),
kept (GM-only, no longer asked), edited (held and asked again) — through the Slack adapter and
its protocol fake, and through the service for the console."""

from __future__ import annotations

import json

import pytest
from conftest import close_engine, make_engine
from fakes.slack_api import SIGNING_SECRET, MockSlackApi, command_body, signed_headers
from fakes.tiny_campaign import SLACK_GM, make_tiny_campaign
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.service import BotService, IncomingMessage
from bot.slack_adapter import ChannelRateLimiter, SlackAdapter

CHANNEL = "C0TABLE"
PLAYER = "UPLAYER01"
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
