"""The composition root (``bot.main.build_engine``) as ``serve``, the console and the MCP server
use it, with the shipped models."""

from __future__ import annotations

import dataclasses
import gc

import pytest

from bot.main import build_engine
from bot.settings import Settings

pytestmark = pytest.mark.slow  # the shipped models


async def test_the_models_are_kept_out_of_the_collectors_walk(tmp_path):
    """A full garbage collection holds every thread, the event loop's too, for as long as it
    walks the heap; with the models in it, hundreds of milliseconds in the middle of an ingest.
    The root freezes what start-up loaded, so a collection walks only what came after."""
    gc.unfreeze()
    settings = dataclasses.replace(
        Settings(), data_dir=tmp_path / "data", campaigns_dir=tmp_path / "campaigns"
    )
    try:
        async with build_engine(settings) as engine:
            assert engine.embedder.dim > 0
            assert gc.get_freeze_count() > 100_000
    finally:
        gc.unfreeze()
