"""The tf.data masker of mask-less records, through the input pipeline."""

import collections

import numpy as np

from albert_tf.training import dynamic_masking
from albert_tf.training import input_pipeline
from tests import fixtures_records

# The records of the input pipeline's tests, written without masks.
L, P = fixtures_records.L, fixtures_records.P


def test_dynamic_masking_rules(tmp_path):
    files = fixtures_records.write(str(tmp_path), num_files=2, per_file=10,
                                   masked=False)
    options = dynamic_masking.DynamicMasking(vocab_size=60, masked_lm_prob=0.3)
    dataset = input_pipeline.pretraining_dataset(
        files, 4, L, P, seed=3, dynamic_masking=options)
    originals = {}
    for f in range(2):
        for i in range(10):
            e = fixtures_records.example(f * 10 + i).features.feature
            originals[f * 10 + i] = (
                np.array(e["input_ids"].int64_list.value),
                np.array(e["token_boundary"].int64_list.value))
    masks_by_record = collections.defaultdict(set)
    replaced = collections.Counter()
    filled = []
    for batch in dataset.take(20):
        for row in range(4):
            ids = batch["input_word_ids"][row].numpy()
            positions = batch["masked_lm_positions"][row].numpy()
            weights = batch["masked_lm_weights"][row].numpy()
            labels = batch["masked_lm_ids"][row].numpy()
            k = int(weights.sum())
            positions = positions[:k]
            # The traceable token itself may be masked: find the record by
            # the unmasked tokens.
            index = next(i for i, (orig, _) in originals.items()
                         if np.array_equal(np.delete(orig, positions),
                                           np.delete(ids, positions)))
            orig, boundary = originals[index]
            real = int((orig != 0).sum())
            # The official greedy fill may stop short when no word fits.
            expected = min(P, max(1, round(real * 0.3)))
            assert 1 <= k <= expected
            filled.append(k / expected)
            assert list(positions) == sorted(positions)
            np.testing.assert_array_equal(labels[:k], orig[positions])
            assert not np.isin(orig[positions], [0, 2, 3]).any()
            # Whole words: a masked token's word-mates (until the next
            # boundary) are masked too, unless P ran out.
            for pos in positions:
                nxt = pos + 1
                if nxt < L and not boundary[nxt] and orig[nxt] not in (0, 2, 3):
                    assert nxt in positions or k == P
            for pos in positions:
                replaced["mask" if ids[pos] == 4 else
                         "kept" if ids[pos] == orig[pos] else "random"] += 1
            masks_by_record[index].add(tuple(positions))
            assert batch["input_mask"][row].numpy().sum() == real
    # Different masks for the same record in different epochs.
    assert any(len(m) > 1 for m in masks_by_record.values())
    assert np.mean(filled) > 0.8
    total = sum(replaced.values())
    assert 0.65 < replaced["mask"] / total < 0.95, replaced
    # Reproducible from the seed (fresh datasets: a dataset object reshuffles
    # on each new iterator).
    first, second = (next(iter(input_pipeline.pretraining_dataset(
        files, 4, L, P, seed=3, dynamic_masking=options))) for _ in range(2))
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])
