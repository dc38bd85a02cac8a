"""Shared fixtures: real SQLite, real Milvus Lite on tmp paths, the real bundled embedder."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import logging

logging.getLogger("pymilvus").setLevel(logging.ERROR)

from liminalis.engine import Engine
from liminalis.ingest.indexer import IngestOptions
from liminalis.store.sqlite import Database
from liminalis.testing import HashEmbedder

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "campaigns" / "emberfall"
SHARED = ROOT.parent / "shared"


#: Fixtures that load a real model or open Milvus Lite: a test using one is ``slow`` (``make
#: test-fast`` runs the others, ``-m "not slow"``). Tests that do so in their body are marked
#: where they are written.
HEAVY_FIXTURES = frozenset({"real_embedder", "sample_engine", "tiny", "npc_engine", "tiny_set"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def real_embedder():
    from liminalis.adapters.sentence_transformers import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder()
    emb.load()
    yield emb
    emb.close()


@pytest.fixture
def campaign_copy(tmp_path: Path) -> Path:
    """A writable copy of the sample campaign under ``tmp_path/campaigns/emberfall``."""
    dest = tmp_path / "campaigns" / "emberfall"
    shutil.copytree(SAMPLE, dest)
    return dest


class Tags:
    """``BotService(slug_tag=...)`` in tests: ``t1``, ``t2``, … in the order they are drawn, so a
    campaign made from chat has a slug a test can name (``salt-road-t1``)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"t{self.n}"


async def make_engine(
    tmp_path: Path, *, embedder=None, campaigns_dir: Path | None = None, milvus: bool = True, **kw
) -> Engine:
    from liminalis.adapters.milvus import MilvusVectorStore
    from liminalis.testing import MemoryVectorStore

    db = Database(tmp_path / "db.sqlite3")
    await db.open()
    store = kw.pop("store", None) or (
        MilvusVectorStore(str(tmp_path / "milvus.db")) if milvus else MemoryVectorStore()
    )
    return Engine(
        db=db,
        store=store,
        embedder=embedder or HashEmbedder(),
        campaigns_dir=campaigns_dir or tmp_path / "campaigns",
        ingest_options=kw.pop("ingest_options", IngestOptions()),
        uploads_dir=tmp_path / "uploads",
        **kw,
    )


async def close_engine(engine: Engine) -> None:
    await engine.close()
    await engine.db.close()


async def upgraded_engine(tmp_path: Path, embedder, **kw) -> Engine:
    """The tiny campaign indexed with the default embedder, then an engine over the same data
    directory with ``embedder`` (and ``kw`` for it): the state right after an upgrade that ships a
    new embedder."""
    from fakes.tiny_campaign import make_tiny_campaign

    make_tiny_campaign(tmp_path / "campaigns")
    old = await make_engine(tmp_path, milvus=False)
    try:
        await old.ingest("greyhold")
    finally:
        await close_engine(old)
    return await make_engine(tmp_path, milvus=False, embedder=embedder, **kw)


@pytest.fixture(scope="session")
async def sample_engine(tmp_path_factory, real_embedder) -> AsyncIterator[Engine]:
    """The sample campaign ingested once with the real model into real Milvus Lite."""
    tmp = tmp_path_factory.mktemp("sample")
    engine = await make_engine(tmp, embedder=real_embedder, campaigns_dir=ROOT / "campaigns")
    await engine.ingest("emberfall")
    yield engine
    await close_engine(engine)
