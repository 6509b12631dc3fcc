"""The fine-tuning tokenizer's pieces and their character offsets."""

import pytest

from albert_tf.tasks.tokenization import Tokenizer
from tests import tasks_testdata


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer(tasks_testdata.spm_model_path())


def test_offsets_match_ids_and_point_into_the_text(tokenizer):
    text = "  The cat sat,  in the 1990s café;\tﬁne Naïve!"
    ids, offsets = tokenizer.encode_with_offsets(text)
    assert ids == tokenizer.encode(text)
    assert len(offsets) == len(ids)
    for start, end in offsets:
        assert 0 <= start <= end <= len(text)
        assert " " not in text[start:end] and "\t" not in text[start:end]
    # ASCII words map piece by piece: the pieces rebuild each word.
    pieces = [text[s:e] for s, e in offsets]
    assert "".join(pieces).startswith("Thecatsat,inthe1990s")


def test_offsets_are_exact_where_preprocessing_changes_a_words_length(
        tokenizer):
    # "``" and "''" become one '"', "ﬁ" two letters, "a" + U+0301 one.
    text = "said ``hello'' to ﬁne a\u0301b"
    ids, offsets = tokenizer.encode_with_offsets(text)
    assert ids == tokenizer.encode(text)
    spans = {tokenizer.id_to_piece(i): text[s:e]
             for i, (s, e) in zip(ids, offsets) if s < e}
    quotes = [text[s:e] for i, (s, e) in zip(ids, offsets)
              if tokenizer.id_to_piece(i) == '"']
    assert quotes == ["``", "''"]
    # The word's other pieces keep their own characters, not the word's.
    hello = "".join(text[s:e] for s, e in offsets
                    if text.index("hello") <= s < text.index("hello") + 5)
    assert hello == "hello"
    assert "a\u0301" in spans.values() or any(
        v.startswith("a\u0301") for v in spans.values())
    # Every character but spaces is inside some piece.
    covered = {c for s, e in offsets for c in range(s, e)}
    assert covered == {i for i, c in enumerate(text) if c != " "}
