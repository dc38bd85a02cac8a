"""The Discord chat surface through the real discord.py client against the local fake
REST API: answers that show their question and carry buttons, every press checked against the
presser's own lens, Share with table, streamed answers, /lore search and /lore show, DMs."""

from __future__ import annotations

import json

import discord
import pytest
from conftest import close_engine, make_engine
from fakes.discord_api import (
    CHANNEL_ID,
    GM_ROLE_ID,
    GUILD_ID,
    MIREL_ROLE_ID,
    ROGUE_CHANNEL_ID,
    ROGUE_GUILD_ID,
    FakeDiscordApi,
    component_payload,
    guild_payload,
    interaction_payload,
    message_payload,
    modal_payload,
    rogue_guild_payload,
)
from fakes.tiny_campaign import CANARY, GM_TITLE, MIREL_CANARY, MIREL_USER, make_tiny_campaign

from bot.discord_adapter import DiscordAdapter
from bot.presses import EXPIRED, REFUSED
from bot.service import BotService
from liminalis.answer import Responder
from liminalis.testing import ScriptedModel

PLAYER = 222
GM = 333
OTHER_CHANNEL = 700000000000000003  # a channel of the table's server linked to nothing
HIDDEN = "vessa is the lantern queen's daughter"


class Ticks:
    """A monotonic clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


@pytest.fixture
async def env(tmp_path, monkeypatch):
    api = FakeDiscordApi()
    url = await api.start()
    monkeypatch.setattr(discord.http.Route, "BASE", f"{url}/api/v10")
    root = make_tiny_campaign(tmp_path / "campaigns")
    (root / "vessa.md").write_text(
        "---\ntitle: Vessa Coldwater\n---\n# Vessa Coldwater\n\nVessa keeps the Copper Kettle inn "
        f"by the river. <!-- GM: {HIDDEN} -->\n\n"
        + "\n\n".join(f"Vessa's ledger, page {i}: eels, ale and rope." for i in range(120))
        + "\n",
        encoding="utf-8",
    )
    engine = await make_engine(tmp_path, milvus=False)
    await engine.ingest("greyhold")
    service = BotService(engine)
    await service.directory.link("discord", str(CHANNEL_ID), "greyhold", guild_id=str(GUILD_ID))
    adapter = DiscordAdapter(service, guild_ids=(123,), sync_commands=False)
    await adapter.client.login("fake-token")
    adapter.client._connection._add_guild_from_data(guild_payload())
    yield api, adapter, service
    await adapter.client.close()
    await close_engine(engine)
    await api.close()


async def run(adapter: DiscordAdapter, payload: dict) -> None:
    interaction = discord.Interaction(data=payload, state=adapter.client._connection)
    if payload["type"] in (2, 4):
        await adapter.tree._call(interaction)
    else:
        await adapter.on_interaction(interaction)


def q(text: str) -> list[dict]:
    return [{"name": "question", "type": 3, "value": text}]


def sent(api: FakeDiscordApi, since: int = 0) -> list[dict]:
    """Bodies of the messages sent in answer to interactions, in order: followups, edits, and
    messages sent as the first response."""
    out = []
    for c in api.calls[since:]:
        if c.path.startswith("/webhooks/") and c.method in {"POST", "PATCH"}:
            out.append(c.json)
        elif c.path.endswith("/callback") and c.json.get("type") == 4:
            out.append(c.json["data"])
    return out


def text_of(body: dict) -> str:
    return json.dumps(body, ensure_ascii=False)


def buttons(body: dict) -> dict[str, str]:
    """Label → custom id of a message's buttons."""
    return {
        b["label"]: b["custom_id"]
        for row in body.get("components") or []
        for b in row.get("components", [])
    }


async def ask(api, adapter, question: str, **who) -> dict:
    n = len(api.calls)
    await run(adapter, interaction_payload("lore ask", q(question), **who))
    (body,) = [b for b in sent(api, n) if b.get("embeds")]
    return body


async def press(api, adapter, custom_id: str, **who) -> list[dict]:
    n = len(api.calls)
    await run(adapter, component_payload(custom_id, **who))
    return sent(api, n)


async def test_an_answer_shows_its_question_and_carries_its_buttons(env):
    api, adapter, _ = env
    body = await ask(api, adapter, "Who rules Greyhold keep?", user_id=PLAYER)
    embed = body["embeds"][0]
    assert embed["author"]["name"] == "❓ Who rules Greyhold keep?"
    assert embed["footer"]["text"] == "What every player can see"
    assert set(buttons(body)) == {"Sources", "Open document", "👍", "👎"}  # nothing to share
    assert all(len(cid) <= 100 and cid.startswith("lm:") for cid in buttons(body).values())
    gm = await ask(api, adapter, "Who rules Greyhold keep?", user_id=GM, roles=[GM_ROLE_ID], iid=2)
    assert gm["flags"] & 64 and "Share with table" in buttons(gm)
    assert "GM view" in gm["embeds"][-1]["footer"]["text"]


async def test_sources_expand_privately_and_only_for_a_presser_who_may_see_them(env):
    api, adapter, _ = env
    player = await ask(api, adapter, "Who rules Greyhold keep?", user_id=PLAYER)
    (shown,) = await press(api, adapter, buttons(player)["Sources"], user_id=PLAYER)
    assert shown["flags"] & 64 and "Baron Aldric" in text_of(shown)
    assert "river tower" in text_of(shown)  # the cited passage itself, quoted
    assert "Open 1" in buttons(shown)
    # The GM's private answer: a player pressing its buttons (a forged press: its message is
    # the GM's alone) sees nothing of it, whatever the button.
    gm = await ask(
        api, adapter, "What is the truth about the baron?", user_id=GM, roles=[GM_ROLE_ID], iid=2
    )
    assert CANARY in text_of(gm)
    for label, cid in buttons(gm).items():
        replies = await press(api, adapter, cid, user_id=PLAYER, iid=10 + len(label))
        assert replies and all(r["flags"] & 64 for r in replies), label
        seen = " ".join(text_of(r) for r in replies)
        assert REFUSED in seen and CANARY not in seen and GM_TITLE not in seen, label
    # a button of this channel pressed in another channel, or another campaign's, is refused
    await adapter.service.directory.link("discord", str(OTHER_CHANNEL), "saltmarsh")
    elsewhere = await press(
        api, adapter, buttons(player)["Sources"], user_id=PLAYER, channel_id=OTHER_CHANNEL, iid=30
    )
    assert REFUSED in text_of(elsewhere[-1]) and "river tower" not in text_of(elsewhere[-1])
    gone = await press(api, adapter, "lm:src:nosuchcard000", user_id=PLAYER, iid=31)
    assert EXPIRED in text_of(gone[-1])


async def test_open_document_pages_through_the_pressers_view(env):
    api, adapter, _ = env
    body = await ask(api, adapter, "Who keeps the Copper Kettle inn?", user_id=PLAYER)
    assert "Vessa Coldwater" in text_of(body)
    (page,) = await press(api, adapter, buttons(body)["Open document"], user_id=PLAYER)
    assert page["flags"] & 64 and page["embeds"][0]["title"] == "Vessa Coldwater"
    assert "Page 1 of" in page["embeds"][0]["footer"]["text"] and HIDDEN not in text_of(page)
    assert set(buttons(page)) == {"Next ▶"}
    n = len(api.calls)
    await run(adapter, component_payload(buttons(page)["Next ▶"], user_id=PLAYER, iid=5))
    (edit,) = [c for c in api.calls[n:] if c.method == "PATCH"]  # the page turns in place
    assert edit.path.endswith("/messages/@original")
    assert "Page 2 of" in text_of(edit.json) and "◀ Previous" in buttons(edit.json)


async def test_a_page_turn_replaces_a_public_answer_only_through_the_answers_own_view(env):
    """A ``docp`` press (turn a page of a document opened from an answer) names its answer's card;
    pressed — or forged — on the public answer by a GM or a member with a personal view, the
    page is read through that wider view, so it goes to the presser alone, never in place of
    the message the whole channel sees."""
    api, adapter, _ = env
    body = await ask(api, adapter, "Who keeps the Copper Kettle inn?", user_id=PLAYER)
    card = buttons(body)["Open document"].split(":")[2]
    forged = f"lm:docp:{card}:0:1"
    for n, who in enumerate(
        [{"user_id": GM, "roles": [GM_ROLE_ID]}, {"user_id": 444, "roles": [MIREL_ROLE_ID]}]
    ):
        start = len(api.calls)
        await run(adapter, component_payload(forged, iid=40 + n, **who))
        assert not [c for c in api.calls[start:] if c.method == "PATCH"]  # the answer stays
        replies = sent(api, start)
        assert replies and all(r["flags"] & 64 for r in replies)
        assert "Vessa Coldwater" in text_of(replies[0])
        assert (HIDDEN in text_of(replies[0])) == (who["user_id"] == GM)  # the GM's own view
    # the answer's own view turns its page in place
    start = len(api.calls)
    await run(adapter, component_payload(forged, user_id=PLAYER, iid=50))
    (edit,) = [c for c in api.calls[start:] if c.method == "PATCH"]
    assert "Vessa Coldwater" in text_of(edit.json) and HIDDEN not in text_of(edit.json)


async def test_votes_are_kept_with_the_question_answer_and_sources(env):
    api, adapter, service = env
    body = await ask(api, adapter, "Who rules Greyhold keep?", user_id=PLAYER)
    (thanks,) = await press(api, adapter, buttons(body)["👍"], user_id=PLAYER)
    assert thanks["flags"] & 64 and "Thanks" in text_of(thanks)
    n = len(api.calls)
    await run(adapter, component_payload(buttons(body)["👎"], user_id=444, iid=3))
    (modal,) = [c.json for c in api.calls[n:] if c.path.endswith("/callback")]
    assert modal["type"] == 9 and modal["data"]["custom_id"].startswith("lm:why:")
    inputs = json.dumps(modal["data"]["components"])
    assert '"custom_id": "value"' in inputs and '"required": false' in inputs
    n = len(api.calls)
    await run(
        adapter,
        modal_payload(modal["data"]["custom_id"], "it forgot the bells", user_id=444, iid=4),
    )
    assert "Thanks" in text_of(sent(api, n)[-1]) and sent(api, n)[-1]["flags"] & 64
    votes = {f.user_id: f for f in await service.cards.feedback("greyhold")}
    assert votes[str(PLAYER)].vote == 1 and votes["444"].vote == -1
    assert votes["444"].reason == "it forgot the bells"
    assert votes["444"].question == "Who rules Greyhold keep?"
    assert "baron" in votes["444"].answer.lower() and votes["444"].sources
    assert votes["444"].lens == frozenset({"players"})


async def test_share_with_table_posts_the_players_answer_never_the_private_one(env):
    api, adapter, _ = env
    question = "What is the truth about the baron?"
    gm = await ask(api, adapter, question, user_id=GM, roles=[GM_ROLE_ID])
    assert gm["flags"] & 64 and CANARY in text_of(gm)
    share = buttons(gm)["Share with table"]
    # only its asker shares it (another GM's press is refused)
    other = await press(api, adapter, share, user_id=111, iid=2)
    assert REFUSED in text_of(other[-1])
    posts = await press(api, adapter, share, user_id=GM, roles=[GM_ROLE_ID], iid=3)
    public = [p for p in posts if not p.get("flags", 0) & 64]
    assert len(public) == 1 and len(posts) == 1
    shared = text_of(public[0])
    assert CANARY not in shared and GM_TITLE not in shared  # the canary stays with the GM
    assert question in shared and "baron" in shared.lower()
    assert "What every player can see" in shared
    assert set(buttons(public[0])) == {"Sources", "Open document", "👍", "👎"}
    # a personal view's answer shares the same way: Mirel's secret stays Mirel's
    mirel = await ask(
        api, adapter, "Who took the baron's ninth bell?", user_id=PLAYER, roles=[MIREL_ROLE_ID]
    )
    assert MIREL_CANARY in text_of(mirel)
    posts = await press(
        api, adapter, buttons(mirel)["Share with table"], user_id=PLAYER, roles=[MIREL_ROLE_ID]
    )
    assert posts and MIREL_CANARY not in " ".join(text_of(p) for p in posts)


async def test_a_streamed_answer_is_edited_in_place_and_ends_whole_with_its_sources(env):
    api, adapter, service = env
    reply = "The baron rules Greyhold keep from the river tower [Baron Aldric]. " * 8
    service.engine.use_answerer(Responder(service.engine, model=ScriptedModel([reply])))
    clock = Ticks(0.3)  # every chunk of the model's stream is 0.3 s after the last
    streaming = DiscordAdapter(service, sync_commands=False, clock=clock)
    try:
        await streaming.client.login("fake-token")
        streaming.client._connection._add_guild_from_data(guild_payload())
        n = len(api.calls)
        await run(
            streaming, interaction_payload("lore ask", q("Who rules the keep?"), user_id=PLAYER)
        )
    finally:
        await streaming.client.close()
    edits = [c for c in api.calls[n:] if c.method == "PATCH"]
    posts = [c for c in api.calls[n:] if c.method == "POST" and c.path.startswith("/webhooks/")]
    assert not posts  # one message: the deferred one, edited
    partial, final = edits[:-1], edits[-1]
    assert len(partial) >= 2 and len(partial) < len(reply) // 40  # throttled, not one per chunk
    assert all(e.json["content"].endswith("▌") for e in partial)
    assert all(len(e.json["content"]) <= 2000 for e in partial)
    assert final.json["content"] is None and final.json["embeds"]
    embed = final.json["embeds"][0]
    assert embed["description"] == reply.strip() and embed["fields"][0]["name"] == "1. Baron Aldric"
    assert embed["author"]["name"] == "❓ Who rules the keep?" and buttons(final.json)


async def test_a_stream_cut_mid_answer_ends_with_its_text_marked_cut_and_the_quotes(env):
    """The model's connection drops after half a sentence was shown: the message ends with
    that text, marked as cut, then the quoted answer, its sources and buttons; never an error."""
    from fakes.anthropic_server import FakeAnthropic

    from bot.main import build_responder
    from bot.settings import Settings

    api, adapter, service = env
    reply = "The baron rules Greyhold keep from the river tower [Baron Aldric]."
    async with FakeAnthropic(reply=reply) as fake:
        fake.script, fake.partial = ["drop"], 30
        responder = build_responder(
            Settings(anthropic_api_key="sk-test-key", anthropic_base_url=fake.url),
            service.engine,
        )
        service.engine.use_answerer(responder)
        adapter.clock = Ticks(0.3)
        try:
            n = len(api.calls)
            await run(
                adapter, interaction_payload("lore ask", q("Who rules the keep?"), user_id=PLAYER)
            )
        finally:
            await responder.model.close()
    edits = [c for c in api.calls[n:] if c.method == "PATCH"]
    live = [e.json["content"] for e in edits if e.json.get("content")]
    assert live and all(reply.startswith(c.rstrip("▌ ")) for c in live)  # shown as it came
    final = edits[-1].json
    embed = final["embeds"][0]
    assert embed["description"].startswith(reply[:30].strip() + " …")
    assert "broke off there, so I quote the documents" in embed["description"]
    assert "river tower" in embed["description"].split("quote the documents")[1]
    assert embed["fields"] and buttons(final) and "went wrong" not in text_of(final)


async def test_a_streamed_mention_is_one_message_edited_until_whole(env):
    api, adapter, service = env
    reply = "The baron rules Greyhold keep from the river tower [Baron Aldric]. " * 8
    service.engine.use_answerer(Responder(service.engine, model=ScriptedModel([reply])))
    adapter.clock = Ticks(0.3)
    state = adapter.client._connection
    data = message_payload("<@900000000000000002> who rules the keep?", user_id=PLAYER)
    await adapter.on_message(
        discord.Message(state=state, channel=adapter.client.get_channel(CHANNEL_ID), data=data)
    )
    (posted,) = api.find("POST", f"/channels/{CHANNEL_ID}/messages")
    assert posted.json["content"].endswith("▌")
    assert posted.json["message_reference"]["fail_if_not_exists"] is False
    edits = api.find("PATCH", f"/channels/{CHANNEL_ID}/messages/")
    assert len(edits) >= 2 and len({e.path for e in edits}) == 1  # one message, edited
    final = edits[-1].json
    assert final["content"] is None and final["embeds"][0]["description"] == reply.strip()
    assert final["embeds"][0]["fields"] and buttons(final)
    assert final["allowed_mentions"]["parse"] == []


async def test_search_lists_documents_with_snippets_a_page_at_a_time(env, tmp_path):
    api, adapter, service = env
    root = tmp_path / "campaigns" / "greyhold"
    for i in range(12):
        (root / f"bell-{i:02}.md").write_text(
            f"# Bell {i}\n\nThe silver bell number {i} hangs in tower {i}.\n", encoding="utf-8"
        )
    await service.engine.ingest("greyhold")
    n = len(api.calls)
    opts = [{"name": "text", "type": 3, "value": "silver bell"}]
    await run(adapter, interaction_payload("lore search", opts, user_id=PLAYER))
    (first,) = sent(api, n)
    assert not first.get("flags", 0) & 64
    body = first["embeds"][0]
    assert body["title"] == "Search: silver bell" and "Page 1 of 2" in body["footer"]["text"]
    assert "**1. Bell" in body["description"] and "— The silver bell number" in body["description"]
    assert GM_TITLE not in text_of(first)
    n = len(api.calls)
    await run(adapter, component_payload(buttons(first)["Next ▶"], user_id=444, iid=7))
    (edit,) = [c.json for c in api.calls[n:] if c.method == "PATCH"]
    assert "Page 2 of 2" in text_of(edit) and "**9." in text_of(edit)
    # the GM pressing a player's pager reads through the GM view, so privately, not in place
    n = len(api.calls)
    await run(
        adapter,
        component_payload(buttons(first)["Next ▶"], user_id=GM, roles=[GM_ROLE_ID], iid=8),
    )
    assert not [c for c in api.calls[n:] if c.method == "PATCH"]
    assert all(b["flags"] & 64 for b in sent(api, n))


async def test_show_reads_a_document_through_the_askers_view(env):
    api, adapter, _ = env
    opts = [{"name": "document", "type": 3, "value": "Vessa Coldwater"}]
    n = len(api.calls)
    await run(adapter, interaction_payload("lore show", opts, user_id=PLAYER))
    (player,) = sent(api, n)
    assert "Vessa keeps the Copper Kettle" in text_of(player) and HIDDEN not in text_of(player)
    assert not player.get("flags", 0) & 64 and "Next ▶" in buttons(player)
    n = len(api.calls)
    await run(
        adapter, interaction_payload("lore show", opts, user_id=GM, roles=[GM_ROLE_ID], iid=2)
    )
    (gm,) = sent(api, n)
    assert gm["flags"] & 64 and HIDDEN in text_of(gm)  # the GM's view, privately
    n = len(api.calls)
    secret = [{"name": "document", "type": 3, "value": GM_TITLE}]
    await run(adapter, interaction_payload("lore show", secret, user_id=PLAYER, iid=3))
    refused = text_of(sent(api, n)[-1])
    assert CANARY not in refused and "could not find" in refused


async def test_a_dm_is_answered_for_the_members_one_campaign_through_their_view(env):
    api, adapter, service = env
    dm = 990000000000000001
    # not a member of any server where a campaign is linked: told where to ask
    n = len(api.calls)
    await run(
        adapter,
        interaction_payload(
            "lore ask", q("Who rules the keep?"), user_id=444, dm=True, channel_id=dm
        ),
    )
    assert "ask in your campaign's channel" in text_of(sent(api, n)[-1])
    # a member of the table's server: answered for Greyhold, as a player
    api.members[(GUILD_ID, PLAYER)] = []
    n = len(api.calls)
    await run(
        adapter,
        interaction_payload(
            "lore ask",
            q("What is the truth about the baron?"),
            user_id=PLAYER,
            dm=True,
            channel_id=dm,
            iid=2,
        ),
    )
    answer = text_of(sent(api, n)[-1])
    assert "Greyhold" in answer and "baron" in answer.lower() and CANARY not in answer
    # the GM, by role on that server, reads the GM view in their own DM
    api.members[(GUILD_ID, GM)] = [GM_ROLE_ID]
    n = len(api.calls)
    await run(
        adapter,
        interaction_payload(
            "lore ask",
            q("What is the truth about the baron?"),
            user_id=GM,
            dm=True,
            channel_id=dm + 1,
            iid=3,
        ),
    )
    assert CANARY in text_of(sent(api, n)[-1])


async def test_a_private_answer_in_a_conversation_between_people_goes_to_its_asker_alone(env):
    """Only a member's own DM with the bot is private. A user-installed app's commands also come
    from a DM between two people or a group DM (context ``PRIVATE_CHANNEL``): there a GM's or a
    personal view's answer is ephemeral, never posted for the conversation."""
    api, adapter, service = env
    api.members[(GUILD_ID, GM)] = [GM_ROLE_ID]
    people = 990000000000000005  # the GM's DM with a friend
    asked = {
        "lore ask": q("What is the truth about the baron?"),
        "lore show": [{"name": "document", "type": 3, "value": GM_TITLE}],
        "lore search": [{"name": "text", "type": 3, "value": "baron"}],
        "lore entity": [{"name": "name", "type": 3, "value": "Baron Aldric"}],
    }
    for i, (name, options) in enumerate(asked.items()):
        n = len(api.calls)
        await run(
            adapter,
            interaction_payload(
                name, options, user_id=GM, channel_id=people, private_channel=1, iid=10 + i
            ),
        )
        (deferred,) = [c.json for c in api.calls[n:] if c.path.endswith("/callback")]
        assert deferred.get("data", {}).get("flags", 0) & 64, name
        assert all(b["flags"] & 64 for b in sent(api, n)), name
        if name == "lore ask":
            assert CANARY in text_of(sent(api, n)[-1])
    # a group DM linked to the campaign: one player's backstory stays theirs there too
    group = 990000000000000006
    await service.directory.link("discord", str(group), "greyhold")
    bell = q("Who took the baron's ninth bell?")
    n = len(api.calls)
    await run(
        adapter,
        interaction_payload(
            "lore ask", bell, user_id=MIREL_USER, channel_id=group, private_channel=3, iid=20
        ),
    )
    (mirel,) = sent(api, n)
    assert mirel["flags"] & 64 and MIREL_CANARY in text_of(mirel)
    # the GM's own DM with the bot: nobody else reads it
    n = len(api.calls)
    await run(
        adapter,
        interaction_payload(
            "lore ask", asked["lore ask"], user_id=GM, dm=True, channel_id=people + 10, iid=21
        ),
    )
    own = sent(api, n)[-1]
    assert not own.get("flags", 0) & 64 and CANARY in text_of(own)


async def test_a_dm_from_a_member_of_two_campaigns_asks_which_and_remembers(env, tmp_path):
    api, adapter, service = env
    salt = make_tiny_campaign(tmp_path / "campaigns", slug="saltmarsh")
    toml = salt / "campaign.toml"
    toml.write_text(toml.read_text().replace('name = "Greyhold"', 'name = "Saltmarsh"'))
    await service.engine.ingest("saltmarsh")
    adapter.client._connection._add_guild_from_data(rogue_guild_payload())
    await service.directory.link(
        "discord", str(ROGUE_CHANNEL_ID), "saltmarsh", guild_id=str(ROGUE_GUILD_ID)
    )
    api.members[(GUILD_ID, PLAYER)] = []
    api.members[(ROGUE_GUILD_ID, PLAYER)] = []
    dm = {"user_id": PLAYER, "dm": True, "channel_id": 990000000000000001}
    n = len(api.calls)
    await run(adapter, interaction_payload("lore ask", q("Who rules the keep?"), **dm))
    (asked,) = sent(api, n)
    assert "Which one" in text_of(asked) and set(buttons(asked)) == {"Greyhold", "Saltmarsh"}
    # another member cannot pick for them
    stranger = await press(api, adapter, buttons(asked)["Saltmarsh"], **{**dm, "user_id": 444})
    assert REFUSED in text_of(stranger[-1])
    n = len(api.calls)
    await run(adapter, component_payload(buttons(asked)["Saltmarsh"], iid=2, **dm))
    (answer,) = [c.json for c in api.calls[n:] if c.method == "PATCH"]  # in place of the question
    assert answer["embeds"][0]["title"] == "Saltmarsh"
    assert answer["embeds"][0]["author"]["name"] == "❓ Who rules the keep?"
    n = len(api.calls)
    await run(adapter, interaction_payload("lore view", [], iid=3, **dm))
    (view,) = sent(api, n)
    assert "Saltmarsh" in text_of(view) and "Switch campaign" in buttons(view)
    assert await service.cards.dm_choice("discord", str(PLAYER)) == "saltmarsh"
