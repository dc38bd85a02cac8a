"""The GM's review of what the wall held back by habit.

The recogniser (:mod:`liminalis.ingest.intent`) holds back whatever *looks* like GM intent — a
``## Secrets`` heading, a ``GM:`` line, a ``DM/`` folder — because a hidden sentence costs a
player one question while a leaked one costs the table its campaign. The GM then decides: **show**
publishes the section to its document's readers, **keep** leaves it GM-only and stops asking.
What the documented syntax marks is the GM's explicit word and is never asked about.

The queue is what the last ingest held back by habit, less what was decided; a decision is
stored on the section's digest, so an edit to the section asks again (and holds it meanwhile).
"""

from __future__ import annotations

from dataclasses import dataclass

from liminalis.errors import InvalidInput
from liminalis.ports import Clock
from liminalis.store.reviews import KEEP, SHOW
from liminalis.store.sqlite import Database
from liminalis.types import FileReport, HeldBack

__all__ = ["ReviewItem", "WallReview", "KEY_LENGTH"]

#: How many characters of a digest a GM types to name a held section.
KEY_LENGTH = 8


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """One section held back by habit and awaiting the GM's word (GM-only text)."""

    key: str
    digest: str
    path: str
    line: int
    rule: str
    excerpt: str


class WallReview:
    """The review queue of every campaign, over the store; told of each ingest's reports."""

    def __init__(self, db: Database, *, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        #: slug → path → what the last read of that file held back.
        self._held: dict[str, dict[str, tuple[HeldBack, ...]]] = {}
        self._released: dict[str, frozenset[str]] = {}

    def note(self, slug: str, files: list[FileReport], *, whole: bool) -> None:
        """Record what an ingest's files held back (``whole``: the run saw every file, so a
        file it did not report is gone)."""
        held = {} if whole else dict(self._held.get(slug, {}))
        for f in files:
            held[f.path] = f.held_back
        self._held[slug] = held

    async def _held_of(self, slug: str) -> dict[str, tuple[HeldBack, ...]]:
        if slug not in self._held:  # no ingest in this process yet: the last one's file rows
            rows = await self._db.files.all(slug)
            self._held[slug] = {r.path: r.report.held_back for r in rows.values()}
        return self._held[slug]

    async def released(self, slug: str) -> frozenset[str]:
        """The digests a GM chose to show in ``slug``."""
        if slug not in self._released:
            decisions = await self._db.reviews.decisions(slug)
            self._released[slug] = frozenset(d for d, v in decisions.items() if v == SHOW)
        return self._released[slug]

    async def queue(self, slug: str) -> list[ReviewItem]:
        """What awaits the GM's word, by document and line."""
        decided = await self._db.reviews.decisions(slug)
        items: dict[str, ReviewItem] = {}
        for path, held in sorted((await self._held_of(slug)).items()):
            for h in held:
                if h.reviewable and h.digest not in decided and h.digest not in items:
                    items[h.digest] = ReviewItem(
                        h.digest[:KEY_LENGTH], h.digest, path, h.line, h.rule, h.excerpt
                    )
        return list(items.values())

    async def awaiting(self, slug: str, files: list[FileReport]) -> int:
        """How many sections ``files`` held back by habit still await the GM's word: what an
        ingest or an upload names when it points the GM at the review."""
        queued = {i.digest for i in await self.queue(slug)}
        return len({h.digest for f in files for h in f.held_back if h.digest in queued})

    async def decide(self, slug: str, key: str, *, show: bool, by: str) -> ReviewItem:
        """Store the GM's word on the held section ``key`` names (a digest or its first
        characters). Raises :class:`InvalidInput` when no held section answers to it."""
        key = key.strip().lower()
        found = [i for i in await self.queue(slug) if len(key) >= 4 and i.digest.startswith(key)]
        if len(found) != 1:
            raise InvalidInput(
                f"no held section {key!r}",
                user_message=f"No held section `{key[:16]}` awaits review: `/review` lists them.",
            )
        item = found[0]
        await self._db.reviews.decide(
            slug, item.digest, SHOW if show else KEEP, by=by, at=self._clock.now().timestamp()
        )
        self._released.pop(slug, None)
        return item
