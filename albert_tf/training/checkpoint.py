"""Reading this project's checkpoints: restoring a model, and one line
saying why a checkpoint does not fit it or cannot be read.

The model folder a checkpoint lives in (its file names, and the checkpoint
a folder or prefix names) is `albert_tf.training.model_dir`'s.
"""

import re

import tensorflow as tf

from albert_tf.training import model_dir

# Config fields that set a variable dimension, most specific first.
_SIZE_FIELDS = ("hidden_size", "intermediate_size", "embedding_size",
                "vocab_size", "max_position_embeddings", "type_vocab_size")
# (variable name part, dimension) -> the field that sets it.
_NAME_HINTS = {("word_embeddings", 0): "vocab_size",
               ("position_embeddings", 0): "max_position_embeddings",
               ("token_type_embeddings", 0): "type_vocab_size",
               ("_embeddings", 1): "embedding_size"}
_SHAPE_ERROR = re.compile(r"incompatible tensor with shape \(([\d, ]*)\) when "
                          r"attempting to restore variable with shape "
                          r"\(([\d, ]*)\) and name ([^\s:]+)")


def _likely_fields(name, saved, built, config):
    """The config fields that may set the first dimension that differs."""
    index = next(i for i, (a, b) in enumerate(zip(saved, built)) if a != b)
    for (hint, dimension), field in _NAME_HINTS.items():
        if hint in name and index == dimension:
            return [field], index
    return [field for field in _SIZE_FIELDS if config is not None and
            getattr(config, field, None) == built[index]], index


def explain_restore_error(error, prefix, config=None):
    """One line saying why checkpoint `prefix` does not fit the model.

    Args:
        error: the `ValueError` or `AssertionError` tf.train raised.
        prefix: the checkpoint prefix.
        config: the `AlbertConfig` the model was built from, if known.

    Returns:
        The message, or None if `error` is not a mismatch of the model.
    """
    text = str(error)
    match = _SHAPE_ERROR.search(text)
    if match:
        saved, built = (tuple(int(d) for d in g.replace(" ", "").split(",") if d)
                        for g in match.groups()[:2])
        name = match.group(3)
        cause = ""
        if len(saved) == len(built):
            fields, index = _likely_fields(name, saved, built, config)
            if fields:
                cause = (f"; likely config field: {' or '.join(fields)} "
                         f"({built[index]} in the config, {saved[index]} in "
                         "the checkpoint)")
        return (f"The checkpoint {prefix} does not fit the config: variable "
                f"{name} has shape {saved} there and {built} in the model{cause}.")
    if "not bound to checkpointed values" in text:
        missing = re.findall(r"path=([^\s,]+)", text)
        count = re.search(r"Found (\d+) Python objects", text)
        return (f"The checkpoint {prefix} does not fit the config: "
                f"{count.group(1) if count else 'some'} model variables have no "
                f"value there (e.g. {', '.join(missing[:3])}); check "
                "num_hidden_layers, num_hidden_groups, inner_group_num and "
                "share against the checkpoint's albert_config.json.")
    return None


class CheckpointUnreadableError(ValueError):
    """A checkpoint's files are missing, truncated or corrupt (one line
    naming the checkpoint and the cause)."""


def _unreadable(prefix, error):
    """`CheckpointUnreadableError` for an error met reading `prefix`: a
    `tf.errors.OpError`, or the `IndexError` the checkpoint reader raises on
    a truncated data file (their messages name no file)."""
    text = getattr(error, "message", None) or str(error)
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.strip().startswith("[[")]
    cause = lines[0] if lines else type(error).__name__
    if isinstance(error, tf.errors.NotFoundError):
        what = "is missing files"
    else:
        what = "is truncated or corrupt"
    return CheckpointUnreadableError(f"The checkpoint {prefix} {what} ({cause})")


def check_readable(prefix):
    """Reads every value of checkpoint `prefix` (their checksums checked),
    assigning nothing.

    Raises:
        CheckpointUnreadableError: a file is missing, truncated or corrupt.
    """
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, IndexError) as e:
        raise _unreadable(prefix, e) from e
    return prefix


def read_checked(checkpoint, prefix, config=None, partial=True):
    """`checkpoint.read(prefix)` with every model variable bound, or one
    `ValueError` line naming the mismatch (see `explain_restore_error`).

    Args:
        checkpoint: a `tf.train.Checkpoint`.
        prefix: the checkpoint prefix.
        config: the `AlbertConfig` the model was built from, if known.
        partial: values in the checkpoint the program does not use (an
            optimizer's) are allowed.

    Raises:
        CheckpointUnreadableError: the checkpoint's files are missing,
            truncated or corrupt (names `prefix` and the cause).
        ValueError: the checkpoint does not fit the model.
    """
    message = None
    try:
        status = checkpoint.read(prefix)
        if partial:
            status = status.expect_partial()
        status.assert_existing_objects_matched()
    except (tf.errors.OpError, IndexError) as e:
        raise _unreadable(prefix, e) from e
    except (ValueError, AssertionError) as e:
        message = explain_restore_error(e, prefix, config)
        if message is None:
            raise
    if message is not None:
        raise ValueError(message)
    return prefix


def restore_model(model, path):
    """Restores an `AlbertPretrainer`'s weights from this project's checkpoint.

    Optimizer slots and the step in training checkpoints are ignored.

    Args:
        model: a built `AlbertPretrainer` with the checkpoint's config.
        path: a checkpoint prefix or a directory (see
            `model_dir.resolve_checkpoint`).

    Returns:
        The checkpoint prefix that was read.

    Raises:
        FileNotFoundError: when there is no checkpoint.
        ValueError: a model variable has no value in the checkpoint, or a
            shape differs (one line naming the variable, the shapes and the
            likely config field).
    """
    prefix = model_dir.resolve_checkpoint(path)
    return read_checked(tf.train.Checkpoint(**{model_dir.MODEL_KEY: model}),
                        prefix, getattr(model, "config", None))

