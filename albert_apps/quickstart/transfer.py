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
from albert_apps.quickstart import downstream
from albert_apps.quickstart import queries
from albert_apps.quickstart import stages

FINETUNE_JSON = "finetune.json"  # Under finetune/.
CLASSIFIER_NAME = "albert_sentence_order"  # The fine-tuned export's folder.
# Fine-tuning runs of each initialization (one per seed), and their steps.
FINETUNE_SEEDS = (0, 1, 2)
FINETUNE_STEPS = 100
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


def finetune(exported, corpus, vocabulary, output_dir, max_seq_length=64,
             seeds=FINETUNE_SEEDS, num_train_steps=FINETUNE_STEPS):
    """Stage 6 of the quickstart: fine-tunes the exported encoder, loaded as a Keras layer, on
    the downstream task; and, as the control, the same model from random
    initialization with the same steps and seeds; then exports the first
    seed's pretrained classifier as a text-in SavedModel.

    Args:
        exported: what `stages.export_model` returned.
        corpus: what `stages.write_corpus` returned (its `task`).
        vocabulary: what `stages.build_vocabulary` returned.
        output_dir: the quickstart's folder (`finetune/`, `export/`).
        max_seq_length: T of the packed pairs.
        seeds: one fine-tuning run of each initialization per seed.
        num_train_steps: steps of each run.

    Returns:
        A dict: `runs` (`pretrained` and `random_init`, a list of results
        per seed), `mean` and `min_margin` of the dev accuracies, the task's
        sizes, the `encoders` used, and `classifier` (the exported
        SavedModel folder).
    """
    finetune_dir = os.path.join(output_dir, "finetune")
    os.makedirs(finetune_dir, exist_ok=True)
    task = downstream.load_task(corpus["task"]["task_dir"])
    config = stages.model_config(vocabulary["pieces"], max_seq_length)
    encoders = {"pretrained": exported["paths"]["encoder"],
                "random_init": _export_random_encoder(
                    config, os.path.join(finetune_dir, "random_init_encoder"))}
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
            logging.info("Fine-tuned %s encoder, seed %d: dev accuracy %.4f",
                         name, seed, result["dev_accuracy"])
    classifier = tasks.export_classifier(
        keep, vocabulary["model_file"], os.path.join(output_dir, "export"),
        labels=list(downstream.LABELS), max_seq_length=max_seq_length,
        model_name=CLASSIFIER_NAME)
    accuracies = {name: [r["dev_accuracy"] for r in results]
                  for name, results in runs.items()}
    finetuned = {
        "runs": runs,
        "mean": {name: round(float(np.mean(a)), 4)
                 for name, a in accuracies.items()},
        "min_margin": round(float(min(
            p - r for p, r in zip(accuracies["pretrained"],
                                  accuracies["random_init"]))), 4),
        "task": {key: corpus["task"][key] for key in ("train", "dev")},
        "labels": list(downstream.LABELS),
        "encoders": encoders,
        "encoder_version": exported["version"],
        "classifier": classifier,
        "settings": {"seeds": list(seeds), "num_train_steps": num_train_steps},
    }
    stages.write_json(os.path.join(finetune_dir, FINETUNE_JSON), finetuned)
    return dict(finetuned, reused=False)


def query(serving_path, classifier_path, corpus, vocabulary,
          num_examples=NUM_CLASSIFIER_EXAMPLES):
    """Stage 7 of the quickstart: questions through the exported SavedModels: fill-mask on
    held-out sentences (`queries.fill_mask_queries`), and the fine-tuned
    classifier on the downstream task's dev pairs (its accuracy through the
    SavedModel, and the first `num_examples` answers).

    Returns:
        A dict: `fill_mask` (see `queries.fill_mask`), `classifier` (its
        `accuracy` and `examples`), and the two SavedModel folders.
    """
    sp_model = vocab.load_model(vocabulary["model_file"])
    model = tf.saved_model.load(serving_path)
    fill = queries.fill_mask(
        model, queries.fill_mask_queries(corpus["eval_file"], sp_model),
        queries.frequent_content_words(corpus["train_file"], sp_model))
    task = downstream.load_task(corpus["task"]["task_dir"])
    classified = queries.classify(tf.saved_model.load(classifier_path),
                                  task.dev_pairs, task.dev_labels)
    examples = [dict(first=first, second=second,
                     true_label=downstream.LABELS[label], **answer)
                for (first, second), label, answer in zip(
                    task.dev_pairs[:num_examples], task.dev_labels,
                    classified["predictions"])]
    return {"fill_mask": fill, "model": serving_path,
            "classifier": {"model": classifier_path,
                           "accuracy": classified["accuracy"],
                           "dev_pairs": len(task.dev_pairs),
                           "examples": examples}}
