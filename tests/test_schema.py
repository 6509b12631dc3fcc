"""Tests for data_prep.schema: the feature spec and the wire encoder."""

import numpy as np
import pytest
import tensorflow as tf

from data_prep import schema

L, P = 16, 4


def _random_features(rng, rows, vocab_size=30000):
    return {
        "input_ids": rng.integers(0, vocab_size, (rows, L)),
        "input_mask": rng.integers(0, 2, (rows, L)),
        "segment_ids": rng.integers(0, 2, (rows, L)),
        "token_boundary": rng.integers(0, 2, (rows, L)),
        "masked_lm_positions": rng.integers(0, L, (rows, P)),
        "masked_lm_ids": rng.integers(0, vocab_size, (rows, P)),
        "masked_lm_weights": rng.random((rows, P)).astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, (rows, 1)),
    }


def _proto_bytes(features, row):
    example = tf.train.Example()
    for name, values in features.items():
        feature = example.features.feature[name]
        if name in schema.FLOAT_FEATURES:
            feature.float_list.value.extend(values[row].tolist())
        else:
            feature.int64_list.value.extend(values[row].tolist())
    return example.SerializeToString(deterministic=True)


def test_feature_spec_official_names_dtypes_shapes():
    spec = schema.feature_spec(128, 20)
    assert tuple(spec) == schema.FEATURE_NAMES
    assert set(schema.FEATURE_NAMES) == {
        "input_ids", "input_mask", "segment_ids", "token_boundary",
        "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
        "next_sentence_labels"}
    for name in ("input_ids", "input_mask", "segment_ids", "token_boundary"):
        assert spec[name].shape == [128] and spec[name].dtype == tf.int64
    for name in ("masked_lm_positions", "masked_lm_ids"):
        assert spec[name].shape == [20] and spec[name].dtype == tf.int64
    assert spec["masked_lm_weights"].dtype == tf.float32
    assert spec["next_sentence_labels"].shape == [1]


@pytest.mark.parametrize("vocab_size", [100, 30000, 1 << 40])
def test_encoder_bytes_equal_proto_serialization(vocab_size):
    rng = np.random.default_rng(vocab_size % 97)
    features = _random_features(rng, 50, vocab_size)
    encoded = schema.encode_examples(features)
    for row in range(50):
        assert encoded[row] == _proto_bytes(features, row)


def test_encoded_examples_parse_with_feature_spec():
    rng = np.random.default_rng(0)
    features = _random_features(rng, 20)
    parsed = tf.io.parse_example(schema.encode_examples(features),
                                 schema.feature_spec(L, P))
    for name, values in features.items():
        np.testing.assert_array_equal(parsed[name].numpy(), values)


def test_encode_one_example_with_no_predictions():
    features = {"input_ids": np.array([[2, 7, 3]]),
                "masked_lm_ids": np.zeros((1, 0), np.int64),
                "masked_lm_weights": np.zeros((1, 0), np.float32)}
    example = tf.train.Example.FromString(schema.encode_examples(features)[0])
    assert list(example.features.feature["input_ids"].int64_list.value) == [2, 7, 3]
    assert example.features.feature["masked_lm_ids"].HasField("int64_list")
    assert example.features.feature["masked_lm_weights"].HasField("float_list")


def test_encoder_rejects_bad_input():
    with pytest.raises(ValueError, match="negative"):
        schema.encode_examples({"input_ids": np.array([[1, -1]])})
    with pytest.raises(ValueError, match="one row count"):
        schema.encode_examples({"a": np.zeros((2, 3)), "b": np.zeros((3, 3))})
