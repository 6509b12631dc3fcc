"""Readers and features of GLUE, SQuAD and RACE on files in the official formats."""

import json
import os

import numpy as np
import pytest

from albert_tf.tasks import glue, race, squad
from albert_tf.tasks.tokenization import Tokenizer
from tests import tasks_testdata


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer(tasks_testdata.spm_model_path())


# --- Tokenizer ------------------------------------------------------------

def test_offsets_match_ids_and_point_into_the_text(tokenizer):
    text = "  The cat sat,  in the 1990s café;\tﬁne Naïve!"
    ids, offsets = tokenizer.encode_with_offsets(text)
    assert ids == tokenizer.encode(text)
    assert len(offsets) == len(ids)
    for start, end in offsets:
        assert 0 <= start <= end <= len(text)
        assert " " not in text[start:end] and "\t" not in text[start:end]
    # ASCII words map piece by piece: the pieces rebuild each word.
    pieces = [text[s:e] for s, e in offsets]
    assert "".join(pieces).startswith("Thecatsat,inthe1990s")


# --- GLUE -----------------------------------------------------------------

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
    task = glue.get_task(name)
    train, skipped = glue.read_examples(task, folder, "train")
    first = train[0]
    assert (first.text_a, first.text_b, first.label) == EXPECTED_FIRST[name]
    assert skipped["missing_columns"] == (1 if name == "qqp" else 0)
    dev, _ = glue.read_examples(task, folder, "dev")
    assert dev and all(e.label is not None for e in dev)
    test, _ = glue.read_examples(task, folder, "test")
    assert len(test) == 1 and test[0].label is None
    assert test[0].guid == ("7" if name.startswith("mnli") else "0")

    features, _ = glue.convert_examples(train, task, tokenizer, 16)
    assert features["input_word_ids"].shape == (len(train), 16)
    assert features["input_word_ids"][0, 0] == tokenizer.cls_id
    has_b = first.text_b is not None
    assert bool(features["input_type_ids"][0].max()) == has_b
    assert features["label_ids"].dtype == (np.float32 if task.is_regression
                                           else np.int32)

    path = glue.write_submission(task, test, np.zeros((1, task.num_classes)),
                                 str(tmp_path / "out"))
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines[0] == "index\tprediction"
    expected = "0.000" if task.is_regression else task.labels[0]
    assert lines[1] == f"{test[0].guid}\t{expected}"


def test_glue_task_names_and_errors(tmp_path):
    assert glue.get_task("MNLI-MM").name == "mnli-mm"
    assert glue.get_task("MisMNLI").name == "mnli-mm"
    assert glue.get_task("STSB").name == "sts-b"
    with pytest.raises(ValueError, match="Received: task_name='squad'"):
        glue.get_task("squad")
    dirs = tasks_testdata.write_glue(str(tmp_path))
    with open(os.path.join(dirs["rte"], "train.tsv"), "a") as f:
        f.write("2\tA.\tB.\tmaybe\n")
    with pytest.raises(glue.DataError, match=r"train.tsv:4.*Received: 'maybe'"):
        glue.read_examples("rte", dirs["rte"], "train")
    with open(os.path.join(dirs["sts-b"], "dev.tsv"), "a") as f:
        f.write("\t".join(["2", "g", "f", "y", "3", "s", "s", "A.", "B.", "7"]) + "\n")
    with pytest.raises(glue.DataError, match="Received: '7'"):
        glue.read_examples("sts-b", dirs["sts-b"], "dev")
    with open(os.path.join(dirs["qnli"], "dev.tsv"), "w") as f:
        f.write("index\tquestion\tlabel\n0\tWho?\tentailment\n")
    with pytest.raises(glue.DataError, match="lacks the columns"):
        glue.read_examples("qnli", dirs["qnli"], "dev")
    with pytest.raises(glue.DataError, match="is not a folder"):
        glue.read_examples("cola", str(tmp_path / "nowhere"), "train")


def test_glue_truncation_trims_longer_side(tokenizer):
    a, b = list(range(10, 20)), list(range(30, 33))
    words, mask, types, truncated = glue.pack_ids(tokenizer, a, b, 10)
    assert truncated and sum(mask) == 10
    # [CLS] 10..13 [SEP] 30..32 [SEP]: the longer side lost its tail.
    assert words == [2, 10, 11, 12, 13, 3, 30, 31, 32, 3]
    assert types == [0] * 6 + [1] * 4


def test_glue_metrics():
    m = glue.compute_metrics("mrpc", [1, 0, 1, 1], [[0, 1], [1, 0], [1, 0], [0, 1]])
    assert m["accuracy"] == 0.75 and m["f1"] == pytest.approx(0.8)
    assert m["score"] == m["f1"]
    m = glue.compute_metrics("sts-b", [1.0, 2.0, 3.0], [[1.5], [2.5], [3.5]])
    assert m["pearson"] == pytest.approx(1.0) and m["spearman"] == pytest.approx(1.0)


# --- SQuAD ----------------------------------------------------------------

def test_squad_windows_map_spans_back_to_characters(tmp_path, tokenizer):
    path, context = tasks_testdata.write_squad(str(tmp_path / "train.json"),
                                               version_2=True)
    examples, skipped = squad.read_examples(path, is_training=True,
                                            version_2_with_negative=True)
    assert [e.qas_id for e in examples] == ["q1", "q2", "q3"] and not skipped
    features = squad.convert_examples(examples, tokenizer, max_seq_length=64,
                                      doc_stride=24, max_query_length=12,
                                      is_training=True)
    arrays = features.arrays
    num_windows = [sum(w.example_index == i for w in features.windows)
                   for i in range(3)]
    assert min(num_windows) > 3, num_windows  # the context is long
    assert arrays["input_word_ids"].shape == (sum(num_windows), 64)
    # Every answerable question is labelled inside some window, and the
    # labelled span maps back to the answer's characters.
    for i, example in enumerate(examples):
        labelled = [f for f, w in enumerate(features.windows)
                    if w.example_index == i and arrays["start_positions"][f] > 0]
        if example.is_impossible:
            assert not labelled
            continue
        assert labelled
        for f in labelled:
            window = features.windows[f]
            offsets = features.piece_offsets[i]
            s = offsets[window.token_to_piece[arrays["start_positions"][f]]][0]
            e = offsets[window.token_to_piece[arrays["end_positions"][f]]][1]
            assert context[s:e] == example.answer_text
        assert all(arrays["is_impossible"][f] == 0 for f in labelled)

    # Predicting from one-hot logits at the labelled positions gives the
    # original text (accents and case kept), through the max-context window.
    logits = np.full(arrays["input_word_ids"].shape, -10.0, np.float32)
    start, end = logits.copy(), logits.copy()
    for f in range(len(features.windows)):
        start[f, arrays["start_positions"][f]] = 10.0
        end[f, arrays["end_positions"][f]] = 10.0
    eval_examples, _ = squad.read_examples(path, is_training=False,
                                           version_2_with_negative=True)
    na = arrays["is_impossible"].astype(np.float32)
    answers, scores, na_probs = squad.postprocess(
        eval_examples, features, start, end, no_answer_probs=na)
    assert answers["q1"] == "1889"
    assert answers["q2"] == "the 1990s café"
    assert na_probs == {"q1": 0.0, "q2": 0.0, "q3": 1.0}
    final = squad.apply_threshold(answers, na_probs, 0.5)
    assert final["q3"] == ""
    written = squad.write_predictions(str(tmp_path / "out"), final, na_probs)
    assert json.load(open(written[0], encoding="utf-8"))["q2"] == "the 1990s café"
    assert json.load(open(written[1]))["q3"] == 1.0


def test_squad_partial_word_answer_and_bad_questions(tmp_path, tokenizer):
    bad = [{"id": "x1", "question": "Unanswerable here?", "answers": [],
            "is_impossible": True},
           {"id": "x2", "question": "Wrong offset?",
            "answers": [{"text": "Eiffel", "answer_start": 0}]}]
    path, context = tasks_testdata.write_squad(str(tmp_path / "v1.json"),
                                               extra_questions=bad)
    examples, skipped = squad.read_examples(path, is_training=True)
    assert skipped == {"unanswerable_in_v1": 1, "answer_mismatch": 1}
    assert [e.qas_id for e in examples] == ["q1", "q2"]
    # "1990" is a prefix of the word "1990s": the span stays inside the word.
    start = context.index("1990s")
    example = squad.SquadExample("p", "Which decade?", context, "1990", start)
    features = squad.convert_examples([example], tokenizer, 48, 16, 8, True)
    f = int(np.argmax(features.arrays["start_positions"]))
    window = features.windows[f]
    offsets = features.piece_offsets[0]
    s = offsets[window.token_to_piece[features.arrays["start_positions"][f]]][0]
    e = offsets[window.token_to_piece[features.arrays["end_positions"][f]]][1]
    assert context[s:e] == "1990"
    with open(tmp_path / "broken.json", "w") as f:
        json.dump({"data": [{"paragraphs": [{"context": "x", "qas": [
            {"question": "no id"}]}]}]}, f)
    with pytest.raises(squad.DataError, match="lacks 'id'"):
        squad.read_examples(str(tmp_path / "broken.json"), is_training=False)
    with pytest.raises(ValueError, match="max_query_length"):
        squad.convert_examples([example], tokenizer, 16, 8, 16, False)


# --- RACE -----------------------------------------------------------------

def test_race_reader_and_features(tmp_path, tokenizer):
    root = tasks_testdata.write_race(str(tmp_path / "RACE"))
    examples = race.read_examples(root, "dev")
    assert len(examples) == 4  # 2 questions x (high, middle)
    assert examples[0].example_id == "high1.txt-0" and examples[0].label == 1
    assert race.question_with_option("Tom rides to _ .", "school") == \
        "Tom rides to school ."
    assert race.question_with_option("Which?", "red") == "Which? red"
    features, _ = race.convert_examples(examples, tokenizer, 32, max_qa_length=8)
    assert features["input_word_ids"].shape == (4, 4, 32)
    assert list(features["label_ids"]) == [1, 0, 1, 0]
    # The four choices share the article and differ after the first [SEP].
    ids = features["input_word_ids"][0]
    assert (ids[:, :5] == ids[0, :5]).all() and not (ids[1] == ids[0]).all()
    path = race.write_predictions(str(tmp_path / "out"), examples,
                                  np.eye(4)[[1, 0, 2, 3]])
    assert json.load(open(path)) == {"high1.txt": ["B", "A"],
                                     "middle1.txt": ["C", "D"]}


def test_race_bad_data(tmp_path):
    root = str(tmp_path / "RACE")
    record = tasks_testdata.race_record("high9.txt", answers=("B", "E"))
    os.makedirs(os.path.join(root, "train", "high"))
    with open(os.path.join(root, "train", "high", "high9.txt"), "w") as f:
        json.dump(record, f)
    with pytest.raises(race.DataError, match="Received: 'E'"):
        race.read_examples(root, "train")
    record = tasks_testdata.race_record("high9.txt")
    record["options"][0] = ["a", "b", "c"]
    with open(os.path.join(root, "train", "high", "high9.txt"), "w") as f:
        json.dump(record, f)
    with pytest.raises(race.DataError, match="Received: 3"):
        race.read_examples(root, "train")
    with pytest.raises(race.DataError, match="No RACE files"):
        race.read_examples(root, "dev")
