from conftest import SAMPLE

from liminalis.ingest.chunking import ChunkingParams, chunk_document, make_windows
from liminalis.ingest.loaders import normalize_text
from liminalis.text import split_sentences

VIS = frozenset({"gm", "players"})
CHAPTER = SAMPLE / "lore" / "the-long-winter-chronicle.md"


def chapter_text() -> str:
    raw = CHAPTER.read_text()
    return normalize_text(raw.split("\n---\n", 1)[1])


def test_bounds_and_cut_points_only_at_sentence_ends():
    text = chapter_text()
    assert len(text) > 15000
    passages = chunk_document("c", text, visibility=VIS)
    ends = {e for _, e, _ in split_sentences(text)}
    starts = {s for s, _, _ in split_sentences(text)}
    assert len(passages) > 8
    for p in passages:
        assert p.end in ends, "a passage ends mid-sentence"
        assert p.start in starts, "a passage starts mid-sentence"
        assert len(p.text) <= 1800
    for p in passages[:-1]:
        assert len(p.text) >= 400
    # contiguous, ordered, chained
    for a, b in zip(passages, passages[1:]):
        assert a.end <= b.start and a.next_id == b.passage_id and b.prev_id == a.passage_id


def test_short_document_is_one_passage():
    passages = chunk_document("d", "A short note. Only two sentences.", visibility=VIS)
    assert len(passages) == 1 and passages[0].start == 0


def test_editing_one_paragraph_changes_only_neighbouring_passages():
    text = chapter_text()
    before = chunk_document("c", text, visibility=VIS)
    paras = text.split("\n\n")
    mid = len(paras) // 2
    paras[mid] = paras[mid] + " The wind turned cold again that night, and nobody slept."
    after = chunk_document("c", "\n\n".join(paras), visibility=VIS)
    old = {p.hash for p in before}
    new = {p.hash for p in after}
    assert len(new - old) <= 2
    assert len(old - new) <= 2
    changed = [i for i, p in enumerate(after) if p.hash not in old]
    assert changed and max(changed) - min(changed) <= 1


def test_identical_text_gives_identical_ids():
    text = chapter_text()
    assert [p.passage_id for p in chunk_document("c", text, visibility=VIS)] == [
        p.passage_id for p in chunk_document("c", text, visibility=VIS)
    ]


def test_heading_path_recorded():
    intro = " ".join(f"Intro line {i} sets the scene." for i in range(8))
    body = " ".join(f"Sentence {i} tells of the bell." for i in range(60))
    text = f"# Top\n\n{intro}\n\n## Part One\n\n{body}"
    passages = chunk_document("h", text, visibility=VIS, params=ChunkingParams(min_chars=100))
    assert any(p.heading == "Top > Part One" for p in passages)


def test_windows_overlap_and_stay_inside_passage():
    text = chapter_text()
    p = max(chunk_document("c", text, visibility=VIS), key=lambda x: len(x.text))
    windows = make_windows(p, text)
    assert len(windows) >= 2
    for w in windows:
        assert p.start <= w.start < w.end <= p.end
    for a, b in zip(windows, windows[1:]):
        assert b.start < a.end  # one sentence of overlap
