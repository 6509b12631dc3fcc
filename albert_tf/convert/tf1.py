"""Official TF1 ALBERT checkpoints (releases and TF-Hub module variables).

A release directory holds `albert_config.json`, `model.ckpt-best.*` and
`30k-clean.model` (the SentencePiece model); the layouts, and how a path
names their files, are `albert_tf.training.model_dir`'s. The variables
carry the official names listed in `albert_tf.convert.names`; TF-Hub
modules prefix them with `module/`, and training checkpoints add
`global_step` and the optimizer's `<var>/adam_m`, `<var>/adam_v` slots,
which are skipped.

`write` produces the same layout from canonical tensors, saved by a
`tf.compat.v1.train.Saver` so the checkpoint lists the plain official names
(no object-graph entries), as the official code wrote and reads them.
"""

import json
import os

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.convert import names
from albert_tf.convert import weight_set
from albert_tf.training import model_dir

HUB_PREFIX = "module/"

# The official config keys (written in this order).
_OFFICIAL_KEYS = (
    "attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob",
    "embedding_size", "hidden_size", "initializer_range", "intermediate_size",
    "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
    "num_hidden_groups", "net_structure_type", "gap_size", "num_memory_blocks",
    "inner_group_num", "down_scale_factor", "type_vocab_size", "vocab_size",
)
# Activations the official `get_activation` knows.
_OFFICIAL_ACTIVATIONS = ("gelu", "relu", "tanh", "linear")
_OFFICIAL_EPSILON = 1e-12
_SLOT_SUFFIXES = ("/adam_m", "/adam_v")


def rules(config, prefix=""):
    """The TF1 `TensorRule`s: official names, optionally prefixed (`module/`)."""
    return [names.TensorRule.same(official, prefix + official, shape)
            for official, shape, _ in names.official_variables(config)]


def _skip(name):
    base = name[len(HUB_PREFIX):] if name.startswith(HUB_PREFIX) else name
    if base == "global_step":
        return "training step counter"
    if base.endswith(_SLOT_SUFFIXES):
        return "optimizer slot"
    if name == "_CHECKPOINTABLE_OBJECT_GRAPH":
        return "object-graph metadata"
    return None


def checkpoint_names(prefix):
    """`{name: shape}` of every variable in a TF checkpoint."""
    return tf.train.load_checkpoint(prefix).get_variable_to_shape_map()


def read(path, config=None):
    """Reads an official TF1 checkpoint into canonical `Weights`.

    Args:
        path: a release directory, a TF-Hub module directory, or a checkpoint
            prefix.
        config: an `AlbertConfig`, or a path to an `albert_config.json`; by
            default the `albert_config.json` next to the checkpoint (TF-Hub
            modules have none: pass it).

    Returns:
        `weight_set.Weights`.

    Raises:
        FileNotFoundError: for a missing checkpoint or config.
        weight_set.ConversionError: for a missing, unexpected or misshaped tensor.
    """
    prefix = model_dir.resolve_checkpoint(path, release=True)
    if config is None:
        config = model_dir.find_in_model_dir(path, [model_dir.CONFIG_NAME])
        if config is None:
            raise FileNotFoundError(
                f"No {model_dir.CONFIG_NAME} in "
                f"{model_dir.model_folder(path)!r}: pass the model's config "
                "(--config_file) for TF-Hub modules and bare checkpoints.")
    if isinstance(config, str):
        config = AlbertConfig.from_json_file(config)
    names.check_official(config)

    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    report = weight_set.ConversionReport(source=f"TF1 checkpoint {prefix}")
    hub = any(n.startswith(HUB_PREFIX) for n in shapes)
    if hub:
        report.notes.append("TF-Hub module: names carry the 'module/' prefix")
    tensors = weight_set.gather(shapes, reader.get_tensor,
                                rules(config, HUB_PREFIX if hub else ""), report,
                                skip=_skip)
    spm_model_file = model_dir.find_release_spm(path)
    if spm_model_file is None and os.path.basename(
            os.path.dirname(prefix)) == "variables":
        spm_model_file = model_dir.find_release_spm(
            os.path.dirname(os.path.dirname(prefix)))
    report.notes.append(f"SentencePiece model: {spm_model_file or 'none found'}")
    return weight_set.Weights(config, tensors, spm_model_file, report)


def official_config_dict(config):
    """The official `albert_config.json` content for `config`.

    Raises:
        names.UnsupportedConfigError: for what the official code cannot
            express (a sharing ablation, another LayerNorm epsilon or
            activation).
    """
    names.check_official(config)
    if config.hidden_act not in _OFFICIAL_ACTIVATIONS:
        raise names.UnsupportedConfigError(
            "The official code knows the activations "
            f"{_OFFICIAL_ACTIVATIONS}. Received: hidden_act={config.hidden_act!r}")
    if config.layer_norm_epsilon != _OFFICIAL_EPSILON:
        raise names.UnsupportedConfigError(
            "The official code fixes the LayerNorm epsilon at 1e-12. Received: "
            f"layer_norm_epsilon={config.layer_norm_epsilon!r}")
    values = config.to_dict()
    values.update(net_structure_type=0, gap_size=0, num_memory_blocks=0,
                  down_scale_factor=1)
    return {key: values[key] for key in _OFFICIAL_KEYS}


def write_checkpoint(tensors, prefix):
    """Saves `{name: array}` as a TF1 checkpoint with exactly those names.

    Variables are `tf.compat.v1` variables in a graph of their own, saved by a
    `tf.compat.v1.train.Saver`, as the official training code did. Values
    are fed through placeholders, so no array is embedded in the graph.

    Args:
        tensors: `{variable_name: np.ndarray}`.
        prefix: the checkpoint prefix to write.

    Returns:
        The prefix written.
    """
    with tf.Graph().as_default() as graph:
        feeds, var_list = {}, {}
        for name, value in tensors.items():
            placeholder = tf.compat.v1.placeholder(
                tf.as_dtype(value.dtype), value.shape)
            var_list[name] = tf.compat.v1.Variable(placeholder, name=name)
            feeds[placeholder] = value
        saver = tf.compat.v1.train.Saver(var_list=var_list)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run([v.initializer for v in var_list.values()], feeds)
            return saver.save(session, prefix, write_meta_graph=False,
                              write_state=False)


def write_vocab(spm_model_file, path):
    """Writes the `piece<TAB>score` vocabulary a release ships next to it."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=spm_model_file)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(processor.get_piece_size()):
            f.write(f"{processor.id_to_piece(i)}\t{processor.get_score(i)}\n")


def write(weights, directory):
    """Writes canonical `Weights` as an official TF1 release directory.

    Args:
        weights: `weight_set.Weights` (a head it lacks is left out).
        directory: an existing, empty directory.

    Returns:
        The checkpoint prefix written.

    Raises:
        names.UnsupportedConfigError: for a config the official code cannot
            express.
        weight_set.ConversionError: if a tensor's shape does not match the config.
    """
    config_values = official_config_dict(weights.config)
    expected = names.official_shapes(weights.config)
    tensors = {}
    for name, shape in expected.items():
        if name not in weights.tensors:
            continue
        value = weights.tensors[name]
        if tuple(value.shape) != tuple(shape):
            raise weight_set.ConversionError(
                f"Shape mismatch for {name!r}: the weights have "
                f"{list(value.shape)}, the config expects {list(shape)}.")
        tensors[name] = value
    with open(os.path.join(directory, model_dir.CONFIG_NAME), "w") as f:
        json.dump(config_values, f, indent=2)
        f.write("\n")
    if weights.spm_model_file:
        tf.io.gfile.copy(
            weights.spm_model_file,
            os.path.join(directory, model_dir.RELEASE_SPM_NAME), overwrite=True)
        write_vocab(weights.spm_model_file,
                    os.path.join(directory, model_dir.RELEASE_VOCAB_NAME))
    return write_checkpoint(
        tensors, os.path.join(directory, model_dir.RELEASE_CHECKPOINT_NAME))
