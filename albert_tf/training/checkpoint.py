"""This project's model directory: config, SentencePiece model, TF checkpoint.

Layout of a model directory (what `save_model_dir` writes and training,
conversion and export read):

    <dir>/albert_config.json   AlbertConfig (official keys + layer_norm_epsilon, share)
    <dir>/spm.model            SentencePiece model (optional)
    <dir>/model.ckpt.index     tf.train.Checkpoint with the AlbertPretrainer under
    <dir>/model.ckpt.data-*    the key "model"

Training checkpoints (`ckpt-N` written by a `tf.train.CheckpointManager`) use
the same "model" key next to "optimizer" and "step", so either restores into an
`AlbertPretrainer` with `restore_model`.
"""

import os

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.pretrainer import AlbertPretrainer

CONFIG_NAME = "albert_config.json"
SPM_NAME = "spm.model"
CHECKPOINT_NAME = "model.ckpt"
MODEL_KEY = "model"


def resolve_checkpoint(path):
    """A checkpoint prefix from a prefix or a directory.

    A directory resolves to its newest `tf.train` checkpoint (the `checkpoint`
    file), else to `model.ckpt` inside it.

    Raises:
        FileNotFoundError: when no checkpoint is found, naming `path`.
    """
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        prefix = os.path.join(path, CHECKPOINT_NAME)
    else:
        prefix = path
    if not tf.io.gfile.exists(prefix + ".index"):
        raise FileNotFoundError(f"No TensorFlow checkpoint at {path!r} "
                                f"(looked for {prefix + '.index'!r})")
    return prefix


def restore_model(model, path):
    """Restores an `AlbertPretrainer`'s weights from this project's checkpoint.

    Optimizer slots and the step in training checkpoints are ignored.

    Args:
        model: a built `AlbertPretrainer` with the checkpoint's config.
        path: a checkpoint prefix or a directory (see `resolve_checkpoint`).

    Returns:
        The checkpoint prefix that was read.

    Raises:
        FileNotFoundError: when there is no checkpoint.
        AssertionError: (from tf.train) when a model variable has no value in
            the checkpoint, or a shape differs.
    """
    prefix = resolve_checkpoint(path)
    status = tf.train.Checkpoint(**{MODEL_KEY: model}).read(prefix)
    status.expect_partial().assert_existing_objects_matched()
    return prefix


def save_model_dir(model, directory, spm_model_file=None):
    """Writes `model` (an `AlbertPretrainer`) as a model directory.

    Args:
        model: the `AlbertPretrainer`.
        directory: where to write; created if missing.
        spm_model_file: optional SentencePiece model copied in as `spm.model`.

    Returns:
        The checkpoint prefix written.
    """
    tf.io.gfile.makedirs(directory)
    model.config.to_json_file(os.path.join(directory, CONFIG_NAME))
    if spm_model_file:
        tf.io.gfile.copy(spm_model_file, os.path.join(directory, SPM_NAME),
                         overwrite=True)
    checkpoint = tf.train.Checkpoint(**{MODEL_KEY: model})
    return checkpoint.write(os.path.join(directory, CHECKPOINT_NAME))


def load_model_dir(directory, dtype=None):
    """Builds an `AlbertPretrainer` from a model directory and restores it.

    Raises:
        FileNotFoundError: when the config or the checkpoint is missing.
    """
    config = AlbertConfig.from_json_file(os.path.join(directory, CONFIG_NAME))
    model = AlbertPretrainer(config, dtype=dtype)
    restore_model(model, directory)
    return model
