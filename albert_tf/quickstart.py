"""The main job in one command: `python -m albert_tf.quickstart`.

Pretrains a small ALBERT on English text already on the machine, exports it
and queries the exported model, offline, in about ten minutes on 2 CPU cores:

1. corpus: the Python standard library's docstrings (`data_prep.builtin_corpus`)
   or `--input_file`; one document in 20 is held out for evaluation.
2. vocab: a SentencePiece model (`data_prep.vocab.train_vocab`, the library of
   `python -m data_prep.build_vocab`).
3. records: pretraining TFRecords (`data_prep.pipeline.create_pretraining_data`,
   the library of `python -m data_prep.create_pretraining_data`).
4. pretrain: the `tiny` preset (`albert_tf.training.pretraining.run_pretraining`, the
   library of `python -m albert_tf.run_pretraining`), evaluating every
   checkpoint on the held-out records; the best goes to `pretrain/best/`.
5. export: the SavedModels (`export.exporter.export_from_checkpoint`, the
   library of `python -m export.export_saved_model`).
6. query: a fill-mask query and a nearest-neighbour query through the
   exported SavedModel's signatures.
7. report: `report.txt`, `report.json` and `training_curves.png`.

Everything goes under `--output_dir`. Running again with the same output_dir
resumes: finished stages are skipped, training continues from its newest
checkpoint, and the export is reused when it holds the current best
checkpoint (else the next version is exported).
"""

import collections
import contextlib
import json
import os
import time

from absl import app, flags, logging

FLAGS = flags.FLAGS


def define_flags():
    """Defines the command-line flags (only when run as a program, so that
    importing this module next to the other CLIs defines nothing)."""
    flags.DEFINE_string("output_dir", "runs/quickstart",
                        "Where every artifact goes.")
    flags.DEFINE_string(
        "input_file", None, "Text corpus (one sentence a line, blank line "
        "between documents); default: the standard library's docstrings.")
    flags.DEFINE_integer("max_corpus_chars", 2_000_000,
                         "Cap on the built-in corpus size.")
    flags.DEFINE_integer("vocab_size", 2000,
                         "SentencePiece pieces (a soft limit).")
    flags.DEFINE_integer("max_seq_length", 64, "Tokens a record.")
    flags.DEFINE_integer("num_train_steps", 8000, "Pretraining steps.")
    flags.DEFINE_float(
        "train_seconds", 480, "Time budget of pretraining in this run "
        "(seconds; 0: none): training stops, saving a checkpoint, once it is "
        "spent, even before num_train_steps; running again continues from "
        "there.")
    flags.DEFINE_integer("train_batch_size", 32, "Batch size.")
    flags.DEFINE_integer("dupe_factor", 5,
                         "Maskings of each training document.")


EVAL_EVERY = 20  # One document in EVAL_EVERY is held out.
FILL_MASK_QUERIES = (
    "Return the [MASK] of the list.",
    "If the file does not exist, an [MASK] is raised.",
    "This module provides functions for working with [MASK].",
)
NEIGHBOUR_QUERY = "Read the contents of the file."
NEIGHBOUR_CANDIDATES = (
    "Write the data to the file.",
    "Open the file and return a stream.",
    "Return the square root of x.",
    "Create a new thread and start it.",
    "Raise an exception if the socket is closed.",
    "Convert the string to lower case.",
)



def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _read_json(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class _Stages:
    """Logs each stage's start, end and time; records them for the report."""

    NAMES = ("corpus", "vocab", "records", "pretrain", "export", "query",
             "report")

    def __init__(self):
        self.timings = collections.OrderedDict()

    @contextlib.contextmanager
    def stage(self, name):
        index = self.NAMES.index(name) + 1
        logging.info("==== [%d/%d] %s ...", index, len(self.NAMES), name)
        start = time.time()
        entry = {"skipped": False}
        yield entry
        entry["seconds"] = round(time.time() - start, 2)
        self.timings[name] = entry
        logging.info("==== [%d/%d] %s %s in %.1f s", index, len(self.NAMES),
                     name, "skipped (outputs exist)" if entry["skipped"]
                     else "done", entry["seconds"])


def split_corpus(input_file, train_file, eval_file, eval_every=EVAL_EVERY):
    """Splits a corpus by documents: every `eval_every`-th one is held out.

    Returns:
        A dict of counts (documents, sentences, characters; train/eval docs).
    """
    counts = collections.Counter()
    with open(input_file, encoding="utf-8", errors="replace") as f, \
            open(train_file + ".tmp", "w", encoding="utf-8") as train, \
            open(eval_file + ".tmp", "w", encoding="utf-8") as held_out:
        document = []

        def flush():
            if not document:
                return
            index = counts["documents"]
            out = held_out if index % eval_every == eval_every - 1 else train
            out.write("\n".join(document) + "\n\n")
            counts["documents"] += 1
            counts["eval_documents" if out is held_out else
                   "train_documents"] += 1
            document.clear()

        for line in f:
            line = line.strip()
            if line:
                document.append(line)
                counts["sentences"] += 1
                counts["characters"] += len(line) + 1
            else:
                flush()
        flush()
    os.replace(train_file + ".tmp", train_file)
    os.replace(eval_file + ".tmp", eval_file)
    return dict(counts)


def masked_token_baseline(record_file, max_predictions_per_seq):
    """Accuracy of always predicting the most frequent masked token.

    Returns:
        `(accuracy, token_id, masked_tokens)` over every record of the file.
    """
    import tensorflow as tf

    spec = {
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature(
            [max_predictions_per_seq], tf.float32),
    }
    counts = collections.Counter()
    dataset = tf.data.TFRecordDataset(record_file).batch(256).map(
        lambda x: tf.io.parse_example(x, spec))
    for batch in dataset:
        ids = batch["masked_lm_ids"].numpy()
        counts.update(ids[batch["masked_lm_weights"].numpy() > 0].tolist())
    total = sum(counts.values())
    if not total:
        return 0.0, -1, 0
    token, count = counts.most_common(1)[0]
    return count / total, int(token), total


def _model_config(vocab_size, max_seq_length):
    from albert_tf import AlbertConfig

    # The tiny preset (4 layers sharing one group) widened, without dropout:
    # a model that learns on this corpus in a few minutes of CPU.
    return AlbertConfig.from_preset(
        "tiny", vocab_size=vocab_size, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=max_seq_length, embedding_size=64,
        hidden_size=128, num_attention_heads=2, intermediate_size=512)


def _eval_batch_size(instances):
    size = 64
    while size > 1 and size > instances:
        size //= 2
    return size


def query_saved_model(path, fill_mask_queries=FILL_MASK_QUERIES,
                      neighbour_query=NEIGHBOUR_QUERY,
                      candidates=NEIGHBOUR_CANDIDATES):
    """Queries an exported text-in SavedModel through its signatures.

    Returns:
        A dict: `fill_mask` (per query, the top predictions of its first mask
        as `[piece, probability]`) and `nearest_neighbours` (candidates by
        cosine similarity of their `pooled_output` to the query's, after
        subtracting the mean over the query and candidates; highest first).
    """
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SavedModel's ops)

    model = tf.saved_model.load(path)
    out = model.signatures["fill_mask"](text=tf.constant(list(fill_mask_queries)))
    pieces = out["top_k_pieces"].numpy()
    probabilities = out["top_k_probabilities"].numpy()
    fill_mask = []
    for i, text in enumerate(fill_mask_queries):
        fill_mask.append({
            "query": text,
            "predictions": [[p.decode("utf-8"), round(float(q), 4)] for p, q in
                            zip(pieces[i, 0], probabilities[i, 0])],
        })
    texts = [neighbour_query] + list(candidates)
    pooled = model.signatures["serving_default"](
        text=tf.constant(texts), text_b=tf.constant([], tf.string))["pooled_output"]
    pooled = pooled.numpy().astype(np.float64)
    # Centered: pooled outputs of one model share a large common component
    # (the tanh of the pooler's bias), which makes raw cosines all near 1.
    pooled -= pooled.mean(axis=0, keepdims=True)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    similarity = pooled[1:] @ pooled[0]
    order = np.argsort(-similarity, kind="stable")
    neighbours = {
        "query": neighbour_query,
        "ranking": [[candidates[i], round(float(similarity[i]), 4)]
                    for i in order],
    }
    return {"fill_mask": fill_mask, "nearest_neighbours": neighbours}


def training_curves(pretrain_dir, png_path, baselines=None):
    """Draws losses and accuracies over steps from the run's event files."""
    from tools import plot

    baselines = baselines or {}
    train = plot.read_scalars(os.path.join(pretrain_dir, "train"))
    evals = plot.read_scalars(os.path.join(pretrain_dir, "eval"))
    panels = []
    for tag, title in (("masked_lm_loss", "masked-LM loss"),
                       ("sentence_order_loss", "SOP loss"),
                       ("masked_lm_accuracy", "masked-LM accuracy"),
                       ("sentence_order_accuracy", "SOP accuracy")):
        series = []
        for name, data, color, markers in (("train", train, plot.BLUE, False),
                                           ("eval", evals, plot.ORANGE, True)):
            points = data.get(tag, [])
            if points:
                series.append(dict(label=name, x=[p[0] for p in points],
                                   y=[p[1] for p in points], color=color,
                                   markers=markers))
        if tag in baselines and series:
            xs = [x for s in series for x in s["x"]]
            series.append(dict(label=baselines[tag][0],
                               x=[min(xs), max(xs)],
                               y=[baselines[tag][1]] * 2, color=plot.GRAY,
                               dash=6))
        panels.append(dict(title=title, series=series))
    plot.write_png(png_path, plot.line_chart(panels))
    return {"train_points": sum(len(v) for v in train.values()),
            "eval_points": sum(len(v) for v in evals.values())}


def run(output_dir, input_file=None, max_corpus_chars=2_000_000,
        vocab_size=2000, max_seq_length=64, num_train_steps=8000,
        train_seconds=480, train_batch_size=32, dupe_factor=5,
        max_predictions_per_seq=None,
        save_checkpoints_steps=None, learning_rate=5e-3, max_eval_steps=20,
        num_threads=2):
    """Runs (or resumes) the whole job; returns the report dict.

    Args:
        output_dir: where everything goes.
        input_file: a corpus file; default: the standard library's docstrings.
        max_corpus_chars: cap on the built-in corpus.
        vocab_size: SentencePiece pieces (a soft limit).
        max_seq_length: tokens a record, and T of the exported model.
        num_train_steps: pretraining steps.
        train_seconds: pretraining time budget of this run (0: none).
        train_batch_size: pretraining batch size.
        dupe_factor: maskings of each training document.
        max_predictions_per_seq: masked tokens a record; default
            `max_seq_length * 0.15` rounded up.
        save_checkpoints_steps: default: 4 checkpoints over the run.
        learning_rate: peak LAMB learning rate.
        max_eval_steps: evaluation batches per checkpoint.
        num_threads: SentencePiece trainer threads.
    """
    import tensorflow as tf

    from albert_tf.training import pretraining as train_lib
    from data_prep import builtin_corpus, instances, pipeline, vocab
    from export import exporter

    output_dir = os.path.abspath(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    data_dir = os.path.join(output_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    if max_predictions_per_seq is None:
        max_predictions_per_seq = max(1, -(-max_seq_length * 15 // 100))
    stages = _Stages()
    report = {"output_dir": output_dir}
    start = time.time()

    # 1. Corpus.
    with stages.stage("corpus") as entry:
        corpus_json = os.path.join(data_dir, "corpus.json")
        settings = {"input_file": input_file and os.path.abspath(input_file),
                    "max_corpus_chars": max_corpus_chars,
                    "eval_every": EVAL_EVERY}
        corpus = _read_json(corpus_json)
        if corpus and corpus.get("settings") == settings:
            entry["skipped"] = True
        else:
            source = input_file
            if source is None:
                source = os.path.join(data_dir, "builtin_corpus.txt")
                builtin_corpus.write_corpus(source, max_chars=max_corpus_chars)
            corpus = split_corpus(source, os.path.join(data_dir, "train.txt"),
                                  os.path.join(data_dir, "eval.txt"))
            corpus.update(settings=settings, source=os.path.abspath(source),
                          train_file=os.path.join(data_dir, "train.txt"),
                          eval_file=os.path.join(data_dir, "eval.txt"))
            _write_json(corpus_json, corpus)
        report["corpus"] = corpus

    # 2. Vocabulary.
    with stages.stage("vocab") as entry:
        vocab_json = os.path.join(data_dir, "vocab.json")
        info = _read_json(vocab_json)
        if (info and info.get("requested_size") == vocab_size and
                info.get("corpus") == corpus["settings"]):
            entry["skipped"] = True
        else:
            model_file, vocab_file = vocab.train_vocab(
                corpus["train_file"], os.path.join(data_dir, "spm"),
                vocab_size=vocab_size, hard_vocab_limit=False,
                num_threads=num_threads)
            pieces = vocab.load_model(model_file).get_piece_size()
            info = {"requested_size": vocab_size, "pieces": pieces,
                    "model_file": model_file, "vocab_file": vocab_file,
                    "corpus": corpus["settings"]}
            _write_json(vocab_json, info)
        report["vocab"] = info

    # 3. Pretraining records.
    with stages.stage("records") as entry:
        options = instances.InstanceOptions(
            max_seq_length=max_seq_length,
            max_predictions_per_seq=max_predictions_per_seq)
        records = {}
        for split, dupes in (("train", dupe_factor), ("eval", 1)):
            path = os.path.join(data_dir, split + ".tfrecord")
            stats_path = pipeline.stats_path(path)
            stats = _read_json(stats_path)
            if not (stats and stats["settings"]["max_seq_length"] ==
                    max_seq_length and stats["settings"]["dupe_factor"] == dupes
                    and os.path.getmtime(stats_path) >= max(
                        os.path.getmtime(info["model_file"]),
                        os.path.getmtime(corpus[split + "_file"]))):
                stats = pipeline.create_pretraining_data(
                    corpus[split + "_file"], path, info["model_file"],
                    options=options, dupe_factor=dupes)
            records[split] = {"path": path, "stats": stats_path,
                              "instances": stats["instances"]}
        baseline_json = os.path.join(data_dir, "baseline.json")
        baseline = _read_json(baseline_json)
        if baseline and baseline.get("records_mtime") == os.path.getmtime(
                records["eval"]["path"]):
            entry["skipped"] = True
        else:
            accuracy, token, total = masked_token_baseline(
                records["eval"]["path"], max_predictions_per_seq)
            piece = vocab.load_model(info["model_file"]).id_to_piece(token)
            baseline = {"masked_lm_accuracy": accuracy, "token_id": token,
                        "piece": piece, "masked_tokens": total,
                        "records_mtime": os.path.getmtime(records["eval"]["path"])}
            _write_json(baseline_json, baseline)
        records["baseline"] = baseline
        report["records"] = records

    # 4. Pretraining and evaluation.
    pretrain_dir = os.path.join(output_dir, "pretrain")
    with stages.stage("pretrain") as entry:
        config = _model_config(info["pieces"], max_seq_length)
        if save_checkpoints_steps is None:
            save_checkpoints_steps = max(1, -(-num_train_steps // 4))
        train_options = train_lib.PretrainingOptions(
            input_file=records["train"]["path"], output_dir=pretrain_dir,
            config=config, train_batch_size=train_batch_size,
            eval_batch_size=_eval_batch_size(records["eval"]["instances"]),
            max_seq_length=max_seq_length,
            max_predictions_per_seq=max_predictions_per_seq,
            num_train_steps=num_train_steps,
            num_warmup_steps=max(1, num_train_steps // 20),
            learning_rate=learning_rate,
            save_checkpoints_steps=save_checkpoints_steps,
            iterations_per_loop=min(100, save_checkpoints_steps),
            keep_checkpoint_max=10, do_eval=True, max_eval_steps=max_eval_steps,
            eval_input_file=records["eval"]["path"],
            max_train_seconds=train_seconds or 0.0)
        latest = tf.train.latest_checkpoint(pretrain_dir)
        # Checkpoints belong to one vocabulary and set of records: resuming
        # them on rebuilt data would mix two runs (or fail on the shapes).
        data_json = os.path.join(pretrain_dir, "quickstart_data.json")
        data_key = {"vocab": os.path.getmtime(info["model_file"]),
                    "train_records": os.path.getmtime(records["train"]["path"])}
        if latest and _read_json(data_json) not in (None, data_key):
            raise ValueError(
                "%s holds checkpoints trained on an earlier vocabulary or "
                "records, and the data was rebuilt with other settings; use "
                "another --output_dir or remove that folder." % pretrain_dir)
        if _read_json(data_json) != data_key:
            os.makedirs(pretrain_dir, exist_ok=True)
            _write_json(data_json, data_key)
        resumed_from = int(latest.rsplit("-", 1)[1]) if latest else 0
        entry["skipped"] = resumed_from >= num_train_steps
        train_start = time.time()
        result = train_lib.run_pretraining(train_options)
        eval_results = result["eval_results"]
        best = train_lib.read_eval_results(os.path.join(
            pretrain_dir, train_lib.BEST_DIR, train_lib.EVAL_RESULTS))
        report["pretrain"] = {
            "output_dir": pretrain_dir,
            "preset": "tiny widened (E %d, H %d, %d layers, %d hidden group(s))" % (
                config.embedding_size, config.hidden_size,
                config.num_hidden_layers, config.num_hidden_groups),
            "parameters": _encoder_parameters(config),
            "steps": int(result["train"]["step"]),
            "resumed_from_step": resumed_from,
            "num_train_steps": num_train_steps,
            "stopped_by_time_budget": bool(result["train"].get("timed_out")),
            "seconds_this_run": round(time.time() - train_start, 1),
            "train_batch_size": train_batch_size,
            "checkpoints": [r["checkpoint"] for r in eval_results],
            "last_eval": eval_results[-1],
            "best_eval": best[0] if best else eval_results[-1],
            "best_dir": os.path.join(pretrain_dir, train_lib.BEST_DIR),
            "eval_results": os.path.join(pretrain_dir, train_lib.EVAL_RESULTS),
        }

    # 5. Export.
    export_dir = os.path.join(output_dir, "export")
    with stages.stage("export") as entry:
        export_json = os.path.join(output_dir, "export.json")
        best_step = int(report["pretrain"]["best_eval"]["global_step"])
        exported = _read_json(export_json)
        if (exported and exported.get("checkpoint_step") == best_step and
                all(os.path.isdir(p) for p in exported["paths"].values()
                    if not p.endswith(".keras"))):
            entry["skipped"] = True
            exported["reused"] = True
        else:
            best_dir = report["pretrain"]["best_dir"]
            paths = exporter.export_from_checkpoint(
                best_dir, os.path.join(best_dir, "albert_config.json"),
                info["model_file"], export_dir, max_seq_length=max_seq_length)
            exported = {"checkpoint_step": best_step, "paths": paths,
                        "version": int(os.path.basename(paths["serving"])),
                        "export_dir": export_dir}
            _write_json(export_json, exported)
            exported["reused"] = False
        report["export"] = exported

    # 6. Queries through the exported SavedModel.
    with stages.stage("query"):
        report["queries"] = query_saved_model(exported["paths"]["serving"])
        report["queries"]["model"] = exported["paths"]["serving"]

    # 7. Report and plot.
    with stages.stage("report"):
        best = report["pretrain"]["best_eval"]
        report["results"] = {
            "checkpoint": best["checkpoint"],
            "masked_lm_accuracy": best["masked_lm_accuracy"],
            "masked_lm_baseline": baseline["masked_lm_accuracy"],
            "masked_lm_baseline_piece": baseline["piece"],
            "sentence_order_accuracy": best["sentence_order_accuracy"],
            "sentence_order_baseline": 0.5,
            "evaluated_on": "held-out documents (%d eval batches of %d)" % (
                best["eval_batches"], train_options.eval_batch_size),
        }
        png = os.path.join(output_dir, "training_curves.png")
        report["plot"] = png
        report["plot_points"] = training_curves(pretrain_dir, png, {
            "masked_lm_accuracy": ("most frequent token",
                                   baseline["masked_lm_accuracy"]),
            "sentence_order_accuracy": ("chance", 0.5)})
        report["tensorboard"] = (
            "pip install tensorboard && tensorboard --logdir %s" % pretrain_dir)
        report["report_files"] = [os.path.join(output_dir, "report.txt"),
                                  os.path.join(output_dir, "report.json")]
    report["stages"] = dict(stages.timings)
    report["seconds"] = round(time.time() - start, 1)
    _write_json(os.path.join(output_dir, "report.json"), report)
    with open(os.path.join(output_dir, "report.txt"), "w", encoding="utf-8") as f:
        f.write(format_report(report))
    return report


def _encoder_parameters(config):
    from albert_tf import AlbertEncoder

    return int(AlbertEncoder(config).count_params())


def format_report(report):
    """The human-readable report."""
    c, v, r = report["corpus"], report["vocab"], report["records"]
    p, res, e = report["pretrain"], report["results"], report["export"]
    lines = [
        "ALBERT quickstart report (%s)" % report["output_dir"],
        "",
        "corpus      %d documents, %d sentences, %s characters (%d train / %d "
        "held-out documents) from %s" % (
            c["documents"], c["sentences"], format(c["characters"], ","),
            c.get("train_documents", 0), c.get("eval_documents", 0),
            c["source"]),
        "vocabulary  %d SentencePiece pieces -> %s" % (v["pieces"],
                                                       v["model_file"]),
        "instances   %d train, %d held-out -> %s" % (
            r["train"]["instances"], r["eval"]["instances"],
            os.path.dirname(r["train"]["path"])),
        "model       %s, %s encoder parameters" % (p["preset"],
                                           format(p["parameters"], ",")),
        "training    %d of %d steps of batch %d (%s; %.0f s this run%s)" % (
            p["steps"], p["num_train_steps"], p["train_batch_size"],
            "resumed from step %d" % p["resumed_from_step"]
            if p["resumed_from_step"] else "from scratch",
            p["seconds_this_run"],
            "; stopped by --train_seconds, run again to continue"
            if p["stopped_by_time_budget"] else ""),
        "",
        "evaluation  %s, best checkpoint %s:" % (res["evaluated_on"],
                                                  res["checkpoint"]),
        "  masked-LM accuracy  %.1f%%  (baseline: always %r, %.1f%%)" % (
            100 * res["masked_lm_accuracy"], res["masked_lm_baseline_piece"],
            100 * res["masked_lm_baseline"]),
        "  SOP accuracy        %.1f%%  (chance: 50.0%%)" % (
            100 * res["sentence_order_accuracy"]),
        "",
        "files",
        "  checkpoints   %s (ckpt-N; eval_results.txt; best/)" % p["output_dir"],
        "  SavedModels   %s (version %d, %s)" % (
            e["export_dir"], e["version"],
            "reused" if e["reused"] else "exported by this run"),
    ]
    for key in ("serving", "encoder", "preprocessor"):
        lines.append("    %-12s  %s" % (key, e["paths"][key]))
    lines += [
        "  report        %s" % ", ".join(report["report_files"]),
        "  curves        %s" % report["plot"],
        "",
        "queries (through %s)" % report["queries"]["model"],
    ]
    for q in report["queries"]["fill_mask"]:
        lines.append("  fill_mask %r" % q["query"])
        lines.append("      " + ", ".join(
            "%s %.3f" % (piece, prob) for piece, prob in q["predictions"]))
    nn = report["queries"]["nearest_neighbours"]
    lines.append("  nearest neighbours of %r (centered pooled_output "
                 "cosine):" %
                 nn["query"])
    for text, sim in nn["ranking"]:
        lines.append("      %+.3f  %s" % (sim, text))
    lines += [
        "",
        "TensorBoard: %s" % report["tensorboard"],
        "",
        "stages: " + ", ".join(
            "%s %.0fs%s" % (name, t["seconds"], " (skipped)" if t["skipped"]
                            else "")
            for name, t in report.get("stages", {}).items()),
    ]
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) > 1:
        raise app.UsageError("Unexpected arguments: %s" % argv[1:])
    report = run(FLAGS.output_dir, FLAGS.input_file, FLAGS.max_corpus_chars,
                 vocab_size=FLAGS.vocab_size,
                 max_seq_length=FLAGS.max_seq_length,
                 num_train_steps=FLAGS.num_train_steps,
                 train_seconds=FLAGS.train_seconds,
                 train_batch_size=FLAGS.train_batch_size,
                 dupe_factor=FLAGS.dupe_factor)
    print()
    print(format_report(report), end="")
    print("total %.0f s" % report["seconds"])


if __name__ == "__main__":
    define_flags()
    logging.set_verbosity(logging.INFO)
    app.run(main)
