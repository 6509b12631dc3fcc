import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.training import losses
from albert_tf.training import pretraining as train_lib
from albert_tf.training.results import read_eval_results
from tests.fixtures_pretraining import REPO
from tests.fixtures_pretraining import TINY
from tests.fixtures_pretraining import batches
from tests.fixtures_pretraining import options
from tests.fixtures_pretraining import trainer
from tests.fixtures_pretraining import write_records

# For the XLA-compiled steps, whose compile time grows with the depth: what
# they check (the optimizer inside the step, the dtypes) does not.
ONE_LAYER = AlbertConfig.from_dict(dict(TINY, num_hidden_layers=1))


def read_scalars(directory, tag):
    """{step: value} of a scalar tag in the event files of `directory`."""
    values = {}
    for name in sorted(tf.io.gfile.listdir(directory)):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(tf.make_ndarray(value.tensor))
    return values


def test_jit_compiled_step_under_mixed_bfloat16(tmp_path):
    # Under OneDeviceStrategy, the driver's default on one CPU or GPU: the
    # whole step, optimizer included, is one XLA program.
    data = write_records(str(tmp_path / "data.tfrecord"), 32)
    runner = trainer(options(
        data, str(tmp_path / "out"), dtype="bfloat16", jit_compile=True,
        config=ONE_LAYER), tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert runner.model.encoder.embedding.compute_dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in runner.model.trainable_variables)
    before = [v.numpy() for v in runner.model.trainable_variables]
    iterator = runner._train_iterator(0)
    stats, diverged = runner.compiled_loop()(iterator, tf.constant(2))
    assert not diverged
    metrics = losses.metrics_from_stats(stats)
    assert np.isfinite(metrics["loss"].numpy())
    assert int(runner.step.numpy()) == 2
    assert int(runner.optimizer.iterations.numpy()) == 2
    changed = [not np.array_equal(b, v.numpy())
               for b, v in zip(before, runner.model.trainable_variables)]
    assert all(changed)



# Two XLA compiles of the step: with the slow tests. The default set compiles
# the OneDeviceStrategy step once (test_jit_compiled_step_under_mixed_bfloat16).
@pytest.mark.slow
def test_one_device_strategy_xla_step_matches_default_strategy(tmp_path):
    """The optimizer update inside the replica step under OneDeviceStrategy
    (the driver's CPU default) gives the default strategy's weights."""
    import keras

    data = write_records(str(tmp_path / "data.tfrecord"), 16)
    results = []
    for strategy in (None, tf.distribute.OneDeviceStrategy("/cpu:0")):
        keras.utils.set_random_seed(1)
        runner = trainer(options(
            data, str(tmp_path / "out"), jit_compile=True, config=ONE_LAYER),
            strategy)
        stats, _ = runner.compiled_loop()(batches(runner, data), tf.constant(2))
        assert int(runner.optimizer.iterations.numpy()) == 2
        results.append((stats.numpy(),
                        [v.numpy() for v in runner.model.trainable_variables]))
    (default_stats, default_weights), (one_stats, one_weights) = results
    np.testing.assert_allclose(one_stats, default_stats, rtol=1e-6)
    for a, b in zip(one_weights, default_weights):
        np.testing.assert_allclose(a, b, atol=1e-6)


_MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import numpy as np
    from tests.fixtures_pretraining import batches, options, trainer

    data, out = sys.argv[1], sys.argv[2]
    def run(strategy, **kw):
        runner = trainer(
            options(data, out, train_batch_size=8, **kw), strategy)
        if reference is not None:
            for v, w in zip(runner.model.weights, reference):
                v.assign(w)
        stats, _ = runner.compiled_loop()(batches(runner, data), tf.constant(2))
        return stats.numpy(), [v.numpy() for v in runner.model.weights]

    reference = None
    import keras
    keras.utils.set_random_seed(1)
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    reference = [v.numpy() for v in trainer(
        options(data, out), one).model.weights]
    single = run(one)
    mirrored = run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    accumulated = run(one, gradient_accumulation_steps=2)
    def diff(a, b):
        return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
    print(json.dumps({
        "stats": [single[0].tolist(), mirrored[0].tolist(), accumulated[0].tolist()],
        "mirrored_weight_diff": diff(single[1], mirrored[1]),
        "accumulated_weight_diff": diff(single[1], accumulated[1]),
        "weight_change": diff(single[1], reference),
    }))
""")


@pytest.mark.slow
def test_mirrored_and_accumulation_match_single_device(tmp_path):
    """2 logical CPUs (and 2 micro-batches) vs one device, same global batch."""
    data = write_records(str(tmp_path / "data.tfrecord"), 16)
    result = subprocess.run(
        [sys.executable, "-c", _MIRRORED_SCRIPT, data, str(tmp_path / "out")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES=""))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    single, mirrored, accumulated = (np.array(s) for s in report["stats"])
    np.testing.assert_allclose(mirrored, single, rtol=1e-5)
    np.testing.assert_allclose(accumulated, single, rtol=1e-5)
    assert report["weight_change"] > 1e-3
    assert report["mirrored_weight_diff"] < 1e-6
    assert report["accumulated_weight_diff"] < 1e-6


@pytest.mark.slow
def test_train_resume_eval_and_summaries(tmp_path):
    data = write_records(str(tmp_path / "data.tfrecord"), 40)
    out = str(tmp_path / "out")
    report = train_lib.run_pretraining(options(data, out, do_eval=True))
    assert report["train"]["step"] == 4
    assert sorted(tf.io.gfile.listdir(out)) == sorted([
        "albert_config.json", "albert_run.json", "best", "checkpoint",
        "jit_compile.json", "ckpt-2.index",
        "ckpt-2.data-00000-of-00001", "ckpt-4.index",
        "ckpt-4.data-00000-of-00001", "eval", "eval_results.txt", "train"])
    results = report["eval_results"]
    assert [r["checkpoint"] for r in results] == ["ckpt-2", "ckpt-4"]
    assert set(losses.METRIC_NAMES) <= set(results[0])
    best = read_eval_results(os.path.join(out, "best", "eval_results.txt"))
    assert best[0]["masked_lm_accuracy"] == max(
        r["masked_lm_accuracy"] for r in results)
    # Training scalars come with each compiled call (the first two are one
    # step each: the compiling step, then a warm one), checkpoints with
    # `save_checkpoints_steps`.
    assert sorted(read_scalars(os.path.join(out, "train"), "loss")) == [
        1, 2, 4]
    lr = read_scalars(os.path.join(out, "train"), "learning_rate")
    np.testing.assert_allclose(lr[2], 1e-2 * (1 - 2 / 4), rtol=1e-6)
    assert sorted(read_scalars(os.path.join(out, "eval"),
                               "masked_lm_accuracy")) == [2, 4]

    # Longer run in the same directory: resumes at 4, trains 4 -> 6 only.
    more = train_lib.run_pretraining(options(data, out, num_train_steps=6))
    assert more["train"]["step"] == 6
    assert sorted(read_scalars(os.path.join(out, "train"), "loss"))[-1] == 6
    assert tf.train.latest_checkpoint(out).endswith("ckpt-6")
    done = train_lib.run_pretraining(options(data, out, num_train_steps=6))
    assert done["train"]["step"] == 6

    # Evaluation only: the checkpoints not yet evaluated (ckpt-6).
    evaluated = train_lib.run_pretraining(options(
        data, out, num_train_steps=6, do_train=False, do_eval=True))
    assert [r["checkpoint"] for r in evaluated["eval_results"]][-1] == "ckpt-6"


def test_max_train_seconds_stops_saves_and_resumes(tmp_path, monkeypatch):
    data = write_records(str(tmp_path / "data.tfrecord"), 40)
    out = str(tmp_path / "out")
    clock = [1000.0]
    from albert_tf.training import trainer as trainer_lib

    monkeypatch.setattr(trainer_lib.time, "time", lambda: clock[0])
    runner = trainer(options(
        data, out, num_train_steps=8, save_checkpoints_steps=4,
        iterations_per_loop=1, max_train_seconds=10, do_eval=True))
    loop = None
    seconds_per_loop = [4.0]

    def timed_loop(iterator, num_steps):
        clock[0] += seconds_per_loop[0]  # 4 s a loop, until resumed below.
        return loop(iterator, num_steps)

    loop = runner.compiled_loop()
    monkeypatch.setattr(runner.loops, "get", lambda jit: timed_loop)
    result = runner.train()
    # Loops start at 0, 4 and 8 s; the 4th would start at 12 s > 10 s.
    assert result["timed_out"] and result["step"] == 3
    assert tf.train.latest_checkpoint(out).endswith("ckpt-3")
    assert [r["checkpoint"] for r in read_eval_results(
        os.path.join(out, "eval_results.txt"))] == ["ckpt-3"]
    # A later run resumes from it, and its own 10 s are not spent. (A new
    # process resuming the directory: test_train_resume_eval_and_summaries,
    # with the slow tests.)
    seconds_per_loop[0] = 0.0
    result = runner.train()
    assert result["step"] == 8 and not result["timed_out"]
    assert [h[0] for h in result["history"]] == [4, 5, 6, 7, 8]
    assert tf.train.latest_checkpoint(out).endswith("ckpt-8")


def test_invalid_options(tmp_path):
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        options("x", "y", train_batch_size=6, gradient_accumulation_steps=4).validate()
    with pytest.raises(ValueError, match="dtype"):
        options("x", "y", dtype="float16").validate()
    with pytest.raises(ValueError, match="do_eval"):
        train_lib.run_pretraining(options("x", "y", do_train=False))
