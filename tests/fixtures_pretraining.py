"""Tiny pretraining runs for the tests: random records, small options, the
one Trainer builder and the official learning-rate schedule.

Read by tests/test_pretraining.py, test_trainer.py, test_run_pretraining.py,
test_stop_signals.py, test_progress.py, test_training_progress.py,
test_model_files.py, test_bad_inputs.py, test_xla_autotune.py,
test_schedule.py, test_lamb.py, tests/hostile/test_training.py,
test_model_folders.py and test_runs.py, by the short pretraining run of
tests/fixtures_training.py, and by the scripts some of them run in a new
process.

Plain helpers, not a pytest plugin: this module imports TensorFlow, so only
test modules and the fixtures' bodies import it, after tests/speed_plugin.py
has set XLA_FLAGS.
"""

import os

import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.training import pretraining
from albert_tf.training.options import PretrainingOptions
from albert_tf.training.trainer import build_trainer
from data_prep import schema

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The records' sequence length and masked positions per sequence.
L, P = 32, 5
# A 2-layer tiny model without dropout (the runs compare numbers).
TINY = dict(AlbertConfig.from_preset("tiny").to_dict(), hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, num_hidden_layers=2)


def write_records(path, num, seed=0, vocab=1000):
    """Random but well-formed pretraining records (official feature names).

    Args:
        path: the TFRecord file to write.
        num: how many records.
        seed: the random seed of their ids, positions and labels.
        vocab: the ids are below it.

    Returns:
        `path`.
    """
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, (num, L))
    ids[:, 0] = 2
    positions = np.sort(np.stack([rng.choice(np.arange(1, L), P, replace=False)
                                  for _ in range(num)]), axis=1)
    features = dict(
        input_ids=ids, input_mask=np.ones((num, L), np.int64),
        segment_ids=np.zeros((num, L), np.int64),
        token_boundary=np.ones((num, L), np.int64),
        masked_lm_positions=positions,
        masked_lm_ids=np.take_along_axis(ids, positions, 1),
        masked_lm_weights=(rng.random((num, P)) < 0.8).astype(np.float32),
        next_sentence_labels=rng.integers(0, 2, (num, 1)))
    with tf.io.TFRecordWriter(path) as writer:
        for record in schema.encode_examples(features):
            writer.write(record)
    return path


def options(input_file, output_dir, **overrides):
    """`PretrainingOptions` of a 4-step run of the `TINY` model on records
    of `write_records`, checkpoints every 2 steps, no XLA; `overrides`
    replace any of them."""
    values = dict(
        input_file=input_file, output_dir=output_dir,
        config=AlbertConfig.from_dict(TINY), train_batch_size=8,
        eval_batch_size=8, max_seq_length=L, max_predictions_per_seq=P,
        num_train_steps=4, num_warmup_steps=1, learning_rate=1e-2,
        save_checkpoints_steps=2, iterations_per_loop=2, max_eval_steps=2,
        jit_compile=False)
    values.update(overrides)
    return PretrainingOptions(**values)


def trainer(opts, strategy=None, task=None):
    """The `Trainer` of a pretraining run: the tests' one place that builds
    one.

    Args:
        opts: the run's `PretrainingOptions`.
        strategy: a `tf.distribute.Strategy`, or None for the Trainer's own.
        task: the task it trains, a `PretrainingTask` of `opts` if None.
    """
    if task is None:
        task = pretraining.PretrainingTask(opts)
    return build_trainer(task, opts, strategy)


def batches(runner, data, batch_size=8):
    """An iterator of global batches of `data`, in order, over the replicas."""
    return iter(runner.strategy.experimental_distribute_dataset(
        runner.task.dataset(data, batch_size, False)))


def official_lr(step, lr, total, warmup, power):
    """The released schedule (end learning rate 0) at `step`, in Python."""
    if step < warmup:
        return lr * step / warmup
    return lr * (1 - min(step, total) / total) ** power
