"""MaskedLMHead: common layer checks, the tied decoder, a NumPy reference."""

import numpy as np

from albert_tf import AlbertEmbedding
from albert_tf import MaskedLMHead
from tests.layer_checks import run_layer_test


def _sequence(batch=2, length=7, hidden=16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, length, hidden)).astype("float32")


def _layer_norm(layer, x, eps=1e-12):
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return x * layer.gamma.numpy() + layer.beta.numpy()


def test_masked_lm_head_layer_checks():
    positions = np.array([[0, 3, 6], [2, 2, 0]], "int32")
    run_layer_test(MaskedLMHead, dict(vocab_size=30, embedding_size=8),
                   {"sequence_output": _sequence(), "masked_positions": positions},
                   (2, 3, 30), has_dropout=False,
                   mixed_output_dtype="float32")


def test_masked_lm_head_tied_to_embedding_and_matches_reference():
    embedding = AlbertEmbedding(vocab_size=30, embedding_size=8, hidden_size=16)
    embedding(np.zeros((1, 4), "int32"))
    head = MaskedLMHead(vocab_size=30, embedding_size=8, tied_embedding=embedding)
    seq = _sequence()
    positions = np.array([[0, 3, 6], [2, 2, 0]], "int32")
    head(seq, positions)
    head.output_bias.assign(np.arange(30, dtype="float32"))
    logits = np.asarray(head(seq, positions))
    assert head.decoder_table is embedding.word_embeddings
    assert len(head.weights) == 5  # transform kernel+bias, LayerNorm, output_bias
    gathered = np.take_along_axis(seq, positions[:, :, None], axis=1)
    h = (gathered @ head.transform_dense.kernel.numpy()
         + head.transform_dense.bias.numpy())
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    h = _layer_norm(head.layer_norm, h)
    ref = h @ embedding.word_embeddings.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(logits, ref, atol=1e-5)
    assert logits.dtype == np.float32
