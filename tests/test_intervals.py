"""95% intervals and verdicts (`albert_apps.intervals`)."""

import math
import random

import pytest

from albert_apps import intervals


def test_wilson_matches_the_textbook_values():
    # 8 of 10: Wilson's 95% interval is [0.490, 0.943].
    low, high = intervals.wilson(0.8, 10)
    assert low == pytest.approx(0.4902, abs=1e-3)
    assert high == pytest.approx(0.9433, abs=1e-3)
    assert intervals.wilson(0.5, 0) == [0.0, 1.0]
    low, high = intervals.wilson(0.0, 50)
    assert low == 0.0 and 0 < high < 0.1


def test_mean_interval_adds_dev_set_and_seed_noise():
    mean, (low, high) = intervals.mean_interval([0.8, 0.8, 0.8], 1000)
    half = intervals.Z_95 * math.sqrt(0.8 * 0.2 / 1000)
    assert mean == pytest.approx(0.8)
    assert (low, high) == (pytest.approx(0.8 - half), pytest.approx(0.8 + half))
    # Seeds that disagree widen it.
    _, (low2, high2) = intervals.mean_interval([0.75, 0.8, 0.85], 1000)
    assert low2 < low and high2 > high


def test_margin_verdicts():
    margin, interval = intervals.margin_interval([0.80, 0.79, 0.81],
                                                 [0.57, 0.58, 0.59], 1100)
    assert margin == pytest.approx(0.22)
    assert intervals.margin_verdict(interval) == intervals.HELPED
    # The small task: 53 dev pairs, seeds from 32% to 64%.
    _, interval = intervals.margin_interval([0.32, 0.58, 0.64],
                                            [0.50, 0.55, 0.53], 53)
    assert interval[0] < 0 < interval[1]
    assert intervals.margin_verdict(interval) == intervals.CANT_TELL
    _, interval = intervals.margin_interval([0.50, 0.51, 0.52],
                                            [0.70, 0.71, 0.69], 1000)
    assert intervals.margin_verdict(interval) == intervals.HURT


def test_chance_verdicts():
    assert intervals.chance_verdict(intervals.wilson(0.52, 1200)) == \
        intervals.AT_CHANCE
    assert intervals.chance_verdict(intervals.wilson(0.78, 1200)) == \
        intervals.ABOVE_CHANCE
    assert intervals.chance_verdict(intervals.wilson(0.40, 1200)) == \
        intervals.BELOW_CHANCE


def test_intervals_cover_simulated_runs():
    """Over many simulated experiments with no true margin, the margin's
    interval excludes 0 about 5% of the time, not much more."""
    rng = random.Random(0)
    n, wrong = 400, 0
    for _ in range(400):
        runs = [[sum(rng.random() < p for _ in range(n)) / n
                 for p in (0.6 + rng.gauss(0, 0.01) for _ in range(3))]
                for _ in range(2)]
        _, interval = intervals.margin_interval(runs[0], runs[1], n)
        wrong += intervals.margin_verdict(interval) != intervals.CANT_TELL
    assert wrong / 400 < 0.10


def test_difference_is_noise():
    assert intervals.difference_is_noise(0.531, 0.546, 1200)
    assert not intervals.difference_is_noise(0.60, 0.40, 1000)
