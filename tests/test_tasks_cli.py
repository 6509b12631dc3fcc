"""The flags shared by the fine-tuning CLIs."""

import re
import subprocess
import sys

from absl import app, flags
import pytest
import tensorflow as tf

from albert_tf.tasks import cli


def _define(export=True):
    fv = flags.FlagValues()
    cli.define_common_flags(max_seq_length=96, learning_rate=3e-5,
                            do_train_help="t", do_eval_help="e",
                            do_predict_help="p", export=export,
                            flag_values=fv)
    return fv


def test_defaults_and_parsed_values_reach_the_runner_kwargs():
    fv = _define()
    fv(["prog", "--output_dir=out", "--init_checkpoint=ckpt", "--do_train",
        "--train_step=7", "--dtype=bfloat16", "--strategy=one_device"])
    kwargs = cli.common_kwargs(fv)
    assert kwargs["max_seq_length"] == 96
    assert kwargs["learning_rate"] == pytest.approx(3e-5)
    assert kwargs["init_checkpoint"] == "ckpt"
    assert kwargs["do_train"] and not kwargs["do_eval"]
    assert kwargs["train_step"] == 7 and kwargs["dtype"] == "bfloat16"
    assert kwargs["export_dir"] is None
    assert isinstance(kwargs["strategy"], tf.distribute.OneDeviceStrategy)
    assert "output_dir" not in kwargs  # Passed positionally by each job.


def test_without_export_there_is_no_export_dir():
    fv = _define(export=False)
    fv(["prog", "--strategy=one_device"])
    assert "export_dir" not in cli.common_kwargs(fv)
    with pytest.raises(flags.UnrecognizedFlagError):
        fv(["prog", "--export_dir=x"])


def test_positional_arguments_are_refused():
    cli.check_no_arguments(["prog"])
    with pytest.raises(app.UsageError, match="Unexpected arguments"):
        cli.check_no_arguments(["prog", "extra"])


@pytest.mark.parametrize("module,flag", [
    ("albert_tf.run_classifier", "task_name"),
    ("albert_tf.run_squad", "version_2_with_negative"),
    ("albert_tf.run_race", "max_qa_length"),
])
def test_each_job_lists_its_own_and_the_common_flags(module, flag):
    done = subprocess.run([sys.executable, "-m", module, "--helpfull"],
                          capture_output=True, text=True, timeout=300)
    for name in (flag, "init_checkpoint", "train_step", "jit_compile"):
        assert re.search(r"^  --(\[no\])?%s:" % name, done.stdout, re.M), name
