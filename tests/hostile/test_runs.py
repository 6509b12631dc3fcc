"""Hostile cases of training and fine-tuning runs, run as a user runs them:
a stop signal in the middle of a long compiled loop, a rerun whose inputs
were rebuilt under the same names, and a run that never leaves chance.

Each case asserts its outcome (an exit status and one line, or a result
read back from the files) and that the files that existed before are
unchanged where nothing should have changed.
"""

import os
import re
import signal
import time

import pytest

from albert_tf import AlbertConfig
from tests import fixtures_pretraining
from tests.hostile.common import Snapshot
from tests.hostile.common import assert_one_line_error
from tests.hostile.common import error_lines
from tests.hostile.common import run_program
from tests.hostile.common import start_program

# One compiled loop would be the whole run: far longer than any test.
ENDLESS = ("--iterations_per_loop=100000", "--save_checkpoints_steps=100000")
_STARTED = re.compile(r"Training from step (\d+) to")
# After the line above, the loop is compiled and steps run: long enough on
# a loaded machine for some steps to be done when the signal comes.
_TRAIN_SECONDS = 6
# A stopped run must be gone this soon after its signal (one step and a
# save), where finishing its loop would take hours.
_STOP_SECONDS = 60


def _write_sst2(folder, rows=32, flip=False):
    """An SST-2 folder whose label follows the sentence (learnable)."""
    os.makedirs(folder, exist_ok=True)
    good, bad = "a fine film , lovely and warm", "dull and boring , a waste"
    lines = ["sentence\tlabel"] + [
        f"{good if i % 2 else bad}\t{(i % 2) ^ int(flip)}" for i in range(rows)]
    for split in ("train", "dev"):
        with open(os.path.join(folder, f"{split}.tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")
    with open(os.path.join(folder, "test.tsv"), "w") as f:
        f.write("index\tsentence\n0\tlovely\n1\tdull\n")
    return folder


def _classifier_flags(tiny_model_dir, data_dir, out, *extra):
    return [f"--data_dir={data_dir}", "--task_name=SST-2",
            f"--init_checkpoint={tiny_model_dir}", f"--output_dir={out}",
            "--do_train", "--max_seq_length=16", "--train_batch_size=8",
            "--eval_batch_size=8", "--learning_rate=1e-3", "--warmup_step=2",
            "--dropout=0", *extra]


def _signal_when_training(process, sig):
    """Reads `process`'s log until training starts, waits for steps to run,
    sends `sig`; returns `(exit status, seconds from the signal to the
    exit, the whole log)`."""
    lines = []
    for line in process.stdout:
        lines.append(line)
        if _STARTED.search(line):
            break
    else:
        process.wait()
        raise AssertionError("training never started:\n" + "".join(lines))
    time.sleep(_TRAIN_SECONDS)
    process.send_signal(sig)
    sent = time.monotonic()
    try:
        rest, _ = process.communicate(timeout=_STOP_SECONDS * 3)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, time.monotonic() - sent, "".join(lines) + rest


def _stopped_step(log, program, sig_name, out):
    """The step the run's last line says it stopped and saved at."""
    last = error_lines(log)[-1]
    match = re.fullmatch(
        rf"{program}: stopped by {sig_name} at step (\d+) \(saved "
        rf"{re.escape(out)}/ckpt-(\d+)\); run the same command to resume",
        last)
    assert match, last
    assert match.group(1) == match.group(2)
    return int(match.group(1))


def _steps_on_disk(out):
    return sorted(int(m.group(1)) for m in (
        re.fullmatch(r"ckpt-(\d+)\.index", name) for name in os.listdir(out))
        if m)


@pytest.mark.slow
def test_sigterm_stops_a_classifier_in_its_loop_and_the_command_resumes(
        tiny_model_dir, tmp_path):
    data_dir = _write_sst2(str(tmp_path / "SST-2"))
    out, serving = str(tmp_path / "run"), str(tmp_path / "serving")
    flags = _classifier_flags(
        tiny_model_dir, data_dir, out, "--do_eval", "--do_predict",
        f"--export_dir={serving}", "--train_step=100000", *ENDLESS)

    code, seconds, log = _signal_when_training(
        start_program("albert_apps.run_classifier", *flags), signal.SIGTERM)
    assert code == 143, log[-3000:]
    assert seconds < _STOP_SECONDS, seconds
    assert "Traceback" not in log
    step = _stopped_step(log, "run_classifier", "SIGTERM", out)
    assert 0 < step < 100000
    assert _steps_on_disk(out) == [step]
    # Nothing after the stop: no evaluation, prediction or export.
    for name in ("eval_results.txt", "best", "SST-2.tsv"):
        assert not os.path.exists(os.path.join(out, name)), name
    assert not os.path.exists(serving)

    # The same command resumes at that step; SIGINT stops it likewise.
    code, seconds, log = _signal_when_training(
        start_program("albert_apps.run_classifier", *flags), signal.SIGINT)
    assert f"Resumed from {out}/ckpt-{step} at step {step}" in log
    assert f"Training from step {step} to 100000" in log
    assert code == 130, log[-3000:]
    assert seconds < _STOP_SECONDS, seconds
    again = _stopped_step(log, "run_classifier", "SIGINT", out)
    assert again > step
    assert _steps_on_disk(out) == [step, again]
    assert not os.path.exists(os.path.join(out, "eval_results.txt"))
    assert not os.path.exists(serving)


@pytest.mark.slow
def test_sigint_stops_pretraining_in_its_loop_and_auto_keeps_its_choice(
        tmp_path):
    data = fixtures_pretraining.write_records(str(tmp_path / "r.tfrecord"), 64)
    config = str(tmp_path / "config.json")
    AlbertConfig.from_dict(fixtures_pretraining.TINY).to_json_file(config)
    out = str(tmp_path / "out")
    flags = [f"--input_file={data}", f"--output_dir={out}",
             f"--albert_config_file={config}", "--train_batch_size=8",
             f"--max_seq_length={fixtures_pretraining.L}",
             f"--max_predictions_per_seq={fixtures_pretraining.P}",
             "--num_train_steps=100000", "--num_warmup_steps=10",
             "--learning_rate=1e-3", "--do_eval", "--eval_batch_size=8",
             "--max_eval_steps=2", *ENDLESS]

    code, seconds, log = _signal_when_training(
        start_program("albert_tf.run_pretraining", *flags), signal.SIGINT)
    assert code == 130, log[-3000:]
    assert seconds < _STOP_SECONDS, seconds
    step = _stopped_step(log, "run_pretraining", "SIGINT", out)
    assert 0 < step < 100000 and _steps_on_disk(out) == [step]
    assert not os.path.exists(os.path.join(out, "eval_results.txt"))
    choice = os.path.join(out, "jit_compile.json")
    assert (f"jit_compile=auto chose no XLA (device rule: CPU only; "
            f"recorded in {choice}; pass --jit_compile=true|false to pin "
            "it).") in log

    code, _, log = _signal_when_training(
        start_program("albert_tf.run_pretraining", *flags), signal.SIGTERM)
    assert code == 143, log[-3000:]
    assert f"Resumed from {out}/ckpt-{step} at step {step}" in log
    assert (f"jit_compile=auto: no XLA, as this run started (recorded in "
            f"{choice}; pass --jit_compile=true|false to pin it).") in log
    assert _stopped_step(log, "run_pretraining", "SIGTERM", out) > step


@pytest.mark.slow
def test_records_rebuilt_under_the_same_name_are_refused_on_resume(tmp_path):
    data = fixtures_pretraining.write_records(str(tmp_path / "r.tfrecord"), 32)
    config = str(tmp_path / "config.json")
    AlbertConfig.from_dict(fixtures_pretraining.TINY).to_json_file(config)
    out = str(tmp_path / "out")

    def flags(steps):
        return [f"--input_file={data}", f"--output_dir={out}",
                f"--albert_config_file={config}", "--train_batch_size=8",
                f"--max_seq_length={fixtures_pretraining.L}",
                f"--max_predictions_per_seq={fixtures_pretraining.P}",
                f"--num_train_steps={steps}", "--num_warmup_steps=1",
                "--save_checkpoints_steps=2", "--iterations_per_loop=2",
                "--nojit_compile"]

    done = run_program("albert_tf.run_pretraining", *flags(2))
    assert done.returncode == 0, done.stderr[-3000:]
    # Rebuilt with another vocabulary: the same name, other records.
    fixtures_pretraining.write_records(data, 32, seed=1, vocab=600)
    snapshot = Snapshot(out, data)
    refused = run_program("albert_tf.run_pretraining", *flags(4))
    line = assert_one_line_error(refused, "--input_file: the content changed",
                                 out)
    assert line.startswith("run_pretraining: error: "), line
    snapshot.assert_unchanged()
    assert _steps_on_disk(out) == [2]


@pytest.mark.slow
def test_a_run_at_chance_says_so_and_one_that_learns_does_not(tiny_model_dir,
                                                              tmp_path):
    data_dir = _write_sst2(str(tmp_path / "SST-2"))

    def steps(count, loop):
        return (f"--train_step={count}", f"--iterations_per_loop={loop}",
                f"--save_checkpoints_steps={count}", "--nojit_compile")

    # A learning rate too small to move anything: the loss stays at ln 2.
    out = str(tmp_path / "at_chance")
    stuck = run_program("albert_apps.run_classifier", *_classifier_flags(
        tiny_model_dir, data_dir, out, "--learning_rate=1e-9", *steps(20, 10)))
    assert stuck.returncode == 0, stuck.stderr[-3000:]
    # The warning is the last word of the log (absl's W prefix).
    last = stuck.stderr.strip().splitlines()[-1]
    assert last.startswith("W") and "the model has not learned" in last, last
    assert re.search(r"The training loss ended at \d\.\d+ \(step 20\), "
                     r"not 2% below chance \(0\.6931, the loss of a model "
                     r"that ignores its input\): the model has not learned\. "
                     r"Try a lower --learning_rate, a longer warm-up "
                     r"\(--warmup_step\) or another --seed\.", last), last

    out = str(tmp_path / "learns")
    learns = run_program("albert_apps.run_classifier", *_classifier_flags(
        tiny_model_dir, data_dir, out, *steps(60, 20)))
    assert learns.returncode == 0, learns.stderr[-3000:]
    assert "has not learned" not in learns.stderr
    losses = [float(m) for m in re.findall(r"step \d+/60 \(.*?\) loss (\S+)",
                                           learns.stderr)]
    # A line after the first step, then one a loop of 20.
    assert len(losses) == 4 and losses[-1] < 0.3, losses

    # The same command after train.tsv was rewritten under its name: the
    # fine-tuned weights would mix two data sets.
    _write_sst2(data_dir, flip=True)
    snapshot = Snapshot(out)
    refused = run_program("albert_apps.run_classifier", *_classifier_flags(
        tiny_model_dir, data_dir, out, *steps(80, 20)))
    assert_one_line_error(refused, "--data_dir train.tsv: the content "
                          "changed since this run started", out)
    snapshot.assert_unchanged()
