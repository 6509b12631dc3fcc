"""Serving latency and throughput of the exported text-in SavedModel.

`python -m benchmarks.serving` times ALBERT exported with dynamic against
fixed shapes (`--mode=shapes`, the default), the serving paths from
strings and from ids (`--mode=paths`), the float32, bfloat16 and int8
exports (`--mode=precision`) and the other runtimes a user might pick
(`--mode=runtimes`), all in turns, and prints medians with the CPU named.
What each mode measures, and its targets:
docs/benchmarks.md#how-the-serving-benchmarks-measure.
"""

import functools
import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from albert_tf.training import hardware  # noqa: E402
from benchmarks import serving_common  # noqa: E402

_MODE = flags.DEFINE_enum("mode", "shapes",
                          ["shapes", "paths", "precision", "runtimes"],
                          "shapes: dynamic vs fixed export; paths: text-in "
                          "SavedModel vs Keras encoder vs tokenization; "
                          "precision: float32 vs bfloat16 vs int8 exports "
                          "(benchmarks.serving_precision); runtimes: the "
                          "SavedModels, the .tflite models, ONNX Runtime "
                          "and PyTorch dynamic int8, one thread each, batch "
                          "1 (benchmarks.serving_runtimes).")
_QUICKSTART_DIR = flags.DEFINE_string(
    "quickstart_dir", None, "--mode=precision: a finished main job's output "
    "folder, for the accuracy rows (none without it).")
_ACCURACY_TASK = flags.DEFINE_string(
    "accuracy_task", "sentence_order", "--mode=precision: the main job's task "
    "the classifier is fine-tuned on.")
_ACCURACY_SENTENCES = flags.DEFINE_integer(
    "accuracy_sentences", 1000, "--mode=precision: held-out sentences of the "
    "fill-mask rows.")
_ACCURACY_EPOCHS = flags.DEFINE_integer(
    "accuracy_epochs", 3, "--mode=precision: fine-tuning epochs.")
_ACCURACY_SEQ_LENGTH = flags.DEFINE_integer(
    "accuracy_seq_length", 64, "--mode=precision: max_seq_length of the "
    "accuracy exports (the main job's).")
_PRESET = flags.DEFINE_string("preset", "albert_base_v2", "AlbertConfig preset.")
_SEQ_LENGTH = flags.DEFINE_integer("seq_length", 128, "Sequence length.")
_BATCH = flags.DEFINE_integer("batch", 32, "Batch of the throughput rows.")
_ITERS_B1 = flags.DEFINE_integer("iters_b1", 50, "Timed calls at batch 1.")
_ITERS_B32 = flags.DEFINE_integer("iters_b32", 10, "Timed calls at --batch.")
_WARMUP = flags.DEFINE_integer("warmup", 2, "Untimed calls first.")
_SPM_MODEL_FILE = flags.DEFINE_string(
    "spm_model_file", None, "SentencePiece model; default: one of 8000 pieces "
    "trained here on the standard library's docstrings.")
_CHECKPOINT = flags.DEFINE_string(
    "checkpoint", None, "Optional checkpoint to export instead of random weights.")










def run(preset, seq_length, batch, iters_b1, iters_b32, warmup, workdir):
    """Exports a model and times every row.

    Returns:
        `(rows, overhead)`: rows is a list of `(name, input, b1, bn)` with
        `_stats` dicts; overhead the tokenization time over the Keras
        encoder's at `batch`.
    """
    from albert_tf.layers import preprocessing
    from data_prep import text as text_lib
    from export import pretrained_export

    proto, sp_model, pretrainer = serving_common.albert_model(
        workdir, preset, _SPM_MODEL_FILE.value, _CHECKPOINT.value)
    # Fixed shapes: this mode times every path at the full --seq_length.
    paths = pretrained_export.export_pretrainer(
        pretrainer, proto, os.path.join(workdir, "serving"),
        max_seq_length=seq_length, save_keras=False, serving_shape="fixed")
    serving = tf.saved_model.load(paths["serving"]).signatures["serving_default"]
    encoder_sm = tf.saved_model.load(paths["encoder"])
    preprocessor = tf.saved_model.load(paths["preprocessor"])
    keras_call = tf.function(
        lambda inputs: pretrainer.encoder(inputs, training=False))

    texts = serving_common.texts(batch)

    def ids_for(rows):
        packed = [preprocessing.pack_ids(ids, None, seq_length) for ids in
                  text_lib.tokenize_to_ids(sp_model, rows)]
        return {k: tf.constant([p[k] for p in packed], tf.int32)
                for k in packed[0]}

    paths = (
        ("text-in SavedModel", "strings",
         # An empty `text_b` is what the model server feeds when a request
         # leaves it out (the signature's default).
         lambda rows: functools.partial(
             serving, text=tf.constant(rows),
             text_b=tf.constant([], tf.string))),
        ("Keras encoder (in-process)", "ids",
         lambda rows: functools.partial(keras_call, ids_for(rows))),
        ("encoder SavedModel", "ids",
         lambda rows: functools.partial(encoder_sm.serve, ids_for(rows))),
        ("tokenization only", "strings",
         lambda rows: functools.partial(preprocessor, tf.constant(rows))),
    )
    b1 = serving_common.time_interleaved([make(texts[:1]) for _, _, make in paths],
                                         iters_b1, warmup)
    print("  timed batch 1", flush=True)
    bn = serving_common.time_interleaved([make(texts) for _, _, make in paths],
                                         iters_b32, warmup)
    print("  timed batch %d" % batch, flush=True)
    results = [(name, kind, serving_common.stats(t1, 1),
                serving_common.stats(tn, batch))
               for (name, kind, _), t1, tn in zip(paths, b1, bn)]
    overhead = results[3][3]["median_ms"] / results[1][3]["median_ms"]
    return results, overhead


def format_table(rows, overhead, preset, seq_length, batch):
    lines = [
        "%s, seq %d" % (preset, seq_length),
        "",
        "| path | input | b1 median ms | b1 p99 ms | b%d median ms | b%d examples/s |"
        % (batch, batch),
        "|---|---|---|---|---|---|",
    ]
    for name, kind, b1, bn in rows:
        lines.append("| %s | %s | %.1f | %.1f | %.1f | %.1f |" % (
            name, kind, b1["median_ms"], b1["p99_ms"], bn["median_ms"],
            bn["throughput"]))
    text_in, keras_row = rows[0][3]["median_ms"], rows[1][3]["median_ms"]
    lines += [
        "",
        "Tokenization at batch %d: %.2f%% of the Keras encoder's median time "
        "(target <= 10%%); text-in SavedModel vs Keras encoder on ids: %+.1f%%."
        % (batch, 100 * overhead, 100 * (text_in / keras_row - 1)),
    ]
    return "\n".join(lines)






def run_shapes(preset, seq_length, batch, iters_b1, iters_b32, warmup,
               workdir, seed=0):
    """Exports a dynamic and a fixed model and times both.

    Returns:
        A list of `(row name, real tokens, dynamic stats, fixed stats)`.
    """
    from export import pretrained_export

    proto, sp_model, pretrainer = serving_common.albert_model(
        workdir, preset, _SPM_MODEL_FILE.value, _CHECKPOINT.value)
    models = {}
    for shape in ("dynamic", "fixed"):
        paths = pretrained_export.export_pretrainer(
            pretrainer, proto, os.path.join(workdir, shape),
            max_seq_length=seq_length, save_keras=False, serving_shape=shape)
        models[shape] = tf.saved_model.load(
            paths["serving"]).signatures["serving_single"]
    print("  exported both", flush=True)

    words = " ".join(serving_common.texts(8, seed)).split()
    rows = []

    def timed(requests, iterations, size):
        """Times `(name, real, make_inputs)` requests on both exports, all
        in turns (so the rows' ratios share the machine's load)."""
        fns = []
        for _, _, make_inputs in requests:
            calls = [make_inputs() for _ in range(iterations + warmup)]
            for shape in ("dynamic", "fixed"):
                queue = list(calls)
                fns.append(lambda m=models[shape], q=queue: m(text=q.pop()))
        times = serving_common.time_interleaved(fns, iterations, warmup)
        for index, (name, real, _) in enumerate(requests):
            rows.append((name, real, serving_common.stats(times[2 * index], size),
                         serving_common.stats(times[2 * index + 1], size)))
            print("  timed %s" % name, flush=True)

    requests = []
    for tokens in (8, 32, seq_length):
        if tokens < seq_length:
            text, real = serving_common.text_of_length(words, sp_model, tokens)
        else:  # longer than the export takes: cut to exactly seq_length
            text, real = " ".join(words[:4 * seq_length]), seq_length
        requests.append(("b1, %d tokens" % tokens, str(real),
                         lambda t=text: tf.constant([t])))
    timed(requests, iters_b1, 1)
    rng = np.random.default_rng(seed)
    draws = {
        "uniform": lambda: int(rng.integers(5, seq_length + 1)),
        # Short requests more common than long ones, as in many services.
        "log-uniform": lambda: int(round(np.exp(rng.uniform(
            np.log(5), np.log(seq_length))))),
    }
    requests, all_drawn = [], []
    for name, draw in draws.items():
        drawn = []
        all_drawn.append(drawn)

        def mixed_batch(draw=draw, drawn=drawn):
            texts = []
            for _ in range(batch):
                start = int(rng.integers(0, len(words) // 2))
                text, real = serving_common.text_of_length(
                    words, sp_model, draw(), start)
                texts.append(text)
                drawn.append(real)
            return tf.constant(texts)

        requests.append(("b%d, 5-%d tokens, %s" % (batch, seq_length, name),
                         "", mixed_batch))
    timed(requests, iters_b32, batch)
    for index, drawn in enumerate(all_drawn, start=len(rows) - len(draws)):
        row_name, _, dynamic, fixed = rows[index]
        rows[index] = (row_name, "mean %.0f" % np.mean(drawn), dynamic, fixed)
    return rows


def format_shapes(rows, preset, seq_length):
    lines = [
        "%s, max_seq_length %d, serving_single signature, medians"
        % (preset, seq_length),
        "",
        "| request | real tokens | dynamic ms | fixed ms | fixed vs dynamic |"
        " dynamic examples/s | fixed examples/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, real, dynamic, fixed in rows:
        lines.append("| %s | %s | %.1f | %.1f | %.2fx the latency | %.1f "
                     "| %.1f |" % (
                         name, real, dynamic["median_ms"], fixed["median_ms"],
                         fixed["median_ms"] / dynamic["median_ms"],
                         dynamic["throughput"], fixed["throughput"]))
    short, long_ = rows[0][2]["median_ms"], rows[2][2]["median_ms"]
    gain = rows[3][2]["throughput"] / rows[3][3]["throughput"]
    lines += [
        "",
        "Dynamic export: 8-token request %.2fx the latency of a %d-token one "
        "(target <= 0.2x: %s); mixed batch (uniform lengths) throughput "
        "%.2fx the fixed export's (target >= 2.5x: %s)." % (
            short / long_, seq_length, "met" if short / long_ <= 0.2 else
            "missed", gain, "met" if gain >= 2.5 else "missed"),
    ]
    return "\n".join(lines)


def _main_precision():
    from benchmarks import serving_precision

    with tempfile.TemporaryDirectory() as workdir:
        if _QUICKSTART_DIR.value:
            accuracy = serving_precision.run_accuracy(
                _QUICKSTART_DIR.value, _ACCURACY_SEQ_LENGTH.value,
                _ACCURACY_TASK.value, _ACCURACY_SENTENCES.value,
                _ACCURACY_EPOCHS.value, workdir)
        rows = serving_precision.run_latency(
            _PRESET.value, _SEQ_LENGTH.value, _BATCH.value, _ITERS_B1.value,
            _ITERS_B32.value, workdir, _CHECKPOINT.value,
            _SPM_MODEL_FILE.value)
    print(serving_precision.format_latency(rows, _PRESET.value,
                                           _SEQ_LENGTH.value))
    if _QUICKSTART_DIR.value:
        print()
        print(serving_precision.format_accuracy(*accuracy,
                                                _ACCURACY_TASK.value))


def _main_runtimes():
    from benchmarks import serving_runtimes

    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as workdir:
        rows, tokens = serving_runtimes.run(
            _PRESET.value, _SEQ_LENGTH.value, _ITERS_B1.value, _WARMUP.value,
            workdir, _CHECKPOINT.value, _SPM_MODEL_FILE.value)
    load = ("1-minute load average %.1f before, %.1f after, on %d cores "
            "(other processes)" % (before, os.getloadavg()[0],
                                   os.cpu_count()))
    print(serving_runtimes.format_table(rows, _PRESET.value, tokens,
                                        hardware.describe(), load))


def main(argv):
    del argv
    if _MODE.value == "runtimes":
        # One thread for TensorFlow too; settable only before it starts.
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    print("Hardware: %s" % hardware.describe(), flush=True)
    if _MODE.value == "runtimes":
        _main_runtimes()
        return
    if _MODE.value == "precision":
        _main_precision()
        return
    if _MODE.value == "shapes":
        with tempfile.TemporaryDirectory() as workdir:
            rows = run_shapes(_PRESET.value, _SEQ_LENGTH.value, _BATCH.value,
                              _ITERS_B1.value, _ITERS_B32.value,
                              _WARMUP.value, workdir)
        print(format_shapes(rows, _PRESET.value, _SEQ_LENGTH.value))
        return
    with tempfile.TemporaryDirectory() as workdir:
        rows, overhead = run(_PRESET.value, _SEQ_LENGTH.value, _BATCH.value,
                             _ITERS_B1.value, _ITERS_B32.value, _WARMUP.value,
                             workdir)
    print(format_table(rows, overhead, _PRESET.value, _SEQ_LENGTH.value,
                       _BATCH.value))


if __name__ == "__main__":
    app.run(main)
