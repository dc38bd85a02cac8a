"""One bad file, one bad campaign.toml, one damaged vector store never stop a campaign (#26).

Found in the field: a deeply nested folder gave a 646-character vector id against Milvus's 512,
which failed the whole campaign's ingest, and from then on every question was told "being
rebuilt, try again in a minute", forever. Here each kind of failure is met for real (SQLite,
the hash embedder, Milvus Lite where the point is Milvus, a store fake with Milvus's row limits)
and must cost only what failed: the file (reported to the host with its reason), the config
edit (the last good one serves), the store's rows (refilled from the embedding cache).
"""

from __future__ import annotations

from bot.scheduler import RecapScheduler
from bot.service import BotService, IncomingMessage
from liminalis.campaign import load_campaign
from liminalis.ingest.ids import DOC_ID_BYTES, STORE_ID_BYTES, id_bytes
from liminalis.ingest.indexer import vector_doc, vector_id, vector_owner
from liminalis.ingest.loaders import doc_id_for
from liminalis.ingest.sections import source_of, view_id
from liminalis.testing import FrozenClock

PLAYERS = frozenset({"players"})
GM = frozenset({"gm"})
DEEP = "/".join(f"chapter-{i:02d}-the-long-road-north" for i in range(20))
REFUSED = "the vector store refused its rows"


def msg(text: str, *, gm: bool = False) -> IncomingMessage:
    """A message in the linked channel, from the tiny campaign's GM (by user id) or a player."""
    return IncomingMessage(
        platform="discord", channel_id="C1", user_id="111" if gm else "9", text=text
    )


async def tick(engine) -> None:
    await RecapScheduler(BotService(engine), clock=FrozenClock(), tick_seconds=0).tick()


# -- ids -------------------------------------------------------------------------------------


def test_ids_are_bounded_stable_and_distinct():
    deep = f"{DEEP}/stop.md"
    assert len(deep) > 600
    bounded = doc_id_for(deep)
    assert bounded == doc_id_for(deep)  # the same id on every run
    assert id_bytes(bounded) <= DOC_ID_BYTES and bounded.startswith("chapter-00")
    assert doc_id_for(f"{DEEP}/stop2.md") != bounded  # a shared head, two documents
    assert doc_id_for("lore/the baron.md") == "lore/the baron"  # short ids are unchanged
    quoted = doc_id_for("x/" * 100 + '"%\\' * 100 + ".md")
    accented = doc_id_for("é" * 400 + ".txt")
    for doc in (bounded, quoted, accented):
        assert "//" not in doc
        # Every id built on it fits the store: views (X//gm, X//lens:NAME at the longest lens
        # name a campaign may have), passages, sentence windows, vectors (escaped or not).
        for key in ("", "gm", "lens:" + "m" * 48):
            view = view_id(doc, key)
            passage = f"{view}#{'0' * 20}.123456"
            vectors = {
                "passage": vector_id("passage", passage, "f" * 20),
                "window": vector_id("window", f"{passage}@99999", "f" * 20),
                "title": vector_id("title", view, "f" * 20),
            }
            assert all(len(v.encode()) <= STORE_ID_BYTES for v in vectors.values()), doc[:40]
            assert vector_owner(vectors["passage"]) == passage
            assert vector_doc(vectors["title"]) == view and source_of(view) == doc


def test_a_lens_name_longer_than_the_store_holds_is_ignored(tmp_path):
    (tmp_path / "campaign.toml").write_text(f'lenses = ["mirel", "{"m" * 49}"]\n')
    assert load_campaign(tmp_path, "c").lenses == ("mirel",)
