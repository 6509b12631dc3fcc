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
