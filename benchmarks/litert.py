"""ALBERT on device: the LiteRT exports beside the int8 SavedModel.

    python -m benchmarks.litert [--preset=albert_base_v2] [--seq_length=128]
        [--agreement_texts=1000] [--iterations=20] [--workdir=DIR]

ALBERT-base with random weights (the full-size preset) and the serving
benchmarks' vocabulary (`benchmarks.serving_common`: 8000 pieces trained
here on the built-in corpus; nothing is downloaded), exported as

- `encoder.tflite` (text in, `pooled_output` out; `export.litert`) with
  float32, float16 and int8 weights, and `classifier.tflite` (int8) of an
  `AlbertClassifier` with a random 3-class head;
- the SavedModels of the same weights: the text-in model in int8 (the
  peer for speed, `--serving_dtype=int8`) and float32 (the reference for
  agreement), and the classifier in float32.

Columns: file size (MB, 10^6 bytes); latency at batch 1 (median ms) on a
text of `--seq_length` tokens and on one sentence of the built-in corpus,
with LiteRT on 1 and 2 threads (the SavedModel runs with TensorFlow's
default threads, all cores); peak memory (resident set, MiB) of a fresh
process that loads the model and runs the long text, and that peak less
the process before the model (its imports: `tensorflow_text`, whose
LiteRT registrar links TensorFlow, for LiteRT too); agreement on
`--agreement_texts` held-out sentences: `pooled_output` cosine with the
float32 SavedModel (lowest), classifier labels equal to the float32
SavedModel's, and token ids equal to the SavedModel preprocessor's (also on
`HARD_CASES`: accents, case, digit commas, empty, invalid UTF-8, ...). Models
are timed in turns (`hardware.seconds_in_turns`), so load from elsewhere
falls on all alike. Numbers: docs/benchmarks.md.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

# The cases for token ids: (name, UTF-8 bytes).
HARD_CASES = [
    ("accents", "Café naïve ÜBER façade Ångström rôle".encode()),
    ("upper case", b"ALBERT Runs ON Phones"),
    ("digits with commas", b"In 1990, 3,000 people; 12,5 and 7, x1,"),
    ("empty", b""),
    ("blank", b" \t\n "),
    ("invalid UTF-8", b"\xff\xfe broken \xc3( cafe\xffcafe \xe2\x82"),
    ("over-long", ("word " * 2000).encode()),
    ("LaTeX quotes", b"``quoted'' text"),
    ("other scripts", "ΟΔΟΣ ΣΟΦΙΑ 東京 한국어 Ａｂｃ".encode()),
]
_PRESET = flags.DEFINE_string("preset", "albert_base_v2", "AlbertConfig preset.")
_SEQ_LENGTH = flags.DEFINE_integer("seq_length", 128, "max_seq_length.")
_AGREEMENT = flags.DEFINE_integer(
    "agreement_texts", 1000, "Held-out sentences for the agreement columns.")
_ITERATIONS = flags.DEFINE_integer("iterations", 20,
                                   "Timed calls of each model per row.")
_WORKDIR = flags.DEFINE_string("workdir", None,
                               "Working folder (default: a temporary one).")

# A fresh process that loads one model, runs one text three times and
# prints its peak resident set; it imports nothing of this project.
_MEMORY_CHILD = r"""
import json, sys
def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])
kind, path, text = json.loads(sys.argv[1])
import numpy as np
if kind == "litert":
    from ai_edge_litert import interpreter as litert
    from tensorflow_text import tflite_registrar
else:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
runtime = kib("VmRSS")
if kind == "litert":
    model = litert.InterpreterWithCustomOps(
        custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
        model_path=path, num_threads=2).get_signature_runner()
    run = lambda: model(text=np.array([text], dtype=object))
else:
    model = tf.saved_model.load(path).signatures["serving_single"]
    run = lambda: model(text=tf.constant([text]))
for _ in range(3):
    run()
print("PEAK_MIB", kib("VmHWM") / 1024, (kib("VmHWM") - runtime) / 1024)
"""


def _peak_mib(kind, path, text):
    """`(peak, peak less the runtime)` resident MiB of a fresh process
    (the runtime: the process with its imports, before the model)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, json.dumps([kind, path, text])],
        capture_output=True, text=True, cwd=tempfile.gettempdir())
    for line in done.stdout.splitlines():
        if line.startswith("PEAK_MIB"):
            return tuple(float(x) for x in line.split()[1:])
    return float("nan"), float("nan")


def _sentences(count, skip):
    """Whole sentences of the built-in corpus, from sentence `skip` on."""
    from data_prep import builtin_corpus

    sentences = [s for document in builtin_corpus.iter_documents(
        max_chars=1_500_000) for s in document if len(s.split()) >= 3]
    return sentences[skip:skip + count]


def _interpreter(path, threads):
    import numpy as np
    from ai_edge_litert import interpreter as litert
    from tensorflow_text import tflite_registrar

    runner = litert.InterpreterWithCustomOps(
        custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
        model_path=path, num_threads=threads).get_signature_runner()

    def run(text, text_b=None):
        inputs = {"text": np.array([text], dtype=object)}
        if text_b is not None:
            inputs["text_b"] = np.array([text_b], dtype=object)
        return runner(**inputs)

    return run


def _cosine(a, b):
    import numpy as np

    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def run(preset, seq_length, agreement_texts, iterations, workdir):
    """Exports, measures and returns the table's rows (dicts)."""
    import numpy as np
    import tensorflow as tf

    from albert_tf.layers import preprocessing
    from albert_tf.models.task_models import AlbertClassifier
    from albert_tf.training import hardware
    from benchmarks import serving_common
    from export import finetuned_exports
    from export import litert
    from export import on_device_tokenizer
    from export import pretrained_export

    proto, sp_model, pretrainer = serving_common.albert_model(workdir, preset)
    spm_file = os.path.join(workdir, "spm.model")
    with open(spm_file, "wb") as f:
        f.write(proto)
    classifier = AlbertClassifier(pretrainer.encoder, num_classes=3)
    labels = ["a", "b", "c"]
    saved = {}
    for dtype in ("int8", "float32"):
        saved[dtype] = pretrained_export.export_pretrainer(
            pretrainer, proto, os.path.join(workdir, "saved_" + dtype),
            max_seq_length=seq_length, save_keras=False,
            serving_dtype=dtype)["serving"]
        print(f"  exported the {dtype} SavedModel", flush=True)
    saved_classifier = finetuned_exports.export_classifier(
        classifier, spm_file, os.path.join(workdir, "saved_classifier"),
        labels=labels, max_seq_length=seq_length)
    files = {}
    for quantization in ("float32", "float16", "int8"):
        files[quantization] = litert.export_encoder(
            pretrainer.encoder, proto, os.path.join(workdir, quantization),
            seq_length, quantization=quantization, overwrite=True)
        print(f"  converted encoder.tflite, {quantization}", flush=True)
    classifier_file = litert.export_classifier(
        classifier, proto, labels, os.path.join(workdir, "int8"), seq_length,
        overwrite=True)

    words = " ".join(serving_common.texts(4)).split()
    long_text, _ = serving_common.text_of_length(words, sp_model, seq_length)
    sentence = _sentences(1, 0)[0]
    held_out = _sentences(agreement_texts, 1)

    # Agreement.
    tokenizer = on_device_tokenizer.OnDeviceTokenizer(proto)
    reference = preprocessing.TextPreprocessor(proto, seq_length)
    batch = tf.constant(held_out)
    ids_equal = np.mean([a == b for a, b in zip(
        tokenizer.tokenize(batch).to_list(),
        reference.tokenize(batch).to_list())])
    hard = tf.constant([text for _, text in HARD_CASES])
    hard_differ = [name for (name, _), a, b in zip(
        HARD_CASES, tokenizer.tokenize(hard).to_list(),
        reference.tokenize(hard).to_list()) if a != b]
    float32 = tf.saved_model.load(saved["float32"]).signatures["serving_single"]
    reference_pooled = [float32(text=tf.constant([t]))["pooled_output"][0].numpy()
                        for t in held_out]
    saved_labels = tf.saved_model.load(saved_classifier).signatures[
        "serving_single"]
    reference_labels = [int(saved_labels(text=tf.constant([t]))["label_id"][0])
                        for t in held_out]
    cosines = {}
    for quantization, path in files.items():
        encode = _interpreter(path, 2)
        cosines[quantization] = min(
            _cosine(encode(t)["pooled_output"][0], r)
            for t, r in zip(held_out, reference_pooled))
    classify = _interpreter(classifier_file, 2)
    label_agreement = np.mean([
        int(classify(t, "")["label_id"][0]) == r
        for t, r in zip(held_out, reference_labels)])
    print("  agreement measured", flush=True)

    # Latency, in turns.
    int8_saved = tf.saved_model.load(saved["int8"]).signatures["serving_single"]
    runs = {}
    for quantization, path in files.items():
        for threads in (1, 2):
            runs[(quantization, threads)] = _interpreter(path, threads)
    latency = {}
    for row, text in (("long", long_text), ("sentence", sentence)):
        calls = {key: (lambda f=f, t=text: f(t)) for key, f in runs.items()}
        calls[("SavedModel int8", 0)] = (
            lambda t=tf.constant([text]): int8_saved(text=t))
        latency[row] = hardware.median_seconds_in_turns(calls, iterations,
                                                        warmup=2)
    rows = []
    for quantization, path in files.items():
        rows.append({
            "format": f"LiteRT {quantization}",
            "size_mb": os.path.getsize(path) / 1e6,
            "long_1": latency["long"][(quantization, 1)],
            "long_2": latency["long"][(quantization, 2)],
            "sentence_1": latency["sentence"][(quantization, 1)],
            "sentence_2": latency["sentence"][(quantization, 2)],
            "peak_mib": _peak_mib("litert", path, long_text),
            "cosine": cosines[quantization],
        })
    size = sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(saved["int8"]) for name in names)
    rows.append({
        "format": "SavedModel int8",
        "size_mb": size / 1e6,
        "long_1": float("nan"),
        "long_2": latency["long"][("SavedModel int8", 0)],
        "sentence_1": float("nan"),
        "sentence_2": latency["sentence"][("SavedModel int8", 0)],
        "peak_mib": _peak_mib("saved_model", saved["int8"], long_text),
        "cosine": float("nan"),
    })
    return rows, {"labels_equal": float(label_agreement),
                  "ids_equal": float(ids_equal), "texts": len(held_out),
                  "hard_cases": len(HARD_CASES), "hard_differ": hard_differ,
                  "hardware": hardware.describe()}


def _print(rows, summary, preset, seq_length):
    print(f"ALBERT ({preset}, random weights) on device, max_seq_length "
          f"{seq_length}, batch 1")
    print(f"Hardware: {summary['hardware']}")
    print(f"{'format':18s} {'MB':>7s} {'long 1t':>8s} {'long 2t':>8s} "
          f"{'sent 1t':>8s} {'sent 2t':>8s} {'peak MiB':>9s} {'model MiB':>9s} "
          f"{'cosine':>7s}")
    for row in rows:
        print(f"{row['format']:18s} {row['size_mb']:7.1f} "
              f"{1000 * row['long_1']:8.1f} {1000 * row['long_2']:8.1f} "
              f"{1000 * row['sentence_1']:8.1f} "
              f"{1000 * row['sentence_2']:8.1f} {row['peak_mib'][0]:9.0f} "
              f"{row['peak_mib'][1]:9.0f} "
              f"{row['cosine']:7.4f}")
    int8, saved = rows[2], rows[-1]
    print("LiteRT int8 vs SavedModel int8, 2 threads: %.2fx the latency on "
          "the long text, %.2fx on the sentence"
          % (int8["long_2"] / saved["long_2"],
             int8["sentence_2"] / saved["sentence_2"]))
    print("On %d held-out sentences: classifier labels (int8) equal to the "
          "float32 SavedModel's: %.1f%%; token ids equal: %.1f%%"
          % (summary["texts"], 100 * summary["labels_equal"],
             100 * summary["ids_equal"]))
    print("Token ids equal on %d of %d hard cases%s" % (
        summary["hard_cases"] - len(summary["hard_differ"]),
        summary["hard_cases"], "" if not summary["hard_differ"] else
        " (differ: %s)" % ", ".join(summary["hard_differ"])))


def main(argv):
    del argv
    workdir = _WORKDIR.value or tempfile.mkdtemp(prefix="litert-bench-")
    rows, summary = run(_PRESET.value, _SEQ_LENGTH.value, _AGREEMENT.value,
                        _ITERATIONS.value, workdir)
    _print(rows, summary, _PRESET.value, _SEQ_LENGTH.value)


if __name__ == "__main__":
    app.run(main)
