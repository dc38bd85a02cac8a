"""What every repository holds: the one :class:`~liminalis.store.sqlite.Database`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from liminalis.store.sqlite import Database


class Repository:
    """One concern's queries over the shared connection (its writes go through ``db.write``)."""

    def __init__(self, db: Database) -> None:
        self._db = db
