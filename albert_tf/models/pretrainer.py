"""`AlbertPretrainer`: the encoder with the masked-LM and SOP heads.

Shape legend: B batch, T length, P masked positions, H hidden, V vocabulary.
"""

import keras
from keras import ops

from albert_tf.config import AlbertConfig
from albert_tf.layers.masked_lm_head import MaskedLMHead
from albert_tf.layers.sentence_order_head import SentenceOrderHead
from albert_tf.models.config_mixin import AlbertConfigMixin
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.encoder import AlbertEncoder


def _row_indices(positions):
    """Indices `0..P-1` in each row of `positions` `[B, P]`: where the head
    finds the rows once they are gathered at `positions`."""
    predictions = ops.shape(positions)[1]
    return ops.broadcast_to(ops.arange(predictions, dtype="int32")[None],
                            ops.shape(positions))  # [B, P]


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(AlbertConfigMixin, keras.Model):
    """ALBERT for pretraining: `AlbertEncoder` + `MaskedLMHead` + `SentenceOrderHead`.

    Inputs: the encoder's dict (`input_word_ids`, `input_mask`,
    `input_type_ids`, int32 `[B, T]`) plus `masked_lm_positions` (int32 `[B, P]`).

    Outputs: the encoder's dict plus `mlm_logits` (float32 `[B, P, V]`) and
    `sop_logits` (float32 `[B, 2]`).

    Args:
        config: an `AlbertConfig` (or its dict form).
        dtype: dtype policy for every layer (e.g. `"mixed_bfloat16"`).
        encoder: an existing `AlbertEncoder` of this `config` to put the
            heads on (shared, not copied: training the pretrainer trains
            it); default: a new one. Its dtype policy wins over `dtype`.

    Raises:
        ValueError: `encoder` was built from another config.

    Example:

    ```python
    import albert_tf
    import numpy as np

    config = albert_tf.AlbertConfig.from_preset("tiny")
    pretrainer = albert_tf.AlbertPretrainer(config)
    outputs = pretrainer({
        "input_word_ids": np.array([[2, 15, 4, 17, 3, 18, 3]], "int32"),
        "input_mask": np.ones((1, 7), "int32"),
        "input_type_ids": np.array([[0, 0, 0, 0, 0, 1, 1]], "int32"),
        "masked_lm_positions": np.array([[2]], "int32"),
    })
    outputs["mlm_logits"].shape  # (1, 1, 1000): the masked token's logits
    outputs["sop_logits"].shape  # (1, 2): in order, or swapped
    ```
    """

    def __init__(self, config, dtype=None, encoder=None, **kwargs):
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)

        # === Layers ===
        if encoder is None:
            encoder = AlbertEncoder(config, dtype=dtype, name="encoder")
        elif encoder.config != config:
            ours, theirs = config.to_dict(), encoder.config.to_dict()
            raise ValueError(
                "The encoder was built from another config. Received: " +
                ", ".join(f"{k}={theirs[k]!r} (config: {ours[k]!r})"
                          for k in ours if ours[k] != theirs[k]))
        else:
            dtype = encoder.embedding.dtype_policy
        mlm_head = MaskedLMHead(
            vocab_size=config.vocab_size, embedding_size=config.embedding_size,
            activation=config.hidden_act,
            initializer_range=config.initializer_range,
            layer_norm_epsilon=config.layer_norm_epsilon,
            tied_embedding=encoder.embedding, dtype=dtype, name="predictions")
        sop_head = SentenceOrderHead(
            config.hidden_size, initializer_range=config.initializer_range,
            dtype=dtype, name="seq_relationship")

        # === Functional Model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        inputs["masked_lm_positions"] = keras.Input(
            shape=(None,), dtype="int32", name="masked_lm_positions")
        outputs = dict(encoder({name: inputs[name] for name in INPUT_NAMES}))
        outputs["mlm_logits"] = mlm_head(outputs["sequence_output"],
                                         inputs["masked_lm_positions"])
        outputs["sop_logits"] = sop_head(outputs["pooled_output"])
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        self.config = config
        self.encoder = encoder
        self.mlm_head = mlm_head
        self.sop_head = sop_head

    def pretraining_logits(self, inputs, training=None):
        """`(mlm_logits, sop_logits)`, equal to those of `self(inputs)`.

        Computes the last block at [CLS] and the masked positions only
        (`AlbertEncoder.hidden_states_at`): the training step's forward pass.
        """
        positions = ops.cast(inputs["masked_lm_positions"], "int32")  # [B, P]
        queries = ops.concatenate(
            [ops.zeros_like(positions[:, :1]), positions], axis=1)  # [B, 1 + P]
        encoder_inputs = {name: inputs[name] for name in INPUT_NAMES}
        x = self.encoder.hidden_states_at(encoder_inputs, queries,
                                          training=training)  # [B, 1 + P, H]
        mlm_logits = self.mlm_head(x[:, 1:], _row_indices(positions))
        sop_logits = self.sop_head(self.encoder.pooler(x[:, 0]))
        return mlm_logits, sop_logits

    def masked_lm_logits(self, inputs, training=None):
        """`mlm_logits` alone, equal to that of `self(inputs)`.

        The last block runs at the masked positions only, and the pooler and
        the SOP head not at all (what masked-LM training alone needs).
        """
        positions = ops.cast(inputs["masked_lm_positions"], "int32")  # [B, P]
        encoder_inputs = {name: inputs[name] for name in INPUT_NAMES}
        x = self.encoder.hidden_states_at(encoder_inputs, positions,
                                          training=training)  # [B, P, H]
        return self.mlm_head(x, _row_indices(positions))

    @property
    def _policy_layer(self):
        return self.encoder.embedding
