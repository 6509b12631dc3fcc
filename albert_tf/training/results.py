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
                                    block) and the run's config files
                                    (albert_config.json, ...).
    <output_dir>/train/, eval/      TensorBoard event files.
"""

import json
import os

import tensorflow as tf

EVAL_RESULTS = "eval_results.txt"
BEST_DIR = "best"
BEST_CHECKPOINT = "model.ckpt"
MODEL_KEY = "model"


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
    return results


def _number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def append_eval_result(output_dir, result):
    """Appends one block to `<output_dir>/eval_results.txt` (atomically:
    the file is rewritten through a temporary name)."""
    path = os.path.join(output_dir, EVAL_RESULTS)
    previous = ""
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            previous = f.read()
    temporary = path + ".tmp"
    with tf.io.gfile.GFile(temporary, "w") as f:
        f.write(previous + format_block(result) + "\n\n")
    tf.io.gfile.rename(temporary, path, overwrite=True)


def best_result(output_dir):
    """The result block stored in `best/`, or None."""
    results = read_eval_results(os.path.join(output_dir, BEST_DIR, EVAL_RESULTS))
    return results[0] if results else None


def save_best(output_dir, model, result, config_files=None):
    """Writes `model` and `result` as `<output_dir>/best/`, replacing it.

    The new copy is written beside the old one and swapped in, so a crash
    never leaves no best model.
    """
    best_dir = os.path.join(output_dir, BEST_DIR)
    staging = best_dir + ".new"
    if tf.io.gfile.exists(staging):
        tf.io.gfile.rmtree(staging)
    tf.io.gfile.makedirs(staging)
    tf.train.Checkpoint(**{MODEL_KEY: model}).write(
        os.path.join(staging, BEST_CHECKPOINT))
    with tf.io.gfile.GFile(os.path.join(staging, EVAL_RESULTS), "w") as f:
        f.write(format_block(result) + "\n")
    write_config_files(staging, config_files or {})
    if tf.io.gfile.exists(best_dir):
        tf.io.gfile.rmtree(best_dir)
    tf.io.gfile.rename(staging, best_dir)
    return best_dir


def write_config_files(directory, config_files):
    """Writes `{file name: JSON-able dict}` into `directory`."""
    for name, content in config_files.items():
        with tf.io.gfile.GFile(os.path.join(directory, name), "w") as f:
            f.write(json.dumps(content, indent=2, sort_keys=True) + "\n")


def check_config_files(directory, config_files):
    """Raises `ValueError` if a config file in `directory` differs from the
    run's, listing the differing keys (a resumed run must not continue
    checkpoints of another model)."""
    for name, content in config_files.items():
        path = os.path.join(directory, name)
        if not tf.io.gfile.exists(path):
            continue
        with tf.io.gfile.GFile(path) as f:
            saved = json.load(f)
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
    from tensorflow.core.framework import summary_pb2

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
