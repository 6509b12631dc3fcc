"""The quickstart's last model stages: fine-tuning through the exported
encoder (against random initialization), and the questions asked of the
SavedModels.

    finetuned = finetune(exported, corpus, vocabulary, output_dir)
    answers = query(exported["paths"]["serving"], finetuned["classifier"],
                    corpus, vocabulary)

Like `albert_apps.quickstart.stages`, each returns the dict the report shows
(`finetune` also writes it as JSON, which is how a rerun tells it may skip
the stage).
"""

import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from data_prep import vocab
from export import saved_models
from export import tasks

from albert_tf.models.encoder import AlbertEncoder
from albert_tf.tasks import intervals
from albert_apps.quickstart import downstream
from albert_apps.quickstart import queries
from albert_apps.quickstart import stages
from albert_apps.quickstart.budget import FINETUNE_SEEDS
from albert_apps.quickstart.budget import FINETUNE_STEPS

FINETUNE_JSON = "finetune.json"  # Under finetune/.
# The fine-tuned exports' folders: the prefix and the task's name.
CLASSIFIER_PREFIX = "albert_"
NUM_CLASSIFIER_EXAMPLES = 4


def _export_random_encoder(config, path, seed=0):
    """An untrained encoder (seeded initialization), exported by the same
    builder as the pretrained encoder SavedModel."""
    keras.utils.set_random_seed(seed)
    encoder = AlbertEncoder(config)
    root, signatures = saved_models.build_encoder_model(encoder)
    tmp = path + ".tmp"
    if tf.io.gfile.exists(tmp):
        tf.io.gfile.rmtree(tmp)
    tf.saved_model.save(root, tmp, signatures=signatures)
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
    tf.io.gfile.rename(tmp, path)
    return path


def task_result(name, runs, counts):
    """One task's entry of the report: mean accuracies with their 95%
    intervals (dev set and seeds), the margin of pretraining, its interval
    and verdict (`albert_tf.tasks.intervals`)."""
    accuracies = {init: [r["dev_accuracy"] for r in results]
                  for init, results in runs.items()}
    dev = counts["dev"]
    entry = {"name": name, "measures": downstream.TASKS[name][1],
             "labels": list(downstream.TASKS[name][0]),
             "train_examples": counts["train"], "dev_examples": dev,
             "short": counts.get("short"), "runs": runs}
    for init, values in accuracies.items():
        mean, interval = intervals.mean_interval(values, dev)
        entry[init] = round(mean, 4)
        entry[init + "_ci95"] = [round(x, 4) for x in interval]
        entry[init + "_seed_range"] = [min(values), max(values)]
    margin, interval = intervals.margin_interval(
        accuracies["pretrained"], accuracies["random_init"], dev)
    entry.update(margin=round(margin, 4),
                 margin_ci95=[round(x, 4) for x in interval],
                 verdict=intervals.margin_verdict(interval))
    return entry


def finetune(exported, corpus, vocabulary, output_dir, max_seq_length=64,
             seeds=FINETUNE_SEEDS, num_train_steps=FINETUNE_STEPS):
    """Stage 6 of the quickstart: fine-tunes the exported encoder, loaded
    as a Keras layer, on each downstream task; and, as the control, the same
    model from random initialization with the same steps and seeds; then
    exports each task's first-seed pretrained classifier as a text-in
    SavedModel (`albert_<task>`).

    Args:
        exported: what `stages.export_model` returned.
        corpus: what `stages.write_corpus` returned (its `tasks`).
        vocabulary: what `stages.build_vocabulary` returned.
        output_dir: the quickstart's folder (`finetune/`, `export/`).
        max_seq_length: T of the packed pairs.
        seeds: one fine-tuning run of each initialization per seed.
        num_train_steps: steps of each run.

    Returns:
        A dict: `tasks` (one entry per task: `name`, `train_examples`,
        `dev_examples`, the `pretrained` and `random_init` mean accuracies
        with their `_ci95`, `margin`, `margin_ci95`, `verdict`, `runs` and
        `classifier`, the exported SavedModel folder), the `encoders` used
        and the settings.
    """
    finetune_dir = os.path.join(output_dir, "finetune")
    os.makedirs(finetune_dir, exist_ok=True)
    config = stages.model_config(vocabulary["pieces"], max_seq_length)
    encoders = {"pretrained": exported["paths"]["encoder"],
                "random_init": _export_random_encoder(
                    config, os.path.join(finetune_dir, "random_init_encoder"))}
    results = []
    for counts in corpus["tasks"]:
        task = downstream.load_task(counts["task_dir"])
        runs = {name: [] for name in encoders}
        keep = None
        for seed in seeds:
            for name, encoder in encoders.items():
                result = downstream.finetune(
                    encoder, vocabulary["model_file"], task, seed=seed,
                    num_train_steps=num_train_steps,
                    max_seq_length=max_seq_length)
                model = result.pop("model")
                if keep is None and name == "pretrained":
                    keep = model
                runs[name].append(dict(result, seed=seed))
                logging.info("Fine-tuned %s encoder on %s, seed %d: dev "
                             "accuracy %.4f", name, task.name, seed,
                             result["dev_accuracy"])
        entry = task_result(task.name, runs, counts)
        entry["classifier"] = tasks.export_classifier(
            keep, vocabulary["model_file"], os.path.join(output_dir, "export"),
            labels=list(task.labels), max_seq_length=max_seq_length,
            model_name=CLASSIFIER_PREFIX + task.name)
        results.append(entry)
    finetuned = {
        "tasks": results,
        "encoders": encoders,
        "encoder_version": exported["version"],
        "settings": {"seeds": list(seeds), "num_train_steps": num_train_steps,
                     "tasks": [t["name"] for t in corpus["tasks"]]},
    }
    stages.write_json(os.path.join(finetune_dir, FINETUNE_JSON), finetuned)
    return dict(finetuned, reused=False)


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
        A dict: `fill_mask` (see `queries.fill_mask`), `model` and
        `classifiers` (per task: `task`, `model`, `accuracy`, `dev_pairs`
        and `examples`).
    """
    sp_model = vocab.load_model(vocabulary["model_file"])
    model = tf.saved_model.load(serving_path)
    fill = queries.fill_mask(
        model, queries.fill_mask_queries(corpus["eval_file"], sp_model),
        queries.frequent_content_words(corpus["train_file"], sp_model))
    classifiers = []
    for entry, counts in zip(finetuned["tasks"], corpus["tasks"]):
        task = downstream.load_task(counts["task_dir"])
        classified = queries.classify(tf.saved_model.load(entry["classifier"]),
                                      task.dev_pairs, task.dev_labels)
        examples = [dict(first=first, second=second,
                         true_label=task.labels[label], **answer)
                    for (first, second), label, answer in zip(
                        task.dev_pairs[:num_examples], task.dev_labels,
                        classified["predictions"])]
        classifiers.append({"task": task.name, "model": entry["classifier"],
                            "accuracy": classified["accuracy"],
                            "dev_pairs": len(task.dev_pairs),
                            "examples": examples})
    return {"fill_mask": fill, "model": serving_path,
            "classifiers": classifiers}
