"""The post-LN transformer block, split in the two sub-blocks that can be shared.

`SelfAttentionSubBlock` and `FeedForwardSubBlock` each own the LayerNorm that
follows them, so the paper's shared-attention and shared-FFN ablations share a
sub-block together with its LayerNorm. `TransformerBlock` chains the two.

Shape legend: B batch, T (query) and S (key) lengths, H hidden width, N heads,
D head width (H / N), I intermediate width.
"""

import math

import keras
from keras import ops

from albert_tf.layers import activations
from albert_tf.layers import fused_dispatch

# Added to attention scores at padded key positions (official value).
_MASK_PENALTY = -10000.0


def _truncated_normal(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="albert_tf")
class SelfAttentionSubBlock(keras.layers.Layer):
    """Multi-head self-attention, output projection, dropout, residual, LayerNorm.

    Call arguments:
        x: float `[B, T, H]`.
        padding_mask: int or bool `[B, T]`, 1 at real tokens; None attends everywhere.
        training: enables dropout.
        query_positions: optional int `[B, Q]`: compute the output at these
            positions only (keys and values still cover all of `x`). The
            pretraining step uses it in the last block, whose output it
            needs only at [CLS] and the masked positions.

    Returns:
        float `[B, T, H]` (`[B, Q, H]` with `query_positions`):
        `LayerNorm(dropout(attention(x)) + x)`.

    Example:

    ```python
    import numpy as np
    from albert_tf import SelfAttentionSubBlock

    attention = SelfAttentionSubBlock(hidden_size=32, num_heads=4)
    x = np.random.default_rng(0).normal(size=(2, 5, 32)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "int32")  # 1: a token
    print(attention(x, padding_mask=mask).shape)  # (2, 5, 32)
    ```
    """

    def __init__(self, hidden_size, num_heads, dropout=0.0,
                 attention_dropout=0.0, initializer_range=0.02,
                 layer_norm_epsilon=1e-12, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(
                "hidden_size must be divisible by num_heads. Received: "
                f"hidden_size={hidden_size}, num_heads={num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.head_size = hidden_size // num_heads

        # === Layers ===
        def dense(name):
            return keras.layers.Dense(
                hidden_size, kernel_initializer=_truncated_normal(initializer_range),
                dtype=self.dtype_policy, name=name)

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output_dense")
        self.attention_dropout_layer = keras.layers.Dropout(
            attention_dropout, dtype=self.dtype_policy, name="attention_dropout")
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="output_dropout")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm")

    def build(self, x_shape, padding_mask_shape=None):
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build(x_shape)
        self.layer_norm.build(x_shape)

    @property
    def dense_layers(self):
        return (self.query, self.key, self.value, self.output_dense)

    def _project(self, x, layers):
        """`x`'s projections by `layers` in one matmul: `[len(layers), B, N, T, D]`.

        The kernels stay separate variables (their names are the
        checkpoint's); they are concatenated per call into one `[H, kH]`
        matmul, whose gradient is one matmul too instead of k and a sum.
        """
        dtype = self.compute_dtype
        bias = ops.concatenate(
            [ops.cast(layer.bias, dtype) for layer in layers], axis=-1)  # [kH]
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        out = fused_dispatch.project(ops.reshape(x, (-1, self.hidden_size)), layers,
                                     dtype) + bias  # [B*T, kH]
        out = ops.reshape(out, (batch, length, len(layers), self.num_heads,
                                self.head_size))
        return ops.transpose(out, (2, 0, 3, 1, 4))  # [k, B, N, T, D]

    def call(self, x, padding_mask=None, training=None, query_positions=None):
        if query_positions is None:
            queries = x
            q, k, v = ops.unstack(
                self._project(x, (self.query, self.key, self.value)), 3, axis=0)
        else:
            queries = ops.take_along_axis(
                x, ops.cast(query_positions, "int32")[:, :, None], axis=1)  # [B, Q, H]
            q = self._project(queries, (self.query,))[0]
            k, v = ops.unstack(self._project(x, (self.key, self.value)), 2, axis=0)
        return self._attend(queries, q, k, v, padding_mask, training)

    def _attend(self, x, q, k, v, padding_mask, training):
        """Attention of `q` `[B, N, T, D]` over `k`, `v`; `x` `[B, T, H]` is
        the residual (the rows the queries were projected from)."""
        scale = 1.0 / math.sqrt(self.head_size)
        penalty = None
        if padding_mask is not None:
            # [B, S]
            penalty = (1.0 - ops.cast(padding_mask, "float32")) * _MASK_PENALTY
        probs = fused_dispatch.attention_probs(q, k, penalty, scale,
                                               self.compute_dtype, training)
        probs = self.attention_dropout_layer(probs, training=training)
        context = ops.matmul(probs, v)  # [B, N, T, D]
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)),
                              (batch, length, self.hidden_size))  # [B, T, H]
        flat = (-1, self.hidden_size)
        h = fused_dispatch.project(ops.reshape(context, flat), (self.output_dense,),
                                   self.compute_dtype)  # [B*T, H]
        out = fused_dispatch.add_norm(self, h, self.output_dense.bias,
                                      ops.reshape(x, flat), training)
        return ops.reshape(out, (batch, length, self.hidden_size))

    def compute_output_shape(self, x_shape, padding_mask_shape=None,
                             query_positions_shape=None):
        if query_positions_shape is not None:
            return tuple(query_positions_shape) + (x_shape[-1],)
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        })
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class FeedForwardSubBlock(keras.layers.Layer):
    """Dense H->I with activation, dense I->H, dropout, residual, LayerNorm.

    Call arguments:
        x: float `[B, T, H]`.
        training: enables dropout.

    Returns:
        float `[B, T, H]`: `LayerNorm(dropout(ffn(x)) + x)`.

    Example:

    ```python
    import numpy as np
    from albert_tf import FeedForwardSubBlock

    ffn = FeedForwardSubBlock(hidden_size=32, intermediate_size=64)
    x = np.random.default_rng(0).normal(size=(2, 5, 32)).astype("float32")
    print(ffn(x).shape)  # (2, 5, 32): the same shape, the residual added
    ```
    """

    def __init__(self, hidden_size, intermediate_size, activation="gelu",
                 dropout=0.0, initializer_range=0.02, layer_norm_epsilon=1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon

        # === Layers ===
        init = _truncated_normal(initializer_range)
        self.intermediate = keras.layers.Dense(
            intermediate_size, activation=activations.get(activation),
            kernel_initializer=init, dtype=self.dtype_policy, name="intermediate")
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy,
            name="output_dense")
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="output_dropout")
        # The TF1 checkpoint's name for this LayerNorm, kept so names map 1:1.
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm_1")

    def build(self, x_shape):
        self.intermediate.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_size,))
        self.layer_norm.build(x_shape)

    @property
    def dense_layers(self):
        return (self.intermediate, self.output_dense)

    def call(self, x, training=None):
        dtype = self.compute_dtype
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (-1, self.hidden_size))  # [B*T, H]
        h = fused_dispatch.project(x, (self.intermediate,), dtype)  # [B*T, I]
        h = fused_dispatch.bias_activation(h, self.intermediate.bias, self.activation,
                                           training)
        h = fused_dispatch.project(h, (self.output_dense,), dtype)  # [B*T, H]
        out = fused_dispatch.add_norm(self, h, self.output_dense.bias, x, training)
        return ops.reshape(out, (batch, length, self.hidden_size))

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "activation": self.activation,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        })
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class TransformerBlock(keras.layers.Layer):
    """One post-LN BERT/ALBERT block: self-attention sub-block, then FFN sub-block.

    `AlbertEncoder` calls the two sub-blocks itself so it can share them
    independently; this layer is the same computation as one unit, for users who
    stack blocks of their own.

    Example:

    ```python
    import numpy as np
    from albert_tf import TransformerBlock

    block = TransformerBlock(hidden_size=32, num_heads=4, intermediate_size=64)
    x = np.random.default_rng(0).normal(size=(2, 5, 32)).astype("float32")
    once = block(x)
    twice = block(once)  # cross-layer sharing: the same weights applied again
    print(len(block.weights), twice.shape)
    ```
    """

    def __init__(self, hidden_size, num_heads, intermediate_size,
                 activation="gelu", dropout=0.0, attention_dropout=0.0,
                 initializer_range=0.02, layer_norm_epsilon=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon

        # === Layers ===
        self.attention = SelfAttentionSubBlock(
            hidden_size, num_heads, dropout=dropout,
            attention_dropout=attention_dropout,
            initializer_range=initializer_range,
            layer_norm_epsilon=layer_norm_epsilon, dtype=self.dtype_policy,
            name="attention")
        self.ffn = FeedForwardSubBlock(
            hidden_size, intermediate_size, activation=activation,
            dropout=dropout, initializer_range=initializer_range,
            layer_norm_epsilon=layer_norm_epsilon, dtype=self.dtype_policy,
            name="ffn")

    def build(self, x_shape, padding_mask_shape=None):
        self.attention.build(x_shape)
        self.ffn.build(x_shape)

    def call(self, x, padding_mask=None, training=None):
        x = self.attention(x, padding_mask=padding_mask, training=training)
        return self.ffn(x, training=training)

    def compute_output_shape(self, x_shape, padding_mask_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "activation": self.activation,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        })
        return config
