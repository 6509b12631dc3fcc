"""Evaluation and prediction of a training run's model (the `Trainer`'s
collaborator).

`evaluate_and_record` scores one checkpoint with the task, appends the
result to `eval_results.txt` and keeps the best model in `best/` (format in
`albert_tf.training.results`); `predict` and `sum_stats` run the compiled
model over NumPy arrays or a dataset under the run's strategy.
"""

import contextlib
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.training import model_dir
from albert_tf.training import results as results_lib
from foundation import progress


class Evaluator:
    """Evaluates and predicts with a run's model, under its strategy.

    Args:
        task: the job's `TrainingTask` (its `evaluate` receives this
            evaluator).
        model: the built model.
        strategy: the `tf.distribute.Strategy` it was built under.
        checkpoints: the run's `checkpoint.RunCheckpoints` (what is
            evaluated, and the weights read).
        options: the job's options (`output_dir`, `progress_interval_s`).
        is_chief: whether this process writes the results.
        hold: a function returning the context that holds the run's folder
            (`Trainer.holding_output`).
    """

    def __init__(self, task, model, strategy, checkpoints, options,
                 is_chief=True, hold=contextlib.nullcontext):
        self.task, self.model, self.strategy = task, model, strategy
        self.checkpoints, self.options = checkpoints, options
        self.output_dir = options.output_dir
        self.is_chief, self._hold = is_chief, hold
        self._functions = None

    def _compiled(self):
        """`(stats_step, predict_step)`, traced once."""
        if self._functions is None:
            strategy, task, model = self.strategy, self.task, self.model

            @tf.function(autograph=False)
            def stats_step(features):
                stats = strategy.run(lambda f: task.stats(
                    model, f, training=False), args=(features,))
                return strategy.reduce(tf.distribute.ReduceOp.SUM, stats,
                                       axis=None)

            @tf.function(autograph=False)
            def predict_step(features):
                return strategy.run(lambda f: model(
                    {k: f[k] for k in INPUT_NAMES}, training=False),
                    args=(features,))

            self._functions = stats_step, predict_step
        return self._functions

    def sum_stats(self, dataset, max_batches=None):
        """The task's statistics summed over (up to `max_batches` of) a
        dataset of global batches; returns `(stats, batches)`."""
        stats_step = self._compiled()[0]
        total = tf.zeros([len(self.task.stat_names)])
        batches = 0
        reporter = self._reporter("eval", max_batches)
        for features in self.strategy.experimental_distribute_dataset(dataset):
            if max_batches is not None and batches >= max_batches:
                break
            total += stats_step(features)
            batches += 1
            reporter.update(batches)
        return total, batches

    def _reporter(self, description, total):
        """Progress lines of an evaluation or prediction loop (the chief's;
        every `progress_interval_s`, see `progress.Reporter`)."""
        interval = getattr(self.options, "progress_interval_s",
                           progress.INTERVAL_S)
        log = None if self.is_chief else (lambda text: None)
        return progress.Reporter(description, total=total, unit="batch",
                                 interval_s=interval, log=log)

    def predict(self, features, batch_size):
        """Model outputs for every row of `features` (a dict of NumPy
        arrays), in order, as a dict of NumPy arrays."""
        predict_step = self._compiled()[1]
        inputs = {k: features[k] for k in INPUT_NAMES}
        num = len(inputs[INPUT_NAMES[0]])
        padded = -(-num // batch_size) * batch_size
        inputs = {k: np.concatenate([v, np.zeros((padded - num,) + v.shape[1:],
                                                 v.dtype)])
                  for k, v in inputs.items()}
        dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(
            batch_size, drop_remainder=True)
        chunks = []
        reporter = self._reporter("predict", padded // batch_size)
        for batch in self.strategy.experimental_distribute_dataset(dataset):
            out = predict_step(batch)
            reporter.update(len(chunks) // self.strategy.num_replicas_in_sync
                            + 1)
            # Each replica holds a contiguous slice of the global batch.
            for r in range(self.strategy.num_replicas_in_sync):
                chunks.append({k: np.asarray(
                    self.strategy.experimental_local_results(v)[r])
                    for k, v in out.items()})
        return {k: np.concatenate([c[k] for c in chunks])[:num]
                for k in (chunks[0] if chunks else {})}

    def evaluate_and_record(self, path, use_current_weights=False):
        """Evaluates checkpoint `path` with the task, appends the result to
        `eval_results.txt`, and copies the model to `best/` if it is the best
        so far by the task's `best_metric`. Returns the result dict."""
        if not use_current_weights:
            self.checkpoints.restore_weights(path)
        reader = tf.train.load_checkpoint(path)
        step = next(int(reader.get_tensor(k))
                    for k in reader.get_variable_to_shape_map()
                    if k.startswith("step/"))
        metrics = self.task.evaluate(self)
        result = {"checkpoint": os.path.basename(path), "global_step": step,
                  **metrics}
        if not self.is_chief:
            return result
        logging.info("Eval %s: %s", result["checkpoint"],
                     results_lib.format_block(metrics).replace("\n", ", "))
        judged = self.task.describe_evaluation(metrics)
        if judged:
            logging.info("Eval %s against baselines: %s", result["checkpoint"],
                         judged)
        # best/ first, the result's block last: a kill in between leaves
        # the checkpoint unrecorded, so the rerun evaluates it again.
        key = self.task.best_metric
        best = results_lib.best_result(self.output_dir)
        if best is None or metrics[key] > best[key]:
            results_lib.save_best(self.output_dir, self.model, result,
                                  self.task.config_files(),
                                  self.task.model_files())
            logging.info("New best checkpoint %s (%s %.4f) copied to %s/",
                         result["checkpoint"], key, metrics[key],
                         os.path.join(self.output_dir, results_lib.BEST_DIR))
        writer = tf.summary.create_file_writer(
            os.path.join(self.output_dir, "eval"))
        results_lib.write_scalars(writer, step, {
            k: v for k, v in metrics.items() if isinstance(v, (int, float))})
        writer.close()
        results_lib.append_eval_result(self.output_dir, result)
        return result

    def evaluate_pending(self):
        """Evaluates the checkpoints in `output_dir` not yet in
        `eval_results.txt`; returns their results.

        Raises:
            ValueError: there is no checkpoint to evaluate.
        """
        with self._hold():
            paths = self.checkpoints.paths()
            if not paths:
                raise ValueError(f"No checkpoint to evaluate in "
                                 f"{self.output_dir!r}: train first "
                                 "(--do_train).")
            done = {r["checkpoint"] for r in results_lib.read_eval_results(
                os.path.join(self.output_dir, results_lib.EVAL_RESULTS))}
            return [self.evaluate_and_record(path) for path in paths
                    if os.path.basename(path) not in done]

    def restore_best_or_latest(self):
        """Loads the weights of `best/` if there is one, else of the newest
        checkpoint; returns the path read (None: nothing to read)."""
        return self.checkpoints.restore_best_or_latest(os.path.join(
            self.output_dir, results_lib.BEST_DIR, model_dir.CHECKPOINT_NAME))
