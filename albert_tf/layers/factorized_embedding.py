"""The factorized embedding: V x E tables, LayerNorm, dropout, then E -> H.

Shape legend: B batch, T sequence length, V vocabulary, E embedding width,
H hidden width.
"""

import keras
import tensorflow as tf
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEmbedding(keras.layers.Layer):
    """Word + token-type + absolute position embeddings of width E.

    The sum goes through LayerNorm and dropout, then (only when E != H) through
    the linear projection `embedding_hidden_mapping_in` to width H. The
    projection is part of this layer, never of a shared transformer group.

    Call arguments:
        word_ids: int `[B, T]`.
        type_ids: int `[B, T]`, or None for all zeros.
        training: enables dropout.

    Returns:
        float `[B, T, H]`.

    Example:

    ```python
    import numpy as np
    from albert_tf import AlbertEmbedding

    embedding = AlbertEmbedding(vocab_size=1000, embedding_size=16, hidden_size=32)
    ids = np.array([[2, 45, 77, 3]], "int32")
    hidden = embedding(ids)  # [B, T, H] = [1, 4, 32], through E = 16
    print(hidden.shape)
    ```
    """

    def __init__(self, vocab_size, embedding_size, hidden_size,
                 max_position_embeddings=512, type_vocab_size=2,
                 initializer_range=0.02, dropout=0.0, layer_norm_epsilon=1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon

        # === Layers ===
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm")
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout")
        self.projection = None
        if embedding_size != hidden_size:
            self.projection = keras.layers.Dense(
                hidden_size, kernel_initializer=self._initializer(),
                dtype=self.dtype_policy, name="embedding_hidden_mapping_in")

    def _initializer(self):
        return keras.initializers.TruncatedNormal(stddev=self.initializer_range)

    def build(self, word_ids_shape, type_ids_shape=None):
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.embedding_size),
            initializer=self._initializer())
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings",
            shape=(self.type_vocab_size, self.embedding_size),
            initializer=self._initializer())
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.embedding_size),
            initializer=self._initializer())
        embedded_shape = tuple(word_ids_shape) + (self.embedding_size,)
        self.layer_norm.build(embedded_shape)
        if self.projection is not None:
            self.projection.build(embedded_shape)

    def _check_length(self, word_ids):
        length = word_ids.shape[1]
        if length is not None and length > self.max_position_embeddings:
            raise ValueError(
                f"Input sequence length {length} exceeds "
                f"max_position_embeddings={self.max_position_embeddings}. "
                f"Received: input shape {tuple(word_ids.shape)}")

    def call(self, word_ids, type_ids=None, training=None):
        self._check_length(word_ids)
        if type_ids is None:
            type_ids = ops.zeros_like(word_ids)
        length = ops.shape(word_ids)[1]
        if not isinstance(length, int):
            # Dynamic length: check at run time (a no-op once compiled by XLA
            # for a fixed length that passed the static check), before the
            # position slice, so a too-long input (a TF-Hub preprocessor's
            # seq_length past the table) is named as such.
            check = tf.debugging.assert_less_equal(
                length, self.max_position_embeddings,
                message=("Input sequence length exceeds "
                         f"max_position_embeddings={self.max_position_embeddings}"
                         " (a preprocessor's seq_length must not be longer)"))
            with tf.control_dependencies([check]):
                # A gather, not a slice: shape inference would clamp a slice
                # to the table and fail first, naming no length.
                positions = tf.gather(self.position_embeddings,
                                      tf.range(length))  # [T, E]
        else:
            positions = self.position_embeddings[:length]  # [T, E]
        words = ops.take(self.word_embeddings, word_ids, axis=0)  # [B, T, E]
        types = ops.take(self.token_type_embeddings, type_ids, axis=0)
        x = words + types + positions[None, :, :]
        x = self.layer_norm(x)
        x = self.dropout_layer(x, training=training)
        if self.projection is not None:
            x = self.projection(x)  # [B, T, H]
        return x

    def compute_output_shape(self, word_ids_shape, type_ids_shape=None):
        return tuple(word_ids_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "hidden_size": self.hidden_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "initializer_range": self.initializer_range,
            "dropout": self.dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        })
        return config
