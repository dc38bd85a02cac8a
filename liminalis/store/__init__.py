"""Relational storage (SQLite through aiosqlite): the source of truth for every campaign.

The only package with SQL in it. :class:`Database` opens, checks and migrates the file
(:mod:`liminalis.store.schema`) and carries one repository per concern.
"""

from liminalis.store.rows import CampaignRow, PassageRow, QuestionRow, ScheduleRow, TurnRow
from liminalis.store.schema import LATEST, MIGRATIONS, Migration
from liminalis.store.sqlite import Database

__all__ = [
    "LATEST",
    "MIGRATIONS",
    "CampaignRow",
    "Database",
    "Migration",
    "PassageRow",
    "QuestionRow",
    "ScheduleRow",
    "TurnRow",
]
