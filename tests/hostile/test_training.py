"""Hostile cases of training: `python -m albert_tf.run_pretraining` and the
one `Trainer` every training job (pretraining, fine-tuning) runs on.

Each case asserts its outcome (one line naming the flag or file at fault, or
a correct result) and, with `Snapshot`, that nothing that existed before
changed. The default set fails before TensorFlow loads (flags, the output,
the lock) or before any training (inputs, the initial checkpoint); the cases
that train, kill or race real processes are `slow`.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.hostile.common import Snapshot
from tests.hostile.common import assert_one_line_error
from tests.hostile.common import environment
from tests.hostile.common import kill_when
from tests.hostile.common import run_program
from tests.hostile.common import start_program

PROGRAM = "albert_tf.run_pretraining"
L, P = 32, 5  # The records' shape (tests/fixtures_pretraining.py's).


def _tiny_config(folder):
    """An albert_config.json of the 2-layer tiny model (no dropout)."""
    from tests import fixtures_pretraining
    path = os.path.join(folder, "albert_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(fixtures_pretraining.TINY, f)
    return path


def _flags(data, out, config, *extra):
    return (f"--input_file={data}", f"--output_dir={out}",
            f"--albert_config_file={config}", "--train_batch_size=8",
            f"--max_seq_length={L}", f"--max_predictions_per_seq={P}",
            "--num_train_steps=4", "--num_warmup_steps=1",
            "--learning_rate=0.01", "--save_checkpoints_steps=2",
            "--iterations_per_loop=2", "--nojit_compile", "--max_eval_steps=2",
            "--eval_batch_size=8", *extra)


# === Flags: refused before TensorFlow loads, nothing made ===

@pytest.mark.parametrize("flag,value", [
    ("--learning_rate", "nan"), ("--learning_rate", "-0.1"),
    ("--train_batch_size", "0"), ("--num_train_steps", "0"),
    ("--num_warmup_steps", "-1"), ("--save_checkpoints_steps", "0"),
    ("--iterations_per_loop", "0"), ("--gradient_accumulation_steps", "0"),
    ("--max_train_seconds", "-5"), ("--poly_power", "0"),
    ("--masked_lm_prob", "1.5"), ("--max_seq_length", "0"),
])
def test_a_flag_out_of_range_is_one_line_naming_it(tmp_path, flag, value):
    out = tmp_path / "out"
    before = Snapshot(tmp_path)
    result = run_program(PROGRAM, "--input_file=x.tfrecord",
                         f"--output_dir={out}", "--preset=tiny",
                         f"{flag}={value}")
    assert_one_line_error(result, flag, value)
    assert not out.exists()
    before.assert_unchanged()


# === The output: checked and locked before any work ===

def test_an_output_dir_that_is_a_file_is_refused_and_kept(tmp_path):
    out = tmp_path / "notes.txt"
    out.write_text("my notes\n")
    before = Snapshot(tmp_path)
    result = run_program(PROGRAM, "--input_file=x.tfrecord",
                         f"--output_dir={out}", "--preset=tiny")
    assert_one_line_error(result, "--output_dir", str(out), "is a file")
    before.assert_unchanged()


def test_a_read_only_output_is_refused_before_any_work(tmp_path):
    mount = tmp_path / "ro"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m",
                           "tmpfs", str(mount)], capture_output=True)
    if made.returncode:
        pytest.skip("cannot mount a read-only file system here")
    try:
        result = run_program(PROGRAM, "--input_file=x.tfrecord",
                             f"--output_dir={mount / 'run'}", "--preset=tiny")
        assert_one_line_error(result, "--output_dir", "read-only")
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


_HOLD = textwrap.dedent("""
    import sys, time
    from foundation import output_lock
    lock = output_lock.OutputLock(sys.argv[1], "run_pretraining").acquire()
    print("held", flush=True)
    time.sleep(120)
""")


def test_a_second_run_into_a_locked_output_names_the_holders_pid(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "ckpt-2.index").write_bytes(b"an earlier run's file")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)],
                              stdout=subprocess.PIPE, text=True,
                              env=environment())
    try:
        assert holder.stdout.readline().strip() == "held"
        before = Snapshot(out / "ckpt-2.index")
        result = run_program(PROGRAM, "--input_file=x.tfrecord",
                             f"--output_dir={out}", "--preset=tiny")
        assert_one_line_error(result, "--output_dir", str(out), "in use",
                              f"process {holder.pid}")
        before.assert_unchanged()
    finally:
        holder.kill()
        holder.wait()


# === Inputs and the initial checkpoint: refused before anything is written ===

def _library_run(data, out, **overrides):
    """`run_pretraining` (the program's library entry) on the tiny model."""
    from albert_tf.training import pretraining
    from tests import fixtures_pretraining
    return pretraining.run_pretraining(
        fixtures_pretraining.options(data, out, **overrides))


def _shards(folder, count, present, unfinished=()):
    """Writes shards `present` of a `-of-<count>` set (tiny records), and
    `unfinished` ones under the old unfinished name (`NAME.incomplete`)."""
    from tests import fixtures_pretraining
    os.makedirs(folder, exist_ok=True)
    for index in list(present) + list(unfinished):
        name = f"train.tfrecord-{index:05d}-of-{count:05d}"
        if index in unfinished:
            name += ".incomplete"
        fixtures_pretraining.write_records(os.path.join(folder, name), 16, seed=index)
    return os.path.join(folder, "train.tfrecord-*")


def test_a_glob_matching_a_killed_builds_unfinished_shard_is_refused(tmp_path):
    data = _shards(str(tmp_path / "data"), 2, [0], unfinished=[1])
    out = tmp_path / "out"
    before = Snapshot(tmp_path)
    with pytest.raises(ValueError, match=r"--input_file matches unfinished "
                       r"files .*00001-of-00002\.incomplete"):
        _library_run(data, str(out))
    assert not out.exists()
    before.assert_unchanged()


def test_a_shard_set_with_a_missing_shard_is_refused(tmp_path):
    data = _shards(str(tmp_path / "data"), 3, [0, 2])
    out = tmp_path / "out"
    before = Snapshot(tmp_path)
    with pytest.raises(ValueError, match=r"--input_file: the shard set .* is "
                       r"incomplete \(missing 00001 of 3 shards\)"):
        _library_run(data, str(out))
    assert not out.exists()
    before.assert_unchanged()


def test_incomplete_evaluation_shards_name_eval_input_file(tmp_path):
    data = _shards(str(tmp_path / "train"), 1, [0])
    held_out = _shards(str(tmp_path / "eval"), 2, [1])
    out = tmp_path / "out"
    before = Snapshot(tmp_path)
    with pytest.raises(ValueError, match=r"--eval_input_file: the shard set "
                       r".*missing 00000"):
        _library_run(data, str(out), eval_input_file=held_out, do_eval=True)
    assert not out.exists()
    before.assert_unchanged()


def test_a_missing_init_checkpoint_is_one_line_naming_it(tmp_path):
    data = _shards(str(tmp_path / "data"), 1, [0])
    out = tmp_path / "out"
    missing = str(tmp_path / "no_such_model")
    before = Snapshot(tmp_path)
    with pytest.raises(ValueError, match=f"--init_checkpoint={missing}: No "
                       "TensorFlow checkpoint") as error:
        _library_run(data, str(out), init_checkpoint=missing)
    assert "\n" not in str(error.value)
    assert not out.exists()
    before.assert_unchanged()


def test_a_corrupt_init_checkpoint_is_one_line_naming_it(tmp_path):
    data = _shards(str(tmp_path / "data"), 1, [0])
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.ckpt.index").write_bytes(b"\0garbage" * 64)
    (model / "model.ckpt.data-00000-of-00001").write_bytes(b"\0" * 100)
    out = tmp_path / "out"
    before = Snapshot(tmp_path)
    with pytest.raises(ValueError, match=r"--init_checkpoint=.*model.ckpt is "
                       r"(truncated or corrupt|missing files)") as error:
        _library_run(data, str(out), init_checkpoint=str(model))
    assert "\n" not in str(error.value)
    assert not out.exists()
    before.assert_unchanged()


def test_evaluation_results_are_kept_in_step_order_whatever_the_file_order(
        tmp_path):
    from albert_tf.training import results
    path = tmp_path / results.EVAL_RESULTS
    # A file whose blocks are out of step order (concatenated by hand).
    path.write_text("checkpoint = ckpt-40\nglobal_step = 40\nloss = 1.0\n\n"
                    "checkpoint = ckpt-8\nglobal_step = 8\nloss = 3.0\n\n")
    assert [r["global_step"] for r in results.read_eval_results(str(path))] \
        == [8, 40]
    results.append_eval_result(str(tmp_path), {
        "checkpoint": "ckpt-20", "global_step": 20, "loss": 2.0})
    assert [r["global_step"] for r in results.read_eval_results(str(path))] \
        == [8, 20, 40]
    text = path.read_text()
    assert text.index("ckpt-8") < text.index("ckpt-20") < text.index("ckpt-40")
    assert sorted(os.listdir(tmp_path)) == [results.EVAL_RESULTS]


# === Slow: real runs, kills and races ===

@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """Records, a config and a finished 4-step run of the program
    (`ckpt-2`, `ckpt-4`, evaluated, best/), made once; cases copy it."""
    from tests import fixtures_pretraining
    root = tmp_path_factory.mktemp("hostile_training")
    data = fixtures_pretraining.write_records(str(root / "data.tfrecord"), 48)
    other = fixtures_pretraining.write_records(str(root / "other.tfrecord"), 48, seed=7)
    config = _tiny_config(str(root))
    out = str(root / "run")
    result = run_program(PROGRAM, *_flags(data, out, config, "--do_eval"))
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(data=data, other=other, config=config, out=out)


def _copy(run, tmp_path):
    copy = str(tmp_path / "run")
    shutil.copytree(run["out"], copy)
    return copy


def _newest(out):
    import tensorflow as tf
    return tf.train.latest_checkpoint(out)


@pytest.mark.slow
def test_a_rerun_with_other_records_is_refused_before_anything_changes(
        finished_run, tmp_path):
    out = _copy(finished_run, tmp_path)
    before = Snapshot(out, finished_run["other"])
    result = run_program(PROGRAM, *_flags(
        finished_run["other"], out, finished_run["config"],
        "--num_train_steps=6"))
    assert_one_line_error(result, "--output_dir", "--input_file",
                          "other.tfrecord")
    before.assert_unchanged()


@pytest.mark.slow
def test_a_rerun_with_a_longer_schedule_resumes_and_a_corrupt_newest_checkpoint_is_skipped(  # noqa: E501
        finished_run, tmp_path):
    out = _copy(finished_run, tmp_path)
    data_file = os.path.join(out, "ckpt-4.data-00000-of-00001")
    with open(data_file, "r+b") as f:
        f.truncate(os.path.getsize(data_file) // 2)
    before = Snapshot(os.path.join(out, "ckpt-2.index"),
                      os.path.join(out, "ckpt-2.data-00000-of-00001"))
    result = run_program(PROGRAM, *_flags(
        finished_run["data"], out, finished_run["config"],
        "--num_train_steps=6", "--learning_rate=0.005"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ckpt-4 is truncated or corrupt" in result.stderr
    assert f"Resumed from {os.path.join(out, 'ckpt-2')} at step 2" in \
        result.stderr
    assert _newest(out).endswith("ckpt-6")
    before.assert_unchanged()


@pytest.mark.slow
def test_an_evaluation_of_only_truncated_checkpoints_names_the_file(
        finished_run, tmp_path):
    out = _copy(finished_run, tmp_path)
    for step in (2, 4):
        path = os.path.join(out, f"ckpt-{step}.data-00000-of-00001")
        with open(path, "r+b") as f:
            f.truncate(100)
    before = Snapshot(out)
    result = run_program(PROGRAM, *_flags(
        finished_run["data"], out, finished_run["config"], "--nodo_train",
        "--do_eval"))
    assert_one_line_error(result, "ckpt-4", "truncated or corrupt")
    before.assert_unchanged()


@pytest.mark.slow
def test_two_runs_at_once_one_is_refused_and_a_killed_runs_lock_is_taken_over(
        finished_run, tmp_path):
    out = str(tmp_path / "run")
    first = start_program(PROGRAM, *_flags(
        finished_run["data"], out, finished_run["config"],
        "--num_train_steps=200", "--save_checkpoints_steps=1",
        "--iterations_per_loop=1"))
    # SIGKILL while a checkpoint is being saved (its files exist, the
    # checkpoint list does not name it yet), else right after a save.
    lock = os.path.join(out, ".albert.lock")

    def saving():
        names = os.listdir(out) if os.path.isdir(out) else []
        return any(n.startswith("ckpt-") and "_temp" in n for n in names) or (
            "ckpt-3.index" in names)

    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(lock) and time.monotonic() < deadline:
            time.sleep(0.05)
        second = run_program(PROGRAM, *_flags(
            finished_run["data"], out, finished_run["config"]))
        assert_one_line_error(second, "--output_dir", "in use",
                              f"process {first.pid}")
        assert kill_when(first, saving, timeout=240, poll=0.002)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == -signal.SIGKILL
    before = Snapshot(finished_run["data"])
    result = run_program(PROGRAM, *_flags(
        finished_run["data"], out, finished_run["config"],
        "--num_train_steps=6"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Took over the lock" in result.stderr
    assert _newest(out).endswith("ckpt-6")
    before.assert_unchanged()


_KILL_MID_SWAP = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    import albert_tf
    from albert_tf.training import output_folder, results
    out = sys.argv[1]
    best = os.path.join(out, results.BEST_DIR)
    model = albert_tf.load_pretrained(best)
    configs = {n: json.load(open(os.path.join(best, n)))
               for n in os.listdir(best) if n.endswith(".json")}
    rename = tf.io.gfile.rename
    def rename_then_die(source, target, *args, **kwargs):
        rename(source, target, *args, **kwargs)
        if os.path.basename(target).startswith(".best.old-"):
            os._exit(9)  # SIGKILL between the two renames of the swap.
    tf.io.gfile.rename = rename_then_die
    with output_folder.hold(out, "run_pretraining"):
        results.save_best(out, model, results.best_result(out), configs)
""")


@pytest.mark.slow
def test_a_kill_while_best_is_replaced_leaves_a_whole_best_and_a_resumable_run(
        finished_run, tmp_path):
    from albert_tf.training import results
    out = _copy(finished_run, tmp_path)
    best = os.path.join(out, results.BEST_DIR)
    expected = open(os.path.join(best, results.EVAL_RESULTS)).read()
    # A folder of the user's named like the swap's hidden folders stays.
    mine = os.path.join(out, ".best.old-mine")
    os.makedirs(mine)
    open(os.path.join(mine, "notes.txt"), "w").write("mine")
    killed = subprocess.run([sys.executable, "-c", _KILL_MID_SWAP, out],
                            env=environment(), capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr[-3000:]
    assert not os.path.exists(best)
    result = run_program(PROGRAM, *_flags(
        finished_run["data"], out, finished_run["config"], "--nodo_train",
        "--do_eval"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert open(os.path.join(best, results.EVAL_RESULTS)).read() == expected
    hidden = sorted(n for n in os.listdir(out) if n.startswith(".best."))
    assert hidden == [".best.old-mine"]
    assert open(os.path.join(mine, "notes.txt")).read() == "mine"
    steps = [r["global_step"] for r in results.read_eval_results(
        os.path.join(out, results.EVAL_RESULTS))]
    assert steps == [2, 4]


@pytest.mark.slow
def test_a_full_disk_during_a_save_is_one_line_and_keeps_the_checkpoints(
        finished_run, tmp_path):
    size = sum(os.path.getsize(os.path.join(finished_run["out"], f))
               for f in os.listdir(finished_run["out"])
               if f.startswith("ckpt-2"))
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o",
                           f"size={int(size * 1.6) + 96 * 1024}", "tmpfs",
                           str(mount)], capture_output=True)
    if made.returncode:
        pytest.skip("cannot mount a small file system here")
    try:
        out = str(mount / "run")
        result = run_program(PROGRAM, *_flags(
            finished_run["data"], out, finished_run["config"],
            "--num_train_steps=8"))
        line = assert_one_line_error(result, "Could not write the checkpoint",
                                     "ckpt-")
        assert "disk" in line.lower() or "space" in line.lower(), line
        assert _newest(out).endswith("ckpt-2")
        from albert_tf.training import checkpoint
        checkpoint.check_readable(os.path.join(out, "ckpt-2"))
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
