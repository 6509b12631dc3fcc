"""Fine-tuning as a task of the one `Trainer`.

`FinetuneOptions` (in `albert_tf.tasks.options`, with each job's options;
no TensorFlow there) holds the flags every fine-tuning job shares (the official
`run_classifier.py` / `run_squad*.py` / `run_race.py` names: `train_step`,
`warmup_step`, ...). `FinetuningTask` tells the `Trainer` the task model (a
head on the pretrained encoder), the training arrays and the loss: the mean
of per-example losses over the *global* batch, as the sum of a replica's
losses over the global example count, so the gradients summed over replicas
are those of one device. `run_finetuning` is the flow every job follows:
train (evaluating each checkpoint as it is written with `do_eval`), evaluate
the checkpoints not yet evaluated, and end with the best (else the newest)
weights in the model for prediction and export.

Shape legend: B batch, K choices, T length.
"""

import os

from absl import logging
import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.training import results as results_lib
from albert_tf.tasks.options import FinetuneOptions  # pylint: disable=unused-import
from albert_tf.training.options import DTYPES
from albert_tf.training.trainer_task import TrainingTask
from albert_tf.training.trainer import Trainer


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
            Also accepted: a Keras dtype policy name or None (float32).

    Returns:
        An `AlbertEncoder`.

    Raises:
        ValueError: no config can be found, or an unknown dtype.
    """
    dtype = {None: "float32", "mixed_bfloat16": "bfloat16"}.get(dtype, dtype)
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


class FinetuningTask(TrainingTask):
    """A task model trained on in-memory arrays with a per-example loss.

    Args:
        model_fn: `dtype policy -> task model` (built in the strategy scope).
        loss_fn: `(outputs, features) -> [B]` per-example losses.
        train_features: dict of NumPy arrays (inputs and labels), or None
            when not training.
        evaluate_fn: `trainer -> metrics` holding `score` (higher is better).
        seed: seed of the data order.
        task_info: what defines the task (name, labels, ...): kept beside
            the checkpoints as `task.json` with the encoder's
            `albert_config.json`, and checked when a run resumes.
    """

    stat_names = ("loss_sum", "count")
    best_metric = "score"

    def __init__(self, model_fn, loss_fn, train_features=None,
                 evaluate_fn=None, seed=12345, task_info=None):
        self.model_fn, self.loss_fn = model_fn, loss_fn
        self.train_features = train_features
        self.evaluate_fn = evaluate_fn
        self.seed = seed
        self.task_info = task_info or {}
        self.model = None

    def build_model(self, dtype):
        self.model = self.model_fn(dtype)
        return self.model

    def config_files(self):
        return {checkpoint_lib.CONFIG_NAME: self.model.encoder.config.to_dict(),
                "task.json": self.task_info}

    def train_dataset(self, input_context, global_batch_size, skip_batches):
        features = self.train_features
        num = len(features[INPUT_NAMES[0]])
        if num < global_batch_size:
            raise ValueError("The training set is smaller than one batch. "
                             f"Received: {num} examples, "
                             f"train_batch_size={global_batch_size}")
        dataset = tf.data.Dataset.from_tensor_slices(features)
        if input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        batch = input_context.get_per_replica_batch_size(global_batch_size)
        return (dataset.shuffle(min(num, 100_000), seed=self.seed).repeat()
                .batch(batch, drop_remainder=True).skip(skip_batches)
                .prefetch(tf.data.AUTOTUNE))

    def denominators(self, features):
        return tf.stack([float(features[INPUT_NAMES[0]].shape[0])])

    def stats(self, model, features, training):
        outputs = model({k: features[k] for k in INPUT_NAMES}, training=training)
        per_example = tf.cast(self.loss_fn(outputs, features), tf.float32)
        return tf.stack([tf.reduce_sum(per_example),
                         tf.cast(tf.shape(per_example)[0], tf.float32)])

    def loss(self, stats, denominators):
        return stats[0] / denominators[0]

    def metrics(self, stats):
        return {"loss": stats[0] / tf.maximum(stats[1], 1.0)}

    def evaluate(self, trainer):
        return self.evaluate_fn(trainer)


def run_finetuning(task, options, strategy=None):
    """Trains and/or evaluates `task` as `options` say.

    Returns:
        `(trainer, report)`: the trainer's model holds the best weights
        (else the newest checkpoint's); the report has `train` (see
        `Trainer.train`), and with `do_eval` `eval_results` (every result in
        `eval_results.txt`) and `best`.
    """
    keras.utils.set_random_seed(options.seed)
    trainer = Trainer(task, options, strategy)
    report = {}
    if options.do_train:
        report["train"] = trainer.train()
    else:
        trainer.restore()
    if options.do_eval:
        trainer.evaluate_pending()
        report["eval_results"] = results_lib.read_eval_results(
            os.path.join(options.output_dir, results_lib.EVAL_RESULTS))
        report["best"] = results_lib.best_result(options.output_dir)
    path = trainer.restore_best_or_latest()
    if path is None and not options.do_train:
        logging.warning("No checkpoint in %s: predicting with the initial "
                        "weights.", options.output_dir)
    return trainer, report
