"""keras-hub ALBERT presets and models <-> canonical (official) tensors.

A preset directory holds `config.json` (an `AlbertBackbone`),
`model.weights.h5`, the SentencePiece model `assets/tokenizer/vocabulary.spm`
and, when saved from an `AlbertMaskedLM`, `task.json` and `task.weights.h5`
with the MLM head. It is loaded with keras-hub itself and its weights are
mapped by `keras.Variable.path`.

keras-hub stores attention kernels per head (`[H, N, D]`, output `[N, D, H]`,
biases `[N, D]`); the official layout is `[H, H]`, so those are reshaped.
keras-hub implements only full sharing, always has the E -> H projection, has
no SOP head, and its MLM head uses a LayerNorm epsilon of 1e-5 where the
official head uses 1e-12 (a difference of order 1e-6 in the logits).
"""

import os

from albert_tf.config import AlbertConfig
from albert_tf.convert import names
from albert_tf.convert import weight_set
from albert_tf.models.encoder import AlbertEncoder

CONFIG_NAME = "config.json"
TASK_CONFIG_NAME = "task.json"
WEIGHTS_NAME = "model.weights.h5"
SPM_PATH = os.path.join("assets", "tokenizer", "vocabulary.spm")

# Official sub-block names -> keras-hub layer names inside
# `group_{g}_inner_layer_{i}`.
_BLOCK = (
    ("attention_1/self/query", "self_attention_layer/query"),
    ("attention_1/self/key", "self_attention_layer/key"),
    ("attention_1/self/value", "self_attention_layer/value"),
    ("attention_1/output/dense", "self_attention_layer/attention_output"),
    ("LayerNorm", "self_attention_layer_norm"),
    ("ffn_1/intermediate/dense", "feedforward_intermediate_dense"),
    ("ffn_1/intermediate/output/dense", "feedforward_output_dense"),
    ("LayerNorm_1", "feedforward_layer_norm"),
)


def config_from_keras_hub(backbone):
    """The `AlbertConfig` equivalent to a keras-hub `AlbertBackbone`.

    Args:
        backbone: an `AlbertBackbone`, or its `get_config()` dict.
    """
    get = (backbone.get if isinstance(backbone, dict)
           else lambda key: getattr(backbone, key))
    return AlbertConfig(
        vocab_size=get("vocabulary_size"),
        embedding_size=get("embedding_dim"),
        hidden_size=get("hidden_dim"),
        num_hidden_layers=get("num_layers"),
        num_hidden_groups=get("num_groups"),
        inner_group_num=get("num_inner_repetitions"),
        num_attention_heads=get("num_heads"),
        intermediate_size=get("intermediate_dim"),
        hidden_act="gelu",
        hidden_dropout_prob=get("dropout"),
        attention_probs_dropout_prob=get("dropout"),
        max_position_embeddings=get("max_sequence_length"),
        type_vocab_size=get("num_segments"),
        share="all")


def rules(config):
    """The keras-hub `TensorRule`s (weight paths of an `AlbertMaskedLM`).

    Raises:
        names.UnsupportedConfigError: for a sharing ablation, or E == H
            (keras-hub keeps an E -> H projection the official model lacks).
    """
    names.check_official(config, "keras-hub")
    if config.embedding_size == config.hidden_size:
        raise names.UnsupportedConfigError(
            "keras-hub backbones always have an E -> H projection, which the "
            "official model (and this one) lacks when embedding_size == "
            f"hidden_size. Received: embedding_size={config.embedding_size}, "
            f"hidden_size={config.hidden_size}")
    shapes = names.official_shapes(config)
    H, N, D = config.hidden_size, config.num_attention_heads, config.head_size

    def same(official, external):
        return names.TensorRule.same(official, external, shapes[official])

    def dense(official, external):
        return [same(official + "/kernel", external + "/kernel"),
                same(official + "/bias", external + "/bias")]

    def layer_norm(official, external):
        return [same(official + "/gamma", external + "/gamma"),
                same(official + "/beta", external + "/beta")]

    out = [
        same("bert/embeddings/word_embeddings", "token_embedding/embeddings"),
        same("bert/embeddings/token_type_embeddings", "segment_embedding/embeddings"),
        same("bert/embeddings/position_embeddings", "position_embedding/embeddings"),
        *layer_norm("bert/embeddings/LayerNorm", "embeddings_layer_norm"),
        *dense("bert/encoder/embedding_hidden_mapping_in", "embedding_projection"),
    ]
    for g in range(config.num_hidden_groups):
        for i in range(config.inner_group_num):
            ours = names.block_prefix(g, i)
            theirs = f"group_{g}_inner_layer_{i}/"
            for official, external in _BLOCK:
                official, external = ours + official, theirs + external
                if official.endswith("LayerNorm") or official.endswith("LayerNorm_1"):
                    out += layer_norm(official, external)
                elif "/self/" in official:
                    out += [names.TensorRule.reshaped(
                                official + "/kernel", external + "/kernel",
                                (H, H), (H, N, D)),
                            names.TensorRule.reshaped(
                                official + "/bias", external + "/bias", (H,), (N, D))]
                elif official.endswith("attention_1/output/dense"):
                    out += [names.TensorRule.reshaped(
                                official + "/kernel", external + "/kernel",
                                (H, H), (N, D, H)),
                            same(official + "/bias", external + "/bias")]
                else:
                    out += dense(official, external)
    out += dense("bert/pooler/dense", "pooled_dense")
    out += dense("cls/predictions/transform/dense", "mlm_head/intermediate_dense")
    out += layer_norm("cls/predictions/transform/LayerNorm",
                      "mlm_head/intermediate_layer_norm")
    out.append(same("cls/predictions/output_bias", "mlm_head/output_bias"))
    return out


def weights_from_model(model, source="keras-hub model", spm_model_file=None):
    """Canonical `Weights` of a keras-hub `AlbertBackbone` or `AlbertMaskedLM`.

    Args:
        model: the keras-hub model (an `AlbertMaskedLM` adds the MLM head).
        source: a description for the report.
        spm_model_file: the SentencePiece model that goes with it, if any.

    Returns:
        `weight_set.Weights` (without the SOP head, which keras-hub lacks).

    Raises:
        names.UnsupportedConfigError: see `rules`.
        weight_set.ConversionError: for a missing, unexpected or misshaped tensor.
    """
    backbone = getattr(model, "backbone", model)
    config = config_from_keras_hub(backbone)
    variables = {}
    for w in model.weights:
        variables.setdefault(w.path, w)
    report = weight_set.ConversionReport(source=source)
    tensors = weight_set.gather({k: tuple(v.shape) for k, v in variables.items()},
                                lambda k: variables[k].numpy(), rules(config), report)
    for name in names.official_shapes(config):
        if name.startswith(names.SOP_HEAD_PREFIX):
            report.absent.append((name, "keras-hub has no SOP head; a model "
                                        "built from it initializes this tensor"))
    if "cls/predictions/output_bias" in tensors:
        report.notes.append("keras-hub's MLM head LayerNorm epsilon is 1e-5; "
                            "this model's is the official 1e-12")
    return weight_set.Weights(config, tensors, spm_model_file, report)


def read(directory):
    """Reads a keras-hub ALBERT preset directory into canonical `Weights`.

    Args:
        directory: a local preset directory.

    Returns:
        `weight_set.Weights`.

    Raises:
        ImportError: if keras-hub is not installed.
        FileNotFoundError: for a missing `config.json` or weights file.
        weight_set.ConversionError: for a non-ALBERT preset or bad tensors.
    """
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        if not os.path.exists(os.path.join(directory, name)):
            raise FileNotFoundError(f"No {name} in keras-hub preset {directory!r}")
    class_name = weight_set.read_json(os.path.join(directory, CONFIG_NAME)).get(
        "class_name")
    if class_name != "AlbertBackbone":
        raise weight_set.ConversionError(
            f"{directory!r} is not a keras-hub ALBERT preset. Received: "
            f"class_name={class_name!r}")
    try:
        import keras_hub
    except ImportError:
        raise ImportError("Reading keras-hub presets needs keras-hub "
                          "(pip install keras-hub).") from None
    task_file = os.path.join(directory, TASK_CONFIG_NAME)
    has_mlm = False
    if os.path.exists(task_file):
        has_mlm = weight_set.read_json(task_file).get("class_name") == "AlbertMaskedLM"
    if has_mlm:
        model = keras_hub.models.AlbertMaskedLM.from_preset(
            directory, preprocessor=None)
    else:
        model = keras_hub.models.AlbertBackbone.from_preset(directory)
    spm_model_file = os.path.join(directory, SPM_PATH)
    if not os.path.exists(spm_model_file):
        spm_model_file = None
    weights = weights_from_model(
        model, f"keras-hub preset {directory} "
               f"({'AlbertMaskedLM' if has_mlm else 'AlbertBackbone'})",
        spm_model_file)
    weights.report.notes.append(
        f"SentencePiece model: {spm_model_file or 'none found'}")
    return weights


def encoder_from_keras_hub(backbone):
    """Builds an `AlbertEncoder` holding a keras-hub backbone's weights.

    Args:
        backbone: a built `keras_hub.models.AlbertBackbone`.

    Returns:
        An `AlbertEncoder` that computes the same outputs.

    Raises:
        names.UnsupportedConfigError: if `embedding_dim == hidden_dim`.
        weight_set.ConversionError: if a tensor is missing or has another shape.
    """
    weights = weights_from_model(backbone)
    encoder = AlbertEncoder(weights.config)
    weight_set.assign_to_model(encoder, weights.tensors)
    return encoder
