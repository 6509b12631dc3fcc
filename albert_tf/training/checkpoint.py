"""This project's checkpoints: a training run's lifecycle of them (save,
resume, restore, removal of what a failed save left: `RunCheckpoints`),
restoring a model, and one line saying why a checkpoint does not fit it or
cannot be read.

The model folder a checkpoint lives in (its file names, and the checkpoint
a folder or prefix names) is `albert_tf.training.model_dir`'s.
"""

import os
import re

import tensorflow as tf
from absl import logging

from albert_tf.training import errors
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
    return errors.CheckpointUnreadableError(f"The checkpoint {prefix} {what} ({cause})")


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


class RunCheckpoints:
    """The checkpoints of one training run: save, resume, restore, and the
    removal of what a failed save left.

    A run's checkpoints are `ckpt-<step>` in its folder (model, optimizer,
    step), listed by the `checkpoint` state file, which is written last:
    it lists only complete ones. Other workers than the chief take part in
    each save (it is collective) but write to a scratch folder that is
    removed afterwards.

    Args:
        output_dir: the run's folder.
        model: the built model (saved under `MODEL_KEY`).
        optimizer: the built optimizer.
        step: the run's int64 step variable.
        keep: how many checkpoints to keep (0: all).
        strategy: the run's `tf.distribute.Strategy`.
        is_chief: whether this process writes the run's folder.
        config: the model's `AlbertConfig`, named in restore errors (or
            None).
    """

    def __init__(self, output_dir, model, optimizer, step, keep, strategy,
                 is_chief=True, config=None):
        self.output_dir, self.model, self.step = output_dir, model, step
        self.keep, self.strategy, self.is_chief = keep, strategy, is_chief
        self.config = config
        self.checkpoint = tf.train.Checkpoint(
            **{model_dir.MODEL_KEY: model}, optimizer=optimizer, step=step)
        self._manager = None

    def _folder(self):
        if self.is_chief:
            return self.output_dir
        resolver = self.strategy.cluster_resolver
        return os.path.join(self.output_dir,
                            f"workertemp_{resolver.task_type}_{resolver.task_id}")

    @property
    def manager(self):
        # Non-chief scratch folders are removed after each save.
        if self._manager is None or not self.is_chief:
            self._manager = tf.train.CheckpointManager(
                self.checkpoint, self._folder(),
                max_to_keep=self.keep or None, checkpoint_name="ckpt",
                step_counter=self.step)
        return self._manager

    def paths(self):
        """The run's checkpoint prefixes, oldest first (those the
        checkpoint list names)."""
        state = tf.train.get_checkpoint_state(self.output_dir)
        names = state.all_model_checkpoint_paths if state else []
        # The state file may hold paths relative to another folder.
        return [os.path.join(self.output_dir, os.path.basename(p))
                for p in names]

    def _on_disk(self):
        """The `ckpt-<step>` prefixes with an index file, oldest first."""
        steps = []
        for path in tf.io.gfile.glob(os.path.join(self.output_dir,
                                                  "ckpt-*.index")):
            match = re.fullmatch(r"ckpt-(\d+)\.index", os.path.basename(path))
            if match:
                steps.append(int(match.group(1)))
        return [os.path.join(self.output_dir, f"ckpt-{step}")
                for step in sorted(steps)]

    def latest(self):
        """The newest listed checkpoint's prefix, or None."""
        return tf.train.latest_checkpoint(self.output_dir)

    def last_good(self):
        """A sentence naming the checkpoint a failed run leaves as newest."""
        latest = self.latest()
        return (f"The newest checkpoint, {latest}, is kept." if latest
                else "There is no earlier checkpoint.")

    def _check_finite_weights(self):
        for variable in self.model.trainable_variables:
            # Reduced where the variable lives: one bool crosses to the host.
            if not bool(tf.reduce_all(tf.math.is_finite(variable))):
                raise errors.TrainingDivergedError(
                    f"Training diverged at step {int(self.step.numpy())}: "
                    f"variable {variable.path} is not finite, so nothing was "
                    f"saved. {self.last_good()} Lower --learning_rate, or "
                    "check the data.")

    def save(self):
        """Writes `ckpt-<step>`; returns its path (None on non-chief workers).

        Raises:
            TrainingDivergedError: a weight is not finite (nothing written).
            OSError: the write failed (a full disk): names the checkpoint
                and the cause; earlier checkpoints stay listed and whole,
                and the failed one's files are removed.
        """
        self._check_finite_weights()
        step = int(self.step.numpy())
        try:
            path = self.manager.save(checkpoint_number=self.step)
        except (tf.errors.OpError, OSError) as e:
            # The state file is written last: it still lists complete ones.
            cause = (errors.op_error_summary(e)
                     if isinstance(e, tf.errors.OpError) else e)
            prefix = os.path.join(self._folder(), f"ckpt-{step}")
            self._remove_failed_save(prefix)
            raise OSError(f"Could not write the checkpoint of step {step} in "
                          f"{self.output_dir} ({prefix}: {cause}). "
                          f"{self.last_good()}") from e
        if not self.is_chief:
            tf.io.gfile.rmtree(self._folder())
            return None
        logging.info("Saved checkpoint %s", path)
        return path

    def _remove_failed_save(self, prefix):
        """Removes what a failed save of `prefix` left (never a listed,
        complete checkpoint): frees the space for the next try."""
        if prefix in self.paths():
            return
        for path in tf.io.gfile.glob(prefix + ".*") + tf.io.gfile.glob(
                prefix + "_temp*"):
            try:
                if tf.io.gfile.isdir(path):
                    tf.io.gfile.rmtree(path)
                else:
                    tf.io.gfile.remove(path)
            except tf.errors.OpError:
                pass

    def resume(self):
        """Restores the newest listed checkpoint that reads whole; returns
        its path (None: there is none). A checkpoint that does not read
        (a kill or a full disk during its save, a damaged file) is skipped
        with one log line, as is a save that never completed.

        Raises:
            CheckpointUnreadableError: checkpoints are listed and none reads.
        """
        paths = self.paths()
        listed = bool(paths)
        if not listed:
            # No list, or an unreadable one: the files on disk are the run's.
            paths = self._on_disk()
            state_file = os.path.join(self.output_dir, "checkpoint")
            if paths and tf.io.gfile.exists(state_file):
                logging.warning("%s is not a readable checkpoint list: "
                                "looking at the checkpoint files instead.",
                                state_file)
        skipped = []
        for path in reversed(paths):
            try:
                if not listed:
                    # Files no list vouches for are read through first: a
                    # half-read one must not leave its values in the model.
                    check_readable(path)
                read_checked(self.checkpoint, path, self.config)
            except errors.CheckpointUnreadableError as e:
                logging.warning("%s: skipped it.", e)
                self.step.assign(0)
                skipped.append(str(e))
                continue
            self._log_unfinished_saves(path, paths)
            logging.info("Resumed from %s at step %d", path,
                         int(self.step.numpy()))
            return path
        if skipped and listed:
            raise errors.CheckpointUnreadableError(
                f"No checkpoint in --output_dir={self.output_dir} reads whole: "
                f"{skipped[0]}; move the folder away to start over")
        self._log_unfinished_saves(None, paths)
        return None

    def _log_unfinished_saves(self, resumed, known):
        """Logs the checkpoints newer than `resumed` whose save never
        completed (files of no checkpoint in `known`)."""
        if not self.is_chief:
            return
        known = {os.path.basename(path) for path in known}
        newest = int(resumed.rsplit("-", 1)[1]) if resumed else -1
        steps = set()
        for path in tf.io.gfile.glob(os.path.join(self.output_dir, "ckpt-*")):
            match = re.match(r"ckpt-(\d+)", os.path.basename(path))
            if (match and int(match.group(1)) > newest
                    and f"ckpt-{match.group(1)}" not in known):
                steps.add(int(match.group(1)))
        for step in sorted(steps):
            logging.warning("Skipped checkpoint %s: its save did not "
                            "complete (not in the checkpoint list); it is "
                            "written again at its step.", os.path.join(
                                self.output_dir, f"ckpt-{step}"))

    def restore_weights(self, path):
        """Loads the model weights (not the optimizer) of a checkpoint."""
        read_checked(tf.train.Checkpoint(**{model_dir.MODEL_KEY: self.model}), path,
                     self.config)

    def restore_best_or_latest(self, best):
        """Loads the weights of `best` (a checkpoint prefix) if it exists,
        else of the newest checkpoint; returns the path read (None: nothing
        to read)."""
        path = best if tf.io.gfile.exists(best + ".index") else self.latest()
        if path:
            self.restore_weights(path)
        return path
