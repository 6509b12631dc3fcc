"""SentenceOrderHead: common layer checks and a NumPy reference."""

import numpy as np

from albert_tf import SentenceOrderHead
from tests.layer_checks import run_layer_test


def _sequence(batch=2, length=7, hidden=16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, length, hidden)).astype("float32")


def test_sentence_order_head():
    pooled = _sequence()[:, 0]
    head = run_layer_test(SentenceOrderHead, dict(hidden_size=16),
                          {"pooled_output": pooled}, (2, 2), has_dropout=False,
                          mixed_output_dtype="float32")
    assert tuple(head.output_weights.shape) == (2, 16)
    ref = pooled @ head.output_weights.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(head(pooled), ref, atol=1e-6)
