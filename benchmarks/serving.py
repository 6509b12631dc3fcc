"""Serving latency and throughput: the text-in SavedModel vs the Keras encoder.

An ALBERT (random weights, `--preset`, default ALBERT-base) is exported with
`export.exporter`, then timed at sequence length `--seq_length` (128) on
sentences long enough to fill it:

- text-in SavedModel: the exported `serving_default` signature, strings in
  (tokenization, packing and the encoder in one graph);
- Keras encoder: the in-process `AlbertEncoder` on pre-tokenized ids (called
  through `tf.function`, as `predict` does);
- encoder SavedModel: the exported TF-Hub-style encoder on the same ids;
- tokenization only: the exported preprocessor, strings to ids.

For each: median and p99 latency at batch 1, median latency and throughput
at batch 32. The four run in turns within each iteration, so load from other
processes falls on all of them alike. The tokenization overhead is the preprocessor's median time at
batch 32 over the Keras encoder's (target: at most 10%).

    python -m benchmarks.serving [--preset=albert_base_v2 --iters_b1=50 --iters_b32=10]
"""

import os
import statistics
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from absl import app, flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401

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


def _spm_model(workdir):
    """The SentencePiece model file to use (trained here when not given)."""
    if _SPM_MODEL_FILE.value:
        return _SPM_MODEL_FILE.value
    from data_prep import builtin_corpus
    from data_prep import vocab

    corpus = os.path.join(workdir, "corpus.txt")
    builtin_corpus.write_corpus(corpus, max_chars=3_000_000)
    model_path, _ = vocab.train_vocab(
        corpus, os.path.join(workdir, "spm"), vocab_size=8000,
        hard_vocab_limit=False, input_sentence_size=100_000)
    return model_path


def _texts(count, seed=0):
    """English-like sentences of about 200 words (more than 128 pieces)."""
    from data_prep import builtin_corpus

    sentences = []
    for document in builtin_corpus.iter_documents(max_chars=400_000):
        sentences.extend(document)
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(count):
        picked = rng.choice(len(sentences), 12, replace=False)
        texts.append(" ".join(sentences[i] for i in picked))
    return texts


def _time_interleaved(fns, iterations, warmup):
    """Times several callables in turns, so load from elsewhere hits all alike.

    Returns:
        One list of seconds per callable.
    """
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(iterations):
        for fn, own in zip(fns, times):
            start = time.perf_counter()
            fn()
            own.append(time.perf_counter() - start)
    return times


def _stats(times, batch):
    median = statistics.median(times)
    return {"median_ms": 1000 * median,
            "p99_ms": 1000 * float(np.percentile(times, 99)),
            "throughput": batch / median}


def run(preset, seq_length, batch, iters_b1, iters_b32, warmup, workdir):
    """Exports a model and times every row.

    Returns:
        `(rows, overhead)`: rows is a list of `(name, input, b1, bn)` with
        `_stats` dicts; overhead the tokenization time over the Keras
        encoder's at `batch`.
    """
    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.training import checkpoint as checkpoint_lib
    from data_prep import text as text_lib
    from export import exporter
    from export import preprocessing
    import sentencepiece as spm

    spm_path = _spm_model(workdir)
    with open(spm_path, "rb") as f:
        proto = f.read()
    sp_model = spm.SentencePieceProcessor(model_proto=proto)
    config = AlbertConfig.from_preset(preset)
    pretrainer = AlbertPretrainer(config)
    if _CHECKPOINT.value:
        checkpoint_lib.restore_model(pretrainer, _CHECKPOINT.value)
    paths = exporter.export_pretrainer(
        pretrainer, proto, os.path.join(workdir, "serving"),
        max_seq_length=seq_length, save_keras=False)
    serving = tf.saved_model.load(paths["serving"]).signatures["serving_default"]
    encoder_sm = tf.saved_model.load(paths["encoder"])
    preprocessor = tf.saved_model.load(paths["preprocessor"])
    keras_call = tf.function(
        lambda inputs: pretrainer.encoder(inputs, training=False))

    texts = _texts(batch)

    def ids_for(rows):
        packed = [preprocessing.pack_ids(ids, None, seq_length) for ids in
                  text_lib.tokenize_to_ids(sp_model, rows)]
        return {k: tf.constant([p[k] for p in packed], tf.int32)
                for k in packed[0]}

    paths = (
        ("text-in SavedModel", "strings",
         # An empty `text_b` is what the model server feeds when a request
         # leaves it out (the signature's default).
         lambda rows: (lambda s=tf.constant(rows): serving(
             text=s, text_b=tf.constant([], tf.string)))),
        ("Keras encoder (in-process)", "ids",
         lambda rows: (lambda x=ids_for(rows): keras_call(x))),
        ("encoder SavedModel", "ids",
         lambda rows: (lambda x=ids_for(rows): encoder_sm.serve(x))),
        ("tokenization only", "strings",
         lambda rows: (lambda s=tf.constant(rows): preprocessor(s))),
    )
    b1 = _time_interleaved([make(texts[:1]) for _, _, make in paths],
                           iters_b1, warmup)
    print("  timed batch 1", flush=True)
    bn = _time_interleaved([make(texts) for _, _, make in paths],
                           iters_b32, warmup)
    print("  timed batch %d" % batch, flush=True)
    results = [(name, kind, _stats(t1, 1), _stats(tn, batch))
               for (name, kind, _), t1, tn in zip(paths, b1, bn)]
    overhead = results[3][3]["median_ms"] / results[1][3]["median_ms"]
    return results, overhead


def format_table(rows, overhead, preset, seq_length, batch):
    lines = [
        "%s, seq %d, %d CPU threads visible" % (preset, seq_length, os.cpu_count()),
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


def main(argv):
    del argv
    with tempfile.TemporaryDirectory() as workdir:
        rows, overhead = run(_PRESET.value, _SEQ_LENGTH.value, _BATCH.value,
                             _ITERS_B1.value, _ITERS_B32.value, _WARMUP.value,
                             workdir)
    print(format_table(rows, overhead, _PRESET.value, _SEQ_LENGTH.value,
                       _BATCH.value))


if __name__ == "__main__":
    app.run(main)
