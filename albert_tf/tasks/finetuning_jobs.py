"""Fine-tuning jobs, one function per benchmark (their options dataclasses
are in `albert_tf.tasks.options`).

Each job reads every input it will need first (so a missing test file fails
before training, not after), builds the task model on the (pretrained)
encoder, runs it through `finetuning_task.run_finetuning` (the one `Trainer`), and
writes the benchmark's submission file with `do_predict`. It returns
`(trainer, report)`; the trained model is `trainer.model`. Exporting a
text-in SavedModel (`export_dir`) is done by the programs
`albert_apps.run_classifier` and `albert_apps.run_squad`, which sit above
`export/`.
"""

import glob
import os

import numpy as np
from absl import logging

from albert_tf.models import task_models
from albert_tf.tasks import finetuning_task
from albert_tf.tasks import glue_reader
from albert_tf.tasks import metrics
from albert_tf.tasks import race_reader
from albert_tf.tasks import squad_reader
from albert_tf.tasks.tokenization import Tokenizer
from albert_tf.training import baselines
from foundation import safe_io


def check_options(options, strategy=None, inputs=(), predictions=()):
    """Checks every option and output before any work: the fields
    (`options.validate`), that the output folders can be written, and that
    no prediction file would overwrite an input.

    Args:
        options: the job's `FinetuneOptions`.
        strategy: the `tf.distribute` strategy (its replica count), or None.
        inputs: the files the job reads besides `--spm_model_file` and
            `--albert_config_file`.
        predictions: the files the job writes in `--output_dir` besides the
            `Trainer`'s.

    Raises:
        ValueError: naming the flag at fault.
        safe_io.OutputError: naming the flag and the file.
    """
    replicas = strategy.num_replicas_in_sync if strategy is not None else 1
    options.validate(replicas)
    safe_io.check_output_path(options.output_dir, "--output_dir")
    export_dir = getattr(options, "export_dir", None)
    if export_dir:
        safe_io.check_output_path(export_dir, "--export_dir")
    read = {os.path.realpath(path)
            for path in (options.spm_model_file, options.albert_config_file,
                         *inputs)
            if path and "://" not in path}
    for path in predictions:
        if "://" not in path and os.path.realpath(path) in read:
            raise safe_io.OutputError(
                f"--output_dir={options.output_dir} would overwrite the "
                f"input {path} with this run's predictions; choose "
                "another --output_dir")


def _encoder(options, dtype):
    """The encoder to fine-tune (`finetuning_task.encoder_from_checkpoint`), under
    the dtype policy `dtype`.

    Raises:
        ValueError: `--max_seq_length` is longer than its position table.
    """
    encoder = finetuning_task.encoder_from_checkpoint(
        options.init_checkpoint, options.albert_config_file, dtype)
    positions = encoder.config.max_position_embeddings
    if options.max_seq_length > positions:
        raise ValueError(f"max_seq_length={options.max_seq_length} is longer "
                         "than the encoder's max_position_embeddings="
                         f"{positions}")
    return encoder


def _check_train_size(count, options, source):
    """Refuses, before any work, a training set smaller than one batch."""
    if count < options.train_batch_size:
        raise ValueError(
            f"{source} holds {count} training examples, fewer than "
            f"--train_batch_size={options.train_batch_size}")


def _read_splits(options, features):
    """`(train arrays, dev arrays, (test examples, arrays))`, each only if
    the run needs it: read before training, so a missing file fails now."""
    return (features("train")[1] if options.do_train else None,
            features("dev")[1] if options.do_eval else None,
            features("test") if options.do_predict else None)


def _input_files(options, data):
    """`{label: [files]}` the run record fingerprints (see
    `TrainingTask.input_files`): with `do_train` the vocabulary and the
    training data, with `do_eval` the evaluation data.

    Args:
        options: the job's `FinetuneOptions`.
        data: `{"train": (label, [files]), "dev": (label, [files])}`.
    """
    files = {}
    if options.do_train:
        files["--spm_model_file"] = [finetuning_task.spm_model_file(options)]
    for split, wanted in (("train", options.do_train),
                          ("dev", options.do_eval)):
        if wanted and split in data:
            label, paths = data[split]
            files[label] = paths
    return files


# === GLUE ===

def run_classifier(options, strategy=None):
    """Fine-tunes on a GLUE task folder (train.tsv, dev.tsv, test.tsv).

    Every option, output and input file is checked before anything is
    written.

    Raises:
        ValueError: a bad option, output or input row (names it).
    """
    task = glue_reader.get_task(options.task_name)
    if options.export_format == "litert" and task.is_regression:
        raise ValueError(f"--export_format=litert writes a classifier; "
                         f"{task.name} is a regression (its SavedModel "
                         f"serves it). Received: --task_name="
                         f"{options.task_name}")
    check_options(
        options, strategy,
        inputs=[os.path.join(options.data_dir, name)
                for name in task.files.values()],
        predictions=[os.path.join(options.output_dir, task.submission_name)])
    tokenizer = Tokenizer(finetuning_task.spm_model_file(options),
                          options.do_lower_case)

    def features(split):
        examples, skipped = glue_reader.read_examples(task, options.data_dir, split)
        if skipped:
            logging.warning("%s: skipped %s", split, dict(skipped))
        arrays, truncated = glue_reader.convert_examples(
            examples, task, tokenizer, options.max_seq_length)
        logging.info("%s: %d examples (%d truncated)", split, len(examples),
                     truncated)
        return examples, arrays

    train, dev, test = _read_splits(options, features)
    if train is not None:
        _check_train_size(len(train["label_ids"]), options, os.path.join(
            options.data_dir, task.files["train"]))

    def evaluate(evaluator):
        logits = evaluator.predict(dev, options.eval_batch_size)["logits"]
        return glue_reader.compute_metrics(task, dev["label_ids"], logits)

    def model_fn(dtype):
        return task_models.AlbertClassifier(
            _encoder(options, dtype), task.num_classes,
            dropout=options.dropout)

    loss_fn = (finetuning_task.regression_loss if task.is_regression
               else finetuning_task.classification_loss)
    chance = None
    if train is not None:
        chance = (finetuning_task.regression_chance_loss if task.is_regression
                  else finetuning_task.label_chance_loss)(train["label_ids"])
    ft_task = finetuning_task.FinetuningTask(
        model_fn, loss_fn, train, evaluate, seed=options.seed,
        task_info=dict(task=task.name, labels=list(task.labels or []),
                       max_seq_length=options.max_seq_length),
        input_files=_input_files(options, {
            split: (f"--data_dir {task.files[split]}",
                    [os.path.join(options.data_dir, task.files[split])])
            for split in ("train", "dev")}),
        chance_loss=chance)
    trainer, report = finetuning_task.run_finetuning(ft_task, options, strategy)
    report["task"] = task.name
    if test is not None:
        logits = trainer.evaluator.predict(
            test[1], options.predict_batch_size)["logits"]
        report["submission"] = glue_reader.write_submission(task, test[0], logits,
                                                            options.output_dir)
    return trainer, report


# === SQuAD ===

def run_squad(options, strategy=None):
    """Fine-tunes on SQuAD v1.1 or v2.0 JSON files.

    `do_eval` scores every checkpoint on `predict_file` (which must hold
    answers) with the official metrics; `do_predict` writes
    `predictions.json` (and `null_odds.json` for v2.0) for `predict_file`.
    Every option, output and input file is checked before anything is
    written.

    Raises:
        ValueError: a bad option, output or question (names it).
    """
    check_options(
        options, strategy,
        inputs=[options.train_file, options.predict_file],
        predictions=[os.path.join(options.output_dir, name)
                     for name in ("predictions.json", "null_odds.json")])
    v2 = options.version_2_with_negative
    tokenizer = Tokenizer(finetuning_task.spm_model_file(options),
                          options.do_lower_case)
    window = dict(max_seq_length=options.max_seq_length,
                  doc_stride=options.doc_stride,
                  max_query_length=options.max_query_length)
    train = None
    if options.do_train:
        examples, skipped = squad_reader.read_examples(options.train_file, True, v2)
        train = squad_reader.convert_examples(examples, tokenizer, is_training=True,
                                              **window)
        logging.info("%d questions -> %d training windows (skipped %s)",
                     len(examples), len(train.windows), dict(skipped))
        _check_train_size(len(train.windows), options,
                          f"--train_file={options.train_file}")
    predict = None
    if options.do_eval or options.do_predict:
        examples, _ = squad_reader.read_examples(options.predict_file, False, v2)
        predict = (examples, squad_reader.convert_examples(
            examples, tokenizer, is_training=False, **window))

    def answer(evaluator):
        examples, features = predict
        out = evaluator.predict(features.arrays, options.predict_batch_size)
        na = 1.0 / (1.0 + np.exp(-out["no_answer_logits"])) if v2 else None
        answers, _, na_probs = squad_reader.postprocess(
            examples, features, out["start_logits"], out["end_logits"], na,
            options.n_best_size, options.max_answer_length)
        if v2:
            answers = squad_reader.apply_threshold(answers, na_probs,
                                                   options.na_prob_threshold)
        return answers, na_probs

    def evaluate(evaluator):
        answers, na_probs = answer(evaluator)
        data, _ = squad_reader.load_dataset(options.predict_file)
        result = metrics.squad_evaluate(data, answers, na_probs,
                                        options.na_prob_threshold)
        if v2:
            # Beside what answering "no answer" to every question gets.
            nothing = metrics.squad_evaluate(data, {
                question["id"]: "" for article in data
                for paragraph in article["paragraphs"]
                for question in paragraph["qas"]}, version="2.0")
            result.update(majority_exact=nothing["exact"],
                          majority_f1=nothing["f1"])
        result["score"] = result.get("best_f1", result["f1"])
        return result

    def model_fn(dtype):
        return task_models.AlbertSpanExtractor(
            _encoder(options, dtype), with_no_answer=v2,
            dropout=options.dropout)

    ft_task = finetuning_task.FinetuningTask(
        model_fn, finetuning_task.span_loss, train.arrays if train else None,
        evaluate, seed=options.seed,
        task_info=dict(task="squad_v2.0" if v2 else "squad_v1.1",
                       max_seq_length=options.max_seq_length),
        input_files=_input_files(options, {
            "train": ("--train_file", [options.train_file]),
            "dev": ("--predict_file", [options.predict_file])}))
    trainer, report = finetuning_task.run_finetuning(ft_task, options, strategy)
    if options.do_predict:
        answers, na_probs = answer(trainer.evaluator)
        report["predictions"] = squad_reader.write_predictions(
            options.output_dir, answers, na_probs)
    return trainer, report


# === RACE ===

def run_race(options, strategy=None):
    """Fine-tunes on a RACE folder (`train/`, `dev/`, `test/`).

    `do_eval` scores every checkpoint on `dev/` (accuracy); `do_predict`
    writes `predictions.json` for `test/` and its accuracy when the files
    hold answers. Every option, output and input file is checked before
    anything is written.

    Raises:
        ValueError: a bad option, output or file (names it).
    """
    check_options(options, strategy, predictions=[
        os.path.join(options.output_dir, "predictions.json")])
    tokenizer = Tokenizer(finetuning_task.spm_model_file(options),
                          options.do_lower_case)

    def features(split):
        examples = race_reader.read_examples(options.data_dir, split,
                                             options.num_choices)
        arrays, _ = race_reader.convert_examples(
            examples, tokenizer, options.max_seq_length, options.max_qa_length,
            options.num_choices)
        return examples, arrays

    train, dev, test = _read_splits(options, features)
    if train is not None:
        _check_train_size(len(train["label_ids"]), options, os.path.join(
            options.data_dir, "train"))

    def evaluate(evaluator):
        logits = evaluator.predict(dev, options.eval_batch_size)["logits"]
        labels, predictions = dev["label_ids"], np.argmax(logits, -1)
        accuracy = metrics.accuracy(labels, predictions)
        return {"accuracy": accuracy,
                "majority_accuracy": baselines.majority(labels)[1],
                **baselines.classifier_answers(labels, predictions),
                "score": accuracy}

    def model_fn(dtype):
        return task_models.AlbertMultipleChoice(
            _encoder(options, dtype), options.num_choices,
            dropout=options.dropout)

    ft_task = finetuning_task.FinetuningTask(
        model_fn, finetuning_task.multiple_choice_loss, train, evaluate,
        seed=options.seed,
        task_info=dict(task="race", num_choices=options.num_choices,
                       max_seq_length=options.max_seq_length),
        input_files=_input_files(options, {
            split: (f"--data_dir {split}/", _race_files(options.data_dir,
                                                        split))
            for split in ("train", "dev")}),
        chance_loss=(None if train is None
                     else finetuning_task.label_chance_loss(train["label_ids"])))
    trainer, report = finetuning_task.run_finetuning(ft_task, options, strategy)
    if test is not None:
        examples, arrays = test
        logits = trainer.evaluator.predict(
            arrays, options.predict_batch_size)["logits"]
        report["predictions"] = race_reader.write_predictions(
            options.output_dir, examples, logits)
        if (arrays["label_ids"] >= 0).all():
            report["test_accuracy"] = metrics.accuracy(
                arrays["label_ids"], np.argmax(logits, axis=-1))
    return trainer, report


def _race_files(data_dir, split):
    """The files of a RACE split, in the order `race_reader.read_examples` reads
    them."""
    paths = []
    for level in race_reader.LEVELS:
        paths += sorted(glob.glob(os.path.join(data_dir, split, level, "*")))
    return [path for path in paths if os.path.isfile(path)]
