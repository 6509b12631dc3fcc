"""The official SQuAD evaluation scripts (v1.1 and v2.0), transcribed.
"""

import collections
import re
import string


def _official_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def official_squad_v1(dataset, predictions):
    """`evaluate` of the official SQuAD v1.1 script: `exact_match`, `f1`."""
    def f1_score(prediction, ground_truth):
        prediction_tokens = _official_normalize(prediction).split()
        ground_truth_tokens = _official_normalize(ground_truth).split()
        common = (collections.Counter(prediction_tokens)
                  & collections.Counter(ground_truth_tokens))
        num_same = sum(common.values())
        if num_same == 0:
            return 0
        precision = 1.0 * num_same / len(prediction_tokens)
        recall = 1.0 * num_same / len(ground_truth_tokens)
        return (2 * precision * recall) / (precision + recall)

    def exact_match_score(prediction, ground_truth):
        return (_official_normalize(prediction)
                == _official_normalize(ground_truth))

    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                ground_truths = [x["text"] for x in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact_match += max(exact_match_score(prediction, gt)
                                   for gt in ground_truths)
                f1 += max(f1_score(prediction, gt) for gt in ground_truths)
    return {"exact_match": 100.0 * exact_match / total,
            "f1": 100.0 * f1 / total}


def official_squad_v2(dataset, preds, na_probs=None, na_prob_thresh=1.0):
    """`main` of the official SQuAD v2.0 script, as a dict (every question
    needs a prediction there, as in the script)."""
    qid_to_has_ans = {}
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid_to_has_ans[qa["id"]] = bool(qa["answers"])
    has_ans = [k for k, v in qid_to_has_ans.items() if v]
    no_ans = [k for k, v in qid_to_has_ans.items() if not v]

    def compute_f1(a_gold, a_pred):
        gold_toks = _official_normalize(a_gold).split() if a_gold else []
        pred_toks = _official_normalize(a_pred).split() if a_pred else []
        common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
        num_same = sum(common.values())
        if len(gold_toks) == 0 or len(pred_toks) == 0:
            return int(gold_toks == pred_toks)
        if num_same == 0:
            return 0
        precision = 1.0 * num_same / len(pred_toks)
        recall = 1.0 * num_same / len(gold_toks)
        return (2 * precision * recall) / (precision + recall)

    exact_scores, f1_scores = {}, {}
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid = qa["id"]
                gold_answers = [a["text"] for a in qa["answers"]
                                if _official_normalize(a["text"])]
                if not gold_answers:
                    gold_answers = [""]
                if qid not in preds:
                    continue
                a_pred = preds[qid]
                exact_scores[qid] = max(
                    int(_official_normalize(a) == _official_normalize(a_pred))
                    for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    if na_probs is None:
        probs = {k: 0.0 for k in preds}
    else:
        probs = na_probs

    def apply_no_ans_threshold(scores):
        new_scores = {}
        for qid, s in scores.items():
            pred_na = probs[qid] > na_prob_thresh
            new_scores[qid] = float(not qid_to_has_ans[qid]) if pred_na else s
        return new_scores

    exact_thresh = apply_no_ans_threshold(exact_scores)
    f1_thresh = apply_no_ans_threshold(f1_scores)

    def make_eval_dict(qid_list=None):
        if not qid_list:
            total = len(exact_thresh)
            return {"exact": 100.0 * sum(exact_thresh.values()) / total,
                    "f1": 100.0 * sum(f1_thresh.values()) / total,
                    "total": total}
        total = len(qid_list)
        return {"exact": 100.0 * sum(exact_thresh[k] for k in qid_list) / total,
                "f1": 100.0 * sum(f1_thresh[k] for k in qid_list) / total,
                "total": total}

    out = make_eval_dict()
    if has_ans:
        out.update({"HasAns_" + k: v
                    for k, v in make_eval_dict(has_ans).items()})
    if no_ans:
        out.update({"NoAns_" + k: v for k, v in make_eval_dict(no_ans).items()})

    def find_best_thresh(scores):
        num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
        cur_score = num_no_ans
        best_score = cur_score
        best_thresh = 0.0
        qid_list = sorted(probs, key=lambda k: probs[k])
        for qid in qid_list:
            if qid not in scores:
                continue
            if qid_to_has_ans[qid]:
                diff = scores[qid]
            elif preds[qid]:
                diff = -1
            else:
                diff = 0
            cur_score += diff
            if cur_score > best_score:
                best_score = cur_score
                best_thresh = probs[qid]
        return 100.0 * best_score / len(scores), best_thresh

    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = find_best_thresh(
            exact_scores)
        out["best_f1"], out["best_f1_thresh"] = find_best_thresh(f1_scores)
    return out
