"""In-graph tokenization and packing equal their Python twins."""

import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import preprocessing
from data_prep import text as text_lib

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

    # One text per row: a lone string or a column is named, not traced.
    for wrong in (tf.constant("one text"), tf.constant([["a"], ["b"]])):
        with pytest.raises(ValueError, match=re.escape(
                "Received shape: %s" % wrong.shape)):
            preprocessor.tokenize(wrong)

    empty = preprocessor.encode(tf.constant([], tf.string))
    assert empty["input_word_ids"].shape == (0, 16)
    with pytest.raises(ValueError, match="at least 3"):
        preprocessing.TextPreprocessor(spm_model.serialized_model_proto(), 2)
    assert int(preprocessor.vocab_size()) == spm_model.get_piece_size()
    np.testing.assert_array_equal(
        preprocessor.id_to_piece(tf.constant([2, 3, 4])).numpy(),
        [b"[CLS]", b"[SEP]", b"[MASK]"])


def test_padded_length_rounds_up_and_caps():
    assert [preprocessing.padded_length(n, 64) for n in (0, 1, 2, 8, 9, 64)] \
        == [8, 8, 8, 8, 16, 64]
    assert preprocessing.padded_length(70, 64) == 64
    assert preprocessing.padded_length(5, 6) == 6  # a cap below the multiple
    as_tensor = preprocessing.padded_length(tf.constant(9), tf.constant(64))
    assert int(as_tensor) == 16
    with pytest.raises(ValueError, match="serving_shape must be one of"):
        preprocessing.check_serving_shape("static")


@pytest.mark.parametrize("texts, texts_b", [
    (["Kato"], [""]),  # 3 packed tokens -> T = 8
    (TEXTS, TEXTS_B),  # some rows trimmed at the cap -> T = max_seq_length
    (["Kato rimen sa lo.", "ta"], ["ver mi", ""]),
])
def test_pad_to_longest_is_the_fixed_packing_cut_short(preprocessor, texts,
                                                       texts_b):
    fixed = preprocessor.encode(tf.constant(texts), tf.constant(texts_b))
    dynamic = preprocessor.encode(tf.constant(texts), tf.constant(texts_b),
                                  pad_to_longest=True)
    longest = int(tf.reduce_max(tf.reduce_sum(fixed["input_mask"], 1)))
    width = dynamic["input_word_ids"].shape[1]
    assert width == preprocessing.padded_length(longest, 16)
    assert width % preprocessing.LENGTH_MULTIPLE == 0 or width == 16
    for key in fixed:
        np.testing.assert_array_equal(dynamic[key], fixed[key][:, :width])
        # What is cut off is padding only.
        assert not fixed[key][:, width:].numpy().any()
    empty = preprocessor.encode(tf.constant([], tf.string),
                                pad_to_longest=True)
    assert empty["input_mask"].shape == (0, 8)


def test_compiled_packing_equals_python_on_random_rows():
    """The graph packing, traced once with unknown shapes, against `pack_ids`
    on random segment lengths (empty ones and long ones included)."""
    rng = np.random.default_rng(3)
    spec = tf.RaggedTensorSpec([None, None], tf.int32, row_splits_dtype=tf.int64)

    @tf.function(input_signature=[spec, spec, tf.TensorSpec([], tf.int32)])
    def pack(first, second, seq_length):
        return (preprocessing.pack_segments(first, second, seq_length),
                preprocessing.pack_segments(first, None, seq_length))

    for seq_length in (3, 4, 9, 20):
        rows = [(rng.integers(5, 99, rng.integers(0, 25)).tolist(),
                 rng.integers(5, 99, rng.choice([0, 1, 3, 30])).tolist())
                for _ in range(12)]
        first = tf.ragged.constant([a for a, _ in rows], tf.int32,
                                   row_splits_dtype=tf.int64)
        second = tf.ragged.constant([b for _, b in rows], tf.int32,
                                    row_splits_dtype=tf.int64)
        pair, single = pack(first, second, tf.constant(seq_length))
        for i, (a, b) in enumerate(rows):
            for packed, expected in ((pair, preprocessing.pack_ids(a, b, seq_length)),
                                     (single,
                                      preprocessing.pack_ids(a, None, seq_length))):
                for key, value in expected.items():
                    assert packed[key][i].numpy().tolist() == value, (
                        key, seq_length, a, b)
    assert len(pack.get_concrete_function().graph.get_operations()) < 400
