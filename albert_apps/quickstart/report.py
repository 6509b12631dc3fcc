"""The quickstart's report: `report.json`, `report.txt` and the training
curves (`training_curves.png`, drawn by `tools.plot` from the run's
TensorBoard event files).

The report is one dict: a section per stage (what each function of
`albert_apps.quickstart.stages` returned), `results` (the best checkpoint's
accuracies next to their baselines), the stage timings and the paths of
the files written.
"""

import os

from tools import plot

from albert_apps.quickstart import stages
from albert_tf.training import hardware

REPORT_JSON = "report.json"
REPORT_TXT = "report.txt"
CURVES_PNG = "training_curves.png"
SOP_CHANCE = 0.5  # Two classes, balanced by construction.
# A last checkpoint this close to the best held-out accuracy "holds": the
# standard error of an accuracy over 2,000+ instances is about 1 point.
HOLD_TOLERANCE = 0.005
SHOWN_QUERIES = 3


def results(trained, baseline, eval_instances):
    """The held-out accuracies of every checkpoint, next to their baselines.

    Args:
        trained: what `stages.pretrain` returned.
        baseline: the `baseline` of what `stages.build_records` returned.
        eval_instances: held-out instances (each checkpoint sees them all).

    Returns:
        A dict: the best and the last checkpoint's accuracies, `curve` (one
        entry per evaluated checkpoint), the baselines and
        `last_is_not_worse`: whether the last checkpoint's held-out
        masked-LM and SOP accuracies are within `HOLD_TOLERANCE` of the
        best seen, i.e. training still generalizes at its end.
    """
    best, last = trained["best_eval"], trained["last_eval"]
    curve = [{"step": int(r["global_step"]),
              "masked_lm_accuracy": r["masked_lm_accuracy"],
              "sentence_order_accuracy": r["sentence_order_accuracy"]}
             for r in trained.get("eval_curve", [])]
    peaks = {key: max([c[key] for c in curve] or [last[key]])
             for key in ("masked_lm_accuracy", "sentence_order_accuracy")}
    return {
        "checkpoint": best["checkpoint"],
        "masked_lm_accuracy": best["masked_lm_accuracy"],
        "sentence_order_accuracy": best["sentence_order_accuracy"],
        "last_checkpoint": last["checkpoint"],
        "last_masked_lm_accuracy": last["masked_lm_accuracy"],
        "last_sentence_order_accuracy": last["sentence_order_accuracy"],
        "last_is_not_worse": all(last[key] >= peak - HOLD_TOLERANCE
                                 for key, peak in peaks.items()),
        "curve": curve,
        "masked_lm_baseline": baseline["masked_lm_accuracy"],
        "masked_lm_baseline_piece": baseline["piece"],
        "sentence_order_baseline": SOP_CHANCE,
        "evaluated_on": "%d held-out instances (documents never trained "
                        "on), at every checkpoint" % eval_instances,
    }


def _series(points, label, color, markers):
    return dict(label=label, x=[p[0] for p in points],
                y=[p[1] for p in points], color=color, markers=markers)


def training_curves(pretrain_dir, png_path, baselines=None):
    """Draws losses and accuracies over steps from the run's event files.

    Args:
        pretrain_dir: the training folder (event files under `train/` and
            `eval/`).
        png_path: the image to write.
        baselines: `tag -> (label, value)`, drawn as a dashed line in the
            panel of `tag`.

    Returns:
        The points drawn: `train_points` and `eval_points`.
    """
    baselines = baselines or {}
    train = plot.read_scalars(os.path.join(pretrain_dir, "train"))
    evals = plot.read_scalars(os.path.join(pretrain_dir, "eval"))
    panels = []
    for tag, title in (("masked_lm_loss", "masked-LM loss"),
                       ("sentence_order_loss", "SOP loss"),
                       ("masked_lm_accuracy", "masked-LM accuracy"),
                       ("sentence_order_accuracy", "SOP accuracy")):
        series = [_series(data[tag], name, color, markers)
                  for name, data, color, markers in (
                      ("train", train, plot.BLUE, False),
                      ("eval", evals, plot.ORANGE, True))
                  if data.get(tag)]
        if tag in baselines and series:
            xs = [x for s in series for x in s["x"]]
            series.append(dict(label=baselines[tag][0], x=[min(xs), max(xs)],
                               y=[baselines[tag][1]] * 2, color=plot.GRAY,
                               dash=6))
        panels.append(dict(title=title, series=series,
                           log=tag.endswith("_loss")))
    plot.save_chart(panels, png_path)
    return {"train_points": sum(len(v) for v in train.values()),
            "eval_points": sum(len(v) for v in evals.values())}


def summarize(report):
    """Stage 8: adds the results, the curves, the machine and the pointers
    to the files to `report` (which holds the sections of stages 1 to 7)."""
    output_dir = report["output_dir"]
    trained, baseline = report["pretrain"], report["records"]["baseline"]
    report["results"] = results(trained, baseline,
                                report["records"]["eval"]["instances"])
    report["plot"] = os.path.join(output_dir, CURVES_PNG)
    report["plot_points"] = training_curves(trained["output_dir"],
                                            report["plot"], {
        "masked_lm_accuracy": ("most frequent token",
                               baseline["masked_lm_accuracy"]),
        "sentence_order_accuracy": ("chance", SOP_CHANCE)})
    report["machine"] = hardware.describe()
    report["tensorboard"] = ("pip install tensorboard && tensorboard "
                             "--logdir %s" % trained["output_dir"])
    report["report_files"] = [os.path.join(output_dir, REPORT_TXT),
                              os.path.join(output_dir, REPORT_JSON)]


def write_report(report):
    """Writes `report.json` and `report.txt` under the report's output_dir."""
    output_dir = report["output_dir"]
    stages.write_json(os.path.join(output_dir, REPORT_JSON), report)
    with open(os.path.join(output_dir, REPORT_TXT), "w",
              encoding="utf-8") as f:
        f.write(format_report(report))


def _pct(value):
    return "%.1f%%" % (100 * value)


def _summary_lines(report):
    c, v, r = report["corpus"], report["vocab"], report["records"]
    p = report["pretrain"]
    return [
        "corpus      %d documents, %d sentences, %s characters (%d "
        "pretraining / %d held-out documents) from %s" % (
            c["documents"], c["sentences"], format(c["characters"], ","),
            c["train_documents"], c["eval_documents"], c["source"]),
        "downstream  %d documents never pretrained on; task: %d train / %d "
        "dev pairs" % (c["downstream_documents"], c["task"]["train"],
                       c["task"]["dev"]),
        "vocabulary  %d SentencePiece pieces -> %s" % (v["pieces"],
                                                       v["model_file"]),
        "instances   %d train, %d held-out -> %s" % (
            r["train"]["instances"], r["eval"]["instances"],
            os.path.dirname(r["train"]["path"])),
        "model       %s, %s encoder parameters" % (
            p["preset"], format(p["parameters"], ",")),
        "training    %d of %d steps of batch %d (%s; %.0f s this run%s)" % (
            p["steps"], p["num_train_steps"], p["train_batch_size"],
            "resumed from step %d" % p["resumed_from_step"]
            if p["resumed_from_step"] else "from scratch",
            p["seconds_this_run"],
            "; stopped by --train_seconds, run again to continue"
            if p["stopped_by_time_budget"] else ""),
    ]


def _pretraining_lines(res):
    lines = ["pretraining, evaluated on %s:" % res["evaluated_on"],
             "  %-12s %-20s %s" % ("checkpoint", "masked-LM accuracy",
                                   "SOP accuracy")]
    for point in res["curve"]:
        lines.append("  %-12s %-20s %s" % (
            "step %d" % point["step"], _pct(point["masked_lm_accuracy"]),
            _pct(point["sentence_order_accuracy"])))
    lines.append("  %-12s %-20s %s" % (
        "baseline", "%s (always %r)" % (_pct(res["masked_lm_baseline"]),
                                        res["masked_lm_baseline_piece"]),
        "50.0% (chance)"))
    lines.append(
        "  the last checkpoint (%s) %s; the best is %s" % (
            res["last_checkpoint"],
            "holds the best held-out accuracies (within %.1f points)" % (
                100 * HOLD_TOLERANCE) if res["last_is_not_worse"] else
            "is below the best held-out accuracies: training overfits",
            res["checkpoint"]))
    return lines


def _finetune_lines(report):
    f = report["finetune"]
    runs = f["runs"]
    lines = [
        "fine-tuning: sentence order of held-out documents (%d train / %d dev "
        "pairs, %d steps a run), through the exported encoder loaded as a "
        "Keras layer (%s), against the same model from random "
        "initialization:" % (f["task"]["train"], f["task"]["dev"],
                             f["settings"]["num_train_steps"],
                             f["encoders"]["pretrained"]),
        "  %-6s %-12s %s" % ("seed", "pretrained", "random init")]
    for pre, rnd in zip(runs["pretrained"], runs["random_init"]):
        lines.append("  %-6d %-12s %s" % (pre["seed"],
                                          _pct(pre["dev_accuracy"]),
                                          _pct(rnd["dev_accuracy"])))
    lines.append("  %-6s %-12s %s   margin %+.1f points (smallest over seeds "
                 "%+.1f)" % ("mean", _pct(f["mean"]["pretrained"]),
                             _pct(f["mean"]["random_init"]),
                             100 * (f["mean"]["pretrained"] -
                                    f["mean"]["random_init"]),
                             100 * f["min_margin"]))
    return lines


def _short(text, width=60):
    return text if len(text) <= width else text[:width - 3] + "..."


def _query_lines(queries):
    c, fm = queries["classifier"], queries["fill_mask"]
    lines = ["served classifier (raw text in, %s): dev accuracy %s over %d "
             "pairs" % (c["model"], _pct(c["accuracy"]), c["dev_pairs"])]
    for e in c["examples"]:
        lines.append("  true %-9s -> %-9s %.3f  %r | %r" % (
            e["true_label"], e["label"], e["probability"],
            _short(e["first"], 40), _short(e["second"], 40)))
    shown = fm["queries"][:SHOWN_QUERIES]
    right = [q for q in fm["queries"] if q["content_rank"] == 0]
    lines += [
        "",
        "fill_mask (%s) on %d held-out sentences, one content word masked "
        "in each (rule: albert_apps/quickstart/queries.py):" % (
            queries["model"], len(fm["queries"])),
        "  the model's top pieces:            top-1 %s, top-5 %s" % (
            _pct(fm["top1_accuracy"]), _pct(fm["top5_accuracy"])),
        "  its most probable content words:   top-1 %s, top-5 %s" % (
            _pct(fm["content_top1_accuracy"]),
            _pct(fm["content_top5_accuracy"])),
        "  baseline (always %s): top-1 %s, top-5 %s" % (
            "/".join(fm["baseline_words"]),
            _pct(fm["baseline_top1_accuracy"]),
            _pct(fm["baseline_top5_accuracy"])),
        "  the first %d queries, then the first %d whose most probable "
        "content word is right (model's content words first):" % (
            len(shown), min(SHOWN_QUERIES, len(right)))]
    for q in shown + right[:SHOWN_QUERIES]:
        lines.append("  %r  (answer %r)" % (_short(q["query"], 70),
                                            q["answer"]))
        lines.append("      " + ", ".join(
            "%s %.3f" % (piece, prob) for piece, prob in
            q["content_predictions"]) + "  | top: " + ", ".join(
            "%s %.3f" % (piece, prob) for piece, prob in q["predictions"]))
    return lines


def _file_lines(report):
    p, e = report["pretrain"], report["export"]
    lines = [
        "files",
        "  checkpoints   %s (ckpt-N; eval_results.txt; best/)" % (
            p["output_dir"]),
        "  SavedModels   %s (version %d, %s)" % (
            e["export_dir"], e["version"],
            "reused" if e["reused"] else "exported by this run"),
    ]
    for key in ("serving", "encoder", "preprocessor"):
        lines.append("    %-12s  %s" % (key, e["paths"][key]))
    lines += ["    %-12s  %s" % ("classifier", report["finetune"]["classifier"]),
              "  report        %s" % ", ".join(report["report_files"]),
              "  curves        %s" % report["plot"]]
    return lines


def format_report(report):
    """The human-readable report (`report.txt`)."""
    lines = (["ALBERT quickstart report (%s)" % report["output_dir"], ""] +
             _summary_lines(report) + [""] +
             _pretraining_lines(report["results"]) + [""] +
             _finetune_lines(report) + [""] +
             _query_lines(report["queries"]) + [""] + _file_lines(report))
    lines += [
        "",
        "TensorBoard: %s" % report["tensorboard"],
        "",
        "machine: %s" % report.get("machine", "?"),
        "stages: " + ", ".join(
            "%s %.0fs%s" % (name, t["seconds"], " (skipped)" if t["skipped"]
                            else "")
            for name, t in report.get("stages", {}).items()),
    ]
    return "\n".join(lines) + "\n"
