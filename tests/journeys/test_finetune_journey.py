"""Journey 2: each fine-tuning program from the pretrained tiny model.

The fine-tuning guide's commands (`albert_apps.run_classifier`,
`albert_apps.run_squad`, `albert_apps.run_race`; read from docs/finetuning.md),
tiny, with `--do_train --do_eval --do_predict`, on files in each benchmark's
distributed layout,
starting from the best checkpoint of the pretraining journey's first run
(`--init_checkpoint=runs/tiny/best` with the vocabulary its records were made
with). Each run must leave the files the guides promise: `eval_results.txt`
with a block per checkpoint, `best/`, the submission files; the two
`--export_dir` models are served from a fresh Python process.
"""

import json
import math

import numpy as np
import pytest

from tests import tasks_testdata
from tests.journeys import common
from tests.journeys import documented

pytestmark = pytest.mark.slow

# Two checkpoints (steps 2 and 4), each evaluated; a tiny batch.
TINY = {"train_batch_size": 2, "eval_batch_size": 2, "predict_batch_size": 2,
        "learning_rate": 1e-3, "train_step": 4, "warmup_step": 1,
        "save_checkpoints_steps": 2, "iterations_per_loop": 2}
STEPS = [2, 4]
CONFIG_FILES = ["albert_config.json", "task.json"]
INIT = f"{common.PRETRAIN_DIR}/best"
# The documented commands (docs/finetuning.md).
CLASSIFIER = "python -m albert_apps.run_classifier"
SQUAD = "python -m albert_apps.run_squad"
RACE = "python -m albert_apps.run_race"


@pytest.fixture(scope="module")
def root():
    """The pretraining workspace, with the task folders added."""
    root = common.pretraining_run().root
    if not (root / "glue_data").exists():
        tasks_testdata.write_glue(str(root / "glue_data"))
        for version, v2 in (("v1.1", False), ("v2.0", True)):
            for split in ("train", "dev"):
                tasks_testdata.write_squad(
                    str(root / f"squad/{split}-{version}.json"), version_2=v2)
        tasks_testdata.write_race(str(root / "RACE"))
    return root


def _finetune(root, command, output_dir):
    """Runs a documented fine-tuning command (`documented.command(...)`),
    tiny, from the pretraining run's best checkpoint."""
    done = common.run(documented.adapt(command, set=dict(
        TINY, init_checkpoint=INIT, spm_model_file=common.SPM_MODEL,
        output_dir=output_dir, do_train=True, do_eval=True,
        do_predict=True)), root)
    # The encoder starts from the pretrained weights, not from scratch.
    assert f"Initialized the encoder from {INIT}/model.ckpt" in done.log
    return done


def _submission(path):
    """The rows of a GLUE submission file under its `index prediction`
    header."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "index\tprediction"
    return [line.split("\t") for line in lines[1:]]


@pytest.fixture(scope="module")
def mrpc(root):
    return _finetune(root, documented.command(
        CLASSIFIER, set={"task_name": "MRPC", "data_dir": "glue_data/MRPC",
                         "max_seq_length": 32, "export_dir": "serving",
                         "export_format": "litert"}),
                     "runs/mrpc")


def test_mrpc_trains_evaluates_predicts_and_exports(root, mrpc):
    common.check_run_dir(root / "runs/mrpc", STEPS, ["accuracy", "f1"],
                         "score", CONFIG_FILES)
    task = json.loads((root / "runs/mrpc/task.json").read_text())
    assert task["task"] == "mrpc" and task["labels"] == ["0", "1"]
    rows = _submission(root / "runs/mrpc/MRPC.tsv")
    assert [index for index, _ in rows] == ["0"]
    assert rows[0][1] in ("0", "1")
    assert (root / "serving/albert_mrpc/1/saved_model.pb").exists()
    # --export_format=litert (docs/on_device.md): the same version, on device.
    assert (root / "serving/albert_mrpc_litert/1/classifier.tflite").exists()


@pytest.mark.parametrize("task, submission, labels", [
    ("MNLI", "MNLI-m.tsv", {"entailment", "neutral", "contradiction"}),
    ("MNLI-MM", "MNLI-mm.tsv", {"entailment", "neutral", "contradiction"}),
])
def test_mnli_matched_and_mismatched(root, task, submission, labels):
    out = f"runs/{task.lower()}"
    _finetune(root, documented.command(
        CLASSIFIER, set={"task_name": task, "data_dir": "glue_data/MNLI",
                         "max_seq_length": 32}, drop=("export_dir",)), out)
    common.check_run_dir(root / out, STEPS, ["accuracy"], "score",
                         CONFIG_FILES)
    rows = _submission(root / out / submission)
    # The test file's own index column, and a label name per row.
    assert [index for index, _ in rows] == ["7"]
    assert rows[0][1] in labels


def test_stsb_regression(root):
    _finetune(root, documented.command(
        CLASSIFIER, set={"task_name": "STS-B", "data_dir": "glue_data/STS-B",
                         "max_seq_length": 32}, drop=("export_dir",)),
              "runs/sts-b")
    blocks, _ = common.check_run_dir(root / "runs/sts-b", STEPS,
                                     ["pearson", "spearman"], "score",
                                     CONFIG_FILES)
    task = json.loads((root / "runs/sts-b/task.json").read_text())
    assert task["task"] == "sts-b"
    rows = _submission(root / "runs/sts-b/STS-B.tsv")
    assert [index for index, _ in rows] == ["0"]
    assert math.isfinite(float(rows[0][1]))


_SQUAD_FLAGS = {"max_seq_length": 48, "doc_stride": 16,
                "max_query_length": 12}


def _context(path):
    """The one context of a tiny SQuAD file."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return data[0]["paragraphs"][0]["context"]


def test_squad_v1_writes_predictions(root):
    _finetune(root, documented.command(
        SQUAD, set=dict(_SQUAD_FLAGS, train_file="squad/train-v1.1.json",
                        predict_file="squad/dev-v1.1.json"),
        drop=("version_2_with_negative", "export_dir")), "runs/squad1")
    out = root / "runs/squad1"
    common.check_run_dir(out, STEPS, ["exact", "f1"], "score", CONFIG_FILES)
    context = _context(root / "squad/dev-v1.1.json")
    predictions = json.loads((out / "predictions.json").read_text("utf-8"))
    assert set(predictions) == {"q1", "q2"}
    assert all(answer in context for answer in predictions.values())
    assert not (out / "null_odds.json").exists()


@pytest.fixture(scope="module")
def squad_v2(root):
    return _finetune(root, documented.command(
        SQUAD, set=dict(_SQUAD_FLAGS, export_dir="serving")), "runs/squad2")


def test_squad_v2_writes_predictions_null_odds_and_exports(root, squad_v2):
    out = root / "runs/squad2"
    common.check_run_dir(
        out, STEPS, ["exact", "f1", "best_f1", "best_f1_thresh",
                     "HasAns_exact", "NoAns_exact"], "score", CONFIG_FILES)
    context = _context(root / "squad/dev-v2.0.json")
    predictions = json.loads((out / "predictions.json").read_text("utf-8"))
    assert set(predictions) == {"q1", "q2", "q3"}
    # An answer is a slice of the context, or "" for no answer.
    assert all(answer in context for answer in predictions.values())
    null_odds = json.loads((out / "null_odds.json").read_text())
    assert set(null_odds) == {"q1", "q2", "q3"}
    assert all(math.isfinite(v) for v in null_odds.values())
    assert (root / "serving/albert_squad_v2/1/saved_model.pb").exists()


def test_race_writes_predictions(root):
    _finetune(root, documented.command(
        RACE, set={"max_seq_length": 40, "max_qa_length": 16}), "runs/race")
    out = root / "runs/race"
    common.check_run_dir(out, STEPS, ["accuracy"], "score", CONFIG_FILES)
    predictions = json.loads((out / "predictions.json").read_text())
    assert set(predictions) == {"high1.txt", "middle1.txt"}
    assert all(len(v) == 2 and set(v) <= set("ABCD")
               for v in predictions.values())


# Both exports from one fresh process, as a model server would load them.
_SERVE = common.WEIGHT_DIFFERENCE + r'''
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops; needed to load

mrpc_dir, mrpc_best, squad_dir, squad_best = sys.argv[1:5]
strings = lambda values: tf.constant(values, tf.string)
report = {}
mrpc = tf.saved_model.load(mrpc_dir)
out = mrpc.signatures["serving_default"](
    text=strings(["He said so.", "It rained."]),
    text_b=strings(["He told us so.", ""]))
report["mrpc"] = {"probabilities": out["probabilities"].numpy().tolist(),
                  "label_id": out["label_id"].numpy().tolist(),
                  "label": [b.decode() for b in out["label"].numpy()],
                  "weights": weight_difference(mrpc, mrpc_best)}
squad = tf.saved_model.load(squad_dir)
out = squad.signatures["serving_default"](
    question=strings(["When was the tower finished?", "Who?"]),
    context=strings(["The tower was finished in 1889 in Paris.",
                     "Naïve  visitors loved the café."]))
report["squad"] = {
    "answer": [b.decode() for b in out["answer"].numpy()],
    "score": out["score"].numpy().tolist(),
    "no_answer_probability": out["no_answer_probability"].numpy().tolist(),
    "weights": weight_difference(squad, squad_best)}
print(json.dumps(report))
'''


def test_exports_serve_raw_text_in_a_fresh_process(root, mrpc, squad_v2):
    r = common.fresh_python(
        _SERVE, root / "serving/albert_mrpc/1",
        root / "runs/mrpc/best/model.ckpt",
        root / "serving/albert_squad_v2/1",
        root / "runs/squad2/best/model.ckpt")
    mrpc_out = r["mrpc"]
    probabilities = np.array(mrpc_out["probabilities"])
    assert probabilities.shape == (2, 2)
    np.testing.assert_allclose(probabilities.sum(-1), 1, atol=1e-5)
    assert mrpc_out["label_id"] == np.argmax(probabilities, -1).tolist()
    assert mrpc_out["label"] == [str(i) for i in mrpc_out["label_id"]]
    squad_out = r["squad"]
    contexts = ["The tower was finished in 1889 in Paris.",
                "Naïve  visitors loved the café."]
    for answer, context in zip(squad_out["answer"], contexts):
        assert answer in context
    assert all(math.isfinite(s) for s in squad_out["score"])
    assert all(0 <= p <= 1 for p in squad_out["no_answer_probability"])
    # The exports hold the best checkpoint's weights (the guide: "predictions
    # and the export use the best weights").
    for name in ("mrpc", "squad"):
        assert r[name]["weights"]["matched"] >= 5, name
        assert r[name]["weights"]["max_difference"] == 0.0, name
