"""Benchmark metrics against values computed by hand."""

import math

import pytest

from albert_tf.tasks import metrics


def test_classification_metrics():
    labels = [1, 1, 1, 0, 0, 0, 1, 0]
    preds = [1, 0, 1, 0, 1, 0, 1, 0]
    # TP=3 FN=1 FP=1 TN=3: MCC = (3*3 - 1*1) / sqrt(4*4*4*4) = 0.5.
    assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(0.5)
    assert metrics.accuracy(labels, preds) == 0.75
    # TP=2 FP=1 FN=1: precision = recall = 2/3.
    assert metrics.f1([1, 0, 1, 1], [1, 1, 0, 1]) == pytest.approx(2 / 3)
    assert metrics.f1([0, 0], [0, 0]) == 0.0
    assert metrics.matthews_corrcoef([1, 1, 0], [1, 1, 1]) == 0.0  # undefined
    assert metrics.matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1)
    with pytest.raises(ValueError, match="Received: 2 and 3"):
        metrics.accuracy([1, 0], [1, 0, 1])


def test_correlations():
    # dx = [-1.5, -.5, .5, 1.5], dy = [-3, -1, 0, 4]: 11 / sqrt(5 * 26).
    assert metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(
        11 / math.sqrt(130))
    assert list(metrics.rankdata([10, 20, 20, 30])) == [1, 2.5, 2.5, 4]
    # Ranks [1, 2.5, 2.5, 4] and [1, 3, 2, 4]: 4.5 / sqrt(4.5 * 5).
    assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(
        4.5 / math.sqrt(22.5))
    assert metrics.spearman([1, 2, 3], [1, 8, 27]) == pytest.approx(1.0)


def test_squad_normalization_and_scores():
    assert metrics.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert metrics.normalize_answer("an apple and a pear") == "apple and pear"
    assert metrics.normalize_answer("theater") == "theater"  # whole words only
    assert metrics.exact_match("the Eiffel Tower.", "Eiffel tower") == 1
    # pred [cat, sat], gold [cat, sat, down]: P = 1, R = 2/3.
    assert metrics.token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    assert metrics.token_f1("", "") == 1.0
    assert metrics.token_f1("x", "") == 0.0


def _dataset():
    return [{"paragraphs": [{"context": "...", "qas": [
        {"id": "a", "answers": [{"text": "Paris"}, {"text": "Paris, France"}]},
        {"id": "b", "answers": [], "is_impossible": True},
        {"id": "c", "answers": [{"text": "blue sky"}]},
    ]}]}]


def test_squad_v1_evaluation():
    result = metrics.squad_evaluate(
        [{"paragraphs": [{"qas": [q for q in _dataset()[0]["paragraphs"][0]["qas"]
                                  if q["id"] != "b"]}]}],
        {"a": "paris", "c": "sky"})
    # a: EM 1, F1 1; c: EM 0, F1 2/3.
    assert result["exact"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert "HasAns_exact" not in result
    # A missing prediction scores zero.
    assert metrics.squad_evaluate(_dataset(), {})["exact"] == 0.0


def test_squad_v2_evaluation_and_threshold_search():
    preds = {"a": "paris", "b": "rome", "c": "sky"}
    na_probs = {"a": 0.1, "b": 0.8, "c": 0.6}
    result = metrics.squad_evaluate(_dataset(), preds, na_probs)
    # Threshold 1.0 answers everything: EM a=1 b=0 c=0; F1 a=1 b=0 c=2/3.
    assert result["exact"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * (5 / 3) / 3)
    assert result["HasAns_exact"] == pytest.approx(50.0)
    assert result["NoAns_exact"] == 0.0 and result["NoAns_total"] == 1
    # Threshold 0.5: b and c abstain; b is then right, c wrong.
    at_half = metrics.squad_evaluate(_dataset(), preds, na_probs, 0.5)
    assert at_half["exact"] == pytest.approx(200 / 3)
    assert at_half["f1"] == pytest.approx(200 / 3)
    # Search from "all abstain" (score 1): a +1 -> 2 at 0.1; c +0 (EM) or
    # +2/3 (F1) at 0.6; b -1 at 0.8.
    assert result["best_exact"] == pytest.approx(200 / 3)
    assert result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(100 * (8 / 3) / 3)
    assert result["best_f1_thresh"] == 0.6


# --- Against a transcription of the official evaluation scripts ---------

def _official():
    from benchmarks.finetune_parity import official_squad

    return official_squad


def _qa(qid, *answers):
    return {"id": qid, "question": "?",
            "answers": [{"text": t, "answer_start": 0} for t in answers]}


def _v1_dataset():
    return [{"paragraphs": [{"context": "...", "qas": [
        _qa("a", "Paris", "Paris, France"),
        _qa("b", "the blue sky", "sky"),
        _qa("c", "The"),  # normalizes to nothing
        _qa("d", "1,000 people"),
        _qa("e", "Denver Broncos"),
        _qa("f", "an apple a day"),
    ]}]}]


V1_PREDICTIONS = [
    {"a": "paris", "b": "blue", "c": "", "d": "1000 people", "e": "Broncos",
     "f": "apple day"},
    {"a": "Paris France!", "b": "The Sky.", "c": "a", "d": "people",
     "e": "denver  broncos"},  # f missing: scores 0
    {"a": "", "b": "", "c": "the", "d": "", "e": "", "f": ""},
]


@pytest.mark.parametrize("predictions", V1_PREDICTIONS)
def test_squad_v1_matches_the_official_script(predictions):
    official = _official().official_squad_v1(_v1_dataset(), predictions)
    ours = metrics.squad_evaluate(_v1_dataset(), predictions)
    assert ours["exact"] == pytest.approx(official["exact_match"])
    assert ours["f1"] == pytest.approx(official["f1"])


def _v2_dataset():
    return [{"paragraphs": [{"context": "...", "qas": [
        _qa("a", "Paris", "Paris, France"),
        {"id": "b", "question": "?", "answers": [], "is_impossible": True},
        _qa("c", "blue sky"),
        {"id": "d", "question": "?", "answers": [], "is_impossible": True},
        _qa("e", "the"),  # answerable, but its only answer normalizes to ""
        _qa("f", "Denver Broncos", "Broncos"),
    ]}]}]


V2_CASES = [
    # predictions, no-answer probabilities (ties included), threshold
    ({"a": "paris", "b": "rome", "c": "sky", "d": "", "e": "", "f": "denver"},
     {"a": 0.1, "b": 0.8, "c": 0.6, "d": 0.6, "e": 0.3, "f": 0.2}, 1.0),
    ({"a": "paris", "b": "rome", "c": "sky", "d": "", "e": "", "f": "denver"},
     {"a": 0.1, "b": 0.8, "c": 0.6, "d": 0.6, "e": 0.3, "f": 0.2}, 0.5),
    ({"a": "", "b": "", "c": "", "d": "", "e": "a", "f": ""},
     {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5, "e": 0.5, "f": 0.5}, 0.4),
    ({"a": "France", "b": "x", "c": "blue sky", "d": "y", "e": "the",
      "f": "broncos"},
     {"d": 0.9, "c": 0.2, "b": 0.2, "a": 0.7, "f": 0.0, "e": 0.4}, 0.3),
]


@pytest.mark.parametrize("predictions,na_probs,threshold", V2_CASES)
def test_squad_v2_matches_the_official_script(predictions, na_probs,
                                              threshold):
    official = _official().official_squad_v2(_v2_dataset(), predictions,
                                             na_probs, threshold)
    ours = metrics.squad_evaluate(_v2_dataset(), predictions, na_probs,
                                  threshold)
    assert set(official) <= set(ours)
    for key, value in official.items():
        assert ours[key] == pytest.approx(value), key


def test_squad_v2_without_probabilities_matches_the_official_script():
    predictions = V2_CASES[0][0]
    official = _official().official_squad_v2(_v2_dataset(), predictions)
    ours = metrics.squad_evaluate(_v2_dataset(), predictions)
    for key, value in official.items():
        assert ours[key] == pytest.approx(value), key


def test_squad_version_is_checked():
    with pytest.raises(ValueError, match="Received: version='3'"):
        metrics.squad_evaluate(_v1_dataset(), {}, version="3")
