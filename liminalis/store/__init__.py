"""Relational storage (SQLite through aiosqlite): the source of truth for every campaign."""

from liminalis.store.sqlite import Database

__all__ = ["Database"]
