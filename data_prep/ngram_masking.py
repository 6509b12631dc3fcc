"""The masked-LM masking rules, as data and small pure functions.

The static record builder (`data_prep.static_masking`) and dynamic masking
in tf.data (`albert_tf.training.dynamic_masking`) both take every rule and
number from here, so they cannot drift apart; this module needs no
TensorFlow. The rules, and where they differ from the official script:
docs/pretraining_data.md#masking.
"""

import dataclasses
import functools

import numpy as np

from data_prep import vocab

# Replacement of a chosen token.
MASK_TOKEN_PROB = 0.8
KEEP_TOKEN_PROB = 0.1
RANDOM_TOKEN_PROB = 0.1

MASK_ID = vocab.MASK_ID
# Every special piece of the vocabulary (see `data_prep.vocab`).
NEVER_MASKED_IDS = tuple(sorted(vocab.SPECIAL_PIECES.values()))

_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _PUNCTUATION


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
    """What is masked (official flag names and defaults).

    Attributes:
        masked_lm_prob: fraction of a sequence's tokens to mask.
        max_predictions_per_seq: P, the most masked tokens per sequence.
        ngram: longest span, in words.
        favor_shorter_ngram: p(n) ∝ 1/n; else p(n) ∝ 1/(ngram + 1 - n).
        do_whole_word_mask: spans are whole words; else single tokens.
    """

    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True

    def validate(self):
        """Checks the options.

        Raises:
            ValueError: an unusable value (the message holds it).
        """
        checks = [
            (self.max_predictions_per_seq >= 0,
             "max_predictions_per_seq must be >= 0",
             self.max_predictions_per_seq),
            (0.0 <= self.masked_lm_prob <= 1.0,
             "masked_lm_prob must be in [0, 1]", self.masked_lm_prob),
            (self.ngram >= 1, "ngram must be >= 1", self.ngram),
        ]
        for ok, message, value in checks:
            if not ok:
                raise ValueError("%s. Received: %r" % (message, value))


def replacement_thresholds():
    """Where a uniform draw in [0, 1) switches replacement.

    Returns:
        `(mask_below, keep_below)`: a draw below `mask_below` gives `[MASK]`,
        below `keep_below` the original token, else a random id.
    """
    # 1 - 0.1 is exactly the double 0.9, where 0.8 + 0.1 is not.
    return MASK_TOKEN_PROB, 1.0 - RANDOM_TOKEN_PROB


def _ngram_weights(ngram, favor_shorter_ngram):
    weights = 1.0 / np.arange(1, ngram + 1)
    return weights if favor_shorter_ngram else weights[::-1]


def ngram_probabilities(ngram, favor_shorter_ngram):
    """p(n) for n in `1..ngram`.

    Args:
        ngram: the longest span, in words.
        favor_shorter_ngram: p(n) ∝ 1/n; else the same weights reversed.

    Returns:
        A float64 array `[ngram]` summing to 1.
    """
    weights = _ngram_weights(ngram, favor_shorter_ngram)
    return weights / weights.sum()


@functools.lru_cache(maxsize=None)
def ngram_cdf(ngram, favor_shorter_ngram):
    """Cumulative n-gram probabilities truncated to each available length.

    With `a` words available (at most `ngram`), n is drawn from p(n)
    renormalised over `1..a`, as `n = 1 + sum(u >= table[a - 1])` for a
    uniform u in [0, 1).

    Args:
        ngram: the longest span, in words.
        favor_shorter_ngram: see `ngram_probabilities`.

    Returns:
        A read-only float64 array `[ngram, max(ngram - 1, 1)]`: row `a - 1`
        holds the CDF at `n = 1..a-1`, padded with 2.0 (never reached).
    """
    weights = _ngram_weights(ngram, favor_shorter_ngram)
    table = np.full((ngram, max(ngram - 1, 1)), 2.0)
    for available in range(1, ngram + 1):
        q = weights[:available] / weights[:available].sum()
        table[available - 1, :available - 1] = np.cumsum(q)[:-1]
    table.flags.writeable = False  # shared by every caller (cached)
    return table


def prediction_budget(num_tokens, masked_lm_prob, max_predictions_per_seq):
    """Tokens to mask in sequences of `num_tokens` tokens.

    Args:
        num_tokens: int or int array; every token of the sequence, `[CLS]`
            and `[SEP]` included.
        masked_lm_prob: fraction to mask; 0 masks nothing.
        max_predictions_per_seq: P, the cap.

    Returns:
        An int64 array shaped like `num_tokens`: `min(P, max(1,
        round(num_tokens * masked_lm_prob)))`, rounding half to even in
        float64 (as Python's `round`), or 0 when `masked_lm_prob` is 0.
    """
    num_tokens = np.asarray(num_tokens)
    if masked_lm_prob <= 0:
        return np.zeros(num_tokens.shape, np.int64)
    budget = np.minimum(max_predictions_per_seq,
                        np.maximum(1, np.rint(num_tokens * masked_lm_prob)))
    return budget.astype(np.int64)


def is_start_piece(piece):
    """Whether a SentencePiece piece starts a word (the official rule).

    A piece starts a word when it begins with "▁" or "<", is punctuation, or
    holds a character other than a-z (either case) and punctuation.

    Args:
        piece: the piece's text.

    Returns:
        A bool.
    """
    return (piece.startswith("\u2581") or piece.startswith("<")
            or piece in _PUNCTUATION
            or not all(c.lower() in _WORD_CHARS for c in piece))


def start_piece_table(sp_model):
    """`is_start_piece` of every id of a SentencePiece model.

    Args:
        sp_model: a `sentencepiece.SentencePieceProcessor`.

    Returns:
        A bool array `[V]`.
    """
    return np.array([is_start_piece(sp_model.id_to_piece(i))
                     for i in range(sp_model.get_piece_size())], bool)


def maskable_tokens(ids, in_sequence):
    """Which tokens may be masked.

    Args:
        ids: int array `[..., L]` of token ids.
        in_sequence: bool array like `ids`, False on padding.

    Returns:
        A bool array like `ids`: in the sequence and not in
        `NEVER_MASKED_IDS`.
    """
    return in_sequence & ~np.isin(ids, NEVER_MASKED_IDS)


def word_starts(maskable, start_piece, do_whole_word_mask):
    """Which tokens start a word, for masking.

    Args:
        maskable: bool array `[..., L]` from `maskable_tokens`.
        start_piece: bool array like `maskable`: the token's piece starts a
            word (`start_piece_table[ids]`, or a record's `token_boundary`).
        do_whole_word_mask: False makes every maskable token a word.

    Returns:
        A bool array like `maskable`.
    """
    if not do_whole_word_mask:
        return maskable.copy()
    after_barrier = np.ones_like(maskable)
    after_barrier[..., 1:] = ~maskable[..., :-1]
    return maskable & (start_piece | after_barrier)
