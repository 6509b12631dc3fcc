"""GLUE's readers, features, metrics and submissions on files in the
official formats."""

import os

import numpy as np
import pytest

from albert_tf.tasks import glue_reader
from albert_tf.tasks.tokenization import Tokenizer
from tests import tasks_testdata


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer(tasks_testdata.spm_model_path())


EXPECTED_FIRST = {
    "cola": ("The cat sat on the mat.", None, "1"),
    "sst-2": ("a fine film ", None, "1"),
    "mrpc": ("He said so.", "He told us so.", "1"),
    "sts-b": ("A man plays.", "A man is playing.", 4.75),
    "qqp": ("How old are you?", "What is your age?", "1"),
    "mnli": ("A man sleeps.", "A person rests.", "entailment"),
    "mnli-mm": ("A man sleeps.", "A person rests.", "entailment"),
    "qnli": ("Who ran?", "Bo ran.", "entailment"),
    "rte": ("Who ran?", "Bo ran.", "entailment"),
    "wnli": ("Who ran?", "Bo ran.", "1"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_FIRST))
def test_glue_readers(name, tmp_path, tokenizer):
    folder = tasks_testdata.write_glue(str(tmp_path))[name]
    task = glue_reader.get_task(name)
    train, skipped = glue_reader.read_examples(task, folder, "train")
    first = train[0]
    assert (first.text_a, first.text_b, first.label) == EXPECTED_FIRST[name]
    assert skipped["missing_columns"] == (1 if name == "qqp" else 0)
    dev, _ = glue_reader.read_examples(task, folder, "dev")
    assert dev and all(e.label is not None for e in dev)
    test, _ = glue_reader.read_examples(task, folder, "test")
    assert len(test) == 1 and test[0].label is None
    assert test[0].guid == ("7" if name.startswith("mnli") else "0")

    features, _ = glue_reader.convert_examples(train, task, tokenizer, 16)
    assert features["input_word_ids"].shape == (len(train), 16)
    assert features["input_word_ids"][0, 0] == tokenizer.cls_id
    has_b = first.text_b is not None
    assert bool(features["input_type_ids"][0].max()) == has_b
    assert features["label_ids"].dtype == (np.float32 if task.is_regression
                                           else np.int32)

    path = glue_reader.write_submission(task, test, np.zeros((1, task.num_classes)),
                                        str(tmp_path / "out"))
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines[0] == "index\tprediction"
    expected = "0.000" if task.is_regression else task.labels[0]
    assert lines[1] == f"{test[0].guid}\t{expected}"


def test_glue_task_names_and_errors(tmp_path):
    assert glue_reader.get_task("MNLI-MM").name == "mnli-mm"
    assert glue_reader.get_task("MisMNLI").name == "mnli-mm"
    assert glue_reader.get_task("STSB").name == "sts-b"
    with pytest.raises(ValueError, match="Received: task_name='squad'"):
        glue_reader.get_task("squad")
    dirs = tasks_testdata.write_glue(str(tmp_path))
    with open(os.path.join(dirs["rte"], "train.tsv"), "a") as f:
        f.write("2\tA.\tB.\tmaybe\n")
    with pytest.raises(glue_reader.DataError, match=r"train.tsv:4.*Received: 'maybe'"):
        glue_reader.read_examples("rte", dirs["rte"], "train")
    with open(os.path.join(dirs["sts-b"], "dev.tsv"), "a") as f:
        f.write("\t".join(["2", "g", "f", "y", "3", "s", "s", "A.", "B.", "7"]) + "\n")
    with pytest.raises(glue_reader.DataError, match="Received: '7'"):
        glue_reader.read_examples("sts-b", dirs["sts-b"], "dev")
    with open(os.path.join(dirs["qnli"], "dev.tsv"), "w") as f:
        f.write("index\tquestion\tlabel\n0\tWho?\tentailment\n")
    with pytest.raises(glue_reader.DataError, match="lacks the columns"):
        glue_reader.read_examples("qnli", dirs["qnli"], "dev")
    with pytest.raises(glue_reader.DataError, match="is not a folder"):
        glue_reader.read_examples("cola", str(tmp_path / "nowhere"), "train")


def test_glue_truncation_trims_longer_side(tokenizer):
    a, b = list(range(10, 20)), list(range(30, 33))
    words, mask, types, truncated = glue_reader.pack_ids(tokenizer, a, b, 10)
    assert truncated and sum(mask) == 10
    # [CLS] 10..13 [SEP] 30..32 [SEP]: the longer side lost its tail.
    assert words == [2, 10, 11, 12, 13, 3, 30, 31, 32, 3]
    assert types == [0] * 6 + [1] * 4


def test_glue_metrics():
    m = glue_reader.compute_metrics("mrpc", [1, 0, 1, 1],
                                    [[0, 1], [1, 0], [1, 0], [0, 1]])
    assert m["accuracy"] == 0.75 and m["f1"] == pytest.approx(0.8)
    assert m["score"] == m["f1"]
    m = glue_reader.compute_metrics("sts-b", [1.0, 2.0, 3.0], [[1.5], [2.5], [3.5]])
    assert m["pearson"] == pytest.approx(1.0) and m["spearman"] == pytest.approx(1.0)
