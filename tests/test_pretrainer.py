import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from tests.layer_checks import assert_nested_close

# albert-reference.md §3: MLM and SOP head parameter counts.
HEAD_COUNTS = {
    "albert_base_v2": (128_688, 1_538),
    "albert_large_v2": (161_456, 2_050),
    "albert_xlarge_v2": (292_528, 4_098),
}


def _batch(config, batch=2, length=10, predictions=3, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), "int32")
    mask[1, 7:] = 0
    return {
        "input_word_ids": rng.integers(0, config.vocab_size, (batch, length)).astype("int32"),
        "input_mask": mask,
        "input_type_ids": np.zeros((batch, length), "int32"),
        "masked_lm_positions": rng.integers(1, 7, (batch, predictions)).astype("int32"),
    }


@pytest.mark.parametrize("preset", sorted(HEAD_COUNTS))
def test_head_parameter_counts(preset):
    model = AlbertPretrainer(AlbertConfig.from_preset(preset))
    mlm, sop = HEAD_COUNTS[preset]
    assert model.mlm_head.count_params() == mlm
    assert model.sop_head.count_params() == sop
    assert model.count_params() == model.encoder.count_params() + mlm + sop
    keras.backend.clear_session()


def test_outputs_and_tied_decoder():
    config = AlbertConfig.from_preset("tiny")
    model = AlbertPretrainer(config)
    out = model(_batch(config))
    assert out["mlm_logits"].shape == (2, 3, config.vocab_size)
    assert out["sop_logits"].shape == (2, 2)
    assert out["mlm_logits"].dtype == tf.float32
    assert model.mlm_head.decoder_table is model.encoder.word_embeddings
    # One copy of the word embeddings among the model's variables.
    assert sum(v is model.encoder.word_embeddings for v in model.weights) == 1


def test_save_load_xla_and_mixed_precision():
    config = AlbertConfig.from_preset("tiny", share="none")
    model = AlbertPretrainer(config)
    batch = _batch(config)
    out = model(batch)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pretrainer.keras")
        model.save(path)
        restored = keras.models.load_model(path)
    assert restored.mlm_head.decoder_table is restored.encoder.word_embeddings
    assert_nested_close(out, restored(batch), atol=0)
    compiled = tf.function(lambda b: model(b), jit_compile=True)
    assert_nested_close(out, compiled(batch), atol=1e-4)
    mixed = AlbertPretrainer(config, dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    mixed_out = tf.function(lambda b: mixed(b), jit_compile=True)(batch)
    assert mixed_out["sequence_output"].dtype == tf.bfloat16
    assert mixed_out["mlm_logits"].dtype == tf.float32
    assert np.all(np.isfinite(mixed_out["mlm_logits"]))
