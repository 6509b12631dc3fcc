"""What an evaluation's numbers are worth: each beside its baseline.

An accuracy means little alone: 0.51 on sentence order is chance, 0.25 on a
four-class task whose dev set is 25% one class is what answering that class
every time gets. The evaluations put each metric beside what a model that
ignores its input gets (chance, the most frequent label or piece) and say
"at chance" when a 95% binomial (Wilson) interval over the evaluated
examples reaches that baseline. A classifier that answers one class for
every example is "collapsed", whatever its accuracy. A training loss that
ends where a model that ignores its input would be has not learned
(`chance_verdict`).
"""

import math

import numpy as np
from absl import logging

Z_95 = 1.959964


def wilson(accuracy, n, z=Z_95):
    """The 95% Wilson interval `(low, high)` of an accuracy over `n`
    examples ((0, 1) when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    denominator = 1 + z * z / n
    center = (accuracy + z * z / (2 * n)) / denominator
    half = z * math.sqrt(accuracy * (1 - accuracy) / n
                         + z * z / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def at_chance(accuracy, n, baseline):
    """Whether an accuracy over `n` examples is not above `baseline` with
    95% confidence (its interval reaches the baseline, or lies below)."""
    return wilson(accuracy, n)[0] <= baseline


def majority(labels):
    """`(label, its share)` of the most frequent of `labels` (ties: the
    smallest label); `(None, 0.0)` when there are none."""
    labels = np.asarray(labels).reshape(-1)
    if labels.size == 0:
        return None, 0.0
    values, counts = np.unique(labels, return_counts=True)
    best = int(np.argmax(counts))
    return values[best].item(), float(counts[best] / labels.size)


def classifier_answers(labels, predictions):
    """What a classifier's evaluation needs to be judged: `majority_class`
    (the most frequent label), `predicted_classes` (how many classes it
    answered), `eval_examples`, and `predicted_class` when it answered one
    class only (see `collapsed_class`)."""
    predictions = np.asarray(predictions).reshape(-1)
    answered = np.unique(predictions)
    summary = {"majority_class": majority(labels)[0],
               "predicted_classes": int(answered.size),
               "eval_examples": int(predictions.size)}
    if answered.size == 1:
        summary["predicted_class"] = answered[0].item()
    return summary


def collapsed_class(result):
    """The class a classifier answered for every example of an evaluation
    (`classifier_answers` in `result`), or None: it answered several, or
    too few examples were evaluated to tell."""
    result = result or {}
    if (result.get("predicted_classes") == 1
            and result.get("eval_examples", 0) >= 2):
        return result.get("predicted_class")
    return None


def describe(name, value, baseline, n, baseline_name):
    """One metric beside its baseline: `name value (baseline_name b;
    at chance|above it, 95% interval [l, h] over n)`."""
    low, high = wilson(value, n)
    verdict = ("above it" if low > baseline else "below it" if high < baseline
               else "at chance")
    return (f"{name} {value:.4f} ({baseline_name} {baseline:.4f}: {verdict}, "
            f"95% interval {low:.4f}-{high:.4f} over {n})")


# A final training loss this close (relative) to the chance loss, or above
# it, has not learned (`chance_verdict`).
CHANCE_TOLERANCE = 0.02


def chance_verdict(history, start, chance, warmup_flag):
    """`{"at_chance": bool}` (with a logged `warning` when True), or {}
    when the losses cannot tell.

    The reference is the task's chance loss (what a model that ignores its
    input reaches: the training labels' entropy for a classifier), else, for
    a run that started at step 0, its first loop's loss. A final loss not
    `CHANCE_TOLERANCE` (relative) below it has not learned.

    Args:
        history: `[(step, loss)]` of the run's loops, in order.
        start: the step the run started at.
        chance: the task's chance loss, or None when it does not know it.
        warmup_flag: the job's warm-up flag, named in the advice.
    """
    if not history:
        return {}
    final = history[-1][1]
    if chance is not None and chance <= 0:
        return {}  # One label only: there is nothing to learn.
    if chance is not None:
        reference = (f"chance ({chance:.4g}, the loss of a model that "
                     "ignores its input)")
    elif start == 0 and len(history) > 1:
        chance = history[0][1]
        reference = (f"the first logged loss ({chance:.4g} at step "
                     f"{history[0][0]})")
    else:
        return {}
    if final < chance - CHANCE_TOLERANCE * abs(chance):
        return {"at_chance": False}
    warning = (
        f"The training loss ended at {final:.4g} (step {history[-1][0]}), "
        f"not {CHANCE_TOLERANCE:.0%} below {reference}: the model has not "
        f"learned. Try a lower --learning_rate, a longer warm-up "
        f"({warmup_flag}) or another --seed.")
    logging.warning("%s", warning)
    return {"at_chance": True, "chance_loss": chance, "warning": warning}
