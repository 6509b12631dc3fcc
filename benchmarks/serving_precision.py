"""Serving latency and accuracy of the float32, bfloat16 and int8 exports.

Run as `python -m benchmarks.serving --mode=precision`: `run_latency` times
every export on the same requests in turns, and `run_accuracy` (with
`--quickstart_dir`) compares each dtype's fill-mask and fine-tuned
classifier with float32's. Rows, measures and targets:
docs/benchmarks.md#how-the-serving-benchmarks-measure.
"""

import csv
import os
import random

import numpy as np
import tensorflow as tf

from albert_apps import intervals
from albert_tf.models.serving_dtypes import SERVING_DTYPES
from benchmarks import serving_common
from export import serving_dtype_auto


def _exports(pretrainer, proto, workdir, seq_length):
    """Text-in `serving_single` of each dtype (dynamic) and float32 fixed."""
    from export import pretrained_export

    models = {}
    for name, dtype, shape in [(d, d, "dynamic") for d in SERVING_DTYPES] + [
            ("float32 fixed", "float32", "fixed")]:
        paths = pretrained_export.export_pretrainer(
            pretrainer, proto, os.path.join(workdir, name.replace(" ", "_")),
            max_seq_length=seq_length, save_keras=False,
            serving_shape=shape, serving_dtype=dtype)
        models[name] = tf.saved_model.load(
            paths["serving"]).signatures["serving_single"]
        print("  exported %s" % name, flush=True)
    return models


def _sentences(count, seed=0):
    """Whole sentences of the built-in corpus (real lengths), shuffled."""
    from data_prep import builtin_corpus

    sentences = [s for document in builtin_corpus.iter_documents(
        max_chars=600_000) for s in document if len(s.split()) >= 3]
    random.Random(seed).shuffle(sentences)
    return sentences[:count]


def _requests(sp_model, seq_length, batch, iters_b1, iters_bn, seed=0):
    """`(row name, batch size, [string batches])` of every row."""
    words = " ".join(serving_common.texts(8, seed)).split()
    full = " ".join(words[:4 * seq_length])  # cut to seq_length when packed
    sentences = _sentences(8 * max(iters_b1, iters_bn), seed)
    rng = np.random.default_rng(seed)

    def mixed(draw):
        batches, lengths = [], []
        for _ in range(iters_bn):
            texts = []
            for _ in range(batch):
                start = int(rng.integers(0, len(words) // 2))
                text, real = serving_common.text_of_length(
                    words, sp_model, draw(), start)
                texts.append(text)
                lengths.append(real)
            batches.append(texts)
        return batches, np.mean(lengths)

    uniform, uniform_mean = mixed(lambda: int(rng.integers(5, seq_length + 1)))
    log_uniform, log_mean = mixed(lambda: int(round(np.exp(rng.uniform(
        np.log(5), np.log(seq_length))))))
    real = [len(sp_model.encode(s)) + 2 for s in sentences]
    return [
        ("b1, %d tokens" % seq_length, 1, [[full]] * iters_b1),
        ("b1, one sentence (mean %.0f tokens)" % np.mean(real[:iters_b1]), 1,
         [[s] for s in sentences[:iters_b1]]),
        ("b8, %d tokens" % seq_length, 8, [[full] * 8] * iters_bn),
        ("b8, sentences (mean %.0f tokens)" % np.mean(real[:8 * iters_bn]), 8,
         [sentences[8 * i:8 * i + 8] for i in range(iters_bn)]),
        ("b%d, 5-%d uniform (mean %.0f)" % (batch, seq_length, uniform_mean),
         batch, uniform),
        ("b%d, 5-%d log-uniform (mean %.0f)" % (batch, seq_length, log_mean),
         batch, log_uniform),
    ]


def _time_row(models, batches):
    """Median seconds of each model over `batches`: all run once untimed
    (compiling), then timed in turns."""
    tensors = [tf.constant(texts) for texts in batches]

    def run_all(model):
        for tensor in tensors:
            outputs = model(text=tensor)
        return outputs["pooled_output"].numpy()

    # One round runs the row's batches once on a model (the first compiles);
    # per batch = the round's time / batches.
    fns = [lambda m=model: run_all(m) for model in models.values()]
    times = serving_common.time_interleaved(fns, iterations=3, warmup=1)
    return {name: float(np.median(t)) / len(batches)
            for name, t in zip(models, times)}


def run_latency(preset, seq_length, batch, iters_b1, iters_bn, workdir,
                checkpoint=None, spm_model_file=None):
    """Exports ALBERT (`preset`) in every dtype and times every row.

    Returns:
        A list of `(row name, {export name: median seconds})`.
    """
    proto, sp_model, pretrainer = serving_common.albert_model(
        workdir, preset, spm_model_file, checkpoint)
    models = _exports(pretrainer, proto, workdir, seq_length)
    rows = []
    for name, size, batches in _requests(sp_model, seq_length, batch,
                                         iters_b1, iters_bn):
        own = dict(models) if size == batch else {
            k: v for k, v in models.items() if k != "float32 fixed"}
        rows.append((name, _time_row(own, batches)))
        print("  timed %s" % name, flush=True)
    return rows


def format_latency(rows, preset, seq_length):
    header = ("| request | "
              + " | ".join("%s ms" % d for d in SERVING_DTYPES) + " | "
              + " | ".join("%s vs float32" % d for d in SERVING_DTYPES[1:])
              + " | float32 fixed ms | fixed vs best dynamic |")
    lines = ["%s, max_seq_length %d, dynamic shapes, serving_single, "
             "medians per batch (steady state)" % (preset, seq_length), "",
             header, "|---" * (header.count("|") - 1) + "|"]
    for name, seconds in rows:
        cells = ["%.1f" % (1e3 * seconds[d]) for d in SERVING_DTYPES]
        cells += [serving_dtype_auto.compared_with_float32(
            seconds[d] / seconds["float32"]) for d in SERVING_DTYPES[1:]]
        if "float32 fixed" in seconds:
            best = min(seconds[d] for d in SERVING_DTYPES)
            cells += ["%.1f" % (1e3 * seconds["float32 fixed"]),
                      "%.2fx the latency" % (seconds["float32 fixed"] / best)]
        else:
            cells += ["-", "-"]
        lines.append("| %s | %s |" % (name, " | ".join(cells)))
    return "\n".join(lines)


def _read_task(path):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return ([r["first"] for r in rows], [r["second"] for r in rows],
            np.array([int(r["label"]) for r in rows]))


def _masked_sentences(path, count, seed=0):
    """`(sentences, the same with one word masked)` of held-out text."""
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if len(line.split()) >= 6]
    rng = random.Random(seed)
    lines = rng.sample(lines, min(count, len(lines)))
    masked = []
    for line in lines:
        words = line.split()
        words[rng.randrange(len(words))] = "[MASK]"
        masked.append(" ".join(words))
    return lines, masked


def _in_batches(fn, items, size=64):
    return [fn(items[i:i + size]) for i in range(0, len(items), size)]


def _fill_mask_accuracy(pretrainer, proto, seq_length, quickstart_dir,
                        count, workdir):
    from export import pretrained_export

    sentences, masked = _masked_sentences(
        os.path.join(quickstart_dir, "data", "eval.txt"), count)
    results = {}
    for dtype in SERVING_DTYPES:
        paths = pretrained_export.export_pretrainer(
            pretrainer, proto, os.path.join(workdir, "mlm_" + dtype),
            max_seq_length=seq_length, save_keras=False, serving_dtype=dtype)
        model = tf.saved_model.load(paths["serving"])
        top1 = np.concatenate(_in_batches(lambda b, model=model: model.signatures[
            "fill_mask"](text=tf.constant(b))["top_k_ids"].numpy()[:, 0, 0],
                                          masked))
        pooled = np.concatenate(_in_batches(lambda b, model=model: model.signatures[
            "serving_single"](text=tf.constant(b))["pooled_output"].numpy(),
                                            sentences))
        results[dtype] = (top1, pooled)
    rows = {}
    for dtype in SERVING_DTYPES:
        top1, pooled = results[dtype]
        ref_top1, ref_pooled = results["float32"]
        cosines = (pooled * ref_pooled).sum(-1) / (
            np.linalg.norm(pooled, axis=-1) * np.linalg.norm(ref_pooled, axis=-1))
        rows[dtype] = {"top1_agreement": float(np.mean(top1 == ref_top1)),
                       "pooled_cosine_min": float(cosines.min()),
                       "pooled_cosine_mean": float(cosines.mean()),
                       "sentences": len(sentences)}
    return rows


def _classifier_accuracy(proto, seq_length, quickstart_dir, task, workdir,
                         epochs):
    """Fine-tunes a text classifier on `task`, exports it in every dtype
    and scores each served model on the dev set."""
    from albert_tf import load_pretrained
    from albert_tf.tasks.text_models import AlbertTextClassifier
    from export import finetuned_exports as finetuned_exports_lib
    folder = os.path.join(quickstart_dir, "data", "task", task)
    train_a, train_b, train_y = _read_task(os.path.join(folder, "train.tsv"))
    dev_a, dev_b, dev_y = _read_task(os.path.join(folder, "dev.tsv"))
    pairs = any(train_b)
    num_classes = int(max(train_y.max(), dev_y.max())) + 1
    pretrainer = load_pretrained(os.path.join(quickstart_dir, "pretrain",
                                              "best"))
    model = AlbertTextClassifier(pretrainer, num_classes, spm_model=proto,
                                 seq_length=seq_length)
    steps = epochs * len(train_y) // 16
    model.compile(learning_rate=1e-4, num_train_steps=steps)
    x = (train_a, train_b) if pairs else train_a
    model.fit(x, train_y, batch_size=16, epochs=epochs, verbose=0)
    labels = {}
    for dtype in SERVING_DTYPES:
        path = finetuned_exports_lib.export_text_classifier(
            model, os.path.join(workdir, "cls_" + dtype),
            serving_dtype=dtype)
        serve = tf.saved_model.load(path).signatures["serving_default"]
        labels[dtype] = np.concatenate([serve(
            text=tf.constant(dev_a[i:i + 64]),
            text_b=tf.constant(dev_b[i:i + 64] if pairs else []))[
                "label_id"].numpy() for i in range(0, len(dev_y), 64)])
    rows = {}
    for dtype in SERVING_DTYPES:
        correct = int((labels[dtype] == dev_y).sum())
        rows[dtype] = {
            "accuracy": correct / len(dev_y),
            "interval": intervals.wilson(correct / len(dev_y), len(dev_y)),
            "delta_points": 100 * (correct - int(
                (labels["float32"] == dev_y).sum())) / len(dev_y),
            "label_agreement": float(np.mean(labels[dtype] == labels["float32"])),
            "dev_examples": len(dev_y)}
    return rows


def run_accuracy(quickstart_dir, seq_length, task, sentences, epochs,
                 workdir):
    """The accuracy rows on a finished main job's output (see the module
    docstring). Returns `(fill_mask rows, classifier rows)`."""
    from albert_tf import load_pretrained

    with open(os.path.join(quickstart_dir, "data", "spm.model"), "rb") as f:
        proto = f.read()
    pretrainer = load_pretrained(os.path.join(quickstart_dir, "pretrain",
                                              "best"))
    fill_mask = _fill_mask_accuracy(pretrainer, proto, seq_length,
                                    quickstart_dir, sentences, workdir)
    print("  measured fill_mask", flush=True)
    classifier = _classifier_accuracy(proto, seq_length, quickstart_dir, task,
                                      workdir, epochs)
    print("  measured the %s classifier" % task, flush=True)
    return fill_mask, classifier


def format_accuracy(fill_mask, classifier, task):
    lines = ["| precision | fill-mask top-1 = float32 | pooled cosine "
             "(lowest / mean) | %s dev accuracy [95%%] | vs float32 | "
             "labels = float32 |" % task, "|---|---|---|---|---|---|"]
    for dtype in SERVING_DTYPES:
        mlm, cls = fill_mask[dtype], classifier[dtype]
        lines.append("| %s | %.1f%% | %.4f / %.5f | %.1f%% [%.1f, %.1f] | "
                     "%+.2f points | %.1f%% |" % (
                         dtype, 100 * mlm["top1_agreement"],
                         mlm["pooled_cosine_min"], mlm["pooled_cosine_mean"],
                         100 * cls["accuracy"], 100 * cls["interval"][0],
                         100 * cls["interval"][1], cls["delta_points"],
                         100 * cls["label_agreement"]))
    first = fill_mask["float32"]["sentences"]
    lines += ["", "fill-mask over %d held-out sentences; the classifier over "
              "%d dev examples." % (first, classifier["float32"][
                  "dev_examples"])]
    return "\n".join(lines)
