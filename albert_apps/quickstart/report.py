"""The quickstart's report: `report.json`, `report.txt` and the training
curves (`training_curves.png`, drawn by `tools.plot` from the run's
TensorBoard event files).

The report is one `stage_results.Report`: a section per stage (what each
function of `albert_apps.quickstart.stages` returned), `results` (the best
checkpoint's accuracies next to their baselines), the stage timings and the
paths of the files written.
"""

import io
import os

from albert_apps import intervals
from albert_apps.quickstart import stage_results
from albert_apps.quickstart import stages
from albert_tf.training import hardware
from foundation import safe_io
from tools import plot

REPORT_JSON = "report.json"
REPORT_TXT = "report.txt"
CURVES_PNG = "training_curves.png"
SOP_CHANCE = 0.5  # Two classes, balanced by construction.
SHOWN_QUERIES = 3
METRICS = (("masked_lm_accuracy", "masked-LM"),
           ("sentence_order_accuracy", "SOP"))


def _peak(curve, key):
    return max(curve, key=lambda point: getattr(point, key))


def _curve_point(row):
    """An `eval_results.txt` row as a `stage_results.CurvePoint`."""
    return stage_results.CurvePoint(
        step=int(row["global_step"]),
        masked_lm_accuracy=row["masked_lm_accuracy"],
        sentence_order_accuracy=row["sentence_order_accuracy"])


def results(trained, baseline, eval_instances, eval_documents=None):
    """The held-out accuracies of every checkpoint, next to their baselines,
    with the 95% intervals and verdicts they support.

    Args:
        trained: what `stages.pretrain` returned.
        baseline: the `baseline` of what `stages.build_records` returned
            (a `stage_results.Baseline`).
        eval_instances: held-out instances (each checkpoint sees them all).
        eval_documents: the held-out SOP pairs that are independent (one
            masking of each held-out document's pairs:
            `eval_instances / EVAL_DUPE_FACTOR`); the intervals count these,
            not the instances, as the maskings share their sentences.

    Returns:
        A `stage_results.HeldOutResults`: the best checkpoint's accuracies
        (`checkpoint`, chosen by held-out masked-LM accuracy), the last
        checkpoint's, `curve` (one point per evaluated checkpoint), `peaks`
        (per metric: the step of its highest value, the value, and whether
        the last checkpoint is within noise of it), the baselines,
        `sentence_order_ci95` and `sentence_order_verdict` (the last
        checkpoint's SOP against chance).
    """
    best, last = trained.best_eval, trained.last_eval
    n = eval_documents or max(1, eval_instances // stages.EVAL_DUPE_FACTOR)
    curve = [_curve_point(r) for r in trained.eval_curve or [last]]
    peaks = {}
    for key, _ in METRICS:
        top = _peak(curve, key)
        peaks[key] = stage_results.Peak(
            step=top.step, value=getattr(top, key),
            last_within_noise=intervals.difference_is_noise(
                getattr(top, key), last[key], n))
    sop = last["sentence_order_accuracy"]
    sop_interval = intervals.wilson(sop, n)
    return stage_results.HeldOutResults(
        checkpoint=best["checkpoint"],
        masked_lm_accuracy=best["masked_lm_accuracy"],
        sentence_order_accuracy=best["sentence_order_accuracy"],
        last_checkpoint=last["checkpoint"],
        last_step=int(last["global_step"]),
        last_masked_lm_accuracy=last["masked_lm_accuracy"],
        last_sentence_order_accuracy=sop,
        peaks=peaks,
        curve=curve,
        masked_lm_baseline=baseline.masked_lm_accuracy,
        masked_lm_baseline_piece=baseline.piece,
        masked_lm_ci95=[round(x, 4) for x in intervals.wilson(
            last["masked_lm_accuracy"], baseline.masked_tokens or n)],
        sentence_order_baseline=SOP_CHANCE,
        sentence_order_ci95=[round(x, 4) for x in sop_interval],
        sentence_order_verdict=intervals.chance_verdict(sop_interval,
                                                        SOP_CHANCE),
        independent_pairs=n,
        evaluated_on="%d held-out instances (documents never trained on), "
                     "at every checkpoint" % eval_instances,
    )


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
    # Drawn in memory, then written whole: a killed job leaves no half image.
    image = io.BytesIO()
    plot.save_chart(panels, image)
    safe_io.write_atomically(png_path, image.getvalue())
    return {"train_points": sum(len(v) for v in train.values()),
            "eval_points": sum(len(v) for v in evals.values())}


def summarize(report):
    """Stage 8: adds the results, the curves, the machine and the pointers
    to the files to `report` (a `stage_results.Report` holding the sections
    of stages 1 to 7)."""
    output_dir = report.output_dir
    trained, baseline = report.pretrain, report.records.baseline
    report.results = results(trained, baseline, report.records.eval.instances)
    finetuned = report.finetune
    finetuned.verdicts = {t.name: t.verdict for t in finetuned.tasks}
    # A classifier that answers one class for every dev example, by task.
    finetuned.collapsed = {
        t.name: t.finetuned["collapse_warning"] for t in finetuned.tasks
        if (t.finetuned or {}).get("collapsed")}
    report.plot = os.path.join(output_dir, CURVES_PNG)
    report.plot_points = training_curves(trained.output_dir, report.plot, {
        "masked_lm_accuracy": ("most frequent token",
                               baseline.masked_lm_accuracy),
        "sentence_order_accuracy": ("chance", SOP_CHANCE)})
    report.machine = hardware.describe()
    report.tensorboard = ("pip install tensorboard && tensorboard "
                          "--logdir %s" % trained.output_dir)
    report.report_files = [os.path.join(output_dir, REPORT_TXT),
                           os.path.join(output_dir, REPORT_JSON)]


def write_report(report):
    """Writes `report.json` and `report.txt` under the report's output_dir."""
    output_dir = report.output_dir
    stages.write_json(os.path.join(output_dir, REPORT_JSON),
                      stage_results.to_json(report))
    safe_io.write_atomically(os.path.join(output_dir, REPORT_TXT),
                             format_report(report))


def _pct(value):
    return "%.1f%%" % (100 * value)


def _summary_lines(report):
    c, v, r = report.corpus, report.vocab, report.records
    p = report.pretrain
    return [
        "corpus      %d documents, %d sentences, %s characters (%d "
        "pretraining / %d held-out documents) from %s" % (
            c.documents, c.sentences, format(c.characters, ","),
            c.train_documents, c.eval_documents, c.source),
        "downstream  %d documents never pretrained on%s; tasks: %s" % (
            c.downstream_documents,
            " (one in %d of the corpus)" % c.downstream_every
            if c.downstream_every else "",
            ", ".join("%s %d train / %d dev examples" % (
                t.name, t.train, t.dev) for t in c.tasks)),
        "vocabulary  %d SentencePiece pieces -> %s" % (v.pieces,
                                                       v.model_file),
        "instances   %d train, %d held-out -> %s" % (
            r.train.instances, r.eval.instances,
            os.path.dirname(r.train.path)),
        "model       %s, %s encoder parameters" % (
            p.preset, format(p.parameters, ",")),
        "training    %d of %d steps of batch %d (%s; %.0f s this run%s)" % (
            p.steps, p.num_train_steps, p.train_batch_size,
            "resumed from step %d" % p.resumed_from_step
            if p.resumed_from_step else "from scratch",
            p.seconds_this_run,
            "; stopped by --train_seconds, run again to continue"
            if p.stopped_by_time_budget else ""),
    ]


SOP_ADVICE = ("sentence order is not learned at this budget; what usually "
              "helps: more steps (--num_train_steps, or run again to "
              "continue), longer sequences (--max_seq_length=128), and text "
              "whose sentence order carries meaning")


def _interval(interval):
    return "[%.1f, %.1f]" % (100 * interval[0], 100 * interval[1])


def _pretraining_lines(res):
    lines = ["pretraining, evaluated on %s:" % res.evaluated_on,
             "  %-12s %-20s %s" % ("checkpoint", "masked-LM accuracy",
                                   "SOP accuracy")]
    for point in res.curve:
        lines.append("  %-12s %-20s %s" % (
            "step %d" % point.step, _pct(point.masked_lm_accuracy),
            _pct(point.sentence_order_accuracy)))
    lines.append("  %-12s %-20s %s" % (
        "baseline", "%s (always %r)" % (_pct(res.masked_lm_baseline),
                                        res.masked_lm_baseline_piece),
        "50.0% (chance)"))
    for key, label in METRICS:
        peak = res.peaks[key]
        if peak.step == res.last_step:
            where = "highest at the last checkpoint (step %d)" % peak.step
        else:
            where = "highest at step %d (%s); the last checkpoint is %s" % (
                peak.step, _pct(peak.value),
                "within noise of it" if peak.last_within_noise else
                "below it by more than noise")
        lines.append("  %-10s %s" % (label + ":", where))
    lines.append(
        "  SOP at the last checkpoint: %s, 95%% interval %s over %d "
        "independent held-out pairs: %s%s" % (
            _pct(res.last_sentence_order_accuracy),
            _interval(res.sentence_order_ci95), res.independent_pairs,
            res.sentence_order_verdict,
            "" if res.sentence_order_verdict == intervals.ABOVE_CHANCE
            else " (%s)" % SOP_ADVICE))
    lines.append("  exported: %s, the checkpoint of the highest held-out "
                 "masked-LM accuracy" % res.checkpoint)
    return lines


def _finetune_lines(report):
    f = report.finetune
    lines = [
        "downstream tasks, held-out documents never pretrained on: %s; the "
        "exported encoder (%s, checked against the SavedModel loaded as a "
        "Keras layer) against the same model from random initialization "
        "(seeds %s); accuracy with its 95%% interval (dev set and seeds):" % (
            f.method, f.encoders["pretrained"],
            ", ".join(map(str, f.settings["seeds"])))]
    for task in f.tasks:
        lines += [
            "  %s (%d train / %d dev examples): %s" % (
                task.name, task.train_examples, task.dev_examples,
                task.measures),
            "    pretrained   %s %s" % (
                _pct(task.pretrained), _interval(task.pretrained_ci95)),
            "    random init  %s %s  (seeds %s to %s)" % (
                _pct(task.random_init), _interval(task.random_init_ci95),
                _pct(task.random_init_seed_range[0]),
                _pct(task.random_init_seed_range[1])),
            "    margin %+.1f points %s: %s" % (
                100 * task.margin, _interval(task.margin_ci95),
                task.verdict)]
        tuned = task.finetuned
        if tuned:
            majority = tuned.get("majority_accuracy")
            lines.append(
                "    fine-tuned (the pretrained encoder, %d steps, one run): "
                "dev accuracy %s%s; served below" % (
                    tuned["steps"], _pct(tuned["dev_accuracy"]),
                    "" if majority is None else
                    " (the majority class alone: %s)" % _pct(majority)))
            if tuned.get("collapsed"):
                lines.append("    COLLAPSED: " + tuned["collapse_warning"])
        if task.short:
            lines.append("    note: " + task.short)
    for name, reason in sorted(f.skipped.items()):
        lines.append("  %s: not measured (%s)" % (name, reason))
    return lines


def _short(text, width=60):
    return text if len(text) <= width else text[:width - 3] + "..."


def _query_lines(queries):
    fm = queries.fill_mask
    lines = []
    for c in queries.classifiers:
        lines.append("served %s classifier (raw text in, %s): dev accuracy "
                     "%s over %d examples" % (c.task, c.model,
                                              _pct(c.accuracy), c.dev_pairs))
        for e in c.examples:
            lines.append("  true %-19s -> %-19s %.3f  %r | %r" % (
                e["true_label"], e["label"], e["probability"],
                _short(e["first"], 40), _short(e["second"], 40)))
    shown = fm.queries[:SHOWN_QUERIES]
    right = [q for q in fm.queries if q["content_rank"] == 0]
    lines += [
        "",
        "fill_mask (%s) on %d held-out sentences, one content word masked "
        "in each (rule: albert_apps/quickstart/queries.py):" % (
            queries.model, len(fm.queries)),
        "  the model's top pieces:            top-1 %s, top-5 %s" % (
            _pct(fm.top1_accuracy), _pct(fm.top5_accuracy)),
        "  its most probable content words:   top-1 %s, top-5 %s" % (
            _pct(fm.content_top1_accuracy),
            _pct(fm.content_top5_accuracy)),
        "  baseline (always %s): top-1 %s, top-5 %s" % (
            "/".join(fm.baseline_words),
            _pct(fm.baseline_top1_accuracy),
            _pct(fm.baseline_top5_accuracy)),
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
    p, e = report.pretrain, report.export
    lines = [
        "files",
        "  checkpoints   %s (ckpt-N; eval_results.txt; best/)" % (
            p.output_dir),
        "  SavedModels   %s (version %d, %s)" % (
            e.export_dir, e.version,
            "reused" if e.reused else "exported by this run"),
    ]
    for key in ("serving", "encoder", "preprocessor"):
        lines.append("    %-12s  %s" % (key, e.paths[key]))
    lines += ["    %-12s  %s" % ("classifier", t.classifier)
              for t in report.finetune.tasks if t.classifier]
    lines += ["  report        %s" % ", ".join(report.report_files),
              "  curves        %s" % report.plot]
    return lines


def format_report(report):
    """The human-readable report (`report.txt`) of a
    `stage_results.Report`."""
    lines = (["ALBERT quickstart report (%s)" % report.output_dir, ""] +
             _summary_lines(report) + [""] +
             _pretraining_lines(report.results) + [""] +
             _finetune_lines(report) + [""] +
             _query_lines(report.queries) + [""] + _file_lines(report))
    lines += [
        "",
        "TensorBoard: %s" % report.tensorboard,
        "",
        "machine: %s" % (report.machine or "?"),
        "stages: " + ", ".join(
            "%s %.0fs%s" % (name, t.seconds, " (skipped)" if t.skipped
                            else "")
            for name, t in (report.stages or {}).items()),
    ]
    return "\n".join(lines) + "\n"
