"""One call that gives a Keras layer the checks every layer here must pass.

`run_layer_test` checks: output shape, `get_config`/`from_config` round trip with
the same outputs, `.keras` save/load (inside a small functional model) with the
same outputs, `mixed_bfloat16` (float32 variables, bfloat16 outputs, finite
values), XLA (`jit_compile=True`) against eager, and that dropout acts only when
`training=True`.
"""

import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def _as_float(x):
    return np.asarray(tf.cast(x, tf.float32))


def assert_nested_close(a, b, atol=1e-6, rtol=0.0):
    """Compares nested structures of tensors (dicts, lists) elementwise."""
    flat_a = tf.nest.flatten(a)
    flat_b = tf.nest.flatten(b)
    assert len(flat_a) == len(flat_b), (len(flat_a), len(flat_b))
    for x, y in zip(flat_a, flat_b):
        np.testing.assert_allclose(_as_float(x), _as_float(y), atol=atol,
                                   rtol=rtol)


def copy_weights(source, target):
    target.set_weights(source.get_weights())


def _functional_wrapper(layer, inputs):
    symbolic = {name: keras.Input(shape=np.shape(value)[1:],
                                  dtype=str(np.asarray(value).dtype), name=name)
                for name, value in inputs.items()}
    return keras.Model(symbolic, layer(**symbolic))


def run_layer_test(layer_cls, init_kwargs, inputs, expected_output_shape,
                   has_dropout=True, xla_atol=1e-5, mixed_output_dtype="bfloat16"):
    """Runs the common checks on `layer_cls(**init_kwargs)`.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments. Dropout rates in them should be
            non-zero when `has_dropout` so the training check can see them.
        inputs: dict of call-argument name -> NumPy array (batch first).
        expected_output_shape: shape of the (single) output.
        has_dropout: whether `training=True` must change the output.
        xla_atol: tolerance between eager and XLA outputs.
        mixed_output_dtype: output dtype under `mixed_bfloat16` (heads that
            feed a loss return float32).

    Returns:
        The built float32 layer.
    """
    layer = layer_cls(**init_kwargs)
    out = layer(**inputs)
    assert tuple(out.shape) == tuple(expected_output_shape), out.shape
    assert np.all(np.isfinite(_as_float(out)))

    # Inference is deterministic; training applies dropout.
    assert_nested_close(out, layer(**inputs, training=False), atol=0)
    if has_dropout:
        trained = layer(**inputs, training=True)
        assert not np.allclose(_as_float(trained), _as_float(out)), (
            "training=True did not change the output: dropout inactive")

    # get_config / from_config with the same weights gives the same outputs.
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    clone(**inputs)
    copy_weights(layer, clone)
    assert clone.get_config() == config
    assert_nested_close(out, clone(**inputs), atol=0)

    # .keras save and load, inside a functional wrapper.
    model = _functional_wrapper(layer, inputs)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "layer.keras")
        model.save(path)
        restored = keras.models.load_model(path)
    assert_nested_close(model(inputs), restored(inputs), atol=0)

    # XLA compiles and agrees with eager.
    compiled = tf.function(lambda kw: layer(**kw), jit_compile=True)
    assert_nested_close(out, compiled(inputs), atol=xla_atol)

    # mixed_bfloat16: float32 variables, bfloat16 compute, finite outputs.
    mixed = layer_cls(**{**init_kwargs, "dtype": "mixed_bfloat16"})
    mixed_out = mixed(**inputs)
    copy_weights(layer, mixed)
    mixed_out = tf.function(lambda kw: mixed(**kw), jit_compile=True)(inputs)
    assert mixed_out.dtype == mixed_output_dtype, mixed_out.dtype
    assert all(v.dtype == "float32" for v in mixed.weights)
    assert np.all(np.isfinite(_as_float(mixed_out)))
    # bfloat16 keeps ~3 significant digits; LayerNorm outputs are O(1).
    np.testing.assert_allclose(_as_float(mixed_out), _as_float(out), atol=0.1)
    return layer
