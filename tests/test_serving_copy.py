"""Serving copies in bfloat16 and int8 (`albert_tf.models.serving_copy`)."""

import gc

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.layers import fused_dispatch
from albert_tf.models import serving_copy
from albert_tf.models.task_models import AlbertClassifier
from albert_tf.models.task_models import AlbertSpanExtractor


def _config():
    return AlbertConfig.from_preset("tiny", hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0)


def _inputs(config, batch=4, length=16):
    rng = np.random.default_rng(0)
    mask = np.ones((batch, length), "int32")
    mask[1, 9:] = 0
    return {
        "input_word_ids": tf.constant(
            rng.integers(5, config.vocab_size, (batch, length)), tf.int32),
        "input_mask": tf.constant(mask),
        "input_type_ids": tf.zeros((batch, length), tf.int32),
        "masked_lm_positions": tf.constant(
            rng.integers(1, 8, (batch, 3)), tf.int32),
    }


def _trained_like(model, seed=3):
    """Weights of a scale trained models have (not the tiny init's)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(scale=0.1, size=weight.shape).astype(
            "float32"))
    return model


def _cosines(a, b):
    a, b = np.asarray(a, "float64"), np.asarray(b, "float64")
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1)
                              * np.linalg.norm(b, axis=-1))


@pytest.fixture(scope="module")
def pretrainer():
    config = _config()
    model = AlbertPretrainer(config)
    model(_inputs(config))
    return _trained_like(model)


def test_float32_is_the_model_itself_and_other_precisions_copy(pretrainer):
    before = [w.numpy().copy() for w in pretrainer.weights]
    assert serving_copy.serving_copy(pretrainer, "float32") is pretrainer
    bf16 = serving_copy.serving_copy(pretrainer, "bfloat16")
    int8 = serving_copy.serving_copy(pretrainer, "int8")
    # The model is not changed; the copies hold their own variables.
    for weight, value in zip(pretrainer.weights, before):
        np.testing.assert_array_equal(weight.numpy(), value)
        assert weight.dtype == "float32"
    assert {w.dtype for w in bf16.weights} == {"bfloat16"}
    assert bf16.encoder.embedding.compute_dtype == "bfloat16"
    quantized = [layer for layer in int8._flatten_layers()
                 if fused_dispatch.is_int8(layer)]
    # Q, K, V, attention output, FFN in and out, embedding projection,
    # pooler and the MLM transform: every Dense of the model.
    assert {layer.name for layer in quantized} == {
        "query", "key", "value", "output_dense", "intermediate",
        "embedding_hidden_mapping_in", "pooler_dense", "transform_dense"}
    assert all(layer._kernel.dtype == "int8" for layer in quantized)


def test_quantizing_runs_no_garbage_collection(pretrainer, monkeypatch):
    # Keras deletes each float kernel with a full gc.collect(); a collection
    # per Dense layer cost more than the quantization in a large process.
    calls = []

    def collect(generation=2):
        calls.append(generation)
        return 0

    monkeypatch.setattr("gc.collect", collect)
    int8 = serving_copy.serving_copy(pretrainer, "int8")
    assert any(fused_dispatch.is_int8(layer) for layer in int8._flatten_layers())
    assert not calls
    assert gc.collect is collect


@pytest.mark.parametrize("serving_dtype", ["bfloat16", "int8"])
def test_copies_agree_with_float32(pretrainer, serving_dtype):
    inputs = _inputs(pretrainer.config)
    reference = pretrainer(inputs)
    copy = serving_copy.serving_copy(pretrainer, serving_dtype)
    run = tf.function(lambda x: copy(x, training=False),
                      jit_compile=serving_copy.needs_xla(serving_dtype))
    outputs = run(inputs)
    cosines = _cosines(reference["pooled_output"],
                       tf.cast(outputs["pooled_output"], tf.float32))
    assert cosines.min() > 0.99, cosines
    mask = inputs["input_mask"].numpy() > 0
    cosines = _cosines(reference["sequence_output"].numpy()[mask],
                       tf.cast(outputs["sequence_output"], tf.float32).numpy()[mask])
    assert cosines.min() > 0.99, cosines
    top1 = np.mean(np.argmax(reference["mlm_logits"], -1)
                   == np.argmax(outputs["mlm_logits"], -1))
    assert top1 >= 0.9, top1
    assert outputs["mlm_logits"].dtype == tf.float32


def test_mixed_bfloat16_model_serves_in_float32():
    config = _config()
    model = AlbertPretrainer(config, dtype="mixed_bfloat16")
    model(_inputs(config))
    copy = serving_copy.serving_copy(model, "float32")
    assert copy is not model
    assert copy.encoder.embedding.compute_dtype == "float32"
    np.testing.assert_allclose(copy.get_weights()[0], model.get_weights()[0])


@pytest.mark.parametrize("make", [
    lambda encoder: AlbertClassifier(encoder, 3),
    lambda encoder: AlbertSpanExtractor(encoder, with_no_answer=True),
], ids=["classifier", "span_extractor"])
def test_task_models_copy_with_their_heads(make):
    # One layer: the copy goes through the same config and weights however
    # deep the model is (the pretrainer tests above cover four).
    config = AlbertConfig.from_preset("tiny", num_hidden_layers=1)
    model = make(AlbertPretrainer(config).encoder)
    _trained_like(model, seed=4)
    inputs = {k: v for k, v in _inputs(config).items()
              if k != "masked_lm_positions"}
    reference = model(inputs)
    for serving_dtype in ("bfloat16", "int8"):
        copy = serving_copy.serving_copy(model, serving_dtype)
        assert type(copy) is type(model)
        outputs = tf.function(lambda x, c=copy: c(x, training=False),
                              jit_compile=serving_copy.needs_xla(serving_dtype))(
                                  inputs)
        assert sorted(outputs) == sorted(reference)
        for key in reference:
            a = np.reshape(reference[key], (len(inputs["input_mask"]), -1))
            b = np.reshape(tf.cast(outputs[key], tf.float32), a.shape)
            assert np.abs(a - b).max() < 0.1 * np.abs(a).max() + 1e-3, key


def test_project_multiplies_int8_layers_in_int8():
    rng = np.random.default_rng(1)
    layers = []
    for units in (5, 7):
        layer = keras.layers.Dense(units)
        layer.build((None, 6))
        layer.kernel.assign(rng.normal(size=(6, units)).astype("float32"))
        layers.append(layer)
    x = tf.constant(rng.normal(size=(4, 6)), tf.float32)
    expected = fused_dispatch.project(x, layers, "float32")
    np.testing.assert_allclose(
        expected, x.numpy() @ np.concatenate(
            [layer.kernel.numpy() for layer in layers], -1), rtol=1e-5)
    for layer in layers:
        layer.quantize("int8")
    got = fused_dispatch.project(x, layers, "float32")
    # One int8 step of the largest input and weight: ~1% of the products.
    assert np.abs(got - expected).max() < 0.03 * np.abs(expected).max()
    graph = tf.function(lambda v: fused_dispatch.project(v, layers, "float32"))
    ops = {op.type for op in graph.get_concrete_function(x).graph.get_operations()}
    assert "BatchMatMulV3" in ops and "MatMul" not in ops


def test_project_refuses_int8_and_float_layers_together():
    layers = [keras.layers.Dense(3), keras.layers.Dense(3)]
    for layer in layers:
        layer.build((None, 4))
    layers[0].quantize("int8")
    with pytest.raises(ValueError, match="all be int8 or all float"):
        fused_dispatch.project(tf.ones((2, 4)), layers, "float32")


def test_unknown_serving_dtype_is_named(pretrainer):
    with pytest.raises(ValueError, match="serving_dtype must be one of "
                       "float32, bfloat16, int8. Received: serving_dtype='fp16'"):
        serving_copy.serving_copy(pretrainer, "fp16")
