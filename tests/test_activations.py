import math

import numpy as np
import pytest

from albert_tf.layers import activations


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_erf(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def test_gelu_is_the_tanh_approximation():
    x = np.linspace(-5, 5, 101).astype("float32")
    np.testing.assert_allclose(activations.get("gelu")(x), _gelu_tanh(x), atol=1e-6)
    np.testing.assert_allclose(activations.get("gelu_new")(x), _gelu_tanh(x), atol=1e-6)


def test_gelu_exact_is_the_erf_form():
    x = np.linspace(-5, 5, 101).astype("float32")
    np.testing.assert_allclose(activations.get("gelu_exact")(x), _gelu_erf(x),
                               atol=1e-6)
    # The two forms differ measurably, so a mix-up would show.
    assert np.abs(_gelu_tanh(x) - _gelu_erf(x)).max() > 1e-4


def test_unknown_activation_names_the_value():
    with pytest.raises(ValueError, match="'swiglu'"):
        activations.get("swiglu")


def test_gelu_gradient_is_the_derivative_of_the_formula():
    import tensorflow as tf

    x = tf.constant(np.linspace(-6, 6, 241), tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = activations.gelu(x)
    grad = tape.gradient(
        y, x, output_gradients=tf.fill(x.shape, tf.constant(2.0, tf.float64))
    ).numpy()
    eps = 1e-6
    numeric = (_gelu_tanh(x.numpy() + eps) - _gelu_tanh(x.numpy() - eps)) / (2 * eps)
    np.testing.assert_allclose(grad, 2.0 * numeric, atol=1e-8)

    # Float32, compiled with XLA: agrees with autodiff of the formula.
    x32 = tf.cast(x, tf.float32)

    @tf.function(jit_compile=True)
    def both(x):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            ours = activations.gelu(x)
            formula = 0.5 * x * (1.0 + tf.tanh(
                math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        return tape.gradient(ours, x), tape.gradient(formula, x)

    ours, formula = both(x32)
    np.testing.assert_allclose(ours, formula, atol=1e-5)
