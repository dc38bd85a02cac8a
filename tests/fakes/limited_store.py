"""An in-memory vector store with the limits Milvus puts on one row, and an off switch.

Milvus refuses a whole upsert when one row breaks its schema: an id longer than the VARCHAR
column (512), a visibility name longer than the array's elements (64). This fake refuses the
same way, so a test without Milvus still meets the failure a deeply nested file once caused;
``down`` makes it refuse every write, as a store that is failing as a whole does.
"""

from __future__ import annotations

from collections.abc import Sequence

from liminalis.errors import StoreError
from liminalis.ports import VectorRecord
from liminalis.testing import MemoryVectorStore


class LimitedStore(MemoryVectorStore):
    def __init__(self, *, max_id_bytes: int = 512, max_vis_bytes: int = 64) -> None:
        super().__init__()
        self.max_id_bytes = max_id_bytes
        self.max_vis_bytes = max_vis_bytes
        self.down = False
        self.refused: list[str] = []  # ids of rows that made an upsert fail

    async def upsert(self, campaign: str, records: Sequence[VectorRecord]) -> None:
        if self.down:
            raise StoreError("store unavailable")
        for r in records:
            too_long = max(len(v.encode()) for v in (r.id, r.passage_id, r.doc_id))
            if too_long > self.max_id_bytes or any(
                len(v.encode()) > self.max_vis_bytes for v in r.visibility
            ):
                self.refused.append(r.id)
                raise StoreError(f"the length ({too_long}) of a field exceeds max_length")
        await super().upsert(campaign, records)
