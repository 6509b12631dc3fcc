"""The one training engine: pretraining and every fine-tuning task run here.

A job describes its model, loss and data as a `training.trainer_task.TrainingTask`
(`PretrainingTask`, `tasks.finetune.FinetuningTask`); the `Trainer` owns
everything else:

- the strategy scope (TPU, mirrored, multi-worker, one device), the model
  built under the `--dtype` policy, the official optimizer and schedule;
- a compiled loop of up to `iterations_per_loop` steps (a `while` over
  `strategy.run`), which is what TPUs want, each call cut to about half of
  `progress_interval_s` at the measured pace, so that progress lines
  (step, examples/s, ETA after warm-up) come after the first step and then
  at least every interval, whatever `iterations_per_loop` is;
- one step on one replica (`_replica_step`): the task's loss denominators
  (example counts, MLM weight sums) are all-reduced first, so each replica's
  (and each accumulation micro-batch's) loss is its numerators over the
  *global* denominators and the summed gradients are exactly those of the
  global batch; the optimizer then sums the gradients over replicas (the one
  cross-replica reduction), clips the sum to global norm 1.0 and applies it;
- checkpoints `ckpt-<step>` (model, optimizer, step) every
  `save_checkpoints_steps`, resume with the data position restored, a save
  after `max_train_seconds`;
- SIGTERM and SIGINT end the loop after the step they come in
  (`stop_signals`): that step is saved and `TrainingStopped` raised, so
  nothing is evaluated, predicted or exported after a stop;
- `--jit_compile` resolved once per run and recorded (`xla_autotune`);
- a warning, and `at_chance` in the summary, when the training loss ends
  where a model that ignores its input would be;
- a stop with `TrainingDivergedError` at the first non-finite loss, before
  anything is saved, so rotation never deletes the good checkpoints;
- evaluation of every checkpoint as it is written (or of the checkpoints not
  yet evaluated), the results and best model in the format of
  `albert_tf.training.results`, TensorBoard scalars and progress lines.
"""

import contextlib
import os
import re
import time

import tensorflow as tf
from absl import logging

from albert_tf.models.encoder import INPUT_NAMES
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
from albert_tf.training import xla_autotune
from albert_tf.training.errors import TrainingDivergedError
from albert_tf.training.errors import TrainingStopped
from albert_tf.training.errors import op_error_summary
from albert_tf.training.options import DTYPES
from albert_tf.training.options import parse_jit_compile
from foundation import progress
from foundation import safe_io

# A final training loss this close (relative) to the chance loss, or above
# it, has not learned (`Trainer._chance_verdict`).
CHANCE_TOLERANCE = 0.02


class Trainer(evaluation.Evaluation):
    """A task's model, optimizer, checkpoints and compiled loops.

    Args:
        task: the job's task (model, loss, data, evaluation).
        options: the job's options (a `TrainingOptions` subclass).
        strategy: a `tf.distribute.Strategy` (default: the current one).
    """

    def __init__(self, task, options, strategy=None):
        self.task, self.options = task, options
        self.strategy = strategy or tf.distribute.get_strategy()
        options.validate(self.strategy.num_replicas_in_sync)
        # A file or a read-only place where the folder goes: before any work.
        safe_io.check_output_path(options.output_dir, output_folder.FLAG)
        self.is_chief = distribute.is_chief(self.strategy)
        self.output_dir = options.output_dir
        self.dtype = hardware.resolve_dtype(options.dtype)
        if options.dtype != self.dtype:
            logging.info("dtype=auto: %s (%s).", self.dtype, hardware.describe())
        # One flag on the host, outside the strategy: every replica's loop
        # reads it.
        self._stop = stop_signals.StopSignals()
        with self.strategy.scope():
            self.model = task.build_model(DTYPES[self.dtype])
            self.optimizer = lamb.create_optimizer(
                options.optimizer, options.learning_rate, options.num_steps,
                options.num_warmup, options.poly_power)
            self.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.checkpoint = tf.train.Checkpoint(
            **{results_lib.MODEL_KEY: self.model},
            optimizer=self.optimizer, step=self.step)
        self._manager = None
        self._functions = None
        self._train_loops = {}
        self._jit = None  # This run's resolved --jit_compile.

    # === Compiled functions ===

    def _compute(self, features, denominators):
        """Gradients and statistics of one micro-batch on one replica."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            stats = self.task.stats(self.model, features, training=True)
            loss = self.task.loss(stats, denominators)
        grads = tape.gradient(loss, variables)
        # Variables the loss does not reach (the pooler under a span head)
        # get no update at all, as in the official optimizers; which ones is
        # known when this is traced.
        self._has_grad = [g is not None for g in grads]
        # Dense: gathers give IndexedSlices, which cannot be accumulated.
        return [tf.convert_to_tensor(g) for g in grads if g is not None], stats

    def _replica_step(self, features, compute_fn):
        """One optimizer step on this replica's share of the global batch."""
        context = tf.distribute.get_replica_context()
        denominators = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                          self.task.denominators(features))
        steps = self.options.gradient_accumulation_steps
        if steps == 1:
            grads, stats = compute_fn(features, denominators)
        else:
            # [B, ...] -> [steps, B / steps, ...]
            split = tf.nest.map_structure(
                lambda x: tf.reshape(x, [steps, x.shape[0] // steps]
                                     + x.shape[1:].as_list()), features)
            variables = self.model.trainable_variables
            grads = [tf.zeros(v.shape, v.dtype) for v in variables]
            stats = tf.zeros([len(self.task.stat_names)])
            for i in tf.range(steps):
                # Called at once, inside this iteration.
                part = tf.nest.map_structure(lambda x: x[i], split)  # noqa: B023
                g, s = compute_fn(part, denominators)
                g = iter(g)
                grads = [a + next(g) if has else a
                         for a, has in zip(grads, self._has_grad)]
                stats += s
            grads = [g for g, has in zip(grads, self._has_grad) if has]
        variables = [v for v, has in zip(self.model.trainable_variables,
                                         self._has_grad) if has]
        # The optimizer sums over replicas (the one reduction), then clips.
        self.optimizer.apply(grads, variables)
        return context.all_reduce(tf.distribute.ReduceOp.SUM, stats)

    def _train_loop(self, jit):
        """The compiled loop of `num_steps` steps (with XLA or without)."""
        if jit in self._train_loops:
            return self._train_loops[jit]
        single = (self.strategy.num_replicas_in_sync == 1 and not isinstance(
            self.strategy, tf.distribute.TPUStrategy))
        # The model code has no control flow on tensors: tracing it without
        # AutoGraph's source conversion saves seconds at every start.
        compute_fn = tf.function(self._compute, jit_compile=jit and not single,
                                 autograph=False)
        # On one device the whole step, optimizer included, is one program.
        # (Only the accumulation loop over micro-batches needs AutoGraph.)
        replica_step = tf.function(
            lambda features: self._replica_step(features, compute_fn),
            jit_compile=jit and single,
            autograph=self.options.gradient_accumulation_steps > 1)
        strategy, num_stats = self.strategy, len(self.task.stat_names)
        stop = self._stop.flag

        @tf.function
        def train_loop(iterator, num_steps):
            total = tf.zeros([num_stats])
            done = tf.constant(0)
            diverged = tf.constant(False)
            # The stop flag is read in the loop's condition, before each
            # step: a stop signal (set by another thread while this call
            # runs) ends the loop after the step it came in, `done` exact.
            # (In the condition, not as a `break` in the body: a replica
            # step inside a branch does not run under MirroredStrategy.)
            while tf.logical_and(done < num_steps, tf.logical_not(
                    tf.logical_or(diverged, stop.read_value()))):
                stats = strategy.run(replica_step, args=(next(iterator),))
                # Already all-reduced: every replica holds the global sums.
                stats = strategy.experimental_local_results(stats)[0]
                done += 1
                total += stats
                diverged = tf.logical_not(
                    tf.reduce_all(tf.math.is_finite(stats)))
            self.step.assign_add(tf.cast(done, tf.int64))
            return total, diverged

        self._train_loops[jit] = train_loop
        return train_loop

    def _build(self):
        strategy = self.strategy

        @tf.function(autograph=False)
        def stats_step(features):
            stats = strategy.run(lambda f: self.task.stats(
                self.model, f, training=False), args=(features,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, stats, axis=None)

        @tf.function(autograph=False)
        def predict_step(features):
            return strategy.run(lambda f: self.model(
                {k: f[k] for k in INPUT_NAMES}, training=False), args=(features,))

        self._functions = stats_step, predict_step

    def _compiled(self):
        """`(train_loop, stats_step, predict_step)`; the loop compiled as
        this run resolved `jit_compile` (before `train`: as the flag says,
        "auto" taken as the device rule)."""
        if self._functions is None:
            self._build()
        jit = self._jit
        if jit is None:
            jit = parse_jit_compile(self.options.jit_compile)
        if jit is None:
            jit = xla_autotune.device_rule(self.strategy)
        return (self._train_loop(jit),) + self._functions

    # === Checkpoints ===

    def _checkpoint_dir(self):
        if self.is_chief:
            return self.output_dir
        # Other workers take part in the save (it is collective) but write
        # to a scratch directory that is removed afterwards.
        resolver = self.strategy.cluster_resolver
        return os.path.join(self.output_dir,
                            f"workertemp_{resolver.task_type}_{resolver.task_id}")

    @property
    def manager(self):
        # Non-chief scratch directories are removed after each save.
        if self._manager is None or not self.is_chief:
            self._manager = tf.train.CheckpointManager(
                self.checkpoint, self._checkpoint_dir(),
                max_to_keep=self.options.keep_checkpoint_max or None,
                checkpoint_name="ckpt", step_counter=self.step)
        return self._manager

    def checkpoint_paths(self):
        """This run's checkpoint prefixes, oldest first (those the
        checkpoint list names)."""
        state = tf.train.get_checkpoint_state(self.output_dir)
        names = state.all_model_checkpoint_paths if state else []
        # The state file may hold paths relative to another directory.
        return [os.path.join(self.output_dir, os.path.basename(p)) for p in names]

    def _checkpoints_on_disk(self):
        """The `ckpt-<step>` prefixes with an index file, oldest first."""
        steps = []
        for path in tf.io.gfile.glob(os.path.join(self.output_dir,
                                                  "ckpt-*.index")):
            match = re.fullmatch(r"ckpt-(\d+)\.index", os.path.basename(path))
            if match:
                steps.append(int(match.group(1)))
        return [os.path.join(self.output_dir, f"ckpt-{step}")
                for step in sorted(steps)]

    def _config(self):
        """The model's `AlbertConfig` (for error messages), if it has one."""
        model = self.model
        return getattr(model, "config", None) or getattr(
            getattr(model, "encoder", None), "config", None)

    def _check_finite_weights(self):
        for variable in self.model.trainable_variables:
            # Reduced where the variable lives: one bool crosses to the host.
            if not bool(tf.reduce_all(tf.math.is_finite(variable))):
                raise TrainingDivergedError(
                    f"Training diverged at step {int(self.step.numpy())}: "
                    f"variable {variable.path} is not finite, so nothing was "
                    f"saved. {self._last_good()} Lower --learning_rate, or "
                    "check the data.")

    def _last_good(self):
        latest = tf.train.latest_checkpoint(self.output_dir)
        return (f"The newest checkpoint, {latest}, is kept." if latest
                else "There is no earlier checkpoint.")

    def holding_output(self):
        """A context holding the lock on `output_dir` (re-entrant; see
        `output_folder.hold`): every step of a run that reads or writes the
        folder holds it, and a program holds it for the whole run. Other
        workers than the chief write only their scratch folders."""
        if not self.is_chief:
            return contextlib.nullcontext()
        return output_folder.hold(self.output_dir, self.options.run_program())

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
            cause = (op_error_summary(e) if isinstance(e, tf.errors.OpError)
                     else e)
            prefix = os.path.join(self._checkpoint_dir(), f"ckpt-{step}")
            self._remove_failed_save(prefix)
            raise OSError(f"Could not write the checkpoint of step {step} in "
                          f"{self.output_dir} ({prefix}: {cause}). "
                          f"{self._last_good()}") from e
        if not self.is_chief:
            tf.io.gfile.rmtree(self._checkpoint_dir())
            return None
        logging.info("Saved checkpoint %s", path)
        return path

    def _remove_failed_save(self, prefix):
        """Removes what a failed save of `prefix` left (never a listed,
        complete checkpoint): frees the space for the next try."""
        if prefix in self.checkpoint_paths():
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
            latest = self._resume()
            if not latest:
                self.task.initialize(self.model)
            if self.is_chief:
                output_folder.claim_run(self.output_dir, self.options,
                                        self.task.input_files())
                tf.io.gfile.makedirs(self.output_dir)
                results_lib.recover_best(self.output_dir)
                results_lib.write_config_files(self.output_dir, config_files)
                model_files.copy_into(self.output_dir, self.task.model_files())
            return int(self.step.numpy())

    def _resume(self):
        """Restores the newest listed checkpoint that reads whole; returns
        its path (None: there is none). A checkpoint that does not read
        (a kill or a full disk during its save, a damaged file) is skipped
        with one log line, as is a save that never completed.

        Raises:
            CheckpointUnreadableError: checkpoints are listed and none reads.
        """
        paths = self.checkpoint_paths()
        listed = bool(paths)
        if not listed:
            # No list, or an unreadable one: the files on disk are the run's.
            paths = self._checkpoints_on_disk()
            if paths and tf.io.gfile.exists(
                    os.path.join(self.output_dir, "checkpoint")):
                logging.warning("%s is not a readable checkpoint list: "
                                "looking at the checkpoint files instead.",
                                os.path.join(self.output_dir, "checkpoint"))
        skipped = []
        for path in reversed(paths):
            try:
                if not listed:
                    # Files no list vouches for are read through first: a
                    # half-read one must not leave its values in the model.
                    checkpoint_lib.check_readable(path)
                checkpoint_lib.read_checked(self.checkpoint, path,
                                            self._config())
            except checkpoint_lib.CheckpointUnreadableError as e:
                logging.warning("%s: skipped it.", e)
                self.step.assign(0)
                skipped.append(str(e))
                continue
            self._log_unfinished_saves(path, paths)
            logging.info("Resumed from %s at step %d", path,
                         int(self.step.numpy()))
            return path
        if skipped and listed:
            raise checkpoint_lib.CheckpointUnreadableError(
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

    # === Training ===

    def _train_iterator(self, start):
        def dataset_fn(context):
            # Each step consumes one batch per local replica.
            per_step = context.num_replicas_in_sync // context.num_input_pipelines
            return self.task.train_dataset(
                context, self.options.train_batch_size, start * per_step)

        return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

    def train(self):
        """Trains to the task's step count, resuming if a checkpoint exists.

        With `do_eval`, every checkpoint is evaluated right after it is
        written (so checkpoints rotated away later are evaluated too).

        Returns:
            A dict: `step` reached, `timed_out`, `history` (`(step, loss)`
            per loop), the last loop's metrics, and when the loss says so
            `at_chance` (whether it ended where a model that ignores its
            input would be; then also `warning`, the logged line).

        Raises:
            TrainingDivergedError: the loss became NaN or infinite.
            TrainingStopped: SIGTERM or SIGINT stopped the run after its
                current step; that step's checkpoint is written first.
        """
        # Signals are caught from the start: one while the checkpoint is
        # restored or the data and the loop are made stops the run there.
        with self.holding_output(), self._stop.catching():
            return self._train()

    def _train(self):
        options = self.options
        start = self.restore()
        if self._stop.requested:
            raise self._stopped(start)
        if start >= options.num_steps:
            logging.info("Step %d reached the %d train steps: nothing to "
                         "train.", start, options.num_steps)
            return {"step": start, "timed_out": False, "history": []}
        self._log_memory_estimate()
        step, metrics, history, timed_out = self._train_loops_until_done(
            start)
        summary = {"step": step, "timed_out": timed_out, "history": history,
                   **metrics}
        summary.update(self._chance_verdict(start, history))
        return summary

    def _train_loops_until_done(self, start):
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
        self._interactive = self.is_chief and progress.interactive()
        # On a terminal the bar starts after the warm-up (`_log_progress`):
        # its rate and ETA then leave the compiling out.
        self._bar = None
        step, metrics, history, run_start = start, {}, [], time.time()
        self._pace = progress.Pace(start, clock=time.time)
        self._last_line = None
        timed_out = False
        try:
            while step < options.num_steps and not self._stop.requested:
                timed_out = self._out_of_time(run_start, step)
                if timed_out:
                    break
                stats, done, seconds = self._run_train_loop(
                    self._jit, iterator, self._loop_steps(step, run_start))
                step += done
                if done:
                    self._pace.update(step)
                    metrics = self._loop_metrics(stats, done, seconds)
                    history.append((step, metrics["loss"]))
                    self._log_progress(step, done, metrics, run_start)
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
            if self._bar is not None:
                self._bar.close()
        return step, metrics, history, timed_out

    def _stopped(self, step):
        """Saves the step a stop signal ended the loop at (unless its
        checkpoint exists, or nothing was ever trained) and returns the
        `TrainingStopped` to raise."""
        name, number = self._stop.signal_name, self._stop.signal_number
        latest = tf.train.latest_checkpoint(self.output_dir)
        if latest and latest.endswith(f"ckpt-{step}"):
            return TrainingStopped(name, number, step, latest, fresh=False)
        if step == 0:
            return TrainingStopped(name, number, step, None)
        return TrainingStopped(name, number, step, self.save())

    def _chance_verdict(self, start, history):
        """`{"at_chance": bool}` (with a logged `warning` when True), or {}
        when the losses cannot tell.

        The reference is the task's chance loss (what a model that ignores
        its input reaches: the training labels' entropy for a classifier),
        else, for a run that started at step 0, its first loop's loss. A
        final loss not `CHANCE_TOLERANCE` (relative) below it has not
        learned.
        """
        if not history:
            return {}
        final = history[-1][1]
        chance = self.task.chance_loss()
        if chance is not None and chance <= 0:
            return {}  # One label only: there is nothing to learn.
        if chance is not None:
            reference = (f"chance ({chance:.4g}, the loss of a model that "
                         "ignores its input)")
        elif start == 0 and len(history) > 1:
            chance = history[0][1]
            reference = (f"the first logged loss ({chance:.4g} at step "
                         f"{history[0][0]})")
        else:
            return {}
        if final < chance - CHANCE_TOLERANCE * abs(chance):
            return {"at_chance": False}
        warning = (
            f"The training loss ended at {final:.4g} (step {history[-1][0]}),"
            f" not {CHANCE_TOLERANCE:.0%} below {reference}: the model has "
            f"not learned. Try a lower --learning_rate, a longer warm-up "
            f"({self.options.warmup_flag}) or another --seed.")
        logging.warning("%s", warning)
        return {"at_chance": True, "chance_loss": chance, "warning": warning}

    def _train_writer(self):
        """The TensorBoard writer of the training scalars (chief only)."""
        if not self.is_chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(
            os.path.join(self.output_dir, "train"))

    def _out_of_time(self, run_start, step):
        """Whether `max_train_seconds` of this run have passed (logged)."""
        limit = self.options.max_train_seconds
        if limit > 0 and time.time() - run_start >= limit:
            if step <= self._pace.start:
                then = "nothing trained in this run"
            elif step % self.options.save_checkpoints_steps == 0:
                then = "its checkpoint is saved"
            else:
                then = ("saving and evaluating it" if self.options.do_eval
                        else "saving it")
            logging.info("max_train_seconds=%g reached at step %d: %s.",
                         limit, step, then)
            return True
        return False

    def _loop_steps(self, step, run_start):
        """Steps of the next compiled loop: `iterations_per_loop`, ending at
        the next checkpoint and at the last step, and cut to the time a
        progress line is due and to what is left of `max_train_seconds`.

        The compiled loop cannot log while it runs (a print inside it costs
        every step, and on a TPU it is no log at all), so progress is made
        visible by the calls' length instead: the first call of a run is
        one step (it compiles: its line comes after the first step), the
        second one step too (the first warm measurement), and later ones
        last about half of `progress_interval_s` at the measured pace. The
        steps, the schedule and the data are the same in calls of any
        length (the step counter and the stop flag are exact per step).
        """
        options = self.options
        to_save = (options.save_checkpoints_steps
                   - step % options.save_checkpoints_steps)
        # Calls end on multiples of iterations_per_loop, as when every call
        # was a whole loop (a progress line each, checkpoints in step).
        to_loop_end = (options.iterations_per_loop
                       - step % options.iterations_per_loop)
        steps = min(to_loop_end, to_save, options.num_steps - step)
        per_step = self._pace.seconds_per_unit()
        if per_step is None:
            return min(steps, 1)
        if not self._single_process():
            # Every worker of a cluster must run the same steps in a call:
            # no process's own clock may cut it.
            return steps
        # The slower of the last call and the warm average: a call that
        # grew slower (another job on the machine) is not trusted longer.
        per_step = max(per_step, getattr(self, "_seconds_per_step", 0.0))
        budget = 0.5 * options.progress_interval_s
        if options.max_train_seconds > 0:
            budget = min(budget, options.max_train_seconds
                         - (time.time() - run_start))
        return max(1, min(steps, int(budget / per_step)))

    def _run_train_loop(self, jit, iterator, num):
        """Runs `num` steps, compiled with XLA if `jit`.

        Returns:
            `(stats, steps, seconds)`: the loop's summed stats, the steps it
            ran and the seconds they took.

        Raises:
            ValueError: a bad input record (named, with where it stopped).
            TrainingDivergedError: the loss became NaN or infinite.
        """
        step = int(self.step.numpy())
        loop_start = time.time()
        try:
            stats, diverged = self._train_loop(jit)(
                iterator, tf.constant(num, tf.int32))
        except (tf.errors.InvalidArgumentError,
                tf.errors.DataLossError) as e:
            raise ValueError(f"Training stopped after step {step} on "
                             f"bad input: {op_error_summary(e)}") from e
        if bool(diverged):
            raise TrainingDivergedError(
                f"Training diverged at step {int(self.step.numpy())}: the "
                f"loss is not finite ({self.task.metrics(stats)['loss']:.4g}),"
                f" so nothing was saved. {self._last_good()} Lower "
                "--learning_rate, or check the data.")
        steps = int(self.step.numpy()) - step
        return stats, steps, time.time() - loop_start

    def _log_memory_estimate(self):
        config = self._config()
        seq_length = getattr(self.options, "max_seq_length", None)
        if config is None or not seq_length or not self.is_chief:
            return
        options = self.options
        micro_batch = (options.train_batch_size
                       // self.strategy.num_replicas_in_sync
                       // options.gradient_accumulation_steps)
        numbers = memory.estimate(
            config, self.model.count_params(), seq_length, micro_batch,
            self.dtype, options.gradient_accumulation_steps,
            getattr(options, "max_predictions_per_seq", 0))
        logging.info("Memory estimate per replica: %s.",
                     memory.describe(numbers, micro_batch))

    def _save_and_evaluate(self):
        path = self.save()
        if self.options.do_eval:
            self.evaluate_and_record(path, use_current_weights=True)

    def _loop_metrics(self, stats, num_steps, seconds):
        metrics = {k: float(v) for k, v in self.task.metrics(stats).items()}
        metrics["learning_rate"] = float(self.optimizer.learning_rate.numpy())
        metrics["examples_per_second"] = (
            num_steps * self.options.train_batch_size / max(seconds, 1e-9))
        self._seconds_per_step = seconds / max(num_steps, 1)
        return metrics

    def _single_process(self):
        """Whether this process runs every replica (no cluster of workers
        whose calls must agree step for step)."""
        resolver = getattr(self.strategy, "cluster_resolver", None)
        if resolver is None:
            return True
        try:
            spec = resolver.cluster_spec().as_dict()
        except (ValueError, RuntimeError, tf.errors.OpError):
            return False
        return sum(len(tasks) for tasks in spec.values()) <= 1

    def _log_progress(self, step, steps_done, metrics, run_start):
        """The progress bar on a terminal, else a log line after the first
        step, when half of `progress_interval_s` has passed since the last
        line, at the end of each `iterations_per_loop` steps, at each
        checkpoint and at the end."""
        if not self.is_chief:
            return
        options = self.options
        total = options.num_steps
        values = " ".join(f"{k} {v:.4g}" for k, v in metrics.items()
                          if k != "examples_per_second")
        if self._interactive:
            if self._bar is None:
                logging.info("The first step (compiling included) took "
                             "%.1f s; a progress bar follows.",
                             self._pace.warmup_s or 0.0)
                self._bar = progress.bar(
                    total=total, description="train", unit="step",
                    initial=step, enabled=True)
                return
            self._bar.set_postfix_str("loss %.4g, %.1f examples/s" % (
                metrics["loss"], metrics["examples_per_second"]))
            self._bar.update(steps_done)
            return
        now = time.time()
        due = (self._last_line is None
               or now - self._last_line >= 0.5 * options.progress_interval_s
               or step % options.iterations_per_loop == 0
               or step % options.save_checkpoints_steps == 0
               or step >= total)
        if not due:
            return
        self._last_line = now
        logging.info("step %d/%d (%.1f%%) %s %.1f examples/s elapsed %s %s",
                     step, total, 100.0 * step / total, values,
                     metrics["examples_per_second"],
                     progress.format_time(now - run_start),
                     self._eta(step, run_start))

    def _eta(self, step, run_start):
        """The ETA part of a progress line: none before the warm-up ends
        (the first step's time is mostly compiling), and bounded by what is
        left of `max_train_seconds`."""
        pace = self._pace
        eta = pace.eta_s(self.options.num_steps)
        if eta is None:
            return ("(the first step, compiling included, took %.1f s; ETA "
                    "after warm-up)" % (pace.warmup_s or 0.0))
        limit = self.options.max_train_seconds
        if limit > 0:
            left = limit - (time.time() - run_start)
            if left < eta:
                return "ETA %s (max_train_seconds)" % progress.format_time(
                    left)
        return "ETA %s" % progress.format_time(eta)
