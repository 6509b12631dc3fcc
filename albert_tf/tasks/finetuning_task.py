"""Fine-tuning as a task of the one `Trainer`.

`encoder_from_checkpoint` and `spm_model_file` give a job the pretrained
encoder and its vocabulary. `FinetuningTask` tells the `Trainer` the task
model (a head on the encoder), the training arrays and the loss: the mean of
per-example losses over the *global* batch, as the sum of a replica's losses
over the global example count, so the gradients summed over replicas are
those of one device. `run_finetuning` is the flow every job follows: train
(evaluating each checkpoint as it is written with `do_eval`), evaluate the
checkpoints not yet evaluated, and end with the best (else the newest)
weights in the model for prediction and export.

Shape legend: B batch, K choices, T length.
"""

import math
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.convert import pretrained
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.training import baselines
from albert_tf.training import model_dir
from albert_tf.training import results as results_lib
from albert_tf.training.options import DTYPES
from albert_tf.training.trainer import build_trainer
from albert_tf.training.trainer_task import TrainingTask
from foundation import redaction


def encoder_from_checkpoint(init_checkpoint=None, albert_config_file=None,
                            dtype="float32"):
    """The encoder to fine-tune, pretrained or fresh.

    Args:
        init_checkpoint: a model directory, a training run's folder or
            checkpoint prefix, a directory of any format
            `albert_tf.load_pretrained` reads, or released weights by name
            (`"albert_base_v2"`, `hf://...`; fetched and cached on first
            use). None: random initialization.
        albert_config_file: the `AlbertConfig` JSON; default: the one in the
            `init_checkpoint` folder.
        dtype: "float32" or "bfloat16" (mixed precision, float32 variables).
            Also accepted: a Keras dtype policy name or None (float32).

    Returns:
        An `AlbertEncoder`.

    Raises:
        ValueError: neither `init_checkpoint` nor `albert_config_file`, an
            unknown dtype, or weights that do not load (see
            `load_pretrained`).
        FileNotFoundError: nothing at `init_checkpoint`, or no config.
    """
    dtype = {None: "float32", "mixed_bfloat16": "bfloat16"}.get(dtype, dtype)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}. "
                         f"Received: dtype={dtype!r}")
    if not init_checkpoint:
        if albert_config_file is None:
            raise ValueError(
                "An ALBERT config is needed: pass albert_config_file or an "
                "init_checkpoint. Received: neither")
        config = AlbertConfig.from_json_file(albert_config_file)
        return AlbertPretrainer(config, dtype=DTYPES[dtype]).encoder
    init_checkpoint = pretrained.local_model_path(init_checkpoint)
    source = pretrained.detect_format(init_checkpoint)
    pretrainer = pretrained.load_pretrained(init_checkpoint, DTYPES[dtype],
                                            albert_config_file)
    # Name the checkpoint read, not the folder: a run folder has several.
    logging.info("Initialized the encoder from %s (%s)",
                 model_dir.resolve_checkpoint(init_checkpoint)
                 if source == "albert_tf" else init_checkpoint, source)
    return pretrainer.encoder


def spm_model_file(options):
    """The SentencePiece model of a fine-tuning job: `spm_model_file`, else
    the one that comes with `init_checkpoint` (`spm.model` in this
    project's model directory; see `pretrained.spm_model_path`).

    Args:
        options: the job's `FinetuneOptions`.

    Raises:
        ValueError: neither gives one.
    """
    if options.spm_model_file:
        return options.spm_model_file
    found = None
    if options.init_checkpoint:
        found = pretrained.spm_model_path(options.init_checkpoint)
    if found is None:
        raise ValueError(
            "A SentencePiece model is needed: pass --spm_model_file or an "
            f"--init_checkpoint folder holding {model_dir.SPM_NAME}. "
            "Received: --init_checkpoint="
            f"{redaction.redact(options.init_checkpoint)}")
    return found


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


# === Chance: the loss of a model that ignores its input ===

def label_chance_loss(labels):
    """The cross-entropy of always predicting the labels' frequencies (the
    best a classifier or a multiple-choice model can do without reading its
    input): their entropy, in nats (ln k for k balanced classes)."""
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def regression_chance_loss(values):
    """The squared error of always predicting the mean: the variance."""
    return float(np.var(np.asarray(values, np.float64)))


class FinetuningTask(TrainingTask):
    """A task model trained on in-memory arrays with a per-example loss.

    Args:
        model_fn: `dtype policy -> task model` (built in the strategy scope).
        loss_fn: `(outputs, features) -> [B]` per-example losses.
        train_features: dict of NumPy arrays (inputs and labels), or None
            when not training.
        evaluate_fn: `evaluator -> metrics` holding `score` (higher is
            better); `evaluator` is the run's `evaluation.Evaluator`.
        seed: seed of the data order.
        task_info: what defines the task (name, labels, ...): kept beside
            the checkpoints as `task.json` with the encoder's
            `albert_config.json`, and checked when a run resumes.
        input_files: `{flag: [files]}` the fine-tuned weights are made from
            (see `TrainingTask.input_files`).
        chance_loss: the training loss of a model that ignores its input
            (`label_chance_loss`, `regression_chance_loss`), or None.
    """

    stat_names = ("loss_sum", "count")
    best_metric = "score"

    def __init__(self, model_fn, loss_fn, train_features=None,
                 evaluate_fn=None, seed=12345, task_info=None,
                 input_files=None, chance_loss=None):
        self.model_fn, self.loss_fn = model_fn, loss_fn
        self.train_features = train_features
        self.evaluate_fn = evaluate_fn
        self.seed = seed
        self.task_info = task_info or {}
        self._input_files = input_files or {}
        self._chance_loss = chance_loss
        self.model = None

    def input_files(self):
        return dict(self._input_files)

    def chance_loss(self):
        if self._chance_loss is None or not math.isfinite(self._chance_loss):
            return None
        return self._chance_loss

    def build_model(self, dtype):
        self.model = self.model_fn(dtype)
        return self.model

    def config_files(self):
        return {model_dir.CONFIG_NAME: self.model.encoder.config.to_dict(),
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

    def evaluate(self, evaluator):
        return self.evaluate_fn(evaluator)

    def describe_evaluation(self, metrics):
        """Each metric beside the majority-class baseline of the dev
        labels (`majority_<metric>`), the accuracy with its 95% interval;
        a classifier that answered one class says so. None: no baseline
        (regression, span extraction)."""
        parts = []
        examples = metrics.get("eval_examples", 0)
        for name, value in metrics.items():
            baseline = metrics.get(f"majority_{name}")
            if name.startswith("majority_") or baseline is None:
                continue
            if name == "accuracy":
                parts.append(baselines.describe(
                    name, value, baseline, examples,
                    f"majority class ({self.class_name(metrics['majority_class'])})"))
            else:
                parts.append(f"{name} {value:.4f} (majority class "
                             f"{baseline:.4f})")
        if not parts:
            return None
        collapsed = baselines.collapsed_class(metrics)
        if collapsed is not None:
            parts.append(f"collapsed: it answered "
                         f"{self.class_name(collapsed)} for all {examples} "
                         "dev examples")
        return "; ".join(parts)

    def class_name(self, class_id):
        """A class id as the task names it (GLUE labels), else the id."""
        labels = self.task_info.get("labels") or []
        if isinstance(class_id, int) and 0 <= class_id < len(labels):
            return f"{labels[class_id]!r}"
        return f"class {class_id}"



def collapse_report(task, best):
    """`{"collapsed": {...}, "collapse_warning": line}` (the line logged
    as a WARNING) when the best checkpoint's classifier answered one class
    for every dev example, else {}."""
    answered = baselines.collapsed_class(best)
    if answered is None:
        return {}
    examples = best["eval_examples"]
    share = best.get("majority_accuracy")
    warning = (
        f"The fine-tuned classifier collapsed: {best.get('checkpoint')} "
        f"answers {task.class_name(answered)} for all {examples} dev "
        f"examples (accuracy {best.get('accuracy', float('nan')):.4f}"
        + (f", the majority class alone gets {share:.4f}" if share is not None
           else "") + "). It has learned nothing from its input: try a lower "
        "--learning_rate, more --train_step or another --seed.")
    logging.warning("%s", warning)
    return {"collapsed": {"checkpoint": best.get("checkpoint"),
                          "class": answered, "eval_examples": examples},
            "collapse_warning": warning}


def run_finetuning(task, options, strategy=None):
    """Trains and/or evaluates `task` as `options` say.

    Returns:
        `(trainer, report)`: the trainer's model holds the best weights
        (else the newest checkpoint's); the report has `train` (see
        `Trainer.train`), and with `do_eval` `eval_results` (every result in
        `eval_results.txt`) and `best`; when the best classifier answered
        one class for every dev example, `collapsed` and
        `collapse_warning` (`collapse_report`).
    """
    keras.utils.set_random_seed(options.seed)
    trainer = build_trainer(task, options, strategy)
    report = {}
    if options.do_train:
        report["train"] = trainer.train()
    else:
        trainer.restore()
    if options.do_eval:
        trainer.evaluator.evaluate_pending()
        report["eval_results"] = results_lib.read_eval_results(
            os.path.join(options.output_dir, results_lib.EVAL_RESULTS))
        report["best"] = results_lib.best_result(options.output_dir)
        report.update(collapse_report(task, report["best"]))
    path = trainer.evaluator.restore_best_or_latest()
    if path is None and not options.do_train:
        logging.warning("No checkpoint in %s: predicting with the initial "
                        "weights.", options.output_dir)
    return trainer, report
