"""Tests for albert_tf.training.record_checks: file checks, shape checks, bad
records."""

import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.training import input_pipeline
from albert_tf.training import record_checks
from data_prep import schema
from data_prep import tfrecord

L, P = 16, 4


def _serialized(num, seq=L, pred=P, masked=True, seed=0):
    rng = np.random.default_rng(seed)
    features = {
        "input_ids": rng.integers(5, 50, (num, seq)),
        "input_mask": np.ones((num, seq), np.int64),
        "segment_ids": rng.integers(0, 2, (num, seq)),
        "token_boundary": rng.integers(0, 2, (num, seq)),
        "masked_lm_positions": rng.integers(1, seq, (num, pred)),
        "masked_lm_ids": rng.integers(5, 50, (num, pred)),
        "masked_lm_weights": np.ones((num, pred), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (num, 1)),
    }
    features["input_ids"][:, 0] = np.arange(num)  # Which record it is.
    if not masked:
        for name in ("input_mask", "masked_lm_positions", "masked_lm_ids",
                     "masked_lm_weights"):
            features.pop(name)
        return [tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(int64_list=tf.train.Int64List(
                value=values[row])) for name, values in features.items()}))
                .SerializeToString() for row in range(num)]
    return schema.encode_examples(features)


def _write(path, serialized):
    path.write_bytes(b"".join(tfrecord.frame_records(serialized)))
    return str(path)


def _offset(serialized, index):
    """Byte offset of record `index` in a file of `serialized`."""
    return sum(len(r) + 16 for r in serialized[:index])


def test_files_that_are_not_tfrecords_are_skipped_by_name(tmp_path, caplog):
    good = _write(tmp_path / "train.tfrecord", _serialized(3))
    empty = tmp_path / "train.tfrecord-empty"
    empty.write_bytes(b"")
    (tmp_path / "train.stats.json").write_text(json.dumps({"instances": 3}))
    (tmp_path / "notes.txt").write_text("records made on Monday\n")
    caplog.set_level(logging.WARNING, logger="absl")
    files = input_pipeline.expand_file_patterns(str(tmp_path / "*"))
    assert files == [str(tmp_path / "train.tfrecord"), str(empty)]
    assert [r.getMessage() for r in caplog.records] == [
        "Skipping 2 input files that are not TFRecords: %s, %s"
        % (tmp_path / "notes.txt", tmp_path / "train.stats.json")]
    with pytest.raises(ValueError, match=r"None of the input files is a "
                       r"TFRecord file: .*notes.txt$"):
        record_checks.tfrecord_files([str(tmp_path / "notes.txt")])
    assert good in files


def test_check_records_names_the_file_and_the_flag(tmp_path):
    good = _write(tmp_path / "good.tfrecord", _serialized(2))
    short = _write(tmp_path / "p10.tfrecord", _serialized(2, pred=10))
    long = _write(tmp_path / "l32.tfrecord", _serialized(2, seq=32))
    unmasked = _write(tmp_path / "unmasked.tfrecord",
                      _serialized(2, masked=False))
    record_checks.check_records([good], L, P)
    with pytest.raises(ValueError) as error:
        record_checks.check_records([good, short], L, P)
    assert str(error.value) == (f"records in {short} have "
                                f"max_predictions_per_seq=10, flags say {P}")
    with pytest.raises(ValueError) as error:
        record_checks.check_records([long], L, P)
    assert str(error.value) == (f"records in {long} have max_seq_length=32, "
                                f"flags say {L}")
    with pytest.raises(ValueError, match="have no input_mask, masked_lm_posit"
                       ".*records without masks need dynamic masking"):
        record_checks.check_records([unmasked], L, P)
    # Dynamic masking reads the unmasked features only (and makes P itself).
    record_checks.check_records([unmasked, short], L, 7, dynamic_masking=True)
    with pytest.raises(ValueError, match="max_seq_length=16, flags say 8"):
        record_checks.check_records([unmasked], 8, P, dynamic_masking=True)


def test_check_records_bad_first_records_and_empty_files(tmp_path, caplog):
    serialized = _serialized(2)
    good = _write(tmp_path / "good.tfrecord", serialized)
    data = open(good, "rb").read()
    truncated = tmp_path / "truncated.tfrecord"
    truncated.write_bytes(data[:30])
    corrupted = tmp_path / "corrupted.tfrecord"
    corrupted.write_bytes(data[:20] + bytes([data[20] ^ 0xFF]) + data[21:])
    not_example = _write(tmp_path / "bytes.tfrecord", [b"\xff\xff\xff"])
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    for path, message in (
            (truncated, f"{truncated} is truncated: its first record"),
            (corrupted, f"{corrupted} is corrupted: the record at byte 0 "
                        "fails its checksum"),
            (not_example, f"records in {not_example} are not tf.train."
                          "Example protos")):
        with pytest.raises(ValueError) as error:
            record_checks.check_records([str(path)], L, P)
        assert str(error.value).startswith(message), error.value
    with pytest.raises(ValueError, match="every input file is empty"):
        record_checks.check_records([str(empty)], L, P)
    caplog.set_level(logging.WARNING, logger="absl")
    record_checks.check_records([good, str(empty)], L, P)
    assert "1 of 2 input files hold no records." in caplog.text


def _damaged(tmp_path, serialized, bad_index):
    """Two files: `bad.tfrecord` with record `bad_index` broken, `ok.tfrecord`."""
    ok = _write(tmp_path / "ok.tfrecord", _serialized(6, seed=1))
    data = b"".join(tfrecord.frame_records(serialized))
    where = _offset(serialized, bad_index) + 20  # Inside the record's data.
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(data[:where] + bytes([data[where] ^ 0xFF]) + data[where + 1:])
    return str(bad), ok, len(data)


def _eval_ids(files, **kwargs):
    dataset = input_pipeline.pretraining_dataset(
        files, 1, L, P, is_training=False, **kwargs)
    return [int(b["input_word_ids"][0, 0]) for b in dataset]


def test_a_corrupted_record_names_the_file_and_offset(tmp_path):
    serialized = _serialized(10)
    bad, ok, size = _damaged(tmp_path, serialized, 7)
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        _eval_ids([bad, ok])
    assert (f"{bad}: no readable record at byte {_offset(serialized, 7)} of "
            f"{size} (corrupted, truncated or unreadable") in error.value.message
    # The same for a file cut inside a record, in the training interleave.
    truncated = tmp_path / "truncated.tfrecord"
    truncated.write_bytes(open(ok, "rb").read()[:-5])
    dataset = input_pipeline.pretraining_dataset(
        [str(truncated)], 2, L, P, is_training=True)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"{truncated}: no readable record at byte "):
        for _ in dataset.take(10):
            pass


def test_skip_corrupt_records_keeps_the_rest_and_logs_it(tmp_path, capfd):
    serialized = _serialized(10)
    bad, ok, size = _damaged(tmp_path, serialized, 7)
    ids = _eval_ids([bad, ok], skip_corrupt_records=True)
    assert ids == list(range(7)) + list(range(6))
    offset = _offset(serialized, 7)
    assert (f"WARNING: skip_corrupt_records: {bad}: no readable record at byte "
            f"{offset} of {size} - skipped the rest of the file, "
            f"{size - offset} bytes.") in capfd.readouterr().err
    # Sound files read the same as with tf.data.TFRecordDataset.
    assert _eval_ids([ok]) == [
        int(tf.train.Example.FromString(r.numpy()).features.feature[
            "input_ids"].int64_list.value[0])
        for r in tf.data.TFRecordDataset(ok)]


def test_run_pretraining_names_a_shape_mismatch_before_writing(tmp_path,
                                                               caplog):
    # The library entry of `python -m albert_tf.run_pretraining`: its
    # ValueError is what the program prints as one line with exit status 1
    # (the same case runs as a command line in tests/test_bad_inputs.py).
    from albert_tf.training import pretraining
    from albert_tf.training.options import PretrainingOptions

    data = tmp_path / "data"
    data.mkdir()
    shard = _write(data / "train.tfrecord", _serialized(8, pred=10))
    (data / "train.stats.json").write_text(json.dumps({"instances": 8}))
    caplog.set_level(logging.WARNING, logger="absl")
    with pytest.raises(ValueError) as error:
        pretraining.run_pretraining(PretrainingOptions(
            input_file=str(data / "*"), output_dir=str(tmp_path / "out"),
            config=AlbertConfig.from_preset("tiny", vocab_size=64),
            train_batch_size=2, max_seq_length=L, max_predictions_per_seq=20,
            num_train_steps=1, num_warmup_steps=0))
    assert str(error.value) == (
        f"records in {shard} have max_predictions_per_seq=10, flags say 20")
    assert ("Skipping 1 input files that are not TFRecords: %s"
            % (data / "train.stats.json")) in caplog.text
    assert not os.path.exists(tmp_path / "out" / "checkpoint")
