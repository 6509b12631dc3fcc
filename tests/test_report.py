"""The quickstart's report and curves (`albert_apps.quickstart.report`)."""

import json
import os

import numpy as np
import tensorflow as tf

from albert_apps.quickstart import downstream
from albert_apps.quickstart import report as report_lib
from albert_apps.quickstart import stage_results
from albert_apps.quickstart import stages_downstream
from tools import plot


def _eval(step, mlm, sop):
    return {"checkpoint": "ckpt-%d" % step, "global_step": step,
            "eval_batches": 2, "masked_lm_accuracy": mlm,
            "sentence_order_accuracy": sop}


def _report(output_dir):
    pretrain_dir = os.path.join(output_dir, "pretrain")
    curve = [_eval(10, 0.08, 0.55), _eval(20, 0.1, 0.6)]
    task = stages_downstream.task_result("sentence_order", {
        "pretrained": [{"seed": None, "dev_accuracy": 0.75}],
        "random_init": [{"seed": 0, "dev_accuracy": 0.5},
                        {"seed": 1, "dev_accuracy": 0.6}]},
        _task_files(3, 3))
    task.finetuned = {"dev_accuracy": 0.5, "steps": 9}
    task.classifier = "/export/albert_sentence_order/2"
    return stage_results.Report(
        output_dir=output_dir,
        corpus=stage_results.Corpus(
            documents=10, sentences=20, characters=12345, train_documents=9,
            eval_documents=1, downstream_documents=6, downstream_every=4,
            tasks=[_task_files(3, 3)], source="/corpus.txt", settings={},
            train_file="/data/train.txt", eval_file="/data/eval.txt",
            downstream_file="/data/downstream.txt"),
        vocab=stage_results.Vocabulary(
            requested_size=300, pieces=300, model_file="/data/spm.model",
            vocab_file="/data/spm.vocab", corpus={}),
        records=stage_results.Records(
            train=stage_results.RecordFile(
                instances=50, path="/data/train.tfrecord", stats="/s"),
            eval=stage_results.RecordFile(
                instances=20, path="/data/eval.tfrecord", stats="/s"),
            baseline=stage_results.Baseline(
                masked_lm_accuracy=0.05, piece="\u2581", masked_tokens=200,
                token_id=5, records_mtime=1.0)),
        pretrain=stage_results.PretrainingRun(
            output_dir=pretrain_dir, preset="tiny widened",
            parameters=355456, steps=20, num_train_steps=30,
            train_batch_size=16, resumed_from_step=10,
            seconds_this_run=3.2, stopped_by_time_budget=True,
            eval_curve=curve, last_eval=curve[-1], best_eval=curve[-1],
            dtype="float32", checkpoints=["ckpt-20"],
            best_dir=os.path.join(pretrain_dir, "best"),
            eval_results=os.path.join(pretrain_dir, "eval_results.txt")),
        export=stage_results.ExportedModels(
            checkpoint_step=20, export_dir="/export", version=2,
            reused=False,
            paths={"serving": "/export/albert/2",
                   "encoder": "/export/albert_encoder/2",
                   "preprocessor": "/export/albert_preprocessor/2"}),
        finetune=stage_results.DownstreamResults(
            tasks=[task],
            method=stages_downstream.PROBE_METHOD,
            encoders={"pretrained": "/export/albert_encoder/2",
                      "random_init": "/finetune/random_init_encoder"},
            encoder_version=2,
            settings={"seeds": [0, 1], "num_train_steps": 9,
                      "tasks": ["sentence_order"]},
            skipped={}),
        queries=stage_results.Answers(
            model="/export/albert/2",
            fill_mask=stage_results.FillMaskScores(
                queries=[{"query": "Return the [MASK].", "answer": "list",
                          "predictions": [["\u2581a", 0.5],
                                          ["\u2581list", 0.25]],
                          "content_predictions": [["\u2581list", 0.25]],
                          "rank": 1, "content_rank": 0}],
                top1_accuracy=0.0, top5_accuracy=1.0,
                content_top1_accuracy=1.0, content_top5_accuracy=1.0,
                baseline_words=["file", "list"],
                baseline_top1_accuracy=0.0, baseline_top5_accuracy=1.0),
            classifiers=[stage_results.ServedClassifier(
                task="sentence_order",
                model="/export/albert_sentence_order/2", accuracy=0.5,
                dev_pairs=3,
                examples=[{"first": "B.", "second": "A.",
                           "true_label": "swapped", "label": "in order",
                           "label_id": 0, "probability": 0.7,
                           "probabilities": [0.7, 0.3]}])]),
    )


def _task_files(train, dev):
    return downstream.TaskFiles(
        name="sentence_order", train=train, dev=dev, documents=4,
        wanted=[400, 1000], short=None, task_dir="/data/task/sentence_order")


def _write_events(folder, tag, points):
    writer = tf.summary.create_file_writer(folder)
    with writer.as_default():
        for step, value in points:
            tf.summary.write(tag, tf.constant(value, tf.float32), step=step)
    writer.close()


def test_summary_results_and_files(tmp_path):
    out = str(tmp_path)
    report = _report(out)
    pretrain_dir = report.pretrain.output_dir
    _write_events(os.path.join(pretrain_dir, "train"), "masked_lm_accuracy",
                  [(10, 0.02), (20, 0.08)])
    _write_events(os.path.join(pretrain_dir, "eval"), "masked_lm_accuracy",
                  [(20, 0.1)])
    report_lib.summarize(report)
    results = stage_results.to_json(report.results)
    ci95 = results.pop("sentence_order_ci95")
    mlm_ci95 = results.pop("masked_lm_ci95")
    assert results == {
        "checkpoint": "ckpt-20", "masked_lm_accuracy": 0.1,
        "sentence_order_accuracy": 0.6, "last_checkpoint": "ckpt-20",
        "last_step": 20,
        "last_masked_lm_accuracy": 0.1, "last_sentence_order_accuracy": 0.6,
        "peaks": {"masked_lm_accuracy": {"step": 20, "value": 0.1,
                                         "last_within_noise": True},
                  "sentence_order_accuracy": {"step": 20, "value": 0.6,
                                              "last_within_noise": True}},
        "curve": [{"step": 10, "masked_lm_accuracy": 0.08,
                   "sentence_order_accuracy": 0.55},
                  {"step": 20, "masked_lm_accuracy": 0.1,
                   "sentence_order_accuracy": 0.6}],
        "masked_lm_baseline": 0.05, "masked_lm_baseline_piece": "\u2581",
        "sentence_order_baseline": 0.5,
        # 10 independent pairs (20 instances, 2 maskings each): 60% of them
        # is no evidence against chance.
        "sentence_order_verdict": "at chance",
        "independent_pairs": 10,
        "evaluated_on": "20 held-out instances (documents never trained "
                        "on), at every checkpoint"}
    assert ci95[0] < 0.5 < 0.6 < ci95[1]
    assert mlm_ci95[0] < 0.1 < mlm_ci95[1]  # Over the 200 masked tokens.
    results.update(sentence_order_ci95=ci95, masked_lm_ci95=mlm_ci95)
    assert report.plot_points == {"train_points": 2, "eval_points": 1}
    image = tf.io.decode_png(open(report.plot, "rb").read(),
                             channels=3).numpy().astype(int)
    for color in (plot.BLUE, plot.ORANGE, plot.GRAY):  # GRAY: the baseline.
        assert (np.abs(image - np.array(color)).max(axis=-1) <= 12).any()
    assert pretrain_dir in report.tensorboard

    report.stages = {"corpus": stage_results.StageTime(True, 1.0),
                     "vocab": stage_results.StageTime(False, 2.6)}
    report_lib.write_report(report)
    with open(os.path.join(out, report_lib.REPORT_JSON)) as f:
        saved = json.load(f)
    assert saved["results"] == results
    assert saved == stage_results.to_json(report)
    # The report keeps every stage's section, and what only it shows.
    assert saved["export"]["reused"] is False
    assert saved["finetune"]["verdicts"] == {
        "sentence_order": "can't tell (within noise)"}
    assert saved["stages"]["corpus"] == {"seconds": 1.0, "skipped": True}
    with open(os.path.join(out, report_lib.REPORT_TXT)) as f:
        assert f.read() == report_lib.format_report(report)


def test_checkpoints_are_described_per_metric_against_noise():
    report = _report("/out")
    curve = report.pretrain.eval_curve
    # SOP fell 20 points from its best (beyond noise over 1000 pairs); MLM
    # rose to the end.
    curve.append(_eval(30, 0.11, 0.4))
    report.pretrain.last_eval = curve[-1]
    results = report_lib.results(report.pretrain, report.records.baseline,
                                 2000)
    assert results.peaks["masked_lm_accuracy"] == stage_results.Peak(
        step=30, value=0.11, last_within_noise=True)
    assert results.peaks["sentence_order_accuracy"] == stage_results.Peak(
        step=20, value=0.6, last_within_noise=False)
    assert results.sentence_order_verdict == "below chance"
    lines = report_lib._pretraining_lines(results)
    assert "  masked-LM: highest at the last checkpoint (step 30)" in lines
    assert ("  SOP:       highest at step 20 (60.0%); the last checkpoint is "
            "below it by more than noise") in lines
    # A wiggle at chance is noise, not overfitting.
    curve[-1]["sentence_order_accuracy"] = 0.59
    results = report_lib.results(report.pretrain, report.records.baseline,
                                 2000)
    assert results.peaks["sentence_order_accuracy"].last_within_noise
    assert results.sentence_order_verdict == "above chance"
    assert not any("overfit" in line
                   for line in report_lib._pretraining_lines(results))


def test_report_text(tmp_path):
    report = _report(str(tmp_path))
    report_lib.summarize(report)  # No event files: empty panels.
    report.stages = {"corpus": stage_results.StageTime(True, 1.0),
                     "vocab": stage_results.StageTime(False, 2.6)}
    text = report_lib.format_report(report)
    for line in (
            "corpus      10 documents, 20 sentences, 12,345 characters (9 "
            "pretraining / 1 held-out documents) from /corpus.txt",
            "downstream  6 documents never pretrained on (one in 4 of the "
            "corpus); tasks: sentence_order 3 train / 3 dev examples",
            "instances   50 train, 20 held-out -> /data",
            "model       tiny widened, 355,456 encoder parameters",
            "training    20 of 30 steps of batch 16 (resumed from step 10; "
            "3 s this run; stopped by --train_seconds, run again to "
            "continue)",
            "  step 10      8.0%                 55.0%",
            "  step 20      10.0%                60.0%",
            "  baseline     5.0% (always '\u2581')    50.0% (chance)",
            "    pretrained   75.0% [26.0, 100.0]",
            "    random init  55.0% [0.0, 100.0]  (seeds 50.0% to 60.0%)",
            "    margin +20.0 points [-55.3, 95.3]: can't tell (within "
            "noise)",
            "    fine-tuned (the pretrained encoder, 9 steps, one run): dev "
            "accuracy 50.0%; served below",
            "served sentence_order classifier (raw text in, "
            "/export/albert_sentence_order/2): dev accuracy 50.0% over 3 "
            "examples",
            "  true swapped             -> in order            0.700  'B.' | "
            "'A.'",
            "  the model's top pieces:            top-1 0.0%, top-5 100.0%",
            "  its most probable content words:   top-1 100.0%, top-5 100.0%",
            "  baseline (always file/list): top-1 0.0%, top-5 100.0%",
            "  'Return the [MASK].'  (answer 'list')",
            "      \u2581list 0.250  | top: \u2581a 0.500, \u2581list 0.250",
            "  SavedModels   /export (version 2, exported by this run)",
            "    preprocessor  /export/albert_preprocessor/2",
            "    classifier    /export/albert_sentence_order/2",
            "stages: corpus 1s (skipped), vocab 3s"):
        assert line in text.splitlines(), line
    assert "  masked-LM: highest at the last checkpoint (step 20)" in text
    assert ("  SOP at the last checkpoint: 60.0%, 95% interval [31.3, 83.2] "
            "over 10 independent held-out pairs: at chance (sentence order "
            "is not learned at this budget") in text
    assert text.count("machine: ") == 1


def test_a_collapsed_classifier_is_in_the_report(tmp_path):

    report = _report(str(tmp_path))
    task = report.finetune.tasks[0]
    tuned = {"dev_accuracy": 0.246, "majority_accuracy": 0.5, "steps": 9,
             "collapsed": True, "predicted_class": 1, "eval_examples": 3}
    labels = ["in order", "swapped"]
    tuned["collapse_warning"] = stages_downstream.collapse_warning(
        type("Task", (), {"name": "sentence_order", "labels": labels}), tuned)
    task.finetuned = tuned
    report_lib.summarize(report)
    assert report.finetune.collapsed == {
        "sentence_order": tuned["collapse_warning"]}
    assert "answers 'swapped' for all 3 dev examples" in (
        tuned["collapse_warning"])
    text = report_lib.format_report(report).splitlines()
    assert ("    fine-tuned (the pretrained encoder, 9 steps, one run): dev "
            "accuracy 24.6% (the majority class alone: 50.0%); served "
            "below") in text
    assert "    COLLAPSED: " + tuned["collapse_warning"] in text
