"""Fused elementwise kernels for the training step.

TensorFlow runs each elementwise op of a formula as its own pass over memory,
and on CPUs in bfloat16 every pass also converts each element to float and
back: the backward of bias + GELU is about a dozen passes over the `[B*T, I]`
activations, and bias + residual + LayerNorm another dozen over `[B*T, H]`.
Here the forward and the backward of each formula are one XLA-compiled
function each (a single fused loop, float32 arithmetic inside, inputs and
outputs in the caller's dtype), joined by `custom_gradient.with_gradient`.
The values are
those of the plain formulas up to float32 rounding; bias gradients are summed
in float32.

When these kernels run is decided in one place, `albert_tf.layers.fused_dispatch`
(`use_fused`): the training step on a CPU outside XLA. XLA compiles a kernel
for every new input shape, which a training run (fixed batch shapes) pays
once and a serving signature fed many shapes would pay on every new one; and
under an outer XLA compilation (TPUs, GPUs, `jit_compile=True`) XLA fuses the
plain formulas itself.

`cast_once` is the other saving: ALBERT's shared kernels are used by every
layer, and mixed precision casts them to bfloat16 at each use, then casts
each use's gradient to float32 and sums them (twelve passes each way on
ALBERT-base); here the kernel is cast once and the twelve bfloat16
gradients are summed in float32 by one fused loop.

Shape legend: M rows (batch x length), I or H the feature width.
"""

import contextlib
import threading

import tensorflow as tf

from albert_tf.layers import activations
from albert_tf.layers.custom_gradient import with_gradient


def _narrow(x, dtype):
    """Float32 `x` as `dtype`; to bfloat16 by integer round-to-nearest-even.

    The same bits as `tf.cast` (NaN stays NaN). XLA's CPU backend converts
    to bfloat16 one element at a time, which keeps the whole fused loop from
    being vectorized; integer ops do not.
    """
    if dtype != tf.bfloat16:
        return tf.cast(x, dtype)
    bits = tf.bitcast(x, tf.uint32)
    odd = tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, 16), 1)
    rounded = tf.bitwise.right_shift(bits + (0x7FFF + odd), 16)
    quiet_nan = tf.bitwise.bitwise_or(tf.bitwise.right_shift(bits, 16), 0x40)
    bits = tf.where(tf.math.is_nan(x), quiet_nan, rounded)
    return tf.bitcast(tf.cast(bits, tf.uint16), tf.bfloat16)


@tf.function(jit_compile=True, autograph=False)
def _bias_gelu_forward(x, bias):
    y, _, _ = activations.tanh_gelu_parts(
        tf.cast(x, tf.float32) + tf.cast(bias, tf.float32))
    return _narrow(y, x.dtype)


@tf.function(jit_compile=True, autograph=False)
def _bias_gelu_backward(x, bias, dy):
    z = tf.cast(x, tf.float32) + tf.cast(bias, tf.float32)
    _, t, z_squared = activations.tanh_gelu_parts(z)
    dz = tf.cast(dy, tf.float32) * activations.tanh_gelu_derivative(z, t, z_squared)
    return _narrow(dz, x.dtype), tf.cast(tf.reduce_sum(dz, axis=0), bias.dtype)


def _bias_gelu_gradient(args, outputs, dys):
    del outputs
    return _bias_gelu_backward(*args, dys[0])


def bias_gelu(x, bias):
    """`gelu(x + bias)` with the official tanh GELU, fused.

    Args:
        x: float `[M, I]` (a matmul output).
        bias: `[I]`.

    Returns:
        `[M, I]` in `x`'s dtype.
    """
    return with_gradient("AlbertBiasGelu", lambda *args: [_bias_gelu_forward(*args)],
                         _bias_gelu_gradient,
                         [tf.convert_to_tensor(x), tf.convert_to_tensor(bias)])[0]


def _row_sum(x, scale=1.0):
    """`scale` times the sum over the last axis, kept: `[..., 1]`.

    A matrix-vector product: XLA's CPU backend runs it faster than its row
    reduction.
    Shapes may be dynamic (an exported training signature).
    """
    width = tf.shape(x)[-1]
    weights = tf.fill(tf.stack([width, 1]), tf.cast(scale, x.dtype))
    rows = tf.matmul(tf.reshape(x, tf.stack([-1, width])), weights)
    return tf.reshape(rows, tf.concat([tf.shape(x)[:-1], [1]], 0))


def _row_mean(x):
    return _row_sum(x, 1.0 / tf.cast(tf.shape(x)[-1], tf.float32))


def _normalize(h, bias, residual, epsilon):
    """Float32 `(x_hat, 1/std)` of LayerNorm over `h + bias + residual`."""
    z = tf.cast(h, tf.float32) + tf.cast(residual, tf.float32)
    if bias is not None:
        z += tf.cast(bias, tf.float32)
    centered = z - _row_mean(z)
    inv_std = tf.math.rsqrt(_row_mean(centered * centered) + epsilon)
    return centered * inv_std, inv_std


@tf.function(jit_compile=True, autograph=False)
def _layer_norm_forward(h, bias, residual, gamma, beta, epsilon):
    x_hat, _ = _normalize(h, bias, residual, epsilon)
    return _narrow(x_hat * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32),
                   h.dtype)


@tf.function(jit_compile=True, autograph=False)
def _layer_norm_backward(h, bias, residual, gamma, epsilon, dy):
    x_hat, inv_std = _normalize(h, bias, residual, epsilon)
    dy = tf.cast(dy, tf.float32)
    d_x_hat = dy * tf.cast(gamma, tf.float32)
    dz = inv_std * (d_x_hat - _row_mean(d_x_hat) - x_hat * _row_mean(d_x_hat * x_hat))
    d_gamma = tf.cast(tf.reduce_sum(dy * x_hat, axis=0), gamma.dtype)
    d_beta = tf.cast(tf.reduce_sum(dy, axis=0), gamma.dtype)
    d_bias = None if bias is None else tf.cast(tf.reduce_sum(dz, axis=0), bias.dtype)
    return _narrow(dz, h.dtype), d_bias, d_gamma, d_beta


def _residual_layer_norm_gradient(epsilon, with_bias):
    """The gradient of `residual_layer_norm` with these parameters."""
    def gradient(args, outputs, dys):
        del outputs
        h, residual, gamma = args[:3]
        bias = args[4] if with_bias else None
        dh, d_bias, d_gamma, d_beta = _layer_norm_backward(
            h, bias, residual, gamma, epsilon, dys[0])
        # d(h + bias + residual) is one tensor: written once, used twice.
        d_residual = dh if residual.dtype == dh.dtype else tf.cast(dh, residual.dtype)
        grads = [dh, d_residual, d_gamma, d_beta]
        return grads + [d_bias] if with_bias else grads

    return gradient


def residual_layer_norm(h, residual, gamma, beta, epsilon, bias=None):
    """`LayerNorm(h + bias + residual)` over the last axis, fused.

    Args:
        h: float `[M, H]` (a sub-block's output projection).
        residual: `[M, H]`, the sub-block's input.
        gamma, beta: float32 `[H]` LayerNorm scale and offset.
        epsilon: the LayerNorm epsilon (a Python float).
        bias: optional `[H]` added to `h` first.

    Returns:
        `[M, H]` in `h`'s dtype.
    """
    epsilon, with_bias = float(epsilon), bias is not None
    args = [tf.convert_to_tensor(v) for v in (h, residual, gamma, beta)]
    if with_bias:
        args.append(tf.convert_to_tensor(bias))

    def forward(h, residual, gamma, beta, bias=None):
        return [_layer_norm_forward(h, bias, residual, gamma, beta, epsilon)]

    # The gradient's name carries its parameters: one registration each.
    return with_gradient("AlbertResidualLayerNorm_%r_%s" % (epsilon, with_bias),
                         forward,
                         _residual_layer_norm_gradient(epsilon, with_bias), args)[0]


@tf.function(jit_compile=True, autograph=False)
def _masked_softmax_forward(scores, penalty, scale):
    z = tf.cast(scores, tf.float32) * scale + penalty[:, None, None, :]
    e = tf.exp(z - tf.reduce_max(z, axis=-1, keepdims=True))
    return _narrow(e / _row_sum(e), scores.dtype)


@tf.function(jit_compile=True, autograph=False)
def _masked_softmax_backward(probs, d_probs, scale):
    p = tf.cast(probs, tf.float32)
    dp = tf.cast(d_probs, tf.float32)
    return _narrow(scale * p * (dp - _row_sum(dp * p)), probs.dtype)


def masked_softmax(scores, penalty, scale=1.0):
    """`softmax(scale * scores + penalty[:, None, None, :])` over the last axis, fused.

    Args:
        scores: `[B, N, T, S]` attention scores.
        penalty: float32 `[B, S]`, added at every query (0 or the mask penalty).
        scale: a Python float multiplying the scores (in float32).

    Returns:
        `[B, N, T, S]` in `scores`' dtype, computed in float32.
    """
    scale = float(scale)

    def gradient(args, outputs, dys):
        del args
        return _masked_softmax_backward(outputs[0], dys[0], scale), None

    return with_gradient(
        "AlbertMaskedSoftmax_%r" % scale,
        lambda s, p: [_masked_softmax_forward(s, p, scale)], gradient,
        [tf.convert_to_tensor(scores), tf.convert_to_tensor(penalty)])[0]


_CACHE = threading.local()


@tf.function(jit_compile=True, autograph=False)
def _sum_in_float32(*grads):
    return tf.add_n([tf.cast(g, tf.float32) for g in grads])


def _fan_out(value, cast_value, count):
    """`count` uses of `cast_value` (the cast of `value`).

    Their gradients reach `value` in its own dtype, summed there (several:
    by one fused float32 loop), never in half precision.
    """

    return with_gradient("AlbertFanOut",
                         lambda value, cast_value: [tf.identity(cast_value)] * count,
                         _fan_out_gradient, [value, cast_value])


def _fan_out_gradient(args, outputs, dys):
    del outputs
    value = args[0]
    dys = [dy for dy in dys if dy is not None]
    if not dys:
        return tf.zeros_like(value), None
    total = dys[0] if len(dys) == 1 else _sum_in_float32(*dys)
    return tf.cast(total, value.dtype), None


@contextlib.contextmanager
def cast_once(variables, dtype, uses=None):
    """Within the block, `cast_variable(v, dtype)` reuses one cast of each `v`.

    Reads and casts every variable on entry, so use it around one forward
    pass with no variable updates inside. Each use is an identity of the
    cached cast whose gradient reaches the variable in its own dtype, so
    the uses' gradients add up there, not in half precision: gradients are
    those of a cast at every use. With `uses`, the first `uses[i]` reads of
    `variables[i]` have their gradients summed by one fused loop (float32
    accumulation) instead of a cast each and a sum. Must be entered outside
    any layer call (there Keras would hand out the variables already cast);
    variables read as another dtype are skipped.

    Args:
        variables: Keras or TF variables.
        dtype: the compute dtype; nothing is cached when it is the
            variables' own.
        uses: optional, how many times each variable will be read.
    """
    cache = {}
    for i, variable in enumerate(variables):
        value = tf.convert_to_tensor(variable)
        if value.dtype != tf.as_dtype(dtype) and value.dtype == variable.dtype:
            cast_value = tf.cast(value, dtype)
            count = uses[i] if uses is not None else 0
            fanned = _fan_out(value, cast_value, count) if count > 1 else []
            cache[id(variable)] = (value, cast_value, fanned)
    previous = getattr(_CACHE, "entries", None)
    _CACHE.entries = cache
    try:
        yield
    finally:
        _CACHE.entries = previous


def cast_variable(variable, dtype):
    """`variable` cast to `dtype`, from `cast_once`'s cache when it has it."""
    entry = (getattr(_CACHE, "entries", None) or {}).get(id(variable))
    if entry is None or entry[1].dtype != tf.as_dtype(dtype):
        return tf.cast(variable, dtype)
    value, cast_value, fanned = entry
    if fanned:
        return fanned.pop(0)
    return _fan_out(value, cast_value, 1)[0]
