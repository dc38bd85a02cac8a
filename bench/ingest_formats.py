"""What a long PDF costs to ingest: a synthetic 300-page book, written at bench time.

    python -m bench.ingest_formats [--pages 300] [--model] [--out pdf_ingest.json]

The book (``liminalis.testing.text_pdf``: Helvetica text, one bookmark per chapter of 15 pages,
a chapter marked ``(GM)``) is read the way an upload or the campaign walk reads it: text
extraction alone (pypdf), then the whole parse (extraction, hidden sections, the views, page
offsets), then chunking each view, then a full ingest into a fresh engine. The ingest uses the
hash embedder and the in-memory store unless ``--model`` (the bundled sentence-transformers model
and Milvus Lite), so without it the number is everything but the embedding. Writes
``bench/results/<out>`` and prints one line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
_WORDS = (
    "lantern bell river tower baron keeper guild ledger harbour market bridge winter oath "
    "shrine crown salt storm relic vault chapel orchard mill ferry toll road forest cave ruin"
).split()


def make_book(pages: int, *, seed: int = 7) -> bytes:
    """A ``pages``-page PDF of varied prose, a bookmark every 15 pages, chapter 3 GM-only."""
    from liminalis.testing import text_pdf

    rng = random.Random(seed)
    texts: list[str] = []
    outline: list[tuple[int, str, int]] = []
    for i in range(pages):
        lines = []
        if i % 15 == 0:
            title = f"Chapter {i // 15 + 1}: The {rng.choice(_WORDS).title()}" + (
                " (GM)" if i // 15 == 2 else ""
            )
            outline.append((i, title, 1))
            lines.append(title)
        for _ in range(34):  # about a printed page: ~2,300 characters
            words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 13))]
            lines.append(f"The {' '.join(words)} at page {i + 1}.")
        texts.append("\n".join(lines))
    return text_pdf(texts, outline=outline)


async def run(pages: int = 300, *, model: bool = False) -> dict[str, Any]:
    from liminalis.campaign import CampaignConfig
    from liminalis.engine import Engine
    from liminalis.ingest.chunking import chunk_document
    from liminalis.ingest.formats import extract_pdf
    from liminalis.ingest.indexer import IngestOptions
    from liminalis.ingest.loaders import parse_file
    from liminalis.store.sqlite import Database
    from liminalis.testing import HashEmbedder, MemoryVectorStore

    t = time.perf_counter()
    book = make_book(pages)
    write_s = time.perf_counter() - t
    t = time.perf_counter()
    extracted = extract_pdf(book)
    extract_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        root = tmp / "campaign"
        root.mkdir()
        (root / "book.pdf").write_bytes(book)
        cfg = CampaignConfig(slug="bench", name="bench", root=root, gm_paths=())
        t = time.perf_counter()
        parsed = parse_file(book, "book.pdf", cfg)
        parse_s = time.perf_counter() - t
        t = time.perf_counter()
        passages = [
            chunk_document(v.doc_id, v.text, visibility=v.visibility, pages=v.pages)
            for v in parsed.views
        ]
        chunk_s = time.perf_counter() - t
        store: Any
        if model:
            from liminalis.adapters.milvus import MilvusVectorStore
            from liminalis.adapters.sentence_transformers import SentenceTransformerEmbedder

            embedder: Any = SentenceTransformerEmbedder()
            embedder.load()
            store = MilvusVectorStore(str(tmp / "milvus.db"))
        else:
            embedder, store = HashEmbedder(), MemoryVectorStore()
        async with Database(tmp / "db.sqlite3") as db:
            engine = Engine(
                db=db,
                store=store,
                embedder=embedder,
                campaigns_dir=tmp,
                ingest_options=IngestOptions(max_bytes=len(book) + 1),
            )
            await engine.register(cfg)
            t = time.perf_counter()
            report = await engine.ingest(cfg)
            ingest_s = time.perf_counter() - t
            await engine.close(models=False)
    return {
        "pages": pages,
        "pdf_bytes": len(book),
        "text_chars": sum(len(p.text) for p in extracted.pages),
        "views": len(parsed.views),
        "passages": sum(len(p) for p in passages),
        "passages_per_view": [len(p) for p in passages],
        "pages_with_page_heading": sum(
            1 for ps in passages for p in ps if p.heading.split(" > ")[-1].startswith("p")
        ),
        "write_seconds": round(write_s, 2),
        "extract_seconds": round(extract_s, 2),
        "parse_seconds": round(parse_s, 2),
        "chunk_seconds": round(chunk_s, 2),
        "ingest_seconds": round(ingest_s, 2),
        "ingest_passages_added": report.passages_added,
        "ingest_embedded": report.embedded,
        "embedder": "sentence-transformers (bundled)" if model else "hash (no model)",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ingest_formats")
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--model", action="store_true", help="embed with the bundled model")
    ap.add_argument("--out", default="pdf_ingest.json", help="file name under bench/results/")
    args = ap.parse_args(argv)
    r = asyncio.run(run(args.pages, model=args.model))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(r, indent=2) + "\n")
    print(
        f"{r['pages']}-page PDF ({r['pdf_bytes']:,} bytes): extract {r['extract_seconds']} s, "
        f"parse {r['parse_seconds']} s, chunk {r['chunk_seconds']} s → {r['passages']} passages "
        f"in {r['views']} views; ingest ({r['embedder']}) {r['ingest_seconds']} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
