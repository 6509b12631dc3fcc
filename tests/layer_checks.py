"""One call that gives a Keras layer or model the checks every one here must
pass.

`run_layer_test` checks a layer: output shape, weight counts,
`get_config`/`from_config` round trip with the same outputs, `.keras`
save/load (inside a small functional model) with the same outputs,
`mixed_bfloat16` (float32 variables, bfloat16 outputs, finite values), XLA
(`jit_compile=True`) against eager, and that dropout acts only when
`training=True`.

`run_model_test` checks a model the same way (its own `.keras` file, its
class restored) and adds one training step that must change every weight
the loss reaches.
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


def _check_weight_counts(layer, trainable, non_trainable):
    """Counts of the distinct variables (a tied table counts once)."""
    if trainable is not None:
        assert len(layer.trainable_weights) == trainable, (
            len(layer.trainable_weights), trainable)
    assert len(layer.non_trainable_weights) == non_trainable, (
        len(layer.non_trainable_weights), non_trainable)


def run_layer_test(layer_cls, init_kwargs, inputs, expected_output_shape,
                   expected_num_trainable_weights=None,
                   expected_num_non_trainable_weights=0, has_dropout=True,
                   xla_atol=1e-5, mixed_output_dtype="bfloat16"):
    """Runs the common checks on `layer_cls(**init_kwargs)`.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments. Dropout rates in them should be
            non-zero when `has_dropout` so the training check can see them.
        inputs: dict of call-argument name -> NumPy array (batch first).
        expected_output_shape: shape of the (single) output.
        expected_num_trainable_weights: how many trainable variables the
            built layer holds; None skips the count.
        expected_num_non_trainable_weights: how many non-trainable ones.
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
    _check_weight_counts(layer, expected_num_trainable_weights,
                         expected_num_non_trainable_weights)

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
    _check_weight_counts(mixed, expected_num_trainable_weights,
                         expected_num_non_trainable_weights)
    mixed_out = tf.function(lambda kw: mixed(**kw), jit_compile=True)(inputs)
    assert mixed_out.dtype == mixed_output_dtype, mixed_out.dtype
    assert all(v.dtype == "float32" for v in mixed.weights)
    assert np.all(np.isfinite(_as_float(mixed_out)))
    # bfloat16 keeps ~3 significant digits; LayerNorm outputs are O(1).
    np.testing.assert_allclose(_as_float(mixed_out), _as_float(out), atol=0.1)
    return layer


def _shapes(outputs):
    """Output name -> shape, or a list of shapes for a list of tensors."""
    return {name: [tuple(t.shape) for t in value]
            if isinstance(value, (list, tuple)) else tuple(value.shape)
            for name, value in outputs.items()}


def _output_dtypes(outputs, expected):
    """Output name -> (dtype found, dtype expected) for each wrong one.

    `expected` is one dtype for every output or a dict by output name.
    """
    wrong = {}
    for name, value in outputs.items():
        want = expected[name] if isinstance(expected, dict) else expected
        for tensor in tf.nest.flatten(value):
            if tensor.dtype != want:
                wrong[name] = (tensor.dtype.name, want)
    return wrong


def _floats(outputs):
    return [t for t in tf.nest.flatten(outputs) if t.dtype.is_floating]


def _check_training_step(model, inputs, outputs, has_dropout):
    """One gradient-descent step on the sum of squared float outputs: it
    changes every trainable weight the loss reaches, and reaches at least
    one. With `has_dropout`, its training-mode outputs differ from
    `outputs` (the inference ones)."""
    before = [np.array(w) for w in model.trainable_weights]
    with tf.GradientTape() as tape:
        trained = model(inputs, training=True)
        loss = tf.add_n([tf.reduce_sum(tf.square(tf.cast(t, tf.float32)))
                         for t in _floats(trained)])
    if has_dropout:
        assert any(not np.allclose(_as_float(a), _as_float(b)) for a, b in
                   zip(_floats(trained), _floats(outputs))), (
            "training=True did not change the outputs: dropout inactive")
    grads = tape.gradient(loss, model.trainable_weights)
    assert any(g is not None for g in grads), "no weight gets a gradient"
    for weight, grad in zip(model.trainable_weights, grads):
        if grad is not None:
            weight.assign_sub(tf.convert_to_tensor(grad))
    unchanged = [w.path for w, old, g in zip(model.trainable_weights, before,
                                             grads)
                 if g is not None and np.array_equal(np.array(w), old)]
    assert not unchanged, "a training step left these unchanged: %s" % unchanged


def _check_round_trips(cls, model, input_data, out, counts, check):
    """`get_config`/`from_config` and a `.keras` file give the same class,
    config, weight counts and outputs."""
    config = model.get_config()
    clone = cls.from_config(config)
    assert clone.get_config() == config
    assert clone.name == model.name
    copy_weights(model, clone)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        restored = keras.models.load_model(path)
    assert isinstance(restored, cls), type(restored)
    assert restored.get_config() == config
    for copy in (clone, restored):
        assert_nested_close(out, copy(input_data), atol=0)
        _check_weight_counts(copy, *counts)
        check(copy)


def _check_mixed_precision(cls, mixed_init_kwargs, model, input_data, out,
                           output_dtype, atol, counts, check):
    """Under `mixed_bfloat16` with `model`'s weights: float32 variables,
    the output dtypes, finite outputs within `atol` of `out`, and a policy
    that `get_config` keeps."""
    mixed = cls(**mixed_init_kwargs)
    copy_weights(model, mixed)
    _check_weight_counts(mixed, *counts)
    check(mixed)
    mixed_out = tf.function(lambda x: mixed(x), jit_compile=True)(input_data)
    wrong = _output_dtypes(mixed_out, output_dtype)
    assert not wrong, wrong
    assert all(v.dtype == "float32" for v in mixed.weights)
    assert all(np.isfinite(_as_float(t)).all() for t in _floats(mixed_out))
    assert_nested_close(out, mixed_out, atol=atol)
    clone = cls.from_config(mixed.get_config())
    wrong = _output_dtypes(clone(input_data), output_dtype)
    assert not wrong, wrong


def run_model_test(cls, init_kwargs, input_data, expected_output_shape,
                   expected_num_trainable_weights,
                   expected_num_non_trainable_weights=0,
                   mixed_init_kwargs=None, mixed_output_dtype="bfloat16",
                   has_dropout=True, xla_atol=1e-5, mixed_atol=0.15,
                   each_model=None):
    """Runs the common checks on the dict-output model `cls(**init_kwargs)`.

    Checks: output shapes and finite values; weight counts; inference
    deterministic, dropout only when training; `get_config`/`from_config`
    (same config, name and outputs); `.keras` save/load (an instance of
    `cls`, same config and outputs); XLA against eager; `mixed_bfloat16`
    (float32 variables, output dtypes, values within `mixed_atol`, the
    policy kept by `get_config`); and one training step that changes every
    trainable weight the loss reaches. The training step runs last: it
    changes the model's weights.

    Args:
        cls: the model class.
        init_kwargs: constructor arguments.
        input_data: the model's input (a dict of NumPy arrays).
        expected_output_shape: output name -> shape (a list of shapes for
            an output that is a list of tensors).
        expected_num_trainable_weights: how many distinct trainable
            variables the model holds.
        expected_num_non_trainable_weights: how many non-trainable ones.
        mixed_init_kwargs: constructor arguments of the `mixed_bfloat16`
            model; default `init_kwargs` with `dtype="mixed_bfloat16"`.
        mixed_output_dtype: output dtype under `mixed_bfloat16`, one for
            all outputs or a dict by output name (outputs that feed a loss
            are float32).
        has_dropout: whether `training=True` must change the outputs.
        xla_atol: tolerance between eager and XLA outputs.
        mixed_atol: tolerance between float32 and `mixed_bfloat16` outputs.
        each_model: a function called on every model built here (the
            model, its config clone, its loaded copy and the mixed one), for
            what the class promises of all of them; None for nothing.

    Returns:
        The float32 model, after its training step.
    """
    check = each_model or (lambda model: None)
    counts = (expected_num_trainable_weights,
              expected_num_non_trainable_weights)
    model = cls(**init_kwargs)
    out = model(input_data)
    expected = {name: [tuple(s) for s in shape] if isinstance(shape, list)
                else tuple(shape)
                for name, shape in expected_output_shape.items()}
    assert _shapes(out) == expected, _shapes(out)
    assert all(np.isfinite(_as_float(t)).all() for t in _floats(out))
    _check_weight_counts(model, *counts)
    check(model)
    # Inference is deterministic (dropout is checked by the training step).
    assert_nested_close(out, model(input_data, training=False), atol=0)

    _check_round_trips(cls, model, input_data, out, counts, check)

    # XLA compiles and agrees with eager.
    compiled = tf.function(lambda x: model(x), jit_compile=True)
    assert_nested_close(out, compiled(input_data), atol=xla_atol)

    if mixed_init_kwargs is None:
        mixed_init_kwargs = {**init_kwargs, "dtype": "mixed_bfloat16"}
    _check_mixed_precision(cls, mixed_init_kwargs, model, input_data, out,
                           mixed_output_dtype, mixed_atol, counts, check)

    _check_training_step(model, input_data, out, has_dropout)
    return model
