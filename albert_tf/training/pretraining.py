"""Pretraining (MLM + SOP) as a task of the `Trainer`.

`PretrainingTask` gives the `Trainer` the model (`AlbertPretrainer`), the
records and the official loss, `mlm_loss + sop_loss`; `run_pretraining`
trains and evaluates as a `PretrainingOptions` says (the library entry of
`python -m albert_tf.run_pretraining`).
"""

import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.training import baselines
from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.training import dynamic_masking
from albert_tf.training import input_pipeline
from albert_tf.training import losses
from albert_tf.training import model_dir
from albert_tf.training import model_files
from albert_tf.training import record_checks
from albert_tf.training import results as results_lib
from albert_tf.training.trainer import build_trainer
from albert_tf.training.trainer_task import TrainingTask
from foundation import redaction

MODEL_INPUTS = INPUT_NAMES + ("masked_lm_positions",)
# Sentence order is two classes, built balanced: chance is one half.
SOP_CHANCE = 0.5


class PretrainingTask(TrainingTask):
    """MLM + SOP on an `AlbertPretrainer` (see the module docstring)."""

    stat_names = losses.STAT_NAMES
    best_metric = "masked_lm_accuracy"

    def __init__(self, options, load_weights=None, find_vocabulary=None):
        """Args:
            options: `PretrainingOptions`.
            load_weights: `(model, path) -> str` loading `--init_checkpoint`
                into the model and returning what it read; default: this
                project's checkpoints (`checkpoint.restore_model`). The
                program passes `pretrained.restore_into`, which also takes
                released names and the other formats.
            find_vocabulary: `path -> vocabulary path or None`: the one
                that comes with `--init_checkpoint`, the last place the
                run's vocabulary is looked for (`vocabulary`); the program
                passes `pretrained.spm_model_path`.
        """
        self.options = options
        self.config = options.resolved_config()
        self.load_weights = load_weights or checkpoint_lib.restore_model
        self.find_vocabulary = find_vocabulary
        self._vocabulary = None

    def vocabulary(self):
        """`(path, where it was found)` of the vocabulary the records were
        built with, or `(None, None)`: `--spm_model_file`, else what the
        builders recorded beside the records (`model_files`), else the one
        that comes with `--init_checkpoint`. Found and checked once.

        Raises:
            ValueError: `--spm_model_file` is not a vocabulary of this
                model (one line naming it).
        """
        if self._vocabulary is not None:
            return self._vocabulary
        options = self.options
        found, origin = None, None
        if options.spm_model_file:
            found, origin = options.spm_model_file, "--spm_model_file"
            if not tf.io.gfile.exists(found) or tf.io.gfile.isdir(found):
                raise ValueError("--spm_model_file names no file (a "
                                 f"SentencePiece model). Received: {found}")
            model_files.check_vocabulary(found, self.config.vocab_size,
                                         origin)
        else:
            found, origin = self._found_vocabulary()
        self._vocabulary = found, origin
        return self._vocabulary

    def _found_vocabulary(self):
        """The vocabulary the records' builders recorded, else the one of
        `--init_checkpoint`; one that is not this model's is logged and
        left out."""
        options = self.options
        records = (options.input_file if options.do_train
                   else self._evaluation_input()[0])
        try:
            files = input_pipeline.expand_file_patterns(records)
        except ValueError:
            files = []
        found, origin = model_files.records_vocabulary(files)
        if found is None and options.init_checkpoint and self.find_vocabulary:
            try:
                found = self.find_vocabulary(options.init_checkpoint)
            except (OSError, ValueError):
                found = None
            origin = "--init_checkpoint" if found else None
        if found is None:
            logging.info(
                "No vocabulary is recorded for the records (no statistics "
                "file or vocab.json beside them names one): best/ and the "
                "run's folder hold the config and checkpoints only; pass "
                "--spm_model_file to make them complete model folders.")
            return None, None
        try:
            model_files.check_vocabulary(found, self.config.vocab_size,
                                         origin)
        except ValueError as e:
            logging.warning("%s; not copied into the run's folders.", e)
            return None, None
        logging.info("Vocabulary %s (from %s): copied as %s into %s and "
                     "best/, complete model folders.", found, origin,
                     model_dir.SPM_NAME, options.output_dir)
        return found, origin

    def model_files(self):
        vocabulary, _ = self.vocabulary()
        return {model_dir.SPM_NAME: vocabulary} if vocabulary else {}

    def build_model(self, dtype):
        return AlbertPretrainer(self.config, dtype=dtype)

    def check_inputs(self):
        """The training records (with `do_train`) and the evaluation
        records (with `do_eval`): globs, shard sets and first records."""
        options = self.options
        inputs = []
        if options.do_train:
            inputs.append((options.input_file, "--input_file"))
        if options.do_eval:
            inputs.append(self._evaluation_input())
        for input_file, flag in inputs:
            files = input_pipeline.expand_file_patterns(input_file, flag)
            record_checks.check_records(
                files, options.max_seq_length, options.max_predictions_per_seq,
                options.dynamic_masking, self.config.vocab_size)
        self.vocabulary()

    def input_files(self):
        """The training records (with `do_train`) and the evaluation
        records (with `do_eval`), by the flag the run record names them
        with (`PretrainingOptions.run_settings`)."""
        options = self.options
        files = {}
        if options.do_train:
            files["--input_file"] = input_pipeline.expand_file_patterns(
                options.input_file, "--input_file")
        if options.do_eval:
            input_file, flag = self._evaluation_input()
            files["--eval_input_file"] = input_pipeline.expand_file_patterns(
                input_file, flag)
        vocabulary, _ = self.vocabulary()
        if vocabulary:
            files["--spm_model_file"] = [vocabulary]
        return files

    def initialize(self, model):
        """Loads `--init_checkpoint`, if given.

        Raises:
            ValueError: it is missing, unreadable or of another config (one
                line naming it).
        """
        path = self.options.init_checkpoint
        if not path:
            return
        try:
            path = self.load_weights(model, path)
        except (FileNotFoundError, ValueError) as e:
            raise ValueError(redaction.redact(
                f"--init_checkpoint={path}: {e}")) from None
        logging.info("Initialized the model from %s", redaction.redact(path))

    def config_files(self):
        return {model_dir.CONFIG_NAME: self.config.to_dict()}

    def dataset(self, input_file, batch_size, is_training, input_context=None,
                skip_batches=0, flag="--input_file"):
        """Batches of pretraining records (see `input_pipeline`)."""
        options = self.options
        masking = None
        if options.dynamic_masking:
            masking = dynamic_masking.DynamicMasking(
                vocab_size=self.config.vocab_size,
                masked_lm_prob=options.masked_lm_prob, seed=options.seed)
        return input_pipeline.pretraining_dataset(
            input_file, batch_size, options.max_seq_length,
            options.max_predictions_per_seq, is_training=is_training,
            seed=options.seed, input_context=input_context,
            skip_batches=skip_batches, dynamic_masking=masking,
            skip_corrupt_records=options.skip_corrupt_records,
            vocab_size=self.config.vocab_size, flag=flag)

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

    def _evaluation_input(self):
        """`(records, the flag naming them)` of the evaluation."""
        options = self.options
        if options.eval_input_file:
            return options.eval_input_file, "--eval_input_file"
        return options.input_file, "--input_file"

    def _evaluation_dataset(self):
        input_file, flag = self._evaluation_input()
        return input_file, self.dataset(
            input_file, self.options.eval_batch_size, False, flag=flag)

    def _too_few_evaluation_records(self, input_file):
        return ValueError(
            f"The evaluation records {input_file!r} hold fewer than one "
            f"batch of eval_batch_size={self.options.eval_batch_size}: lower "
            "--eval_batch_size (no metric is reported for no data).")

    def check_evaluation_records(self):
        """Raises `evaluate`'s error at once, before any training, when the
        evaluation records hold less than one batch (reads one batch)."""
        input_file, dataset = self._evaluation_dataset()
        if next(iter(dataset.take(1)), None) is None:
            raise self._too_few_evaluation_records(input_file)

    def evaluate(self, evaluator):
        """The four official metrics over up to `max_eval_steps` batches of
        the evaluation records.

        Raises:
            ValueError: the records hold less than one evaluation batch.
        """
        input_file, dataset = self._evaluation_dataset()
        stats, batches = evaluator.sum_stats(dataset,
                                             self.options.max_eval_steps)
        if batches == 0:
            raise self._too_few_evaluation_records(input_file)
        metrics = {k: float(v) for k, v in losses.metrics_from_stats(stats).items()}
        metrics["eval_batches"] = batches
        metrics.update(self._baselines(metrics))
        return metrics

    def _evaluated_targets(self):
        """`(weighted count of each masked piece, SOP examples)` over the
        batches an evaluation reads, counted once per run from the records
        (the host reads them; no model)."""
        if getattr(self, "_targets", None) is None:
            _, dataset = self._evaluation_dataset()
            vocab_size = self.config.vocab_size
            counts, examples = np.zeros(vocab_size), 0
            for batch in dataset.take(self.options.max_eval_steps):
                ids = batch["masked_lm_ids"].numpy().reshape(-1)
                weights = batch["masked_lm_weights"].numpy().reshape(-1)
                counts += np.bincount(np.clip(ids, 0, vocab_size - 1),
                                      weights=weights, minlength=vocab_size)
                examples += int(batch["next_sentence_labels"].shape[0])
            self._targets = counts, examples
        return self._targets

    def _baselines(self, metrics):
        """Each accuracy's baseline and whether it is at it: MLM against
        always predicting the most frequent masked piece of the evaluated
        records, SOP against chance (50%), by a 95% interval over the
        predictions evaluated (`baselines`)."""
        counts, examples = self._evaluated_targets()
        predictions = float(counts.sum())
        piece = int(np.argmax(counts))
        share = float(counts[piece] / predictions) if predictions else 0.0
        return {
            "masked_lm_baseline_accuracy": share,
            "masked_lm_baseline_piece": piece,
            "masked_lm_predictions": int(round(predictions)),
            # 1 or 0: every value of `eval_results.txt` is a number.
            "masked_lm_at_chance": int(baselines.at_chance(
                metrics["masked_lm_accuracy"], predictions, share)),
            "sentence_order_chance": SOP_CHANCE,
            "eval_examples": examples,
            "sentence_order_at_chance": int(baselines.at_chance(
                metrics["sentence_order_accuracy"], examples, SOP_CHANCE)),
        }

    def describe_evaluation(self, metrics):
        """The line that puts each accuracy beside its baseline."""
        return "; ".join((
            baselines.describe(
                "masked_lm_accuracy", metrics["masked_lm_accuracy"],
                metrics["masked_lm_baseline_accuracy"],
                metrics["masked_lm_predictions"],
                f"most frequent piece (id {metrics['masked_lm_baseline_piece']})"),
            baselines.describe(
                "sentence_order_accuracy", metrics["sentence_order_accuracy"],
                SOP_CHANCE, metrics["eval_examples"], "chance")))


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
    trainer = build_trainer(task or PretrainingTask(options), options,
                            strategy)
    # One writer for the whole run, training and evaluation.
    with trainer.holding_output():
        return _run(trainer, options)


def _run(trainer, options):
    if options.do_eval:
        trainer.task.check_evaluation_records()
    report = {}
    if options.do_train:
        report["train"] = trainer.train()
    if options.do_eval:
        if not options.do_train:
            trainer.restore()
        # Training evaluated its checkpoints as they were written; this
        # evaluates those of earlier runs (or of a --nodo_train run).
        report["eval"] = trainer.evaluator.evaluate_pending()
        report["eval_results"] = results_lib.read_eval_results(
            os.path.join(options.output_dir, results_lib.EVAL_RESULTS))
    return report
