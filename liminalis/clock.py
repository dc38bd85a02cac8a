"""The wall clock: the one :class:`~liminalis.ports.Clock` outside tests (which freeze time with
:class:`liminalis.testing.FrozenClock`)."""

from __future__ import annotations

import datetime as dt

__all__ = ["SystemClock"]


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)
