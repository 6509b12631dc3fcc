"""Tests for data_prep.statistics: summing counters, the statistics dict."""

import logging

from data_prep import instances
from data_prep import reader
from data_prep import statistics


def _counters(**values):
    counters = dict.fromkeys(statistics.COUNTER_NAMES, 0)
    counters.update(values)
    counters["ngram_counts"] = values.pop("ngram_counts", [0, 0, 0, 0])
    return counters


def test_totals_and_fractions(caplog):
    totals = statistics.Totals(3)
    totals.add(_counters(instances=3, maskable_tokens=100, masked_tokens=15,
                         swapped_instances=1, ngram_counts=[0, 5, 2, 1]))
    totals.add(_counters(instances=1, maskable_tokens=20, masked_tokens=3,
                         tokens=50, long_sentences=2, ngram_counts=[0, 1, 0, 0]))
    stats = statistics.statistics(totals, reader.ReadCounters(),
                                  instances.InstanceOptions())
    assert stats["instances"] == 4
    assert stats["masked_fraction"] == round(18 / 120, 6)
    assert stats["ngram_histogram"] == {"1": 6, "2": 2, "3": 1}
    assert stats["sop_label_counts"] == {"0": 3, "1": 1}
    assert stats["mean_tokens_per_instance"] == 12.5
    statistics.add_run(stats, ["in"], ["out"], [4], 2.0, {"seed": 1})
    assert stats["instances_per_s"] == 2.0 and stats["settings"] == {"seed": 1}
    caplog.set_level(logging.INFO, logger="absl")
    statistics.log_summary(stats, reader.ReadCounters(), "x.stats.json")
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("Wrote 4 instances")
    assert "2 sentences were longer" in messages[-1]


def test_empty_run_has_zero_fractions():
    stats = statistics.statistics(statistics.Totals(3), reader.ReadCounters(),
                                  instances.InstanceOptions())
    assert stats["masked_fraction"] == stats["sop_swapped_fraction"] == 0.0


def test_totals_merge_equals_adding_in_one_place():
    parts = [_counters(instances=i, tokens=10 * i, ngram_counts=[0, i, 1, 0])
             for i in range(1, 5)]
    one = statistics.Totals(3)
    for counters in parts:
        one.add(counters)
    left, right = statistics.Totals(3), statistics.Totals(3)
    left.add(parts[0])
    left.add(parts[1])
    right.add(parts[2])
    right.add(parts[3])
    merged = left.merge(right)
    assert merged.counts == one.counts
    assert merged.ngram_counts == one.ngram_counts == [0, 10, 4, 0]
