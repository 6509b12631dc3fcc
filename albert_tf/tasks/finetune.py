"""The fine-tuning loop: any tf.distribute strategy, every checkpoint evaluated.

`FineTuner` owns a task model, the official AdamW (or LAMB) with the
warmup + polynomial-decay schedule, and a `tf.train.CheckpointManager` under
`output_dir` that keeps every checkpoint (`ckpt-<step>`). One compiled call
runs `iterations_per_loop` steps of `strategy.run`; gradients are summed over
replicas, clipped to global norm 1.0 and applied once, as in pretraining.
`evaluate_checkpoints` restores each saved checkpoint, scores it, records
every result in `eval_results.txt` and keeps the best one's weights in
`<output_dir>/best/`.

Shape legend: B batch, K choices, T length.
"""

import json
import os

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.training import optimization
from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.pretrainer import AlbertPretrainer

DTYPES = {"float32": None, "bfloat16": "mixed_bfloat16"}
BEST_DIR = "best"
CLIP_NORM = 1.0  # official: global-norm clipping of the summed gradients
EVAL_RESULTS = "eval_results.txt"


def load_encoder(init_checkpoint=None, albert_config_file=None,
                 dtype="float32"):
    """The encoder to fine-tune, pretrained or fresh.

    Args:
        init_checkpoint: a model directory, a checkpoint prefix of this
            project, or (when `albert_tf.load_pretrained` is available) any
            directory it reads. None: random initialization.
        albert_config_file: the `AlbertConfig` JSON; default: the one in the
            `init_checkpoint` directory.
        dtype: "float32" or "bfloat16" (mixed precision, float32 variables).

    Returns:
        An `AlbertEncoder`.

    Raises:
        ValueError: no config can be found, or an unknown dtype.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}. "
                         f"Received: dtype={dtype!r}")
    if albert_config_file is None and init_checkpoint:
        folder = (init_checkpoint if tf.io.gfile.isdir(init_checkpoint)
                  else os.path.dirname(init_checkpoint))
        candidate = os.path.join(folder, checkpoint_lib.CONFIG_NAME)
        if tf.io.gfile.exists(candidate):
            albert_config_file = candidate
    if albert_config_file is None:
        if init_checkpoint:
            return _load_other_format(init_checkpoint, dtype)
        raise ValueError("An ALBERT config is needed: pass albert_config_file "
                         "or an init_checkpoint directory holding "
                         f"{checkpoint_lib.CONFIG_NAME}. Received: neither")
    config = AlbertConfig.from_json_file(albert_config_file)
    pretrainer = AlbertPretrainer(config, dtype=DTYPES[dtype])
    if init_checkpoint:
        prefix = checkpoint_lib.restore_model(pretrainer, init_checkpoint)
        logging.info("Initialized the encoder from %s", prefix)
    return pretrainer.encoder


def _load_other_format(path, dtype):
    import albert_tf

    loader = getattr(albert_tf, "load_pretrained", None)
    if loader is None:
        raise ValueError(f"No {checkpoint_lib.CONFIG_NAME} next to the "
                         f"checkpoint. Received: init_checkpoint={path!r}")
    loaded = loader(path)
    if DTYPES[dtype] is None:
        return loaded.encoder
    pretrainer = AlbertPretrainer(loaded.config, dtype=DTYPES[dtype])
    pretrainer.set_weights(loaded.get_weights())
    return pretrainer.encoder


# === Losses: per-example values, float32 [B] ===

def classification_loss(outputs, labels):
    return keras.losses.sparse_categorical_crossentropy(
        labels["label_ids"], outputs["logits"], from_logits=True)


def regression_loss(outputs, labels):
    return tf.square(outputs["logits"][:, 0] - labels["label_ids"])


def span_loss(outputs, labels):
    loss = 0.5 * (
        keras.losses.sparse_categorical_crossentropy(
            labels["start_positions"], outputs["start_logits"], from_logits=True)
        + keras.losses.sparse_categorical_crossentropy(
            labels["end_positions"], outputs["end_logits"], from_logits=True))
    if "no_answer_logits" in outputs:
        loss += tf.nn.sigmoid_cross_entropy_with_logits(
            tf.cast(labels["is_impossible"], tf.float32),
            outputs["no_answer_logits"])
    return loss


# Multiple choice: cross-entropy of the softmax across the K choices.
multiple_choice_loss = classification_loss


class FineTuner:
    """A task model with its optimizer, checkpoints and compiled loops.

    Args:
        model_fn: builds the task model (called inside the strategy scope).
        loss_fn: `(outputs, labels) -> [B]` per-example losses.
        output_dir: checkpoints, eval results and predictions go here.
        num_train_steps: optimizer steps (the schedule decays to 0 there).
        num_warmup_steps: linear warmup steps.
        learning_rate: peak learning rate.
        optimizer: "adamw" (official fine-tuning) or "lamb".
        save_checkpoints_steps: steps between checkpoints (and one at the end).
        iterations_per_loop: steps per compiled call.
        strategy: a `tf.distribute.Strategy` (default: the current one).
        jit_compile: compile the replica step with XLA.
        seed: seed of the data order and dropout.
    """

    def __init__(self, model_fn, loss_fn, output_dir, num_train_steps,
                 num_warmup_steps=0, learning_rate=1e-5, optimizer="adamw",
                 save_checkpoints_steps=1000, iterations_per_loop=100,
                 strategy=None, jit_compile=False, seed=12345):
        if num_train_steps < 0:
            raise ValueError("num_train_steps must be >= 0. "
                             f"Received: {num_train_steps}")
        self.strategy = strategy or tf.distribute.get_strategy()
        self.loss_fn = loss_fn
        self.output_dir = output_dir
        self.num_train_steps = num_train_steps
        self.save_checkpoints_steps = max(1, save_checkpoints_steps)
        self.iterations_per_loop = max(1, iterations_per_loop)
        self.jit_compile = jit_compile
        self.seed = seed
        keras.utils.set_random_seed(seed)
        with self.strategy.scope():
            self.model = model_fn()
            self.optimizer = optimization.create_optimizer(
                optimizer, learning_rate, max(1, num_train_steps),
                num_warmup_steps)
            self.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.checkpoint = tf.train.Checkpoint(
            model=self.model, optimizer=self.optimizer, step=self.step)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, output_dir, max_to_keep=None,
            step_counter=self.step, checkpoint_name="ckpt")
        self._train_loop = None
        self._predict_step = None

    def _replica_step(self, features):
        context = tf.distribute.get_replica_context()
        inputs = {k: features[k] for k in INPUT_NAMES}
        global_batch = tf.cast(
            tf.shape(features[INPUT_NAMES[0]])[0]
            * self.strategy.num_replicas_in_sync, tf.float32)
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(inputs, training=True)
            loss = tf.reduce_sum(self.loss_fn(outputs, features)) / global_batch
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        loss = context.all_reduce(tf.distribute.ReduceOp.SUM, loss)
        grads, _ = tf.clip_by_global_norm(grads, CLIP_NORM)
        # Already summed over replicas: Keras applies each replica's copy to
        # that replica's variables without reducing again.
        self.optimizer.apply(grads, variables)
        return loss

    def _build(self):
        replica_step = tf.function(self._replica_step,
                                   jit_compile=self.jit_compile)

        @tf.function
        def train_loop(iterator, num_steps):
            total = tf.constant(0.0)
            for _ in tf.range(num_steps):
                loss = self.strategy.run(replica_step, args=(next(iterator),))
                total += self.strategy.experimental_local_results(loss)[0]
            self.step.assign_add(tf.cast(num_steps, tf.int64))
            return total / tf.cast(num_steps, tf.float32)

        @tf.function
        def predict_step(features):
            return self.strategy.run(
                lambda f: self.model({k: f[k] for k in INPUT_NAMES},
                                     training=False), args=(features,))

        self._train_loop, self._predict_step = train_loop, predict_step

    def train(self, features, batch_size):
        """Trains to `num_train_steps`, resuming from the newest checkpoint.

        Args:
            features: dict of NumPy arrays (model inputs and labels).
            batch_size: the global batch size.

        Returns:
            A list of `(step, mean loss)`, one per compiled call.
        """
        if self.manager.latest_checkpoint:
            self.checkpoint.read(self.manager.latest_checkpoint).expect_partial()
            logging.info("Resumed from %s", self.manager.latest_checkpoint)
        if self._train_loop is None:
            self._build()
        num_examples = len(features[INPUT_NAMES[0]])
        if num_examples < batch_size:
            raise ValueError("The training set is smaller than one batch. "
                             f"Received: {num_examples} examples, "
                             f"batch_size={batch_size}")
        dataset = (tf.data.Dataset.from_tensor_slices(features)
                   .shuffle(min(num_examples, 100_000), seed=self.seed)
                   .repeat().batch(batch_size, drop_remainder=True)
                   .prefetch(tf.data.AUTOTUNE))
        iterator = iter(self.strategy.experimental_distribute_dataset(dataset))
        history = []
        step = int(self.step.numpy())
        while step < self.num_train_steps:
            next_save = (step // self.save_checkpoints_steps + 1) \
                * self.save_checkpoints_steps
            num = min(self.iterations_per_loop, self.num_train_steps - step,
                      next_save - step)
            loss = float(self._train_loop(iterator, tf.constant(num)))
            step = int(self.step.numpy())
            history.append((step, loss))
            logging.info("step %d loss %.4f", step, loss)
            if step % self.save_checkpoints_steps == 0 or \
                    step == self.num_train_steps:
                self.manager.save(checkpoint_number=step)
        return history

    def predict(self, features, batch_size):
        """Model outputs for every row of `features`, in order (NumPy dict)."""
        if self._predict_step is None:
            self._build()
        inputs = {k: features[k] for k in INPUT_NAMES}
        num = len(inputs[INPUT_NAMES[0]])
        padded = -(-num // batch_size) * batch_size
        if padded != num:
            inputs = {k: np.concatenate(
                [v, np.zeros((padded - num,) + v.shape[1:], v.dtype)])
                for k, v in inputs.items()}
        dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(
            batch_size, drop_remainder=True)
        chunks = []
        for batch in self.strategy.experimental_distribute_dataset(dataset):
            out = self._predict_step(batch)
            # Each replica holds a contiguous slice of the global batch.
            replicas = [
                {k: np.asarray(self.strategy.experimental_local_results(v)[r])
                 for k, v in out.items()}
                for r in range(self.strategy.num_replicas_in_sync)]
            chunks.extend(replicas)
        if not chunks:
            return {}
        return {k: np.concatenate([c[k] for c in chunks])[:num]
                for k in chunks[0]}

    def checkpoint_paths(self):
        """Saved checkpoints, oldest first."""
        state = tf.train.get_checkpoint_state(self.output_dir)
        return list(state.all_model_checkpoint_paths) if state else []

    def restore_weights(self, path):
        """Loads the model weights (not the optimizer) of a checkpoint."""
        tf.train.Checkpoint(model=self.model).read(path).expect_partial()

    def save_best(self):
        """Writes the current weights to `<output_dir>/best/model.ckpt`."""
        return tf.train.Checkpoint(model=self.model).write(
            os.path.join(self.output_dir, BEST_DIR, "model.ckpt"))


def evaluate_checkpoints(tuner, evaluate_fn):
    """Scores every saved checkpoint and keeps the best.

    Args:
        tuner: a `FineTuner` with saved checkpoints.
        evaluate_fn: `model -> dict of metrics` holding `score` (higher is
            better).

    Returns:
        `(results, best)`: one dict per checkpoint (`checkpoint`, `step`,
        metrics), and the best of them. The model ends with the best
        weights, also written to `<output_dir>/best/`.

    Raises:
        ValueError: when there is no checkpoint.
    """
    paths = tuner.checkpoint_paths()
    if not paths:
        raise ValueError("No checkpoint to evaluate in "
                         f"{tuner.output_dir!r}. Received: 0 checkpoints")
    results = []
    for path in paths:
        tuner.restore_weights(path)
        metrics = evaluate_fn(tuner.model)
        result = {"checkpoint": path,
                  "step": int(path.rsplit("-", 1)[-1]), **metrics}
        logging.info("eval %s", result)
        results.append(result)
    best = max(results, key=lambda r: r["score"])
    tuner.restore_weights(best["checkpoint"])
    tuner.save_best()
    with tf.io.gfile.GFile(os.path.join(tuner.output_dir, EVAL_RESULTS),
                           "w") as f:
        for result in results:
            f.write(json.dumps(result, sort_keys=True) + "\n")
        f.write("best " + json.dumps(best, sort_keys=True) + "\n")
    logging.info("best checkpoint %s score %.4f", best["checkpoint"],
                 best["score"])
    return results, best
