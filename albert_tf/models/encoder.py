"""`AlbertEncoder`: factorized embedding, shared transformer stack, pooler.

Shape legend: B batch, T sequence length, H hidden width.
"""

import keras

from albert_tf.config import AlbertConfig
from albert_tf.cross_layer_sharing import sub_block_keys
from albert_tf.layers import fused_dispatch
from albert_tf.layers.factorized_embedding import AlbertEmbedding
from albert_tf.layers.transformer import FeedForwardSubBlock
from albert_tf.layers.transformer import SelfAttentionSubBlock
from albert_tf.models.config_mixin import AlbertConfigMixin

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def _run_blocks(embedding, sub_blocks, block_keys, inputs, training=None,
                last_positions=None):
    """Embedding, then every executed block; returns each block's output.

    With `last_positions` (int `[B, Q]`) the last block computes only the
    rows at those positions (`SelfAttentionSubBlock`'s `query_positions`).
    """
    # In the Functional graph (training=None) the call context sets training.
    kwargs = {} if training is None else {"training": training}
    mask = inputs["input_mask"]
    x = embedding(inputs["input_word_ids"], inputs["input_type_ids"], **kwargs)
    outputs = []
    for i, (attention_key, ffn_key) in enumerate(block_keys):
        queries = {}
        if last_positions is not None and i == len(block_keys) - 1:
            queries = {"query_positions": last_positions}
        x = sub_blocks[attention_key](x, padding_mask=mask, **queries, **kwargs)
        x = sub_blocks[ffn_key](x, **kwargs)
        outputs.append(x)
    return outputs


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(AlbertConfigMixin, keras.Model):
    """The ALBERT encoder network (no pretraining heads).

    The factorized embedding, then `num_hidden_layers * inner_group_num`
    transformer blocks whose weights are shared as `config.share` says
    (`albert_tf.cross_layer_sharing`), then a pooler.

    Inputs: a dict of int32 `[B, T]` tensors, `input_word_ids`, `input_mask`
    (1 at real tokens; all ones when left out) and `input_type_ids` (segment
    ids; zeros when left out). T may not exceed `max_position_embeddings`.
    Ids must lie in `[0, vocab_size)` and `[0, type_vocab_size)`; they are
    not checked here (a pass over every batch): on CPU an id out of range
    fails inside the embedding lookup, on GPU and TPU it reads zeros.

    Outputs: a dict with `sequence_output` `[B, T, H]`, `pooled_output` `[B, H]`
    (tanh dense on the first token) and `encoder_outputs`, a list holding the
    output of every executed block.

    Args:
        config: an `AlbertConfig` (or its dict form).
        dtype: dtype policy for every layer, e.g. `"mixed_bfloat16"`; None uses
            the global policy.

    Example:

    ```python
    import albert_tf
    import numpy as np

    config = albert_tf.AlbertConfig.from_preset("tiny", share="attention")
    encoder = albert_tf.AlbertEncoder(config)
    outputs = encoder({
        "input_word_ids": np.array([[2, 15, 16, 3, 0]], "int32"),
        "input_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
        "input_type_ids": np.zeros((1, 5), "int32"),
    })
    outputs["sequence_output"].shape  # (1, 5, 32)
    outputs["pooled_output"].shape  # (1, 32)
    ```
    """

    def __init__(self, config, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        if not isinstance(config, AlbertConfig):
            raise TypeError("AlbertEncoder expects an AlbertConfig. "
                            f"Received: {type(config).__name__}")
        config.validate()

        # === Layers ===
        embedding = AlbertEmbedding(
            vocab_size=config.vocab_size,
            embedding_size=config.embedding_size,
            hidden_size=config.hidden_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            initializer_range=config.initializer_range,
            dropout=config.hidden_dropout_prob,
            layer_norm_epsilon=config.layer_norm_epsilon,
            dtype=dtype, name="embeddings")
        block_keys = sub_block_keys(config)
        sub_blocks = {}
        for attention_key, ffn_key in block_keys:
            if attention_key not in sub_blocks:
                sub_blocks[attention_key] = SelfAttentionSubBlock(
                    hidden_size=config.hidden_size,
                    num_heads=config.num_attention_heads,
                    dropout=config.hidden_dropout_prob,
                    attention_dropout=config.attention_probs_dropout_prob,
                    initializer_range=config.initializer_range,
                    layer_norm_epsilon=config.layer_norm_epsilon,
                    dtype=dtype, name=attention_key)
            if ffn_key not in sub_blocks:
                sub_blocks[ffn_key] = FeedForwardSubBlock(
                    hidden_size=config.hidden_size,
                    intermediate_size=config.intermediate_size,
                    activation=config.hidden_act,
                    dropout=config.hidden_dropout_prob,
                    initializer_range=config.initializer_range,
                    layer_norm_epsilon=config.layer_norm_epsilon,
                    dtype=dtype, name=ffn_key)
        pooler = keras.layers.Dense(
            config.hidden_size, activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=config.initializer_range),
            dtype=dtype, name="pooler_dense")

        # === Functional Model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        encoder_outputs = _run_blocks(embedding, sub_blocks, block_keys, inputs)
        x = encoder_outputs[-1]
        pooled = pooler(x[:, 0, :])
        outputs = {
            "sequence_output": x,
            "pooled_output": pooled,
            "encoder_outputs": encoder_outputs,
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        self.config = config
        self.embedding = embedding
        self.sub_blocks = sub_blocks
        self.block_keys = block_keys
        self.pooler = pooler

    def __call__(self, inputs, *args, **kwargs):
        # TF-Hub convention: a missing mask means ones, missing types zeros.
        # Filled in before Keras checks the inputs against the graph's.
        if isinstance(inputs, dict) and "input_word_ids" in inputs and any(
                inputs.get(name) is None for name in INPUT_NAMES):
            inputs = {k: v for k, v in inputs.items() if v is not None}
            if not keras.backend.is_keras_tensor(inputs["input_word_ids"]):
                # Keras refuses a mix of arrays and tensors.
                inputs = {k: keras.ops.convert_to_tensor(v, "int32")
                          for k, v in inputs.items()}
            word_ids = inputs["input_word_ids"]
            inputs.setdefault("input_mask", keras.ops.ones_like(word_ids))
            inputs.setdefault("input_type_ids", keras.ops.zeros_like(word_ids))
        return super().__call__(inputs, *args, **kwargs)

    def hidden_states_at(self, inputs, positions, training=None):
        """The final hidden states at `positions` only: `[B, Q, H]`.

        Equal to gathering `positions` from `sequence_output`; the last
        executed block runs its queries, output projection and feed-forward
        on those Q rows only (keys and values still cover every position).
        Pretraining needs only [CLS] and the masked positions.

        Args:
            inputs: the encoder's input dict (all three keys).
            positions: int `[B, Q]`.
            training: enables dropout (and the fused training kernels).
        """
        executed = [key for keys in self.block_keys for key in keys]
        dense_kernels, uses = [], []
        for key, block in self.sub_blocks.items():
            for layer in block.dense_layers:
                dense_kernels.append(layer.kernel)
                uses.append(executed.count(key))
        # With the fused kernels, shared kernels are cast to the compute dtype
        # once, not at each use, and the uses' gradients summed in one pass.
        with fused_dispatch.cast_once(dense_kernels,
                                      self.embedding.compute_dtype, uses,
                                      training):
            return _run_blocks(self.embedding, self.sub_blocks, self.block_keys,
                               inputs, training=training,
                               last_positions=positions)[-1]

    @property
    def word_embeddings(self):
        """The `[V, E]` word-embedding table (the MLM decoder is tied to it)."""
        return self.embedding.word_embeddings

    @property
    def _policy_layer(self):
        return self.embedding
