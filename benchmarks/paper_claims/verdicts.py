"""The rules that turn the study's numbers into verdicts on the paper's claims.

A verdict is one of `AGREES`, `DISAGREES`, `CANT_TELL` with a reason that
names the numbers it was computed from. The yardstick of a difference
between two models is the seed-to-seed spread: the sample standard deviation
`s` of a metric over runs of one configuration that differ only in the seed.
Two single runs differ by `sqrt(2) * s` (one standard deviation) from seeds
alone, so a difference counts when it exceeds `Z * sqrt(2) * s` (Z = 2, about
95% under a normal spread). Accuracies against chance (the rate of always
answering the more frequent label of a 2-way task) use the binomial spread
of the held-out set instead.
"""

import math
import statistics

AGREES = "agrees"
DISAGREES = "disagrees"
CANT_TELL = "can't tell at this scale"
Z = 2.0
# 97.5% quantiles of Student's t by degrees of freedom (beyond 20, the one
# of 20: slightly wide).
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447,
         7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179,
         13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101,
         19: 2.093, 20: 2.086}


def spread(values):
    """Sample standard deviation (None for fewer than two values)."""
    values = list(values)
    return statistics.stdev(values) if len(values) >= 2 else None


def pair_threshold(seed_spread):
    """The smallest difference of two single runs that seeds do not explain
    (None when the spread is unknown)."""
    return None if seed_spread is None else Z * math.sqrt(2.0) * seed_spread


def _percent(value):
    return "%+.2f pt" % (100.0 * value)


def _judge(difference, threshold, what, inside=CANT_TELL, detail=""):
    """`AGREES` above `threshold`, `DISAGREES` below `-threshold`, `inside`
    between; `CANT_TELL` when there is no threshold (one seed)."""
    if threshold is None:
        return CANT_TELL, ("%s: %s, and one seed gives no spread to judge it "
                           "by" % (what, _percent(difference)))
    reason = "%s: %s against a noise threshold of ±%.2f pt%s" % (
        what, _percent(difference), 100.0 * threshold, detail)
    if difference > threshold:
        return AGREES, reason
    if difference < -threshold:
        return DISAGREES, reason
    return inside, reason + (" (within seed noise)" if inside == CANT_TELL
                             else "")


def better(difference, seed_spread, what):
    """The claim "the first model is better than the second" on a metric
    where higher is better.

    Args:
        difference: first minus second.
        seed_spread: the metric's seed-to-seed standard deviation, or None.
        what: the difference's description, for the reason.

    Returns:
        `(verdict, reason)`.
    """
    return _judge(difference, pair_threshold(seed_spread), what)


def not_worse(difference, seed_spread, what):
    """The claim "the first model is at least as good as the second" (the
    arguments and result as for `better`)."""
    return _judge(difference, pair_threshold(seed_spread), what,
                  inside=AGREES)


def better_mean(first, second, what):
    """The claim "the first is better" from repeated runs of each (higher
    is better): the difference of the means against Z standard errors of
    that difference.

    Args:
        first, second: the metric of each run (e.g. one per seed).
        what: the difference's description, for the reason.

    Returns:
        `(verdict, reason)`.
    """
    difference = statistics.fmean(first) - statistics.fmean(second)
    if min(len(first), len(second)) < 2:
        return _judge(difference, None, what)
    error = math.sqrt(statistics.variance(first) / len(first)
                      + statistics.variance(second) / len(second))
    return _judge(difference, Z * error, what, detail=(
        " (%.0f standard errors over %d and %d seeds)" % (
            Z, len(first), len(second))))


def chance_band(examples, chance=0.5):
    """Half-width of the band around `chance` that a model guessing at that
    rate stays in (Z binomial standard deviations over `examples` held-out
    pairs)."""
    return Z * math.sqrt(chance * (1.0 - chance) / max(examples, 1))


def near_chance(accuracy, examples, control, what, chance=0.5):
    """The claim "this model cannot do the task" (accuracy near chance).

    Only meaningful if a model trained on the task does it: `control` is
    that model's accuracy; when it is itself within the chance band, the
    task is not learned at this scale and the claim cannot be judged.

    Args:
        accuracy: the model's accuracy on the task's held-out pairs.
        examples: pairs scored.
        control: the accuracy of a model trained on the task.
        what: the accuracy's description, for the reason.
        chance: the accuracy of always answering the more frequent label.

    Returns:
        `(verdict, reason)`.
    """
    band = chance_band(examples, chance)
    reason = "%s: %.1f%% (chance band %.1f ± %.1f%%; the model trained on " \
             "it: %.1f%%)" % (what, 100 * accuracy, 100 * chance, 100 * band,
                              100 * control)
    if control - chance <= band:
        return CANT_TELL, reason + "; the task itself is not learned yet"
    if abs(accuracy - chance) <= band:
        return AGREES, reason
    return DISAGREES, reason


def above_chance(accuracy, examples, control, what, chance=0.5,
                 reference=None):
    """The claim "this model does the task" (clearly above chance).

    `control` is the model's accuracy on the task it was trained on (with
    its own `chance`, `examples`): a model that has not learned even that
    says nothing about transfer. `reference`, if given, is the accuracy of
    a model trained on this task: when that one is within the chance band
    too, the task is not learned at this scale by anything, and the claim
    cannot be judged. Other arguments as for `near_chance`.
    """
    band = chance_band(examples, chance)
    reason = "%s: %.1f%% (chance band %.1f ± %.1f%%)" % (
        what, 100 * accuracy, 100 * chance, 100 * band)
    own_accuracy, own_examples, own_chance = control
    if own_accuracy - own_chance <= chance_band(own_examples, own_chance):
        return CANT_TELL, reason + (
            "; its own task is not learned yet (%.1f%%)" % (100 * own_accuracy))
    if reference is not None and reference - chance <= band:
        return CANT_TELL, reason + (
            "; the task itself is not learned at this scale: the model "
            "trained on it scores %.1f%%" % (100 * reference))
    if accuracy - chance > band:
        return AGREES, reason
    return DISAGREES, reason


def parity(ours, theirs):
    """Whether two implementations learn alike, from runs over seeds.

    The tolerance is the two-sided 95% t-test bound on the difference of
    the means: `t(0.975, n1 + n2 - 2) * s_pooled * sqrt(1/n1 + 1/n2)`.

    Args:
        ours, theirs: the metric (e.g. held-out MLM loss) of each seed.

    Returns:
        A dict: `difference` (mean of theirs minus mean of ours),
        `tolerance` (None with fewer than 2 runs on a side), `pooled_spread`
        and `verdict` (`AGREES`: within the tolerance, `DISAGREES`: outside,
        `CANT_TELL`: no tolerance).
    """
    n1, n2 = len(ours), len(theirs)
    difference = statistics.fmean(theirs) - statistics.fmean(ours)
    if n1 < 2 or n2 < 2:
        return {"difference": difference, "tolerance": None,
                "pooled_spread": None, "verdict": CANT_TELL}
    pooled = math.sqrt(((n1 - 1) * statistics.variance(ours)
                        + (n2 - 1) * statistics.variance(theirs))
                       / (n1 + n2 - 2))
    degrees = n1 + n2 - 2
    quantile = T_975[min(degrees, 20)]
    tolerance = quantile * pooled * math.sqrt(1.0 / n1 + 1.0 / n2)
    return {"difference": difference, "tolerance": tolerance,
            "pooled_spread": pooled,
            "verdict": AGREES if abs(difference) <= tolerance else DISAGREES}
