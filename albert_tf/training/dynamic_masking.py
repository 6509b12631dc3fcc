"""n-gram masking in TensorFlow: masks records afresh every epoch, in tf.data.

Records holding only `input_ids`, `segment_ids`, `token_boundary` and
`next_sentence_labels` (padding is id 0) are masked inside the input
pipeline (`input_pipeline.pretraining_dataset`) by the rules of
`data_prep.ngram_masking`, which the static record builder
(`data_prep.static_masking`) follows too: whole words, n-grams of
1..`max_ngram` words with p(n) ∝ 1/n, no overlaps, never across `[SEP]`,
`min(P, max(1, round(len * masked_lm_prob)))` tokens, each 80% `[MASK]`, 10%
kept, 10% a random id. The masks come from stateless random ops keyed per
element, so they are reproducible and differ between epochs.

Shape legend: L = max_seq_length, P = max_predictions_per_seq; word-indexed
vectors are `[L]` too (a record has at most L words), valid below
`num_words`.
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf

from data_prep import ngram_masking

_MASKING_DEFAULTS = ngram_masking.MaskingOptions()


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
