"""Activation functions by the names ALBERT config files use.

The official ALBERT code calls the tanh approximation of GELU "gelu" (Hugging Face
calls the same function "gelu_new"); `gelu_exact` is the erf form.
"""

import keras


def gelu(x):
    """GELU, tanh approximation (the official ALBERT `gelu`)."""
    return keras.activations.gelu(x, approximate=True)


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

NAMES = frozenset(_ACTIVATIONS)


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
