"""The device-aware kernel policy: fused CPU kernels or the plain formulas.

The transformer sub-blocks compute three formulas through this module:
attention probabilities, bias + activation, and bias + dropout + residual +
LayerNorm. Each function here computes one formula, and `use_fused` decides,
in one place, how:

- the kernels of `fused_ops` (one XLA-compiled loop per formula and
  direction, float32 inside) for the training step on a CPU without an outer
  XLA compilation, where they run faster than TensorFlow's op per op
  (docs/benchmarks.md, "Fused CPU kernels");
- the plain formulas everywhere else: inference (XLA would compile a fused
  kernel for every new serving shape), any step compiled with
  `jit_compile=True` (on a CPU, a GPU or a TPU: XLA fuses the plain formulas
  itself, and on accelerators it can use its own fused attention), and any
  machine with a GPU or TPU (the fused kernels hold CPU tricks: integer
  bfloat16 rounding, row sums as matmuls, a full float32 softmax).

Both ways give the same values up to float32 rounding (tests compare them).

Shape legend: B batch, N heads, T query and S key lengths, M rows, H width.
"""

import contextlib
import functools

import tensorflow as tf
from keras import ops

# The one way to know, while tracing, that an outer function is compiled by
# XLA (`tf.function(jit_compile=True)`, Keras `jit_compile`, TPU replication).
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.ops import control_flow_util

from albert_tf.layers import activations
from albert_tf.layers import fused_ops


@functools.lru_cache(maxsize=None)
def _has_accelerator():
    return any(tf.config.list_logical_devices(kind) for kind in ("GPU", "TPU"))


def in_xla_context():
    """Whether the code being traced will be compiled by XLA."""
    return control_flow_util.GraphOrParentsInXlaContext(
        tf_ops.get_default_graph())


def use_fused(training):
    """Whether this call runs the fused CPU kernels (the policy's one switch).

    Args:
        training: the layer's `training` argument.

    Returns:
        True for a training call (`training is True`) traced outside XLA on
        a machine with no GPU or TPU; False otherwise.
    """
    return (training is True and not in_xla_context()
            and not _has_accelerator())


def cast_kernel(layer, dtype):
    """`layer.kernel` in `dtype` (from `cast_once`'s cache inside it)."""
    return fused_ops.cast_variable(layer.kernel, dtype)


def is_int8(layer):
    """Whether Keras' `quantize("int8")` has quantized the Dense `layer`."""
    return getattr(layer, "quantization_mode", None) == "int8"


def project(x, layers, dtype):
    """`x` `[M, K]` times the kernels of the Dense `layers` side by side
    (`[K, sum of their units]`), without the biases.

    Float layers multiply in `dtype`. Layers quantized by Keras'
    `quantize("int8")` (int8 kernels with a scale per output unit) multiply
    in int8: each row of `x` is quantized on the fly with its own scale
    (absolute maximum to 127), the int8 product is summed in int32 and
    scaled back to `dtype`.
    """
    quantized = [is_int8(layer) for layer in layers]
    if not any(quantized):
        weights = [cast_kernel(layer, dtype) for layer in layers]
        weights = weights[0] if len(weights) == 1 else ops.concatenate(
            weights, axis=-1)
        return ops.matmul(x, weights)
    if not all(quantized):
        raise ValueError("Layers multiplied together must all be int8 or all "
                         "float. Received: %s" % [layer.name for layer in layers])
    weights = [layer._kernel for layer in layers]
    scales = [layer.kernel_scale for layer in layers]
    if len(layers) > 1:
        weights, scales = (tf.concat(weights, -1), tf.concat(scales, -1))
    else:
        weights, scales = weights[0], scales[0]
    return int8_matmul(x, weights, scales, dtype)


def int8_matmul(x, kernel_int8, kernel_scale, dtype):
    """`x` `[M, K]` (float) times an int8 kernel `[K, N]` whose column j is
    the float column times `kernel_scale[j]`; rows of `x` are quantized by
    their absolute maximum. Returns `[M, N]` in `dtype`."""
    x = tf.cast(x, tf.float32)
    x_scale = 127.0 / (tf.reduce_max(tf.abs(x), axis=-1, keepdims=True)
                       + 1e-7)  # [M, 1]
    x_int8 = tf.cast(tf.clip_by_value(tf.round(x * x_scale), -127.0, 127.0),
                     tf.int8)
    y = tf.linalg.matmul(x_int8, kernel_int8, output_type=tf.int32)
    return tf.cast(tf.cast(y, tf.float32) / (x_scale * kernel_scale), dtype)


def cast_once(variables, dtype, uses, training):
    """`fused_ops.cast_once` where the fused kernels run, else nothing.

    Under XLA the casts and the gradient sums fuse anyway.
    """
    if use_fused(training):
        return fused_ops.cast_once(variables, dtype, uses=uses)
    return contextlib.nullcontext()


def attention_probs(q, k, penalty, scale, compute_dtype, training):
    """`softmax(scale * q k^T + penalty)` over keys, in float32.

    Args:
        q: `[B, N, T, D]`; k: `[B, N, S, D]`.
        penalty: float32 `[B, S]` (0 at real keys, the mask penalty at
            padding), or None.
        scale: a Python float.
        compute_dtype: the dtype of the returned probabilities.
        training: the layer's `training` argument.

    Returns:
        `[B, N, T, S]` in `compute_dtype`.
    """
    # Softmax in float32 both ways: half-precision exp/sum loses too much.
    if use_fused(training):
        if penalty is None:
            penalty = tf.zeros([tf.shape(k)[0], tf.shape(k)[2]])
        # The scale is applied to the float32 scores inside the kernel.
        return fused_ops.masked_softmax(tf.matmul(q, k, transpose_b=True),
                                        penalty, scale)
    scores = ops.cast(tf.matmul(q * ops.cast(scale, q.dtype), k,
                                transpose_b=True), "float32")
    if penalty is not None:
        # [B, 1, 1, S]: expand_dims, which LiteRT converts with B and S
        # both dynamic (a new-axis slice it cannot).
        scores = scores + tf.expand_dims(tf.expand_dims(penalty, 1), 1)
    return ops.cast(ops.softmax(scores, axis=-1), compute_dtype)


def bias_activation(h, bias, activation, training):
    """`activation(h + bias)`; the official tanh GELU fused where it can be.

    Args:
        h: `[M, I]` (a matmul output); bias: `[I]`.
        activation: an activation name of `albert_tf.layers.activations`.
        training: the layer's `training` argument.
    """
    bias = ops.cast(bias, h.dtype)
    if activation in activations.TANH_GELU_NAMES:
        if use_fused(training):
            return fused_ops.bias_gelu(h, bias)
        if training is not True and not in_xla_context():
            # The graph runtime fuses MatMul + BiasAdd + this GELU into one
            # oneDNN call (same formula); XLA gets the closed form below,
            # whose `pow`-free cube it compiles faster.
            return tf.nn.gelu(tf.nn.bias_add(h, bias), approximate=True)
    return activations.get(activation)(h + bias)


def add_norm(sub_block, h, bias, residual, training):
    """`LayerNorm(dropout(h + bias) + residual)` of `[M, H]` tensors.

    Args:
        sub_block: the sub-block owning `output_dropout` and `layer_norm`
            (and its `dropout` rate).
        h: `[M, H]`, the output projection before its bias.
        bias: `[H]`.
        residual: `[M, H]`, the sub-block's input.
        training: the layer's `training` argument (dropout acts when True).
    """
    bias = ops.cast(bias, h.dtype)
    if not use_fused(training):
        out = sub_block.output_dropout(tf.nn.bias_add(h, bias),
                                       training=training)
        return sub_block.layer_norm(out + residual)
    # With dropout active the bias is added before it, outside the kernel.
    if sub_block.dropout > 0:
        h = sub_block.output_dropout(h + bias, training=training)
        bias = None
    norm = sub_block.layer_norm
    return fused_ops.residual_layer_norm(
        h, residual, norm.gamma, norm.beta, norm.epsilon, bias=bias)
