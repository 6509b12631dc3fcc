"""RACE's reader, features and predictions on files in the official
format."""

import json
import os

import numpy as np
import pytest

from albert_tf.tasks import race_reader
from albert_tf.tasks.tokenization import Tokenizer
from tests import tasks_testdata


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer(tasks_testdata.spm_model_path())


def test_race_reader_and_features(tmp_path, tokenizer):
    root = tasks_testdata.write_race(str(tmp_path / "RACE"))
    examples = race_reader.read_examples(root, "dev")
    assert len(examples) == 4  # 2 questions x (high, middle)
    assert examples[0].example_id == "high1.txt-0" and examples[0].label == 1
    assert race_reader.question_with_option("Tom rides to _ .", "school") == \
        "Tom rides to school ."
    assert race_reader.question_with_option("Which?", "red") == "Which? red"
    features, _ = race_reader.convert_examples(examples, tokenizer, 32, max_qa_length=8)
    assert features["input_word_ids"].shape == (4, 4, 32)
    assert list(features["label_ids"]) == [1, 0, 1, 0]
    # The four choices share the article and differ after the first [SEP].
    ids = features["input_word_ids"][0]
    assert (ids[:, :5] == ids[0, :5]).all() and not (ids[1] == ids[0]).all()
    path = race_reader.write_predictions(str(tmp_path / "out"), examples,
                                         np.eye(4)[[1, 0, 2, 3]])
    assert json.load(open(path)) == {"high1.txt": ["B", "A"],
                                     "middle1.txt": ["C", "D"]}


def test_race_bad_data(tmp_path):
    root = str(tmp_path / "RACE")
    record = tasks_testdata.race_record("high9.txt", answers=("B", "E"))
    os.makedirs(os.path.join(root, "train", "high"))
    with open(os.path.join(root, "train", "high", "high9.txt"), "w") as f:
        json.dump(record, f)
    with pytest.raises(race_reader.DataError, match="Received: 'E'"):
        race_reader.read_examples(root, "train")
    record = tasks_testdata.race_record("high9.txt")
    record["options"][0] = ["a", "b", "c"]
    with open(os.path.join(root, "train", "high", "high9.txt"), "w") as f:
        json.dump(record, f)
    with pytest.raises(race_reader.DataError, match="Received: 3"):
        race_reader.read_examples(root, "train")
    with pytest.raises(race_reader.DataError, match="No RACE files"):
        race_reader.read_examples(root, "dev")
