"""`--jit_compile`: true, false or auto (the device rule, never timing),
recorded with the run and reused by `auto` on resume."""

import json
import os

import pytest
import tensorflow as tf
from absl import flags

from albert_tf.training import xla_autotune
from albert_tf.training.options import PretrainingOptions
from albert_tf.training.options import parse_jit_compile
from foundation import flag_options as options_lib
from tests import fixtures_pretraining


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


def test_cpu_device_rule():
    assert xla_autotune.device_rule(tf.distribute.get_strategy()) is False


def test_auto_takes_the_device_rule_and_records_it_for_the_run(
        short_pretraining_run):
    # A CPU-only machine: no XLA, whatever the timing; said and recorded.
    path = os.path.join(short_pretraining_run.out, xla_autotune.CHOICE_FILE)
    assert [line for line in short_pretraining_run.lines
            if line.startswith("jit_compile=")] == [
        f"jit_compile=auto chose no XLA (device rule: CPU only; recorded in "
        f"{path}; pass --jit_compile=true|false to pin it)."]
    with open(path) as f:
        record = json.load(f)
    assert record["jit_compile"] is False
    assert record["how"] == "device rule: CPU only"


def _options(out, jit_compile):
    return fixtures_pretraining.options("unused", out, jit_compile=jit_compile)


def test_auto_reuses_the_runs_recorded_choice_whatever_the_device(tmp_path):
    out = str(tmp_path)
    # The run started with XLA (pinned, or on another machine's rule).
    assert xla_autotune.resolve(_options(out, True),
                                tf.distribute.get_strategy()) is True
    with open(os.path.join(out, xla_autotune.CHOICE_FILE)) as f:
        assert json.load(f)["how"] == "--jit_compile=true"
    # Resumed with auto on a CPU-only machine: it keeps training with XLA.
    assert xla_autotune.resolve(_options(out, None),
                                tf.distribute.get_strategy()) is True
    # Pinned the other way: that is what the run trains with from now on.
    assert xla_autotune.resolve(_options(out, False),
                                tf.distribute.get_strategy()) is False
    assert xla_autotune.resolve(_options(out, None),
                                tf.distribute.get_strategy()) is False


@pytest.mark.parametrize("content", ["{not json", '{"jit_compile": "yes"}',
                                     "[]"])
def test_a_damaged_record_is_decided_again_and_rewritten(tmp_path, content):
    path = tmp_path / xla_autotune.CHOICE_FILE
    path.write_text(content)
    assert xla_autotune.resolve(_options(str(tmp_path), None),
                                tf.distribute.get_strategy()) is False
    assert json.loads(path.read_text())["jit_compile"] is False


def test_an_earlier_timed_record_is_read_as_the_runs_choice(tmp_path):
    # What `auto` wrote when it timed both ways: its choice stands.
    (tmp_path / xla_autotune.CHOICE_FILE).write_text(json.dumps({
        "jit_compile": True, "seconds_per_step": {"xla": 0.1, "no_xla": 0.2},
        "key": {"device": "elsewhere"}}))
    assert xla_autotune.resolve(_options(str(tmp_path), None),
                                tf.distribute.get_strategy()) is True


def test_an_explicit_choice_compiles_one_way_only(tmp_path):
    data = fixtures_pretraining.write_records(str(tmp_path / "train.tfrecord"), 16)
    out = str(tmp_path / "out")
    runner = fixtures_pretraining.trainer(
        fixtures_pretraining.options(data, out, jit_compile=False))
    runner.train()
    assert runner.loops.choices() == {False}
