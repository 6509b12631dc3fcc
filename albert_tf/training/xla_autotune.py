"""`--jit_compile=auto`: XLA or not by a fixed rule, recorded with the run.

XLA and TensorFlow's own kernels compute a step with different rounding, and
a run on the edge of learning can end in a different place either way. So
`auto` never decides by timing (a busy machine would change the result of
the same command and seed): it takes the device rule, XLA on TPUs and GPUs
(the fast path there) and not on a CPU-only machine. The choice a run trains
with is recorded in `<output_dir>/jit_compile.json` when it starts; a
resumed run or the same command again reads it back with `auto`, whatever
the device is then, so one run trains one way throughout. `--jit_compile=
true|false` pins it (and is recorded the same way). TPUs always use XLA.
See docs/training_runs.md.
"""

import json
import os

import tensorflow as tf
from absl import logging

from albert_tf.training import hardware
from albert_tf.training.options import parse_jit_compile
from foundation import safe_io

CHOICE_FILE = "jit_compile.json"
_PIN = "pass --jit_compile=true|false to pin it"


def device_rule(strategy):
    """XLA on TPUs and GPUs, where it is the fast path; not on CPUs."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    return bool(hardware.accelerators())


def _describe(jit_compile):
    return "XLA" if jit_compile else "no XLA"


def read_recorded(output_dir):
    """The choice recorded in `output_dir` (a bool), else None (no record,
    or one that does not read: logged)."""
    path = os.path.join(output_dir, CHOICE_FILE)
    if not tf.io.gfile.exists(path):
        return None
    try:
        with tf.io.gfile.GFile(path) as f:
            choice = json.load(f).get("jit_compile")
    except (ValueError, AttributeError, tf.errors.OpError):
        choice = None
    if not isinstance(choice, bool):
        logging.warning("%s does not read as a --jit_compile record: "
                        "deciding again and rewriting it.", path)
        return None
    return choice


def _record(output_dir, jit_compile, how):
    """Writes the run's choice atomically."""
    record = {"jit_compile": jit_compile, "how": how,
              "device": hardware.describe()}
    tf.io.gfile.makedirs(output_dir)
    safe_io.write_atomically(os.path.join(output_dir, CHOICE_FILE),
                             json.dumps(record, indent=2) + "\n")


def resolve(options, strategy, is_chief=True):
    """The `jit_compile` a run trains with, logged and recorded.

    Args:
        options: the job's `TrainingOptions`.
        strategy: the run's strategy.
        is_chief: whether this process writes the record.

    Returns:
        True (XLA) or False.
    """
    explicit = parse_jit_compile(options.jit_compile)
    path = os.path.join(options.output_dir, CHOICE_FILE)
    recorded = read_recorded(options.output_dir)
    if isinstance(strategy, tf.distribute.TPUStrategy):
        choice, how = True, "TPUs always compile with XLA"
    elif explicit is not None:
        choice, how = explicit, f"--jit_compile={str(explicit).lower()}"
    elif recorded is not None:
        logging.info("jit_compile=auto: %s, as this run started (recorded "
                     "in %s; %s).", _describe(recorded), path, _PIN)
        return recorded
    else:
        choice = device_rule(strategy)
        kinds = sorted(hardware.accelerators())
        how = "device rule: " + (" and ".join(kinds) if kinds else "CPU only")
    if explicit is None:
        logging.info("jit_compile=auto chose %s (%s; recorded in %s; %s).",
                     _describe(choice), how, path, _PIN)
    if is_chief and recorded is not choice:
        _record(options.output_dir, choice, how)
    return choice
