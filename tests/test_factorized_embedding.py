import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEmbedding
from tests.layer_checks import run_layer_test

KWARGS = dict(vocab_size=50, embedding_size=8, hidden_size=16,
              max_position_embeddings=12, type_vocab_size=2, dropout=0.2,
              layer_norm_epsilon=1e-12)


def _ids(batch=2, length=6, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 50, (batch, length)).astype("int32"),
            rng.integers(0, 2, (batch, length)).astype("int32"))


def test_layer_checks():
    word_ids, type_ids = _ids()
    run_layer_test(AlbertEmbedding, KWARGS,
                   {"word_ids": word_ids, "type_ids": type_ids}, (2, 6, 16))


def test_matches_numpy_reference():
    word_ids, type_ids = _ids()
    layer = AlbertEmbedding(**KWARGS)
    out = np.asarray(layer(word_ids, type_ids))
    x = (layer.word_embeddings.numpy()[word_ids]
         + layer.token_type_embeddings.numpy()[type_ids]
         + layer.position_embeddings.numpy()[None, :6])
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
    x = x * layer.layer_norm.gamma.numpy() + layer.layer_norm.beta.numpy()
    x = x @ layer.projection.kernel.numpy() + layer.projection.bias.numpy()
    np.testing.assert_allclose(out, x, atol=1e-5)


def test_no_projection_when_widths_match():
    layer = AlbertEmbedding(**{**KWARGS, "hidden_size": 8})
    word_ids, type_ids = _ids()
    assert layer(word_ids, type_ids).shape == (2, 6, 8)
    assert layer.projection is None
    assert len(layer.weights) == 5  # three tables + LayerNorm gamma, beta


def test_missing_type_ids_are_zeros():
    word_ids, _ = _ids()
    layer = AlbertEmbedding(**KWARGS)
    np.testing.assert_array_equal(
        layer(word_ids), layer(word_ids, np.zeros_like(word_ids)))


def test_sequence_longer_than_position_table_is_refused():
    layer = AlbertEmbedding(**KWARGS)
    word_ids, type_ids = _ids(length=13)
    with pytest.raises(ValueError, match="max_position_embeddings=12"):
        layer(word_ids, type_ids)


def test_dynamic_length_past_the_table_names_the_limit():
    """An exported encoder (length unknown when traced) called with a longer
    sequence: the run-time check fires before the position lookup."""
    layer = AlbertEmbedding(**KWARGS)
    layer(*_ids(length=5))
    call = tf.function(lambda w, t: layer(w, t), input_signature=[
        tf.TensorSpec([None, None], tf.int32)] * 2)
    concrete = call.get_concrete_function()
    np.testing.assert_allclose(concrete(*_ids(length=12)),
                               layer(*_ids(length=12)), atol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="exceeds max_position_embeddings=12"):
        concrete(*_ids(length=13))
