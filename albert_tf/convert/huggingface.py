"""Hugging Face ALBERT directories (`config.json`, `model.safetensors`).

Weights are read from `model.safetensors` (or the shards listed in
`model.safetensors.index.json`) with NumPy alone; `pytorch_model.bin` is read
only when PyTorch is installed. Names follow `AlbertForPreTraining`
(`albert.*`, `predictions.*`, `sop_classifier.*`); a bare `AlbertModel`
(names without `albert.`) and checkpoints without one of the heads load too.
Torch `Linear` weights are `[out, in]`, the transpose of a TF kernel; the
SOP classifier's `[2, H]` weight already has the official layout.
"""

import json
import logging
import os

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.convert import hf_tokenizer
from albert_tf.convert import names
from albert_tf.convert import safetensors_io
from albert_tf.convert import weight_set

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
PYTORCH_NAME = "pytorch_model.bin"
SPM_NAME = "spiece.model"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
BASE_PREFIX = "albert."

# This project's activation names <-> Hugging Face's (HF "gelu" is the erf
# form; its "gelu_new" is the tanh approximation the official code calls gelu).
_ACT_TO_HF = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_exact": "gelu",
              "relu": "relu", "tanh": "tanh", "swish": "silu", "silu": "silu",
              "linear": "linear"}
_ACT_FROM_HF = {"gelu_new": "gelu", "gelu": "gelu_exact",
                "gelu_pytorch_tanh": "gelu", "relu": "relu", "tanh": "tanh",
                "silu": "silu", "swish": "silu", "linear": "linear"}
_CONFIG_FIELDS = (
    "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
    "num_hidden_groups", "inner_group_num", "num_attention_heads",
    "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
    "max_position_embeddings", "type_vocab_size", "initializer_range",
)
# Tied copies: (tied name, official name it must equal).
_TIED = {"predictions.decoder.weight": "bert/embeddings/word_embeddings",
         "predictions.decoder.bias": "cls/predictions/output_bias"}


def rules(config, base_prefix=BASE_PREFIX):
    """The Hugging Face `TensorRule`s for `config`.

    Args:
        config: an `AlbertConfig` with `share="all"`.
        base_prefix: prefix of the encoder's names: `"albert."` in task
            models, `""` in a bare `AlbertModel`.

    Returns:
        A list of `names.TensorRule`.
    """
    names.check_official(config, "the Hugging Face format")
    shapes = names.official_shapes(config)
    b = base_prefix

    def same(official, external):
        return names.TensorRule.same(official, external, shapes[official])

    def linear(official, external):
        # A TF dense layer: kernel transposed, bias copied.
        return [names.TensorRule.transposed(official + "/kernel",
                                            external + ".weight",
                                            shapes[official + "/kernel"]),
                same(official + "/bias", external + ".bias")]

    def layer_norm(official, external):
        return [same(official + "/gamma", external + ".weight"),
                same(official + "/beta", external + ".bias")]

    out = [
        same("bert/embeddings/word_embeddings",
             b + "embeddings.word_embeddings.weight"),
        same("bert/embeddings/token_type_embeddings",
             b + "embeddings.token_type_embeddings.weight"),
        same("bert/embeddings/position_embeddings",
             b + "embeddings.position_embeddings.weight"),
        *layer_norm("bert/embeddings/LayerNorm", b + "embeddings.LayerNorm"),
    ]
    if "bert/encoder/embedding_hidden_mapping_in/kernel" in shapes:
        out += linear("bert/encoder/embedding_hidden_mapping_in",
                      b + "encoder.embedding_hidden_mapping_in")
    for g in range(config.num_hidden_groups):
        for i in range(config.inner_group_num):
            ours = names.block_prefix(g, i)
            theirs = f"{b}encoder.albert_layer_groups.{g}.albert_layers.{i}."
            for part in ("query", "key", "value"):
                out += linear(ours + "attention_1/self/" + part,
                              theirs + "attention." + part)
            out += linear(ours + "attention_1/output/dense", theirs + "attention.dense")
            out += layer_norm(ours + "LayerNorm", theirs + "attention.LayerNorm")
            out += linear(ours + "ffn_1/intermediate/dense", theirs + "ffn")
            out += linear(ours + "ffn_1/intermediate/output/dense",
                          theirs + "ffn_output")
            out += layer_norm(ours + "LayerNorm_1", theirs + "full_layer_layer_norm")
    out += linear("bert/pooler/dense", b + "pooler")
    out += linear("cls/predictions/transform/dense", "predictions.dense")
    out += layer_norm("cls/predictions/transform/LayerNorm", "predictions.LayerNorm")
    out += [same("cls/predictions/output_bias", "predictions.bias"),
            same("cls/seq_relationship/output_weights",
                 "sop_classifier.classifier.weight"),
            same("cls/seq_relationship/output_bias",
                 "sop_classifier.classifier.bias")]
    return out


def config_from_hf(values, report=None):
    """An `AlbertConfig` from the dict of a Hugging Face `config.json`.

    Keys that do not change the computation (label maps, token ids, ...) are
    dropped and noted in `report`.

    Raises:
        ValueError: for an activation this project lacks, or a bad value.
    """
    kwargs = {key: values[key] for key in _CONFIG_FIELDS if key in values}
    act = values.get("hidden_act", "gelu_new")
    if act not in _ACT_FROM_HF:
        raise ValueError(f"Unsupported Hugging Face hidden_act. Received: {act!r}. "
                         f"Known: {sorted(_ACT_FROM_HF)}")
    kwargs["hidden_act"] = _ACT_FROM_HF[act]
    if "layer_norm_eps" in values:
        kwargs["layer_norm_epsilon"] = values["layer_norm_eps"]
    ignored = sorted(set(values) - set(_CONFIG_FIELDS) -
                     {"hidden_act", "layer_norm_eps"})
    if report is not None and ignored:
        report.notes.append("config keys not used: " + ", ".join(ignored))
    return AlbertConfig(**kwargs)


def config_to_hf(config):
    """The Hugging Face `config.json` dict for `config` (`AlbertForPreTraining`).

    Raises:
        names.UnsupportedConfigError: for a sharing ablation or an activation
            Hugging Face lacks.
    """
    names.check_official(config, "the Hugging Face format")
    if config.hidden_act not in _ACT_TO_HF:
        raise names.UnsupportedConfigError(
            "No Hugging Face name for this activation. Received: "
            f"hidden_act={config.hidden_act!r}")
    values = {key: getattr(config, key) for key in _CONFIG_FIELDS}
    values.update(
        architectures=["AlbertForPreTraining"], model_type="albert",
        hidden_act=_ACT_TO_HF[config.hidden_act],
        layer_norm_eps=config.layer_norm_epsilon,
        classifier_dropout_prob=0.1, position_embedding_type="absolute",
        pad_token_id=0, bos_token_id=2, eos_token_id=3)
    return dict(sorted(values.items()))


def _open_tensors(directory):
    """`(shapes, read, description, dtypes)` for the weights of a directory.

    `read(name)` returns a float32 array for every floating-point dtype.
    """
    index = os.path.join(directory, SAFETENSORS_INDEX_NAME)
    single = os.path.join(directory, SAFETENSORS_NAME)
    if os.path.exists(single) or os.path.exists(index):
        if os.path.exists(single):
            files = {SAFETENSORS_NAME: safetensors_io.SafetensorsFile(single)}
            owner = {k: SAFETENSORS_NAME for k in files[SAFETENSORS_NAME].keys()}
        else:
            owner = weight_set.read_json(index).get("weight_map")
            if not isinstance(owner, dict):
                raise weight_set.ConversionError(
                    f"{index!r} has no \"weight_map\" object")
            files = {name: safetensors_io.SafetensorsFile(
                os.path.join(directory, name)) for name in sorted(set(owner.values()))}
        shapes, dtypes = {}, {}
        for f in files.values():
            shapes.update(f.shapes())
            for key in f.keys():
                dtypes[key] = f.dtype_name(key)
        shapes = {k: shapes[k] for k in owner}
        dtypes = {k: dtypes[k] for k in owner}
        return (shapes, lambda k: files[owner[k]].get(k), ", ".join(sorted(files)),
                dtypes)
    pytorch = os.path.join(directory, PYTORCH_NAME)
    if os.path.exists(pytorch):
        try:
            import torch
        except ImportError:
            raise weight_set.ConversionError(
                f"{directory!r} holds only {PYTORCH_NAME}, which needs PyTorch "
                "to read. Install torch, or save the model with "
                "safe_serialization=True (model.safetensors).") from None
        state = torch.load(pytorch, map_location="cpu", weights_only=True)
        shapes = {k: tuple(v.shape) for k, v in state.items()}
        dtypes = {k: str(v.dtype).replace("torch.", "") for k, v in state.items()}

        def read_tensor(name):
            value = state[name].detach().float().numpy()
            if not np.isfinite(value).all():
                raise weight_set.ConversionError(
                    f"{pytorch!r}: tensor {name!r} holds NaN or infinite "
                    "values; the file is corrupt")
            return value

        return shapes, read_tensor, PYTORCH_NAME, dtypes
    raise FileNotFoundError(
        f"No {SAFETENSORS_NAME}, {SAFETENSORS_INDEX_NAME} or {PYTORCH_NAME} "
        f"in {directory!r}")


def read(directory):
    """Reads a Hugging Face ALBERT directory into canonical `Weights`.

    Args:
        directory: holds `config.json`, the weights and usually
            `spiece.model`.

    Returns:
        `weight_set.Weights`.

    Raises:
        FileNotFoundError: for a missing config or weights file.
        weight_set.ConversionError: for a missing, unexpected or misshaped tensor,
            or a decoder not tied to the word embeddings.
    """
    config_file = os.path.join(directory, CONFIG_NAME)
    if not os.path.exists(config_file):
        raise FileNotFoundError(f"No {CONFIG_NAME} in {directory!r}")
    values = weight_set.read_json(config_file)
    if values.get("model_type", "albert") != "albert":
        raise weight_set.ConversionError(
            f"{config_file!r} is not an ALBERT config. Received: "
            f"model_type={values.get('model_type')!r}")
    report = weight_set.ConversionReport()
    config = config_from_hf(values, report)
    shapes, read_tensor, files, dtypes = _open_tensors(directory)
    report.source = f"Hugging Face directory {directory} ({files})"
    stored = sorted({d for d in dtypes.values() if d not in ("F32", "float32")})
    if stored:
        report.notes.append("stored dtypes " + ", ".join(stored) +
                            " (bfloat16 and float16 are read as float32)")
    base = BASE_PREFIX if any(k.startswith(BASE_PREFIX) for k in shapes) else ""
    if not base:
        report.notes.append("bare AlbertModel: names have no 'albert.' prefix")

    def skip(name):
        if name.endswith((".position_ids", ".token_type_ids")):
            return "buffer, not a weight"
        if name in _TIED:
            return f"tied copy of {_TIED[name]} (checked equal)"
        return None

    tensors = weight_set.gather(shapes, read_tensor, rules(config, base), report,
                                skip=skip)
    for tied, official in _TIED.items():
        if tied in shapes and official in tensors:
            value = weight_set.to_float32(tied, read_tensor(tied), report)
            if not np.array_equal(value, tensors[official]):
                raise weight_set.ConversionError(
                    f"{tied!r} differs from the tensor it should be tied to "
                    f"({official!r}); an untied decoder has no place in ALBERT.")
    spm_model_file = os.path.join(directory, SPM_NAME)
    if not os.path.exists(spm_model_file):
        spm_model_file = None
    report.notes.append(f"SentencePiece model: {spm_model_file or 'none found'}")
    return weight_set.Weights(config, tensors, spm_model_file, report,
                              do_lower_case=_recorded_casing(directory))


def _recorded_casing(directory):
    """`do_lower_case` of the directory's `tokenizer_config.json`, or None
    when it has none (or no such file)."""
    path = os.path.join(directory, TOKENIZER_CONFIG_NAME)
    if not os.path.exists(path):
        return None
    value = weight_set.read_json(path).get("do_lower_case")
    return value if isinstance(value, bool) else None


def write(weights, directory):
    """Writes canonical `Weights` as a Hugging Face directory.

    Writes `config.json` (`AlbertForPreTraining`), `model.safetensors` (a
    head the weights lack is left out) and, with a SentencePiece model,
    `spiece.model`, a `tokenizer_config.json` that drops accents and
    lowercases as the vocabulary does (`weights.do_lower_case`, else read
    from the vocabulary: `hf_tokenizer.casing`), and the `tokenizer.json`
    that `transformers` loads without sentencepiece (`hf_tokenizer`).

    Args:
        weights: `weight_set.Weights`.
        directory: an existing, empty directory.

    Raises:
        names.UnsupportedConfigError: for a config Hugging Face cannot express.
        weight_set.ConversionError: if a tensor's shape does not match the config.
    """
    config_values = config_to_hf(weights.config)
    tensors = {}
    for rule in rules(weights.config):
        if rule.official not in weights.tensors:
            continue
        value = np.asarray(weights.tensors[rule.official], dtype=np.float32)
        if tuple(value.shape) != rule.official_shape:
            raise weight_set.ConversionError(
                f"Shape mismatch for {rule.official!r}: the weights have "
                f"{list(value.shape)}, the config expects "
                f"{list(rule.official_shape)}.")
        tensors[rule.external] = rule.to_external(value)
    with open(os.path.join(directory, CONFIG_NAME), "w") as f:
        json.dump(config_values, f, indent=2)
        f.write("\n")
    safetensors_io.save_file(tensors, os.path.join(directory, SAFETENSORS_NAME),
                             metadata={"format": "pt"})
    if weights.spm_model_file:
        import tensorflow as tf

        tf.io.gfile.copy(weights.spm_model_file,
                         os.path.join(directory, SPM_NAME), overwrite=True)
        with tf.io.gfile.GFile(weights.spm_model_file, "rb") as f:
            proto = f.read()
        do_lower_case = weights.do_lower_case
        if do_lower_case is None:
            do_lower_case, _ = hf_tokenizer.casing(proto)
        with open(os.path.join(directory, TOKENIZER_CONFIG_NAME), "w") as f:
            json.dump(hf_tokenizer.tokenizer_config(do_lower_case), f,
                      indent=2)
            f.write("\n")
        tokenizer = hf_tokenizer.tokenizer_json(proto, do_lower_case)
        with open(os.path.join(directory, hf_tokenizer.FILE_NAME), "w",
                  encoding="utf-8") as f:
            json.dump(tokenizer, f, ensure_ascii=False)
    logging.info("Wrote %d tensors to %s", len(tensors), directory)
