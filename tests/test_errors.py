"""The training errors: what a stopped run says, and one line of an op error."""

import subprocess
import sys
import types

from albert_tf.training import errors


def test_a_stop_names_its_signal_step_and_checkpoint():
    stop = errors.TrainingStopped("SIGTERM", 15, 40, "runs/x/ckpt-40")
    assert stop.exit_status == 143
    assert str(stop) == ("stopped by SIGTERM at step 40 (saved runs/x/ckpt-40);"
                         " run the same command to resume")
    again = errors.TrainingStopped("SIGINT", 2, 40, "runs/x/ckpt-40",
                                   fresh=False)
    assert again.exit_status == 130
    assert "its checkpoint runs/x/ckpt-40 was already saved" in str(again)
    early = errors.TrainingStopped("SIGINT", 2, 0, None)
    assert "nothing trained yet, nothing saved" in str(early)
    # No `except Exception` swallows a stop.
    assert not isinstance(stop, Exception)


def test_an_op_error_is_its_one_line_of_cause():
    error = types.SimpleNamespace(message=(
        "assertion failed: [records in x.tfrecord have max_seq_length=64]\n"
        "\t [[{{node Assert}}]] [Op:IteratorGetNext]\n"
        "Detected at node Assert defined at (most recent call last):\n"))
    assert errors.op_error_summary(error) == (
        "records in x.tfrecord have max_seq_length=64")
    plain = types.SimpleNamespace(message="disk full [Op:SaveV2]")
    assert errors.op_error_summary(plain) == "disk full"


def test_the_errors_load_without_tensorflow():
    code = ("import sys; import albert_tf.training.errors; "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"
