"""Stop means stop: a signal in the middle of a compiled loop ends it after
the step it came in, that step is saved (a second signal does not cut the
save short), and nothing follows."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.training import pretraining
from albert_tf.training import stop_signals
from albert_tf.training.errors import TrainingStopped
from tests import fixtures_pretraining

REPO = fixtures_pretraining.REPO


class SignalAtBatch(pretraining.PretrainingTask):
    """Sends `sig` to this process when the input pipeline makes its
    `batch`-th training batch (of a run from step 0): from a tf.data
    thread, while the main thread is inside the compiled loop."""

    def __init__(self, options, batch, sig=signal.SIGTERM):
        super().__init__(options)
        self.batch, self.sig = batch, sig

    def train_dataset(self, input_context, global_batch_size, skip_batches):
        dataset = super().train_dataset(input_context, global_batch_size,
                                        skip_batches)
        if skip_batches:
            return dataset

        def send(index):
            if int(index) == self.batch:
                os.kill(os.getpid(), self.sig)
            return index

        def tap(index, batch):
            sent = tf.py_function(send, [index], tf.int64)
            with tf.control_dependencies([sent]):
                return tf.nest.map_structure(tf.identity, batch)

        return dataset.enumerate().map(tap)


def _options(data, out, **overrides):
    # One loop would be the whole run: no checkpoint before the last step.
    values = dict(num_train_steps=16, iterations_per_loop=100000,
                  save_checkpoints_steps=100000, do_eval=True)
    values.update(overrides)
    return fixtures_pretraining.options(data, out, **values)


def _trainer(task_cls, opts, *args, strategy=None):
    keras.utils.set_random_seed(opts.seed)  # As the programs do.
    return fixtures_pretraining.trainer(opts, strategy, task_cls(opts, *args))


def _weights(runner):
    return [v.numpy() for v in runner.model.trainable_variables]


def test_a_signal_ends_the_loop_after_its_step_saves_it_and_stops(tmp_path):
    data = fixtures_pretraining.write_records(str(tmp_path / "data.tfrecord"), 40)
    out = str(tmp_path / "out")
    opts = _options(data, out)
    handler = signal.getsignal(signal.SIGTERM)
    runner = _trainer(SignalAtBatch, opts, 8)
    save = runner.checkpoints.save

    def save_with_a_second_signal():
        # Ctrl-C while the stop's checkpoint is written: no effect.
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        return save()

    runner.checkpoints.save = save_with_a_second_signal
    with pytest.raises(TrainingStopped) as stopped:
        runner.train()
    stop = stopped.value
    # The signal came while the pipeline made batch 8 (it runs ahead of
    # the steps by its prefetch): a step near it, not the loop's end.
    assert 0 < stop.step <= 9
    assert (stop.signal_name, stop.exit_status) == ("SIGTERM", 143)
    assert stop.checkpoint == os.path.join(out, f"ckpt-{stop.step}")
    assert tf.train.latest_checkpoint(out) == stop.checkpoint
    checkpoint_lib.check_readable(stop.checkpoint)  # Whole.
    # The step counter and the schedule's step are the steps done.
    assert int(runner.step.numpy()) == stop.step
    assert int(runner.optimizer.iterations.numpy()) == stop.step
    # Nothing evaluated after the signal; the handlers are back.
    assert not os.path.exists(os.path.join(out, "eval_results.txt"))
    assert signal.getsignal(signal.SIGTERM) is handler
    assert str(stop) == (f"stopped by SIGTERM at step {stop.step} (saved "
                         f"{stop.checkpoint}); run the same command to resume")

    # Resumed to the end, it equals a run never stopped: the data position
    # and the schedule continue exactly.
    resumed = _trainer(pretraining.PretrainingTask, _options(
        data, out, do_eval=False))
    assert resumed.train()["step"] == 16
    straight = _trainer(pretraining.PretrainingTask, _options(
        data, str(tmp_path / "straight"), do_eval=False))
    straight.train()
    for a, b in zip(_weights(resumed), _weights(straight)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_flag_is_cleared_at_each_start_and_requests_count_once():
    stop = stop_signals.StopSignals()
    with stop.catching():
        stop.request(signal.SIGINT)
        stop.request(signal.SIGTERM)  # A second signal changes nothing.
        assert stop.requested and bool(stop.flag.numpy())
        assert stop.signal_name == "SIGINT"
    with stop.catching():
        assert not stop.requested and not bool(stop.flag.numpy())


def test_a_signal_while_caught_sets_the_flag_and_kills_nothing():
    stop = stop_signals.StopSignals()
    with stop.catching():
        os.kill(os.getpid(), signal.SIGINT)
        # Set by the watcher thread or by the handler, whichever is first.
        for _ in range(200):
            if bool(stop.flag.numpy()):
                break
            time.sleep(0.01)
        assert stop.signal_name == "SIGINT" and bool(stop.flag.numpy())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# A stop under 2 mirrored replicas (2 logical CPUs), the loop compiled with
# XLA: prints the step stopped at and the step counters.
_MIRRORED = textwrap.dedent("""
    import os, signal, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from albert_tf.training.errors import TrainingStopped
    from tests.test_stop_signals import SignalAtBatch, _options, _trainer

    data, out = sys.argv[1], sys.argv[2]
    opts = _options(data, out, jit_compile=True)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    runner = _trainer(SignalAtBatch, opts, 3, signal.SIGINT,
                      strategy=strategy)
    try:
        runner.train()
    except TrainingStopped as stop:
        print(stop.step, stop.exit_status, int(runner.step.numpy()),
              int(runner.optimizer.iterations.numpy()),
              tf.train.latest_checkpoint(out))
""")


@pytest.mark.slow
def test_a_signal_stops_mirrored_replicas_compiled_with_xla(tmp_path):
    data = fixtures_pretraining.write_records(str(tmp_path / "data.tfrecord"), 40)
    out = str(tmp_path / "out")
    done = subprocess.run(
        [sys.executable, "-c", _MIRRORED, data, out], cwd=REPO,
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="",
                 TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    step, status, counter, iterations, latest = (
        done.stdout.strip().splitlines()[-1].split())
    assert 0 < int(step) <= 4 and status == "130"
    assert counter == iterations == step
    assert latest == os.path.join(out, f"ckpt-{step}")
