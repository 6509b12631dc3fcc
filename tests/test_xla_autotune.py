"""`--jit_compile=auto`: both ways timed on real steps, the faster kept."""

import json
import os

import pytest
import tensorflow as tf
from absl import flags

from albert_tf.training import xla_autotune
from albert_tf.training.options import PretrainingOptions
from albert_tf.training.options import parse_jit_compile
from data_prep import flag_options as options_lib
from tests import test_pretraining as t


@pytest.mark.parametrize("value, expected", [
    (None, None), ("auto", None), ("AUTO", None), (True, True), ("true", True),
    ("1", True), (False, False), ("false", False), ("0", False)])
def test_parse(value, expected):
    assert parse_jit_compile(value) is expected


def test_a_bad_value_names_the_accepted_ones():
    with pytest.raises(ValueError, match="true, false or auto.*'sometimes'"):
        parse_jit_compile("sometimes")


@pytest.mark.parametrize("argv, expected", [
    ([], None), (["--jit_compile=auto"], None), (["--jit_compile"], True),
    (["--nojit_compile"], False), (["--jit_compile=false"], False)])
def test_the_flag_takes_true_false_and_auto(argv, expected):
    values = flags.FlagValues()
    options_lib.define_flags(PretrainingOptions, values, "test")
    values(["prog", "--input_file=x", "--output_dir=y"] + argv)
    options = options_lib.from_flags(PretrainingOptions, values)
    assert options.jit_compile is expected


def test_the_flag_refuses_other_values():
    values = flags.FlagValues()
    options_lib.define_flags(PretrainingOptions, values, "test")
    with pytest.raises(flags.IllegalFlagValueError, match="true, false or auto"):
        values(["prog", "--input_file=x", "--output_dir=y",
                "--jit_compile=sometimes"])


def test_chooser_alternates_skips_the_compiling_windows_and_keeps_the_faster():
    chooser = xla_autotune.Chooser(window_steps=2, repeats=2)
    # Per-step seconds: the first window each way (compiling) is slow.
    timings = {False: [9.0, 1.0, 1.2], True: [30.0, 0.5, 0.7]}
    order = []
    while not chooser.done:
        jit = chooser.next_variant()
        order.append(jit)
        chooser.record(jit, 2 * timings[jit].pop(0), 2)
    assert order == [False, True] * 3
    assert chooser.medians() == pytest.approx({"no_xla": 1.1, "xla": 0.6})
    assert chooser.choice is True


def test_the_loop_runner_times_windows_then_keeps_the_choice():
    calls, chosen = [], []

    def run_loop(jit, num_steps):
        calls.append((jit, num_steps))
        return "stats", num_steps, (0.5 if jit else 1.0) * num_steps

    def finish(chooser):
        chosen.append(chooser.choice)
        return chooser.choice

    runner = xla_autotune.LoopRunner(
        run_loop, None, xla_autotune.Chooser(window_steps=2, repeats=1),
        finish)
    results = [runner(10) for _ in range(5)]
    # Four windows of 2 steps, alternating; then whole loops, with XLA.
    assert calls == [(False, 2), (True, 2), (False, 2), (True, 2), (True, 10)]
    assert chosen == [True] and runner.jit_compile is True
    assert results[-1] == ("stats", 10, 5.0)


def test_cpu_device_rule():
    assert xla_autotune.device_rule(tf.distribute.get_strategy()) is False


@pytest.mark.slow
def test_auto_times_real_steps_both_ways_and_remembers(tmp_path, monkeypatch):
    monkeypatch.setattr(xla_autotune, "MIN_STEPS", 0)
    monkeypatch.setattr(xla_autotune, "WINDOW_STEPS", 1)
    monkeypatch.setattr(xla_autotune, "REPEATS", 1)
    data = t.write_records(str(tmp_path / "train.tfrecord"), 64)
    out = str(tmp_path / "out")
    opts = t.options(data, out, jit_compile=None, num_train_steps=6,
                     save_checkpoints_steps=6, iterations_per_loop=3)
    runner = t.trainer(opts)
    result = runner.train()
    # The trial windows were training steps: 4 of the 6, one each way
    # compiling, one each way timed; then 2 more with the faster.
    assert result["step"] == 6
    assert set(runner._train_loops) == {False, True}
    with open(os.path.join(out, xla_autotune.CHOICE_FILE)) as f:
        record = json.load(f)
    medians = record["seconds_per_step"]
    assert set(medians) == {"xla", "no_xla"}
    assert record["jit_compile"] is (medians["xla"] < medians["no_xla"])
    assert record["key"]["dtype"] == "float32"

    # A rerun on the same device and batch reads the choice: one way only.
    resumed = t.trainer(t.options(data, out, jit_compile=None,
                                  num_train_steps=8, save_checkpoints_steps=2,
                                  iterations_per_loop=2))
    assert resumed.train()["step"] == 8
    assert set(resumed._train_loops) == {record["jit_compile"]}


def test_a_short_run_times_nothing(short_pretraining_run):
    # 4 steps, "auto": under MIN_STEPS, so the CPU rule (no XLA), untimed.
    assert short_pretraining_run.report["train"]["step"] == 4
    assert [line for line in short_pretraining_run.lines
            if line.startswith("jit_compile=")] == [
        "jit_compile=auto: False (device rule; the run is too short or "
        "spread over workers to time both ways)."]
    assert not os.path.exists(os.path.join(short_pretraining_run.out,
                                           xla_autotune.CHOICE_FILE))


def test_an_explicit_choice_times_nothing(tmp_path):
    data = t.write_records(str(tmp_path / "train.tfrecord"), 16)
    out = str(tmp_path / "out")
    runner = t.trainer(t.options(data, out, jit_compile=False))
    runner.train()
    assert set(runner._train_loops) == {False}
    assert not os.path.exists(os.path.join(out, xla_autotune.CHOICE_FILE))
