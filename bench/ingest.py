"""Ingest benchmark: throughput of a fresh ingest and the cost of a one-paragraph edit.

    python -m bench.ingest [DIR] [--limit N] [--windows] [--json]

Copies the corpus into a temporary campaign (no embedding cache), ingests it with the real
embedder into Milvus Lite, then edits one paragraph in the middle of the longest document and
re-ingests. Prints documents/s, passages/s, embedded/s and the edit's re-embedded passages and
seconds; then how fast one large document (1 MB and 5 MB of prose, the upload limit) is split
into passages, with no model involved: splitting once went quadratic in a document's length.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "fairytaleqa-dev"


async def run(
    corpus_dir: Path, *, limit: int | None, windows: bool, embedder: Any = None
) -> dict[str, Any]:
    import logging

    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    from liminalis.adapters.milvus import MilvusVectorStore
    from liminalis.campaign import CampaignConfig
    from liminalis.engine import Engine
    from liminalis.ingest.indexer import IngestOptions
    from liminalis.store.sqlite import Database

    if embedder is None:
        from liminalis.adapters.sentence_transformers import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
        embedder.load()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        root = tmp / "campaign"
        root.mkdir()
        files = sorted((corpus_dir / "corpus").glob("*.md"))[: limit or None]
        for f in files:
            shutil.copy(f, root / f.name)
        async with Database(tmp / "db.sqlite3") as db:
            engine = Engine(
                db=db,
                store=MilvusVectorStore(str(tmp / "milvus.db")),
                embedder=embedder,
                campaigns_dir=tmp,
                ingest_options=IngestOptions(windows=windows),
            )
            cfg = CampaignConfig(slug="bench", name="bench", root=root, gm_paths=())
            await engine.register(cfg)
            t = time.perf_counter()
            first = await engine.ingest(cfg)
            secs = time.perf_counter() - t
            longest = max(files, key=lambda f: f.stat().st_size)
            text = (root / longest.name).read_text()
            paras = text.split("\n\n")
            mid = len(paras) // 2
            paras[mid] += " A traveller added this sentence to test a one-paragraph edit."
            (root / longest.name).write_text("\n\n".join(paras))
            t = time.perf_counter()
            edit = await engine.ingest(cfg)
            edit_secs = time.perf_counter() - t
            await engine.close(models=False)
    return {
        "set": corpus_dir.name,
        "documents": first.documents,
        "passages": first.passages_added,
        "windows": first.windows_embedded,
        "seconds": round(secs, 2),
        "documents_per_s": round(first.documents / secs, 2),
        "passages_per_s": round(first.passages_added / secs, 2),
        "embedded_per_s": round((first.embedded + first.windows_embedded) / secs, 2),
        "edit_passages_reembedded": edit.embedded,
        "edit_windows_reembedded": edit.windows_embedded,
        "edit_seconds": round(edit_secs, 2),
    }


def chunk_speed(sizes_mb: tuple[int, ...] = (1, 5)) -> dict[str, float]:
    """Seconds to chunk one document of each size (prose from the sample campaign, repeated)."""
    from liminalis.ingest.chunking import chunk_document
    from liminalis.ingest.loaders import normalize_text

    root = Path(__file__).resolve().parent.parent / "campaigns" / "emberfall"
    prose = normalize_text("\n\n".join(f.read_text() for f in sorted(root.rglob("*.md"))))
    out = {}
    for mb in sizes_mb:
        text = (prose * (mb * 1_000_000 // len(prose) + 1))[: mb * 1_000_000]
        t = time.perf_counter()
        passages = chunk_document("big", text, visibility=frozenset({"players"}))
        out[f"{mb}MB_seconds"] = round(time.perf_counter() - t, 2)
        out[f"{mb}MB_passages"] = len(passages)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ingest")
    ap.add_argument("dir", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--limit", type=int, default=None, help="first N documents")
    ap.add_argument(
        "--windows", action="store_true", help="also embed sentence windows (off in the product)"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    r = asyncio.run(run(args.dir, limit=args.limit, windows=args.windows))
    r["chunking"] = chunk_speed()
    if args.json:
        print(json.dumps(r))
    else:
        print(
            f"{r['set']}: {r['documents']} documents, {r['passages']} passages, {r['windows']} windows in {r['seconds']} s"
        )
        print(
            f"  documents/s {r['documents_per_s']}  passages/s {r['passages_per_s']}  embedded (passages+windows)/s {r['embedded_per_s']}"
        )
        print(
            f"  one-paragraph edit: {r['edit_passages_reembedded']} passages + {r['edit_windows_reembedded']} windows re-embedded in {r['edit_seconds']} s"
        )
        print(
            "  chunking one large document: "
            + ", ".join(
                f"{mb} MB in {r['chunking'][f'{mb}MB_seconds']} s ({r['chunking'][f'{mb}MB_passages']} passages)"
                for mb in (1, 5)
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
