"""The embedding cache: vectors by (model, text hash), so unchanged text is never re-embedded."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from liminalis.store._base import Repository

__all__ = ["EmbeddingCache"]

# SQLite's default limit on host parameters is 999 in older builds.
_CHUNK = 500


class EmbeddingCache(Repository):
    async def get(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(hashes))
        for i in range(0, len(uniq), _CHUNK):
            chunk = uniq[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = await self._db.fetchall(
                f"SELECT hash, vector FROM embeddings WHERE model = ? AND hash IN ({marks})",
                (model, *chunk),
            )
            for r in rows:
                out[r["hash"]] = np.frombuffer(r["vector"], dtype=np.float32)
        return out

    async def put(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items]
        async with self._db.write() as conn:
            await conn.executemany(
                "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?, ?, ?)", rows
            )
