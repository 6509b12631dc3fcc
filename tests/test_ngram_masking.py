"""Tests for data_prep.ngram_masking, and that both maskers follow it.

The static builder's masker (`data_prep.static_masking`, NumPy) and the
dynamic tf.data masker (`dynamic_masking.mask_example`, TensorFlow) get the
same unmasked records, laid out from real SentencePiece pieces, and mask each
of them with many seeds. Exact rules are checked on every record (budget,
whole words, never-masked ids); random ones are checked as statistics that
must agree between the two maskers, and with the specification where it
gives a number, within a few standard errors of the sample. Every draw is
seeded, so the outcome is fixed; the tolerances keep it so when a legitimate
change reorders the draws.
"""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import dynamic_masking
from data_prep import instances
from data_prep import ngram_masking
from data_prep import sentence_order
from data_prep import static_masking
from data_prep import text as text_lib
from data_prep import vocab

L, P = 128, 20
COPIES = 6  # records per length
SEEDS = 8  # maskings per record and masker
# A difference this many standard errors wide fails (about 1 in 100,000 by
# chance for one statistic).
Z_LIMIT = 4.5


# --- The specification on its own ---


def test_is_start_piece_official_rule():
    starts = ["\u2581the", "<unk>", ",", "(", "9", "'s", "\u00e9t\u00e9", "\u6771"]
    continuations = ["ing", "s.", "Ing", "a-b"]
    assert all(ngram_masking.is_start_piece(p) for p in starts)
    assert not any(ngram_masking.is_start_piece(p) for p in continuations)


def test_replacement_probabilities():
    probs = (ngram_masking.MASK_TOKEN_PROB, ngram_masking.KEEP_TOKEN_PROB,
             ngram_masking.RANDOM_TOKEN_PROB)
    assert probs == (0.8, 0.1, 0.1)
    assert ngram_masking.replacement_thresholds() == (0.8, 0.9)


def test_ngram_distribution():
    np.testing.assert_allclose(ngram_masking.ngram_probabilities(3, True),
                               [0.545, 0.273, 0.182], atol=5e-4)
    np.testing.assert_allclose(ngram_masking.ngram_probabilities(3, False),
                               [0.182, 0.273, 0.545], atol=5e-4)
    # Drawing through the CDF table gives p(n) renormalised over 1..a.
    u = (np.arange(100_000) + 0.5) / 100_000
    for favor in (True, False):
        table = ngram_masking.ngram_cdf(4, favor)
        p = ngram_masking.ngram_probabilities(4, favor)
        for available in range(1, 5):
            n = 1 + (u[:, None] >= table[available - 1]).sum(axis=1)
            freq = np.bincount(n, minlength=5)[1:available + 1] / u.size
            np.testing.assert_allclose(
                freq, p[:available] / p[:available].sum(), atol=1e-4)


def test_prediction_budget_is_the_official_formula():
    lengths = np.arange(0, 600)
    for prob in (0.15, 0.1, 0.2, 0.5):
        for cap in (0, 1, 20, 80):
            expected = [min(cap, max(1, round(n * prob))) for n in lengths]
            np.testing.assert_array_equal(
                ngram_masking.prediction_budget(lengths, prob, cap), expected)
    # Half-way cases round to even: 30 * 0.15 = 4.5 -> 4, 50 * 0.15 -> 8.
    assert ngram_masking.prediction_budget(30, 0.15, 20) == 4
    assert ngram_masking.prediction_budget(50, 0.15, 20) == 8
    assert not ngram_masking.prediction_budget(lengths, 0.0, 20).any()


def test_options_validation():
    ngram_masking.MaskingOptions().validate()
    for bad, match in ((dict(masked_lm_prob=1.5), "masked_lm_prob"),
                       (dict(max_predictions_per_seq=-1), "max_predictions"),
                       (dict(ngram=0), "ngram")):
        with pytest.raises(ValueError, match=match + ".*Received"):
            ngram_masking.MaskingOptions(**bad).validate()
    # InstanceOptions takes its masking defaults from the specification.
    assert instances.InstanceOptions().masking == ngram_masking.MaskingOptions()


def test_word_starts_break_at_never_masked_tokens():
    ids = np.array([[2, 50, 51, 3, 52, 1, 53, 3, 0]])
    start_piece = np.array([[1, 1, 0, 1, 0, 1, 0, 1, 0]], bool)
    maskable = ngram_masking.maskable_tokens(ids, ids != 0)
    assert maskable.tolist() == [[False, True, True, False, True, False,
                                  True, False, False]]
    assert np.flatnonzero(ngram_masking.word_starts(maskable, start_piece, True)
                          ).tolist() == [1, 4, 6]
    assert np.flatnonzero(ngram_masking.word_starts(maskable, start_piece, False)
                          ).tolist() == [1, 2, 4, 6]


def test_specification_imports_no_tensorflow():
    code = ("import sys; import data_prep.ngram_masking, data_prep.instances, "
            "data_prep.sentence_order, data_prep.static_masking; "
            "sys.exit('tensorflow' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# --- Both maskers on the same records ---


@pytest.fixture(scope="module")
def records(spm_model, corpus_dir):
    """Unmasked records `[R, L]` of real pieces, COPIES of each length.

    The text (held out from the vocabulary's training) holds words the
    vocabulary lacks, so some tokens are `<unk>`. One token in 25 is made a
    `[MASK]` id: runs of maskable tokens are then short, and how n-grams
    behave at their ends shows in the statistics. A is 1..n-4 tokens, B the
    rest, so lengths 5..L all occur.

    Returns:
        `(features, vocab_size)`.
    """
    lines = (corpus_dir / "b.txt").read_text(encoding="utf-8").splitlines()
    lines = [text_lib.preprocess_text(line) for line in lines if line]
    flat = np.concatenate(spm_model.encode(lines)).astype(np.int32)
    rng = np.random.default_rng(0)
    flat[rng.choice(flat.size, flat.size // 25, replace=False)] = vocab.MASK_ID
    rows = []
    for total in range(5, L + 1):
        for _ in range(COPIES):
            a_len = int(rng.integers(1, total - 3))
            start = int(rng.integers(0, flat.size - total))
            rows.append((start, a_len, start + a_len, total - 3 - a_len))
    a_start, a_len, b_start, b_len = np.array(rows, np.int64).T
    labels = np.zeros(len(rows), np.int8)
    pairs = sentence_order.Pairs(a_start, a_len, b_start, b_len, labels,
                                 labels)
    table = ngram_masking.start_piece_table(spm_model)
    return (instances.assemble(flat, pairs, L, table),
            spm_model.get_piece_size())


def _mask_static(records, vocab_size, options):
    outputs = [static_masking.mask_records(
        records, options, vocab_size, np.random.default_rng(seed))[0]
        for seed in range(SEEDS)]
    return {k: np.concatenate([o[k] for o in outputs]) for k in outputs[0]}


def _mask_dynamic(records, vocab_size, options):
    dynamic = dynamic_masking.DynamicMasking(
        vocab_size=vocab_size, masked_lm_prob=options.masked_lm_prob,
        max_ngram=options.ngram,
        favor_shorter_ngram=options.favor_shorter_ngram,
        do_whole_word_mask=options.do_whole_word_mask)
    unmasked = {name: np.tile(records[name], (SEEDS, 1))
                for name in ("input_ids", "segment_ids", "token_boundary",
                             "next_sentence_labels")}
    seeds = np.arange(len(unmasked["input_ids"]), dtype=np.int64)
    dataset = tf.data.Dataset.from_tensor_slices((unmasked, seeds)).map(
        lambda f, seed: dynamic_masking.mask_example(
            f, seed, options.max_predictions_per_seq, dynamic),
        num_parallel_calls=2).batch(1024)
    batches = [{k: v.numpy() for k, v in b.items()} for b in dataset]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def _check_exact_rules(original, maskable, starts, out):
    """Checks what must hold on every record; returns the masked tokens."""
    weights = out["masked_lm_weights"]
    rows, slots = np.nonzero(weights)
    positions = out["masked_lm_positions"][rows, slots]
    masked = np.zeros(original.shape, bool)
    masked[rows, positions] = True
    assert weights.sum() == masked.sum(), "a position was predicted twice"
    # Labels are the original tokens; nothing else changed.
    np.testing.assert_array_equal(out["masked_lm_ids"][rows, slots],
                                  original[rows, positions])
    np.testing.assert_array_equal(out["input_ids"][~masked], original[~masked])
    assert not (masked & ~maskable).any(), "a never-masked token was masked"
    # A word is masked entirely or not at all.
    word = np.where(maskable, np.cumsum(starts, axis=1), 0)
    word_masked = np.zeros((len(word), L + 1), bool)
    word_masked[np.nonzero(masked)[0], word[masked]] = True
    whole = word_masked[np.arange(len(word))[:, None], word] == masked
    assert whole[maskable].all(), "a word was masked in part"
    return masked


def _observe(records, out, options):
    """Checks the exact rules and gathers the statistics of one masker."""
    original = np.tile(records["input_ids"], (SEEDS, 1))
    in_sequence = np.tile(records["input_mask"], (SEEDS, 1)) != 0
    boundary = np.tile(records["token_boundary"], (SEEDS, 1)) != 0
    maskable = ngram_masking.maskable_tokens(original, in_sequence)
    starts = ngram_masking.word_starts(maskable, boundary, options.do_whole_word_mask)
    masked = _check_exact_rules(original, maskable, starts, out)

    # Maximal runs of masked tokens, in words (adjacent spans merge, in both
    # maskers alike), and whether each ends at a never-masked token.
    run_start = masked & ~np.pad(masked, ((0, 0), (1, 0)))[:, :-1]
    run_id = np.cumsum(run_start.ravel())[masked.ravel()] - 1
    run_words = np.bincount(run_id, (starts & masked).ravel()[masked.ravel()])
    run_end = masked & ~np.pad(masked, ((0, 0), (0, 1)))[:, 1:]
    # The last token of each run of maskable tokens, and never-masked tokens
    # between two maskable ones.
    last = np.zeros_like(maskable)
    last[:, :-1] = maskable[:, :-1] & ~maskable[:, 1:]
    barrier = np.zeros_like(maskable)
    barrier[:, 1:-1] = ~maskable[:, 1:-1] & maskable[:, :-2] & maskable[:, 2:]
    barrier_row, barrier_col = np.nonzero(barrier)

    new = out["input_ids"][masked]
    before = original[masked]
    return {
        "count": masked.sum(axis=1),
        "budget": ngram_masking.prediction_budget(
            in_sequence.sum(axis=1), options.masked_lm_prob,
            options.max_predictions_per_seq),
        "run_words": run_words.astype(np.int64),
        "run_row": np.nonzero(run_start)[0],
        "run_at_barrier": ~maskable[:, 1:][run_end[:, :-1]],
        "last_masked": masked[last],
        "last_row": np.nonzero(last)[0],
        "straddled": (masked[barrier_row, barrier_col - 1]
                      & masked[barrier_row, barrier_col + 1]),
        "barrier_row": barrier_row,
        "as_mask": new == ngram_masking.MASK_ID,
        "as_kept": new == before,
        "random_ids": new[(new != ngram_masking.MASK_ID) & (new != before)],
    }


def _z(hits_a, total_a, hits_b, total_b):
    """Two-proportion z statistic of independent draws."""
    pooled = (hits_a + hits_b) / (total_a + total_b)
    se = np.sqrt(pooled * (1 - pooled) * (1 / total_a + 1 / total_b))
    return abs(hits_a / total_a - hits_b / total_b) / max(se, 1e-12)


def _clustered_z(hits_a, rows_a, hits_b, rows_b):
    """Two-proportion z statistic of items grouped in records.

    Items of one record are not independent (spans share the budget and
    merge into runs), so the variance is estimated from per-record totals
    (the ratio estimator's cluster-robust variance).

    Args:
        hits_a, hits_b: bool arrays, one entry per item.
        rows_a, rows_b: the record of each item.

    Returns:
        |p_a - p_b| in standard errors.
    """
    estimates = []
    for hits, rows in ((hits_a, rows_a), (hits_b, rows_b)):
        x = np.bincount(rows, hits.astype(np.float64))
        n = np.bincount(rows).astype(np.float64)
        p = x.sum() / n.sum()
        estimates.append((p, ((x - p * n) ** 2).sum() / n.sum() ** 2))
    (p_a, var_a), (p_b, var_b) = estimates
    return abs(p_a - p_b) / max(np.sqrt(var_a + var_b), 1e-12)


def _z_expected(hits, total, p):
    """z statistic of a binomial count against its expected probability."""
    return abs(hits / total - p) / np.sqrt(p * (1 - p) / total)


OPTIONS = {
    "official": ngram_masking.MaskingOptions(max_predictions_per_seq=P),
    "longer_ngrams": ngram_masking.MaskingOptions(
        max_predictions_per_seq=P, masked_lm_prob=0.25, ngram=4,
        favor_shorter_ngram=False),
    # A cap above round(95 * 0.3), where float32 rounding would differ.
    "tokens": ngram_masking.MaskingOptions(max_predictions_per_seq=30,
                                           masked_lm_prob=0.3,
                                           do_whole_word_mask=False),
}


@pytest.fixture(scope="module", params=sorted(OPTIONS))
def observed(request, records):
    """`(options, vocab_size, {"static": stats, "dynamic": stats})`."""
    options = OPTIONS[request.param]
    features, vocab_size = records
    outputs = {"static": _mask_static(features, vocab_size, options),
               "dynamic": _mask_dynamic(features, vocab_size, options)}
    return options, vocab_size, {
        name: _observe(features, out, options) for name, out in outputs.items()}


def test_records_hold_every_never_masked_id(records):
    ids = records[0]["input_ids"]
    for special in ngram_masking.NEVER_MASKED_IDS:
        assert (ids == special).sum() >= 10, special


def test_budget(observed):
    options, _, by_masker = observed
    filled = {}
    for name, obs in by_masker.items():
        assert (obs["count"] <= obs["budget"]).all(), name
        if not options.do_whole_word_mask:
            # Every token is a word of its own: the budget is always met.
            np.testing.assert_array_equal(obs["count"], obs["budget"],
                                          err_msg=name)
        # With whole words the greedy fill may stop short (no word left
        # fits), as rarely in both.
        filled[name] = (obs["count"] == obs["budget"]).sum()
        assert filled[name] > 0.9 * obs["count"].size, name
    size = by_masker["static"]["count"].size
    assert _z(filled["static"], size, filled["dynamic"], size) < Z_LIMIT


def test_replacements(observed):
    _, vocab_size, by_masker = observed
    counts = {}
    # A random id equals [MASK], or the original, 1 time in V.
    chance = ngram_masking.RANDOM_TOKEN_PROB / vocab_size
    for name, obs in by_masker.items():
        total = obs["as_mask"].size
        counts[name] = obs["as_mask"].sum(), obs["as_kept"].sum(), total
        assert _z_expected(counts[name][0], total,
                           ngram_masking.MASK_TOKEN_PROB + chance) < Z_LIMIT, name
        assert _z_expected(counts[name][1], total,
                           ngram_masking.KEEP_TOKEN_PROB + chance) < Z_LIMIT, name
        # Random ids are drawn uniformly from [0, V).
        random_ids = obs["random_ids"]
        assert random_ids.min() >= 0 and random_ids.max() < vocab_size, name
        se = vocab_size / np.sqrt(12 * random_ids.size)
        mean_error = abs(random_ids.mean() - (vocab_size - 1) / 2)
        assert mean_error < Z_LIMIT * se, name
    (mask_a, kept_a, n_a), (mask_b, kept_b, n_b) = counts.values()
    assert _z(mask_a, n_a, mask_b, n_b) < Z_LIMIT
    assert _z(kept_a, n_a, kept_b, n_b) < Z_LIMIT


def test_ngram_lengths(observed):
    options, _, by_masker = observed
    top = 2 * options.ngram  # the last bin holds longer runs too
    # All runs of masked words, and those ending at a never-masked token,
    # where the n-gram draw is truncated to the words left.
    for subset in ("all", "at_barrier"):
        runs = []
        for obs in by_masker.values():
            keep = (obs["run_at_barrier"] if subset == "at_barrier"
                    else slice(None))
            runs.append((np.minimum(obs["run_words"][keep], top),
                         obs["run_row"][keep]))
        (words_a, rows_a), (words_b, rows_b) = runs
        for n in range(1, top + 1):
            z = _clustered_z(words_a == n, rows_a, words_b == n, rows_b)
            assert z < Z_LIMIT, (subset, n, np.bincount(words_a),
                                 np.bincount(words_b))


def test_run_ends(observed):
    _, _, by_masker = observed
    a, b = by_masker.values()
    # The last word before a never-masked token: how often spans reach it
    # depends on the truncated n-gram draw.
    assert _clustered_z(a["last_masked"], a["last_row"], b["last_masked"],
                        b["last_row"]) < Z_LIMIT
    # Both neighbours of a [SEP] or <unk> masked: two spans, never one, so
    # no more often than chance.
    assert _clustered_z(a["straddled"], a["barrier_row"], b["straddled"],
                        b["barrier_row"]) < Z_LIMIT
