"""`SentenceOrderHead`: the sentence-order prediction (SOP) head.

Shape legend: B batch, H hidden.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(keras.layers.Layer):
    """SOP logits: `pooled_output @ output_weights^T + output_bias`, weights [2, H].

    Call arguments:
        pooled_output: float `[B, H]`.

    Returns:
        float32 logits `[B, 2]` (label 1: segments swapped).

    Example:

    ```python
    import numpy as np
    from albert_tf import SentenceOrderHead

    head = SentenceOrderHead(hidden_size=32)
    pooled = np.random.default_rng(0).normal(size=(3, 32)).astype("float32")
    print(head(pooled).shape)  # (3, 2): in order, or swapped
    ```
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, pooled_output_shape):
        # [2, H] as in the official checkpoint (transposed w.r.t. a Dense kernel).
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(
                stddev=self.initializer_range))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(2,), initializer="zeros")

    def call(self, pooled_output):
        logits = ops.matmul(pooled_output, ops.transpose(self.output_weights))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_spec(self, pooled_output):
        return keras.KerasTensor((pooled_output.shape[0], 2), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_size": self.hidden_size,
                       "initializer_range": self.initializer_range})
        return config
