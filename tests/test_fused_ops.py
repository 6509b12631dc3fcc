"""The fused kernels equal their plain formulas, values and gradients."""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import activations
from albert_tf.layers import fused_ops

M, W = 6, 40


def _random(shape, seed, dtype=tf.float32):
    return tf.cast(tf.random.stateless_normal(shape, (seed, 1)), dtype)


def _value_and_grads(fn, args, dy, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def run(*args):
        with tf.GradientTape() as tape:
            tape.watch(args)
            y = fn(*args)
        return y, tape.gradient(y, args, output_gradients=dy)

    return run(*args)


def _assert_close(actual, expected, atol):
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        np.testing.assert_allclose(np.asarray(tf.cast(a, tf.float32)),
                                   np.asarray(tf.cast(e, tf.float32)), atol=atol)


def _reference_bias_gelu(x, bias):
    return activations.gelu(x + bias)


def _reference_norm(h, residual, gamma, beta, bias=None):
    z = h + residual + (0.0 if bias is None else bias)
    mean, variance = tf.nn.moments(z, axes=[-1], keepdims=True)
    return (z - mean) * tf.math.rsqrt(variance + 1e-12) * gamma + beta


@pytest.mark.parametrize("jit_compile", [False, True])
def test_bias_gelu_matches_the_formula(jit_compile):
    x, bias, dy = _random((M, W), 0), _random((W,), 1), _random((M, W), 2)
    actual = _value_and_grads(fused_ops.bias_gelu, (x, bias), dy, jit_compile)
    expected = _value_and_grads(_reference_bias_gelu, (x, bias), dy, False)
    _assert_close(actual, expected, atol=1e-5)


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_residual_layer_norm_matches_the_formula(with_bias, jit_compile):
    args = [_random((M, W), 0), _random((M, W), 1), 1.0 + 0.3 * _random((W,), 2),
            0.3 * _random((W,), 3)]
    if with_bias:
        args.append(_random((W,), 4))
    dy = _random((M, W), 5)

    def fused(h, residual, gamma, beta, bias=None):
        return fused_ops.residual_layer_norm(h, residual, gamma, beta, 1e-12,
                                             bias=bias)

    actual = _value_and_grads(fused, tuple(args), dy, jit_compile)
    expected = _value_and_grads(_reference_norm, tuple(args), dy, False)
    _assert_close(actual, expected, atol=2e-5)


def test_bfloat16_in_bfloat16_out_float32_inside():
    x, bias, dy = (_random((M, W), 0, tf.bfloat16), _random((W,), 1, tf.bfloat16),
                   _random((M, W), 2, tf.bfloat16))
    y, (dx, d_bias) = _value_and_grads(fused_ops.bias_gelu, (x, bias), dy, False)
    assert y.dtype == dx.dtype == d_bias.dtype == tf.bfloat16
    # Against the float32 formula on the same (bfloat16-valued) inputs: only
    # the output rounding differs.
    up = [tf.cast(t, tf.float32) for t in (x, bias, dy)]
    expected = _value_and_grads(_reference_bias_gelu, tuple(up[:2]), up[2], False)
    _assert_close((y, dx), (expected[0], expected[1][0]), atol=2e-2)
    np.testing.assert_allclose(np.asarray(tf.cast(d_bias, tf.float32)),
                               np.asarray(expected[1][1]), rtol=1e-2, atol=2e-2)

    h, residual = _random((M, W), 3, tf.bfloat16), _random((M, W), 4, tf.bfloat16)
    gamma, beta = tf.ones((W,)), tf.zeros((W,))
    out = fused_ops.residual_layer_norm(h, residual, gamma, beta, 1e-12)
    assert out.dtype == tf.bfloat16
    _assert_close(out, _reference_norm(tf.cast(h, tf.float32),
                                       tf.cast(residual, tf.float32), gamma, beta),
                  atol=3e-2)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_integer_rounding_to_bfloat16_is_the_cast_bit_for_bit(jit_compile):
    # Every exponent, ties, subnormals, +-0, +-inf, the float32 maximum
    # (rounds to inf) and NaNs with any payload (stay NaN).
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    ties = (bits & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF,
                        0x7F800001, 0xFFC00000, 0x7FFFFFFF, 0x00000001,
                        0x007FFFFF, 0x3F80FFFF, 0x3F817FFF], np.uint32)
    x = tf.constant(np.concatenate([bits, ties, special]).view(np.float32))
    actual = tf.function(lambda x: fused_ops._narrow(x, tf.bfloat16),
                         jit_compile=jit_compile)(x)
    expected = tf.cast(x, tf.bfloat16)
    nan = np.isnan(x.numpy())
    assert np.isnan(tf.cast(actual, tf.float32).numpy()[nan]).all()
    np.testing.assert_array_equal(
        tf.bitcast(actual, tf.uint16).numpy()[~nan],
        tf.bitcast(expected, tf.uint16).numpy()[~nan])


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_masked_softmax_matches_the_formula(dtype):
    scores = _random((2, 3, 5, 7), 0, dtype) * 4
    mask = tf.constant([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]], tf.float32)
    penalty = (1.0 - mask) * -10000.0
    dy = _random((2, 3, 5, 7), 1, dtype)

    def reference(scores):
        z = tf.cast(scores, tf.float32) * 0.3 + penalty[:, None, None, :]
        return tf.cast(tf.nn.softmax(z, axis=-1), dtype)

    actual = _value_and_grads(lambda s: fused_ops.masked_softmax(s, penalty, 0.3),
                              (scores,), dy, False)
    expected = _value_and_grads(reference, (scores,), dy, False)
    assert actual[0].dtype == actual[1][0].dtype == dtype
    _assert_close(actual, expected, atol=1e-6 if dtype == tf.float32 else 1e-2)
    assert np.all(np.asarray(actual[0])[0, :, :, 5:] == 0)


def test_a_constant_row_normalizes_to_beta():
    h = tf.fill((2, W), 3.0)
    beta = _random((W,), 1)
    out = fused_ops.residual_layer_norm(h, tf.zeros_like(h), tf.ones((W,)), beta,
                                        1e-12)
    assert np.all(np.isfinite(out))
    _assert_close(out, tf.stack([beta, beta]), atol=1e-6)


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("uses", [None, (3, 1), (5, 1), (2, 1)])
def test_cast_once_gives_the_values_and_gradients_of_a_cast_per_use(jit_compile, uses):
    # uses: exact counts, more than the reads (unused ones), fewer (the rest
    # fall back to one cast gradient per read).
    kernel = tf.Variable(_random((W, W), 0))
    other = tf.Variable(_random((W, W), 1))
    x = _random((M, W), 2, tf.bfloat16)

    @tf.function(jit_compile=jit_compile)
    def run(cached):
        with tf.GradientTape() as tape:
            with (fused_ops.cast_once([kernel, other], tf.bfloat16, uses=uses)
                  if cached else contextlib.nullcontext()):
                h = x
                for _ in range(3):  # three uses of the shared kernel
                    h = tf.tanh(tf.matmul(
                        h, fused_ops.cast_variable(kernel, tf.bfloat16)))
                h = tf.matmul(h, fused_ops.cast_variable(other, tf.bfloat16))
            loss = tf.reduce_sum(tf.cast(h, tf.float32) * tf.range(W, dtype=tf.float32))
        grads = tape.gradient(loss, [kernel, other])
        return h, grads

    h_cached, grads_cached = run(True)
    h_plain, grads_plain = run(False)
    assert grads_cached[0].dtype == tf.float32
    _assert_close(h_cached, h_plain, atol=0)
    for cached, plain in zip(grads_cached, grads_plain):
        np.testing.assert_allclose(cached, plain, rtol=1e-6, atol=1e-6)


def test_cast_once_leaves_float32_alone():
    kernel = tf.Variable(_random((W, W), 0))
    with fused_ops.cast_once([kernel], tf.float32):
        value = fused_ops.cast_variable(kernel, tf.float32)
        half = fused_ops.cast_variable(kernel, tf.bfloat16)
    assert value.dtype == tf.float32 and half.dtype == tf.bfloat16
    _assert_close(value, kernel, atol=0)


def test_kernels_trace_with_unknown_shapes():
    # An exported training signature traces with unknown batch and length.
    matrix = tf.TensorSpec([None, W], tf.bfloat16)
    scores_spec = tf.TensorSpec([None, None, None, None], tf.bfloat16)

    @tf.function(input_signature=[matrix, matrix, scores_spec,
                                  tf.TensorSpec([None, None], tf.float32)])
    def run(x, residual, scores, penalty):
        with tf.GradientTape() as tape:
            tape.watch([x, scores])
            h = fused_ops.bias_gelu(x, tf.zeros([W]))
            h = fused_ops.residual_layer_norm(h, residual, tf.ones([W]), tf.zeros([W]),
                                              1e-12)
            probs = fused_ops.masked_softmax(scores, penalty, 0.5)
        return h, probs, tape.gradient([h, probs], [x, scores])

    x, residual = _random((M, W), 0, tf.bfloat16), _random((M, W), 1, tf.bfloat16)
    scores = _random((2, 3, 4, 5), 2, tf.bfloat16)
    h, probs, (dx, d_scores) = run(x, residual, scores, tf.zeros((2, 5)))
    assert (h.shape == dx.shape == (M, W)
            and probs.shape == d_scores.shape == (2, 3, 4, 5))
    np.testing.assert_allclose(tf.reduce_sum(tf.cast(probs, tf.float32), -1), 1.0,
                               atol=2e-2)


def _all_four(x, residual, scores, penalty, kernel):
    """Each fused op once (cast_once's fan-out through `kernel`'s two
    uses); a scalar of all their outputs."""
    with fused_ops.cast_once([kernel], tf.bfloat16, uses=[2]):
        first = fused_ops.cast_variable(kernel, tf.bfloat16)
        second = fused_ops.cast_variable(kernel, tf.bfloat16)
    h = fused_ops.bias_gelu(tf.matmul(x, first), tf.ones([W], tf.bfloat16))
    h = fused_ops.residual_layer_norm(tf.matmul(h, second), residual, tf.ones([W]),
                                      tf.zeros([W]), 1e-12, bias=tf.zeros([W]))
    probs = fused_ops.masked_softmax(scores, penalty, 0.5)
    weights = tf.range(W, dtype=tf.float32)
    return (tf.reduce_sum(tf.cast(h, tf.float32) * weights)
            + tf.reduce_sum(tf.cast(probs, tf.float32) * tf.range(5.0)))


def _four_inputs():
    return (_random((M, W), 0, tf.bfloat16), _random((M, W), 1, tf.bfloat16),
            _random((2, 3, 4, 5), 2, tf.bfloat16), tf.zeros((2, 5)))


def test_every_way_of_differentiating_gives_the_same_gradients():
    """A tape eagerly, a tape in a function, `tf.gradients` in a function
    (the graph's own gradient registry), and a tape over a nested function
    (whose gradient TensorFlow derives from the inner graph)."""
    kernel = tf.Variable(_random((W, W), 3))
    inputs = _four_inputs()
    sources = [inputs[0], inputs[2], kernel]

    def taped(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs[0:3:2])
            loss = _all_four(*inputs, kernel)
        return tape.gradient(loss, [inputs[0], inputs[2], kernel])

    def symbolic(*inputs):
        return tf.gradients(_all_four(*inputs, kernel),
                            [inputs[0], inputs[2], kernel.handle])

    inner = tf.function(lambda *inputs: _all_four(*inputs, kernel))

    def nested(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs[0:3:2])
            loss = inner(*inputs)
        return tape.gradient(loss, [inputs[0], inputs[2], kernel])

    expected = taped(*inputs)
    assert [g.dtype for g in expected] == [s.dtype for s in sources]
    for way in (tf.function(taped), tf.function(symbolic), tf.function(nested)):
        _assert_close(way(*inputs), expected, atol=1e-3)


def test_a_traced_step_is_freed_with_its_function():
    """`tf.custom_gradient` would keep every graph that calls a fused op
    alive for the life of the process (its gradient registry holds each
    call's tensors)."""
    import gc
    import weakref

    kernel = tf.Variable(_random((W, W), 3))

    @tf.function
    def step(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = _all_four(*inputs, kernel)
        return tape.gradient(loss, kernel)

    graph = weakref.ref(step.get_concrete_function(*_four_inputs()).graph)
    assert graph() is not None
    del step
    gc.collect()
    assert graph() is None
