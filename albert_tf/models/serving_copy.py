"""Copies of a model that compute in a serving precision.

Serving dtypes (`albert_tf.models.serving_dtypes.SERVING_DTYPES`):

- "float32": the model computes in float32 (a model trained under
  `mixed_bfloat16` is copied to float32).
- "bfloat16": a copy whose layers compute in bfloat16 and hold their
  weights in bfloat16 (half the bytes, and no cast of every weight at every
  call). Attention's softmax and LayerNorm's statistics stay in float32
  (`fused_dispatch.attention_probs`, Keras' `LayerNormalization`).
- "int8": a float32 copy whose Dense layers Keras' `quantize("int8")` has
  quantized: int8 kernels with one scale per output unit, and activations
  quantized per row (token) on the fly by their absolute maximum. The
  transformer sub-blocks multiply them in `fused_dispatch.project`; the embedding
  projection, the pooler and the heads in Keras' own int8 `Dense` call.
  LayerNorm, softmax, GELU, the embedding tables and the tied MLM output
  stay float32. TensorFlow's own int8 matmul kernel is slower than its
  float32 one, so an int8 model is fast only compiled by XLA
  (`needs_xla`).

The copy is made from the model's config (`get_config`), with every dtype
policy in it replaced, and gets the model's weights; the model itself is
never changed.
"""

import contextlib
import gc

import keras
import tensorflow as tf

from albert_tf.models.serving_dtypes import SERVING_DTYPES

# The policy each serving dtype builds its copy under.
_POLICIES = {"float32": "float32", "bfloat16": "bfloat16", "int8": "float32"}
_POLICY_CLASSES = ("DTypePolicy", "FloatDTypePolicy")


def check_serving_dtype(serving_dtype, allowed=SERVING_DTYPES):
    """Returns `serving_dtype` if it is one of `allowed`.

    Raises:
        ValueError: anything else, naming the accepted values.
    """
    if serving_dtype not in allowed:
        raise ValueError("serving_dtype must be one of %s. Received: "
                         "serving_dtype=%r" % (", ".join(allowed),
                                               serving_dtype))
    return serving_dtype


def needs_xla(serving_dtype):
    """Whether a model of `serving_dtype` must run compiled by XLA to be
    fast (int8: TensorFlow's own int8 matmul is slower than float32)."""
    return check_serving_dtype(serving_dtype) == "int8"


def _with_policy(config, policy):
    """`config` (a serialized Keras object) with every dtype policy in it
    replaced by `policy`; other dtypes (int32 inputs) are kept."""
    if isinstance(config, dict):
        if config.get("class_name") in _POLICY_CLASSES and \
                config.get("module") == "keras":
            return keras.dtype_policies.serialize(
                keras.dtype_policies.get(policy))
        return {key: _with_policy(value, policy)
                for key, value in config.items()}
    if isinstance(config, list):
        return [_with_policy(value, policy) for value in config]
    return config


def _policies(config, found=None):
    """The names of the dtype policies in a serialized Keras object."""
    found = set() if found is None else found
    if isinstance(config, dict):
        if config.get("class_name") in _POLICY_CLASSES and \
                config.get("module") == "keras":
            found.add(config["config"]["name"])
        for value in config.values():
            _policies(value, found)
    elif isinstance(config, list):
        for value in config:
            _policies(value, found)
    return found


def _copy(model, policy):
    """A new model from `model`'s config under `policy`, with its weights."""
    config = _with_policy(keras.saving.serialize_keras_object(model), policy)
    copy = keras.saving.deserialize_keras_object(config)
    if len(copy.weights) != len(model.weights):
        raise ValueError(
            "The copy of %s under %s has %d weights, the model %d: its "
            "get_config does not rebuild it." % (
                model.name, policy, len(copy.weights), len(model.weights)))
    for target, source in zip(copy.weights, model.weights):
        if tuple(target.shape) != tuple(source.shape):
            raise ValueError("Weight %s of the copy has shape %s, the "
                             "model's %s has %s." % (
                                 target.path, tuple(target.shape),
                                 source.path, tuple(source.shape)))
        target.assign(tf.cast(source.value, target.dtype))
    return copy


@contextlib.contextmanager
def _without_collections():
    """Runs the block with `gc.collect` a no-op.

    Keras' `Layer.__delattr__` runs a full `gc.collect()` for every variable
    it deletes, so that an accelerator frees the buffer at once, and
    `Dense.quantize` deletes each float kernel. In a process that holds
    traced graphs a collection takes a good part of a second, and ALBERT
    has a Dense layer per projection: the collections cost more than the
    rest of the quantization. The float kernels are freed by reference
    counting all the same.
    """
    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        yield
    finally:
        gc.collect = collect


def _is_dense(layer):
    return type(layer) is keras.layers.Dense


def serving_copy(model, serving_dtype):
    """`model` computing in `serving_dtype` (see the module docstring).

    Args:
        model: a Keras model of this package built from its config (an
            `AlbertEncoder`, `AlbertPretrainer`, a task or text model).
        serving_dtype: one of `SERVING_DTYPES`.

    Returns:
        `model` itself when it already computes in float32 and
        `serving_dtype` is "float32"; otherwise a new model with its
        weights (the model is not changed).

    Raises:
        ValueError: an unknown `serving_dtype`.
    """
    check_serving_dtype(serving_dtype)
    policy = _POLICIES[serving_dtype]
    if serving_dtype == "float32" and _policies(
            keras.saving.serialize_keras_object(model)) <= {"float32"}:
        return model
    copy = _copy(model, policy)
    if serving_dtype == "int8":
        with _without_collections():
            copy.quantize("int8", filters=_is_dense)
    return copy
