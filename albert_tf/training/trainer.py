"""The one training engine: pretraining and every fine-tuning task run here.

A job describes its model, loss and data as a
`training.trainer_task.TrainingTask` (`PretrainingTask`,
`tasks.finetuning_task.FinetuningTask`) and builds the trainer with
`build_trainer` (the model under the `--dtype` policy and the official
optimizer, in the strategy's scope). The `Trainer` runs the loop: compiled
calls of up to `iterations_per_loop` steps (`train_loop`), cut so that
progress lines come after the first step and then at least every
`progress_interval_s` (`training_progress`); a checkpoint every
`save_checkpoints_steps`, each evaluated as it is written (`checkpoint`,
`evaluation`); a stop at the first non-finite loss, before anything is
saved (`TrainingDivergedError`); SIGTERM and SIGINT end the loop after the
step they come in, which is saved (`TrainingStopped`); a warning when the
loss ends where a model that ignores its input would be (`baselines`).
Its parts, file by file: docs/training_runs.md#the-training-loop-part-by-part.
"""

import contextlib
import os
import time

import tensorflow as tf
from absl import logging

from albert_tf.training import baselines
from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.training import distribute
from albert_tf.training import evaluation
from albert_tf.training import hardware
from albert_tf.training import lamb
from albert_tf.training import memory
from albert_tf.training import model_files
from albert_tf.training import output_folder
from albert_tf.training import results as results_lib
from albert_tf.training import stop_signals
from albert_tf.training import train_loop
from albert_tf.training import training_progress
from albert_tf.training import xla_autotune
from albert_tf.training.errors import TrainingDivergedError
from albert_tf.training.errors import TrainingStopped
from albert_tf.training.errors import op_error_summary
from albert_tf.training.options import DTYPES
from albert_tf.training.options import parse_jit_compile
from foundation import safe_io


class Trainer:
    """Trains a built model with a built optimizer, as a task says.

    Args:
        task: the job's task (loss, data, evaluation).
        options: the job's options (a `TrainingOptions` subclass).
        model: the task's model, built in `strategy`'s scope.
        optimizer: the optimizer, built in that scope for the model's
            trainable variables.
        strategy: a `tf.distribute.Strategy` (default: the current one).
    """

    def __init__(self, task, options, model, optimizer, strategy=None):
        self.strategy = strategy or tf.distribute.get_strategy()
        check_run(options, self.strategy)
        self.task, self.options = task, options
        self.model, self.optimizer = model, optimizer
        self.is_chief = distribute.is_chief(self.strategy)
        self.output_dir = options.output_dir
        # One flag on the host, outside the strategy: every replica's loop
        # reads it.
        self._stop = stop_signals.StopSignals()
        with self.strategy.scope():
            self.step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.config = model_config(model)
        self.checkpoints = checkpoint_lib.RunCheckpoints(
            self.output_dir, model, optimizer, self.step,
            options.keep_checkpoint_max, self.strategy, self.is_chief,
            self.config)
        self.evaluator = evaluation.Evaluator(
            task, model, self.strategy, self.checkpoints, options,
            self.is_chief, self.holding_output)
        self.loops = train_loop.TrainLoops(
            task, model, optimizer, self.strategy, self.step,
            self._stop.flag, options.gradient_accumulation_steps)
        self._jit = None  # This run's resolved --jit_compile.

    def train(self):
        """Trains to the task's step count, resuming if a checkpoint exists.

        With `do_eval`, every checkpoint is evaluated right after it is
        written (so checkpoints rotated away later are evaluated too).

        Returns:
            A dict: `step` reached, `timed_out`, `history` (`(step, loss)`
            per loop), the last loop's metrics, and when the loss says so
            `at_chance` (`baselines.chance_verdict`).

        Raises:
            TrainingDivergedError: the loss became NaN or infinite.
            TrainingStopped: SIGTERM or SIGINT stopped the run after its
                current step; that step's checkpoint is written first.
        """
        # Signals are caught from the start: one while the checkpoint is
        # restored or the data and the loop are made stops the run there.
        with self.holding_output(), self._stop.catching():
            start = self.restore()
            if self._stop.requested:
                raise self._stopped(start)
            if start >= self.options.num_steps:
                logging.info("Step %d reached the %d train steps: nothing to "
                             "train.", start, self.options.num_steps)
                return {"step": start, "timed_out": False, "history": []}
            if self.is_chief:
                memory.log_estimate(
                    self.config, self.model, self.options,
                    self.strategy.num_replicas_in_sync,
                    hardware.resolve_dtype(self.options.dtype))
            step, metrics, history, timed_out = self._run(start)
            return {"step": step, "timed_out": timed_out, "history": history,
                    **metrics, **baselines.chance_verdict(
                        history, start, self.task.chance_loss(),
                        self.options.warmup_flag)}

    def _run(self, start):
        """Runs the compiled loops from step `start` to the end, a stop
        signal or `max_train_seconds`, saving (and evaluating) each
        checkpoint; returns `(step, last metrics, history, timed_out)`.

        Raises:
            TrainingStopped: a stop signal came (its step saved first).
        """
        options = self.options
        iterator = self._train_iterator(start)
        self._jit = xla_autotune.resolve(options, self.strategy, self.is_chief)
        writer = self._train_writer()
        logging.info("Training from step %d to %d, up to %d steps a "
                     "compiled call, a progress line at least every %g s "
                     "(SIGTERM or SIGINT: stop after the current step and "
                     "save it).", start, options.num_steps,
                     options.iterations_per_loop, options.progress_interval_s)
        report = training_progress.TrainingProgress(
            options, start, self.is_chief,
            distribute.is_single_process(self.strategy))
        step, metrics, history, timed_out = start, {}, [], False
        try:
            while step < options.num_steps and not self._stop.requested:
                timed_out = report.out_of_time(step)
                if timed_out:
                    break
                stats, done, seconds = self._run_train_loop(
                    iterator, report.loop_steps(step))
                step += done
                if done:
                    report.record(step, done, seconds)
                    metrics = self._loop_metrics(stats, done, seconds)
                    history.append((step, metrics["loss"]))
                    report.log(step, done, metrics)
                    results_lib.write_scalars(writer, step, metrics)
                if self._stop.requested:
                    break
                if (step % options.save_checkpoints_steps == 0
                        or step >= options.num_steps):
                    self._save_and_evaluate()
            if self._stop.requested:
                # Saved while the signals are still caught: a second one
                # does not cut the save short.
                raise self._stopped(step)
            if (timed_out and step > start
                    and step % options.save_checkpoints_steps):
                self._save_and_evaluate()
        finally:
            report.close()
        return step, metrics, history, timed_out

    def _run_train_loop(self, iterator, num):
        """Runs `num` steps; returns `(stats, steps, seconds)`: the loop's
        summed stats, the steps it ran and the seconds they took.

        Raises:
            ValueError: a bad input record (named, with where it stopped).
            TrainingDivergedError: the loss became NaN or infinite.
        """
        step = int(self.step.numpy())
        loop_start = time.time()
        try:
            stats, diverged = self.compiled_loop()(
                iterator, tf.constant(num, tf.int32))
        except (tf.errors.InvalidArgumentError,
                tf.errors.DataLossError) as e:
            raise ValueError(f"Training stopped after step {step} on "
                             f"bad input: {op_error_summary(e)}") from e
        if bool(diverged):
            raise TrainingDivergedError(
                f"Training diverged at step {int(self.step.numpy())}: the "
                f"loss is not finite ({self.task.metrics(stats)['loss']:.4g}),"
                f" so nothing was saved. {self.checkpoints.last_good()} Lower "
                "--learning_rate, or check the data.")
        return stats, int(self.step.numpy()) - step, time.time() - loop_start

    def _loop_metrics(self, stats, num_steps, seconds):
        metrics = {k: float(v) for k, v in self.task.metrics(stats).items()}
        metrics["learning_rate"] = float(self.optimizer.learning_rate.numpy())
        metrics["examples_per_second"] = (
            num_steps * self.options.train_batch_size / max(seconds, 1e-9))
        return metrics

    def _save_and_evaluate(self):
        path = self.checkpoints.save()
        if self.options.do_eval:
            self.evaluator.evaluate_and_record(path, use_current_weights=True)

    def _stopped(self, step):
        """Saves the step a stop signal ended the loop at (unless its
        checkpoint exists, or nothing was ever trained) and returns the
        `TrainingStopped` to raise."""
        name, number = self._stop.signal_name, self._stop.signal_number
        latest = self.checkpoints.latest()
        if latest and latest.endswith(f"ckpt-{step}"):
            return TrainingStopped(name, number, step, latest, fresh=False)
        if step == 0:
            return TrainingStopped(name, number, step, None)
        return TrainingStopped(name, number, step, self.checkpoints.save())

    def restore(self):
        """Resumes from the newest complete checkpoint in `output_dir`, else
        lets the task initialize the model (`init_checkpoint`); returns the
        step.

        Everything is checked before the folder changes: the task's inputs,
        the saved config files, the checkpoint, the initial weights, and
        the run record (`albert_run.json`: a rerun with other inputs is
        refused). Holds the folder's lock while it works.

        Raises:
            ValueError: an input, the config or the run record differs, or
                no listed checkpoint is readable (names them).
        """
        with self.holding_output():
            self.task.check_inputs()
            config_files = self.task.config_files()
            results_lib.check_config_files(self.output_dir, config_files)
            if not self.checkpoints.resume():
                self.task.initialize(self.model)
            if self.is_chief:
                output_folder.claim_run(self.output_dir, self.options,
                                        self.task.input_files())
                tf.io.gfile.makedirs(self.output_dir)
                results_lib.recover_best(self.output_dir)
                results_lib.write_config_files(self.output_dir, config_files)
                model_files.copy_into(self.output_dir, self.task.model_files())
            return int(self.step.numpy())

    def holding_output(self):
        """A context holding the lock on `output_dir` (re-entrant; see
        `output_folder.hold`): every step of a run that reads or writes the
        folder holds it, and a program holds it for the whole run. Other
        workers than the chief write only their scratch folders."""
        if not self.is_chief:
            return contextlib.nullcontext()
        return output_folder.hold(self.output_dir, self.options.run_program())

    def compiled_loop(self):
        """The training loop compiled as this run resolved `jit_compile`
        (before `train`: as the flag says, "auto" taken as the device
        rule)."""
        jit = self._jit
        if jit is None:
            jit = parse_jit_compile(self.options.jit_compile)
        if jit is None:
            jit = xla_autotune.device_rule(self.strategy)
        return self.loops.get(jit)

    def _train_iterator(self, start):
        def dataset_fn(context):
            # Each step consumes one batch per local replica.
            per_step = context.num_replicas_in_sync // context.num_input_pipelines
            return self.task.train_dataset(
                context, self.options.train_batch_size, start * per_step)

        return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

    def _train_writer(self):
        """The TensorBoard writer of the training scalars (chief only)."""
        if not self.is_chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(
            os.path.join(self.output_dir, "train"))


def check_run(options, strategy):
    """Checks the options against the strategy, and that the output folder
    can be made, before any work.

    Raises:
        ValueError: a bad option (names the flag).
        safe_io.OutputError: `--output_dir` is a file or cannot be written.
    """
    options.validate(strategy.num_replicas_in_sync)
    safe_io.check_output_path(options.output_dir, output_folder.FLAG)


def model_config(model):
    """The model's `AlbertConfig` (named in errors), if it has one."""
    return getattr(model, "config", None) or getattr(
        getattr(model, "encoder", None), "config", None)


def build_trainer(task, options, strategy=None):
    """The job's factory: the task's model under the `--dtype` policy and
    the official optimizer and schedule, built in the strategy's scope, and
    the `Trainer` that trains them.

    Args:
        task: the job's `TrainingTask`.
        options: the job's options.
        strategy: a `tf.distribute.Strategy` (default: the current one).

    Raises:
        ValueError, safe_io.OutputError: as `check_run`, before anything is
            built.
    """
    strategy = strategy or tf.distribute.get_strategy()
    # The Trainer checks again (a few stat calls); here first, so that a
    # bad flag costs no model build.
    check_run(options, strategy)
    dtype = hardware.resolve_dtype(options.dtype)
    if options.dtype != dtype:
        logging.info("dtype=auto: %s (%s).", dtype, hardware.describe())
    with strategy.scope():
        model = task.build_model(DTYPES[dtype])
        optimizer = lamb.create_optimizer(
            options.optimizer, options.learning_rate, options.num_steps,
            options.num_warmup, options.poly_power)
        optimizer.build(model.trainable_variables)
    return Trainer(task, options, model, optimizer, strategy)
