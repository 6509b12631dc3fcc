"""The pretraining loop: a custom loop under any tf.distribute strategy.

One compiled call runs up to `iterations_per_loop` steps (`tf.range` loop of
`strategy.run` over a distributed iterator), which is what TPUs want and what
works under MultiWorkerMirroredStrategy where `Model.fit` does not.

One step on one replica (`_replica_step`):
1. The replica's share of the global batch is split into
   `gradient_accumulation_steps` micro-batches.
2. The global MLM weight sum and example count are all-reduced first, so
   each micro-batch's loss is its numerators over the *global* denominators
   (`losses.replica_loss`): the gradients summed over micro-batches and
   replicas are exactly those of the official loss on the global batch.
3. The optimizer sums the gradients over replicas, clips the sum to global
   norm 1.0 (`optimization.Lamb(clip_norm=...)`) and applies it once.

Checkpoints (`ckpt-<step>`, `tf.train.Checkpoint(model=, optimizer=, step=)`)
are written every `save_checkpoints_steps`; a restarted run resumes from the
newest one with the same step, optimizer state and learning rate, and skips
the batches already consumed, so it sees the data an uninterrupted run would
have seen. SIGTERM saves a checkpoint at the current step and stops.
"""

import dataclasses
import os
import signal
import time

from absl import logging
import keras
import tensorflow as tf

from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.training import distribute
from albert_tf.training import input_pipeline
from albert_tf.training import losses
from albert_tf.training import optimization
from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.pretrainer import AlbertPretrainer

MODEL_INPUTS = INPUT_NAMES + ("masked_lm_positions",)
DTYPES = {"float32": None, "bfloat16": "mixed_bfloat16"}
EVAL_RESULTS = "eval_results.txt"
BEST_DIR = "best"


@dataclasses.dataclass
class PretrainingOptions:
    """Everything a pretraining run needs (the CLI's flags, as a dataclass).

    Field names and defaults follow the official `run_pretraining.py` flags,
    except `dtype`, `gradient_accumulation_steps`, `seed`, `jit_compile` and
    the dynamic-masking fields, which are this project's.
    """

    input_file: str
    output_dir: str
    config: AlbertConfig
    init_checkpoint: str = None
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    num_train_steps: int = 125000
    num_warmup_steps: int = 3125
    learning_rate: float = 0.00176
    optimizer: str = "lamb"
    poly_power: float = 1.0
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    do_train: bool = True
    do_eval: bool = False
    max_eval_steps: int = 100
    eval_input_file: str = None
    dtype: str = "float32"
    gradient_accumulation_steps: int = 1
    seed: int = 12345
    # True: compile steps with XLA; None: XLA except on a CPU-only machine.
    jit_compile: bool = None
    dynamic_masking: bool = False
    masked_lm_prob: float = 0.15
    # Stop (saving a checkpoint) after the loop that passes this many seconds
    # of training in this process; 0 means no limit. A later run resumes.
    max_train_seconds: float = 0.0

    def validate(self, num_replicas=1):
        """Raises `ValueError` naming the first inconsistent option."""
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}. "
                             f"Received: dtype={self.dtype!r}")
        if self.optimizer not in optimization.OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {optimization.OPTIMIZERS}. "
                             f"Received: optimizer={self.optimizer!r}")
        for name in ("train_batch_size", "eval_batch_size", "num_train_steps",
                     "save_checkpoints_steps", "keep_checkpoint_max",
                     "iterations_per_loop", "gradient_accumulation_steps",
                     "max_seq_length", "max_predictions_per_seq"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive. "
                                 f"Received: {name}={getattr(self, name)}")
        unit = num_replicas * self.gradient_accumulation_steps
        if self.train_batch_size % unit:
            raise ValueError(
                "train_batch_size must be divisible by replicas x "
                f"gradient_accumulation_steps ({num_replicas} x "
                f"{self.gradient_accumulation_steps}). Received: "
                f"train_batch_size={self.train_batch_size}")
        if self.eval_batch_size % num_replicas:
            raise ValueError(
                f"eval_batch_size must be divisible by the {num_replicas} "
                f"replicas. Received: eval_batch_size={self.eval_batch_size}")


def use_xla(jit_compile, strategy):
    """Resolves `PretrainingOptions.jit_compile` for `strategy`.

    `None` means XLA on TPUs and GPUs, where it is the fast path, and not on
    a CPU-only machine, where TensorFlow's own (oneDNN) kernels run the step
    faster than XLA's CPU code: about 2x in bfloat16, whose matmuls XLA on
    CPU does not speed up over float32. Explicit True/False is kept.
    """
    if jit_compile is not None:
        return bool(jit_compile)
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    return any(device.device_type != "CPU"
               for device in tf.config.list_physical_devices())


def _model_inputs(features):
    return {name: features[name] for name in MODEL_INPUTS}


def _stats(model, features, training):
    mlm_logits, sop_logits = model.pretraining_logits(
        _model_inputs(features), training=training)
    return losses.pretraining_stats(
        mlm_logits, features["masked_lm_ids"], features["masked_lm_weights"],
        sop_logits, features["next_sentence_labels"])


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


def _format_eta(seconds):
    seconds = int(max(seconds, 0))
    return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


class PretrainingRunner:
    """Model, optimizer, checkpoints and the compiled loops of one run.

    Args:
        options: `PretrainingOptions`.
        strategy: a `tf.distribute.Strategy` (default: the default strategy).
    """

    def __init__(self, options, strategy=None):
        self.options = options
        self.strategy = strategy or tf.distribute.get_strategy()
        options.validate(self.strategy.num_replicas_in_sync)
        self.is_chief = distribute.is_chief(self.strategy)
        with self.strategy.scope():
            self.model = AlbertPretrainer(options.config,
                                          dtype=DTYPES[options.dtype])
            self.optimizer = optimization.create_optimizer(
                options.optimizer, options.learning_rate,
                options.num_train_steps, options.num_warmup_steps,
                options.poly_power)
            self.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.checkpoint = tf.train.Checkpoint(
            **{checkpoint_lib.MODEL_KEY: self.model},
            optimizer=self.optimizer, step=self.step)
        self._manager = None
        self._train_loop = None
        self._eval_step = None
        self._preempted = False

    # === Compiled functions ===

    def _compute(self, features, global_weight, global_count):
        """Gradients and statistics of one micro-batch on one replica."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            stats = _stats(self.model, features, training=True)
            loss = losses.replica_loss(stats, global_weight, global_count)
        grads = tape.gradient(loss, variables)
        # Dense: gathers give IndexedSlices, which cannot be accumulated.
        grads = [tf.convert_to_tensor(g) for g in grads]
        return grads, stats

    def _replica_step(self, features):
        """One optimizer step on this replica's share of the global batch."""
        context = tf.distribute.get_replica_context()
        steps = self.options.gradient_accumulation_steps
        weights = features["masked_lm_weights"]
        batch = weights.shape[0]  # static: drop_remainder
        local = tf.stack([tf.reduce_sum(weights), float(batch)])
        global_weight, global_count = tf.unstack(
            context.all_reduce(tf.distribute.ReduceOp.SUM, local))
        if steps == 1:
            grads, stats = self._compute_fn(features, global_weight, global_count)
        else:
            micro = batch // steps
            # [B, ...] -> [steps, B / steps, ...]
            split = tf.nest.map_structure(
                lambda x: tf.reshape(x, [steps, micro] + x.shape[1:].as_list()),
                features)
            variables = self.model.trainable_variables
            grads = [tf.zeros(v.shape, v.dtype) for v in variables]
            stats = tf.zeros([len(losses.STAT_NAMES)])
            for i in tf.range(steps):
                part = tf.nest.map_structure(lambda x: x[i], split)
                g, s = self._compute_fn(part, global_weight, global_count)
                grads = [a + b for a, b in zip(grads, g)]
                stats = stats + s
        stats = context.all_reduce(tf.distribute.ReduceOp.SUM, stats)
        # The optimizer sums the gradients over replicas, then clips them.
        self.optimizer.apply(grads, self.model.trainable_variables)
        return stats

    def _build_functions(self):
        single = (self.strategy.num_replicas_in_sync == 1 and not isinstance(
            self.strategy, tf.distribute.TPUStrategy))
        jit = use_xla(self.options.jit_compile, self.strategy)
        self._compute_fn = tf.function(self._compute, jit_compile=jit and not single)
        # On one device the whole step, optimizer included, is one XLA program.
        replica_step = tf.function(self._replica_step, jit_compile=jit and single)

        @tf.function
        def train_loop(iterator, num_steps):
            total = tf.zeros([len(losses.STAT_NAMES)])
            for _ in tf.range(num_steps):
                stats = self.strategy.run(replica_step, args=(next(iterator),))
                # Already all-reduced: every replica holds the global sums.
                total += self.strategy.experimental_local_results(stats)[0]
            self.step.assign_add(tf.cast(num_steps, tf.int64))
            return total

        @tf.function
        def eval_step(features):
            stats = self.strategy.run(
                lambda f: _stats(self.model, f, training=False), args=(features,))
            return self.strategy.reduce(tf.distribute.ReduceOp.SUM, stats, axis=None)

        self._train_loop = train_loop
        self._eval_step = eval_step

    # === Data ===

    def _distributed_dataset(self, input_file, batch_size, is_training, start_step=0):
        options = self.options
        masking = None
        if options.dynamic_masking:
            masking = input_pipeline.DynamicMasking(
                vocab_size=options.config.vocab_size,
                masked_lm_prob=options.masked_lm_prob, seed=options.seed)

        def dataset_fn(context):
            # Each step consumes one batch per local replica.
            per_step = context.num_replicas_in_sync // context.num_input_pipelines
            return input_pipeline.pretraining_dataset(
                input_file, batch_size, options.max_seq_length,
                options.max_predictions_per_seq, is_training=is_training,
                seed=options.seed, input_context=context,
                skip_batches=start_step * per_step, dynamic_masking=masking)

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    # === Checkpoints ===

    def _checkpoint_dir(self):
        if self.is_chief:
            return self.options.output_dir
        # Other workers take part in the save (it is collective) but write
        # to a scratch directory that is removed afterwards.
        resolver = self.strategy.cluster_resolver
        return os.path.join(self.options.output_dir,
                            f"workertemp_{resolver.task_type}_{resolver.task_id}")

    @property
    def manager(self):
        # Non-chief scratch directories are removed after each save, so their
        # manager is made afresh.
        if self._manager is None or not self.is_chief:
            self._manager = tf.train.CheckpointManager(
                self.checkpoint, self._checkpoint_dir(),
                max_to_keep=self.options.keep_checkpoint_max,
                checkpoint_name="ckpt", step_counter=self.step)
        return self._manager

    def save(self):
        """Writes `ckpt-<step>`; returns its path (None on non-chief workers)."""
        path = self.manager.save(checkpoint_number=self.step)
        if not self.is_chief:
            tf.io.gfile.rmtree(self._checkpoint_dir())
            return None
        logging.info("Saved checkpoint %s", path)
        return path

    def restore(self):
        """Resumes from the newest checkpoint in `output_dir`, else from
        `init_checkpoint` (model weights only), else starts fresh.

        Returns:
            The step training continues from.
        """
        latest = tf.train.latest_checkpoint(self.options.output_dir)
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            logging.info("Resumed from %s at step %d", latest,
                         int(self.step.numpy()))
        elif self.options.init_checkpoint:
            path = checkpoint_lib.restore_model(self.model,
                                                self.options.init_checkpoint)
            logging.info("Initialized the model from %s", path)
        return int(self.step.numpy())

    # === Training ===

    def _on_sigterm(self, signum, frame):
        del signum, frame
        logging.warning("SIGTERM: saving a checkpoint after the current loop.")
        self._preempted = True

    def train(self, evaluate_each_checkpoint=False):
        """Trains to `num_train_steps`, resuming if a checkpoint exists.

        Args:
            evaluate_each_checkpoint: evaluate every checkpoint right after it
                is written (so checkpoints removed later are evaluated too).

        Returns:
            A dict: `step` reached, `preempted`, and the last loop's metrics.
        """
        options = self.options
        if self._train_loop is None:
            self._build_functions()
        start = self.restore()
        if self.is_chief:
            tf.io.gfile.makedirs(options.output_dir)
            options.config.to_json_file(
                os.path.join(options.output_dir, checkpoint_lib.CONFIG_NAME))
        if start >= options.num_train_steps:
            logging.info("Step %d reached num_train_steps=%d: nothing to train.",
                         start, options.num_train_steps)
            return {"step": start, "preempted": False}
        iterator = iter(self._distributed_dataset(
            options.input_file, options.train_batch_size, True, start))
        writer = (tf.summary.create_file_writer(
            os.path.join(options.output_dir, "train")) if self.is_chief
            else tf.summary.create_noop_writer())
        previous_handler = None
        try:
            previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:
            pass  # Not the main thread: no preemption handling.
        step, metrics, run_start = start, {}, time.time()
        timed_out = False
        try:
            while step < options.num_train_steps and not self._preempted:
                if options.max_train_seconds > 0 and (
                        time.time() - run_start >= options.max_train_seconds):
                    timed_out = True
                    logging.info("max_train_seconds=%g reached at step %d.",
                                 options.max_train_seconds, step)
                    break
                to_save = options.save_checkpoints_steps - step % options.save_checkpoints_steps
                num = min(options.iterations_per_loop, to_save,
                          options.num_train_steps - step)
                loop_start = time.time()
                stats = self._train_loop(iterator, tf.constant(num, tf.int32))
                metrics = {k: float(v) for k, v in
                           losses.metrics_from_stats(stats).items()}
                step = int(self.step.numpy())
                elapsed = time.time() - loop_start
                metrics["learning_rate"] = float(
                    self.optimizer.learning_rate.numpy())
                metrics["examples_per_second"] = (
                    num * options.train_batch_size / max(elapsed, 1e-9))
                self._log_progress(step, metrics, elapsed / num, run_start, start)
                write_scalars(writer, step, metrics)
                if step % options.save_checkpoints_steps == 0 or (
                        step >= options.num_train_steps):
                    path = self.save()
                    if evaluate_each_checkpoint and path:
                        self.evaluate_and_record(path, use_current_weights=True)
            if ((self._preempted or (timed_out and step > start)) and
                    step % options.save_checkpoints_steps):
                path = self.save()
                if timed_out and evaluate_each_checkpoint and path:
                    self.evaluate_and_record(path, use_current_weights=True)
        finally:
            if previous_handler is not None:
                signal.signal(signal.SIGTERM, previous_handler)
        return {"step": step, "preempted": self._preempted,
                "timed_out": timed_out, **metrics}

    def _log_progress(self, step, metrics, seconds_per_step, run_start, start):
        total = self.options.num_train_steps
        eta = (total - step) * seconds_per_step
        if self.is_chief:
            logging.info(
                "step %d/%d (%.1f%%) loss %.4f mlm_loss %.4f mlm_acc %.4f "
                "sop_loss %.4f sop_acc %.4f lr %.3g %.1f examples/s "
                "elapsed %s ETA %s", step, total, 100.0 * step / total,
                metrics["loss"], metrics["masked_lm_loss"],
                metrics["masked_lm_accuracy"], metrics["sentence_order_loss"],
                metrics["sentence_order_accuracy"], metrics["learning_rate"],
                metrics["examples_per_second"],
                _format_eta(time.time() - run_start), _format_eta(eta))

    # === Evaluation ===

    def evaluate(self):
        """The four metrics over up to `max_eval_steps` evaluation batches."""
        if self._eval_step is None:
            self._build_functions()
        options = self.options
        dataset = self._distributed_dataset(
            options.eval_input_file or options.input_file,
            options.eval_batch_size, is_training=False)
        total = tf.zeros([len(losses.STAT_NAMES)])
        batches = 0
        for features in dataset:
            if batches >= options.max_eval_steps:
                break
            total += self._eval_step(features)
            batches += 1
        metrics = {k: float(v) for k, v in
                   losses.metrics_from_stats(total).items()}
        metrics["eval_batches"] = batches
        return metrics

    def evaluate_and_record(self, path, use_current_weights=False):
        """Evaluates the checkpoint `path`, appends to `eval_results.txt`, and
        keeps a model-directory copy in `best/` if it is the best so far by
        `masked_lm_accuracy`.

        Args:
            path: a checkpoint prefix (`.../ckpt-N`).
            use_current_weights: the model already holds these weights.

        Returns:
            The metrics dict (with `global_step`).
        """
        if not use_current_weights:
            checkpoint_lib.restore_model(self.model, path)
        metrics = self.evaluate()
        reader = tf.train.load_checkpoint(path)
        step_key = next(k for k in reader.get_variable_to_shape_map()
                        if k.startswith("step/"))
        metrics["global_step"] = int(reader.get_tensor(step_key))
        if not self.is_chief:
            return metrics
        output_dir = self.options.output_dir
        lines = [f"checkpoint = {os.path.basename(path)}"]
        lines += [f"{k} = {metrics[k]}" for k in
                  ("global_step",) + losses.METRIC_NAMES + ("loss", "eval_batches")]
        results = os.path.join(output_dir, EVAL_RESULTS)
        previous = ""
        if tf.io.gfile.exists(results):
            with tf.io.gfile.GFile(results) as f:
                previous = f.read()
        with tf.io.gfile.GFile(results, "w") as f:
            f.write(previous + "\n".join(lines) + "\n\n")
        logging.info("Eval %s: %s", os.path.basename(path), ", ".join(lines[1:]))
        writer = tf.summary.create_file_writer(os.path.join(output_dir, "eval"))
        write_scalars(writer, metrics["global_step"],
                      {name: metrics[name] for name in losses.METRIC_NAMES})
        writer.close()

        best_dir = os.path.join(output_dir, BEST_DIR)
        best = read_eval_results(os.path.join(best_dir, EVAL_RESULTS))
        if not best or metrics["masked_lm_accuracy"] > best[0]["masked_lm_accuracy"]:
            if tf.io.gfile.exists(best_dir):
                tf.io.gfile.rmtree(best_dir)
            checkpoint_lib.save_model_dir(self.model, best_dir)
            with tf.io.gfile.GFile(os.path.join(best_dir, EVAL_RESULTS), "w") as f:
                f.write("\n".join(lines) + "\n")
            logging.info("New best checkpoint (masked_lm_accuracy %.4f) copied "
                         "to %s", metrics["masked_lm_accuracy"], best_dir)
        return metrics

    def evaluate_all_checkpoints(self):
        """Evaluates every checkpoint in `output_dir` not yet in the results."""
        done = {r["checkpoint"] for r in read_eval_results(
            os.path.join(self.options.output_dir, EVAL_RESULTS))}
        state = tf.train.get_checkpoint_state(self.options.output_dir)
        paths = list(state.all_model_checkpoint_paths) if state else []
        results = []
        for path in paths:
            if not os.path.isabs(path):
                path = os.path.join(self.options.output_dir, path)
            if os.path.basename(path) not in done:
                results.append(self.evaluate_and_record(path))
        return results


def read_eval_results(path):
    """Parses an `eval_results.txt` into a list of dicts (one per block)."""
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
                try:
                    entry[key] = float(value)
                except ValueError:
                    entry[key] = value
        if entry:
            results.append(entry)
    return results


def run_pretraining(options, strategy=None):
    """Trains and/or evaluates as `options` says (the CLI's library entry).

    Args:
        options: `PretrainingOptions`.
        strategy: a strategy; default: the default (single-device) strategy.

    Returns:
        A dict: `train` (see `PretrainingRunner.train`) and `eval` (a list of
        metric dicts, one per evaluated checkpoint) when requested.
    """
    if not options.do_train and not options.do_eval:
        raise ValueError("At least one of do_train and do_eval must be True.")
    keras.utils.set_random_seed(options.seed)
    runner = PretrainingRunner(options, strategy)
    report = {}
    if options.do_train:
        report["train"] = runner.train(evaluate_each_checkpoint=options.do_eval)
    if options.do_eval:
        if not options.do_train:
            runner.restore()
        report["eval"] = runner.evaluate_all_checkpoints()
        report["eval_results"] = read_eval_results(
            os.path.join(options.output_dir, EVAL_RESULTS))
    return report
