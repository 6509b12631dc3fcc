"""Tests for data_prep.instances: the records' layout and n-gram masking."""

import collections
import random

import numpy as np
import pytest

from data_prep import instances
from data_prep import sentence_order
from data_prep import vocab
from tests import fixtures_text


def test_options_validation():
    with pytest.raises(ValueError, match="max_seq_length"):
        instances.InstanceOptions(max_seq_length=4).validate()
    with pytest.raises(ValueError, match="masked_lm_prob"):
        instances.InstanceOptions(masked_lm_prob=1.5).validate()


def _mask(options, seed=0, dupe=2):
    flat, offsets, documents, table = fixtures_text.synthetic_chunk(seed)
    pairs = sentence_order.build_pairs(offsets, documents, table[flat],
                                       options, dupe, random.Random(seed),
                                       collections.Counter())
    features, stats = instances.assemble_and_mask(
        flat, pairs, options, table, 200, np.random.default_rng(seed))
    return flat, table, pairs, features, stats


@pytest.mark.parametrize("whole_word", [True, False])
def test_layout_and_masking_invariants(whole_word):
    options = instances.InstanceOptions(max_seq_length=64,
                                        max_predictions_per_seq=10,
                                        do_whole_word_mask=whole_word)
    flat, table, pairs, f, stats = _mask(options)
    ids, mask, seg = f["input_ids"], f["input_mask"], f["segment_ids"]
    positions, labels = f["masked_lm_positions"], f["masked_lm_ids"]
    weights = f["masked_lm_weights"]
    filled = 0
    for row in range(len(pairs)):
        la, lb = int(pairs.a_len[row]), int(pairs.b_len[row])
        n = la + lb + 3
        count = int(weights[row].sum())
        pos = positions[row, :count]
        original = ids[row].copy()
        original[pos] = labels[row, :count]
        assert original[0] == vocab.CLS_ID and original[la + 1] == vocab.SEP_ID
        assert original[n - 1] == vocab.SEP_ID and not original[n:].any()
        a0, b0 = int(pairs.a_start[row]), int(pairs.b_start[row])
        assert (original[1:la + 1] == flat[a0:a0 + la]).all()
        assert (original[la + 2:n - 1] == flat[b0:b0 + lb]).all()
        assert mask[row].tolist() == [1] * n + [0] * (64 - n)
        assert seg[row].tolist() == [0] * (la + 2) + [1] * (lb + 1) + [0] * (64 - n)
        # Masked: sorted, unique, never [CLS]/[SEP]/padding, within budget.
        assert (np.diff(pos) > 0).all()
        assert not np.isin(pos, [0, la + 1]).any() and (pos < n - 1).all()
        budget = min(10, max(1, round(n * 0.15)))
        assert count <= budget
        filled += count == budget
        assert not weights[row, count:].any() and not positions[row, count:].any()
        if whole_word:
            # Whole words: a masked continuation piece has its word start
            # masked too (segment starts begin words).
            starts = set(pos.tolist())
            for p in pos:
                if not table[original[p]] and p not in (1, la + 2):
                    assert p - 1 in starts
    # The budget is missed only when every word left is too long for it.
    assert filled > 0.9 * len(pairs)
    token_boundary = f["token_boundary"]
    assert (token_boundary[:, 0] == 1).all()
    replaced = (f["input_ids"] != 0) & (mask == 0)
    assert not replaced.any()
    assert stats["masked_tokens"] == int(weights.sum())


def test_mask_replacement_proportions_and_ngrams():
    options = instances.InstanceOptions(max_seq_length=128)
    _, _, pairs, f, stats = _mask(options, seed=5, dupe=3)
    rows, cols = np.nonzero(f["masked_lm_weights"])
    positions = f["masked_lm_positions"][rows, cols]
    now = f["input_ids"][rows, positions]
    before = f["masked_lm_ids"][rows, cols]
    as_mask = (now == vocab.MASK_ID).mean()
    kept = (now == before).mean()
    assert 0.77 < as_mask < 0.83 and 0.08 < kept < 0.13
    counts = stats["ngram_counts"]
    assert counts[1] > counts[2] > counts[3] > 0
    assert 0.13 < stats["masked_tokens"] / stats["maskable_tokens"] < 0.17
    assert 0.45 < pairs.label.mean() < 0.55


def test_no_masking_when_prob_zero():
    options = instances.InstanceOptions(max_seq_length=32, masked_lm_prob=0.0)
    _, _, _, f, stats = _mask(options, dupe=1)
    assert stats["masked_tokens"] == 0 and not f["masked_lm_weights"].any()
