"""Tests for data_prep.mixing: input_ids parsing and the block-divergence
ratio of mixed and clustered orders."""

import numpy as np
import pytest
import tensorflow as tf

from data_prep import mixing
from data_prep import schema
from data_prep import tfrecord

VOCAB = 300


def _topic_records(count, topics=20, length=32, seed=0):
    """Serialized Examples whose tokens come from one of `topics` topics
    (each topic favours its own band of ids); sorted by topic."""
    rng = np.random.default_rng(seed)
    topic = np.sort(rng.integers(0, topics, count))
    band = VOCAB // topics
    ids = np.where(rng.random((count, length)) < 0.5,
                   5 + topic[:, None] * band // 2
                   + rng.integers(0, band, (count, length)),
                   rng.integers(5, VOCAB, (count, length)))
    ids[:, -4:] = 0  # Padding, left out.
    return schema.encode_examples({
        "input_ids": ids, "input_mask": (ids > 0).astype(int),
        "next_sentence_labels": rng.integers(0, 2, (count, 1))})


def _ratio(records):
    meter = mixing.MixingMeter(len(records), VOCAB)
    for record in records:
        meter.add(record)
    return meter.result()


def test_input_ids_match_tensorflow():
    records = _topic_records(5)
    parsed = tf.io.parse_example(records, {
        "input_ids": tf.io.FixedLenFeature([32], tf.int64)})["input_ids"]
    for record, ids in zip(records, parsed.numpy()):
        assert (mixing.input_ids(record) == ids).all()
    # Large ids (multi-byte varints) and another writer's feature order.
    example = tf.train.Example()
    example.features.feature["a"].int64_list.value.extend([1])
    example.features.feature["input_ids"].int64_list.value.extend(
        [2, 127, 128, 70000, 2**40])
    assert mixing.input_ids(example.SerializeToString()).tolist() == [
        2, 127, 128, 70000, 2**40]
    assert mixing.input_ids(tf.train.Example().SerializeToString()).size == 0


def test_random_order_is_near_one_and_clustered_order_is_not():
    records = _topic_records(4000)
    clustered = _ratio(records)
    order = np.random.default_rng(1).permutation(len(records))
    mixed = _ratio([records[i] for i in order])
    assert 0.85 < mixed["block_divergence_ratio"] < 1.15
    assert clustered["block_divergence_ratio"] > 5
    assert mixed["sampled_records"] == 4000 and mixed["blocks"] == 10
    assert mixed == _ratio([records[i] for i in order])  # Deterministic.


def test_sampling_keeps_the_measure(monkeypatch):
    monkeypatch.setattr(mixing, "MAX_SAMPLED", 1000)
    records = _topic_records(4000)
    order = np.random.default_rng(2).permutation(len(records))
    mixed = _ratio([records[i] for i in order])
    assert mixed["sampled_records"] == 1000
    assert 0.8 < mixed["block_divergence_ratio"] < 1.2
    assert _ratio(records)["block_divergence_ratio"] > 5


def test_files_are_read_in_the_round_robin_order(tmp_path):
    records = _topic_records(900)
    frames = tfrecord.frame_records(records)
    paths = []
    for shard in range(3):
        paths.append(str(tmp_path / ("s%d" % shard)))
        with open(paths[-1], "wb") as f:
            f.write(b"".join(frames[shard::3]))
    assert mixing.measure_files(paths, 900, VOCAB) == _ratio(records)
    with pytest.raises(ValueError, match="s0 ends before record 900"):
        mixing.measure_files(paths, 901, VOCAB)
    with open(paths[0], "ab") as f:
        f.write(frames[0][:10])
    with pytest.raises(ValueError, match="truncated"):
        mixing.measure_files(paths, 901, VOCAB)


def test_a_wrong_record_count_is_an_error():
    meter = mixing.MixingMeter(10, VOCAB)
    meter.add(_topic_records(1)[0])
    with pytest.raises(ValueError, match="1 records of 10"):
        meter.result()
