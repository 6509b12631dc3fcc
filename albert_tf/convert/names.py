"""The canonical tensor names: the official TF1 checkpoint's, and their rules.

Every checkpoint format converts through one canonical form: a dict from the
official TF1 variable name (`bert/embeddings/word_embeddings`, ...) to a
float32 NumPy array in the official layout. This module lists those names for a
config, maps each to a variable of this project's `AlbertPretrainer`, and
defines `TensorRule`, the one-line description of how a tensor of another
format (Hugging Face, keras-hub, a TF-Hub module) relates to an official one.
The same rule serves both directions.

Only full cross-layer sharing (`share="all"`) has official names: the paper's
other sharing ablations exist only in this project.

Shape legend: V vocabulary, E embedding, H hidden, I intermediate, N heads,
D head width.
"""

import dataclasses

import numpy as np

# Official names of the two pretraining heads. A source may lack a whole head
# (e.g. keras-hub has no SOP head); the encoder is always required.
MLM_HEAD_PREFIX = "cls/predictions/"
SOP_HEAD_PREFIX = "cls/seq_relationship/"
HEAD_PREFIXES = (MLM_HEAD_PREFIX, SOP_HEAD_PREFIX)

# A block's tensors: (official name, this project's layer name, input width,
# output width); a LayerNorm has no input width. Widths: "H" hidden, "I"
# intermediate.
_ATTENTION = (
    ("attention_1/self/query", "query", "H", "H"),
    ("attention_1/self/key", "key", "H", "H"),
    ("attention_1/self/value", "value", "H", "H"),
    ("attention_1/output/dense", "output_dense", "H", "H"),
    ("LayerNorm", "LayerNorm", None, "H"),
)
_FFN = (
    ("ffn_1/intermediate/dense", "intermediate", "H", "I"),
    ("ffn_1/intermediate/output/dense", "output_dense", "I", "H"),
    ("LayerNorm_1", "LayerNorm_1", None, "H"),
)


def _leaves(in_width, out_width):
    """`(leaf, shape)` of a dense layer (kernel, bias) or a LayerNorm."""
    if in_width is None:
        return (("beta", (out_width,)), ("gamma", (out_width,)))
    return (("kernel", (in_width, out_width)), ("bias", (out_width,)))


class UnsupportedConfigError(ValueError):
    """The config has no representation in the requested external format."""


def check_official(config, target="the official TF1 format"):
    """Raises unless `config` uses the official (full) cross-layer sharing.

    Args:
        config: an `AlbertConfig`.
        target: the format's name, for the message.

    Raises:
        UnsupportedConfigError: for `share` other than `"all"`.
    """
    if config.share != "all":
        raise UnsupportedConfigError(
            "This project's sharing ablations have no equivalent in "
            f"{target}, whose layers always share "
            "attention and FFN within a group: only share='all' converts. "
            f"Received: share={config.share!r}")


def block_prefix(group, inner):
    """Official name prefix of the block `inner` of group `group`."""
    return f"bert/encoder/transformer/group_{group}/inner_group_{inner}/"


def official_variables(config):
    """The official variables of a full pretraining model, in checkpoint order.

    Args:
        config: an `AlbertConfig` with `share="all"`.

    Returns:
        A list of `(official_name, shape, model_path)`, where `model_path` is
        the `keras.Variable.path` of the same tensor in an `AlbertPretrainer`.
        Every layout is identical in both (this project keeps the official
        one), so values copy over unchanged.

    Raises:
        UnsupportedConfigError: for a sharing ablation.
    """
    check_official(config)
    V, E, H = config.vocab_size, config.embedding_size, config.hidden_size
    out = [
        ("bert/embeddings/word_embeddings", (V, E), "embeddings/word_embeddings"),
        ("bert/embeddings/token_type_embeddings", (config.type_vocab_size, E),
         "embeddings/token_type_embeddings"),
        ("bert/embeddings/position_embeddings",
         (config.max_position_embeddings, E), "embeddings/position_embeddings"),
        ("bert/embeddings/LayerNorm/beta", (E,), "embeddings/LayerNorm/beta"),
        ("bert/embeddings/LayerNorm/gamma", (E,), "embeddings/LayerNorm/gamma"),
    ]
    if E != H:
        out += [
            ("bert/encoder/embedding_hidden_mapping_in/kernel", (E, H),
             "embeddings/embedding_hidden_mapping_in/kernel"),
            ("bert/encoder/embedding_hidden_mapping_in/bias", (H,),
             "embeddings/embedding_hidden_mapping_in/bias"),
        ]
    widths = {"H": H, "I": config.intermediate_size}
    for g in range(config.num_hidden_groups):
        for i in range(config.inner_group_num):
            prefix = block_prefix(g, i)
            for table, suffix in ((_ATTENTION, "attention"), (_FFN, "ffn")):
                layer_prefix = f"group_{g}_inner_group_{i}_{suffix}/"
                for official, ours, in_width, out_width in table:
                    for leaf, shape in _leaves(widths.get(in_width),
                                               widths[out_width]):
                        out.append((f"{prefix}{official}/{leaf}", shape,
                                    f"{layer_prefix}{ours}/{leaf}"))
    out += [
        ("bert/pooler/dense/kernel", (H, H), "pooler_dense/kernel"),
        ("bert/pooler/dense/bias", (H,), "pooler_dense/bias"),
        ("cls/predictions/transform/dense/kernel", (H, E),
         "predictions/transform_dense/kernel"),
        ("cls/predictions/transform/dense/bias", (E,),
         "predictions/transform_dense/bias"),
        ("cls/predictions/transform/LayerNorm/beta", (E,),
         "predictions/transform_LayerNorm/beta"),
        ("cls/predictions/transform/LayerNorm/gamma", (E,),
         "predictions/transform_LayerNorm/gamma"),
        ("cls/predictions/output_bias", (V,), "predictions/output_bias"),
        ("cls/seq_relationship/output_weights", (2, H),
         "seq_relationship/output_weights"),
        ("cls/seq_relationship/output_bias", (2,), "seq_relationship/output_bias"),
    ]
    return out


def official_shapes(config):
    """`{official_name: shape}` for `config` (see `official_variables`)."""
    return {name: shape for name, shape, _ in official_variables(config)}


def head_of(official_name):
    """The head prefix an official name belongs to, or None for the encoder."""
    for prefix in HEAD_PREFIXES:
        if official_name.startswith(prefix):
            return prefix
    return None


@dataclasses.dataclass(frozen=True)
class TensorRule:
    """How one tensor of an external format relates to an official tensor.

    The external value is the official one transposed (when `transpose`) and
    then reshaped to `external_shape`; the inverse reads it back. Both shapes
    hold the same number of elements.

    Attributes:
        official: the official TF1 name.
        external: the tensor's name in the other format.
        official_shape: shape in the official layout.
        external_shape: shape in the other format.
        transpose: whether the 2-D official value is transposed first (torch
            `Linear` weights are `[out, in]`, TF kernels `[in, out]`).
    """

    official: str
    external: str
    official_shape: tuple
    external_shape: tuple
    transpose: bool = False

    @classmethod
    def same(cls, official, external, shape):
        """A tensor stored identically in both formats."""
        return cls(official, external, tuple(shape), tuple(shape))

    @classmethod
    def transposed(cls, official, external, shape):
        """A 2-D tensor stored transposed in the other format."""
        shape = tuple(shape)
        return cls(official, external, shape, shape[::-1], transpose=True)

    @classmethod
    def reshaped(cls, official, external, shape, external_shape):
        """A tensor stored with another shape (same element order)."""
        return cls(official, external, tuple(shape), tuple(external_shape))

    @property
    def transform(self):
        """A short description for reports."""
        if self.transpose:
            return "transpose"
        if self.official_shape != self.external_shape:
            return "reshape"
        return "copy"

    def to_official(self, value):
        """The official-layout array for an external value."""
        value = np.asarray(value)
        if self.transpose:
            value = value.T
        return np.ascontiguousarray(value.reshape(self.official_shape))

    def to_external(self, value):
        """The external-layout array for an official value."""
        value = np.asarray(value)
        if self.transpose:
            value = value.T
        return np.ascontiguousarray(value.reshape(self.external_shape))
