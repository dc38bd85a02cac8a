"""``/lore timeline [entity]``: sessions and dated events in campaign order, as a picture and as
text, through the asker's view. Through the fake Discord API: a player's timeline holds no
GM-only session or event (text, and every label the picture draws, read back from the PNG the
fake received), not even as a position; the GM's holds the GM-only session."""

from __future__ import annotations

import shutil
import struct

from conftest import SAMPLE, close_engine, make_engine
from fakes.discord_api import GM_ROLE_ID

# ``env``: the Discord adapter over the fake API and the tiny campaign, as its own tests use it.
from test_discord_adapter import GM, PLAYER, env, interaction_payload, invoke  # noqa: F401
from test_knowledge_wiring import console, wire

from bot.console import format_reply, save_files
from bot.service import BotService
from liminalis.knowledge.passes import KnowledgePasses
from liminalis.knowledge.sessions import SessionInfo
from liminalis.knowledge.timeline import build_timeline
from liminalis.passes import Passes
from liminalis.testing import FrozenClock

TL_CANARY = "velvet-gallows-canary"


def png_text(png: bytes) -> dict[str, str]:
    """The text chunks (``tEXt``, uncompressed ``iTXt``) of a PNG."""
    out: dict[str, str] = {}
    pos = 8
    while pos + 8 <= len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"tEXt":
            key, _, value = data.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = data.partition(b"\0")
            rest = rest[2:]  # compression flag and method: matplotlib writes it uncompressed
            _, _, rest = rest.partition(b"\0")  # language
            _, _, text = rest.partition(b"\0")  # translated key
            out[key.decode("latin-1")] = text.decode("utf-8")
        pos += 12 + length
    return out


def _sent_png(api) -> tuple[bytes, bytes]:
    """The last multipart message with a PNG the fake received: its raw body and the PNG."""
    [*_, sent] = [c for c in api.find("POST", "/webhooks/") if b"filename=" in c.raw]
    start = sent.raw.index(b"\x89PNG")
    end = sent.raw.index(b"IEND", start) + 8
    return sent.raw, sent.raw[start:end]


def _write_sessions(root) -> None:
    (root / "sessions" / "session-02.md").write_text(
        f"---\ntitle: Session 2\ntype: session\nvisibility: gm\n---\n# Session 2\n\n"
        f"**In-world date:** 3 Frostfall 812\n\nThe party never knew of the {TL_CANARY}.\n"
    )
    (root / "sessions" / "session-03.md").write_text(
        "---\ntitle: Session 3\ntype: session\n---\n# Session 3\n\n"
        "**In-world date:** 9 Frostfall 812\n\nIlsa Marsh rang the river bell for the baron.\n"
    )
    (root / "history.md").write_text(
        "# History\n\nThe keep was raised in 640 by Ilsa Marsh.\n\n"
        "The river bell was cast on 2 Thawmoon 700.\n\n"
        f"<!-- The {TL_CANARY} was hanged on 5 Thawmoon 701. -->\n"
    )
    (root / "ilsa.md").write_text(
        "---\ntype: character\n---\n# Ilsa Marsh\n\nIlsa Marsh keeps the river bell.\n"
    )
    (root / "gm" / "dates.md").write_text(f"# Dates\n\nOn 1 Thawmoon 702 the {TL_CANARY} woke.\n")


async def _built(service, root) -> None:
    _write_sessions(root)
    passes = Passes(service.engine.db, clock=FrozenClock())
    KnowledgePasses(passes).attach()
    await service.engine.ingest("greyhold")
    await passes.run_triggered("greyhold", "changed")


async def test_a_players_timeline_holds_no_gm_session_or_event_and_the_gms_does(
    env,  # noqa: F811
    tmp_path,
):
    api, adapter, service = env
    await _built(service, tmp_path / "campaigns" / "greyhold")

    await invoke(adapter, interaction_payload("timeline", [], user_id=PLAYER, iid=3))
    raw, png = _sent_png(api)
    labels = png_text(png)["Description"].split("\n")
    assert b'filename="greyhold-timeline.png"' in raw
    assert labels[:2] == ["Session 1", "Session 3 · 9 Frostfall 812"]
    assert any("raised in 640" in x for x in labels) and any("2 Thawmoon 700" in x for x in labels)
    assert TL_CANARY.encode() not in raw and "Session 2" not in "\n".join(labels)
    assert b"Sessions (2)" in raw and b"2. Session 3" in raw  # no gap, no count of the hidden one
    assert b"Dated events (2)" in raw

    await invoke(
        adapter, interaction_payload("timeline", [], user_id=GM, roles=[GM_ROLE_ID], iid=4)
    )
    raw, png = _sent_png(api)
    labels = png_text(png)["Description"].split("\n")
    assert labels[:3] == ["Session 1", "Session 2 · 3 Frostfall 812", "Session 3 · 9 Frostfall 812"]
    assert any(TL_CANARY in x and "702" in x for x in labels)  # the GM's own dated event
    assert b"Sessions (3)" in raw


async def test_a_timeline_about_one_name_keeps_what_concerns_it(env, tmp_path):  # noqa: F811
    api, adapter, service = env
    await _built(service, tmp_path / "campaigns" / "greyhold")
    opts = [{"name": "entity", "type": 3, "value": "Ilsa Marsh"}]
    await invoke(adapter, interaction_payload("timeline", opts, user_id=PLAYER, iid=5))
    raw, png = _sent_png(api)
    labels = png_text(png)["Description"].split("\n")
    assert labels[0] == "Session 3 · 9 Frostfall 812"  # the session that names her, alone
    assert any("raised in 640" in x for x in labels)
    assert not any("river bell was cast" in x for x in labels)  # says nothing of her
    assert TL_CANARY.encode() not in raw


def test_events_are_ordered_by_their_in_world_date_and_sessions_by_campaign_order():
    sessions = [
        SessionInfo("s/1", "Session 1", 1, "", 1),
        SessionInfo("s/2", "Session 2: Fire", 2, "4 March 1024", 2),
    ]
    texts = {
        "a": "The tower fell on 5 March 1024. The flood of 503 drowned the lower wards.",
        "b": "## 12 May 1020\n\nThe king died on 1 January 1024.\n\n**Date:** 2 May 1100",
    }
    tl = build_timeline(sessions, texts)
    assert [s.label() for s in tl.sessions] == [
        "Session 1",
        "Session 2 · 4 March 1024 · Session 2: Fire",
    ]
    assert [e.date for e in tl.events] == ["503", "1 January 1024", "5 March 1024"]
    assert [e.position for e in tl.events] == [1, 2, 3]


async def test_the_console_writes_the_timeline_picture_and_prints_it_as_text(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "campaigns" / "emberfall")
    engine = await make_engine(tmp_path, milvus=False)
    passes, _ = await wire(engine)
    try:
        await engine.ingest("emberfall")
        await passes.idle()
        service = BotService(engine, default_campaign="emberfall")
        players = await service.handle(console("/timeline"))
        gm = await service.handle(console("/timeline", lens="gm"))
    finally:
        await passes.close()
        await close_engine(engine)
    [png] = players.files
    saved = save_files(players, tmp_path / "files")
    assert saved[0].read_bytes() == png.data and f"File: {saved[0]}" in format_reply(players, saved)
    assert "7. Session 7" in players.text and "19 Highsun 524" in players.text
    labels = png_text(png.data)["Description"]
    assert "Guildmaster Hale" not in labels + players.text  # dated in GM material only
    assert "Guildmaster Hale" in gm.text
