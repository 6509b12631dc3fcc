"""The pretraining input pipeline over the official TFRecords.

Order (the official one): file list -> shuffle files -> parallel interleave
-> shuffle records -> parse -> batch (`drop_remainder=True`) -> int32. Records
are batched as serialized strings and parsed a batch at a time: the tensors
are the same as parsing one record at a time, with less per-element work.
Every output has a static shape, as TPUs require.

The records are written in one global random order by `data_prep` (every
shard a random sample of the corpus); training reads `cycle_length` shards at
a time, one record from each in turn, then a shuffle buffer of a few batches
(`default_shuffle_buffer`) mixes the shards and the epochs' boundaries.

The data order is a pure function of `seed`, so a run resumed at step `s`
(`skip_batches=s`) sees the batches an uninterrupted run would have seen.

Optional dynamic masking: records holding only `input_ids`, `segment_ids`,
`token_boundary` and `next_sentence_labels` (padding is id 0) are masked
afresh every epoch, inside tf.data, by `dynamic_masking.mask_example`.

Output features (a flat dict): the model inputs `input_word_ids`,
`input_mask`, `input_type_ids`, `masked_lm_positions` (int32 `[B, L]` or
`[B, P]`), and the labels `masked_lm_ids` (int32 `[B, P]`),
`masked_lm_weights` (float32 `[B, P]`), `next_sentence_labels` (int32 `[B]`).
"""

import functools

import tensorflow as tf

from albert_tf.training import record_checks as record_checks_lib
from albert_tf.training.dynamic_masking import mask_example
from data_prep import schema
from foundation import safe_io

# Record feature -> model input name.
_RENAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}
_UNMASKED_FEATURES = ("input_ids", "segment_ids", "token_boundary",
                      "next_sentence_labels")
# The record shuffle's default buffer: `SHUFFLE_BATCHES` batches, at least
# `MIN_SHUFFLE_BUFFER` records. The builder writes one global random order
# and every shard is a random sample of the corpus, so the buffer only mixes
# the interleaved shards and the epochs' boundaries; it need not cover the
# corpus.
SHUFFLE_BATCHES = 4
MIN_SHUFFLE_BUFFER = 100


def default_shuffle_buffer(batch_size):
    """The record shuffle's buffer for a pipeline's batch of `batch_size`."""
    return max(MIN_SHUFFLE_BUFFER, SHUFFLE_BATCHES * batch_size)


def expand_file_patterns(input_file, flag="--input_file"):
    """Files named by a comma-separated list of paths or globs (gs:// too).

    Args:
        input_file: a string `"a.tfrecord,dir/*.tfrecord,gs://b/c-*"` or a
            list of such strings.
        flag: the flag they came from, as the user typed it (for errors).

    Returns:
        The matching TFRecord files: patterns in the given order, each one's
        matches sorted. Matches that are not TFRecords (such as the data
        builder's `*.stats.json`) are skipped and named in the log.

    Raises:
        ValueError: when nothing is given, a pattern matches no file, a
            match is an unfinished file of a build that did not complete, a
            `-NNNNN-of-MMMMM` shard set misses shards or mixes two builds,
            or no match is a TFRecord file.
    """
    if isinstance(input_file, str):
        input_file = [input_file]
    patterns = [p.strip() for item in input_file for p in item.split(",")
                if p.strip()]
    if not patterns:
        raise ValueError(f"{flag}: no input files given. Received: "
                         f"{input_file!r}")
    files = []
    for pattern in patterns:
        matches = sorted(tf.io.gfile.glob(pattern))
        if not matches:
            raise ValueError(f"{flag}: no file matches {pattern!r}")
        files.extend(matches)
    safe_io.check_shard_set(files, flag)
    return record_checks_lib.tfrecord_files(files)


def to_model_features(record):
    """Renames record features to the model's names and casts ints to int32.

    Args:
        record: parsed (batched) features with the official names.

    Returns:
        The flat dict described in the module docstring.
    """
    out = {}
    for name in ("input_ids", "input_mask", "segment_ids",
                 "masked_lm_positions", "masked_lm_ids"):
        out[_RENAMES.get(name, name)] = tf.cast(record[name], tf.int32)
    out["masked_lm_weights"] = tf.cast(record["masked_lm_weights"], tf.float32)
    # [B, 1] -> [B]
    out["next_sentence_labels"] = tf.cast(
        tf.reshape(record["next_sentence_labels"], [-1]), tf.int32)
    return out


def _records(files, is_training, seed, num_pipelines, pipeline_id,
             shuffle_buffer, cycle_length, skip_corrupt_records):
    """The serialized records of this input pipeline, in training order.

    The arguments are those of `pretraining_dataset`; `num_pipelines` and
    `pipeline_id` come from its input context.
    """
    # (path, size) -> records, naming the file if one is bad.
    read_file = functools.partial(record_checks_lib.read_file,
                                  skip_corrupt_records=skip_corrupt_records)
    shard_files = num_pipelines > 1 and len(files) >= num_pipelines
    dataset = tf.data.Dataset.from_tensor_slices(
        (files, record_checks_lib.file_sizes(files)))
    if shard_files:
        dataset = dataset.shard(num_pipelines, pipeline_id)
    if is_training:
        dataset = dataset.repeat()
        dataset = dataset.shuffle(len(files), seed=seed)
        dataset = dataset.interleave(
            read_file,
            cycle_length=max(1, min(len(files), cycle_length)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        # Evaluation reads the files one after the other, in order.
        dataset = dataset.flat_map(read_file)
    if num_pipelines > 1 and not shard_files:
        dataset = dataset.shard(num_pipelines, pipeline_id)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed + 1)
    return dataset


def pretraining_dataset(input_files, batch_size, max_seq_length,
                        max_predictions_per_seq, is_training=True, seed=0,
                        input_context=None, skip_batches=0,
                        dynamic_masking=None, shuffle_buffer=None,
                        cycle_length=8, skip_corrupt_records=False,
                        vocab_size=None, flag="--input_file"):
    """A `tf.data.Dataset` of pretraining batches.

    Args:
        input_files: paths or patterns (see `expand_file_patterns`).
        batch_size: the global batch size; with `input_context`, each
            replica's share is taken.
        max_seq_length: L of the records.
        max_predictions_per_seq: P of the records.
        is_training: repeat forever, shuffle files, interleave them, shuffle
            records; else one pass over the files in order.
        seed: seed of the shuffles (and of dynamic masking, offset by its own).
        input_context: a `tf.distribute.InputContext`: files (or, with fewer
            files than pipelines, records) are sharded over input pipelines.
        skip_batches: batches to skip first (to resume at a step).
        dynamic_masking: a `DynamicMasking` for mask-less records, or None.
        shuffle_buffer: records held by the record shuffle; None:
            `default_shuffle_buffer` of this pipeline's batch.
        cycle_length: files read in parallel.
        skip_corrupt_records: skip (and log) the rest of a file from a
            corrupted or truncated record instead of failing (see
            `record_checks.read_file`); a bad first record still fails first.
        vocab_size: the model's; first records holding larger ids fail.
        flag: the flag naming `input_files`, as the user typed it.

    Returns:
        A dataset of dicts (see the module docstring), batch dimension static.

    Raises:
        ValueError: no TFRecord file matches, or a file's first record does
            not fit the run (`record_checks.check_records`).
    """
    files = expand_file_patterns(input_files, flag)
    record_checks_lib.check_records(files, max_seq_length, max_predictions_per_seq,
                                    dynamic_masking is not None, vocab_size)
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
        num_pipelines = input_context.num_input_pipelines
        pipeline_id = input_context.input_pipeline_id
    else:
        num_pipelines, pipeline_id = 1, 0
    if shuffle_buffer is None:
        shuffle_buffer = default_shuffle_buffer(batch_size)
    dataset = _records(files, is_training, seed, num_pipelines, pipeline_id,
                       shuffle_buffer, cycle_length, skip_corrupt_records)

    if dynamic_masking is None:
        spec = schema.feature_spec(max_seq_length, max_predictions_per_seq)
        dataset = dataset.skip(skip_batches * batch_size)
        dataset = dataset.batch(batch_size, drop_remainder=True)
        dataset = dataset.map(
            lambda records: to_model_features(tf.io.parse_example(records, spec)),
            num_parallel_calls=tf.data.AUTOTUNE)
    else:
        lengths = schema.feature_lengths(max_seq_length, max_predictions_per_seq)
        spec = {name: tf.io.FixedLenFeature([lengths[name]], tf.int64)
                for name in _UNMASKED_FEATURES}
        # input_mask is not read: padding is id 0 (<pad>), so it is ids != 0.
        seeds = tf.data.Dataset.random(seed=dynamic_masking.seed + seed)
        dataset = tf.data.Dataset.zip((dataset, seeds))
        dataset = dataset.skip(skip_batches * batch_size)

        def parse_and_mask(record, element_seed):
            features = tf.io.parse_single_example(record, spec)
            return mask_example(features, element_seed, max_predictions_per_seq,
                                dynamic_masking)

        dataset = dataset.map(parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE)
        dataset = dataset.batch(batch_size, drop_remainder=True)
        dataset = dataset.map(to_model_features)
    return dataset.prefetch(tf.data.AUTOTUNE)
