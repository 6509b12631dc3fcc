"""Checks of the pretraining TFRecord files, before and while they are read.

A pretraining run reads thousands of steps before it touches the last
shard; these checks make the mistakes that used to surface there, as
`DataLossError: corrupted record at 0` or `ParseExampleV2 ... Values size: 10
but output shape: [20]` naming no file, fail at once with the file's name:

- `tfrecord_files`: matches of the record globs that are not TFRecords
  (the data builder's `*.stats.json`, notes, text) are skipped and named in
  one log line;
- `check_records`: the first record of every file is parsed and its feature
  lengths compared with `max_seq_length` / `max_predictions_per_seq`, so a
  mismatch is one line: "records in FILE have max_predictions_per_seq=10,
  flags say 20";
- `read_file`: what the input pipeline interleaves instead of a bare
  `tf.data.TFRecordDataset`. A corrupted or truncated record ends the
  run with an error naming the file and the byte offset of the bad record;
  with `skip_corrupt_records`, the rest of that file is skipped instead (the
  TFRecord format cannot find the next record after a bad one) and the
  skipped bytes are logged, file by file.

How `read_file` knows: tf.data drops the file name from its errors, so each
file is read with its errors caught (`ignore_errors`, which ends that file's
records at the first bad one) while a running byte count follows the
records; when the file ends before its size, the count is the offset of the
bad record. The records and their order are those of `TFRecordDataset`.
"""

import sys

import tensorflow as tf
from absl import logging

from data_prep import schema
from data_prep import tfrecord

# Bytes around each record's data: length, length CRC, data CRC.
_FRAME_OVERHEAD = 16
# Records per step of the byte count in `read_file`.
_BATCH = 128
# The features dynamic masking reads (it makes the masked ones).
_UNMASKED_FEATURES = ("input_ids", "segment_ids", "token_boundary",
                      "next_sentence_labels")
# Features of length max_seq_length, and of length max_predictions_per_seq.
_SEQUENCE_FEATURES = frozenset(
    {"input_ids", "input_mask", "segment_ids", "token_boundary"})
_PREDICTION_FEATURES = frozenset(
    {"masked_lm_positions", "masked_lm_ids", "masked_lm_weights"})


def _read_head(path, size):
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read(size)


def tfrecord_files(paths):
    """Drops the paths that are not TFRecord files, logging them in one line.

    A file is a TFRecord when its first 12 bytes are a record length and that
    length's checksum; an empty file (a shard with no records) is kept.

    Args:
        paths: file paths (local or `tf.io.gfile` URLs).

    Returns:
        The TFRecord files, in order.

    Raises:
        ValueError: none of `paths` is a TFRecord file (each is named).
    """
    kept, dropped = [], []
    for path in paths:
        head = _read_head(path, tfrecord.HEADER_BYTES)
        if not head or tfrecord.is_record_header(head):
            kept.append(path)
        else:
            dropped.append(path)
    if not kept:
        raise ValueError("None of the input files is a TFRecord file: "
                         + ", ".join(dropped))
    if dropped:
        logging.warning("Skipping %d input files that are not TFRecords: %s",
                        len(dropped), ", ".join(dropped))
    return kept


def _first_record(path):
    """The first record of a TFRecord file (None: the file is empty).

    Raises:
        ValueError: the first record is truncated or fails its checksum.
    """
    with tf.io.gfile.GFile(path, "rb") as f:
        header = f.read(tfrecord.HEADER_BYTES)
        if not header:
            return None
        if not tfrecord.is_record_header(header):
            raise ValueError(f"{path} is corrupted: no valid record at byte 0")
        length = int.from_bytes(header[:8], "little")
        data = f.read(length)
        crc = f.read(4)
    if len(data) < length or len(crc) < 4:
        raise ValueError(f"{path} is truncated: its first record (at byte 0) "
                         f"has {length} bytes, the file ends before")
    if int.from_bytes(crc, "little") != tfrecord.masked_crc32c(data):
        raise ValueError(f"{path} is corrupted: the record at byte 0 fails "
                         "its checksum")
    return data


def _feature_lengths(example):
    """`{name: (kind, length)}` of a `tf.train.Example`."""
    result = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        result[name] = (kind, len(getattr(feature, kind).value) if kind else 0)
    return result


def _check_example(path, features, max_seq_length, max_predictions_per_seq,
                   dynamic_masking):
    """Raises ValueError (one line) where `features` disagree with the flags."""
    lengths = schema.feature_lengths(max_seq_length, max_predictions_per_seq)
    names = _UNMASKED_FEATURES if dynamic_masking else schema.FEATURE_NAMES
    missing = [name for name in names if name not in features]
    if missing:
        hint = ("" if dynamic_masking else
                " (records without masks need dynamic masking)")
        raise ValueError(f"records in {path} have no {', '.join(missing)}"
                         f"{hint}; they are not ALBERT pretraining records")
    for name in names:
        kind, length = features[name]
        expected_kind = ("float_list" if name in schema.FLOAT_FEATURES
                         else "int64_list")
        if kind != expected_kind:
            raise ValueError(f"records in {path} hold {name} as {kind}, "
                             f"expected {expected_kind}")
        if length == lengths[name]:
            continue
        if name in _SEQUENCE_FEATURES:
            flag, value = "max_seq_length", max_seq_length
        elif name in _PREDICTION_FEATURES:
            flag, value = "max_predictions_per_seq", max_predictions_per_seq
        else:
            raise ValueError(f"records in {path} have {length} values of "
                             f"{name}, expected {lengths[name]}")
        raise ValueError(f"records in {path} have {flag}={length}, flags say "
                         f"{value}")


def _check_ids(path, example, vocab_size):
    """Raises ValueError (one line) if the record holds ids past the
    vocabulary (records made with another SentencePiece model)."""
    for name in ("input_ids", "masked_lm_ids"):
        feature = example.features.feature.get(name)
        values = list(feature.int64_list.value) if feature else []
        if values and max(values) >= vocab_size:
            raise ValueError(
                f"records in {path} hold token id {max(values)} in {name}, "
                f"but the model's vocab_size is {vocab_size}: the records were "
                "made with another vocabulary (or the config is wrong)")


def check_records(files, max_seq_length, max_predictions_per_seq,
                  dynamic_masking=False, vocab_size=None):
    """Compares the first record of each file with the shapes the run expects.

    Args:
        files: TFRecord files (see `tfrecord_files`).
        max_seq_length: L the run was given.
        max_predictions_per_seq: P the run was given (not checked with
            dynamic masking, which makes the masked features itself).
        dynamic_masking: whether records are masked while reading (only the
            unmasked features are then needed).
        vocab_size: the model's vocabulary size: ids past it are refused.

    Raises:
        ValueError: one line naming the first file whose records disagree
            (e.g. "records in FILE have max_predictions_per_seq=10, flags say
            20"), whose first record is corrupted or truncated, or that is
            not a pretraining record; or every file is empty.
    """
    empty = 0
    for path in files:
        data = _first_record(path)
        if data is None:
            empty += 1
            continue
        try:
            example = tf.train.Example.FromString(data)
        except Exception:  # protobuf's DecodeError, by any of its names.
            raise ValueError(f"records in {path} are not tf.train.Example "
                             "protos") from None
        _check_example(path, _feature_lengths(example), max_seq_length,
                       max_predictions_per_seq, dynamic_masking)
        if vocab_size:
            _check_ids(path, example, vocab_size)
    if files and empty == len(files):
        raise ValueError("No records: every input file is empty: "
                         + ", ".join(files))
    if empty:
        logging.warning("%d of %d input files hold no records.", empty,
                        len(files))


def file_sizes(files):
    """The size of each file in bytes (int64), what `read_file` needs."""
    return tf.constant([tf.io.gfile.stat(path).length for path in files],
                       tf.int64)


def read_file(path, size, skip_corrupt_records=False):
    """The records of one TFRecord file, naming it when one is bad.

    Args:
        path: a string tensor, the file.
        size: an int64 tensor, the file's size in bytes (`file_sizes`).
        skip_corrupt_records: on a corrupted or truncated record, skip the
            rest of the file and log it instead of failing.

    Returns:
        A dataset of the serialized records, in file order (what
        `tf.data.TFRecordDataset(path)` yields). Unless `skip_corrupt_records`,
        iterating it raises `tf.errors.InvalidArgumentError` with a message
        naming the file and the offset of the bad record ("FILE: no readable
        record at byte 157831 of 200000 ...").
    """
    # Batches make the byte count cheap (one step per _BATCH records);
    # `batch` never yields an empty one, so an empty batch marks the end.
    batches = tf.data.TFRecordDataset(path).ignore_errors().batch(_BATCH)
    end = tf.data.Dataset.from_tensors(tf.constant([], tf.string))

    def count_bytes(offset, batch):
        at_end = tf.equal(tf.size(batch), 0)
        check = _check_end(path, size, offset, at_end, skip_corrupt_records)
        with tf.control_dependencies([check]):
            lengths = tf.cast(tf.strings.length(batch), tf.int64)
            offset += tf.reduce_sum(lengths + _FRAME_OVERHEAD)
            return offset, tf.identity(batch)

    return batches.concatenate(end).scan(
        tf.constant(0, tf.int64), count_bytes).unbatch()


def _check_end(path, size, offset, at_end, skip_corrupt_records):
    """An op that fails (or logs) when a file's records ended before its end."""
    bad = at_end & tf.not_equal(offset, size)
    message = tf.strings.join([
        path, ": no readable record at byte ", tf.strings.as_string(offset),
        " of ", tf.strings.as_string(size)])
    if not skip_corrupt_records:
        return tf.debugging.Assert(tf.logical_not(bad), [tf.strings.join([
            message, " (corrupted, truncated or unreadable; "
            "skip_corrupt_records skips the rest of such files)"])])

    def log_skip():
        # tf.print, not absl: this runs inside the tf.data graph.
        # One joined string: tf.print would quote a string among others.
        printed = tf.print(tf.strings.join([
            "WARNING: skip_corrupt_records: ", message, " - skipped the rest "
            "of the file, ", tf.strings.as_string(size - offset), " bytes."]),
            output_stream=sys.stderr)
        with tf.control_dependencies([printed]):
            return tf.constant(True)

    return tf.cond(bad, log_skip, lambda: tf.constant(True))
