"""BotService helpers the adapters rely on, the render helpers, and `serve`'s startup report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.render import ZWSP, sanitize, split_text, truncate
from bot.serve import platform_plan, serve
from bot.service import BotService, IncomingMessage
from bot.settings import Settings
from conftest import close_engine, make_engine
from fakes.tiny_campaign import GM_TITLE, make_tiny_campaign

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
async def service(tmp_path):
    make_tiny_campaign(tmp_path / "campaigns")
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    svc = BotService(engine)
    await svc.directory.link("discord", "C1", "greyhold")
    yield svc
    await close_engine(engine)


def msg(text: str, *, roles=(), channel="C1", dm=False, known=True) -> IncomingMessage:
    return IncomingMessage(platform="discord", channel_id=channel, user_id="9", text=text, roles=tuple(roles),
                           is_dm=dm, roles_known=known)


async def test_will_be_ephemeral_predicts_handle(service):
    cases = [
        (msg("/ask who is the baron"), False),
        (msg("/ask who is the baron", roles=["GM"]), True),
        (msg("/ask who is the baron", roles=["Mirel"]), True),  # a personal lens: private too
        (msg("/ask who is the baron", roles=["Mirel"], dm=True), False),  # (a DM is private already)
        (msg("/help"), True),
        (msg("/recap"), False),
        (msg("/campaign status"), True),
        (msg("/campaign link greyhold", roles=["GM"]), False),
        (msg("/ask x", channel="unlinked"), True),  # an error reply: predicted private
    ]
    for m, expected in cases:
        assert await service.will_be_ephemeral(m) is expected, m.text
        assert (await service.handle(m)).ephemeral is expected, m.text


async def test_complete_titles_respects_lens_and_limit(service):
    players = await service.complete_titles(msg(""), "baron")
    gm = await service.complete_titles(msg("", roles=["GM"]), "baron")
    assert "Baron Aldric" in players and GM_TITLE not in players
    assert GM_TITLE in gm
    assert await service.complete_titles(msg("", roles=["GM"], known=False), "baron") == players
    assert await service.complete_titles(msg("", channel="nowhere"), "") == []


async def test_handle_never_raises_on_hostile_input(service):
    for text in ["", "/", "/nope", "/pin add", "/budget set lots", "/recap 99", "/campaign link ../../etc",
                 "/recap schedule 0 9 * * 1"]:
        reply = await service.handle(msg(text))
        assert reply.text and reply.error, text
    assert (await service.handle(msg("\x00" * 10))).text


def test_sanitize_and_split():
    d = sanitize("@everyone @here <@&1> <@2> <@!3>", platform="discord")
    assert "@everyone" not in d and "@here" not in d and "<@&1>" not in d and "<@2>" not in d and "<@!3>" not in d
    assert d.replace(ZWSP, "") == "@everyone @here <@&1> <@2> <@!3>"
    s = sanitize("<!channel> & <@U1> @here", platform="slack")
    assert "<" not in s and "&amp;" in s and "@here" not in s
    parts = split_text("para one.\n\n" + "x" * 50 + " " + "y" * 50, 60)
    assert all(0 < len(p) <= 60 for p in parts) and parts[0] == "para one."
    assert split_text("z" * 130, 50) == ["z" * 50, "z" * 50, "z" * 30]
    assert truncate("abcdef", 4) == "abc…" and truncate("abc", 4) == "abc"


async def test_serve_reports_off_platforms(capsys):
    lines: list[str] = []
    assert await serve(Settings(), out=lines.append) == 1
    assert lines[0] == "discord: off (DISCORD_TOKEN is not set)"
    assert lines[1].startswith("slack: off (SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set")
    plan = {p.name: p for p in platform_plan(Settings(discord_token="t", discord_guild_ids=(5,), discord_shards=True))}
    assert plan["discord"].enabled and "5" in plan["discord"].reason and "AutoSharded" in plan["discord"].reason
    assert "t" not in plan["discord"].reason.split()  # the token itself never prints


def test_python_m_bot_says_which_platforms_are_off(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "bot"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "discord: off (DISCORD_TOKEN is not set)" in r.stdout
    assert "slack: off" in r.stdout
