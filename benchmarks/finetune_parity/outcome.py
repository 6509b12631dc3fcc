"""Outcome parity: this side's jobs with their defaults, and a row of the
outcome table (both sides over seeds, Welch's interval, the verdict).
"""

import hashlib
import json
import os

import numpy as np

from benchmarks.finetune_parity.stats import verdict
from benchmarks.finetune_parity.stats import welch_interval
from benchmarks.finetune_parity.tasks import _config_file
from foundation import safe_io

# Where each seed's pair of results is kept (`<output_dir>/outcome_runs/`).
RUNS_DIR = "outcome_runs"


def ours_outcome(kind, init_checkpoint, work_dir, seed, steps, batch_size,
                 learning_rate, task_name=None, data_dir=None, train_file=None,
                 predict_file=None, max_seq_length=128, doc_stride=64,
                 max_query_length=32, dropout=0.1):
    """This project's job with its defaults, the checkpoint's config with
    `dropout`; returns the metric."""
    from albert_tf.tasks import finetuning_jobs
    from albert_tf.tasks import options as options_lib

    out = os.path.join(work_dir, f"ours_{kind}_{seed}")
    common = dict(output_dir=out, init_checkpoint=init_checkpoint,
                  albert_config_file=_config_file(init_checkpoint, work_dir,
                                                  dropout),
                  dropout=dropout,
                  do_train=True, do_eval=True, train_step=steps,
                  warmup_step=steps // 10, learning_rate=learning_rate,
                  train_batch_size=batch_size, save_checkpoints_steps=steps,
                  iterations_per_loop=steps, seed=seed,
                  max_seq_length=max_seq_length, eval_batch_size=64,
                  predict_batch_size=64, jit_compile=False)
    if kind == "classification":
        options = options_lib.ClassifierOptions(
            task_name=task_name, data_dir=data_dir, **common)
        _, report = finetuning_jobs.run_classifier(options)
        return 100.0 * report["eval_results"][-1]["accuracy"]
    options = options_lib.SquadOptions(
        train_file=train_file, predict_file=predict_file,
        doc_stride=doc_stride, max_query_length=max_query_length, **common)
    _, report = finetuning_jobs.run_squad(options)
    result = report["eval_results"][-1]
    return {"exact": result["exact"], "f1": result["f1"]}


def fingerprint(paths):
    """SHA-256 of the bytes of `paths` (files, or every file under a
    folder, in name order)."""
    digest = hashlib.sha256()
    for path in paths:
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(root, name) for root, _, names in os.walk(path)
            for name in names)
        for name in files:
            digest.update(os.path.relpath(name, path).encode())
            with open(name, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def outcome_pair(output_dir, name, seed, inputs, settings, run_ours,
                 run_reference):
    """Seed `seed` of task `name` on both sides, read back when it was
    measured before on the same inputs (`inputs`: the `fingerprint` of the
    checkpoint's and the data's bytes) with the same settings, else run;
    kept in `<output_dir>/outcome_runs/<name>_<seed>_<key>.json`
    (one file a key: other settings never replace it), so that a stopped
    benchmark resumes and seeds can be split among processes
    (`--first_seed`).

    Returns:
        `{"ours", "reference", "read_back"}`.
    """
    key = {"task": name, "seed": seed, "settings": settings,
           "inputs": inputs}
    stem = os.path.join(output_dir, RUNS_DIR, f"{name}_{seed}_" + hashlib.sha256(
        json.dumps(key, sort_keys=True).encode()).hexdigest()[:12])
    if os.path.isfile(stem + ".json"):
        with open(stem + ".json") as f:
            try:
                kept = json.load(f)
            except ValueError as error:
                raise ValueError(f"{stem}.json is no result of this "
                                 f"benchmark ({error}); move it away to "
                                 "measure the seed again") from None
        if kept.get("key") == key:
            return {"ours": kept["ours"], "reference": kept["reference"],
                    "read_back": True}
    os.makedirs(stem, exist_ok=True)  # this side's job folder
    pair = {"key": key, "ours": run_ours(seed, stem),
            "reference": run_reference(seed)}
    safe_io.write_atomically(stem + ".json", json.dumps(pair, indent=1))
    return {"ours": pair["ours"], "reference": pair["reference"],
            "read_back": False}


def outcome_rows(name, ours, reference):
    """The table's rows of task `name`: accuracy, or EM and F1."""
    if isinstance(ours[0], dict):
        return {f"{name} {metric}": outcome_row(
            label, [o[metric] for o in ours], [r[metric] for r in reference])
            for metric, label in (("exact", "EM"), ("f1", "F1"))}
    return {name: outcome_row("accuracy", ours, reference)}


def outcome_row(metric, ours, reference):
    diff, low, high = welch_interval(ours, reference)
    return {"metric": metric, "ours_mean": float(np.mean(ours)),
            "ours_sd": float(np.std(ours, ddof=1)) if len(ours) > 1 else 0.0,
            "reference_mean": float(np.mean(reference)),
            "reference_sd": (float(np.std(reference, ddof=1))
                             if len(reference) > 1 else 0.0),
            "seeds": len(ours), "ours": [round(x, 3) for x in ours],
            "reference": [round(x, 3) for x in reference],
            "diff": diff, "diff_ci95": [low, high],
            "verdict": verdict(low, high)}
