"""In-graph tokenization and packing equal their Python twins."""

import numpy as np
import pytest
import tensorflow as tf

from data_prep import text as text_lib
from export import preprocessing

TEXTS = ["Kato rimen sa lo.", "", "   ", "Café NAÏVE Über façade",
         "ka " * 40, "Pre-di, on ta; 1999!", "東京 ﬁnal coöp"]
TEXTS_B = ["", "ver mi", "", "el us qua ble " * 10, "x", "", "ta"]


@pytest.fixture(scope="module")
def preprocessor(spm_model):
    return preprocessing.TextPreprocessor(
        spm_model.serialized_model_proto(), max_seq_length=16)


def test_pack_ids_layout_and_trimming():
    packed = preprocessing.pack_ids([10, 11], [20], seq_length=8)
    assert packed == {"input_word_ids": [2, 10, 11, 3, 20, 3, 0, 0],
                      "input_mask": [1, 1, 1, 1, 1, 1, 0, 0],
                      "input_type_ids": [0, 0, 0, 0, 1, 1, 0, 0]}
    # Round robin: the longer segment loses first; on a tie A keeps one more.
    packed = preprocessing.pack_ids(list(range(10, 20)), list(range(20, 30)), 8)
    assert packed["input_word_ids"] == [2, 10, 11, 12, 3, 20, 21, 3]
    packed = preprocessing.pack_ids(list(range(10, 20)), [20], 8)
    assert packed["input_word_ids"] == [2, 10, 11, 12, 13, 3, 20, 3]
    # An empty second segment is no second segment.
    assert (preprocessing.pack_ids([10], [], 6)
            == preprocessing.pack_ids([10], None, 6))
    # The shortest length keeps the special tokens.
    assert preprocessing.pack_ids([10], [20], 3)["input_word_ids"] == [2, 3, 3]


@pytest.mark.parametrize("seq_length", [3, 5, 16])
def test_graph_packing_equals_python(preprocessor, spm_model, seq_length):
    packed = preprocessor.encode(tf.constant(TEXTS), tf.constant(TEXTS_B),
                                 seq_length=seq_length)
    ids_a = text_lib.tokenize_to_ids(spm_model, TEXTS)
    ids_b = text_lib.tokenize_to_ids(spm_model, TEXTS_B)
    for i, (a, b) in enumerate(zip(ids_a, ids_b)):
        expected = preprocessing.pack_ids(a, b, seq_length)
        for key, value in expected.items():
            assert packed[key][i].numpy().tolist() == value, (key, i)


def test_masks_bad_bytes_and_empty_batches(preprocessor, spm_model):
    texts = ["the [MASK] sat on [MASK].", "[MASK]", "", "[MASK][MASK] x",
             "lower [mask] is text"]
    tokens = preprocessor.tokenize_with_masks(tf.constant(texts)).to_list()
    for text, row in zip(texts, tokens):
        assert row == preprocessing.tokenize_with_masks_py(spm_model, text)
    assert tokens[1] == [preprocessing.MASK_ID]
    assert tokens[3][:2] == [preprocessing.MASK_ID] * 2
    assert preprocessing.MASK_ID not in tokens[4]

    bad = preprocessor.tokenize(tf.constant([b"ka \xff\xfe to", b"\xc3"]))
    assert bad.to_list() == text_lib.tokenize_to_ids(
        spm_model, [b"ka \xff\xfe to", b"\xc3"])

    empty = preprocessor.encode(tf.constant([], tf.string))
    assert empty["input_word_ids"].shape == (0, 16)
    with pytest.raises(ValueError, match="at least 3"):
        preprocessing.TextPreprocessor(spm_model.serialized_model_proto(), 2)
    assert int(preprocessor.vocab_size()) == spm_model.get_piece_size()
    np.testing.assert_array_equal(
        preprocessor.id_to_piece(tf.constant([2, 3, 4])).numpy(),
        [b"[CLS]", b"[SEP]", b"[MASK]"])
