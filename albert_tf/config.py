"""`AlbertConfig`: the model hyperparameters, with the official field names.

The field names are those of the official `albert_config.json`, so a released
config file loads as is. Two fields are added: `layer_norm_epsilon` (the official
code hard-codes 1e-12) and `share`, which selects the paper's cross-layer sharing
ablations (`"all"`, `"attention"`, `"ffn"`, `"none"`; see
`albert_tf.cross_layer_sharing`).
"""

import dataclasses
import json
import logging
import os

from albert_tf.cross_layer_sharing import SHARE_MODES
from foundation.flag_options import check_fields

# `hidden_act` values (`albert_tf.layers.activations` implements each).
ACTIVATION_NAMES = frozenset((
    "gelu", "gelu_new", "gelu_exact", "relu", "tanh", "swish", "silu",
    "linear"))

# Keys found in official or Hugging Face config files that do not change the
# model computed here (they are logged and dropped).
_IGNORED_KEYS = frozenset({
    # Official albert_config.json.
    "net_structure_type", "layers_to_keep", "gap_size", "num_memory_blocks",
    "down_scale_factor",
    # Hugging Face config.json.
    "architectures", "model_type", "transformers_version", "bos_token_id",
    "eos_token_id", "pad_token_id", "position_embedding_type",
    "classifier_dropout_prob", "torch_dtype", "dtype", "use_cache",
    "output_past", "id2label", "label2id", "finetuning_task", "problem_type",
})

# Hugging Face key -> official key.
_HF_KEY_MAP = {
    "layer_norm_eps": "layer_norm_epsilon",
}


def parse_json_object(text, path):
    """The JSON object in `text`, the content of `path` (named in errors).

    Raises:
        ValueError: one line naming `path`, when `text` is not JSON (a
            truncated download, say) or not a JSON object.
    """
    try:
        values = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path!r} is not valid JSON (truncated or "
                         f"corrupt?): {e}") from e
    if not isinstance(values, dict):
        raise ValueError(f"{path!r} must hold a JSON object. "
                         f"Received: {type(values).__name__}")
    return values


@dataclasses.dataclass
class AlbertConfig:
    """ALBERT hyperparameters (official names; see module docstring).

    Attributes:
        vocab_size: V, rows of the word-embedding table.
        embedding_size: E, width of the factorized embedding.
        hidden_size: H, width of the transformer.
        num_hidden_layers: L, number of executed transformer layers.
        num_hidden_groups: G, number of distinct parameter groups; layer `l`
            uses group `int(l / L * G)`.
        inner_group_num: distinct blocks inside a group, run in sequence.
        num_attention_heads: N; `hidden_size` must be divisible by it.
        intermediate_size: I, the FFN width.
        hidden_act: activation name (see `ACTIVATION_NAMES`).
        hidden_dropout_prob: dropout on embeddings and sub-block outputs.
        attention_probs_dropout_prob: dropout on attention probabilities.
        max_position_embeddings: rows of the position table (longest input).
        type_vocab_size: rows of the token-type (segment) table.
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_epsilon: LayerNorm epsilon (official: 1e-12).
        share: cross-layer sharing, one of `SHARE_MODES`
            (`albert_tf.cross_layer_sharing`).

    Example:

    ```python
    from albert_tf import AlbertConfig

    config = AlbertConfig.from_preset("albert_base_v2")
    print(config.embedding_size, config.hidden_size)  # 128 768: V x E, then E -> H
    tiny = AlbertConfig.from_preset("tiny", vocab_size=1000, share="ffn")
    assert AlbertConfig.from_dict(tiny.to_dict()) == tiny
    ```
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-12
    share: str = "all"

    def __post_init__(self):
        self.validate()

    # --- Validation -------------------------------------------------------

    def validate(self):
        """Checks every field; raises `ValueError` naming the bad field."""
        check_fields(
            self, ("vocab_size", "embedding_size", "hidden_size",
                   "num_hidden_layers", "num_hidden_groups", "inner_group_num",
                   "num_attention_heads", "intermediate_size",
                   "max_position_embeddings", "type_vocab_size"),
            lambda value: (isinstance(value, int)
                           and not isinstance(value, bool) and value > 0),
            "AlbertConfig.{name} must be a positive integer. "
            "Received: {name}={value!r}")
        check_fields(
            self, ("hidden_dropout_prob", "attention_probs_dropout_prob"),
            lambda value: (isinstance(value, (int, float))
                           and 0.0 <= value < 1.0),
            "AlbertConfig.{name} must be in [0, 1). Received: {name}={value!r}")
        check_fields(
            self, ("initializer_range", "layer_norm_epsilon"),
            lambda value: isinstance(value, (int, float)) and value > 0,
            "AlbertConfig.{name} must be a positive number. "
            "Received: {name}={value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                "AlbertConfig.hidden_size must be divisible by "
                "num_attention_heads. Received: "
                f"hidden_size={self.hidden_size}, "
                f"num_attention_heads={self.num_attention_heads}")
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ValueError(
                "AlbertConfig.num_hidden_layers must be divisible by "
                "num_hidden_groups. Received: "
                f"num_hidden_layers={self.num_hidden_layers}, "
                f"num_hidden_groups={self.num_hidden_groups}")
        if self.share not in SHARE_MODES:
            raise ValueError(
                f"AlbertConfig.share must be one of {SHARE_MODES}. "
                f"Received: share={self.share!r}")
        if self.hidden_act not in ACTIVATION_NAMES:
            raise ValueError(
                f"AlbertConfig.hidden_act must be one of "
                f"{sorted(ACTIVATION_NAMES)}. "
                f"Received: hidden_act={self.hidden_act!r}")

    # --- Derived values ---------------------------------------------------

    @property
    def head_size(self):
        """D, the width of one attention head."""
        return self.hidden_size // self.num_attention_heads

    # --- (De)serialization ------------------------------------------------

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source="dict"):
        """Builds a config from official, Hugging Face or this project's keys.

        Args:
            values: mapping of config keys to values.
            source: where `values` came from, for log and error messages.

        Returns:
            An `AlbertConfig`.

        Raises:
            ValueError: for an unknown key or an invalid value.
        """
        is_hf = "model_type" in values or "layer_norm_eps" in values
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in values.items():
            key = _HF_KEY_MAP.get(key, key)
            if key in fields:
                kwargs[key] = value
            elif key in _IGNORED_KEYS:
                logging.info("AlbertConfig: ignoring key %r=%r from %s (it does "
                             "not change this model).", key, value, source)
            else:
                raise ValueError(
                    f"Unknown AlbertConfig key {key!r} in {source}. Known keys: "
                    f"{sorted(fields)}")
        act = kwargs.get("hidden_act")
        if is_hf and act is not None:
            # Hugging Face "gelu" is the exact (erf) form and "gelu_new" the
            # tanh approximation the official ALBERT calls "gelu".
            kwargs["hidden_act"] = {"gelu": "gelu_exact",
                                    "gelu_new": "gelu"}.get(act, act)
        return cls(**kwargs)

    @classmethod
    def from_json_file(cls, path):
        """Reads an official `albert_config.json` or a Hugging Face `config.json`.

        Raises:
            FileNotFoundError: if `path` does not exist.
            ValueError: if the file is not a JSON object or holds a bad value.
        """
        import tensorflow as tf  # Deferred: keeps the config importable alone.

        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"No ALBERT config file at {path!r}")
        with tf.io.gfile.GFile(path, "r") as f:
            text = f.read()
        return cls.from_dict(parse_json_object(text, path), source=path)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes the config as JSON (official keys plus this project's two)."""
        from foundation import safe_io

        path = str(path)
        parent = os.path.dirname(path)
        if parent and "://" in path:
            import tensorflow as tf  # Deferred: keeps the config light.
            tf.io.gfile.makedirs(parent)
        elif parent:
            os.makedirs(parent, exist_ok=True)
        # Whole or not at all, and never through a link planted there.
        safe_io.write_atomically(path, self.to_json_string())

    @classmethod
    def from_preset(cls, name, **overrides):
        """A released configuration by name (see `PRESETS`), with overrides."""
        if name not in PRESETS:
            raise ValueError(f"Unknown ALBERT preset. Received: {name!r}. "
                             f"Known presets: {sorted(PRESETS)}")
        values = dict(PRESETS[name])
        values.update(overrides)
        return cls(**values)


def _released_preset(hidden, intermediate, heads, layers, dropout):
    return dict(vocab_size=30000, embedding_size=128, hidden_size=hidden,
                num_hidden_layers=layers, num_hidden_groups=1, inner_group_num=1,
                num_attention_heads=heads, intermediate_size=intermediate,
                hidden_act="gelu", hidden_dropout_prob=dropout,
                attention_probs_dropout_prob=dropout, max_position_embeddings=512,
                type_vocab_size=2, initializer_range=0.02)


PRESETS = {
    "albert_base_v1": _released_preset(768, 3072, 12, 12, 0.1),
    "albert_base_v2": _released_preset(768, 3072, 12, 12, 0.0),
    "albert_large_v1": _released_preset(1024, 4096, 16, 24, 0.1),
    "albert_large_v2": _released_preset(1024, 4096, 16, 24, 0.0),
    "albert_xlarge_v1": _released_preset(2048, 8192, 16, 24, 0.1),
    "albert_xlarge_v2": _released_preset(2048, 8192, 16, 24, 0.0),
    # xxlarge was released without dropout in both versions.
    "albert_xxlarge_v1": _released_preset(4096, 16384, 64, 12, 0.0),
    "albert_xxlarge_v2": _released_preset(4096, 16384, 64, 12, 0.0),
    # For tests, the quickstart and CPU experiments.
    "tiny": dict(vocab_size=1000, embedding_size=16, hidden_size=32,
                 num_hidden_layers=4, num_hidden_groups=1, inner_group_num=1,
                 num_attention_heads=2, intermediate_size=64, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=128, type_vocab_size=2,
                 initializer_range=0.02),
}
