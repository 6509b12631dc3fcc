"""Outcome parity: this side's jobs with their defaults, and a row of the
outcome table (both sides over seeds, Welch's interval, the verdict).
"""

import os

import numpy as np

from benchmarks.finetune_parity.stats import verdict
from benchmarks.finetune_parity.stats import welch_interval


def ours_outcome(kind, init_checkpoint, work_dir, seed, steps, batch_size,
                 learning_rate, task_name=None, data_dir=None, train_file=None,
                 predict_file=None, max_seq_length=128, doc_stride=64,
                 max_query_length=32):
    """This project's job with its defaults (dropout on); returns the metric."""
    from albert_tf.tasks import finetune_jobs
    from albert_tf.tasks import options as options_lib

    out = os.path.join(work_dir, f"ours_{kind}_{seed}")
    common = dict(output_dir=out, init_checkpoint=init_checkpoint,
                  do_train=True, do_eval=True, train_step=steps,
                  warmup_step=steps // 10, learning_rate=learning_rate,
                  train_batch_size=batch_size, save_checkpoints_steps=steps,
                  iterations_per_loop=steps, seed=seed,
                  max_seq_length=max_seq_length, eval_batch_size=64,
                  predict_batch_size=64, jit_compile=False)
    if kind == "classification":
        options = options_lib.ClassifierOptions(
            task_name=task_name, data_dir=data_dir, **common)
        _, report = finetune_jobs.run_classifier(options)
        return 100.0 * report["eval_results"][-1]["accuracy"]
    options = options_lib.SquadOptions(
        train_file=train_file, predict_file=predict_file,
        doc_stride=doc_stride, max_query_length=max_query_length, **common)
    _, report = finetune_jobs.run_squad(options)
    result = report["eval_results"][-1]
    return {"exact": result["exact"], "f1": result["f1"]}


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
