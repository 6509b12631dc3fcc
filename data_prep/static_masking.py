"""The static builder's masker: `data_prep.ngram_masking`'s rules in NumPy.

`mask_records` masks a batch of laid-out, unmasked records (the features
`instances.assemble` returns, or records read back without masks) at once:
the word and n-gram bookkeeping is vectorised over the batch, and only the
greedy span choice runs as a short Python loop per record. The dynamic
masker of `albert_tf.training.input_pipeline` implements the same rules in
TensorFlow, one record at a time; tests/test_ngram_masking.py checks that the two
agree.

The random draws come from one `numpy.random.Generator` in a fixed order
(n-gram sizes, visiting order, replacement draws, random ids), which the
builder's byte-identical output depends on.
"""

import numpy as np

from data_prep import ngram_masking
from data_prep import vocab


def _candidate_words(maskable, word_start, options, rng):
    """The words of a batch, each with its n-gram size drawn.

    Shape legend: W words of the batch, row-major.

    Returns:
        `(word_row, word_col, word_end, ngram, order)`: `[W]` arrays; a word
        covers columns `[word_col, word_end)` of its row; an n-gram starting
        at word w ends at `word_end[w + n - 1]`; `order` visits the words row
        by row, in a random order within each row.
    """
    seq = maskable.shape[1]
    word_row, word_col = np.nonzero(word_start)  # [W]
    num_words = word_row.size
    # A run of maskable tokens ends at the next never-masked token or at the
    # row's end: words and n-grams stay inside their run.
    barriers = np.append(np.flatnonzero(~maskable), maskable.size)
    row_base = word_row * seq
    next_barrier = barriers[np.searchsorted(barriers, row_base + word_col)]
    run_end = np.minimum(next_barrier - row_base, seq)  # [W]
    same_next = np.zeros(num_words, bool)  # the next word is in the same run
    same_next[:-1] = ((word_row[1:] == word_row[:-1])
                      & (run_end[1:] == run_end[:-1]))
    next_col = np.empty_like(word_col)
    next_col[:-1] = word_col[1:]
    word_end = np.where(same_next, next_col, run_end)
    group_end = np.flatnonzero(~same_next) + 1  # exclusive end of each run
    new_group = np.ones(num_words, bool)
    new_group[1:] = ~same_next[:-1]
    words_left = group_end[np.cumsum(new_group) - 1] - np.arange(num_words)
    available = np.minimum(words_left, options.ngram)
    cdf = ngram_masking.ngram_cdf(options.ngram,
                                  options.favor_shorter_ngram)[available - 1]
    draw = rng.random(num_words)
    ngram = np.ones(num_words, np.int64)
    for column in range(options.ngram - 1):
        ngram += draw >= cdf[:, column]
    # A random visiting order within each row: sort by row + [0, 0.5).
    order = np.argsort(word_row + 0.5 * rng.random(num_words))
    return word_row, word_col, word_end, ngram, order


def _choose_spans(word_col, word_end, ngram, order, row_offsets, budget,
                  max_ngram):
    """The greedy span choice of `masking`, sequential per row.

    Returns:
        `(span_row, span_start, span_end, ngram_counts)`: lists of the chosen
        spans (token columns `[start, end)`) and the count of each final n.
    """
    starts_l, ends_l = word_col.tolist(), word_end.tolist()
    ngram_l, order_l = ngram.tolist(), order.tolist()
    offsets_l, budget_l = row_offsets.tolist(), budget.tolist()
    span_row, span_start, span_end = [], [], []
    ngram_counts = [0] * (max_ngram + 1)
    ones = [b"\x01" * n for n in range(max_ngram + 1)]
    for row in range(len(budget_l)):
        low, high = offsets_l[row], offsets_l[row + 1]
        limit = budget_l[row]
        chosen = 0
        covered = bytearray(high - low)
        for word in order_l[low:high]:
            if chosen >= limit:
                break
            n = ngram_l[word]
            start = starts_l[word]
            while n and chosen + ends_l[word + n - 1] - start > limit:
                n -= 1
            if not n:
                continue
            local = word - low
            if covered.find(1, local, local + n) >= 0:
                continue
            covered[local:local + n] = ones[n]
            end = ends_l[word + n - 1]
            span_row.append(row)
            span_start.append(start)
            span_end.append(end)
            chosen += end - start
            ngram_counts[n] += 1
    return span_row, span_start, span_end, ngram_counts


def _masked_positions(span_row, span_start, span_end, count):
    """Spans -> masked tokens `[M]`, sorted by (row, position).

    Returns:
        `(masked_row, masked_pos, rank)`: rank is the token's slot among its
        row's predictions.
    """
    span_start = np.asarray(span_start, np.int64)
    span_len = np.asarray(span_end, np.int64) - span_start
    total = int(span_len.sum())
    first = np.zeros(span_len.size, np.int64)
    np.cumsum(span_len[:-1], out=first[1:])
    masked_row = np.repeat(np.asarray(span_row, np.int64), span_len)
    masked_pos = np.repeat(span_start - first, span_len) + np.arange(total)
    by_position = np.lexsort((masked_pos, masked_row))
    masked_row, masked_pos = masked_row[by_position], masked_pos[by_position]
    per_row = np.bincount(masked_row, minlength=count)
    row_first = np.zeros(count, np.int64)
    np.cumsum(per_row[:-1], out=row_first[1:])
    return masked_row, masked_pos, np.arange(total) - row_first[masked_row]


def mask_records(features, options, vocab_size, rng):
    """Masks unmasked records with the rules of `data_prep.ngram_masking`.

    Shape legend: N records, L their length, P = max_predictions_per_seq.

    Args:
        features: unmasked records (`assemble`): `input_ids`, `input_mask`,
            `token_boundary` `[N, L]` and any other features, passed on.
        options: a `ngram_masking.MaskingOptions`.
        vocab_size: V; random replacements are drawn from `[0, V)`.
        rng: a `numpy.random.Generator`.

    Returns:
        `(features, stats)`: features adds the masked `input_ids` and
        `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` `[N, P]`;
        stats is a dict with `tokens` and `maskable_tokens`
        (`token_counts`), `masked_tokens` and `ngram_counts` (list, index n).
    """
    ids = features["input_ids"].copy()
    count, max_pred = ids.shape[0], options.max_predictions_per_seq
    in_sequence = features["input_mask"] != 0
    maskable = ngram_masking.maskable_tokens(ids, in_sequence)
    word_start = ngram_masking.word_starts(
        maskable, features["token_boundary"] != 0, options.do_whole_word_mask)
    word_row, word_col, word_end, ngram, order = _candidate_words(
        maskable, word_start, options, rng)
    seq_len = in_sequence.sum(axis=1)
    budget = ngram_masking.prediction_budget(seq_len, options.masked_lm_prob,
                                             max_pred)
    span_row, span_start, span_end, ngram_counts = _choose_spans(
        word_col, word_end, ngram, order,
        np.searchsorted(word_row, np.arange(count + 1)), budget, options.ngram)
    masked_row, masked_pos, rank = _masked_positions(
        span_row, span_start, span_end, count)

    total = masked_row.size
    original = ids[masked_row, masked_pos]
    draw = rng.random(total)
    random_ids = rng.integers(0, vocab_size, total)
    mask_below, keep_below = ngram_masking.replacement_thresholds()
    ids[masked_row, masked_pos] = np.where(
        draw < mask_below, ngram_masking.MASK_ID,
        np.where(draw < keep_below, original, random_ids))
    out = dict(features, input_ids=ids)
    out["masked_lm_positions"] = np.zeros((count, max_pred), np.int64)
    out["masked_lm_ids"] = np.zeros((count, max_pred), np.int64)
    out["masked_lm_weights"] = np.zeros((count, max_pred), np.float32)
    out["masked_lm_positions"][masked_row, rank] = masked_pos
    out["masked_lm_ids"][masked_row, rank] = original
    out["masked_lm_weights"][masked_row, rank] = 1.0
    stats = dict(token_counts(features), masked_tokens=total,
                 ngram_counts=ngram_counts)
    return out, stats


def token_counts(features):
    """The `tokens` and `maskable_tokens` of laid-out records.

    Args:
        features: records as `instances.assemble` lays them out (masked or
            not: `[MASK]` and random ids count as text).

    Returns:
        A dict: `tokens` (all tokens but padding) and `maskable_tokens` (the
        text's tokens: all but `[CLS]`, `[SEP]` and padding, `<unk>`
        included, so the masked fraction compares with the official figure).
    """
    in_sequence = features["input_mask"] != 0
    return {
        "tokens": int(in_sequence.sum()),
        "maskable_tokens": int((in_sequence & ~np.isin(
            features["input_ids"], (vocab.CLS_ID, vocab.SEP_ID))).sum()),
    }
