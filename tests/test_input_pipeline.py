import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import input_pipeline
from tests import fixtures_records

L, P = fixtures_records.L, fixtures_records.P


def _indices(batch):
    return list(batch["input_word_ids"][:, 1].numpy() - 100)


def test_file_patterns(tmp_path):
    paths = fixtures_records.write(str(tmp_path))
    pattern = str(tmp_path / "part-[01].tfrecord") + "," + paths[2]
    assert input_pipeline.expand_file_patterns(pattern) == paths
    with pytest.raises(ValueError, match="nothing-here"):
        input_pipeline.expand_file_patterns(str(tmp_path / "nothing-here*"))


def test_eval_pass_static_int32(tmp_path):
    fixtures_records.write(str(tmp_path))
    dataset = input_pipeline.pretraining_dataset(
        str(tmp_path / "*.tfrecord"), 5, L, P, is_training=False)
    spec = dataset.element_spec
    assert spec["input_word_ids"].shape == (5, L)
    assert spec["masked_lm_positions"].shape == (5, P)
    assert spec["next_sentence_labels"].shape == (5,)
    for name, s in spec.items():
        assert s.dtype == (tf.float32 if name == "masked_lm_weights" else tf.int32)
    batches = list(dataset)
    assert len(batches) == 4  # 24 records, drop_remainder
    assert sum((_indices(b) for b in batches), []) == list(range(20))
    first = batches[0]
    np.testing.assert_array_equal(first["next_sentence_labels"], [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(first["masked_lm_ids"][:, 0],
                                  first["input_word_ids"][:, 2])


def test_training_order_is_seeded_and_skip_resumes(tmp_path):
    files = fixtures_records.write(str(tmp_path))

    def take(seed, skip, n):
        dataset = input_pipeline.pretraining_dataset(
            files, 4, L, P, seed=seed, skip_batches=skip, shuffle_buffer=10)
        return [_indices(b) for b in dataset.take(n)]

    full = take(7, 0, 10)
    assert take(7, 0, 10) == full
    assert take(7, 3, 7) == full[3:]
    assert take(8, 0, 10) != full
    # Shuffling spans epoch boundaries, so 10 batches need not hold every
    # record; 30 batches (5 epochs) do, whatever the global seed.
    assert set(sum(take(7, 0, 30), [])) == set(range(24))


def test_shards_are_interleaved_and_the_buffer_is_sized_for_the_batch(
        tmp_path):
    assert input_pipeline.default_shuffle_buffer(4) == 100
    assert input_pipeline.default_shuffle_buffer(32) == 128
    assert input_pipeline.default_shuffle_buffer(4096) == 16384
    files = fixtures_records.write(str(tmp_path))
    # Without the record shuffle the interleave alone deals the shards in
    # turn (the repeated, shuffled file list may hold a shard twice in one
    # cycle): no batch of 3 comes from one shard.
    dataset = input_pipeline.pretraining_dataset(files, 3, L, P, seed=1,
                                                 shuffle_buffer=1)
    for batch in dataset.take(8):
        assert len({i // 8 for i in _indices(batch)}) >= 2


def test_input_context_shards(tmp_path):
    files = fixtures_records.write(str(tmp_path), num_files=1, per_file=16)
    shards = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline,
            num_replicas_in_sync=2)
        dataset = input_pipeline.pretraining_dataset(
            files, 8, L, P, is_training=False, input_context=context)
        shards.append(sum((_indices(b) for b in dataset), []))
    assert shards[0] == list(range(0, 16, 2))
    assert shards[1] == list(range(1, 16, 2))
