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
