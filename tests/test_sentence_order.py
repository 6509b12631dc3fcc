"""Tests for data_prep.sentence_order: SOP pairs, their labels, truncation."""

import collections
import random

import numpy as np
import pytest

from data_prep import instances
from data_prep import sentence_order
from tests import fixtures_text


def _official_truncation(len_a, len_b, max_num_tokens):
    """The official one-token-at-a-time loop, counting removals."""
    removed = [0, 0]
    lengths = [len_a, len_b]
    while sum(lengths) > max_num_tokens:
        side = 0 if lengths[0] > lengths[1] else 1
        lengths[side] -= 1
        removed[side] += 1
    return tuple(removed)


def test_truncation_counts_match_official_loop():
    rng = random.Random(0)
    for _ in range(2000):
        la, lb, cap = rng.randint(1, 300), rng.randint(1, 300), rng.randint(2, 300)
        expected = _official_truncation(la, lb, cap)
        assert sentence_order.truncation_counts(la, lb, cap) == expected


def _counters():
    return collections.Counter()


@pytest.mark.parametrize("random_next", [False, True])
def test_pairs_are_valid_ranges(random_next):
    flat, offsets, documents, table = fixtures_text.synthetic_chunk(0)
    options = instances.InstanceOptions(max_seq_length=64,
                                        random_next_sentence=random_next)
    counters = _counters()
    pairs = sentence_order.build_pairs(offsets, documents, table[flat],
                                       options, 2, random.Random(1), counters)
    assert len(pairs) > 500
    assert (pairs.a_len >= 1).all() and (pairs.b_len >= 1).all()
    assert (pairs.a_len + pairs.b_len <= 61).all()
    doc_of = np.searchsorted([offsets[d[1]] for d in documents],
                             np.stack([pairs.a_start, pairs.b_start]), side="right")
    if random_next:
        assert counters["random_next_instances"] > 0
        assert (pairs.label[doc_of[0] != doc_of[1]] == 1).all()
    else:
        # SOP: both segments from one document, adjacent unless truncated.
        assert (doc_of[0] == doc_of[1]).all()
        kept = pairs.label == 0
        gap_kept = pairs.b_start[kept] - (pairs.a_start + pairs.a_len)[kept]
        gap_swapped = pairs.a_start[~kept] - (pairs.b_start + pairs.b_len)[~kept]
        assert (gap_kept >= 0).all() and (gap_swapped >= 0).all()
        assert 0.45 < pairs.label.mean() < 0.55
        assert counters["split_sentences"] > 0


def test_short_target_fraction():
    flat, offsets, documents, table = fixtures_text.synthetic_chunk(3, num_docs=800)
    options = instances.InstanceOptions(max_seq_length=128, short_seq_prob=0.2)
    pairs = sentence_order.build_pairs(offsets, documents, table[flat],
                                       options, 1, random.Random(2),
                                       _counters())
    assert 0.16 < pairs.short.mean() < 0.24
    lengths = pairs.a_len + pairs.b_len
    assert lengths[pairs.short == 1].mean() < 0.9 * lengths[pairs.short == 0].mean()
