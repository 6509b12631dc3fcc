"""The peer of the parity study: keras-hub's ALBERT on this project's loop.

`peer_pretrainer` builds keras-hub's `AlbertBackbone`, the masked-LM head
its `AlbertMaskedLM` puts on it (tied to the token embedding) and a dense
SOP head on the pooled output, as one Keras model with this project's input
names and `mlm_logits` / `sop_logits` outputs. `PeerPretrainingTask` trains
it with `albert_tf.training.pretraining`: the same `Trainer`, data,
optimizer, schedule, loss and evaluation as `AlbertPretrainer`, so the only
thing that differs between the two runs of a seed is the model.

What differs by design (keras-hub's choices, not settable):
- the masked-LM head's LayerNorm epsilon is 1e-5 (this project and the
  official code: 1e-12); the backbone's LayerNorms use 1e-12 as ours;
- padded keys get a large negative score through Keras' masked softmax
  (official: `(1 - mask) * -10000` added to the scores);
- the SOP head is a `Dense(2)` kernel `[H, 2]` (official: weights `[2, H]`,
  the same function and parameter count).
"""

import keras
import numpy as np

from albert_tf.convert import keras_hub as keras_hub_lib
from albert_tf.convert import weight_set
from albert_tf.training import losses
from albert_tf.training import pretraining

BACKBONE_NAME = "albert_backbone"
SOP_HEAD_NAME = "sop_head"
MLM_HEAD_NAME = "mlm_head"  # The name keras-hub's AlbertMaskedLM gives it.
# The backbone's hard-coded choices a config must share to be comparable.
_FIXED = {"hidden_act": "gelu", "initializer_range": 0.02,
          "layer_norm_epsilon": 1e-12}


def check_comparable(config):
    """Raises `ValueError` if keras-hub cannot build the model `config` says.

    keras-hub shares every block of a group (this project's `share="all"`),
    runs each group `num_hidden_layers / num_hidden_groups` times in a row,
    uses one dropout rate, and fixes the activation, initializer and
    epsilon.
    """
    problems = [f"{name}={getattr(config, name)!r} (keras-hub: {value!r})"
                for name, value in _FIXED.items()
                if getattr(config, name) != value]
    if config.share != "all":
        problems.append(f"share={config.share!r} (keras-hub: 'all')")
    if config.num_hidden_layers % config.num_hidden_groups:
        problems.append(f"num_hidden_layers={config.num_hidden_layers} not "
                        f"divisible by num_hidden_groups="
                        f"{config.num_hidden_groups}")
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        problems.append("two dropout rates (keras-hub has one)")
    if problems:
        raise ValueError("keras-hub's AlbertBackbone cannot build this "
                         "configuration. Received: " + "; ".join(problems))


def peer_pretrainer(config, dtype=None):
    """keras-hub's ALBERT with an MLM and an SOP head, in our names.

    Args:
        config: an `AlbertConfig` (see `check_comparable`).
        dtype: dtype policy of every layer (None: float32).

    Returns:
        A `keras.Model`: inputs `input_word_ids`, `input_mask`,
        `input_type_ids`, `masked_lm_positions` (int32); outputs
        `mlm_logits` `[B, P, V]` and `sop_logits` `[B, 2]`.

    Raises:
        ValueError: a configuration keras-hub cannot build.
    """
    import keras_hub

    check_comparable(config)

    # === Layers ===
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        embedding_dim=config.embedding_size, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        num_groups=config.num_hidden_groups,
        num_inner_repetitions=config.inner_group_num,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size, dtype=dtype, name=BACKBONE_NAME)
    # The head exactly as keras-hub's masked LM builds it on this backbone.
    mlm_head = keras_hub.models.AlbertMaskedLM(backbone).masked_lm_head
    sop_head = keras.layers.Dense(
        2, kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=config.initializer_range), dtype=dtype, name=SOP_HEAD_NAME)

    # === Functional Model ===
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in pretraining.MODEL_INPUTS}
    outputs = backbone({"token_ids": inputs["input_word_ids"],
                        "segment_ids": inputs["input_type_ids"],
                        "padding_mask": inputs["input_mask"]})
    return keras.Model(inputs, {
        "mlm_logits": mlm_head(outputs["sequence_output"],
                               inputs["masked_lm_positions"]),
        "sop_logits": sop_head(outputs["pooled_output"]),
    }, name="keras_hub_albert")


def copy_weights(pretrainer, model):
    """Gives keras-hub's `model` the weights of our `AlbertPretrainer`.

    The tensors go through the keras-hub format's converter rules (the
    reverse direction), and the SOP head's `[2, H]` weights transposed into
    the `Dense` kernel: with equal weights the two models must compute the
    same function, whatever their initializers.

    Args:
        pretrainer: a built `AlbertPretrainer` (E != H: keras-hub always
            has the E -> H projection).
        model: what `peer_pretrainer(pretrainer.config)` returned.
    """
    tensors = weight_set.model_to_official(pretrainer)
    by_path = {v.path: v for v in model.weights}
    for rule in keras_hub_lib.rules(pretrainer.config):
        by_path[rule.external].assign(rule.to_external(tensors[rule.official]))
    sop_head = model.get_layer(SOP_HEAD_NAME)
    sop_head.kernel.assign(tensors["cls/seq_relationship/output_weights"].T)
    sop_head.bias.assign(tensors["cls/seq_relationship/output_bias"])


def output_difference(pretrainer, model, features, head_epsilon=None):
    """The largest absolute difference of the two models' logits.

    Args:
        pretrainer: an `AlbertPretrainer`.
        model: keras-hub's model (see `peer_pretrainer`).
        features: a batch of the input pipeline (a dict of tensors).
        head_epsilon: if given, keras-hub's masked-LM head computes with
            this LayerNorm epsilon instead of its 1e-5 for the comparison
            (then its own again): which part of a difference the epsilon
            makes.

    Returns:
        `{"mlm_logits": float, "sop_logits": float}`.
    """
    inputs = {name: features[name] for name in pretraining.MODEL_INPUTS}
    # keras-hub takes no argument for this epsilon; its layer holds it.
    norm = model.get_layer(MLM_HEAD_NAME)._intermediate_layer_norm
    shipped = norm.epsilon
    if head_epsilon is not None:
        norm.epsilon = head_epsilon
    try:
        ours, theirs = pretrainer(inputs), model(inputs)
    finally:
        norm.epsilon = shipped
    return {key: float(np.max(np.abs(np.asarray(ours[key])
                                     - np.asarray(theirs[key]))))
            for key in ("mlm_logits", "sop_logits")}


class PeerPretrainingTask(pretraining.PretrainingTask):
    """`PretrainingTask` with keras-hub's model in place of ours."""

    def build_model(self, dtype):
        return peer_pretrainer(self.config, dtype)

    def initialize(self, model):
        if self.options.init_checkpoint:
            raise ValueError("The keras-hub peer trains from scratch only. "
                             f"Received: init_checkpoint="
                             f"{self.options.init_checkpoint!r}")

    def stats(self, model, features, training):
        outputs = model({name: features[name]
                         for name in pretraining.MODEL_INPUTS},
                        training=training)
        return losses.pretraining_stats(
            outputs["mlm_logits"], features["masked_lm_ids"],
            features["masked_lm_weights"], outputs["sop_logits"],
            features["next_sentence_labels"])
