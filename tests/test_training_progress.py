"""Progress a user can see and results a user can judge: training reports
after its first step and then within its interval whatever
--iterations_per_loop is, an ETA only after warm-up, and every evaluation
beside its baseline (chance, the majority class, a collapsed classifier)."""

import os
import time

import numpy as np
import pytest
from absl import logging

from albert_tf.tasks import finetuning_jobs
from albert_tf.tasks import glue_reader
from albert_tf.tasks.options import ClassifierOptions
from albert_tf.training import baselines
from albert_tf.training import results
from foundation import progress
from tests import fixtures_pretraining


def _mrpc(folder, rows):
    """An MRPC folder of `rows` training and dev pairs, labels alternating."""
    os.makedirs(folder)
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for split in ("train", "dev"):
        body = "".join(f"{i % 2}\t{i}\t{i + 1}\tHe said so {i} times.\t"
                       f"It rained on day {i}.\n" for i in range(rows))
        with open(os.path.join(folder, f"{split}.tsv"), "w") as f:
            f.write(header + body)
    with open(os.path.join(folder, "test.tsv"), "w") as f:
        f.write("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\tYes.\tNo.\n")
    return folder


def _timed_lines(monkeypatch):
    """`[(seconds, line)]` of what absl's info and warning log from now on."""
    lines = []

    def record(msg, *args):
        lines.append((time.monotonic(), msg % args if args else msg))

    monkeypatch.setattr(logging, "info", record)
    monkeypatch.setattr(logging, "warning", record)
    monkeypatch.setattr(progress, "interactive", lambda stream=None: False)
    return lines


# === Progress ===

def test_pace_gives_no_eta_before_the_warmup_ends():
    clock = [100.0]
    pace = progress.Pace(start=10, clock=lambda: clock[0])
    clock[0] += 40.0  # The first step: 40 s of compiling.
    pace.update(11)
    assert pace.warmup_s == 40.0 and pace.eta_s(1000) is None
    clock[0] += 2.0  # Then 0.5 s a step.
    pace.update(15)
    assert pace.seconds_per_unit() == pytest.approx(0.5)
    assert pace.eta_s(1015) == pytest.approx(500.0)


def test_reporter_lines_come_after_a_slow_first_unit_then_each_interval():
    clock, lines = [0.0], []
    reporter = progress.Reporter("eval", total=10, interval_s=30.0,
                                 log=lines.append, clock=lambda: clock[0])
    for batch in range(1, 11):
        clock[0] += 5.0 if batch == 1 else 4.0
        reporter.update(batch)
    # 5 s first (a line, no ETA), then 4 s a batch: lines at 37 s and 41 s
    # ... only once 30 s passed since the last one.
    assert len(lines) == 2
    assert lines[0] == "eval: batch 1/10, first batch (warm-up) took 5.0 s; " \
        "ETA after warm-up"
    assert lines[1].startswith("eval: batch 9/10, 0.25 batch/s, ETA 0:00:04")


def test_finetuning_reports_within_its_interval_whatever_iterations_per_loop(
        tiny_model_dir, tmp_path, monkeypatch):
    # One compiled call would be all 200 steps (--iterations_per_loop=1000
    # and no checkpoint before the end): lines must still come after the
    # first step and then at least every --progress_interval_s.
    interval = 1.0
    data_dir = _mrpc(str(tmp_path / "MRPC"), 32)
    options = ClassifierOptions(
        task_name="MRPC", data_dir=data_dir, init_checkpoint=tiny_model_dir,
        output_dir=str(tmp_path / "run"), do_train=True, max_seq_length=64,
        train_batch_size=32, learning_rate=1e-4, warmup_step=1,
        train_step=200, save_checkpoints_steps=1000, iterations_per_loop=1000,
        progress_interval_s=interval)
    lines = _timed_lines(monkeypatch)
    start = time.monotonic()
    _, report = finetuning_jobs.run_classifier(options)
    end = time.monotonic()
    steps = [(when, line) for when, line in lines if line.startswith("step ")]
    assert steps[0][1].startswith("step 1/200 ")
    assert "ETA after warm-up" in steps[0][1]
    assert steps[-1][1].startswith("step 200/200 ")
    assert end - start > 3 * interval, "the run must outlast the interval"
    assert "ETA 0:" in steps[1][1]
    times = [when for when, _ in steps]
    gaps = np.diff(times)
    # Calls last about half an interval at the measured pace; a line is due
    # once half an interval passed: no gap beyond the interval (with slack
    # for a busy machine), and more than one call per run.
    assert max(gaps) < 2 * interval, [line for _, line in steps]
    assert len(steps) >= (times[-1] - times[0]) / (2 * interval)
    assert report["train"]["step"] == 200


# === Baselines ===

def test_wilson_and_the_verdicts():
    low, high = baselines.wilson(0.8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert baselines.at_chance(0.5105, 1000, 0.5)
    assert not baselines.at_chance(0.60, 1000, 0.5)
    assert baselines.majority([1, 0, 1, 1]) == (1, 0.75)
    assert "at chance" in baselines.describe("acc", 0.51, 0.5, 1000, "chance")
    assert "below it" in baselines.describe("acc", 0.246, 0.5, 1000, "chance")
    assert "above it" in baselines.describe("acc", 0.9, 0.5, 1000, "chance")


def test_a_collapsed_classifier_is_named():
    answers = baselines.classifier_answers([0, 1, 2, 3], [2, 2, 2, 2])
    assert baselines.collapsed_class(answers) == 2
    assert baselines.collapsed_class(
        baselines.classifier_answers([0, 1], [0, 1])) is None
    # One example tells nothing.
    assert baselines.collapsed_class(
        baselines.classifier_answers([0], [1])) is None


def test_glue_metrics_come_with_the_majority_class_baseline():
    m = glue_reader.compute_metrics("mrpc", [1, 0, 1, 1],
                                    [[0, 1], [1, 0], [1, 0], [0, 1]])
    assert m["accuracy"] == 0.75 and m["majority_accuracy"] == 0.75
    assert m["majority_class"] == 1 and m["predicted_classes"] == 2
    assert m["majority_f1"] == pytest.approx(2 * 0.75 / 1.75)
    collapsed = glue_reader.compute_metrics("mrpc", [1, 0, 1, 1], [[1, 0]] * 4)
    assert collapsed["predicted_class"] == 0
    assert baselines.collapsed_class(collapsed) == 0


def test_pretraining_evaluation_is_beside_its_baselines(tmp_path, monkeypatch):
    data = fixtures_pretraining.write_records(str(tmp_path / "data.tfrecord"), 24)
    lines = _timed_lines(monkeypatch)
    out = str(tmp_path / "out")
    fixtures_pretraining.trainer(fixtures_pretraining.options(
        data, out, num_train_steps=2, do_eval=True)).train()
    (result,) = results.read_eval_results(os.path.join(out,
                                                       results.EVAL_RESULTS))
    # The most frequent masked piece of the evaluated records, counted here.
    import tensorflow as tf

    counts = {}
    for record in tf.data.TFRecordDataset(data).take(2 * 8):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        ids = example["masked_lm_ids"].int64_list.value
        weights = example["masked_lm_weights"].float_list.value
        for piece, weight in zip(ids, weights):
            counts[piece] = counts.get(piece, 0.0) + weight
    top = max(counts.values())
    assert result["masked_lm_baseline_accuracy"] == pytest.approx(
        top / sum(counts.values()), rel=1e-5)
    assert result["sentence_order_chance"] == 0.5
    assert result["eval_examples"] == 16
    judged = [line for _, line in lines if "against baselines" in line]
    assert len(judged) == 1
    assert "masked_lm_accuracy" in judged[0] and "most frequent piece" in judged[0]
    assert "sentence_order_accuracy" in judged[0] and "(chance 0.5000" in judged[0]
    # Random records and two steps: nothing learned, and it says so.
    assert judged[0].count("at chance") == 2


@pytest.mark.slow
def test_the_classifier_program_reports_as_a_user_runs_it(tiny_model_dir,
                                                          tmp_path):
    # The fine-tuning guide's command, --iterations_per_loop=1000: the log
    # (absl's time stamps) has a line after the first step and then one at
    # least every --progress_interval_s.
    import datetime
    import re
    import subprocess
    import sys

    from tests import speed_plugin

    interval = 2.0
    data_dir = _mrpc(str(tmp_path / "MRPC"), 32)
    done = subprocess.run(
        [sys.executable, "-m", "albert_apps.run_classifier",
         "--task_name=MRPC", f"--data_dir={data_dir}",
         f"--init_checkpoint={tiny_model_dir}", f"--output_dir={tmp_path / 'run'}",
         "--do_train", "--do_eval", "--max_seq_length=64",
         "--train_batch_size=32", "--learning_rate=1e-4", "--warmup_step=1",
         "--train_step=300", "--save_checkpoints_steps=1000",
         "--iterations_per_loop=1000", f"--progress_interval_s={interval}"],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        env=speed_plugin.user_environment(), capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    stamps = [datetime.datetime.strptime(m.group(1), "%H:%M:%S.%f")
              for m in re.finditer(r"^I\d{4} (\S+) .*\] step \d+/300 ",
                                   done.stderr, re.M)]
    lines = re.findall(r"\] (step \d+/300 .*)", done.stderr)
    assert lines[0].startswith("step 1/300 ") and "ETA after warm-up" in (
        lines[0])
    assert lines[-1].startswith("step 300/300 ")
    gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:])]
    assert len(gaps) >= 2 and max(gaps) < 2 * interval, (gaps, lines)
