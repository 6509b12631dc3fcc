"""The model folder: what it holds, and how a path names its files.

This project's model folder (what `save_model_dir` writes; training,
conversion, fine-tuning and export read it):

    <dir>/albert_config.json   AlbertConfig (official keys + layer_norm_epsilon, share)
    <dir>/spm.model            SentencePiece model (optional)
    <dir>/model.ckpt.index     tf.train.Checkpoint with the AlbertPretrainer under
    <dir>/model.ckpt.data-*    the key "model"

A training run's folder and its `best/` are model folders too: the run's
checkpoints (`ckpt-N`, named by the `checkpoint` file that a
`tf.train.CheckpointManager` writes) use the same "model" key next to
"optimizer" and "step", and `best/` holds `model.ckpt`
(`albert_tf.training.results`, `albert_tf.training.model_files`).

An official TF1 release holds `albert_config.json`, `model.ckpt-best.*` and
`30k-clean.model`; a TF-Hub module holds `variables/variables.*` and its
SentencePiece model under `assets/` (`albert_tf.convert.tf1` reads them).

One rule names a model's files from any path a user gives: a folder, a
checkpoint prefix or a file in the folder. `model_folder` is the folder,
`find_in_model_dir` a file beside the checkpoint, `resolve_checkpoint` the
checkpoint prefix (`release=True` for the TF1 layouts). Local paths go
through `os.path`, URLs (`gs://...`) through `tf.io.gfile`: TensorFlow
loads only for a URL, a checkpoint or a write, so a program checks the
model files its flags name before it loads.
"""

import logging
import os
import re

from foundation import filesystems

CONFIG_NAME = "albert_config.json"
SPM_NAME = "spm.model"
CHECKPOINT_NAME = "model.ckpt"
# The key of the AlbertPretrainer in this project's tf.train.Checkpoints.
MODEL_KEY = "model"

# An official TF1 release (and a TF-Hub module: HUB_CHECKPOINT).
RELEASE_CHECKPOINT_NAME = "model.ckpt-best"
RELEASE_SPM_NAME = "30k-clean.model"
RELEASE_VOCAB_NAME = "30k-clean.vocab"
HUB_CHECKPOINT = os.path.join("variables", "variables")
# The SentencePiece models a release or module may hold, most specific first.
_RELEASE_SPM_NAMES = (RELEASE_SPM_NAME, SPM_NAME, "spiece.model",
                      os.path.join("assets", RELEASE_SPM_NAME))
_STEP_RE = re.compile(r"-(\d+)$")


def _isdir(path):
    if filesystems.is_remote(path):
        import tensorflow as tf
        return tf.io.gfile.isdir(path)
    return os.path.isdir(path)


def _exists(path):
    if filesystems.is_remote(path):
        import tensorflow as tf
        return tf.io.gfile.exists(path)
    return os.path.exists(path)


def model_folder(path):
    """The folder of a model path: `path` when it is a directory, else the
    folder holding it (`path` is then a checkpoint prefix or a file)."""
    path = os.fspath(path)
    return path if _isdir(path) else os.path.dirname(path)


def find_in_model_dir(path, names):
    """The first of `names` present in the model folder of `path`, or None.

    The one rule for finding a file that comes with a checkpoint: in
    `model_folder(path)`, `names` tried in order.

    Args:
        path: a model folder, a checkpoint prefix or a file in the folder.
        names: file names (or paths relative to the folder), most specific
            first.

    Returns:
        The folder joined with the first name that exists, or None.
    """
    folder = model_folder(path)
    for name in names:
        candidate = os.path.join(folder, name)
        if _exists(candidate):
            return candidate
    return None


def find_release_spm(path):
    """The SentencePiece model of a TF1 release or TF-Hub module folder (or
    of the folder of a prefix), or None: a known name, else the folder's
    (or its `assets/`') only `*.model` file."""
    import tensorflow as tf

    found = find_in_model_dir(path, _RELEASE_SPM_NAMES)
    if found:
        return found
    folder = model_folder(path)
    found = sorted(tf.io.gfile.glob(os.path.join(folder, "*.model")) +
                   tf.io.gfile.glob(os.path.join(folder, "assets", "*.model")))
    return found[0] if len(found) == 1 else None


def _release_prefix(folder):
    """A TF1 release's checkpoint in `folder` without a `checkpoint` file:
    its only `*.index` (else `model.ckpt-best`, else the highest step), or
    a TF-Hub module's `variables/variables`; None when there is none."""
    import tensorflow as tf

    prefixes = sorted(p[:-len(".index")] for p in
                      tf.io.gfile.glob(os.path.join(folder, "*.index")))
    if len(prefixes) > 1:
        best = [p for p in prefixes if p.endswith(RELEASE_CHECKPOINT_NAME)]
        steps = [(int(m.group(1)), p) for p in prefixes
                 if (m := _STEP_RE.search(p))]
        if best:
            prefixes = best
        elif steps:
            prefixes = [max(steps)[1]]
        logging.info("Several checkpoints in %s; reading %s", folder,
                     prefixes[0])
    if prefixes:
        return prefixes[0]
    hub = os.path.join(folder, HUB_CHECKPOINT)
    return hub if tf.io.gfile.exists(hub + ".index") else None


def resolve_checkpoint(path, release=False):
    """The checkpoint prefix that a prefix or a folder names.

    A folder resolves to its newest `tf.train` checkpoint (the `checkpoint`
    file), else to `model.ckpt` in it; with `release`, else to what an
    official TF1 release or TF-Hub module holds (its only `*.index`, else
    `model.ckpt-best`, else the highest step; or `variables/variables`).

    Args:
        path: a folder or a checkpoint prefix.
        release: accept the TF1 layouts (`albert_tf.convert.tf1`).

    Returns:
        The prefix.

    Raises:
        FileNotFoundError: when no checkpoint is found, naming `path`.
    """
    import tensorflow as tf

    kind = "TF1" if release else "TensorFlow"
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        if release:
            prefix = _release_prefix(path)
            if prefix is None:
                raise FileNotFoundError(
                    f"No {kind} checkpoint (*.index) in {path!r}")
            return prefix
        prefix = os.path.join(path, CHECKPOINT_NAME)
    else:
        prefix = path
    if not tf.io.gfile.exists(prefix + ".index"):
        raise FileNotFoundError(f"No {kind} checkpoint at {path!r} "
                                f"(looked for {prefix + '.index'!r})")
    return prefix


def save_model_dir(model, directory, spm_model_file=None):
    """Writes `model` (an `AlbertPretrainer`) as a model folder.

    Args:
        model: the `AlbertPretrainer`.
        directory: where to write; created if missing.
        spm_model_file: optional SentencePiece model copied in as `spm.model`.

    Returns:
        The checkpoint prefix written.
    """
    import tensorflow as tf

    tf.io.gfile.makedirs(directory)
    model.config.to_json_file(os.path.join(directory, CONFIG_NAME))
    if spm_model_file:
        tf.io.gfile.copy(spm_model_file, os.path.join(directory, SPM_NAME),
                         overwrite=True)
    checkpoint = tf.train.Checkpoint(**{MODEL_KEY: model})
    return checkpoint.write(os.path.join(directory, CHECKPOINT_NAME))
