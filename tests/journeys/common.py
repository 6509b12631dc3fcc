"""Shared steps of the journeys: documented commands in subprocesses, fresh
Python processes, the results layout, and the pretraining workspace.

The commands are read from the README and `docs/` (`documented.command`),
made tiny. The workspace is a temporary folder laid out as those commands
assume (`corpus/`, `vocab/`, `data/`, `runs/`, ...); every command runs in it
with relative paths, as a user would from their project folder. It is made
once per process (`functools.lru_cache`) so that all journeys of one pytest
run share one vocabulary and one pretraining run, and a journey run alone
(one Bazel target) makes what it needs.
"""

import atexit
import functools
import gzip
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile
import types

import pytest

from tests.journeys import documented

REPO = str(pathlib.Path(__file__).resolve().parents[2])

# The programs are run as `python -m ...` from the workspace, so the
# repository goes on the path (an installed package would put it there).
# No GPU: the runs are sized for a CPU, and probing one only costs time.
ENV = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="",
           TF_CPP_MIN_LOG_LEVEL="2")

# Tiny sizes shared by the journeys. VOCAB_SIZE is the `tiny` preset's, so a
# vocabulary of that size fits the model `--preset=tiny` builds.
VOCAB_SIZE = 1000
SEQ_LENGTH = 64
PREDICTIONS = 10
CORPUS_CHARS = 300_000
SPM_MODEL = "vocab/30k-clean.model"
PRETRAIN_DIR = "runs/tiny"
# First pretraining run: checkpoints (each evaluated) every SAVE_STEPS, a
# progress line every LOOP_STEPS.
FIRST_STEPS, SAVE_STEPS, LOOP_STEPS = 20, 10, 5
# The documented data commands' sizes, made tiny.
RECORD_FLAGS = {"max_seq_length": SEQ_LENGTH,
                "max_predictions_per_seq": PREDICTIONS, "dupe_factor": 2,
                "num_workers": 2, "num_output_shards": 2}
# The documented pretraining commands' sizes, made tiny.
TINY_PRETRAINING = {
    "output_dir": PRETRAIN_DIR, "preset": "tiny", "train_batch_size": 16,
    "max_seq_length": SEQ_LENGTH, "max_predictions_per_seq": PREDICTIONS,
    "num_warmup_steps": 2, "iterations_per_loop": LOOP_STEPS,
    "save_checkpoints_steps": SAVE_STEPS, "eval_batch_size": 16,
    "max_eval_steps": 2}


def run(command, cwd, timeout=300):
    """Runs one documented command line, split as a POSIX shell splits it.

    Quoted globs stay unexpanded, as in the docs (`--input_file='a/*'`):
    the programs expand them.

    Args:
        command: `"python -m package.module --flag=value ..."`.
        cwd: the folder the user runs it from.
        timeout: seconds before the test fails.

    Returns:
        The `subprocess.CompletedProcess`; `.log` holds stdout and stderr.
    """
    argv = shlex.split(command)
    assert argv[0] == "python", command
    done = subprocess.run([sys.executable] + argv[1:], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=timeout)
    done.log = done.stdout + done.stderr
    if done.returncode != 0:
        pytest.fail(f"`{command}` exited with status {done.returncode}:\n"
                    f"{done.log[-4000:]}")
    return done


def fresh_python(code, *args, cwd=REPO, timeout=300):
    """Runs `code` in a new Python process; returns its last stdout line,
    parsed as JSON.

    A fresh process is what a model server or a user's script is: nothing
    this process imported or registered (Keras objects, custom ops, flags)
    is there, so a SavedModel must load on its own.
    """
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)],
                          cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        pytest.fail(f"The fresh process failed ({done.returncode}):\n"
                    f"{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# Python for fresh processes: how far a SavedModel's variables are from a
# checkpoint's model tensors. Names differ between the two, so tensors are
# paired by shape wherever a shape is unique on both sides (the embedding
# tables and the heads are).
WEIGHT_DIFFERENCE = r'''
def weight_difference(saved, prefix):
    import collections
    import numpy as np
    import tensorflow as tf
    reader = tf.train.load_checkpoint(prefix)
    ours = collections.defaultdict(list)
    for name, shape in reader.get_variable_to_shape_map().items():
        if name.startswith("model/") and "OPTIMIZER_SLOT" not in name:
            ours[tuple(shape)].append(reader.get_tensor(name))
    theirs = collections.defaultdict(list)
    for v in saved.variables:
        if v.dtype == tf.float32:
            theirs[tuple(v.shape)].append(v.numpy())
    pairs = [(ours[s][0], theirs[s][0]) for s in ours
             if len(ours[s]) == 1 and len(theirs.get(s, ())) == 1]
    return {"matched": len(pairs),
            "max_difference": max((float(np.abs(a - b).max())
                                   for a, b in pairs), default=None)}
'''


def read_eval_blocks(path):
    """Parses `eval_results.txt` as docs/training_runs.md documents it.

    One block per evaluated checkpoint, blank lines between blocks, each
    `checkpoint = ckpt-N`, then `global_step = N`, then `<metric> = <value>`
    lines. Checked here rather than with the library's reader, which would
    accept what it writes.

    Returns:
        A list of dicts, numbers as floats (global_step as an int).
    """
    text = pathlib.Path(path).read_text(encoding="utf-8")
    blocks = []
    for block in text.strip().split("\n\n"):
        pairs = [line.split(" = ", 1) for line in block.splitlines()]
        assert all(len(p) == 2 for p in pairs), block
        keys = [key for key, _ in pairs]
        assert keys[:2] == ["checkpoint", "global_step"], block
        entry = {"checkpoint": pairs[0][1], "global_step": int(pairs[1][1])}
        entry.update((key, float(value)) for key, value in pairs[2:])
        assert entry["checkpoint"] == "ckpt-%d" % entry["global_step"], block
        blocks.append(entry)
    return blocks


def check_run_dir(output_dir, steps, metrics, best_metric, config_files):
    """Checks the layout every training run promises (docs/training_runs.md)
    and returns `(eval blocks, best block)`.

    Args:
        output_dir: the run's `--output_dir`.
        steps: the global steps whose checkpoints were evaluated, in order.
        metrics: metric names each block must have.
        best_metric: the metric that picks `best/` (higher is better).
        config_files: the config files saved with the checkpoints.
    """
    out = pathlib.Path(output_dir)
    blocks = read_eval_blocks(out / "eval_results.txt")
    assert [b["global_step"] for b in blocks] == list(steps)
    for block in blocks:
        assert set(metrics) <= set(block), block
    for name in config_files:
        assert (out / name).exists(), name
    best_dir = out / "best"
    for name in ("model.ckpt.index", "eval_results.txt", *config_files):
        assert (best_dir / name).exists(), name
    best, = read_eval_blocks(best_dir / "eval_results.txt")
    assert best in blocks
    assert best[best_metric] == max(b[best_metric] for b in blocks)
    for board in ("train", "eval"):
        assert any(n.startswith("events.out.tfevents")
                   for n in os.listdir(out / board)), board
    return blocks, best


@functools.lru_cache(maxsize=None)
def workspace():
    """The user's project folder for this process (removed at exit)."""
    root = tempfile.mkdtemp(prefix="albert_journeys_")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return pathlib.Path(root)


@functools.lru_cache(maxsize=None)
def prepared_data():
    """Corpus, vocabulary and sharded pretraining records, made by the
    documented data commands (docs/pretraining_data.md) in `workspace()`.

    The corpus is written as plain text (what `build_vocab`'s example reads,
    `corpus/*.txt`) and gzipped (what `create_pretraining_data`'s example
    reads, `corpus/*.txt.gz`).

    Returns:
        A namespace: `root`, and the completed `vocab` and `records` runs.
    """
    from data_prep import builtin_corpus

    root = workspace()
    corpus = root / "corpus" / "stdlib.txt"
    corpus.parent.mkdir()
    builtin_corpus.write_corpus(str(corpus), max_chars=CORPUS_CHARS)
    with open(corpus, "rb") as src, gzip.open(str(corpus) + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    vocab = run(documented.command(
        "python -m data_prep.build_vocab --input_file='corpus/*.txt'",
        set={"vocab_size": VOCAB_SIZE}), root)
    records = run(documented.command(
        "--input_file='corpus/*.txt.gz' --output_file=data/train.tfrecord",
        set=RECORD_FLAGS), root)
    return types.SimpleNamespace(root=root, vocab=vocab, records=records)


def pretraining_command(num_train_steps):
    """The documented CPU pretraining command (docs/pretraining.md), tiny:
    its glob over the shards (`data/train.tfrecord-*`; the statistics file
    must not be among them)."""
    return documented.command(
        "python -m albert_tf.run_pretraining "
        "--input_file='data/train.tfrecord-*'",
        set=dict(TINY_PRETRAINING, num_train_steps=num_train_steps))


@functools.lru_cache(maxsize=None)
def pretraining_run():
    """The first pretraining run (FIRST_STEPS steps) on `prepared_data()`.

    Returns:
        A namespace: `root`, `output_dir`, the completed run `done`, and
        `eval_results` (the file's text right after this run, since the
        pretraining journey resumes the run later).
    """
    data = prepared_data()
    done = run(pretraining_command(FIRST_STEPS), data.root)
    output_dir = data.root / PRETRAIN_DIR
    return types.SimpleNamespace(
        root=data.root, output_dir=output_dir, done=done,
        eval_results=(output_dir / "eval_results.txt").read_text())
