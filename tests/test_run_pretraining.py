"""The CLI in subprocesses: SIGKILL/SIGTERM and resume; 2-worker training."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.training.schedule import WarmupPolynomialDecay
from tests import fixtures_pretraining

REPO = fixtures_pretraining.REPO
ENV = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="")
STEPS, SAVE_EVERY = 40, 5
_PROGRESS = re.compile(r"step (\d+)/(\d+)")


def _command(data, out, config_file, *extra):
    return [sys.executable, "-m", "albert_tf.run_pretraining",
            f"--input_file={data}", f"--output_dir={out}",
            f"--albert_config_file={config_file}", "--train_batch_size=8",
            f"--max_seq_length={fixtures_pretraining.L}",
            f"--max_predictions_per_seq={fixtures_pretraining.P}",
            f"--num_train_steps={STEPS}", "--num_warmup_steps=3",
            "--learning_rate=0.01", f"--save_checkpoints_steps={SAVE_EVERY}",
            "--iterations_per_loop=1", "--nojit_compile", "--alsologtostderr",
            *extra]


def _run_until(command, min_step, sig):
    """Runs the driver until it logs `min_step`, then sends `sig`."""
    proc = subprocess.Popen(command, cwd=REPO, env=ENV, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            match = _PROGRESS.search(line)
            if match and int(match.group(1)) >= min_step:
                proc.send_signal(sig)
                break
        _, rest = proc.communicate(timeout=120)
        lines.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(lines)


def _losses_by_run(out):
    """[{step: (loss, lr)}] per event file, in the order the runs wrote them."""
    directory = os.path.join(out, "train")
    runs = []
    for name in sorted(os.listdir(directory), key=lambda n: int(n.split(".")[3])):
        tags = {}
        for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
            for v in event.summary.value:
                tags.setdefault(event.step, {})[v.tag] = float(
                    tf.make_ndarray(v.tensor))
        runs.append({step: (values["loss"], values["learning_rate"])
                     for step, values in tags.items() if "learning_rate" in values})
    return runs


@pytest.mark.slow
def test_sigkill_resume_and_sigterm_save(tmp_path):
    data = fixtures_pretraining.write_records(str(tmp_path / "data.tfrecord"), 64)
    config_file = str(tmp_path / "config.json")
    AlbertConfig.from_dict(fixtures_pretraining.TINY).to_json_file(config_file)
    out = str(tmp_path / "out")
    command = _command(data, out, config_file)

    # Run 1: SIGKILL once past step 12 (checkpoints every 5 steps).
    code, log = _run_until(command, 12, signal.SIGKILL)
    assert code == -signal.SIGKILL, log[-2000:]
    killed_at = tf.train.latest_checkpoint(out)
    resumed_from = int(killed_at.rsplit("-", 1)[1])
    assert resumed_from % SAVE_EVERY == 0 and resumed_from >= 10

    # Run 2: resumes from that checkpoint; SIGTERM past step 17 saves the
    # step it came in and exits with SIGTERM's status.
    code, log = _run_until(command, 17, signal.SIGTERM)
    assert code == 143, log[-2000:]
    assert f"Resumed from {killed_at} at step {resumed_from}" in log
    preempted_at = int(tf.train.latest_checkpoint(out).rsplit("-", 1)[1])
    assert preempted_at >= 17
    assert log.rstrip().splitlines()[-1] == (
        f"run_pretraining: stopped by SIGTERM at step {preempted_at} (saved "
        f"{out}/ckpt-{preempted_at}); run the same command to resume")

    # Run 3: resumes at the SIGTERM checkpoint and finishes.
    result = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"at step {preempted_at}" in result.stderr

    first, second, third = _losses_by_run(out)
    assert min(second) == resumed_from + 1
    assert max(second) == preempted_at
    assert sorted(third) == list(range(preempted_at + 1, STEPS + 1))
    # The steps run 1 did past its checkpoint are redone identically: the
    # loss curve continues; the learning rate follows the schedule.
    overlap = sorted(set(first) & set(second))
    assert overlap and overlap[0] == resumed_from + 1
    for step in overlap:
        np.testing.assert_allclose(second[step][0], first[step][0], rtol=1e-5)
    schedule = WarmupPolynomialDecay(0.01, STEPS, 3)
    for run in (first, second, third):
        for step, (_, lr) in run.items():
            np.testing.assert_allclose(lr, schedule(step).numpy(), rtol=1e-5)
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(out))
    step_key = next(k for k in reader.get_variable_to_shape_map()
                    if k.startswith("step/"))
    assert reader.get_tensor(step_key) == STEPS


_WORKER = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    from albert_tf.training import distribute
    from tests import fixtures_pretraining

    data, out, task = sys.argv[1], sys.argv[2], int(sys.argv[3])
    strategy = distribute.get_strategy("multi_worker")
    options = fixtures_pretraining.options(data, out, num_train_steps=4,
                                           save_checkpoints_steps=2)
    runner = fixtures_pretraining.trainer(options, strategy)
    report = {"train": runner.train()}
    np.savez(os.path.join(out, f"weights_{task}.npz"),
             *[v.numpy() for v in runner.model.weights])
    print(json.dumps({"step": report["train"]["step"],
                      "loss": report["train"]["loss"]}))
""")


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_multi_worker_mirrored_two_processes(tmp_path):
    data = fixtures_pretraining.write_records(str(tmp_path / "data.tfrecord"), 32)
    out = str(tmp_path / "out")
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    procs = []
    try:
        for task in range(2):
            tf_config = {"cluster": {"worker": workers},
                         "task": {"type": "worker", "index": task}}
            procs.append(subprocess.Popen(
                [sys.executable, "-c", _WORKER, data, out, str(task)], cwd=REPO,
                env=dict(ENV, TF_CONFIG=json.dumps(tf_config)),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, stderr) in zip(procs, results):
        assert p.returncode == 0, stderr[-3000:]
    reports = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in results]
    assert [r["step"] for r in reports] == [4, 4]
    assert reports[0]["loss"] == reports[1]["loss"]
    first, second = (np.load(os.path.join(out, f"weights_{i}.npz")) for i in range(2))
    assert len(first.files) == len(second.files) > 10
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
    # Only the chief wrote checkpoints; worker scratch directories are gone.
    assert tf.train.latest_checkpoint(out).endswith("ckpt-4")
    assert not [n for n in os.listdir(out) if n.startswith("workertemp")]


def test_a_programs_report_ends_with_a_collapse_warning(monkeypatch):
    """`cli.log_report`: the named entries present, then a collapsed
    classifier's warning again, last, where a user reads the outcome."""
    from albert_tf import cli

    lines = []
    monkeypatch.setattr(cli.logging, "info",
                        lambda msg, *args: lines.append(("I", msg % args)))
    monkeypatch.setattr(cli.logging, "warning",
                        lambda msg, *args: lines.append(("W", msg % args)))
    cli.log_report({"best": 1, "export": "x", "collapse_warning": "one class"},
                   ("best", "submission", "export"))
    assert lines == [("I", "best: 1"), ("I", "export: x"), ("W", "one class")]
    lines.clear()
    cli.log_report({"best": 1}, ("best",))
    assert lines == [("I", "best: 1")]
