"""Small pretraining record files whose rows can be traced back: each
record's second id is `100 + its index`. Read by tests/test_input_pipeline.py
and test_dynamic_masking.py.
"""

import os

import numpy as np
import tensorflow as tf

# The records' sequence length and masked positions per sequence.
L, P = 16, 4


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def example(index, masked=True):
    """A record whose input_ids start with [CLS] then `index` (traceable)."""
    rng = np.random.default_rng(index)
    n = int(rng.integers(8, L + 1))
    ids = np.zeros(L, np.int64)
    ids[:n] = rng.integers(10, 50, n)
    ids[0], ids[1], ids[n // 2], ids[n - 1] = 2, 100 + index, 3, 3
    boundary = np.zeros(L, np.int64)
    boundary[:n] = rng.random(n) < 0.6
    boundary[[0, 1, n // 2, n - 1]] = 1
    segments = np.zeros(L, np.int64)
    segments[n // 2 + 1:n] = 1
    feature = {
        "input_ids": _int_feature(ids),
        "segment_ids": _int_feature(segments),
        "token_boundary": _int_feature(boundary),
        "next_sentence_labels": _int_feature([index % 2]),
    }
    if masked:
        mask = (ids != 0).astype(np.int64)
        feature.update(
            input_mask=_int_feature(mask),
            masked_lm_positions=_int_feature([2, 3, 0, 0]),
            masked_lm_ids=_int_feature([ids[2], ids[3], 0, 0]),
            masked_lm_weights=tf.train.Feature(
                float_list=tf.train.FloatList(value=[1.0, 1.0, 0.0, 0.0])))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write(directory, num_files=3, per_file=8, masked=True):
    """Writes `num_files` files `part-<f>.tfrecord` of `per_file` records
    each (record `f * per_file + i` of `example`); returns their paths."""
    paths = []
    for f in range(num_files):
        path = os.path.join(directory, f"part-{f}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(per_file):
                writer.write(example(f * per_file + i, masked).SerializeToString())
        paths.append(path)
    return paths
