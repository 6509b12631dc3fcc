import math

import numpy as np
import pytest

from albert_tf import activations


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
    np.testing.assert_allclose(activations.get("gelu_exact")(x), _gelu_erf(x), atol=1e-6)
    # The two forms differ measurably, so a mix-up would show.
    assert np.abs(_gelu_tanh(x) - _gelu_erf(x)).max() > 1e-4


def test_unknown_activation_names_the_value():
    with pytest.raises(ValueError, match="'swiglu'"):
        activations.get("swiglu")
