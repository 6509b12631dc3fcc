"""What a training run records: evaluation results, the best model, scalars.

One format for every job (pretraining and each fine-tuning task):

    <output_dir>/eval_results.txt   one block per evaluated checkpoint, in the
                                    official `key = value` form, blocks
                                    separated by a blank line:
                                        checkpoint = ckpt-400
                                        global_step = 400
                                        <metric> = <value>
                                        ...
    <output_dir>/best/              the best checkpoint so far, by the job's
                                    metric: model.ckpt.* (the model under
                                    the key "model", as in training
                                    checkpoints), eval_results.txt (its one
                                    block), the run's config files
                                    (albert_config.json, ...) and its
                                    vocabulary (spm.model) when the run
                                    knows it: a complete model folder
                                    (`albert_tf.training.model_dir`).
    <output_dir>/train/, eval/      TensorBoard event files.

Every file is written whole or not at all (`safe_io.write_atomically`), and
`best/` is replaced through two renames that `recover_best` completes after
a kill, so a run killed while writing results resumes with them whole.
Results are kept and read in the order of their steps.
"""

import json
import os

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from albert_tf.training import model_dir
from foundation import safe_io

EVAL_RESULTS = "eval_results.txt"
# `best/` is a model folder (`model_dir`): its checkpoint is `model.ckpt`.
BEST_DIR = "best"


def format_block(result):
    """The `key = value` lines of one result dict (insertion order)."""
    return "\n".join(f"{key} = {value}" for key, value in result.items())


def read_eval_results(path):
    """Parses an `eval_results.txt` into a list of dicts (one per block).

    Integers come back as ints, other numbers as floats, the rest as
    strings.
    """
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path) as f:
        blocks = f.read().strip().split("\n\n")
    results = []
    for block in blocks:
        entry = {}
        for line in block.splitlines():
            if " = " in line:
                key, value = line.split(" = ", 1)
                entry[key] = _number(value)
        if entry:
            results.append(entry)
    return sorted(results, key=_step_order)


def _step_order(result):
    """Sort key: by `global_step` (results without one last, in order)."""
    step = result.get("global_step")
    return (0, step) if isinstance(step, int) else (1, 0)


def _number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def append_eval_result(output_dir, result):
    """Adds one block to `<output_dir>/eval_results.txt`, the blocks in the
    order of their steps (a checkpoint evaluated again replaces its block).

    The file is rewritten whole through a temporary name: a kill leaves the
    old file or the new one.

    Raises:
        safe_io.OutputError: the file could not be written (names it and
            the cause: a full disk, ...); the old file is unchanged.
    """
    path = os.path.join(output_dir, EVAL_RESULTS)
    results = [r for r in read_eval_results(path)
               if r.get("checkpoint") != result.get("checkpoint")]
    results = sorted(results + [result], key=_step_order)
    safe_io.write_atomically(
        path, "".join(format_block(r) + "\n\n" for r in results))


def best_result(output_dir):
    """The result block stored in `best/`, or None."""
    results = read_eval_results(os.path.join(output_dir, BEST_DIR, EVAL_RESULTS))
    return results[0] if results else None


_STAGING_PREFIX = f".{BEST_DIR}.incomplete-"
_PREVIOUS_PREFIX = f".{BEST_DIR}.old-"


def _lock_of(output_dir):
    """The output lock this process holds on a local `output_dir` (its
    record lists the hidden folders a killed swap leaves), or None."""
    if "://" in str(output_dir):
        return None
    from albert_tf.training import output_folder
    return output_folder.held_lock(output_dir)


def save_best(output_dir, model, result, config_files=None, files=None):
    """Writes `model` and `result` as `<output_dir>/best/`, replacing it,
    with the run's `config_files` and `files` (`{name: source path}`: the
    vocabulary), so that `best/` is a complete model folder.

    The new copy is written in a hidden folder, its `eval_results.txt`
    last (the mark that it is whole), then swapped in by two renames
    (`best` -> `.best.old-*`, the new one -> `best`); a kill at any point
    leaves a whole `best/` or one that `recover_best` restores. The hidden
    folders are recorded in the run's output lock, so only they are ever
    removed or restored.

    Raises:
        safe_io.OutputError: a file could not be written (a full disk);
            the old `best/` is unchanged.
    """
    best_dir = os.path.join(output_dir, BEST_DIR)
    lock = _lock_of(output_dir)
    recover_best(output_dir)
    staging = _make_hidden(output_dir, _STAGING_PREFIX, lock)
    try:
        tf.train.Checkpoint(**{model_dir.MODEL_KEY: model}).write(
            os.path.join(staging, model_dir.CHECKPOINT_NAME))
        write_config_files(staging, config_files or {})
        for name, source in (files or {}).items():
            with tf.io.gfile.GFile(source, "rb") as f:
                safe_io.write_atomically(os.path.join(staging, name),
                                         f.read())
        safe_io.write_atomically(os.path.join(staging, EVAL_RESULTS),
                                 format_block(result) + "\n")
    except (tf.errors.OpError, safe_io.OutputError) as e:
        _remove(staging, lock)
        message = getattr(e, "message", None) or str(e)
        raise safe_io.OutputError(
            f"could not write {best_dir}: {message.splitlines()[0]}") from e
    previous = None
    if tf.io.gfile.exists(best_dir):
        previous = _unused_name(output_dir, _PREVIOUS_PREFIX)
        if lock is not None:
            lock.record(previous, before_rename_from=best_dir)
        tf.io.gfile.rename(best_dir, previous)
    tf.io.gfile.rename(staging, best_dir)
    if lock is not None:
        lock.forget(staging)
    if previous is not None:
        _remove(previous, lock)
    return best_dir


def _make_hidden(output_dir, prefix, lock):
    if lock is not None:
        return lock.make_folder(output_dir, prefix)
    folder = _unused_name(output_dir, prefix)
    tf.io.gfile.makedirs(folder)
    return folder


def _unused_name(output_dir, prefix):
    import secrets
    return os.path.join(output_dir, prefix + secrets.token_hex(4))


def _remove(folder, lock):
    if lock is not None:
        lock.remove_recorded(folder)
    elif tf.io.gfile.exists(folder):
        tf.io.gfile.rmtree(folder)


def recover_best(output_dir):
    """Completes a `best/` swap that a kill interrupted, from the killed
    run's record in the output lock: with no `best/`, the new copy if it
    was whole, else the old one, is renamed back; the other recorded
    folders are removed. Nothing is touched that the record does not list
    (a folder of yours named like ours stays)."""
    lock = _lock_of(output_dir)
    if lock is None:
        return
    best_dir = os.path.join(output_dir, BEST_DIR)
    ours = [p for p in lock.previous_leftovers if lock.is_recorded(p)
            and os.path.dirname(p) == os.path.abspath(output_dir)]
    staged = [p for p in ours if os.path.basename(p).startswith(
        _STAGING_PREFIX) and os.path.exists(os.path.join(p, EVAL_RESULTS))]
    previous = [p for p in ours
                if os.path.basename(p).startswith(_PREVIOUS_PREFIX)]
    if not os.path.exists(best_dir):
        for candidate in staged + previous:
            os.rename(candidate, best_dir)
            lock.forget(candidate)
            break
    for leftover in ours:
        if lock.is_recorded(leftover):
            lock.remove_recorded(leftover)


def write_config_files(directory, config_files):
    """Writes `{file name: JSON-able dict}` into `directory` (each file
    whole or not at all)."""
    for name, content in config_files.items():
        safe_io.write_atomically(
            os.path.join(directory, name),
            json.dumps(content, indent=2, sort_keys=True) + "\n")


def check_config_files(directory, config_files):
    """Raises `ValueError` if a config file in `directory` differs from the
    run's, listing the differing keys (a resumed run must not continue
    checkpoints of another model)."""
    for name, content in config_files.items():
        path = os.path.join(directory, name)
        if not tf.io.gfile.exists(path):
            continue
        try:
            with tf.io.gfile.GFile(path) as f:
                saved = json.load(f)
        except (ValueError, UnicodeDecodeError):
            raise ValueError(
                f"{path} is not readable JSON; it records the configuration "
                f"of the checkpoints in {directory}. Restore it, or use "
                "another --output_dir") from None
        current = json.loads(json.dumps(content))
        if saved != current:
            diff = ", ".join(
                f"{key}: {saved.get(key)!r} saved, {current.get(key)!r} now"
                for key in sorted(set(saved) | set(current))
                if saved.get(key) != current.get(key))
            raise ValueError(
                f"{path} belongs to the checkpoints in {directory} and "
                f"differs from this run's configuration ({diff}). Use another "
                "output_dir, or the saved configuration.")


def _scalar_metadata():
    # What tensorboard's scalar summary writes, built here so that summaries
    # need only TensorFlow (the tensorboard package is not a dependency).
    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = "scalars"
    return metadata.SerializeToString()


def write_scalars(writer, step, scalars):
    """Writes float scalars as TensorBoard scalar summaries at `step`."""
    metadata = _scalar_metadata()
    with writer.as_default(step=step):
        for name, value in scalars.items():
            tf.summary.write(name, tf.constant(float(value), tf.float32),
                             metadata=metadata)
    writer.flush()
