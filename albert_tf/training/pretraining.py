"""Pretraining (MLM + SOP) as a task of the `Trainer`.

`PretrainingOptions` holds the flags of `python -m albert_tf.run_pretraining`
(the official names and defaults; `--dtype`, `--gradient_accumulation_steps`,
`--preset`, `--dynamic_masking` and a few more are this project's).
`PretrainingTask` tells the `Trainer` the model (`AlbertPretrainer`), the
data (`input_pipeline.pretraining_dataset`) and the loss: the official
`mlm_loss + sop_loss`, written as the additive statistics of
`albert_tf.training.losses` so that replicas and micro-batches add up to the
global batch exactly. `run_pretraining` is the program's library entry.
"""

import dataclasses
import os

from absl import logging
import keras
import tensorflow as tf

from data_prep.options import option

from albert_tf.config import AlbertConfig, PRESETS
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.training import input_pipeline
from albert_tf.training import losses
from albert_tf.training import results as results_lib
from albert_tf.training.options import TrainingOptions
from albert_tf.training.task import TrainingTask
from albert_tf.training.trainer import Trainer, TrainingDivergedError

# Names other code reads these by (the one results format).
BEST_DIR = results_lib.BEST_DIR
EVAL_RESULTS = results_lib.EVAL_RESULTS
read_eval_results = results_lib.read_eval_results
MODEL_INPUTS = INPUT_NAMES + ("masked_lm_positions",)

__all__ = ["BEST_DIR", "EVAL_RESULTS", "PretrainingOptions", "PretrainingTask",
           "TrainingDivergedError", "read_eval_results", "run_pretraining"]


@dataclasses.dataclass
class PretrainingOptions(TrainingOptions):
    """Everything a pretraining run needs; the fields are the CLI's flags.

    `config` (an `AlbertConfig`) may be given directly by library callers;
    otherwise `albert_config_file` or `preset` names it.
    """

    input_file: str = option(
        None, "TFRecord files: comma-separated paths or globs (gs:// too).",
        required=True)
    config: AlbertConfig = None
    albert_config_file: str = option(
        None, "An albert_config.json (official or this project's).")
    preset: str = option(None, "A named configuration instead of "
                         "--albert_config_file.", choices=tuple(sorted(PRESETS)))
    eval_input_file: str = option(
        None, "Evaluation records (default: --input_file).")
    train_batch_size: int = option(4096, "Global batch per optimizer step.")
    eval_batch_size: int = option(64, "Global evaluation batch.")
    max_seq_length: int = option(512, "L of the records.")
    max_predictions_per_seq: int = option(20, "P of the records.")
    num_train_steps: int = option(125000, "Optimizer steps.")
    num_warmup_steps: int = option(3125, "Linear warmup steps.")
    learning_rate: float = option(0.00176, "Peak learning rate.")
    optimizer: str = option("lamb", "Optimizer (official LAMB or AdamW).",
                            choices=("lamb", "adamw"))
    save_checkpoints_steps: int = option(5000, "Steps between checkpoints.")
    iterations_per_loop: int = option(
        1000, "Steps per compiled call (and per progress line).")
    do_train: bool = option(True, "Train.")
    max_eval_steps: int = option(100, "Evaluation batches per checkpoint.")
    dynamic_masking: bool = option(
        False, "Records carry no masks: mask afresh each epoch.")
    masked_lm_prob: float = option(0.15, "Masking rate for --dynamic_masking.")
    skip_corrupt_records: bool = option(
        False, "On a corrupted or truncated record, skip (and log) the rest "
        "of its file instead of stopping.")

    def resolved_config(self):
        """The `AlbertConfig`: `config`, else `albert_config_file`, else
        `preset` (exactly one must be given)."""
        given = [name for name in ("config", "albert_config_file", "preset")
                 if getattr(self, name)]
        if len(given) != 1:
            raise ValueError("Give exactly one of --albert_config_file and "
                             f"--preset. Received: {given or 'neither'}")
        if self.config is not None:
            return self.config
        if self.preset:
            return AlbertConfig.from_preset(self.preset)
        return AlbertConfig.from_json_file(self.albert_config_file)

    def validate(self, num_replicas=1):
        super().validate(num_replicas)
        for name in ("max_seq_length", "max_predictions_per_seq",
                     "max_eval_steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive. "
                                 f"Received: {name}={getattr(self, name)}")
        if not self.do_train and not self.do_eval:
            raise ValueError("At least one of do_train and do_eval must be "
                             "True. Received: neither")
        config = self.resolved_config()
        if self.max_seq_length > config.max_position_embeddings:
            raise ValueError(
                f"max_seq_length={self.max_seq_length} is longer than the "
                f"model's max_position_embeddings="
                f"{config.max_position_embeddings}")


class PretrainingTask(TrainingTask):
    """MLM + SOP on an `AlbertPretrainer` (see the module docstring)."""

    stat_names = losses.STAT_NAMES
    best_metric = "masked_lm_accuracy"

    def __init__(self, options):
        self.options = options
        self.config = options.resolved_config()

    def build_model(self, dtype):
        return AlbertPretrainer(self.config, dtype=dtype)

    def initialize(self, model):
        if self.options.init_checkpoint:
            path = checkpoint_lib.restore_model(model,
                                                self.options.init_checkpoint)
            logging.info("Initialized the model from %s", path)

    def config_files(self):
        return {checkpoint_lib.CONFIG_NAME: self.config.to_dict()}

    def dataset(self, input_file, batch_size, is_training, input_context=None,
                skip_batches=0):
        """Batches of pretraining records (see `input_pipeline`)."""
        options = self.options
        masking = None
        if options.dynamic_masking:
            masking = input_pipeline.DynamicMasking(
                vocab_size=self.config.vocab_size,
                masked_lm_prob=options.masked_lm_prob, seed=options.seed)
        return input_pipeline.pretraining_dataset(
            input_file, batch_size, options.max_seq_length,
            options.max_predictions_per_seq, is_training=is_training,
            seed=options.seed, input_context=input_context,
            skip_batches=skip_batches, dynamic_masking=masking,
            skip_corrupt_records=options.skip_corrupt_records,
            vocab_size=self.config.vocab_size)

    def train_dataset(self, input_context, global_batch_size, skip_batches):
        return self.dataset(self.options.input_file, global_batch_size, True,
                            input_context, skip_batches)

    def denominators(self, features):
        weights = features["masked_lm_weights"]
        return tf.stack([tf.reduce_sum(weights), float(weights.shape[0])])

    def stats(self, model, features, training):
        mlm_logits, sop_logits = model.pretraining_logits(
            {name: features[name] for name in MODEL_INPUTS}, training=training)
        return losses.pretraining_stats(
            mlm_logits, features["masked_lm_ids"], features["masked_lm_weights"],
            sop_logits, features["next_sentence_labels"])

    def loss(self, stats, denominators):
        return losses.replica_loss(stats, denominators[0], denominators[1])

    def metrics(self, stats):
        return losses.metrics_from_stats(stats)

    def evaluate(self, trainer):
        """The four official metrics over up to `max_eval_steps` batches of
        the evaluation records.

        Raises:
            ValueError: the records hold less than one evaluation batch.
        """
        options = self.options
        input_file = options.eval_input_file or options.input_file
        dataset = self.dataset(input_file, options.eval_batch_size, False)
        stats, batches = trainer.sum_stats(dataset, options.max_eval_steps)
        if batches == 0:
            raise ValueError(
                f"The evaluation records {input_file!r} hold fewer than one "
                f"batch of eval_batch_size={options.eval_batch_size}: lower "
                "--eval_batch_size (no metric is reported for no data).")
        metrics = {k: float(v) for k, v in losses.metrics_from_stats(stats).items()}
        metrics["eval_batches"] = batches
        return metrics


def run_pretraining(options, strategy=None, task=None):
    """Trains and/or evaluates as `options` says (the CLI's library entry).

    Args:
        options: `PretrainingOptions`.
        strategy: a strategy; default: the current (default) strategy.
        task: the `PretrainingTask` to run (a subclass trains another model
            on the same data, loss and loop); default:
            `PretrainingTask(options)`.

    Returns:
        A dict: `train` (see `Trainer.train`), and with `do_eval` `eval` (the
        results of the checkpoints evaluated in this run) and
        `eval_results` (everything in `eval_results.txt`).

    Raises:
        ValueError: inconsistent options or inputs.
        TrainingDivergedError: the loss became NaN or infinite.
    """
    keras.utils.set_random_seed(options.seed)
    trainer = Trainer(task or PretrainingTask(options), options, strategy)
    report = {}
    if options.do_train:
        report["train"] = trainer.train()
    if options.do_eval:
        if not options.do_train:
            trainer.restore()
        # Training evaluated its checkpoints as they were written; this
        # evaluates those of earlier runs (or of a --nodo_train run).
        report["eval"] = trainer.evaluate_pending()
        report["eval_results"] = read_eval_results(
            os.path.join(options.output_dir, EVAL_RESULTS))
    return report
