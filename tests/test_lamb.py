"""Lamb and AdamW against a NumPy transcription of the released update."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import lamb
from tests.fixtures_pretraining import official_lr


def _official_update(params, grads, m, v, lr, layer_adaptation, wd=0.01,
                     b1=0.9, b2=0.999, eps=1e-6):
    """The released LAMB / AdamWeightDecayOptimizer step, in float64 NumPy."""
    excluded = ("LayerNorm", "layer_norm", "bias")
    for name in params:
        g = grads[name]
        m[name] = b1 * m[name] + (1 - b1) * g
        v[name] = b2 * v[name] + (1 - b2) * g * g
        update = m[name] / (np.sqrt(v[name]) + eps)
        skip = any(re.search(r, name) for r in excluded)
        if not skip:
            update = update + wd * params[name]
        ratio = 1.0
        if layer_adaptation and not skip:
            w_norm = np.linalg.norm(params[name])
            u_norm = np.linalg.norm(update)
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        params[name] = params[name] - ratio * lr * update


class _Toy(keras.layers.Layer):
    def build(self, _):
        init = keras.initializers.RandomNormal(seed=1)
        self.kernel = self.add_weight(name="kernel", shape=(4, 3), initializer=init)
        self.bias = self.add_weight(name="bias", shape=(3,), initializer=init)
        self.gamma = self.add_weight(name="LayerNorm_gamma", shape=(3,),
                                     initializer=init)
        self.zero = self.add_weight(name="table", shape=(2, 3), initializer="zeros")

    def call(self, x):
        return x


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_matches_numpy_transcription_of_official_update(name):
    layer = _Toy(name="toy")
    layer.build(None)
    variables = layer.trainable_variables
    optimizer = lamb.create_optimizer(
        name, learning_rate=0.01, num_train_steps=10, num_warmup_steps=3,
        poly_power=0.5)
    optimizer.build(variables)
    params = {v.path: np.asarray(v.numpy(), np.float64) for v in variables}
    m = {k: np.zeros_like(p) for k, p in params.items()}
    vv = {k: np.zeros_like(p) for k, p in params.items()}
    rng = np.random.default_rng(0)
    apply = tf.function(lambda g: optimizer.apply(g, variables))
    for step in range(6):
        # Global norms around 1: some steps are clipped, some not.
        grads = [rng.normal(size=v.shape).astype("float32") * 0.3 * (step % 3)
                 for v in variables]
        if step == 2:
            grads[-1] = np.zeros_like(grads[-1])  # Zero norms: ratio 1.
        apply(grads)
        lr = official_lr(step, 0.01, 10, 3, 0.5)
        norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
        scale = 1.0 / max(norm, 1.0)  # tf.clip_by_global_norm at 1.0
        _official_update(params, {v.path: g.astype(np.float64) * scale
                                  for v, g in zip(variables, grads)},
                         m, vv, lr, layer_adaptation=(name == "lamb"))
        for v in variables:
            np.testing.assert_allclose(v.numpy(), params[v.path], atol=1e-6,
                                       rtol=0, err_msg=f"{v.path} step {step}")
    assert int(optimizer.iterations.numpy()) == 6
    assert optimizer.clip_norm == 1.0


def test_exclusions_by_variable_path():
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer

    model = AlbertPretrainer(AlbertConfig.from_preset("tiny"))
    optimizer = lamb.Lamb()
    optimizer.build(model.trainable_variables)
    decayed = {v.path for v in model.trainable_variables
               if optimizer.uses_weight_decay(v)}
    adapted = {v.path for v in model.trainable_variables
               if optimizer.uses_layer_adaptation(v)}
    assert decayed == adapted
    assert "embeddings/word_embeddings" in decayed
    for path in ("embeddings/LayerNorm/gamma",
                 "group_0_inner_group_0_attention/query/bias",
                 "predictions/transform_LayerNorm/beta",
                 "predictions/output_bias"):
        assert path in {v.path for v in model.trainable_variables}, path
        assert path not in decayed, path
    adamw = lamb.AdamW()
    adamw.build(model.trainable_variables)
    assert not any(adamw.uses_layer_adaptation(v)
                   for v in model.trainable_variables)


def test_config_round_trip_and_unknown_name():
    optimizer = lamb.Lamb(learning_rate=0.1, weight_decay_rate=0.02)
    clone = lamb.Lamb.from_config(optimizer.get_config())
    assert clone.weight_decay_rate == 0.02
    assert clone.decay_exclusions == lamb.DEFAULT_EXCLUSIONS
    with pytest.raises(ValueError, match="sgd"):
        lamb.create_optimizer("sgd")

