"""95% intervals for accuracies measured on a dev set over seeds, and the
verdicts they support.

Two sources of noise are counted: the dev set is a sample (binomial: an
accuracy `p` over `n` examples has variance `p(1-p)/n`), and a run depends
on its seed (initialization, dropout, batch order: the variance of a mean
over `S` seeds is `s^2/S`, `s` the sample standard deviation of the runs).
A mean accuracy's interval adds the two variances; a difference of two
means (pretrained minus random initialization) adds those of both sides,
which is conservative where the two share a dev set. A difference counts
only when its interval excludes 0.

Pure Python: the report code and the benchmarks use it without TensorFlow.
"""

import math
import statistics

Z_95 = 1.959964  # Two-sided 95% quantile of the normal distribution.
HELPED, CANT_TELL, HURT = (
    "pretraining helped", "can't tell (within noise)", "pretraining hurt")
ABOVE_CHANCE, AT_CHANCE, BELOW_CHANCE = (
    "above chance", "at chance", "below chance")


def wilson(accuracy, n, z=Z_95):
    """The Wilson score interval of a rate `accuracy` over `n` trials, as
    `[low, high]` (`[0, 1]` for no trial)."""
    if n <= 0:
        return [0.0, 1.0]
    centre = (accuracy + z * z / (2 * n)) / (1 + z * z / n)
    half = (z / (1 + z * z / n)) * math.sqrt(
        accuracy * (1 - accuracy) / n + z * z / (4 * n * n))
    return [max(0.0, centre - half), min(1.0, centre + half)]


def mean_variance(accuracies, n):
    """Variance of the mean of `accuracies` (one per seed, each over the
    same `n` dev examples): binomial over the dev set plus seed spread."""
    mean = statistics.fmean(accuracies)
    seeds = (statistics.variance(accuracies) / len(accuracies)
             if len(accuracies) >= 2 else 0.0)
    return mean * (1 - mean) / max(n, 1) + seeds


def mean_interval(accuracies, n, z=Z_95):
    """`(mean, [low, high])` of accuracies over seeds on `n` dev examples."""
    mean = statistics.fmean(accuracies)
    half = z * math.sqrt(mean_variance(accuracies, n))
    return mean, [max(0.0, mean - half), min(1.0, mean + half)]


def margin_interval(first, second, n, z=Z_95):
    """`(margin, [low, high])`: the mean of `first` minus the mean of
    `second` (accuracies over seeds, on `n` dev examples each)."""
    margin = statistics.fmean(first) - statistics.fmean(second)
    half = z * math.sqrt(mean_variance(first, n) + mean_variance(second, n))
    return margin, [margin - half, margin + half]


def margin_verdict(interval):
    """`HELPED` when the margin's interval lies above 0, `HURT` below,
    else `CANT_TELL`."""
    low, high = interval
    if low > 0:
        return HELPED
    if high < 0:
        return HURT
    return CANT_TELL


def chance_verdict(interval, chance=0.5):
    """`ABOVE_CHANCE`, `AT_CHANCE` or `BELOW_CHANCE`: where an accuracy's
    interval lies against `chance`."""
    low, high = interval
    if low > chance:
        return ABOVE_CHANCE
    if high < chance:
        return BELOW_CHANCE
    return AT_CHANCE


def difference_is_noise(first, second, n, z=Z_95):
    """Whether two accuracies over the same `n` examples (two checkpoints)
    differ by no more than the binomial noise of their difference."""
    pooled = (first + second) / 2
    return abs(first - second) <= z * math.sqrt(
        2 * pooled * (1 - pooled) / max(n, 1))
