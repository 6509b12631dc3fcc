import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf import AlbertEncoder
from albert_tf import AlbertPretrainer
from tests.layer_checks import assert_nested_close
from tests.layer_checks import run_model_test

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
        "input_word_ids": rng.integers(
            0, config.vocab_size, (batch, length)).astype("int32"),
        "input_mask": mask,
        "input_type_ids": np.zeros((batch, length), "int32"),
        "masked_lm_positions": rng.integers(1, 7, (batch, predictions)).astype("int32"),
    }


@pytest.mark.usefixtures("zero_initialized")
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
    _assert_tied(model)


def _assert_tied(model):
    assert model.mlm_head.decoder_table is model.encoder.word_embeddings
    # One copy of the word embeddings among the model's variables.
    assert sum(v is model.encoder.word_embeddings for v in model.weights) == 1


def test_model_checks():
    config = AlbertConfig.from_preset("tiny", share="none", num_hidden_layers=2)
    run_model_test(
        AlbertPretrainer, {"config": config}, _batch(config),
        {"sequence_output": (2, 10, 32), "pooled_output": (2, 32),
         "encoder_outputs": [(2, 10, 32)] * 2,
         "mlm_logits": (2, 3, config.vocab_size), "sop_logits": (2, 2)},
        # The encoder's 7 embedding, 2 pooler and 2 x 16 block variables;
        # the MLM head's 5 (the decoder table is the word embeddings) and
        # the SOP head's 2.
        expected_num_trainable_weights=7 + 2 + 2 * 16 + 5 + 2,
        mixed_output_dtype={"sequence_output": "bfloat16",
                            "pooled_output": "bfloat16",
                            "encoder_outputs": "bfloat16",
                            "mlm_logits": "float32", "sop_logits": "float32"},
        xla_atol=1e-4, each_model=_assert_tied)


@pytest.mark.parametrize("share,inner_group_num",
                         [("all", 1), ("attention", 1), ("ffn", 2), ("none", 2)])
@pytest.mark.parametrize("training", [False, True])
def test_pretraining_logits_equal_the_full_forward(random_pretrainer, share,
                                                   inner_group_num, training):
    # The training step computes the last block at [CLS] and the masked
    # positions only; logits and gradients must be those of the full model.
    model = random_pretrainer(share=share, inner_group_num=inner_group_num,
                              num_hidden_layers=4, num_hidden_groups=2)
    inputs = _batch(model.config, batch=3, length=10, predictions=4)
    inputs["masked_lm_positions"][0] = [9, 1, 9, 0]  # any order, repeats, [CLS]
    weights = tf.constant(
        np.random.default_rng(1).normal(size=(model.config.vocab_size,)),
        tf.float32)
    results = []
    for sparse in (False, True):
        with tf.GradientTape() as tape:
            if sparse:
                mlm, sop = model.pretraining_logits(inputs, training=training)
            else:
                outputs = model(inputs, training=training)
                mlm, sop = outputs["mlm_logits"], outputs["sop_logits"]
            loss = tf.reduce_sum(mlm * weights) + tf.reduce_sum(sop * [1.0, -2.0])
        results.append((mlm, sop, tape.gradient(loss, model.trainable_weights)))
    (mlm0, sop0, grads0), (mlm1, sop1, grads1) = results
    assert tuple(mlm1.shape) == (3, 4, model.config.vocab_size)
    assert_nested_close((mlm1, sop1), (mlm0, sop0), atol=1e-5)
    for variable, g0, g1 in zip(model.trainable_weights, grads0, grads1):
        if g0 is None:
            assert g1 is None, variable.path
            continue
        scale = max(1.0, float(np.abs(np.asarray(tf.convert_to_tensor(g0))).max()))
        np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(g1)) / scale,
                                   np.asarray(tf.convert_to_tensor(g0)) / scale,
                                   atol=1e-5, err_msg=variable.path)


def test_pretraining_logits_under_xla_and_mixed_bfloat16(random_pretrainer):
    model = AlbertPretrainer(AlbertConfig.from_preset(
        "tiny", vocab_size=48, num_hidden_layers=2), dtype="mixed_bfloat16")
    inputs = _batch(model.config)
    full = model(inputs)
    mlm, sop = tf.function(lambda x: model.pretraining_logits(x, training=True),
                           jit_compile=True)(inputs)
    assert mlm.dtype == sop.dtype == tf.float32
    # Dropout is on in training; with it off the values agree with bfloat16
    # rounding.
    mlm, sop = tf.function(lambda x: model.pretraining_logits(x),
                           jit_compile=True)(inputs)
    assert_nested_close((mlm, sop), (full["mlm_logits"], full["sop_logits"]),
                        atol=5e-2)


def test_masked_lm_logits_equal_the_full_forward(random_pretrainer):
    model = random_pretrainer(num_hidden_layers=2)
    inputs = _batch(model.config, batch=3, length=10, predictions=4)
    assert_nested_close(model.masked_lm_logits(inputs),
                        model(inputs)["mlm_logits"], atol=1e-5)


def test_heads_on_an_existing_encoder():
    encoder = AlbertEncoder(AlbertConfig.from_preset("tiny", vocab_size=48),
                            dtype="mixed_bfloat16")
    model = AlbertPretrainer(encoder.config, encoder=encoder)
    assert model.encoder is encoder
    assert model.mlm_head.decoder_table is encoder.word_embeddings
    assert model.mlm_head.dtype_policy.name == "mixed_bfloat16"
    assert sum(v is encoder.word_embeddings for v in model.weights) == 1
    # It saves and loads as any pretrainer.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pretrainer.keras")
        model.save(path)
        restored = keras.models.load_model(path)
    inputs = _batch(model.config)
    assert_nested_close(restored(inputs)["mlm_logits"],
                        model(inputs)["mlm_logits"], atol=0)
    with pytest.raises(ValueError, match=r"another config. Received: "
                       r"vocab_size=48 \(config: 1000\)"):
        AlbertPretrainer(AlbertConfig.from_preset("tiny"), encoder=encoder)
