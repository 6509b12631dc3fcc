"""Peak memory of real training steps, next to the driver's estimate.

Each row runs in a fresh process: it builds the pretraining `Trainer` of a
preset (float32 variables, official LAMB), runs `--steps` steps of its
compiled loop on synthetic records of `--seq` tokens, and reports the peak
resident set size of that process (`ru_maxrss`), the resident size before
the first step (model and optimizer built), the time of a step, and
`albert_tf.training.memory.estimate` for the same run. The default is the
question of whether ALBERT-xxlarge trains at sequence 512 on a 24 GiB
machine: batch 2 through `--gradient_accumulation_steps=2` (micro-batch 1).

    python -m benchmarks.memory [--presets=albert_base_v2,albert_xxlarge_v2]
"""

import json
import os
import resource
import subprocess
import sys
import time

from absl import app
from absl import flags

_PRESETS = flags.DEFINE_list("presets", ["albert_base_v2", "albert_xxlarge_v2"],
                             "Presets, one row (and process) each.")
_SEQ = flags.DEFINE_integer("seq", 512, "Sequence length.")
_BATCH = flags.DEFINE_integer("batch", 2, "Sequences per step.")
_ACCUMULATION = flags.DEFINE_integer("gradient_accumulation_steps", 2,
                                     "Micro-batches per step.")
_PREDICTIONS = flags.DEFINE_integer("predictions", 20, "Masked positions.")
_STEPS = flags.DEFINE_integer("steps", 1, "Steps timed (after one warm-up).")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                           "Compute dtype (variables stay float32).")

GIB = 1024 ** 3


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(preset, seq, batch, accumulation, predictions, steps, dtype):
    """Runs the steps in this process; returns the row's numbers."""
    import tensorflow as tf

    from albert_tf import AlbertConfig
    from albert_tf.training import memory
    from albert_tf.training import pretraining
    from albert_tf.training.options import PretrainingOptions
    from albert_tf.training.trainer import build_trainer
    from benchmarks.synthetic import synthetic_batch

    runtime = _rss_bytes()  # TensorFlow loaded, nothing built.
    config = AlbertConfig.from_preset(preset)
    options = PretrainingOptions(
        input_file="unused", output_dir="unused", config=config,
        train_batch_size=batch, max_seq_length=seq,
        max_predictions_per_seq=predictions, num_train_steps=10**6,
        num_warmup_steps=10, gradient_accumulation_steps=accumulation,
        dtype=dtype, jit_compile=False)
    trainer = build_trainer(pretraining.PretrainingTask(options), options)
    train_loop = trainer.compiled_loop()
    features = synthetic_batch(config, batch, seq, predictions)
    dataset = tf.data.Dataset.from_tensors(features).repeat()
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    built = _rss_bytes()
    train_loop(iterator, tf.constant(1))[0].numpy()  # Traces, warms up.
    start = time.perf_counter()
    train_loop(iterator, tf.constant(steps))[0].numpy()
    seconds = (time.perf_counter() - start) / steps
    estimate = memory.estimate(config, trainer.model.count_params(), seq,
                               batch // accumulation, dtype, accumulation,
                               predictions)
    return {"preset": preset, "params": trainer.model.count_params(),
            "rss_runtime": runtime, "rss_built": built,
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "seconds_per_step": seconds, "estimate": estimate}


def _child(argv):
    row = measure(*json.loads(argv[0]))
    print("ROW " + json.dumps(row))


def main(argv):
    del argv
    from albert_tf.training import hardware

    print(f"Peak memory of pretraining steps: seq {_SEQ.value}, batch "
          f"{_BATCH.value} in {_ACCUMULATION.value} micro-batches, "
          f"{_PREDICTIONS.value} predictions, {_DTYPE.value}, LAMB")
    print(f"Hardware: {hardware.describe()}")
    print("GiB columns: resident set size with TensorFlow loaded (runtime), "
          "with the model and optimizer built (built), the peak over the "
          "steps (peak), the peak less the runtime (used), and the driver's "
          "estimate of the step's parameters, optimizer and activations.")
    print(f"{'preset':20s} {'params':>8s} {'runtime':>8s} {'built':>7s} "
          f"{'peak':>7s} {'used':>7s} {'estimate':>9s} {'s/step':>8s}")
    for preset in _PRESETS.value:
        args = [preset, _SEQ.value, _BATCH.value, _ACCUMULATION.value,
                _PREDICTIONS.value, _STEPS.value, _DTYPE.value]
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.memory", "--child",
             json.dumps(args)], capture_output=True, text=True)
        rows = [line[4:] for line in done.stdout.splitlines()
                if line.startswith("ROW ")]
        if done.returncode or not rows:
            tail = done.stderr.strip().splitlines()[-3:]
            print(f"{preset:20s} failed (exit {done.returncode}): "
                  + " | ".join(tail))
            continue
        row = json.loads(rows[0])
        print(f"{preset:20s} {row['params'] / 1e6:7.1f}M "
              f"{row['rss_runtime'] / GIB:8.2f} {row['rss_built'] / GIB:7.2f} "
              f"{row['peak_rss'] / GIB:7.2f} "
              f"{(row['peak_rss'] - row['rss_runtime']) / GIB:7.2f} "
              f"{row['estimate']['total'] / GIB:9.2f} "
              f"{row['seconds_per_step']:8.1f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        app.run(main)
