"""The main job's training rate with `--jit_compile=auto` and each fixed choice.

Builds the quickstart's corpus, vocabulary and records once (in `--work_dir`,
a temporary folder by default), then pretrains the quickstart's model on them
with the quickstart's options for `--steps` steps, three ways: auto (the
default: a device rule, recorded with the run), XLA and no XLA.
Each run starts from scratch in its own folder, without evaluation; the runs
are taken in turn, `--repeats` rounds. Reported per way: the median whole-run
rate (compilation included: what a user waits for) and the median rate of
the last loop (the settled speed), and what auto chose.

    python -m benchmarks.quickstart_rate [--steps=600 --repeats=1]
"""

import dataclasses
import json
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags

_STEPS = flags.DEFINE_integer("steps", 600, "Training steps per run.")
_REPEATS = flags.DEFINE_integer("repeats", 1, "Rounds of the three runs.")
_WORK_DIR = flags.DEFINE_string("work_dir", None, "Data and runs (default: a "
                                "temporary folder).")

WAYS = {"auto": None, "xla": True, "no_xla": False}


def build_data(data_dir):
    """The quickstart's corpus, vocabulary and records, with its defaults."""
    from albert_apps.quickstart import build_records
    from albert_apps.quickstart import build_vocabulary
    from albert_apps.quickstart import write_corpus

    corpus = write_corpus(data_dir, None, 2_000_000)
    vocabulary = build_vocabulary(corpus, data_dir, 2000, 2)
    records = build_records(corpus, vocabulary, data_dir, dupe_factor=5,
                            max_seq_length=64)
    return vocabulary, records


def run_once(vocabulary, records, output_dir, jit_compile, steps):
    """Pretrains `steps` steps one way; returns its rates and choice."""
    from albert_apps.quickstart import model_config
    from albert_apps.quickstart import pretraining_options
    from albert_tf.training import pretraining
    from albert_tf.training import xla_autotune

    config = model_config(vocabulary.pieces, 64)
    options = pretraining_options(
        records, config, output_dir, max_seq_length=64, num_train_steps=steps,
        train_seconds=0, save_checkpoints_steps=steps)
    options = dataclasses.replace(options, jit_compile=jit_compile,
                                  do_eval=False)
    start = time.perf_counter()
    result = pretraining.run_pretraining(options)
    seconds = time.perf_counter() - start
    choice_file = os.path.join(output_dir, xla_autotune.CHOICE_FILE)
    chosen = None
    if os.path.exists(choice_file):
        with open(choice_file) as f:
            chosen = json.load(f)["jit_compile"]
    train = result["train"]
    return {"whole_run": steps * options.train_batch_size / seconds,
            "last_loop": train["examples_per_second"], "chosen": chosen}


def main(argv):
    del argv
    from albert_tf.training import hardware

    work_dir = _WORK_DIR.value or tempfile.mkdtemp(prefix="quickstart_rate_")
    os.makedirs(os.path.join(work_dir, "data"), exist_ok=True)
    vocabulary, records = build_data(os.path.join(work_dir, "data"))
    results = {way: [] for way in WAYS}
    for round_index in range(_REPEATS.value):
        for way, jit_compile in WAYS.items():
            output_dir = os.path.join(work_dir, f"{way}_{round_index}")
            results[way].append(run_once(vocabulary, records, output_dir,
                                         jit_compile, _STEPS.value))
    print(f"Hardware: {hardware.describe()}")
    print(f"Quickstart pretraining, {_STEPS.value} steps per run, medians of "
          f"{_REPEATS.value} round(s); examples/s")
    print(f"{'jit_compile':12s} {'whole run':>10s} {'last loop':>10s} "
          f"{'auto chose':>11s}")
    for way, runs in results.items():
        chosen = ", ".join("xla" if r["chosen"] else "no_xla"
                           for r in runs if r["chosen"] is not None)
        print(f"{way:12s} {statistics.median(r['whole_run'] for r in runs):10.1f} "
              f"{statistics.median(r['last_loop'] for r in runs):10.1f} "
              f"{chosen or '-':>11s}")


if __name__ == "__main__":
    app.run(main)
