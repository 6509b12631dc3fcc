"""Which stages a rerun of the quickstart can skip.

Each `current_*` function returns what its stage returned last time (read
back from the stage's JSON file into its `stage_results` dataclass) when the
outputs on disk were built from the same inputs and settings, else None (the
stage must run). The pretraining stage is never skipped here: it continues
from its newest checkpoint by itself (and refuses checkpoints of other data,
`stages.claim_checkpoints`), and the queries and the report are always
redone, as they are quick and show the current model.
"""

import dataclasses
import os

from absl import logging

from albert_apps.quickstart import stage_results
from albert_apps.quickstart import stages
from albert_apps.quickstart import stages_downstream
from data_prep import pipeline


def _read_back(result_class, value, path):
    """`result_class.from_json(value)`, or None (the stage is redone) when
    the file holds other fields than this version's result: a file of
    another version of the job is never a crash, and never trusted."""
    try:
        return result_class.from_json(value)
    except (TypeError, KeyError, AttributeError):
        logging.info("%s was written by another version of the job: its "
                     "stage runs again.", path)
        return None


def current_corpus(data_dir, input_file=None, max_corpus_chars=3_000_000):
    """The corpus of `data_dir` if it was written with these settings."""
    path = os.path.join(data_dir, stages.CORPUS_JSON)
    corpus = stages.read_json(path)
    settings = stages.corpus_settings(input_file, max_corpus_chars)
    if corpus and corpus.get("settings") == settings:
        return _read_back(stage_results.Corpus, corpus, path)
    return None


def current_vocabulary(corpus, data_dir, vocab_size=4000):
    """The vocabulary of `data_dir` if it was trained on `corpus` with
    `vocab_size` requested."""
    path = os.path.join(data_dir, stages.VOCAB_JSON)
    info = stages.read_json(path)
    if (info and info.get("requested_size") == vocab_size and
            info.get("corpus") == corpus.settings):
        return _read_back(stage_results.Vocabulary, info, path)
    return None


def _current_split(path, source, vocabulary, settings):
    """`path`'s statistics if the records were built with `settings` after
    their text (`source`) and the vocabulary were written, else None."""
    stats_path = pipeline.stats_path(path)
    stats = stages.read_json(stats_path)
    if not stats:
        return None
    built_with = stats["settings"]
    if any(built_with.get(k, v) != v for k, v in settings.items()):
        return None
    if os.path.getmtime(stats_path) < max(
            os.path.getmtime(vocabulary.model_file),
            os.path.getmtime(source)):
        return None
    return stats


def current_records(corpus, vocabulary, data_dir, max_seq_length=64,
                    max_predictions_per_seq=None, dupe_factor=10):
    """The records (both splits) and baseline of `data_dir` if they are
    newer than the corpus and the vocabulary and were built with these
    settings (see `stages.build_records`)."""
    max_predictions_per_seq = (max_predictions_per_seq or
                               stages.default_max_predictions(max_seq_length))
    files = {}
    splits = (("train", dupe_factor), ("eval", stages.EVAL_DUPE_FACTOR))
    for split, dupes in splits:
        path = stages.record_path(data_dir, split)
        stats = _current_split(
            path, getattr(corpus, split + "_file"), vocabulary,
            {"max_seq_length": max_seq_length, "dupe_factor": dupes,
             "max_predictions_per_seq": max_predictions_per_seq})
        if stats is None:
            return None
        files[split] = stage_results.RecordFile(
            path=path, stats=pipeline.stats_path(path),
            instances=stats["instances"])
    path = os.path.join(data_dir, stages.BASELINE_JSON)
    baseline = stages.read_json(path)
    if not baseline or baseline.get("records_mtime") != os.path.getmtime(
            files["eval"].path):
        return None
    baseline = _read_back(stage_results.Baseline, baseline, path)
    return baseline and stage_results.Records(files["train"], files["eval"],
                                              baseline)


def current_export(trained, output_dir):
    """The export recorded in `output_dir` if it holds the best checkpoint
    of `trained` (what `stages.pretrain` returned) and its folders exist."""
    path = os.path.join(output_dir, stages.EXPORT_JSON)
    exported = stages.read_json(path)
    if not exported:
        return None
    best_step = int(trained.best_eval["global_step"])
    folders = [p for p in exported["paths"].values()
               if not p.endswith(".keras")]
    if (exported.get("checkpoint_step") != best_step or
            not all(os.path.isdir(p) for p in folders)):
        return None
    exported = _read_back(stage_results.ExportedModels, exported, path)
    return exported and dataclasses.replace(exported, reused=True)


def current_finetune(exported, corpus, output_dir,
                     seeds=stages_downstream.FINETUNE_SEEDS,
                     num_train_steps=stages_downstream.FINETUNE_STEPS, skipped=None):
    """The fine-tuning results recorded in `output_dir` if they were made
    from the current export of the encoder (`exported`, what
    `stages.export_model` returned) with these settings, and the classifier
    they exported exist, for the tasks of `corpus` less the `skipped`."""
    path = os.path.join(output_dir, "finetune",
                        stages_downstream.FINETUNE_JSON)
    finetuned = stages.read_json(path)
    if not finetuned or "tasks" not in finetuned:
        return None
    settings = {"seeds": list(seeds), "num_train_steps": num_train_steps,
                "tasks": [t["name"] for t in finetuned["tasks"]]}
    wanted = [t.name for t in corpus.tasks if t.name not in (skipped or {})]
    if (wanted != settings["tasks"] or
            finetuned.get("method") != stages_downstream.PROBE_METHOD or
            finetuned.get("settings") != settings or
            finetuned.get("encoder_version") != exported.version or
            not all(os.path.isdir(t["classifier"])
                    for t in finetuned["tasks"] if t.get("classifier"))):
        return None
    finetuned = _read_back(stage_results.DownstreamResults, finetuned, path)
    return finetuned and dataclasses.replace(finetuned, reused=True)
