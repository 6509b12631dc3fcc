"""Fine-tuning jobs, one function per benchmark; the CLIs call these.

Each job: build the task model on the (pretrained) encoder, train with
`FineTuner` when asked, evaluate every saved checkpoint on the dev data and
keep the best, write test predictions in the benchmark's submission format,
and export a text-in SavedModel when `export_dir` is given. Each returns a
report dict (training losses, eval results, best checkpoint, written paths).
"""

import os

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.tasks import finetune, glue, metrics, race, squad
from albert_tf.models import task_models as models
from albert_tf.tasks.tokenization import Tokenizer


def _spm_path(spm_model_file, init_checkpoint):
    if spm_model_file:
        return spm_model_file
    if init_checkpoint:
        folder = (init_checkpoint if tf.io.gfile.isdir(init_checkpoint)
                  else os.path.dirname(init_checkpoint))
        candidate = os.path.join(folder, checkpoint_lib.SPM_NAME)
        if tf.io.gfile.exists(candidate):
            return candidate
    raise ValueError("A SentencePiece model is needed: pass spm_model_file or "
                     f"an init_checkpoint directory holding "
                     f"{checkpoint_lib.SPM_NAME}. Received: neither")


def _log_skips(what, skipped):
    if skipped:
        logging.warning("%s: skipped %s", what, dict(skipped))


def _tuner(model_fn, loss_fn, output_dir, options):
    return finetune.FineTuner(
        model_fn, loss_fn, output_dir,
        num_train_steps=options["train_step"],
        num_warmup_steps=options["warmup_step"],
        learning_rate=options["learning_rate"],
        optimizer=options["optimizer"],
        save_checkpoints_steps=options["save_checkpoints_steps"],
        iterations_per_loop=options["iterations_per_loop"],
        strategy=options["strategy"], jit_compile=options["jit_compile"],
        seed=options["seed"])


_DEFAULTS = dict(
    init_checkpoint=None, albert_config_file=None, spm_model_file=None,
    do_lower_case=True, max_seq_length=128, train_batch_size=32,
    eval_batch_size=8, predict_batch_size=8, learning_rate=1e-5,
    train_step=1000, warmup_step=200, save_checkpoints_steps=1000,
    iterations_per_loop=100, optimizer="adamw", dropout=0.1, do_train=False,
    do_eval=False, do_predict=False, export_dir=None, strategy=None,
    dtype="float32", jit_compile=False, seed=12345)


def _options(kwargs, extra=None):
    options = dict(_DEFAULTS, **(extra or {}))
    unknown = set(kwargs) - set(options)
    if unknown:
        raise TypeError(f"Unknown options. Received: {sorted(unknown)}")
    options.update(kwargs)
    return options


def _encoder(options):
    return finetune.load_encoder(options["init_checkpoint"],
                                 options["albert_config_file"],
                                 options["dtype"])


def _evaluate_or_latest(tuner, evaluate_fn, do_eval, report):
    if do_eval:
        results, best = finetune.evaluate_checkpoints(tuner, evaluate_fn)
        report["eval_results"], report["best"] = results, best
    elif tuner.manager.latest_checkpoint:
        tuner.restore_weights(tuner.manager.latest_checkpoint)


def run_classifier(task_name, data_dir, output_dir, **kwargs):
    """Fine-tunes on a GLUE task folder.

    Args:
        task_name: a GLUE task (`glue.TASKS`, official aliases accepted).
        data_dir: the task folder of TSV files.
        output_dir: checkpoints, `eval_results.txt`, `best/`, the submission.
        **kwargs: options of `_DEFAULTS` (the CLI flags).

    Returns:
        A report dict.
    """
    options = _options(kwargs)
    task = glue.get_task(task_name)
    spm_path = _spm_path(options["spm_model_file"], options["init_checkpoint"])
    tokenizer = Tokenizer(spm_path, options["do_lower_case"])
    seq = options["max_seq_length"]
    loss_fn = (finetune.regression_loss if task.is_regression
               else finetune.classification_loss)
    tuner = _tuner(lambda: models.AlbertClassifier(
        _encoder(options), task.num_classes, dropout=options["dropout"]),
        loss_fn, output_dir, options)
    report = {"task": task.name}
    if options["do_train"]:
        examples, skipped = glue.read_examples(task, data_dir, "train")
        _log_skips("train", skipped)
        features, truncated = glue.convert_examples(examples, task, tokenizer, seq)
        logging.info("%d training examples (%d truncated)", len(examples),
                     truncated)
        report["train_history"] = tuner.train(features,
                                              options["train_batch_size"])
    if options["do_eval"]:
        examples, skipped = glue.read_examples(task, data_dir, "dev")
        _log_skips("dev", skipped)
        dev, _ = glue.convert_examples(examples, task, tokenizer, seq)

        def evaluate(model):
            del model
            outputs = tuner.predict(dev, options["eval_batch_size"])
            return glue.compute_metrics(task, dev["label_ids"],
                                        outputs["logits"])

        _evaluate_or_latest(tuner, evaluate, True, report)
    else:
        _evaluate_or_latest(tuner, None, False, report)
    if options["do_predict"]:
        examples, _ = glue.read_examples(task, data_dir, "test")
        test, _ = glue.convert_examples(examples, task, tokenizer, seq)
        outputs = tuner.predict(test, options["predict_batch_size"])
        report["submission"] = glue.write_submission(
            task, examples, outputs["logits"], output_dir)
    if options["export_dir"]:
        from export import tasks as export_lib

        report["export"] = export_lib.export_classifier(
            tuner.model, spm_path, options["export_dir"],
            labels=task.labels, max_seq_length=seq,
            do_lower_case=options["do_lower_case"],
            model_name=f"albert_{task.name.replace('-', '_')}")
    return report


_SQUAD_DEFAULTS = dict(train_file=None, predict_file=None,
                       version_2_with_negative=False, doc_stride=128,
                       max_query_length=64, n_best_size=20,
                       max_answer_length=30, na_prob_threshold=0.5)


def run_squad(output_dir, **kwargs):
    """Fine-tunes on SQuAD v1.1 or v2.0 JSON files.

    `do_eval` scores every checkpoint on `predict_file` (which must hold
    answers) with the official metrics; `do_predict` writes
    `predictions.json` (and `null_odds.json` for v2.0) for `predict_file`.

    Returns:
        A report dict.
    """
    options = _options(kwargs, dict(_SQUAD_DEFAULTS, max_seq_length=384,
                                    learning_rate=5e-5))
    v2 = options["version_2_with_negative"]
    spm_path = _spm_path(options["spm_model_file"], options["init_checkpoint"])
    tokenizer = Tokenizer(spm_path, options["do_lower_case"])
    window = dict(max_seq_length=options["max_seq_length"],
                  doc_stride=options["doc_stride"],
                  max_query_length=options["max_query_length"])
    tuner = _tuner(lambda: models.AlbertSpanExtractor(
        _encoder(options), with_no_answer=v2, dropout=options["dropout"]),
        finetune.span_loss, output_dir, options)
    report = {}
    if options["do_train"]:
        examples, skipped = squad.read_examples(options["train_file"], True, v2)
        report["train_skipped"] = dict(skipped)
        features = squad.convert_examples(examples, tokenizer, is_training=True,
                                          **window)
        logging.info("%d questions -> %d training windows", len(examples),
                     len(features.windows))
        report["train_history"] = tuner.train(features.arrays,
                                              options["train_batch_size"])

    def answer(model=None):
        del model
        examples, _ = squad.read_examples(options["predict_file"], False, v2)
        features = squad.convert_examples(examples, tokenizer,
                                          is_training=False, **window)
        out = tuner.predict(features.arrays, options["predict_batch_size"])
        na = (1.0 / (1.0 + np.exp(-out["no_answer_logits"])) if v2 else None)
        answers, _, na_probs = squad.postprocess(
            examples, features, out["start_logits"], out["end_logits"], na,
            options["n_best_size"], options["max_answer_length"])
        if v2:
            answers = squad.apply_threshold(answers, na_probs,
                                            options["na_prob_threshold"])
        return answers, na_probs

    def evaluate(model):
        del model
        answers, na_probs = answer()
        data, _ = squad.load_dataset(options["predict_file"])
        result = metrics.squad_evaluate(data, answers, na_probs,
                                        options["na_prob_threshold"])
        result["score"] = result.get("best_f1", result["f1"])
        return result

    _evaluate_or_latest(tuner, evaluate, options["do_eval"], report)
    if options["do_predict"]:
        answers, na_probs = answer()
        report["predictions"] = squad.write_predictions(output_dir, answers,
                                                        na_probs)
    if options["export_dir"]:
        from export import tasks as export_lib

        report["export"] = export_lib.export_span_extractor(
            tuner.model, spm_path, options["export_dir"],
            max_seq_length=options["max_seq_length"],
            max_query_length=options["max_query_length"],
            max_answer_length=options["max_answer_length"],
            do_lower_case=options["do_lower_case"],
            model_name="albert_squad_v2" if v2 else "albert_squad")
    return report


def run_race(data_dir, output_dir, max_qa_length=128, num_choices=4,
             **kwargs):
    """Fine-tunes on a RACE folder (`train/`, `dev/`, `test/`).

    `do_eval` scores every checkpoint on `dev/` (accuracy); `do_predict`
    writes `predictions.json` for `test/` and its accuracy when the files
    hold answers.

    Returns:
        A report dict.
    """
    options = _options(kwargs, dict(max_seq_length=512))
    spm_path = _spm_path(options["spm_model_file"], options["init_checkpoint"])
    tokenizer = Tokenizer(spm_path, options["do_lower_case"])

    def features_of(split):
        examples = race.read_examples(data_dir, split, num_choices)
        features, _ = race.convert_examples(
            examples, tokenizer, options["max_seq_length"], max_qa_length,
            num_choices)
        return examples, features

    tuner = _tuner(lambda: models.AlbertMultipleChoice(
        _encoder(options), num_choices, dropout=options["dropout"]),
        finetune.multiple_choice_loss, output_dir, options)
    report = {}
    if options["do_train"]:
        _, features = features_of("train")
        report["train_history"] = tuner.train(features,
                                              options["train_batch_size"])
    if options["do_eval"]:
        _, dev = features_of("dev")

        def evaluate(model):
            del model
            logits = tuner.predict(dev, options["eval_batch_size"])["logits"]
            accuracy = metrics.accuracy(dev["label_ids"],
                                        np.argmax(logits, axis=-1))
            return {"accuracy": accuracy, "score": accuracy}

        _evaluate_or_latest(tuner, evaluate, True, report)
    else:
        _evaluate_or_latest(tuner, None, False, report)
    if options["do_predict"]:
        examples, test = features_of("test")
        logits = tuner.predict(test, options["predict_batch_size"])["logits"]
        report["predictions"] = race.write_predictions(output_dir, examples,
                                                       logits)
        if (test["label_ids"] >= 0).all():
            report["test_accuracy"] = metrics.accuracy(
                test["label_ids"], np.argmax(logits, axis=-1))
    return report
