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
afresh every epoch, inside tf.data, with the rules the static record builder
uses, taken from `data_prep.ngram_masking`: whole words, n-grams of 1..`max_ngram`
words with p(n) ∝ 1/n, no overlaps, never across `[SEP]`, `min(P, max(1,
round(len * masked_lm_prob)))` tokens, each 80% `[MASK]`, 10% kept, 10% a
random id. The masks come from stateless random ops keyed per element, so
they are reproducible and differ between epochs.

Output features (a flat dict): the model inputs `input_word_ids`,
`input_mask`, `input_type_ids`, `masked_lm_positions` (int32 `[B, L]` or
`[B, P]`), and the labels `masked_lm_ids` (int32 `[B, P]`),
`masked_lm_weights` (float32 `[B, P]`), `next_sentence_labels` (int32 `[B]`).
"""

import collections
import dataclasses
import functools

import numpy as np
import tensorflow as tf

from data_prep import ngram_masking
from data_prep import safe_io
from data_prep import schema

from albert_tf.training import record_checks as records_lib

# Record feature -> model input name.
_RENAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}
_UNMASKED_FEATURES = ("input_ids", "segment_ids", "token_boundary",
                      "next_sentence_labels")
_MASKING_DEFAULTS = ngram_masking.MaskingOptions()
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
    return records_lib.tfrecord_files(files)


@dataclasses.dataclass
class DynamicMasking:
    """Masking of records without masks (defaults from `data_prep.ngram_masking`).

    Attributes:
        vocab_size: random replacements are drawn from `[0, vocab_size)`.
        masked_lm_prob: fraction of tokens to mask.
        max_ngram: longest n-gram, in words (the data script's `ngram`).
        favor_shorter_ngram: p(n) ∝ 1/n (else the weights reversed).
        do_whole_word_mask: spans are whole words (else single tokens).
        seed: seed of the masking randomness.
    """

    vocab_size: int
    masked_lm_prob: float = _MASKING_DEFAULTS.masked_lm_prob
    max_ngram: int = _MASKING_DEFAULTS.ngram
    favor_shorter_ngram: bool = _MASKING_DEFAULTS.favor_shorter_ngram
    do_whole_word_mask: bool = _MASKING_DEFAULTS.do_whole_word_mask
    seed: int = 12345


# Shape legend for the masking below: L = max_seq_length; word-indexed
# vectors are `[L]` too (a record has at most L words), valid below
# `num_words`.
_Words = collections.namedtuple(
    "_Words", "maskable word_id num_words tokens_before words_left")


def _find_words(ids, real, boundary, options):
    """The words of one record, by `data_prep.ngram_masking`'s rules.

    Returns:
        `_Words`: `maskable` and `word_id` (-1 off words) per token `[L]`;
        `num_words`; `tokens_before[w]`, the tokens in words < w `[L + 1]`;
        `words_left[w]`, the words from w to the end of its run of maskable
        tokens `[L]`.
    """
    length = ids.shape[0]
    never = tf.constant(ngram_masking.NEVER_MASKED_IDS, ids.dtype)
    maskable = real & tf.logical_not(
        tf.reduce_any(tf.equal(ids[:, None], never[None, :]), axis=1))  # [L]
    after_barrier = tf.concat([[True], tf.logical_not(maskable[:-1])], 0)
    if options.do_whole_word_mask:
        starts = maskable & (boundary | after_barrier)
    else:
        starts = maskable
    word_id = tf.where(maskable, tf.cumsum(tf.cast(starts, tf.int32)) - 1, -1)
    start_positions = tf.where(starts)[:, 0]  # [num_words]
    num_words = tf.shape(start_positions)[0]
    word_length = tf.math.unsorted_segment_sum(
        tf.cast(maskable, tf.int32), tf.maximum(word_id, 0), length)  # [L]
    tokens_before = tf.concat([[0], tf.cumsum(word_length)], axis=0)
    # A run of maskable tokens ends at a never-masked token; n-grams stay
    # inside their run.
    run_id = tf.maximum(
        tf.cumsum(tf.cast(maskable & after_barrier, tf.int32)) - 1, 0)  # [L]
    run_end_word = tf.cumsum(tf.math.unsorted_segment_sum(
        tf.cast(starts, tf.int32), run_id, length))  # [L] by run
    words_left = tf.gather(tf.gather(run_end_word, run_id) - word_id,
                           start_positions)  # [num_words]
    words_left = tf.pad(words_left, [[0, length - num_words]],
                        constant_values=1)
    words_left.set_shape([length])
    return _Words(maskable, word_id, num_words, tokens_before, words_left)


def _draw_ngram_sizes(words_left, options, seed):
    """n of each word `[L]`, from p(n) truncated to the words left."""
    cdf = tf.constant(ngram_masking.ngram_cdf(options.max_ngram,
                                        options.favor_shorter_ngram),
                      tf.float32)  # [max_ngram, max(max_ngram - 1, 1)]
    available = tf.minimum(words_left, options.max_ngram)
    thresholds = tf.gather(cdf, available - 1)  # [L, max_ngram - 1]
    draw = tf.random.stateless_uniform([words_left.shape[0]], seed)
    return 1 + tf.reduce_sum(
        tf.cast(draw[:, None] >= thresholds, tf.int32), axis=1)


def _choose_words(words, ngram_sizes, budget, seed):
    """The greedy span choice: which words are masked, `[L]` bool by word."""
    length = ngram_sizes.shape[0]
    num_words, tokens_before = words.num_words, words.tokens_before
    keys = tf.random.stateless_uniform([length], seed)
    keys = tf.where(tf.range(length) < num_words, keys, 2.0)
    order = tf.argsort(keys)  # [L], the real words first, in random order

    def span_size(word, n):
        return tokens_before[word + n] - tokens_before[word]

    def body(t, count, covered):
        word = order[t]
        # Shrink the n-gram until it fits, as the official loop does.
        (n,) = tf.while_loop(
            lambda n: (n > 1) & (count + span_size(word, n) > budget),
            lambda n: (n - 1,), (ngram_sizes[word],))
        size = span_size(word, n)
        span = (tf.range(length) >= word) & (tf.range(length) < word + n)
        fits = count + size <= budget
        free = tf.logical_not(tf.reduce_any(span & covered))
        take = fits & free
        covered = tf.where(take, covered | span, covered)
        count = tf.where(take, count + size, count)
        return t + 1, count, covered

    _, _, covered = tf.while_loop(
        lambda t, count, covered: (t < num_words) & (count < budget),
        body, [tf.constant(0), tf.constant(0), tf.zeros([length], tf.bool)])
    return covered


def mask_example(features, element_seed, max_predictions_per_seq, options):
    """Masks one unmasked example (int `[L]` features) in graph mode.

    The rules and numbers are `data_prep.ngram_masking`'s, as the static builder's
    (`data_prep.static_masking`); the randomness is stateless, keyed by
    `element_seed`.

    Args:
        features: dict with `input_ids`, `segment_ids`, `token_boundary`
            and optionally `input_mask` and `next_sentence_labels` (passed
            on when present).
        element_seed: int64 scalar, this element's seed.
        max_predictions_per_seq: P.
        options: a `DynamicMasking`.

    Returns:
        The features of a masked record (the official schema's names).
    """
    ids = tf.cast(features["input_ids"], tf.int32)  # [L]
    length = ids.shape[0]
    if "input_mask" in features:
        real = tf.cast(features["input_mask"], tf.int32) > 0
    else:
        real = tf.not_equal(ids, 0)
    seed = tf.cast(element_seed, tf.int64)

    def stateless_seed(stream):
        return tf.stack([seed, tf.constant(stream, tf.int64)])

    boundary = tf.cast(features["token_boundary"], tf.int32) > 0
    words = _find_words(ids, real, boundary, options)
    budget_table = tf.constant(ngram_masking.prediction_budget(
        np.arange(length + 1), options.masked_lm_prob,
        max_predictions_per_seq), tf.int32)  # [L + 1] by record length
    budget = tf.gather(budget_table, tf.reduce_sum(tf.cast(real, tf.int32)))
    ngram_sizes = _draw_ngram_sizes(words.words_left, options,
                                    stateless_seed(2))
    covered_words = _choose_words(words, ngram_sizes, budget,
                                  stateless_seed(1))
    masked = words.maskable & tf.gather(
        covered_words, tf.maximum(words.word_id, 0))  # [L]

    mask_below, keep_below = ngram_masking.replacement_thresholds()
    draw = tf.random.stateless_uniform([length], stateless_seed(3))
    random_ids = tf.random.stateless_uniform(
        [length], stateless_seed(4), maxval=options.vocab_size, dtype=tf.int32)
    replacement = tf.where(draw < mask_below, ngram_masking.MASK_ID,
                           tf.where(draw < keep_below, ids, random_ids))
    new_ids = tf.where(masked, replacement, ids)

    positions = tf.cast(tf.where(masked)[:, 0], tf.int32)  # ascending
    pad = max_predictions_per_seq - tf.shape(positions)[0]
    out = {
        "input_ids": new_ids,
        "input_mask": tf.cast(real, tf.int32),
        "segment_ids": tf.cast(features["segment_ids"], tf.int32),
        "token_boundary": tf.cast(features["token_boundary"], tf.int32),
        "masked_lm_positions": tf.pad(positions, [[0, pad]]),
        "masked_lm_ids": tf.pad(tf.gather(ids, positions), [[0, pad]]),
        "masked_lm_weights": tf.pad(tf.ones_like(positions, tf.float32),
                                    [[0, pad]]),
    }
    if "next_sentence_labels" in features:
        out["next_sentence_labels"] = tf.cast(
            features["next_sentence_labels"], tf.int32)
    for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        out[name].set_shape([max_predictions_per_seq])
    return out


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
    read_file = functools.partial(records_lib.read_file,
                                  skip_corrupt_records=skip_corrupt_records)
    shard_files = num_pipelines > 1 and len(files) >= num_pipelines
    dataset = tf.data.Dataset.from_tensor_slices(
        (files, records_lib.file_sizes(files)))
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
    records_lib.check_records(files, max_seq_length, max_predictions_per_seq,
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
