"""Metrics as the benchmarks define them, in NumPy.

GLUE: accuracy, F1 of the positive class (MRPC, QQP), Matthews correlation
(CoLA), Pearson and Spearman correlation (STS-B). SQuAD: exact match and F1
over the official answer normalization (lowercase, punctuation and the articles
"a", "an", "the" removed, whitespace collapsed), the best over the gold
answers; v2.0 adds the no-answer threshold search over the predicted
no-answer probabilities. RACE: accuracy.
"""

import collections
import re
import string

import numpy as np


def _as_1d(values, name):
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional. "
                         f"Received: shape={array.shape}")
    return array


def _check_pair(labels, predictions):
    labels = _as_1d(labels, "labels")
    predictions = _as_1d(predictions, "predictions")
    if labels.shape != predictions.shape:
        raise ValueError("labels and predictions must have the same length. "
                         f"Received: {labels.shape[0]} and {predictions.shape[0]}")
    if labels.size == 0:
        raise ValueError("Metrics need at least one example. Received: 0")
    return labels, predictions


def accuracy(labels, predictions):
    """Fraction of predictions equal to the labels."""
    labels, predictions = _check_pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions, positive=1):
    """F1 of the `positive` class (0.0 when it is never predicted nor true)."""
    labels, predictions = _check_pair(labels, predictions)
    true_pos = np.sum((predictions == positive) & (labels == positive))
    pred_pos = np.sum(predictions == positive)
    real_pos = np.sum(labels == positive)
    if true_pos == 0:
        return 0.0
    precision = true_pos / pred_pos
    recall = true_pos / real_pos
    return float(2 * precision * recall / (precision + recall))


def matthews_corrcoef(labels, predictions):
    """Matthews correlation (the multiclass form; binary is a special case).

    Returns 0.0 when it is undefined (a constant labelling or prediction).
    """
    labels, predictions = _check_pair(labels, predictions)
    classes = np.union1d(labels, predictions)
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)), np.float64)
    for y, p in zip(labels, predictions):
        confusion[index[y], index[p]] += 1
    total = confusion.sum()
    correct = np.trace(confusion)
    true_counts = confusion.sum(axis=1)
    pred_counts = confusion.sum(axis=0)
    numerator = correct * total - true_counts @ pred_counts
    denominator = np.sqrt(total ** 2 - pred_counts @ pred_counts) * np.sqrt(
        total ** 2 - true_counts @ true_counts)
    return float(numerator / denominator) if denominator else 0.0


def pearson(x, y):
    """Pearson correlation coefficient (0.0 when a side is constant)."""
    x, y = _check_pair(x, y)
    x = x.astype(np.float64) - np.mean(x)
    y = y.astype(np.float64) - np.mean(y)
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator else 0.0


def rankdata(values):
    """1-based ranks; tied values share the mean of their ranks."""
    values = _as_1d(values, "values")
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), np.float64)
    start = 0
    while start < len(values):
        stop = start + 1
        while stop < len(values) and sorted_values[stop] == sorted_values[start]:
            stop += 1
        ranks[order[start:stop]] = (start + stop + 1) / 2.0  # mean of start+1..stop
        start = stop
    return ranks


def spearman(x, y):
    """Spearman rank correlation (Pearson of the tie-averaged ranks)."""
    x, y = _check_pair(x, y)
    return pearson(rankdata(x), rankdata(y))


# --- SQuAD --------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
    """The official SQuAD answer normalization."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction, gold):
    """1 when the normalized texts are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction, gold, empty_match=True):
    """Bag-of-tokens F1 of the normalized texts.

    Args:
        prediction: the predicted text.
        gold: a gold answer.
        empty_match: the v2.0 script's rule, 1 when both normalize to
            nothing (0 when only one does); False: the v1.1 script's, 0
            whenever no token is shared.
    """
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if empty_match and (not pred_tokens or not gold_tokens):
        return float(pred_tokens == gold_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _gold_answers(question, version):
    if version == "1.1":
        return [a["text"] for a in question.get("answers", [])]
    golds = [a["text"] for a in question.get("answers", [])
             if normalize_answer(a["text"])]
    return golds or [""]  # an unanswerable question's only answer is ""


def _best_threshold(predictions, raw_scores, na_probs, has_answer):
    """The no-answer threshold maximizing a score, and that score (percent)."""
    # Start from "every question is unanswered", then let questions answer
    # in order of rising no-answer probability.
    score = best = sum(1 for q in raw_scores if not has_answer[q])
    threshold = 0.0
    # In the order of the no-answer probabilities' own keys, as the script
    # sorts them (ties keep that order).
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if has_answer[qid]:
            score += raw_scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, threshold = score, na_probs[qid]
    return 100.0 * best / len(raw_scores), threshold


def squad_evaluate(dataset, predictions, na_probs=None, na_prob_thresh=1.0,
                   version=None):
    """SQuAD v1.1 / v2.0 evaluation, as the official scripts score.

    v1.1 takes the best over every gold answer and an F1 of 0 when no token
    is shared; v2.0 drops gold answers that normalize to nothing (an
    unanswerable question's only answer is then ""), gives an F1 of 1 when
    prediction and gold both normalize to nothing, and calls a question
    answerable when its `answers` list is not empty. A missing prediction
    scores 0 (v1.1's rule; the v2.0 script requires every prediction).

    Args:
        dataset: the `data` list of a SQuAD JSON file (articles with
            `paragraphs` with `qas`).
        predictions: dict question id -> predicted answer text ("" for no
            answer). A missing id scores 0.
        na_probs: optional dict question id -> no-answer probability (v2.0).
            With it, a question whose probability exceeds `na_prob_thresh` is
            taken as unanswered, and the best thresholds are searched.
        na_prob_thresh: the threshold applied to `na_probs`.
        version: "1.1", "2.0", or None: "2.0" when `na_probs` is given or a
            question has no answer, else "1.1".

    Returns:
        A dict with `exact`, `f1` (percent) and `total`; `HasAns_*` /
        `NoAns_*` splits when the dataset has unanswerable questions; and
        `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh` when
        `na_probs` is given.
    """
    questions = [question for article in dataset
                 for paragraph in article["paragraphs"]
                 for question in paragraph["qas"]]
    if version is None:
        version = ("2.0" if na_probs is not None
                   or any(not q.get("answers") for q in questions) else "1.1")
    if version not in ("1.1", "2.0"):
        raise ValueError('version must be "1.1", "2.0" or None. '
                         f"Received: version={version!r}")
    exact_scores, f1_scores, has_answer = {}, {}, {}
    for question in questions:
        qid = question["id"]
        golds = _gold_answers(question, version)
        has_answer[qid] = bool(question.get("answers"))
        prediction = predictions.get(qid)
        if prediction is None or not golds:
            exact_scores[qid] = f1_scores[qid] = 0.0
            continue
        exact_scores[qid] = float(max(exact_match(prediction, g)
                                      for g in golds))
        f1_scores[qid] = max(token_f1(prediction, g, version == "2.0")
                             for g in golds)
    if not exact_scores:
        raise ValueError("The SQuAD dataset holds no questions. Received: 0")

    def thresholded(raw):
        if na_probs is None:
            return dict(raw)
        return {q: (float(not has_answer[q])
                    if na_probs.get(q, 0.0) > na_prob_thresh else s)
                for q, s in raw.items()}

    exact_t, f1_t = thresholded(exact_scores), thresholded(f1_scores)

    def summary(qids):
        return (100.0 * sum(exact_t[q] for q in qids) / len(qids),
                100.0 * sum(f1_t[q] for q in qids) / len(qids))

    qids = list(exact_scores)
    result = collections.OrderedDict()
    result["exact"], result["f1"] = summary(qids)
    result["total"] = len(qids)
    with_answer = [q for q in qids if has_answer[q]]
    without = [q for q in qids if not has_answer[q]]
    if without:
        for prefix, group in (("HasAns", with_answer), ("NoAns", without)):
            if group:
                result[f"{prefix}_exact"], result[f"{prefix}_f1"] = summary(group)
                result[f"{prefix}_total"] = len(group)
    if na_probs is not None:
        probs = {q: p for q, p in na_probs.items() if q in exact_scores}
        probs.update({q: 0.0 for q in qids if q not in probs})
        preds = {q: predictions.get(q, "") for q in qids}
        result["best_exact"], result["best_exact_thresh"] = _best_threshold(
            preds, exact_scores, probs, has_answer)
        result["best_f1"], result["best_f1_thresh"] = _best_threshold(
            preds, f1_scores, probs, has_answer)
    return dict(result)
