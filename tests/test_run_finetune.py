"""Fine-tuning jobs end to end on tiny files: train, evaluate every checkpoint,
keep the best, write submissions, export a text-in SavedModel and serve it
from a fresh process."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from albert_apps import run_race
from albert_apps import run_squad
from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.tasks import finetuning_jobs
from albert_tf.tasks.options import ClassifierOptions
from albert_tf.tasks.options import RaceOptions
from albert_tf.tasks.options import SquadOptions
from albert_tf.training import model_dir as model_dir_lib
from albert_tf.training import results
from tests import tasks_testdata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = dict(train_batch_size=2, eval_batch_size=2, predict_batch_size=3,
            learning_rate=1e-3, warmup_step=1, train_step=4,
            save_checkpoints_steps=2, iterations_per_loop=2)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny pretrained-model directory (config, spm.model, checkpoint)."""
    spm = tasks_testdata.spm_model_path()
    config = AlbertConfig.from_preset("tiny", vocab_size=600,
                                      num_hidden_layers=2,
                                      max_position_embeddings=64)
    folder = str(tmp_path_factory.mktemp("pretrained"))
    model_dir_lib.save_model_dir(AlbertPretrainer(config), folder, spm)
    return folder


def _fresh_python(code):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_run_classifier_cli_export_serves_raw_text(model_dir, tmp_path):
    data_dir = tasks_testdata.write_glue(str(tmp_path / "glue"))["mrpc"]
    out, serving = str(tmp_path / "run"), str(tmp_path / "serving")
    args = ["--task_name=MRPC", f"--data_dir={data_dir}",
            f"--init_checkpoint={model_dir}", f"--output_dir={out}",
            "--do_train", "--do_eval", "--do_predict", "--max_seq_length=24",
            f"--export_dir={serving}", "--serving_dtype=int8",
            "--export_format=litert", "--litert_quantization=float32"] + [
                f"--{k}={v}" for k, v in FAST.items()]
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-m", "albert_apps.run_classifier",
                           *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    # Both checkpoints were evaluated; the best one was kept.
    evaluated = results.read_eval_results(os.path.join(out, "eval_results.txt"))
    assert [r["global_step"] for r in evaluated] == [2, 4]
    assert [r["checkpoint"] for r in evaluated] == ["ckpt-2", "ckpt-4"]
    best = results.best_result(out)
    assert best["score"] == max(r["score"] for r in evaluated)
    for name in ("model.ckpt.index", "eval_results.txt", "albert_config.json",
                 "task.json"):
        assert os.path.exists(os.path.join(out, "best", name)), name
    submission = open(os.path.join(out, "MRPC.tsv")).read().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 2
    export_path = os.path.join(serving, "albert_mrpc", "1")
    assert os.path.exists(os.path.join(export_path, "saved_model.pb"))
    with open(os.path.join(export_path, "assets.extra",
                           "serving_dtype.json")) as f:
        assert json.load(f)["serving_dtype"] == "int8"
    # The classifier's .tflite, same version, beside the SavedModel.
    tflite = os.path.join(serving, "albert_mrpc_litert", "1",
                          "classifier.tflite")
    printed = _fresh_python(
        "import json, numpy as np, tensorflow as tf, tensorflow_text\n"
        "from ai_edge_litert import interpreter as litert\n"
        "from tensorflow_text import tflite_registrar\n"
        f"m = tf.saved_model.load({export_path!r})\n"
        "f = m.signatures['serving_default']\n"
        "a, b = ['He said so.', 'It rained.'], ['He told us so.', '']\n"
        "r = f(text=tf.constant(a), text_b=tf.constant(b))\n"
        "i = litert.InterpreterWithCustomOps(custom_op_registerers="
        f"tflite_registrar.SELECT_TFTEXT_OPS, model_path={tflite!r})\n"
        "d = i.get_signature_runner('serving_default')("
        "text=np.array(a, dtype=object), text_b=np.array(b, dtype=object))\n"
        "print(json.dumps([{k: np.asarray(v).tolist() for k, v in o.items()}"
        " for o in (r, d)], default=lambda b: b.decode()))\n")
    for result in json.loads(printed.strip().splitlines()[-1]):
        probs = np.array(result["probabilities"])
        assert probs.shape == (2, 2)
        assert np.allclose(probs.sum(-1), 1, atol=1e-5)
        assert all(label in ("0", "1") for label in result["label"])
        assert result["label_id"] == list(np.argmax(probs, -1))
    served, on_device = (np.array(r["probabilities"])
                         for r in json.loads(printed.strip().splitlines()[-1]))
    # int8 SavedModel against float32 LiteRT: the same model.
    np.testing.assert_allclose(on_device, served, atol=0.02)


def test_litert_export_is_refused_before_any_work(model_dir, tmp_path):
    glue = tasks_testdata.write_glue(str(tmp_path / "glue"))
    common = dict(FAST, init_checkpoint=model_dir, do_train=True,
                  output_dir=str(tmp_path / "run"), export_format="litert")
    with pytest.raises(ValueError, match="sts-b is a regression"):
        finetuning_jobs.run_classifier(ClassifierOptions(
            task_name="sts-b", data_dir=glue["sts-b"],
            export_dir=str(tmp_path / "serving"), **common))
    with pytest.raises(ValueError, match="Received: no --export_dir"):
        finetuning_jobs.run_classifier(ClassifierOptions(
            task_name="mrpc", data_dir=glue["mrpc"], **common))
    assert not os.path.exists(tmp_path / "run")


@pytest.mark.slow
def test_run_regression_and_resume(model_dir, tmp_path):
    data_dir = tasks_testdata.write_glue(str(tmp_path / "glue"))["sts-b"]
    out = str(tmp_path / "run")
    options = dict(FAST, init_checkpoint=model_dir, max_seq_length=24)
    _, report = finetuning_jobs.run_classifier(ClassifierOptions(
        task_name="sts-b", data_dir=data_dir, output_dir=out, do_train=True,
        **dict(options, train_step=2)))
    assert report["train"]["history"][-1][0] == 2
    # A second run resumes at step 2 and trains to 4.
    _, report = finetuning_jobs.run_classifier(ClassifierOptions(
        task_name="sts-b", data_dir=data_dir, output_dir=out, do_train=True,
        do_eval=True, do_predict=True, **options))
    # Its first step is a call of its own (a progress line after it).
    assert [s for s, _ in report["train"]["history"]] == [3, 4]
    assert {"pearson", "spearman"} <= set(report["best"])
    rows = open(report["submission"]).read().splitlines()
    assert rows[1].split("\t")[1].replace(".", "").lstrip("-").isdigit()


@pytest.mark.slow
def test_run_squad_v2_and_export(model_dir, tmp_path):
    path, context = tasks_testdata.write_squad(str(tmp_path / "sq.json"),
                                               version_2=True)
    out, serving = str(tmp_path / "run"), str(tmp_path / "serving")
    report = run_squad.run(SquadOptions(
        output_dir=out, train_file=path, predict_file=path,
        version_2_with_negative=True, init_checkpoint=model_dir,
        max_seq_length=48, doc_stride=16, max_query_length=12, do_train=True,
        do_eval=True, do_predict=True, export_dir=serving, **FAST))
    best = report["best"]
    assert {"exact", "f1", "best_f1", "best_f1_thresh", "HasAns_exact",
            "NoAns_exact"} <= set(best)
    # Beside what "no answer" to every question gets: its share of the
    # unanswerable questions.
    assert best["majority_exact"] == pytest.approx(
        100.0 * best["NoAns_total"] / best["total"])
    predictions = json.load(open(report["predictions"][0], encoding="utf-8"))
    assert set(predictions) == {"q1", "q2", "q3"}
    assert all(p in context for p in predictions.values())
    assert set(json.load(open(report["predictions"][1]))) == {"q1", "q2", "q3"}
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    served = tf.saved_model.load(report["export"]).signatures["serving_default"](
        question=tf.constant(["When was it finished?", "Who?"]),
        context=tf.constant(["The tower was finished in 1889 in Paris.",
                             "Naïve  visitors loved the café."]))
    answers = [a.decode() for a in served["answer"].numpy()]
    assert answers[0] in "The tower was finished in 1889 in Paris."
    assert answers[1] in "Naïve  visitors loved the café." and answers[1]
    assert served["no_answer_probability"].shape == (2,)


@pytest.mark.slow
def test_run_race(model_dir, tmp_path):
    root = tasks_testdata.write_race(str(tmp_path / "RACE"))
    report = run_race.run(RaceOptions(
        data_dir=root, output_dir=str(tmp_path / "run"), max_qa_length=16,
        init_checkpoint=model_dir, max_seq_length=40, do_train=True,
        do_eval=True, do_predict=True, **FAST))
    assert [r["global_step"] for r in report["eval_results"]] == [2, 4]
    assert 0.0 <= report["test_accuracy"] <= 1.0
    predictions = json.load(open(report["predictions"]))
    assert set(predictions) == {"high1.txt", "middle1.txt"}
    assert all(len(v) == 2 and set(v) <= set("ABCD")
               for v in predictions.values())


@pytest.mark.slow
def test_run_squad_v1_trains_evaluates_and_predicts(model_dir, tmp_path):
    """SQuAD v1.1 (no no-answer head: the pooler gets no gradient) through
    the program as a user runs it."""
    path, context = tasks_testdata.write_squad(str(tmp_path / "v1.json"))
    out = str(tmp_path / "run")
    args = [f"--train_file={path}", f"--predict_file={path}",
            f"--init_checkpoint={model_dir}", f"--output_dir={out}",
            "--do_train", "--do_eval", "--do_predict", "--max_seq_length=48",
            "--doc_stride=16", "--max_query_length=12"] + [
                f"--{k}={v}" for k, v in FAST.items()]
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-m", "albert_apps.run_squad", *args],
        capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    evaluated = results.read_eval_results(os.path.join(out, "eval_results.txt"))
    assert [r["global_step"] for r in evaluated] == [2, 4]
    assert {"exact", "f1", "score"} <= set(evaluated[0])
    assert "no_answer" not in open(os.path.join(out, "best", "task.json")).read()
    predictions = json.load(open(os.path.join(out, "predictions.json")))
    assert set(predictions) == {"q1", "q2"}
    assert all(p in context for p in predictions.values())
    assert not os.path.exists(os.path.join(out, "null_odds.json"))


@pytest.fixture(scope="module")
def glue_dirs(tmp_path_factory):
    return tasks_testdata.write_glue(str(tmp_path_factory.mktemp("glue")))


# One layout in the default set (CoLA: no header), the other nine (MNLI
# mismatched with its own dev and test files among them) in the slow set.
@pytest.mark.parametrize("task", [
    task if task == "cola" else pytest.param(
        task, marks=pytest.mark.slow)
    for task in ("cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "mnli-mm",
                 "qnli", "rte", "wnli")])
def test_every_glue_layout_trains_evaluates_and_predicts(
        model_dir, glue_dirs, tmp_path, task):
    """The distributed files of each task (headers or none, test files
    without labels, MNLI matched and mismatched) through a whole job."""
    out = str(tmp_path / "run")
    _, report = finetuning_jobs.run_classifier(ClassifierOptions(
        task_name=task, data_dir=glue_dirs[task], output_dir=out,
        init_checkpoint=model_dir, max_seq_length=24, do_train=True,
        do_eval=True, do_predict=True, **dict(
            FAST, train_step=1, save_checkpoints_steps=1)))
    assert [r["global_step"] for r in report["eval_results"]] == [1]
    assert "score" in report["best"]
    rows = open(report["submission"], encoding="utf-8").read().splitlines()
    assert rows[0] == "index\tprediction" and len(rows) >= 2
    assert all(len(row.split("\t")) == 2 for row in rows[1:])
