"""Showing a streamed answer as it is written: one message, edited in place at a sane rate.

The model's text arrives in small pieces, many a second; a platform allows a few edits of one
message a second at most (Discord's webhook edits, Slack's ``chat.update`` at tier 3). So the
text so far is shown at most once per ``interval`` seconds (the clock is injected), the last
piece is left for the reply itself, which replaces the message whole with its sources and
buttons. A failed edit is logged and never fails the answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

__all__ = ["StreamedEdits", "EDIT_INTERVAL_S"]

_log = logging.getLogger(__name__)

#: The least time between two edits of a streamed message.
EDIT_INTERVAL_S = 1.0


class StreamedEdits:
    """A ``Progress`` (``bot.messages``) that edits one message with the text so far.

    Args:
        edit: shows a text (already formatted) in the message; may create it on first call.
        render: the text so far → what ``edit`` shows (sanitized, cut to the platform's limit).
        interval: the least seconds between two edits.
        clock: monotonic seconds (a fake one in tests).
    """

    def __init__(
        self,
        edit: Callable[[str], Awaitable[None]],
        *,
        render: Callable[[str], str],
        interval: float = EDIT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.edit = edit
        self.render = render
        self.interval = interval
        self.clock = clock
        #: How many edits were made: the adapter replaces the edited message with the reply.
        self.edits = 0
        self._last: float | None = None
        self._failed = False

    async def __call__(self, text: str) -> None:
        if self._failed or not text.strip():
            return
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            return
        self._last = now
        try:
            await self.edit(self.render(text))
        except Exception:
            # The answer goes on; it arrives whole at the end.
            _log.warning("streaming edit failed; the answer will come whole", exc_info=True)
            self._failed = True
            return
        self.edits += 1
