"""`MaskedLMHead`: the masked-LM head, its decoder tied to the word embeddings.

Shape legend: B batch, T length, P masked positions, H hidden, E embedding,
V vocabulary.
"""

import keras
import tensorflow as tf
from keras import ops

from albert_tf.layers import activations


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Gathers masked positions, dense H->E + activation, LayerNorm, tied decoder.

    Logits are `transform(x) @ word_embeddings^T + output_bias`, computed in the
    E-wide embedding space, as the official `cls/predictions` head. With
    `tied_embedding` the decoder is that layer's table (not a weight of this
    layer); without it (e.g. rebuilt alone from its config) the head owns a
    `[V, E]` decoder of its own.

    Args:
        vocab_size: V.
        embedding_size: E.
        activation: activation name of the transform.
        tied_embedding: an `AlbertEmbedding` whose `word_embeddings` decode.

    Call arguments:
        sequence_output: float `[B, T, H]`.
        masked_positions: int `[B, P]`.

    Returns:
        float32 logits `[B, P, V]`.

    Example:

    ```python
    import numpy as np
    from albert_tf import MaskedLMHead

    head = MaskedLMHead(vocab_size=1000, embedding_size=16)
    sequence = np.random.default_rng(0).normal(size=(2, 5, 32)).astype("float32")
    positions = np.array([[1, 3], [0, 2]], "int32")  # the masked tokens
    print(head(sequence, positions).shape)  # (2, 2, 1000): logits over V
    ```
    """

    def __init__(self, vocab_size, embedding_size, activation="gelu",
                 initializer_range=0.02, layer_norm_epsilon=1e-12,
                 tied_embedding=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        # Not tracked: the owning model holds (and saves) the embedding.
        object.__setattr__(self, "tied_embedding", tied_embedding)
        self.activation = activation
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon

        # === Layers ===
        self.transform_dense = keras.layers.Dense(
            embedding_size, activation=activations.get(activation),
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=initializer_range),
            dtype=self.dtype_policy, name="transform_dense")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy,
            name="transform_LayerNorm")

    def build(self, sequence_output_shape, masked_positions_shape=None):
        self.transform_dense.build(sequence_output_shape)
        self.layer_norm.build(
            tuple(sequence_output_shape[:-1]) + (self.embedding_size,))
        if self.tied_embedding is None:
            self.decoder = self.add_weight(
                name="decoder", shape=(self.vocab_size, self.embedding_size),
                initializer=keras.initializers.TruncatedNormal(
                    stddev=self.initializer_range))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros")

    @property
    def decoder_table(self):
        """The `[V, E]` matrix the logits are computed against."""
        if self.tied_embedding is not None:
            return self.tied_embedding.word_embeddings
        return self.decoder

    def call(self, sequence_output, masked_positions):
        x = ops.take_along_axis(
            sequence_output, ops.cast(masked_positions, "int32")[:, :, None],
            axis=1)  # [B, P, H]
        x = self.layer_norm(self.transform_dense(x))  # [B, P, E]
        table = ops.cast(self.decoder_table, x.dtype)  # [V, E]
        # One [B*P, E] x [E, V] matmul: an einsum broadcasting the table over
        # B makes the table's gradient a [B, V, E] tensor summed over B.
        batch, predictions = ops.shape(x)[0], ops.shape(x)[1]
        logits = tf.matmul(ops.reshape(x, (-1, self.embedding_size)), table,
                           transpose_b=True)  # [B*P, V]
        logits = ops.reshape(logits, (batch, predictions, self.vocab_size))
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return logits

    def compute_output_shape(self, sequence_shape, positions_shape):
        return tuple(positions_shape) + (self.vocab_size,)

    def compute_output_spec(self, sequence_output, masked_positions):
        return keras.KerasTensor(
            self.compute_output_shape(sequence_output.shape,
                                      masked_positions.shape), dtype="float32")

    def get_config(self):
        # A tied embedding belongs to the owning model, which re-ties it.
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "activation": self.activation,
            "initializer_range": self.initializer_range,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        })
        return config
