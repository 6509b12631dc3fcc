"""Learning check of the record order: chunk order against the global order.

Builds the quickstart's corpus, vocabulary and held-out records once (in
`--work_dir`), and its training records twice from the same text, seed and
settings: in the chunk order (`--noglobal_shuffle`: each ~1 MB chunk with
all `dupe_factor` maskings of its documents, shuffled within itself, chunks
in corpus order) and in the global random order (the default). Then it
pretrains the quickstart's model for `--steps` steps on each, for every
seed of `--seeds` (the same seeds for both orders: model initialisation and
the reader's shuffles), with the quickstart's reader and options, and
evaluates the last checkpoint on every held-out instance.

Prints one row per run and the mean and spread (sample standard deviation)
per order of the held-out masked-LM loss and accuracy and the SOP loss and
accuracy, and each output's block-divergence ratio (`data_prep.mixing`).

    python -m benchmarks.data_order [--steps=1200] [--seeds=0,1] \
        [--input_file=TEXT]
"""

import dataclasses
import json
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags

_STEPS = flags.DEFINE_integer("steps", 1200, "Training steps per run.")
_SEEDS = flags.DEFINE_string("seeds", "0,1", "Training seeds (comma list).")
_CORPUS_CHARS = flags.DEFINE_integer(
    "corpus_chars", 3_000_000, "Text of the corpus (the quickstart's cap).")
_DUPE_FACTOR = flags.DEFINE_integer(
    "dupe_factor", 10, "Maskings of each training document (the quickstart's).")
_INPUT_FILE = flags.DEFINE_string(
    "input_file", None, "Text to use instead of the built-in corpus (the "
    "quickstart's --input_file; e.g. a corpus of another domain written by "
    "benchmarks.other_domains).")
_WORK_DIR = flags.DEFINE_string("work_dir", None, "Data and runs (default: a "
                                "temporary folder).")

ORDERS = ("chunk", "global")
CACHE_JSON = "data_order.json"
METRICS = ("masked_lm_loss", "masked_lm_accuracy", "sop_loss", "sop_accuracy")


def build_data(data_dir, corpus_chars, dupe_factor, input_file=None):
    """The quickstart's data with the training records in both orders
    (cached in `data_dir`).

    Returns:
        `(vocabulary, {order: records}, {order: block-divergence ratio})`,
        records as `albert_apps.quickstart.build_records` returns them.
    """
    from albert_apps.quickstart import Records
    from albert_apps.quickstart import Vocabulary
    from albert_apps.quickstart import build_records
    from albert_apps.quickstart import build_vocabulary
    from albert_apps.quickstart import write_corpus
    from data_prep import pipeline

    cache = os.path.join(data_dir, CACHE_JSON)
    if os.path.exists(cache):
        with open(cache) as f:
            vocabulary, records, mixing = json.load(f)
        return (Vocabulary.from_json(vocabulary),
                {order: Records.from_json(value)
                 for order, value in records.items()}, mixing)

    corpus = write_corpus(data_dir, input_file, corpus_chars)
    vocabulary = build_vocabulary(corpus, data_dir, 4000, 2)
    records = build_records(corpus, vocabulary, data_dir,
                            dupe_factor=dupe_factor, max_seq_length=64)
    chunk_path = os.path.join(data_dir, "chunk_order", "train.tfrecord")
    stats = json.load(open(records.train.stats))
    settings = stats["settings"]
    from data_prep import instances
    options = instances.InstanceOptions(**{
        f.name: settings[f.name]
        for f in dataclasses.fields(instances.InstanceOptions)})
    chunk_stats = pipeline.create_pretraining_data(
        corpus.train_file, chunk_path, vocabulary.model_file,
        options=options, dupe_factor=dupe_factor,
        random_seed=settings["random_seed"], global_shuffle=False)
    chunk = dataclasses.replace(records, train=dataclasses.replace(
        records.train, path=chunk_path, stats=pipeline.stats_path(chunk_path),
        instances=chunk_stats["instances"]))
    mixing = {"global": stats["mixing"]["block_divergence_ratio"],
              "chunk": chunk_stats["mixing"]["block_divergence_ratio"]}
    built = (vocabulary, {"chunk": chunk, "global": records}, mixing)
    with open(cache, "w") as f:
        json.dump([vocabulary.to_json(),
                   {order: value.to_json()
                    for order, value in built[1].items()}, mixing], f)
    return built


def run_once(vocabulary, records, output_dir, seed, steps):
    """Pretrains `steps` steps; returns the held-out evaluation at the end."""
    from albert_apps.quickstart import model_config
    from albert_apps.quickstart import pretraining_options
    from albert_tf.training import pretraining

    config = model_config(vocabulary.pieces, 64)
    options = pretraining_options(
        records, config, output_dir, max_seq_length=64, num_train_steps=steps,
        train_seconds=0, save_checkpoints_steps=steps)
    options = dataclasses.replace(options, seed=seed)
    start = time.perf_counter()
    result = pretraining.run_pretraining(options)
    last = result["eval_results"][-1]
    last["seconds"] = time.perf_counter() - start
    return last


def _metric(result, name):
    """A metric by name, whatever the evaluation calls SOP."""
    for key in (name, name.replace("sop_", "sentence_order_"),
                name.replace("sop_", "next_sentence_")):
        if key in result:
            return float(result[key])
    return float("nan")


def main(argv):
    del argv
    work_dir = _WORK_DIR.value or tempfile.mkdtemp(prefix="data_order_")
    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    vocabulary, records, mixing = build_data(data_dir, _CORPUS_CHARS.value,
                                             _DUPE_FACTOR.value,
                                             _INPUT_FILE.value)
    seeds = [int(s) for s in _SEEDS.value.split(",") if s]
    results = {order: [] for order in ORDERS}
    for seed in seeds:
        for order in ORDERS:
            output_dir = os.path.join(work_dir, "%s_%d_%d" % (
                order, seed, _STEPS.value))
            result = run_once(vocabulary, records[order], output_dir, seed,
                              _STEPS.value)
            results[order].append(result)
            print("%s seed %d: %s (%.0f s)" % (
                order, seed, ", ".join("%s %.4f" % (m, _metric(result, m))
                                       for m in METRICS), result["seconds"]),
                  flush=True)
    print()
    print("%d steps, batch 32, seeds %s, %d training instances, dupe_factor "
          "%d; held-out: %d instances" % (
              _STEPS.value, _SEEDS.value, records["global"]["train"]["instances"],
              _DUPE_FACTOR.value, records["global"]["eval"]["instances"]))
    print("| records | block-divergence ratio | " + " | ".join(METRICS) + " |")
    print("|---|---:|" + "---:|" * len(METRICS))
    for order in ORDERS:
        cells = []
        for m in METRICS:
            values = [_metric(r, m) for r in results[order]]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append("%.4f ± %.4f" % (statistics.mean(values), spread))
        print("| %s order | %.3f | %s |" % (order, mixing[order],
                                            " | ".join(cells)))


if __name__ == "__main__":
    app.run(main)
