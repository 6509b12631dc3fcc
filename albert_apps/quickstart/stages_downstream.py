"""The quickstart's last model stages: the downstream tasks (linear probes
of the exported encoder against random initialization, and one fine-tuning
run of it to serve), and the questions asked of the SavedModels.

    finetuned = finetune(exported, corpus, vocabulary, output_dir)
    answers = query(exported.paths["serving"], finetuned, corpus, vocabulary)

Like `albert_apps.quickstart.stages`, each returns the dataclass the report
shows (`stage_results`; `finetune` also writes it as JSON, which is how a
rerun tells it may skip the stage).
"""

import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_apps import intervals
from albert_apps.quickstart import downstream
from albert_apps.quickstart import finetuning
from albert_apps.quickstart import probing
from albert_apps.quickstart import queries
from albert_apps.quickstart import stage_results
from albert_apps.quickstart import stages
from albert_apps.quickstart.defaults import FINETUNE_SEEDS
from albert_apps.quickstart.defaults import FINETUNE_STEPS
from albert_tf.convert import pretrained
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.encoder import AlbertEncoder
from data_prep import vocab
from export import finetuned_exports
from export import keras_layer

FINETUNE_JSON = "finetune.json"  # Under finetune/.
# The fine-tuned exports' folders: the prefix and the task's name.
CLASSIFIER_PREFIX = "albert_"
NUM_CLASSIFIER_EXAMPLES = 4
PROBE_METHOD = (
    "a linear probe (logistic regression) of the frozen encoder's features "
    "(pooled output and mean token output) fitted on the train examples, "
    "accuracy on dev")


def _built_encoder(config, seed=None):
    """An `AlbertEncoder` with its weights made (seeded initialization)."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    encoder = AlbertEncoder(config)
    encoder({name: tf.zeros([1, 2], tf.int32) for name in INPUT_NAMES})
    return encoder


def pretrained_weights(exported, output_dir, probe):
    """The exported encoder's weights, for fine-tuning in memory.

    The best checkpoint (`pretrain/best/`, which stage 5 exported) is
    loaded (`albert_tf.load_pretrained`); the exported encoder SavedModel,
    loaded as a Keras layer (`export.keras_layer.load_exported_encoder`),
    must give the same `pooled_output` on `probe` (encoder inputs), or the
    exported encoder and the checkpoint differ.

    Returns:
        (weights, the largest difference of the two outputs).

    Raises:
        ValueError: the two differ (the checkpoint moved on since the
            export).
    """
    encoder = pretrained.load_pretrained(
        os.path.join(output_dir, "pretrain", "best")).encoder
    layer = keras_layer.load_exported_encoder(exported.paths["encoder"],
                                              trainable=False)
    ours = encoder(probe)["pooled_output"]
    theirs = layer(probe)["pooled_output"]
    difference = float(np.max(np.abs(np.asarray(ours) - np.asarray(theirs))))
    if difference > 1e-4:
        raise ValueError(
            "The exported encoder %s and pretrain/best differ (largest "
            "difference of pooled_output %.3g): export again" % (
                exported.paths["encoder"], difference))
    return encoder.get_weights(), difference


def task_result(name, runs, counts):
    """One task's entry of the report (a `stage_results.TaskResult`): mean
    probe accuracies with their 95% intervals (dev set and seeds), the
    margin of pretraining, its interval and verdict (`albert_apps.intervals`).

    Args:
        name: the task.
        runs: the probe runs (dicts with `dev_accuracy`) by initialization,
            `pretrained` and `random_init`.
        counts: the task's `downstream.TaskFiles`.
    """
    accuracies = {init: [r["dev_accuracy"] for r in results]
                  for init, results in runs.items()}
    dev = counts.dev
    by_init = {}
    for init, values in accuracies.items():
        mean, interval = intervals.mean_interval(values, dev)
        by_init[init] = round(mean, 4)
        by_init[init + "_ci95"] = [round(x, 4) for x in interval]
        by_init[init + "_seed_range"] = [min(values), max(values)]
    margin, interval = intervals.margin_interval(
        accuracies["pretrained"], accuracies["random_init"], dev)
    return stage_results.TaskResult(
        name=name, measures=downstream.TASKS[name][1],
        labels=list(downstream.TASKS[name][0]),
        train_examples=counts.train, dev_examples=dev, short=counts.short,
        runs=runs, margin=round(margin, 4),
        margin_ci95=[round(x, 4) for x in interval],
        verdict=intervals.margin_verdict(interval), **by_init)


def tasks_to_skip(sentence_order_verdict):
    """The downstream tasks the corpus does not support, with the reason:
    `sentence_order` where held-out SOP stayed at chance (pretraining
    learned no sentence order from this text, so a probe of order would
    show nothing of it)."""
    if sentence_order_verdict == intervals.ABOVE_CHANCE:
        return {}
    return {"sentence_order": "held-out SOP is %s: pretraining learned no "
                              "sentence order from this text, so the task "
                              "would show nothing" % sentence_order_verdict}


def _probe_run(encoder, train_x, train_y, dev_x, dev_y, num_classes):
    """One linear probe of `encoder`'s frozen features."""
    start = time.time()
    both = probing.features(encoder, {
        name: np.concatenate([train_x[name], dev_x[name]])
        for name in train_x})
    train_f, dev_f = both[:len(train_y)], both[len(train_y):]
    probe = probing.fit(train_f, train_y, num_classes)
    return {"dev_accuracy": probing.accuracy(probe, dev_f, dev_y),
            "train_accuracy": probing.accuracy(probe, train_f, train_y),
            "seconds": round(time.time() - start, 1)}


def _encoded_tasks(chosen, model_file, max_seq_length):
    """Each chosen task's sequence length and its encoded `(train, dev)`
    inputs, in the order of `chosen`."""
    lengths = [downstream.sequence_length(c.name, max_seq_length)
               for c in chosen]
    inputs = [downstream.encode_task(model_file,
                                     downstream.load_task(c.task_dir),
                                     length)
              for c, length in zip(chosen, lengths)]
    return lengths, inputs


def _probed_encoders(exported, output_dir, config, seeds, probe_inputs):
    """The encoders to probe, by initialization and seed: the pretrained
    one (checked against its export, `pretrained_weights`) and one random
    initialization per seed."""
    pretrained = _built_encoder(config)
    pretrained.set_weights(
        pretrained_weights(exported, output_dir, probe_inputs)[0])
    return {"pretrained": {None: pretrained},
            "random_init": {seed: _built_encoder(config, seed)
                            for seed in seeds}}


def _probe_task(encoders, task, train_x, dev_x):
    """The linear probe runs of every encoder on `task`, by
    initialization."""
    runs = {"pretrained": [], "random_init": []}
    for init, by_seed in encoders.items():
        for seed, encoder in by_seed.items():
            result = _probe_run(encoder, train_x, task.train_labels,
                                dev_x, task.dev_labels, len(task.labels))
            runs[init].append(dict(result, seed=seed))
            logging.info("Probed the %s encoder%s on %s: dev accuracy "
                         "%.4f (%.1f s)", init,
                         "" if seed is None else " (seed %d)" % seed,
                         task.name, result["dev_accuracy"],
                         result["seconds"])
    return runs


def _finetune_and_export(config, pretrained, task, train_x, dev_x, length,
                         num_train_steps, vocabulary, output_dir):
    """Fine-tunes a copy of the `pretrained` encoder on `task` and exports
    it as a text-in classifier.

    Returns:
        (the fine-tuning run, the exported SavedModel folder).
    """
    finetuner = finetuning.Finetuner(
        _built_encoder(config), len(task.labels), num_train_steps)
    tuned = finetuner.run(train_x, task.train_labels, dev_x,
                          task.dev_labels, seed=0,
                          encoder_weights=pretrained.get_weights())
    logging.info("Fine-tuned the pretrained encoder on %s: dev "
                 "accuracy %.4f, the majority class alone %.4f (%.1f s)",
                 task.name, tuned["dev_accuracy"], tuned["majority_accuracy"],
                 tuned["seconds"])
    if tuned["collapsed"]:
        tuned["collapse_warning"] = collapse_warning(task, tuned)
        logging.warning("%s", tuned["collapse_warning"])
    classifier = finetuned_exports.export_classifier(
        finetuner.model, vocabulary.model_file,
        os.path.join(output_dir, "export"),
        labels=list(task.labels), max_seq_length=length,
        model_name=CLASSIFIER_PREFIX + task.name)
    return tuned, classifier


def collapse_warning(task, tuned):
    """The line that says a fine-tuned classifier collapsed: it answered
    one class for every dev example."""
    answered = tuned["predicted_class"]
    label = (task.labels[answered] if 0 <= answered < len(task.labels)
             else answered)
    return ("The classifier fine-tuned on %s collapsed: it answers %r for "
            "all %d dev examples (accuracy %.1f%%, the majority class alone "
            "%.1f%%): it has learned nothing from its input; a longer "
            "pretraining (--num_train_steps, --train_seconds) usually "
            "helps." % (
                task.name, label, tuned["eval_examples"],
                100 * tuned["dev_accuracy"],
                100 * tuned["majority_accuracy"]))


def _finetune_result(results, chosen, skipped, exported, seeds,
                     num_train_steps):
    """The stage's result (also `finetune.json`): the task entries, the
    method, the encoders compared and the settings."""
    return stage_results.DownstreamResults(
        tasks=results,
        method=PROBE_METHOD,
        encoders={"pretrained": exported.paths["encoder"],
                  "random_init": "seeded initialization (one per seed)"},
        encoder_version=exported.version,
        settings={"seeds": list(seeds), "num_train_steps": num_train_steps,
                  "tasks": [t.name for t in chosen]},
        skipped=skipped,
    )


def finetune(exported, corpus, vocabulary, output_dir, max_seq_length=64,
             seeds=FINETUNE_SEEDS, num_train_steps=FINETUNE_STEPS,
             skipped=None):
    """Stage 6 of the quickstart: what the pretrained encoder learned,
    measured on each downstream task by a linear probe of its frozen
    features (`albert_apps.quickstart.probing`) against the same model
    from random initialization (one per seed); then the user's path: the
    exported encoder fine-tuned on the first task, exported as a text-in
    classifier SavedModel (`albert_<task>`) that stage 7 serves.

    The weights come from the checkpoint the encoder SavedModel was exported
    from, checked against that SavedModel loaded as a Keras layer
    (`pretrained_weights`); fine-tuning runs on an in-memory copy compiled
    with XLA (`finetuning.Finetuner`), which trains several times faster
    than the SavedModel layer.

    Args:
        exported: what `stages.export_model` returned.
        corpus: what `stages.write_corpus` returned (its `tasks`).
        vocabulary: what `stages.build_vocabulary` returned.
        output_dir: the quickstart's folder (`finetune/`, `export/`).
        max_seq_length: T of the packed pairs.
        seeds: the random initializations probed as the control.
        num_train_steps: steps of the fine-tuning run.
        skipped: tasks of `corpus` not to run, each with the reason
            (`tasks_to_skip`).

    Returns:
        A `stage_results.DownstreamResults`: one `TaskResult` per task (the
        first task's with its `finetuned` run and `classifier`, the
        exported SavedModel folder), the `encoders` used and the settings.
    """
    finetune_dir = os.path.join(output_dir, "finetune")
    os.makedirs(finetune_dir, exist_ok=True)
    config = stages.model_config(vocabulary.pieces, max_seq_length)
    skipped = dict(skipped or {})
    chosen = [c for c in corpus.tasks if c.name not in skipped]
    lengths, inputs = _encoded_tasks(chosen, vocabulary.model_file,
                                     max_seq_length)
    probe_inputs = {name: x[:8] for name, x in inputs[0][1].items()}
    encoders = _probed_encoders(exported, output_dir, config, seeds,
                                probe_inputs)
    results = []
    for counts, length, (train_x, dev_x) in zip(chosen, lengths, inputs):
        task = downstream.load_task(counts.task_dir)
        entry = task_result(task.name,
                            _probe_task(encoders, task, train_x, dev_x),
                            counts)
        entry.max_seq_length = length
        if not results:
            # The user's path, once: fine-tune the pretrained encoder (a
            # copy) on the first task and export it to serve.
            entry.finetuned, entry.classifier = _finetune_and_export(
                config, encoders["pretrained"][None], task, train_x, dev_x,
                length, num_train_steps, vocabulary, output_dir)
        results.append(entry)
    finetuned = _finetune_result(results, chosen, skipped, exported, seeds,
                                 num_train_steps)
    stages.write_json(os.path.join(finetune_dir, FINETUNE_JSON), finetuned)
    return finetuned


def query(serving_path, finetuned, corpus, vocabulary,
          num_examples=NUM_CLASSIFIER_EXAMPLES):
    """Stage 7 of the quickstart: questions through the exported
    SavedModels: fill-mask on held-out sentences
    (`queries.fill_mask_queries`), and each fine-tuned classifier on its
    task's dev pairs (its accuracy through the SavedModel, and the first
    `num_examples` answers).

    Args:
        serving_path: the text-in pretrained SavedModel (`fill_mask`).
        finetuned: what `finetune` returned.
        corpus, vocabulary: what stages 1 and 2 returned.
        num_examples: answers shown per classifier.

    Returns:
        A `stage_results.Answers`: `fill_mask` (`queries.fill_mask`'s),
        `model` and `classifiers` (a `stage_results.ServedClassifier` per
        fine-tuned task).
    """
    sp_model = vocab.load_model(vocabulary.model_file)
    model = tf.saved_model.load(serving_path)
    fill = stage_results.FillMaskScores(**queries.fill_mask(
        model, queries.fill_mask_queries(corpus.eval_file, sp_model),
        queries.frequent_content_words(corpus.train_file, sp_model)))
    classifiers = []
    task_dirs = {c.name: c.task_dir for c in corpus.tasks}
    for entry in finetuned.tasks:
        if not entry.classifier:
            continue
        task = downstream.load_task(task_dirs[entry.name])
        classified = queries.classify(tf.saved_model.load(entry.classifier),
                                      task.dev_pairs, task.dev_labels)
        examples = [dict(first=first, second=second,
                         true_label=task.labels[label], **answer)
                    for (first, second), label, answer in zip(
                        task.dev_pairs[:num_examples], task.dev_labels,
                        classified["predictions"])]
        classifiers.append(stage_results.ServedClassifier(
            task=task.name, model=entry.classifier,
            accuracy=classified["accuracy"], dev_pairs=len(task.dev_pairs),
            examples=examples))
    return stage_results.Answers(fill_mask=fill, model=serving_path,
                                 classifiers=classifiers)
