"""Task heads for fine-tuning.

Shape legend: B batch, K choices, T length, H hidden.

Heads return float32 logits whatever the compute dtype, so the losses and
the softmax over choices stay in float32 under mixed precision.
"""

import keras
from keras import ops


def _dense(units, initializer_range, dtype, name):
    return keras.layers.Dense(
        units, kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=initializer_range), dtype=dtype, name=name)


@keras.saving.register_keras_serializable(package="albert_tf")
class ClassificationHead(keras.layers.Layer):
    """The official classifier head: dropout on `pooled_output`, then dense.

    Args:
        num_classes: C; 1 for regression (STS-B) or a single score.
        dropout: dropout rate before the dense layer (official: 0.1).
        initializer_range: stddev of the truncated-normal kernel initializer.

    Call arguments:
        pooled_output: float `[B, H]`.

    Returns:
        float32 logits `[B, C]`.
    """

    def __init__(self, num_classes, dropout=0.1, initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError("num_classes must be a positive integer. "
                             f"Received: num_classes={num_classes!r}")
        self.num_classes = num_classes
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.dense = _dense(num_classes, initializer_range, self.dtype_policy,
                            "output")

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)

    def call(self, pooled_output, training=None):
        x = self.dropout_layer(pooled_output, training=training)
        return ops.cast(self.dense(x), "float32")

    def compute_output_shape(self, pooled_output_shape):
        return tuple(pooled_output_shape[:-1]) + (self.num_classes,)

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, dropout=self.dropout,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class SpanHead(keras.layers.Layer):
    """Start and end logits of an answer span: one dense H->2 over the sequence.

    Padding positions (`input_mask` 0) get a large negative logit, so neither
    the softmax of the loss nor the prediction can pick them.

    Args:
        initializer_range: stddev of the truncated-normal kernel initializer.

    Call arguments:
        sequence_output: float `[B, T, H]`.
        input_mask: optional int `[B, T]`, 1 at real tokens.

    Returns:
        float32 logits `[B, T, 2]` (start, end).
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = _dense(2, initializer_range, self.dtype_policy, "output")

    def build(self, sequence_output_shape, input_mask_shape=None):
        self.dense.build(sequence_output_shape)

    def call(self, sequence_output, input_mask=None):
        logits = ops.cast(self.dense(sequence_output), "float32")  # [B, T, 2]
        if input_mask is not None:
            padding = 1.0 - ops.cast(input_mask, "float32")
            logits = logits - 1e4 * padding[:, :, None]
        return logits

    def compute_output_shape(self, sequence_output_shape, input_mask_shape=None):
        return tuple(sequence_output_shape[:-1]) + (2,)

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class FoldChoices(keras.layers.Layer):
    """Folds the choices into the batch: `[B, K, T]` -> `[B * K, T]`."""

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, input_shape):
        batch, choices, length = input_shape
        folded = None if batch is None or choices is None else batch * choices
        return (folded, length)


@keras.saving.register_keras_serializable(package="albert_tf")
class MultipleChoiceHead(ClassificationHead):
    """One score per choice: the classifier head with one unit, then `[B, K]`.

    Args:
        num_choices: K.
        dropout: dropout rate before the dense layer.
        initializer_range: stddev of the kernel initializer.

    Call arguments:
        pooled_output: float `[B * K, H]`, choices of an example adjacent.

    Returns:
        float32 logits `[B, K]` (softmax across choices in the loss).
    """

    def __init__(self, num_choices=4, dropout=0.1, initializer_range=0.02,
                 **kwargs):
        kwargs.pop("num_classes", None)
        super().__init__(1, dropout=dropout,
                         initializer_range=initializer_range, **kwargs)
        if not isinstance(num_choices, int) or num_choices < 2:
            raise ValueError("num_choices must be an integer >= 2. "
                             f"Received: num_choices={num_choices!r}")
        self.num_choices = num_choices

    def call(self, pooled_output, training=None):
        scores = super().call(pooled_output, training=training)  # [B*K, 1]
        return ops.reshape(scores, (-1, self.num_choices))

    def compute_output_shape(self, pooled_output_shape):
        rows = pooled_output_shape[0]
        return (None if rows is None else rows // self.num_choices,
                self.num_choices)

    def get_config(self):
        config = super().get_config()
        del config["num_classes"]
        config.update(num_choices=self.num_choices)
        return config
