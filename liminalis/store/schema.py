"""The schema, as numbered migrations recorded in ``PRAGMA user_version``.

A database's ``user_version`` is the number of the last migration applied to it; opening runs the
ones after it, each in its own transaction with the version bump, so a crash leaves the database
at a whole version. Version 0 is both a new file and a data directory written before versions
were recorded: migration 1 is that schema exactly, written so it can run over it (``IF NOT
EXISTS``, and the two columns that release added on open added only where missing).

Never edit a migration that has shipped; add the next one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiosqlite

__all__ = ["MIGRATIONS", "Migration", "LATEST"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema: ``apply`` runs inside the transaction that sets ``version``."""

    version: int
    name: str
    apply: Callable[[aiosqlite.Connection], Awaitable[None]]


_V1_TABLES = """
CREATE TABLE IF NOT EXISTS campaigns (
    slug TEXT PRIMARY KEY, name TEXT NOT NULL, root TEXT NOT NULL,
    model_id TEXT, generation INTEGER NOT NULL DEFAULT 0, updated_at REAL
);
CREATE TABLE IF NOT EXISTS documents (
    campaign TEXT NOT NULL, doc_id TEXT NOT NULL, path TEXT NOT NULL, title TEXT NOT NULL,
    type TEXT NOT NULL, visibility TEXT NOT NULL, aliases TEXT NOT NULL, tags TEXT NOT NULL,
    content_hash TEXT NOT NULL, text TEXT NOT NULL, synopsis TEXT NOT NULL, updated_at REAL,
    PRIMARY KEY (campaign, doc_id)
);
CREATE TABLE IF NOT EXISTS passages (
    campaign TEXT NOT NULL, passage_id TEXT NOT NULL, doc_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
    heading TEXT NOT NULL, hash TEXT NOT NULL, visibility TEXT NOT NULL,
    prev_id TEXT, next_id TEXT, tokens TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (campaign, passage_id)
);
CREATE INDEX IF NOT EXISTS passages_doc ON passages (campaign, doc_id, ordinal);
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, hash)
);
CREATE TABLE IF NOT EXISTS pins (
    campaign TEXT NOT NULL, scope TEXT NOT NULL, doc_id TEXT NOT NULL, created_at REAL,
    PRIMARY KEY (campaign, scope, doc_id)
);
CREATE TABLE IF NOT EXISTS channel_links (
    platform TEXT NOT NULL, channel_id TEXT NOT NULL, campaign TEXT NOT NULL, linked_at REAL,
    guild_id TEXT,
    PRIMARY KEY (platform, channel_id)
);
CREATE TABLE IF NOT EXISTS token_usage (
    day TEXT PRIMARY KEY, tokens INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS budgets (
    campaign TEXT NOT NULL, scope TEXT NOT NULL, tokens INTEGER NOT NULL,
    PRIMARY KEY (campaign, scope)
);
CREATE TABLE IF NOT EXISTS chat_state (
    chat_key TEXT PRIMARY KEY, campaign TEXT NOT NULL, state TEXT NOT NULL, updated_at REAL
);
CREATE TABLE IF NOT EXISTS chat_turns (
    chat_key TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
    lens TEXT NOT NULL DEFAULT '', created_at REAL, PRIMARY KEY (chat_key, seq)
);
CREATE TABLE IF NOT EXISTS memory_forgets (
    campaign TEXT PRIMARY KEY, epoch INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS recap_posts (
    campaign TEXT NOT NULL, slot TEXT NOT NULL, posted_at REAL, PRIMARY KEY (campaign, slot)
);
CREATE TABLE IF NOT EXISTS recap_schedules (
    campaign TEXT PRIMARY KEY, cron TEXT NOT NULL, platform TEXT NOT NULL, channel_id TEXT NOT NULL,
    parent_id TEXT
);
CREATE TABLE IF NOT EXISTS spend (
    day TEXT NOT NULL, campaign TEXT NOT NULL, role TEXT NOT NULL, model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    cache_read INTEGER NOT NULL, cache_write INTEGER NOT NULL, created_at REAL
);
"""

# Columns a table gained after it first shipped; a database from before has them added, NULL
# in its old rows.
_V1_ADDED_COLUMNS = (
    ("channel_links", "guild_id", "TEXT"),  # the Discord server of a link; NULL: not known yet
    ("recap_schedules", "parent_id", "TEXT"),  # the parent channel of a schedule set in a thread
)


async def _columns(conn: aiosqlite.Connection, table: str) -> set[str]:
    async with conn.execute(f"PRAGMA table_info({table})") as cur:
        return {str(r[1]) for r in await cur.fetchall()}


async def _v1_baseline(conn: aiosqlite.Connection) -> None:
    # executescript would commit the migration's transaction half-way; one statement at a time.
    for statement in _V1_TABLES.split(";"):
        if statement.strip():
            await conn.execute(statement)
    for table, column, decl in _V1_ADDED_COLUMNS:
        if column not in await _columns(conn, table):
            await conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


async def _v2_drop_dead_tables(conn: aiosqlite.Connection) -> None:
    # ``spend`` was created but never written nor read (the daily gate books ``token_usage``);
    # ``campaign_homes`` is what homes were before they followed the links, no longer read.
    await conn.execute("DROP TABLE IF EXISTS spend")
    await conn.execute("DROP TABLE IF EXISTS campaign_homes")


# Written on every insert and read by nothing: no query, no report, no ordering. ``chat_state``'s
# timestamp is also kept, and read, inside its state.
_V3_WRITE_ONLY = (
    ("campaigns", "name"),
    ("campaigns", "updated_at"),
    ("documents", "updated_at"),
    ("passages", "hash"),
    ("channel_links", "linked_at"),
    ("chat_state", "updated_at"),
    ("chat_turns", "created_at"),
    ("recap_posts", "posted_at"),
)


async def _v3_drop_write_only_columns(conn: aiosqlite.Connection) -> None:
    for table, column in _V3_WRITE_ONLY:
        if column in await _columns(conn, table):
            await conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


_V4_MEMORY_TABLES = """
CREATE TABLE IF NOT EXISTS memory_chunks (
    campaign TEXT NOT NULL, chunk_id TEXT NOT NULL, kind TEXT NOT NULL, label TEXT NOT NULL,
    doc_id TEXT, visibility TEXT NOT NULL, generation INTEGER NOT NULL,
    PRIMARY KEY (campaign, chunk_id)
);
CREATE TABLE IF NOT EXISTS memory_links (
    campaign TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, kind TEXT NOT NULL,
    weight REAL NOT NULL, visibility TEXT NOT NULL, PRIMARY KEY (campaign, src, dst, kind)
);
CREATE TABLE IF NOT EXISTS memory_activation (
    campaign TEXT NOT NULL, scope TEXT NOT NULL, chunk_id TEXT NOT NULL, kind TEXT NOT NULL,
    visibility TEXT NOT NULL, state TEXT NOT NULL, uses INTEGER NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (campaign, scope, chunk_id)
);
CREATE TABLE IF NOT EXISTS memory_edges (
    campaign TEXT NOT NULL, scope TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL,
    kind TEXT NOT NULL, weight REAL NOT NULL, visibility TEXT NOT NULL, state TEXT NOT NULL,
    updated_at REAL NOT NULL, PRIMARY KEY (campaign, scope, src, dst)
);
CREATE TABLE IF NOT EXISTS memory_context (
    campaign TEXT NOT NULL, scope TEXT NOT NULL, context TEXT NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (campaign, scope)
);
"""


async def _v4_memory_tables(conn: aiosqlite.Connection) -> None:
    for statement in _V4_MEMORY_TABLES.split(";"):
        if statement.strip():
            await conn.execute(statement)


# Passes are data: a pass's definition is a row, not code, and what it derives lands
# in one generic ``pass_facts`` table keyed by an arbitrary ``key``, so a new pass needs no new
# table. ``pass_state`` holds, per pass and source document, the hash of the views it last
# processed: a document whose views hash differently is pending. ``pass_trace`` keeps one row per
# node execution of a run.
_V5_PASS_TABLES = """
CREATE TABLE IF NOT EXISTS pass_definitions (
    campaign TEXT NOT NULL, pass_id TEXT NOT NULL, definition TEXT NOT NULL,
    def_hash TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (campaign, pass_id)
);
CREATE TABLE IF NOT EXISTS pass_state (
    campaign TEXT NOT NULL, pass_id TEXT NOT NULL, doc_id TEXT NOT NULL,
    content_hash TEXT NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
    updated_at REAL NOT NULL, PRIMARY KEY (campaign, pass_id, doc_id)
);
CREATE TABLE IF NOT EXISTS pass_runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT, campaign TEXT NOT NULL, pass_id TEXT NOT NULL,
    trigger TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
    started_at REAL NOT NULL, finished_at REAL, documents_done INTEGER NOT NULL DEFAULT 0,
    documents_failed INTEGER NOT NULL DEFAULT 0, documents_left INTEGER NOT NULL DEFAULT 0,
    node_executions INTEGER NOT NULL DEFAULT 0, model_calls INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS pass_runs_pass ON pass_runs (campaign, pass_id, run_id);
CREATE TABLE IF NOT EXISTS pass_trace (
    run_id INTEGER NOT NULL, seq INTEGER NOT NULL, doc_id TEXT NOT NULL, node_id TEXT NOT NULL,
    node_type TEXT NOT NULL, inputs TEXT NOT NULL, output_size INTEGER NOT NULL,
    started_at REAL NOT NULL, ms REAL NOT NULL, model_calls INTEGER NOT NULL,
    tokens INTEGER NOT NULL, error TEXT NOT NULL DEFAULT '', PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS pass_facts (
    campaign TEXT NOT NULL, pass_id TEXT NOT NULL, doc_id TEXT NOT NULL, view_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, visibility TEXT NOT NULL,
    PRIMARY KEY (campaign, pass_id, doc_id, ordinal)
);
CREATE INDEX IF NOT EXISTS pass_facts_key ON pass_facts (campaign, key);
"""


# The router's ledger (liminalis/routing): every model call with its campaign, role, pass and
# node; the bookings of calls in flight, each with its owner, run and expiry, so a killed
# process's bookings neither outlive their expiry nor survive the owner's next start; the
# campaigns' background credits; and the campaigns whose autonomous background work is paused.
_V6_ROUTER_TABLES = """
CREATE TABLE IF NOT EXISTS model_calls (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, day TEXT NOT NULL, campaign TEXT NOT NULL,
    role TEXT NOT NULL, pass_id TEXT, node TEXT, model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    cache_write INTEGER NOT NULL, cache_read INTEGER NOT NULL,
    foreground INTEGER NOT NULL, ok INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS model_calls_campaign ON model_calls (campaign, at);
CREATE TABLE IF NOT EXISTS model_bookings (
    id INTEGER PRIMARY KEY, owner TEXT NOT NULL, run_id TEXT NOT NULL, campaign TEXT NOT NULL,
    day TEXT NOT NULL, tokens INTEGER NOT NULL, foreground INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS campaign_credits (
    campaign TEXT PRIMARY KEY, balance INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS campaign_pauses (
    campaign TEXT PRIMARY KEY, since REAL NOT NULL
);
"""


async def _v6_router_tables(conn: aiosqlite.Connection) -> None:
    for statement in _V6_ROUTER_TABLES.split(";"):
        if statement.strip():
            await conn.execute(statement)


_V7_KNOWLEDGE_TABLES = """
CREATE TABLE IF NOT EXISTS knowledge_views (
    campaign TEXT NOT NULL, doc_id TEXT NOT NULL, path TEXT NOT NULL, title TEXT NOT NULL,
    type TEXT NOT NULL, visibility TEXT NOT NULL, content_hash TEXT NOT NULL,
    summary TEXT NOT NULL, summary_method TEXT NOT NULL, session TEXT,
    PRIMARY KEY (campaign, doc_id)
);
CREATE TABLE IF NOT EXISTS knowledge_entities (
    campaign TEXT NOT NULL, doc_id TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL,
    type TEXT NOT NULL, aliases TEXT NOT NULL, visibility TEXT NOT NULL,
    PRIMARY KEY (campaign, doc_id, key)
);
CREATE TABLE IF NOT EXISTS knowledge_mentions (
    campaign TEXT NOT NULL, doc_id TEXT NOT NULL, ordinal INTEGER NOT NULL, key TEXT NOT NULL,
    surface TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, passage_id TEXT,
    initial INTEGER NOT NULL, hint TEXT NOT NULL, visibility TEXT NOT NULL,
    PRIMARY KEY (campaign, doc_id, ordinal)
);
CREATE INDEX IF NOT EXISTS knowledge_mentions_key ON knowledge_mentions (campaign, key);
CREATE TABLE IF NOT EXISTS knowledge_relations (
    campaign TEXT NOT NULL, doc_id TEXT NOT NULL, ordinal INTEGER NOT NULL, src TEXT NOT NULL,
    kind TEXT NOT NULL, dst TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
    evidence TEXT NOT NULL, visibility TEXT NOT NULL, PRIMARY KEY (campaign, doc_id, ordinal)
);
CREATE TABLE IF NOT EXISTS knowledge_motifs (
    campaign TEXT NOT NULL, doc_id TEXT NOT NULL, ordinal INTEGER NOT NULL, kind TEXT NOT NULL,
    text TEXT NOT NULL, weight REAL NOT NULL, start INTEGER NOT NULL, visibility TEXT NOT NULL,
    PRIMARY KEY (campaign, doc_id, ordinal)
);
CREATE TABLE IF NOT EXISTS knowledge_summaries (
    campaign TEXT NOT NULL, doc_id TEXT NOT NULL, method TEXT NOT NULL,
    content_hash TEXT NOT NULL, summary TEXT NOT NULL, visibility TEXT NOT NULL,
    PRIMARY KEY (campaign, doc_id, method)
);
"""


# The chat surface: replies with buttons ("cards"), 👍/👎 on answers (kept with the
# question, answer and sources shown, beyond the card's own life) and the campaign a member
# picked for their direct messages.
_V8_CHAT_TABLES = """
CREATE TABLE IF NOT EXISTS answer_cards (
    card_id TEXT PRIMARY KEY, kind TEXT NOT NULL, platform TEXT NOT NULL,
    channel_id TEXT NOT NULL, campaign TEXT NOT NULL, user_id TEXT NOT NULL, lens TEXT NOT NULL,
    question TEXT NOT NULL, answer TEXT NOT NULL, sources TEXT NOT NULL, created_at REAL NOT NULL,
    question_id INTEGER
);
CREATE INDEX IF NOT EXISTS answer_cards_age ON answer_cards (created_at);
CREATE TABLE IF NOT EXISTS answer_feedback (
    card_id TEXT NOT NULL, user_id TEXT NOT NULL, campaign TEXT NOT NULL, vote INTEGER NOT NULL,
    reason TEXT NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL, sources TEXT NOT NULL,
    lens TEXT NOT NULL, created_at REAL NOT NULL, question_id INTEGER,
    PRIMARY KEY (card_id, user_id)
);
CREATE INDEX IF NOT EXISTS answer_feedback_campaign ON answer_feedback (campaign, created_at);
CREATE TABLE IF NOT EXISTS dm_choices (
    platform TEXT NOT NULL, user_id TEXT NOT NULL, campaign TEXT NOT NULL,
    PRIMARY KEY (platform, user_id)
);
"""


async def _v8_chat_tables(conn: aiosqlite.Connection) -> None:
    for statement in _V8_CHAT_TABLES.split(";"):
        if statement.strip():
            await conn.execute(statement)


async def _v5_pass_tables(conn: aiosqlite.Connection) -> None:
    for statement in _V5_PASS_TABLES.split(";"):
        if statement.strip():
            await conn.execute(statement)


async def _v7_knowledge_tables(conn: aiosqlite.Connection) -> None:
    for statement in _V7_KNOWLEDGE_TABLES.split(";"):
        if statement.strip():
            await conn.execute(statement)


# The GM's view of the table: one row per question answered, so a GM can see what
# players ask, which answers found nothing and which documents they keep coming back to. The
# question's words and the doc ids an answer cited; no user id (the chat is enough to tell tables
# apart), no answer text. ``found`` is 0 when the answer cited no document.
_V9_QUESTION_LOG = """
CREATE TABLE IF NOT EXISTS question_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT, campaign TEXT NOT NULL, asked_at REAL NOT NULL,
    chat TEXT NOT NULL, lens TEXT NOT NULL, question TEXT NOT NULL, found INTEGER NOT NULL,
    cited TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS question_log_campaign ON question_log (campaign, asked_at);
"""


async def _v9_question_log(conn: aiosqlite.Connection) -> None:
    for statement in _V9_QUESTION_LOG.split(";"):
        if statement.strip():
            await conn.execute(statement)


# Blue/green re-index: a campaign's vectors live in generations, one collection per
# index profile. ``campaigns.store_key`` names the collection questions are served from ('' is
# the campaign's slug: the one collection of every campaign indexed before generations).
# ``vector_generations`` keeps the serving one, the one being built and the previous one until
# its grace period ends; ``reindex_docs`` is a build's per-document checkpoint, so an
# interrupted build resumes where it stopped.
_V10_GENERATIONS = """
ALTER TABLE campaigns ADD COLUMN store_key TEXT NOT NULL DEFAULT '';
CREATE TABLE IF NOT EXISTS vector_generations (
    campaign TEXT NOT NULL, profile TEXT NOT NULL, store_key TEXT NOT NULL,
    model_id TEXT NOT NULL, dim INTEGER NOT NULL, state TEXT NOT NULL,
    created_at REAL NOT NULL, published_at REAL, retired_at REAL,
    PRIMARY KEY (campaign, profile)
);
CREATE TABLE IF NOT EXISTS reindex_docs (
    campaign TEXT NOT NULL, profile TEXT NOT NULL, doc_id TEXT NOT NULL,
    content_hash TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (campaign, profile, doc_id)
);
"""


async def _v10_generations(conn: aiosqlite.Connection) -> None:
    for statement in _V10_GENERATIONS.split(";"):
        if statement.strip():
            await conn.execute(statement)


# A GM's per-chat reply model (``/budget model``): only the ``reply`` role of that chat moves
# (``Router.for_chat``); a chat with no row answers with the configured reply model. ``chat`` is
# the chat key (``platform:channel``), as ``budgets.scope`` holds it.
_V11_CHAT_MODELS = """
CREATE TABLE IF NOT EXISTS chat_models (
    campaign TEXT NOT NULL, chat TEXT NOT NULL, model TEXT NOT NULL, set_at REAL NOT NULL,
    PRIMARY KEY (campaign, chat)
)
"""


async def _v11_chat_models(conn: aiosqlite.Connection) -> None:
    await conn.execute(_V11_CHAT_MODELS)


# A rollback holds the profile it left: ``campaigns.rolled_back_from`` names it ('' none), and
# the automatic upgrade (the tick) does not build that profile again until a host re-indexes the
# campaign. A campaign column, not a generation row: the hold outlives the rolled-back
# generation, whose row goes when its grace period ends.
_V12_ROLLBACK_HOLD = "ALTER TABLE campaigns ADD COLUMN rolled_back_from TEXT NOT NULL DEFAULT ''"


async def _v12_rollback_hold(conn: aiosqlite.Connection) -> None:
    await conn.execute(_V12_ROLLBACK_HOLD)


# Each file's stat signature as an ingest last read it (liminalis.store.files): a new process's
# first tick skips the files unchanged since, instead of reading every one.
_V13_FILE_SIGNATURES = """
CREATE TABLE IF NOT EXISTS file_signatures (
    campaign TEXT NOT NULL, path TEXT NOT NULL, signature TEXT NOT NULL, reader TEXT NOT NULL,
    views TEXT NOT NULL, report TEXT NOT NULL, PRIMARY KEY (campaign, path)
)"""


async def _v13_file_signatures(conn: aiosqlite.Connection) -> None:
    await conn.execute(_V13_FILE_SIGNATURES)


# The last campaign.toml text that was applied (``Engine.campaign``): it governs who sees
# what while the file on disk is missing, broken, or drops a wall no GM confirmed, at a restart
# as much as mid-run.
_V14_CAMPAIGN_CONFIGS = """
CREATE TABLE IF NOT EXISTS campaign_configs (
    campaign TEXT PRIMARY KEY, text TEXT NOT NULL, saved_at REAL NOT NULL
)"""


async def _v14_campaign_configs(conn: aiosqlite.Connection) -> None:
    await conn.execute(_V14_CAMPAIGN_CONFIGS)


# Who set up each grant of GM power made from chat: a GM listed by id in campaign.toml
# (``gm_grants``: the user, role or user group, and the user who added it) and a linked channel
# (``channel_links.linked_by``: on Discord a link makes its server a home, where role names
# count). Removing a GM removes what they set up; ``/campaign status`` says who added what. A
# grant with no row (written by hand, or before this migration) is the host's: nobody's to take.
_V15_GRANT_PROVENANCE = """
ALTER TABLE channel_links ADD COLUMN linked_by TEXT;
CREATE TABLE IF NOT EXISTS gm_grants (
    campaign TEXT NOT NULL, platform TEXT NOT NULL, kind TEXT NOT NULL, ref TEXT NOT NULL,
    added_by TEXT NOT NULL, PRIMARY KEY (campaign, platform, kind, ref)
)"""


async def _v15_grant_provenance(conn: aiosqlite.Connection) -> None:
    for statement in _V15_GRANT_PROVENANCE.split(";"):
        if statement.strip():
            await conn.execute(statement)


# A GM's word on what the wall held back by habit (liminalis.store.reviews): shown to players
# or kept GM-only, per section digest. A decision is the GM's, not derived: it travels in exports.
_V16_WALL_REVIEWS = """
CREATE TABLE IF NOT EXISTS wall_reviews (
    campaign TEXT NOT NULL, digest TEXT NOT NULL, decision TEXT NOT NULL,
    decided_by TEXT NOT NULL, decided_at REAL NOT NULL, PRIMARY KEY (campaign, digest)
)"""


async def _v16_wall_reviews(conn: aiosqlite.Connection) -> None:
    await conn.execute(_V16_WALL_REVIEWS)


# A recap slot is claimed, posted, then marked posted with the platform's message id. A claim
# alone (the process died while posting, or the post failed) is posted again by the next run:
# at least once. A slot marked posted, or settled without a post (a schedule set after its slot,
# a campaign gone, a channel no longer linked), is never posted again. Rows from before were
# claimed under at-most-once and count as settled.
_V17_RECAP_DELIVERY = """
ALTER TABLE recap_posts ADD COLUMN state TEXT NOT NULL DEFAULT 'settled';
ALTER TABLE recap_posts ADD COLUMN message_id TEXT"""


async def _v17_recap_delivery(conn: aiosqlite.Connection) -> None:
    for statement in _V17_RECAP_DELIVERY.split(";"):
        if statement.strip():
            await conn.execute(statement)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "baseline: the schema of data directories from before versions were recorded",
        _v1_baseline,
    ),
    Migration(2, "drop the tables nothing reads: spend, campaign_homes", _v2_drop_dead_tables),
    Migration(3, "drop the columns nothing reads", _v3_drop_write_only_columns),
    Migration(
        4,
        "the campaign memory: chunks, links, activations, learned associations, context",
        _v4_memory_tables,
    ),
    Migration(
        5,
        "passes as data: definitions, per-document state, runs, node traces, generic facts",
        _v5_pass_tables,
    ),
    Migration(
        6,
        "the router's ledger: model calls, bookings with owners and expiry, credits, pauses",
        _v6_router_tables,
    ),
    Migration(
        7,
        "the knowledge layer: entities, mentions, relations, summaries, motifs per document view",
        _v7_knowledge_tables,
    ),
    Migration(
        8,
        "the chat surface: replies with buttons, feedback on answers, DM campaign choices",
        _v8_chat_tables,
    ),
    Migration(
        9,
        "the question log: what was asked, through which lens, whether an answer found anything",
        _v9_question_log,
    ),
    Migration(
        10,
        "vector generations: the serving collection per campaign, builds and their checkpoints",
        _v10_generations,
    ),
    Migration(
        11,
        "per-chat reply models: the model a GM chose for one chat's answers",
        _v11_chat_models,
    ),
    Migration(
        12,
        "rollback holds: the profile a rollback left, which the automatic upgrade does not rebuild",
        _v12_rollback_hold,
    ),
    Migration(
        13,
        "file signatures: what each file's last read gave, so a restart's first tick skips it",
        _v13_file_signatures,
    ),
    Migration(
        14,
        "the last good campaign.toml of each campaign, which serves while the file is not",
        _v14_campaign_configs,
    ),
    Migration(
        15,
        "grant provenance: who added each GM listed by id, who linked each channel",
        _v15_grant_provenance,
    ),
    Migration(
        16,
        "wall reviews: what a GM showed to players or kept GM-only of what habit held back",
        _v16_wall_reviews,
    ),
    Migration(
        17,
        "recap delivery: a claimed slot is posted until marked posted with its message id",
        _v17_recap_delivery,
    ),
)

#: The version a database has once opened by this code.
LATEST = MIGRATIONS[-1].version
