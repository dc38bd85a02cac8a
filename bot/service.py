"""``BotService.handle``: the one entry point every adapter calls.

Adapters turn a platform event into one neutral :class:`IncomingMessage` (command text, who,
where, attachments) and render the neutral :class:`Reply`. All command semantics, permission
checks and lens mapping live here, so Discord, Slack and the console behave identically.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Protocol

from bot.directory import Directory, lens_for
from liminalis.answer import Answer, Responder, Source
from liminalis.campaign import CampaignConfig, is_discord_id, validate_slug
from liminalis.engine import CAMPAIGN_SCOPE, Engine
from liminalis.errors import ConfigError, InvalidInput, LiminalisError, PermissionDenied, UnknownCampaign, UploadRejected
from liminalis.ingest.sections import source_of
from liminalis.ingest.loaders import SUPPORTED_SUFFIXES, LoadError, doc_id_for, parse_file, with_front_matter
from liminalis.lens import GM, NOT_GM, PLAYERS, Lens
from liminalis.text import clean_text, natural_key

__all__ = ["IncomingMessage", "Attachment", "Reply", "BotService", "COMMANDS", "HELP", "RecapScheduling"]

_log = logging.getLogger(__name__)

COMMANDS = ("ask", "pin", "budget", "upload", "recap", "explain", "campaign", "lens", "help", "memory")
HELP = """**Liminalis** answers questions from your campaign's own documents, with sources.
`/ask <question>` — ask about the campaign (or mention the bot)
`/pin add|remove|list <document>` — always include a document (GM changes)
`/budget show|set <tokens> [chat]` — the context budget of the campaign, or of this chat (GM sets)
`/upload` — GM: attach Markdown/text session notes to ingest
`/recap [sessions]` — "previously on…" from the latest session notes
`/recap schedule <cron>|off` — GM: post a recap here on a schedule (5-field cron, UTC)
`/explain <question>` — GM: how retrieval ranked the documents
`/memory [gm|players|<lens>]` — GM: the campaign memory's most active chunks and strongest associations
`/campaign link <slug>|unlink|status` — link this channel to a campaign (GM)
`/campaign release <server id>` — GM: unlink a Discord server, ending its GM role names
`/lens` — which view of the campaign you get
`/help` — this message"""

_MAX_FILES = 10
_DM_NOT_LINKED = "Direct messages are not linked to a campaign: ask in your campaign's channel."
# One answer to every refused link, whether the campaign exists or not: a stranger learns neither.
_LINK_REFUSED = (
    "Only a GM of that campaign can link a channel to it, and only if the name is right. On a server "
    "where no channel is linked to the campaign, a GM role *name* does not count: a GM listed by user id "
    "or role id in campaign.toml links first, or the host adds the server's id to `[roles.discord] guilds`."
)
_SAFE_NAME = re.compile(r"[^\w.-]+")  # \w is Unicode: "Сессия 1.md" keeps its letters


UPLOAD_TYPES = ("session", "lore", "character", "place", "faction", "item", "note")
_UPLOAD_USAGE = ("Usage: `/upload [players|gm|<player lens>] [session|lore|character|place|faction|item|note]` "
                 "with the files attached.")


def parse_upload_options(arg: str, cfg: CampaignConfig) -> tuple[frozenset[str] | None, str | None]:
    """``/upload``'s words (``players session``, ``visibility=mirel type=lore``): the visibility
    and type given, ``None`` where not given; anything else is refused with the usage line."""
    visibility: frozenset[str] | None = None
    doc_type: str | None = None
    for word in arg.lower().replace(",", " ").split():
        key, _, value = word.rpartition("=") if "=" in word else word.rpartition(":")
        if key not in {"", "visibility", "type"}:
            raise InvalidInput("bad upload option", user_message=_UPLOAD_USAGE)
        if key != "type" and value in {PLAYERS, "player", "public", "all", "table"}:
            visibility = frozenset({PLAYERS, GM})
        elif key != "type" and value in {GM, "gm-only", "private", "secret"}:
            visibility = frozenset({GM})
        elif key != "type" and value in cfg.lenses:
            visibility = frozenset({value, GM})
        elif key != "visibility" and value in UPLOAD_TYPES:
            doc_type = value
        else:
            raise InvalidInput("bad upload option", user_message=_UPLOAD_USAGE)
    return visibility, doc_type


def describe_visibility(visibility: frozenset[str]) -> str:
    """A visibility in words a GM reads in an upload's reply."""
    names = sorted(set(visibility) - {GM, NOT_GM})
    if not names:
        return "GM-only"
    if PLAYERS in names:
        return "players"
    return " and ".join(names) + " only (and the GM)"


def upload_name(filename: str) -> str:
    """The name an upload is saved under: the last path part, the stem cleaned to letters,
    digits, ``._-`` and cut to 100 characters, the suffix kept (cutting the whole name could cut
    ``.md`` off, and a stem of only dots or marks becomes ``upload``)."""
    base = PurePosixPath(clean_text(filename).replace("\\", "/")).name  # NFC: macOS sends "café" decomposed
    suffix = PurePosixPath(base).suffix
    stem = base[: len(base) - len(suffix)] if suffix else base
    stem = _SAFE_NAME.sub("-", stem).strip(".-")[:100] or "upload"
    return stem + (_SAFE_NAME.sub("", suffix)[:12] if suffix else ("" if base.strip(". ") else ".md"))


@dataclass(frozen=True, slots=True)
class Attachment:
    filename: str
    data: bytes
    size: int | None = None  # the platform's declared size when the data was not downloaded (too big)
    #: Why the adapter could not hand the file over (a failed download), in words for the GM; the
    #: upload reports it beside the other files, which are still ingested.
    error: str = ""


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A platform-neutral request."""

    platform: str  # "discord" | "slack" | "console"
    channel_id: str
    user_id: str
    text: str  # "/ask who is …" or a bare question for mentions
    parent_id: str | None = None  # the thread's parent channel
    roles: tuple[str, ...] = ()  # role names (Discord), lens names (console); never ids
    role_ids: tuple[str, ...] = ()  # role ids (Discord); never names
    guild_id: str | None = None  # the Discord server the message came from
    usergroups: tuple[str, ...] = ()
    roles_known: bool = True
    is_dm: bool = False  # a direct message, by the platform's channel type
    attachments: tuple[Attachment, ...] = ()
    campaign_override: str | None = None  # console: --campaign

    @property
    def chat_key(self) -> str:
        return f"{self.platform}:{self.channel_id}"


@dataclass(frozen=True, slots=True)
class Reply:
    """A platform-neutral response; adapters split and format it for their limits."""

    text: str
    sources: tuple[Source, ...] = ()
    ephemeral: bool = False
    title: str = ""
    lens: str = ""
    error: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)


class RecapScheduling(Protocol):
    """What ``/recap schedule`` needs from the scheduler (``bot.scheduler.RecapScheduler``)."""

    async def set_schedule(self, campaign: str, *, cron: str, platform: str, channel_id: str,
                           parent_id: str | None = None) -> str: ...

    async def remove_schedule(self, campaign: str) -> bool: ...

    async def describe(self, campaign: str) -> str: ...


# Commands whose reply is always private; ``ask`` depends on the lens, the rest are public.
_PRIVATE = {"help", "lens", "pin", "budget", "explain", "upload", "memory"}


def parse_command(text: str) -> tuple[str, str]:
    """``"/pin add Foo"`` → ``("pin", "add Foo")``; a bare text is an ``ask``."""
    t = (text or "").strip()
    if not t:
        raise InvalidInput("empty message", user_message="Ask a question, or try `/help`.")
    if not t.startswith("/"):
        return "ask", t
    parts = t[1:].split(None, 1)  # any whitespace ends the name: "/ask\nwho is…" is an ask
    head, rest = (parts[0], parts[1]) if len(parts) == 2 else ((parts or [""])[0], "")
    name = head.lower()
    if name not in COMMANDS:
        raise InvalidInput(f"unknown command {head!r}", user_message=f"Unknown command `/{head[:40]}`. Try `/help`.")
    return name, rest.strip()


class BotService:
    """Commands over the engine, for any platform."""

    def __init__(
        self,
        engine: Engine,
        *,
        responder: Responder | None = None,
        directory: Directory | None = None,
        max_upload_bytes: int = 5 * 1024 * 1024,
        default_campaign: str | None = None,
        scheduler: RecapScheduling | None = None,
    ) -> None:
        self.engine = engine
        self.scheduler = scheduler
        self.responder = responder or Responder(engine)
        self.directory = directory or Directory(engine.db)
        self.max_upload_bytes = max_upload_bytes
        self.default_campaign = default_campaign

    # -- context -----------------------------------------------------------------------------

    async def campaign_of(self, msg: IncomingMessage) -> CampaignConfig:
        slug = msg.campaign_override or await self.directory.campaign_for(msg.platform, msg.channel_id, msg.parent_id)
        if slug is None and msg.platform == "console":
            slug = self.default_campaign
        if slug is None:
            if msg.is_dm:  # a DM is never linked (a GM's roles don't reach it): say where to ask
                raise UnknownCampaign("dm not linked", user_message=_DM_NOT_LINKED)
            raise UnknownCampaign("channel not linked")
        return await self.config(slug)

    async def config(self, slug: str) -> CampaignConfig:
        return await self.engine.campaign(slug)

    async def lens_of(self, msg: IncomingMessage, cfg: CampaignConfig) -> Lens:
        try:
            at_home = await self.at_home(msg, cfg)
            return lens_for(cfg, platform=msg.platform, user_id=msg.user_id, roles=msg.roles,
                            role_ids=msg.role_ids, usergroups=msg.usergroups, is_dm=msg.is_dm,
                            roles_known=msg.roles_known, at_home=at_home)
        except Exception:  # a failed role lookup is default-deny: players
            _log.exception("lens lookup failed; using players lens")
            return Lens({"players"})

    async def at_home(self, msg: IncomingMessage, cfg: CampaignConfig) -> bool:
        """Whether ``msg`` comes from one of the campaign's home Discord servers, where role
        names count (bot.directory): one listed in ``[roles.discord] guilds``, else one with a
        channel linked to the campaign now. A campaign linked on no server is at home nowhere,
        so its first Discord link takes a GM known by user or role *id*. A channel linked before
        servers were recorded has its server recorded from its first message."""
        if msg.platform != "discord" or msg.guild_id is None:
            return True
        await self.directory.learn_guild("discord", msg.guild_id, msg.channel_id, msg.parent_id)
        if cfg.roles.discord_guilds:
            return msg.guild_id in cfg.roles.discord_guilds
        return msg.guild_id in await self.directory.homes("discord", cfg.slug)

    # -- entry point -------------------------------------------------------------------------

    async def handle(self, msg: IncomingMessage) -> Reply:
        """Run one command. Never raises: errors become user-safe replies."""
        try:
            # Platform JSON can carry lone surrogates and control characters: clean once, here.
            msg = replace(msg, text=clean_text(msg.text or ""))
            name, arg = parse_command(msg.text)
            return await getattr(self, f"cmd_{name}")(msg, arg)
        except LiminalisError as exc:
            # A host's misconfiguration is an error to act on; a user's mistake is not.
            _log.log(logging.ERROR if isinstance(exc, ConfigError) else logging.INFO, "%s on %s: %s",
                     type(exc).__name__, msg.platform, exc)
            return Reply(text=exc.user_message, ephemeral=True, error=True)
        except Exception:
            _log.exception("unhandled error handling %s command", msg.platform)
            return Reply(text="Sorry, something went wrong on my side. The error has been logged.", ephemeral=True, error=True)

    async def will_be_ephemeral(self, msg: IncomingMessage) -> bool:
        """Predict whether ``handle(msg)`` answers privately, cheaply and without side effects
        (save the one ``handle`` would make first: a channel linked before servers were recorded
        has its server recorded, :meth:`at_home`).

        Discord must choose at ``defer`` time whether the "thinking…" message is ephemeral, before
        the answer exists. Anything uncertain (a parse error, an unlinked channel) predicts private.
        """
        try:
            name, arg = parse_command(msg.text)
            if name in _PRIVATE:
                return True
            if name == "campaign":
                return (arg.split() or ["status"])[0].lower() in {"status", "release"}
            if name == "recap":
                return arg.strip().lower().startswith("schedule")
            cfg = await self.campaign_of(msg)
            lens = await self.lens_of(msg, cfg)
            return lens.is_private and not msg.is_dm and msg.platform != "console"
        except Exception:
            return True

    async def is_gm(self, msg: IncomingMessage) -> bool:
        """Whether ``msg``'s author holds the GM lens where they are; ``False`` on any failure.

        Adapters ask this before downloading attachments, so a player's file is never fetched.
        """
        try:
            return (await self.lens_of(msg, await self.campaign_of(msg))).is_gm
        except Exception:
            return False

    async def complete_titles(self, msg: IncomingMessage, prefix: str, *, limit: int = 25) -> list[str]:
        """Document titles for autocomplete, filtered by the caller's lens (never GM-only for players).

        Never raises: an unlinked channel or any failure offers no choices.
        """
        try:
            cfg = await self.campaign_of(msg)
            lens = frozenset(await self.lens_of(msg, cfg))
            titles = await self.engine.titles(cfg.slug, lens, prefix.strip()[:100], limit=min(limit, 25))
        except Exception:
            _log.debug("autocomplete failed", exc_info=True)
            return []
        out: list[str] = []
        for _, title in titles:
            if title not in out:
                out.append(title[:100])
        return out[: min(limit, 25)]

    def _require_gm(self, lens: Lens) -> None:
        if not lens.is_gm:
            raise PermissionDenied("players lens tried a GM command")

    # -- commands ----------------------------------------------------------------------------

    async def cmd_help(self, msg: IncomingMessage, arg: str) -> Reply:
        return Reply(text=HELP, ephemeral=True, title="Help")

    async def cmd_ask(self, msg: IncomingMessage, arg: str) -> Reply:
        cfg = await self.campaign_of(msg)
        lens = await self.lens_of(msg, cfg)
        if not arg.strip():
            raise InvalidInput("empty question", user_message="Ask a question, e.g. `/ask who is the Lantern Queen?`")
        budget = await self.budget(cfg.slug, msg.chat_key, self.responder.budget_tokens)
        answer: Answer = await self.responder.respond(cfg.slug, arg, frozenset(lens), chat=msg.chat_key, budget_tokens=budget)
        shared = not msg.is_dm and msg.platform != "console"
        # A GM's or a personal lens's answer may quote what others in the channel must not see
        # (a GM secret, one player's backstory): in a shared channel only its asker reads it.
        return Reply(
            text=answer.text, sources=answer.sources, ephemeral=lens.is_private and shared, lens=lens.describe(),
            title=cfg.name, notes=answer.notes,
        )

    async def cmd_lens(self, msg: IncomingMessage, arg: str) -> Reply:
        cfg = await self.campaign_of(msg)
        lens = await self.lens_of(msg, cfg)
        view = "the GM view (everything, including GM-only notes)" if lens.is_gm else f"the {lens.describe()} view"
        return Reply(text=f"In **{cfg.name}** you see {view}.", ephemeral=True, lens=lens.describe())

    async def cmd_campaign(self, msg: IncomingMessage, arg: str) -> Reply:
        parts = arg.split()
        sub = parts[0].lower() if parts else "status"
        if sub == "status":
            slug = msg.campaign_override or await self.directory.campaign_for(msg.platform, msg.channel_id, msg.parent_id)
            if slug is None and msg.platform == "console":
                slug = self.default_campaign
            if slug is None:
                return Reply(text=_DM_NOT_LINKED if msg.is_dm else
                             "This channel is not linked to a campaign. A GM can run `/campaign link <slug>`.", ephemeral=True)
            cfg = await self.config(slug)
            lens = await self.lens_of(msg, cfg)
            titles = await self.engine.titles(cfg.slug, frozenset(lens), limit=25)
            files = len({source_of(d) for d, _ in titles})  # a personal view is part of its file
            text = f"This channel plays **{cfg.name}** (`{cfg.slug}`); {files}{'+' if len(titles) == 25 else ''} documents visible to you."
            if lens.is_gm:
                text += "\n" + await self._homes_report(cfg)
            return Reply(text=text, ephemeral=True)
        if sub == "link":
            if len(parts) != 2:
                raise InvalidInput("bad link", user_message="Usage: `/campaign link <slug>`")
            slug = validate_slug(parts[1])
            try:
                cfg = await self.config(slug)
            except LiminalisError as exc:  # no such campaign, or a broken campaign.toml: said alike
                _log.info("link to %s refused: %s", slug, exc)
                raise PermissionDenied("link to a campaign that cannot be read", user_message=_LINK_REFUSED) from exc
            if not (await self.lens_of(msg, cfg)).is_gm:
                raise PermissionDenied("link by a non-GM", user_message=_LINK_REFUSED)
            await self.directory.link(msg.platform, msg.channel_id, cfg.slug,
                                      guild_id=msg.guild_id if msg.platform == "discord" else None)
            return Reply(text=f"Linked this channel to **{cfg.name}**.")
        if sub == "unlink":
            cfg = await self.campaign_of(msg)
            self._require_gm(await self.lens_of(msg, cfg))
            if not await self.directory.unlink(msg.platform, msg.channel_id):
                return Reply(text="This thread follows its channel's link: unlink the channel itself.", ephemeral=True)
            text = "Unlinked this channel."
            if (msg.platform == "discord" and msg.guild_id is not None and msg.guild_id not in cfg.roles.discord_guilds
                    and msg.guild_id not in await self.directory.homes("discord", cfg.slug)):
                text += f" No channel of this server is linked to **{cfg.name}** now: its role names no longer count."
            return Reply(text=text)
        if sub == "release":
            cfg = await self.campaign_of(msg)
            self._require_gm(await self.lens_of(msg, cfg))
            if len(parts) != 2 or not is_discord_id(parts[1]):
                raise InvalidInput("bad release", user_message="Usage: `/campaign release <server id>` (see `/campaign status`)")
            guild = parts[1]
            n = await self.directory.release("discord", cfg.slug, guild)
            if guild in cfg.roles.discord_guilds:
                return Reply(text=f"Unlinked {n} channel(s) of server `{guild}` from **{cfg.name}**. It stays a home "
                             "while campaign.toml lists it in `[roles.discord] guilds`: its host can remove it there.",
                             ephemeral=True)
            if not n:
                return Reply(text=f"Server `{guild}` is not a home of **{cfg.name}**: none of its channels is linked.",
                             ephemeral=True)
            return Reply(text=f"Released server `{guild}`: unlinked {n} channel(s) from **{cfg.name}**; its role names "
                         "no longer count.", ephemeral=True)
        raise InvalidInput("bad campaign sub", user_message="Usage: `/campaign link <slug>|unlink|status|release <server id>`")

    async def _homes_report(self, cfg: CampaignConfig) -> str:
        """The campaign's Discord homes, for its GMs: where role names count, and why."""
        linked = await self.directory.linked_guilds("discord", cfg.slug)
        listed = cfg.roles.discord_guilds
        lines: list[str] = []
        for guild in listed:
            n = linked.get(guild, 0)
            lines.append(f"• `{guild}`: listed in campaign.toml `guilds`" + (f", {n} channel(s) linked" if n else ""))
        for guild, n in sorted(linked.items()):
            if guild not in listed:
                lines.append(f"• `{guild}`: {n} channel(s) linked" + (
                    " (not a home: campaign.toml `guilds` lists the homes)" if listed else ""))
        unplaced = await self.directory.unplaced("discord", cfg.slug)
        if unplaced:
            lines.append(f"• {unplaced} channel(s) linked before servers were recorded: each adds its server "
                         "on its next message")
        if not lines:
            return "Discord homes: none (role names count on no server)."
        return ("Discord homes (GM role names count there):\n" + "\n".join(lines)
                + "\nA GM can release a server with `/campaign release <server id>`.")

    async def cmd_pin(self, msg: IncomingMessage, arg: str) -> Reply:
        cfg = await self.campaign_of(msg)
        lens = frozenset(await self.lens_of(msg, cfg))
        sub, _, key = arg.partition(" ")
        sub = sub.lower() or "list"
        key = key.strip()
        if sub == "list":
            pins = await self.engine.list_pins(cfg.slug, lens, chat=msg.chat_key)
            body = "\n".join(f"• {title}" for _, title in pins) or "No pins."
            return Reply(text=f"Pinned documents:\n{body}", ephemeral=True)
        if sub not in {"add", "remove"} or not key:
            raise InvalidInput("bad pin", user_message="Usage: `/pin add|remove|list <document>`")
        self._require_gm(Lens(lens))
        if sub == "add":
            doc_id = await self.engine.add_pin(cfg.slug, key, lens, scope=CAMPAIGN_SCOPE)
            verb = "Pinned"
        else:
            doc_id = await self.engine.remove_pin(cfg.slug, key, lens, scope=CAMPAIGN_SCOPE)
            verb = "Unpinned"
        title, _ = await self.engine.document_text(cfg.slug, doc_id, lens)
        return Reply(text=f"{verb} **{title}**.", ephemeral=True)

    async def cmd_budget(self, msg: IncomingMessage, arg: str) -> Reply:
        cfg = await self.campaign_of(msg)
        lens = await self.lens_of(msg, cfg)
        parts = arg.lower().split()
        sub = parts[0] if parts else "show"
        scope = msg.chat_key if "chat" in parts else CAMPAIGN_SCOPE
        if sub == "show":
            tokens = await self.budget(cfg.slug, msg.chat_key, self.responder.budget_tokens)
            return Reply(text=f"Context budget: {tokens:,} tokens.", ephemeral=True)
        if sub == "set":
            self._require_gm(lens)
            # ASCII digits only: "²".isdigit() is true, and int() refuses it.
            nums = [p for p in parts[1:] if re.fullmatch(r"[0-9][0-9,_]{0,11}", p)]
            if len(nums) != 1 or any(p not in {"chat", "campaign"} for p in parts[1:] if p not in nums):
                raise InvalidInput("bad budget", user_message="Usage: `/budget set <tokens> [chat]`")
            tokens = int(nums[0].replace(",", "").replace("_", ""))
            if not 500 <= tokens <= 200_000:
                raise InvalidInput("budget out of range", user_message="Budgets must be between 500 and 200,000 tokens.")
            await self.engine.db.execute("INSERT OR REPLACE INTO budgets VALUES (?, ?, ?)", (cfg.slug, scope, tokens))
            return Reply(text=f"Context budget for this {'chat' if scope != CAMPAIGN_SCOPE else 'campaign'} set to {tokens:,} tokens.", ephemeral=True)
        raise InvalidInput("bad budget", user_message="Usage: `/budget show|set <tokens> [chat]`")

    async def budget(self, slug: str, chat_key: str | None, default: int = 6000) -> int:
        for scope in (chat_key, CAMPAIGN_SCOPE):
            if scope is None:
                continue
            row = await self.engine.db.fetchone("SELECT tokens FROM budgets WHERE campaign = ? AND scope = ?", (slug, scope))
            if row:
                return int(row["tokens"])
        return default

    async def cmd_explain(self, msg: IncomingMessage, arg: str) -> Reply:
        cfg = await self.campaign_of(msg)
        lens = await self.lens_of(msg, cfg)
        self._require_gm(lens)
        if not arg.strip():
            raise InvalidInput("empty", user_message="Usage: `/explain <question>`")
        ex = await self.engine.explain(cfg.slug, arg, lens=frozenset(lens))
        cat = await self.engine.retriever.catalog(cfg.slug)
        titles = {d: doc.title for d, doc in cat.documents.items()}
        return Reply(text=ex.render(titles), ephemeral=True, title="Explain")

    async def cmd_memory(self, msg: IncomingMessage, arg: str) -> Reply:
        cfg = await self.campaign_of(msg)
        lens = await self.lens_of(msg, cfg)
        self._require_gm(lens)
        memory = self.engine.memory
        if memory is None:
            return Reply(text="The campaign memory is not configured.", ephemeral=True, title="Memory")
        names = {x.strip().lower() for x in arg.replace(",", " ").split() if x.strip()} or {PLAYERS}
        of = frozenset({GM}) if GM in names else frozenset(names | {PLAYERS})
        cat = await self.engine.retriever.catalog(cfg.slug)
        chunks, edges = await memory.top(cat, of)
        stats = await memory.store.stats(cfg.slug)
        state = "on" if self.engine.memory_enabled else "off (LIMINALIS_MEMORY_ENABLED)"
        lines = [f"Memory ({state}) of lens {','.join(sorted(of))}: "
                 + ", ".join(f"{n} {k}" for k, n in sorted(stats["chunks"].items()))
                 + f"; {stats['links']} links, {stats['learned_edges']} learned associations", "Most active:"]
        lines += [f"- {label} ({cid.split(':', 1)[0]}) B={b:.2f}" for cid, label, b in chunks] or ["- (nothing yet)"]
        lines.append("Strongest associations:")
        lines += [f"- {memory.label(cfg.slug, s)} → {memory.label(cfg.slug, d)} w={w:.2f}"
                  for s, d, w in edges] or ["- (none yet)"]
        return Reply(text="\n".join(lines), ephemeral=True, title="Memory")

    async def cmd_recap(self, msg: IncomingMessage, arg: str) -> Reply:
        cfg = await self.campaign_of(msg)
        if arg.strip().lower().startswith("schedule"):
            return await self._recap_schedule(msg, cfg, arg.strip()[len("schedule"):].strip())
        n = 1
        if arg.strip():
            # ASCII digits, few of them: "²".isdigit() is true and int() refuses it; int() of
            # thousands of digits raises too.
            if not re.fullmatch(r"[0-9]{1,3}", arg.strip()) or not 1 <= int(arg.strip()) <= 10:
                raise InvalidInput("bad recap", user_message="Usage: `/recap [sessions 1-10]`")
            n = int(arg.strip())
        text, sources = await self.recap(cfg.slug, n)
        return Reply(text=text, sources=sources, title=f"Previously on {cfg.name}")

    async def _recap_schedule(self, msg: IncomingMessage, cfg: CampaignConfig, spec: str) -> Reply:
        if self.scheduler is None:
            raise InvalidInput("no scheduler", user_message="Scheduled recaps are not running on this bot.")
        if not spec:
            return Reply(text=await self.scheduler.describe(cfg.slug), ephemeral=True)
        self._require_gm(await self.lens_of(msg, cfg))
        if msg.platform == "console":
            raise InvalidInput("console schedule", user_message="Schedule recaps from a Discord or Slack channel.")
        if spec.lower() in {"off", "none", "stop"}:
            removed = await self.scheduler.remove_schedule(cfg.slug)
            return Reply(text="Recap schedule removed." if removed else "No recap schedule was set.", ephemeral=True)
        when = await self.scheduler.set_schedule(cfg.slug, cron=spec, platform=msg.platform, channel_id=msg.channel_id,
                                                 parent_id=msg.parent_id)
        return Reply(text=f"Recaps of **{cfg.name}** will be posted in this channel {when}.", ephemeral=True)

    async def recap(self, slug: str, sessions: int = 1) -> tuple[str, tuple[Source, ...]]:
        """An extractive "previously on" over the latest session notes — players lens only."""
        from liminalis.lens import players_lens

        lens = players_lens()
        cat = await self.engine.retriever.catalog(slug)
        notes = [d for d in cat.documents.values() if d.type == "session" and cat.visible_doc(d.doc_id, lens)]
        # By file name, numbers by value (session-10 after session-9; an upload of session-8 after
        # sessions/session-07), then by path.
        notes.sort(key=lambda d: (natural_key(d.doc_id.rsplit("/", 1)[-1]), natural_key(d.doc_id)))
        latest = notes[-sessions:]
        if not latest:
            return "No session notes yet.", ()
        from liminalis.ingest.sentences import split_sentences

        parts = []
        for d in latest:
            sents = [d.text[s:e] for s, e, _ in split_sentences(d.text) if not d.text[s:e].lstrip().startswith(("#", "|"))]
            parts.append(f"**{d.title}**\n" + " ".join(" ".join(x.split()) for x in sents[:4]))
        return "\n\n".join(parts), tuple(Source(d.doc_id, d.title) for d in latest)

    async def cmd_upload(self, msg: IncomingMessage, arg: str) -> Reply:
        cfg = await self.campaign_of(msg)
        self._require_gm(await self.lens_of(msg, cfg))
        visibility, doc_type = parse_upload_options(arg, cfg)
        if not msg.attachments:
            how = ("Slack commands cannot carry files: mention me with the files attached, "
                   "`@Liminalis /upload [players|gm|<lens>] [session|lore|…]`."
                   if msg.platform == "slack" else "Attach one or more .md or .txt files to `/upload`.")
            raise InvalidInput("no attachment", user_message=how)
        if cfg.uploads_root is None:
            raise UploadRejected("uploads disabled", user_message="Uploads are not enabled on this bot.")
        saved, skipped, replaced = self.save_uploads(cfg, msg.attachments, visibility=visibility, doc_type=doc_type)
        if not saved:
            lines = "\n".join(f"• {n}: {r}" for n, r in skipped)
            return Reply(text=f"Nothing was ingested.\n{lines}", ephemeral=True, error=True)
        lines: list[str] = []
        ingested = 0
        for name in saved:  # only these files are read: the rest of the campaign is left as it is
            report = await self.engine.ingest(cfg.slug, cfg.uploads_root / name)
            refused = [s.reason for s in report.skipped]
            if refused or not report.files:
                lines.append(f"• skipped {name}: {refused[0] if refused else 'not read'}")
                continue
            f = report.files[0]
            ingested += 1
            hidden = f"; {f.hidden_sections} hidden section{'s' if f.hidden_sections != 1 else ''} (GM-only)" \
                if f.hidden_sections else ""
            again = " (replaced the earlier upload)" if name in replaced else ""
            lines.append(f"• {name}{again} — {describe_visibility(f.visibility)}, {f.type}: {f.added} passages added, "
                         f"{f.changed} changed, {f.removed} removed{hidden}")
            lines += [f"  ⚠ {w}" for w in f.warnings]
        lines += [f"• skipped {n}: {r}" for n, r in skipped]
        lines.insert(0, f"Ingested {ingested} file(s) into **{cfg.name}**:")
        if visibility is None:
            lines.append("Files that do not say who may read them are GM-only: add `visibility: players` to their "
                         "front matter, or upload with the visibility option, to share them with the table.")
        return Reply(text="\n".join(lines), ephemeral=True)

    async def visibility_choices(self, msg: IncomingMessage) -> list[str]:
        """The visibilities an upload may be given in ``msg``'s campaign (autocomplete)."""
        try:
            cfg = await self.campaign_of(msg)
        except Exception:
            return [PLAYERS, GM]
        return [PLAYERS, GM, *cfg.lenses]

    def save_uploads(self, cfg: CampaignConfig, attachments: Sequence[Attachment], *,
                     visibility: frozenset[str] | None = None, doc_type: str | None = None,
                     ) -> tuple[list[str], list[tuple[str, str]], list[str]]:
        """Validate every file before writing any; a bad file never replaces a good one.

        Returns the names saved, the ``(name, reason)`` of those refused, and the saved names
        that replaced an earlier upload (a GM's new version of the notes: said in the reply). A
        file whose document id an earlier upload of another name holds (``notes.txt`` beside
        ``notes.md``) is refused: the two would be one document, and the older would win."""
        assert cfg.uploads_root is not None
        saved: list[str] = []
        skipped: list[tuple[str, str]] = []
        replaced: list[str] = []
        existing: dict[str, str] = {}  # document id → the upload the indexer reads for it (the first by name)
        for f in sorted(cfg.uploads_root.iterdir()) if cfg.uploads_root.is_dir() else ():
            if f.is_file() and not f.name.startswith("."):
                existing.setdefault(doc_id_for(f.name), f.name)
        for i, att in enumerate(attachments):
            name = upload_name(att.filename)
            if i >= _MAX_FILES:
                skipped.append((name, f"only {_MAX_FILES} files are read per upload: send it again"))
                continue
            if name in saved:  # two names that clean to one: the second would overwrite the first
                skipped.append((name, "another file in this upload has the same name"))
                continue
            if att.error:
                skipped.append((name, att.error))
                continue
            if PurePosixPath(name).suffix.lower() not in SUPPORTED_SUFFIXES:
                skipped.append((name, "unsupported file type (use .md or .txt)"))
                continue
            if max(len(att.data), att.size or 0) > self.max_upload_bytes:
                skipped.append((name, f"file too large (limit {self.max_upload_bytes:,} bytes)"))
                continue
            other = existing.get(doc_id_for(name))
            if other is not None and other != name:
                skipped.append((name, f"an earlier upload, {other}, is the same document: send it as {other} to replace it"))
                continue
            data = att.data
            try:
                parsed = parse_file(data, f"uploads/{name}", cfg, visibility=visibility, doc_type=doc_type)
                if visibility is not None or doc_type is not None:
                    # The options are kept in the saved copy's front matter: every later re-read
                    # of the file (the tick, a restart) gives it the same visibility and type.
                    data = with_front_matter(data, visibility=parsed.visibility, doc_type=doc_type)
                    parse_file(data, f"uploads/{name}", cfg)
            except LoadError as exc:
                skipped.append((name, exc.reason))
                continue
            cfg.uploads_root.mkdir(parents=True, exist_ok=True)
            target = cfg.uploads_root / name
            if target.exists():
                replaced.append(name)
            tmp = cfg.uploads_root / f".{name}.part"
            tmp.write_bytes(data)
            tmp.replace(target)
            saved.append(name)
            existing[doc_id_for(name)] = name
        return saved, skipped, replaced
