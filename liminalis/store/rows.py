"""Typed rows the repositories return (what a caller may rely on, not ``sqlite3.Row`` keys)."""

from __future__ import annotations

from dataclasses import dataclass

from liminalis.types import FileReport

__all__ = [
    "CampaignRow",
    "FileRow",
    "GrantRow",
    "LinkRow",
    "PassageRow",
    "QuestionRow",
    "ScheduleRow",
    "TurnRow",
]


@dataclass(frozen=True, slots=True)
class CampaignRow:
    """A registered campaign: where its folder is and what its index was built with."""

    slug: str
    root: str
    model_id: str | None  # the index profile; "" mid-rebuild, None before the first ingest ends
    generation: int  # bumped by every document swap; 0: never indexed
    #: The vector collection questions are served from; "": the one named by the slug.
    store_key: str = ""
    #: The profile a rollback left ("" none): the automatic upgrade does not build it again
    #: until a host re-indexes the campaign, or the rollback would undo itself on the next tick.
    rolled_back_from: str = ""


@dataclass(frozen=True, slots=True)
class PassageRow:
    """A stored passage: offsets into its document's text, and its BM25 tokens."""

    passage_id: str
    doc_id: str
    ordinal: int
    start: int
    end: int
    heading: str
    visibility: frozenset[str]
    prev_id: str | None
    next_id: str | None
    tokens: str  # space-joined; "" when a rebuild asked for re-tokenizing


@dataclass(frozen=True, slots=True)
class GrantRow:
    """A GM listed by id in a campaign's ``campaign.toml`` from chat, and who added them."""

    campaign: str
    platform: str
    kind: str  # "user", "role" (Discord) or "usergroup" (Slack)
    ref: str
    added_by: str  # a user id on ``platform``


@dataclass(frozen=True, slots=True)
class LinkRow:
    """A channel linked to a campaign: its server (Discord) and who linked it, when known."""

    platform: str
    channel_id: str
    campaign: str
    guild_id: str | None
    linked_by: str | None


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A recap schedule set with ``/recap schedule``."""

    campaign: str
    cron: str
    platform: str
    channel_id: str
    parent_id: str | None


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One side of a remembered exchange."""

    role: str  # "user" or "assistant"
    content: str
    lens: frozenset[str]


@dataclass(frozen=True, slots=True)
class QuestionRow:
    """One logged question (``question_log``)."""

    id: int
    campaign: str
    asked_at: float  # seconds since the epoch, UTC
    chat: str  # the chat key, ``platform:channel``
    lens: frozenset[str]
    question: str
    found: bool  # the answer cited a document
    cited: tuple[str, ...]  # the doc ids it cited, in order


@dataclass(frozen=True, slots=True)
class FileRow:
    """A campaign file as an ingest last read it: its stat signature, the reader it was read
    with (code version and campaign configuration), the views it gave ``(doc id, content
    hash)`` and its report (:class:`liminalis.ingest.indexer.Indexer`)."""

    path: str
    signature: tuple[int, ...]
    reader: str
    views: tuple[tuple[str, str], ...]
    report: FileReport
