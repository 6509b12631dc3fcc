"""`--jit_compile=auto`: XLA or not, chosen by timing the run's own steps.

Which is faster depends on the model, the batch and the device: on one CPU
TensorFlow's own kernels won for ALBERT-base's step and XLA for the main
job's small model (docs/benchmarks.md). So the first
steps of a run are trained both ways, in turn: one window each way first
(it compiles), then `REPEATS` windows each way, timed. The faster (median
seconds per step) is used for the rest of the run and written to
`<output_dir>/jit_compile.json`; a rerun on the same device, dtype and batch
reads it instead of timing again. The trial steps are real training steps
(nothing is thrown away), so the choice costs one extra compilation.

TPUs always use XLA. A run shorter than `MIN_STEPS` steps, or one spread
over several workers (each would time its own), takes the device rule
instead: XLA on TPUs and GPUs, not on a CPU-only machine.
"""

import json
import os
import statistics

import tensorflow as tf
from absl import logging

from albert_tf.training import hardware
from albert_tf.training.options import parse_jit_compile

CHOICE_FILE = "jit_compile.json"
WINDOW_STEPS = 5
REPEATS = 3
MIN_STEPS = 300


def device_rule(strategy):
    """XLA on TPUs and GPUs, where it is the fast path; not on CPUs."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    return bool(hardware.accelerators())


def _multi_worker(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver else {}
    return sum(len(tasks) for tasks in spec.values()) > 1


def run_key(options, strategy, dtype):
    """What the remembered choice holds for: device, dtype, batch shape."""
    return {"device": hardware.describe(),
            "replicas": strategy.num_replicas_in_sync,
            "dtype": dtype,
            "train_batch_size": options.train_batch_size,
            "gradient_accumulation_steps": options.gradient_accumulation_steps}


def read_remembered(output_dir, key):
    """The remembered choice for `key` in `output_dir`, else None."""
    path = os.path.join(output_dir, CHOICE_FILE)
    if not tf.io.gfile.exists(path):
        return None
    try:
        with tf.io.gfile.GFile(path) as f:
            record = json.load(f)
    except (ValueError, tf.errors.OpError):
        return None  # Unreadable: time again.
    if record.get("key") != key:
        return None
    return record


class Chooser:
    """Alternates the two ways over the first windows, then picks one.

    Args:
        window_steps: steps per timed window.
        repeats: timed windows each way (after one untimed window each).
    """

    def __init__(self, window_steps=WINDOW_STEPS, repeats=REPEATS):
        self.window_steps = window_steps
        self.repeats = repeats
        self._order = [False, True] * (repeats + 1)
        self._seconds = {False: [], True: []}
        self._windows = 0

    @property
    def done(self):
        return self._windows >= len(self._order)

    def next_variant(self):
        """The `jit_compile` value of the next window."""
        return self._order[self._windows]

    def record(self, jit_compile, seconds, steps):
        """Times a finished window (the first of each way is not counted)."""
        if self._windows >= 2:
            self._seconds[jit_compile].append(seconds / max(steps, 1))
        self._windows += 1

    def medians(self):
        """`{"xla": s, "no_xla": s}`: median seconds per step each way."""
        return {("xla" if jit else "no_xla"): statistics.median(values)
                for jit, values in self._seconds.items()}

    @property
    def choice(self):
        medians = self.medians()
        return medians["xla"] < medians["no_xla"]


def start(options, strategy, start_step, dtype):
    """Resolves `options.jit_compile` at the start of a run.

    Args:
        options: the job's `TrainingOptions`.
        strategy: the run's strategy.
        start_step: the step the run starts (or resumes) at.
        dtype: the resolved `--dtype` ("float32" or "bfloat16").

    Returns:
        `(jit_compile, chooser)`: a bool and None when decided (explicit,
        TPU, remembered, too short, multi-worker), else None and a
        `Chooser` for the first windows.
    """
    explicit = parse_jit_compile(options.jit_compile)
    if explicit is not None:
        return explicit, None
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return True, None
    remembered = read_remembered(options.output_dir,
                                 run_key(options, strategy, dtype))
    if remembered is not None:
        logging.info("jit_compile=auto: %s, as measured before (%s in %s).",
                     remembered["jit_compile"],
                     _format(remembered["seconds_per_step"]),
                     os.path.join(options.output_dir, CHOICE_FILE))
        return bool(remembered["jit_compile"]), None
    rule = device_rule(strategy)
    if options.num_steps - start_step < MIN_STEPS or _multi_worker(strategy):
        logging.info("jit_compile=auto: %s (device rule; the run is too short "
                     "or spread over workers to time both ways).", rule)
        return rule, None
    return None, Chooser(WINDOW_STEPS, REPEATS)


def _format(seconds_per_step):
    return ", ".join(f"{name} {1e3 * value:.1f} ms/step"
                     for name, value in sorted(seconds_per_step.items()))


def finish(options, strategy, chooser, dtype, is_chief=True):
    """Logs the timed choice and remembers it (chief only); returns it."""
    medians = chooser.medians()
    logging.info("jit_compile=auto: %s (%s; medians of %d windows of %d "
                 "steps each way).", chooser.choice, _format(medians),
                 chooser.repeats, chooser.window_steps)
    if is_chief:
        record = {"jit_compile": chooser.choice, "seconds_per_step": medians,
                  "key": run_key(options, strategy, dtype)}
        tf.io.gfile.makedirs(options.output_dir)
        with tf.io.gfile.GFile(os.path.join(options.output_dir,
                                             CHOICE_FILE), "w") as f:
            json.dump(record, f, indent=2)
    return chooser.choice


class LoopRunner:
    """Runs the training loops with the run's `jit_compile`; while a
    `Chooser` times the first windows, each loop is one window of the way
    it names, and the choice is made (`finish`) when the last one ends.

    Args:
        run_loop: `run_loop(jit_compile, num_steps)` runs a compiled loop
            and returns `(stats, steps done, seconds)`.
        jit_compile: the decided value (None while `chooser` times).
        chooser: a `Chooser`, or None when decided.
        finish: `finish(chooser)` returns the choice once `chooser` is done.
    """

    def __init__(self, run_loop, jit_compile, chooser=None, finish=None):
        self._run_loop = run_loop
        self.jit_compile = jit_compile
        self._chooser = chooser
        self._finish = finish

    def __call__(self, num_steps):
        """Runs up to `num_steps` steps; returns what `run_loop` returns."""
        chooser = self._chooser
        if chooser is None:
            return self._run_loop(self.jit_compile, num_steps)
        jit = chooser.next_variant()
        result = self._run_loop(jit, min(num_steps, chooser.window_steps))
        _, steps, seconds = result
        chooser.record(jit, seconds, steps)
        if chooser.done:
            self.jit_compile = self._finish(chooser)
            self._chooser = None
        return result


def loop_runner(run_loop, options, strategy, start_step, dtype,
                is_chief=True):
    """The `LoopRunner` of a run: `options.jit_compile` resolved at its
    start (`start`), the timed choice remembered when made (`finish`).

    Args:
        run_loop: see `LoopRunner`.
        options, strategy, start_step, dtype: see `start`.
        is_chief: whether this process writes the choice's file.
    """
    jit, chooser = start(options, strategy, start_step, dtype)
    return LoopRunner(run_loop, jit, chooser, lambda chooser: finish(
        options, strategy, chooser, dtype, is_chief))
