"""The study's data: the quickstart's corpus, vocabulary and records, plus NSP.

The corpus (split into pretraining, held-out and downstream documents, and
the downstream task), the SentencePiece model and the SOP records come from
the quickstart's stages (`albert_apps.quickstart`), with its defaults.
Next to them, from the same documents and with the same options, maskings
and seed, `data_prep.pipeline.create_pretraining_data` writes the NSP
records (`random_next_sentence`) of both splits.
"""

import dataclasses
import json
import os

from albert_apps.quickstart import build_records
from albert_apps.quickstart import build_vocabulary
from albert_apps.quickstart import default_max_predictions
from albert_apps.quickstart import write_corpus
from data_prep import instances
from data_prep import pipeline

TASKS = ("sop", "nsp")


def build_data(data_dir, input_file=None, max_corpus_chars=None,
               max_seq_length=64):
    """Writes everything the pretraining runs read.

    Args:
        data_dir: the folder (created if missing).
        input_file: a corpus (one sentence a line, a blank line between
            documents); default: the quickstart's built-in corpus.
        max_corpus_chars: cap on the pretraining and held-out text (None:
            the quickstart's default).
        max_seq_length: T of the records.

    Returns:
        A dict: `corpus` (the quickstart's counts), `vocabulary` (its
        `model_file` and `pieces`), `max_seq_length`,
        `max_predictions_per_seq`, `source` (the corpus, in words),
        `train_dupes` and `eval_dupes` (maskings of each document),
        `task_dir` and `task_examples` (the quickstart's sentence-order task,
        see `albert_apps.quickstart.downstream`, and its `train` and `dev`
        pair counts),
        `baseline` (the quickstart's: `masked_lm_accuracy` and `piece` of
        always predicting the most frequent masked token of the held-out
        records), and per task (`sop`, `nsp`) a dict with the `train`
        and `eval` record files, their instance counts and `eval_chance`
        (the held-out accuracy of always answering the more frequent
        label: NSP records take segment B from another document for every
        one-sentence chunk too, as the official script does, so more than
        half of them are "not next").
    """
    os.makedirs(data_dir, exist_ok=True)
    corpus_args = {} if max_corpus_chars is None else {
        "max_corpus_chars": max_corpus_chars}
    corpus = write_corpus(data_dir, input_file=input_file, **corpus_args)
    vocabulary = build_vocabulary(corpus, data_dir)
    max_predictions = default_max_predictions(max_seq_length)
    records = build_records(
        corpus, vocabulary, data_dir, max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions)
    # Study 3 compares SOP and NSP on the downstream task of sentence order.
    task = next(t for t in corpus.tasks if t.name == "sentence_order")
    # The study's data is JSON values (its runs record them).
    data = {"corpus": corpus.to_json(), "vocabulary": vocabulary.to_json(),
            "source": input_file or corpus.source,
            "max_seq_length": max_seq_length,
            "max_predictions_per_seq": max_predictions,
            "task_dir": task.task_dir,
            "task_examples": {"train": task.train, "dev": task.dev},
            "sop": {}, "nsp": {}}
    for split in ("train", "eval"):
        # The SOP records' own settings, with NSP pairs.
        split_records = getattr(records, split)
        settings = _stats(split_records.stats)["settings"]
        options = instances.InstanceOptions(
            **{field.name: settings[field.name]
               for field in dataclasses.fields(instances.InstanceOptions)
               if field.name != "random_next_sentence"},
            random_next_sentence=True)
        path = os.path.join(data_dir, "nsp_%s.tfrecord" % split)
        pipeline.create_pretraining_data(
            getattr(corpus, split + "_file"), path, vocabulary.model_file,
            options=options, dupe_factor=settings["dupe_factor"],
            random_seed=settings["random_seed"],
            do_lower_case=settings["do_lower_case"])
        data[split + "_dupes"] = settings["dupe_factor"]
        for task, record_file, stats_file in (
                ("sop", split_records.path, split_records.stats),
                ("nsp", path, pipeline.stats_path(path))):
            stats = _stats(stats_file)
            data[task][split] = record_file
            data[task][split + "_instances"] = stats["instances"]
            if split == "eval":
                positives = stats["sop_label_counts"].get("1", 0)
                data[task]["eval_chance"] = max(
                    positives, stats["instances"] - positives) / max(
                        stats["instances"], 1)
    data["baseline"] = records.baseline.to_json()
    return data


def _stats(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)
