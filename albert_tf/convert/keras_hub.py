"""keras-hub `AlbertBackbone` weights <-> `AlbertEncoder` weights.

keras-hub stores attention kernels per head (`[H, N, D]`, output `[N, D, H]`);
this project keeps the official `[H, H]` layout, so kernels are reshaped. keras-hub
only implements full sharing (`share="all"`) and always has the E -> H projection.
"""

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder


def config_from_keras_hub(backbone):
    """The `AlbertConfig` equivalent to a keras-hub `AlbertBackbone`."""
    return AlbertConfig(
        vocab_size=backbone.vocabulary_size,
        embedding_size=backbone.embedding_dim,
        hidden_size=backbone.hidden_dim,
        num_hidden_layers=backbone.num_layers,
        num_hidden_groups=backbone.num_groups,
        inner_group_num=backbone.num_inner_repetitions,
        num_attention_heads=backbone.num_heads,
        intermediate_size=backbone.intermediate_dim,
        hidden_act="gelu",
        hidden_dropout_prob=backbone.dropout,
        attention_probs_dropout_prob=backbone.dropout,
        max_position_embeddings=backbone.max_sequence_length,
        type_vocab_size=backbone.num_segments,
        share="all")


def variable_map(config):
    """`(encoder_path, keras_hub_path)` pairs for every encoder variable."""
    pairs = [
        ("embeddings/word_embeddings", "token_embedding/embeddings"),
        ("embeddings/token_type_embeddings", "segment_embedding/embeddings"),
        ("embeddings/position_embeddings", "position_embedding/embeddings"),
        ("embeddings/LayerNorm/gamma", "embeddings_layer_norm/gamma"),
        ("embeddings/LayerNorm/beta", "embeddings_layer_norm/beta"),
        ("embeddings/embedding_hidden_mapping_in/kernel",
         "embedding_projection/kernel"),
        ("embeddings/embedding_hidden_mapping_in/bias",
         "embedding_projection/bias"),
        ("pooler_dense/kernel", "pooled_dense/kernel"),
        ("pooler_dense/bias", "pooled_dense/bias"),
    ]
    sub_layers = [
        ("attention/query", "self_attention_layer/query"),
        ("attention/key", "self_attention_layer/key"),
        ("attention/value", "self_attention_layer/value"),
        ("attention/output_dense", "self_attention_layer/attention_output"),
        ("attention/LayerNorm", "self_attention_layer_norm"),
        ("ffn/intermediate", "feedforward_intermediate_dense"),
        ("ffn/output_dense", "feedforward_output_dense"),
        ("ffn/LayerNorm_1", "feedforward_layer_norm"),
    ]
    for g in range(config.num_hidden_groups):
        for i in range(config.inner_group_num):
            ours = f"group_{g}_inner_group_{i}"
            theirs = f"group_{g}_inner_layer_{i}"
            for our_sub, their_sub in sub_layers:
                block, layer = our_sub.split("/")
                names = ("gamma", "beta") if "LayerNorm" in layer else (
                    "kernel", "bias")
                for name in names:
                    pairs.append((f"{ours}_{block}/{layer}/{name}",
                                  f"{theirs}/{their_sub}/{name}"))
    return pairs


def encoder_from_keras_hub(backbone):
    """Builds an `AlbertEncoder` holding a keras-hub backbone's weights.

    Args:
        backbone: a built `keras_hub.models.AlbertBackbone`.

    Returns:
        An `AlbertEncoder` that computes the same outputs.

    Raises:
        ValueError: if a tensor is missing or has an unexpected shape.
    """
    config = config_from_keras_hub(backbone)
    if config.embedding_size == config.hidden_size:
        raise ValueError(
            "keras-hub backbones with embedding_dim == hidden_dim keep an "
            "E -> H projection that this encoder (like the official model) "
            f"does not have. Received: embedding_dim={config.embedding_size}")
    encoder = AlbertEncoder(config)
    theirs = {w.path: w for w in backbone.weights}
    ours = {v.path: v for v in encoder.weights}
    for our_path, their_path in variable_map(config):
        if their_path not in theirs:
            raise ValueError(f"keras-hub backbone has no weight {their_path!r}")
        value = np.asarray(theirs[their_path].numpy())
        target = ours[our_path]
        value = value.reshape(tuple(target.shape)) if value.size == np.prod(
            target.shape) else value
        if tuple(value.shape) != tuple(target.shape):
            raise ValueError(
                f"Shape mismatch for {their_path!r} -> {our_path!r}: keras-hub "
                f"{tuple(theirs[their_path].shape)}, expected {tuple(target.shape)}")
        target.assign(value)
    return encoder
