"""SQuAD's reader, windows, answer spans and predictions on files in the
official format."""

import json

import numpy as np
import pytest

from albert_tf.tasks import squad_reader
from albert_tf.tasks.tokenization import Tokenizer
from tests import tasks_testdata


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer(tasks_testdata.spm_model_path())


def test_squad_windows_map_spans_back_to_characters(tmp_path, tokenizer):
    path, context = tasks_testdata.write_squad(str(tmp_path / "train.json"),
                                               version_2=True)
    examples, skipped = squad_reader.read_examples(path, is_training=True,
                                                   version_2_with_negative=True)
    assert [e.qas_id for e in examples] == ["q1", "q2", "q3"] and not skipped
    features = squad_reader.convert_examples(examples, tokenizer, max_seq_length=64,
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
    eval_examples, _ = squad_reader.read_examples(path, is_training=False,
                                                  version_2_with_negative=True)
    na = arrays["is_impossible"].astype(np.float32)
    answers, scores, na_probs = squad_reader.postprocess(
        eval_examples, features, start, end, no_answer_probs=na)
    assert answers["q1"] == "1889"
    assert answers["q2"] == "the 1990s café"
    assert na_probs == {"q1": 0.0, "q2": 0.0, "q3": 1.0}
    final = squad_reader.apply_threshold(answers, na_probs, 0.5)
    assert final["q3"] == ""
    written = squad_reader.write_predictions(str(tmp_path / "out"), final, na_probs)
    assert json.load(open(written[0], encoding="utf-8"))["q2"] == "the 1990s café"
    assert json.load(open(written[1]))["q3"] == 1.0


def test_squad_partial_word_answer_and_bad_questions(tmp_path, tokenizer):
    bad = [{"id": "x1", "question": "Unanswerable here?", "answers": [],
            "is_impossible": True},
           {"id": "x2", "question": "Wrong offset?",
            "answers": [{"text": "Eiffel", "answer_start": 0}]}]
    path, context = tasks_testdata.write_squad(str(tmp_path / "v1.json"),
                                               extra_questions=bad)
    examples, skipped = squad_reader.read_examples(path, is_training=True)
    assert skipped == {"unanswerable_in_v1": 1, "answer_mismatch": 1}
    assert [e.qas_id for e in examples] == ["q1", "q2"]
    # "1990" is a prefix of the word "1990s": the span stays inside the word.
    start = context.index("1990s")
    example = squad_reader.SquadExample("p", "Which decade?", context, "1990", start)
    features = squad_reader.convert_examples([example], tokenizer, 48, 16, 8, True)
    f = int(np.argmax(features.arrays["start_positions"]))
    window = features.windows[f]
    offsets = features.piece_offsets[0]
    s = offsets[window.token_to_piece[features.arrays["start_positions"][f]]][0]
    e = offsets[window.token_to_piece[features.arrays["end_positions"][f]]][1]
    assert context[s:e] == "1990"
    with open(tmp_path / "broken.json", "w") as f:
        json.dump({"data": [{"paragraphs": [{"context": "x", "qas": [
            {"question": "no id"}]}]}]}, f)
    with pytest.raises(squad_reader.DataError, match="lacks 'id'"):
        squad_reader.read_examples(str(tmp_path / "broken.json"), is_training=False)
    with pytest.raises(ValueError, match="max_query_length"):
        squad_reader.convert_examples([example], tokenizer, 16, 8, 16, False)
