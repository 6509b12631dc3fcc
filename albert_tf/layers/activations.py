"""Activation functions by the names ALBERT config files use.

The official ALBERT code calls the tanh approximation of GELU "gelu" (Hugging Face
calls the same function "gelu_new"); `gelu_exact` is the erf form.

`gelu` carries its derivative in closed form: automatic differentiation of
the tanh formula gives about a dozen elementwise passes over the `[B, T, I]`
activations (and a `pow` that XLA on CPU evaluates slowly), the closed form
half as many. Values are those of the formula.
"""

import math

import keras
import tensorflow as tf

from albert_tf.config import ACTIVATION_NAMES
from albert_tf.layers.custom_gradient import with_gradient

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


def tanh_gelu_parts(x):
    """`(gelu(x), t, x^2)` of the tanh GELU, `t = tanh(c * (x + a x^3))`.

    `gelu(x) = x / 2 * (1 + t)`; `tanh_gelu_derivative` takes `t` and `x^2`.
    """
    x_squared = x * x
    t = tf.tanh(x * (_SQRT_2_OVER_PI + (_SQRT_2_OVER_PI * _CUBIC) * x_squared))
    return 0.5 * x * (1.0 + t), t, x_squared


def tanh_gelu_derivative(x, t, x_squared):
    """gelu'(x) = (1 + t) / 2 + x / 2 * (1 - t^2) * c * (1 + 3 a x^2)."""
    du_dx = _SQRT_2_OVER_PI + (3.0 * _SQRT_2_OVER_PI * _CUBIC) * x_squared
    return 0.5 * (1.0 + t) + (0.5 * x) * (1.0 - t * t) * du_dx


def _gelu_tanh_gradient(args, outputs, dys):
    _, t, x_squared = outputs
    return [dys[0] * tanh_gelu_derivative(args[0], t, x_squared)]


def gelu(x):
    """GELU, tanh approximation (the official ALBERT `gelu`)."""
    return with_gradient("AlbertTanhGelu", lambda x: list(tanh_gelu_parts(x)),
                         _gelu_tanh_gradient, [tf.convert_to_tensor(x)])[0]


def gelu_exact(x):
    """GELU, exact erf form."""
    return keras.activations.gelu(x, approximate=False)


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": gelu,
    "gelu_exact": gelu_exact,
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "swish": keras.activations.silu,
    "silu": keras.activations.silu,
    "linear": keras.activations.linear,
}

NAMES = ACTIVATION_NAMES
# The names of the tanh GELU (`fused_ops.bias_gelu` computes it).
TANH_GELU_NAMES = frozenset(("gelu", "gelu_new"))


def get(name):
    """Returns the activation function called `name`.

    Raises:
        ValueError: for an unknown name.
    """
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Unknown activation. Received: {name!r}. "
                         f"Known: {sorted(NAMES)}") from None


assert set(_ACTIVATIONS) == NAMES, "config.ACTIVATION_NAMES is out of date"
