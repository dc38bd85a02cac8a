from liminalis.text import split_sentences


def texts(t: str) -> list[str]:
    return [t[s:e] for s, e, _ in split_sentences(t)]


def test_abbreviations_do_not_split():
    t = "Mr. Fenn met Dr. Quill at St. Orla's. They argued until dawn."
    assert texts(t) == ["Mr. Fenn met Dr. Quill at St. Orla's.", "They argued until dawn."]


def test_initials_and_eg():
    assert len(texts("J. R. Marrow wrote it, e.g. the chronicle. Then he left.")) == 2


def test_quotes_close_the_sentence():
    t = '"Run!" she said. "The bell is ringing." He ran.'
    out = texts(t)
    assert out[-1] == "He ran."
    assert '"The bell is ringing."' in out


def test_dialogue_lines_are_sentences():
    t = "MATT: You enter the tavern\nSAM: I order an ale\nLAURA: Me too. And bread."
    out = texts(t)
    assert out[0] == "MATT: You enter the tavern"
    assert out[1] == "SAM: I order an ale"
    assert out[2:] == ["LAURA: Me too.", "And bread."]


def test_headings_and_lists_are_their_own_sentences():
    t = "# Title\n\nIntro text here.\n\n- first item\n- second item\n1. numbered\n\nEnd."
    out = texts(t)
    assert out == [
        "# Title",
        "Intro text here.",
        "- first item",
        "- second item",
        "1. numbered",
        "End.",
    ]


def test_spans_cover_all_text_and_mark_paragraphs():
    t = "One. Two.\n\nThree."
    spans = split_sentences(t)
    assert [p for _, _, p in spans] == [False, True, True]
    covered = "".join(t[s:e] for s, e, _ in spans)
    assert covered.replace(" ", "") == t.replace(" ", "").replace("\n", "")


def test_run_on_sentence_is_broken_at_whitespace():
    t = "word " * 600
    spans = split_sentences(t, max_len=500)
    assert all(e - s <= 500 for s, e, _ in spans)
    assert len(spans) >= 6
