"""Pretraining instances as arrays: SOP pairs laid out, then n-gram masked.

The semantics are those of the official ALBERT `create_pretraining_data.py`;
the work is organised for speed: sentences are token ranges of one flat id
array, the pairs (`data_prep.sentence_order`) are ranges into it, and the
batch of instances is assembled and masked with numpy, with a short Python
loop per instance only for the span choice.

Masking (`assemble_and_mask`: `assemble` lays the pairs out, then
`static_masking.mask_records`): the rules of `data_prep.ngram_masking`, which the
dynamic tf.data masker shares. Whole words,
n-grams of 1..`ngram` words with p(n) ∝ 1/n, `min(max_predictions_per_seq,
max(1, round(len * masked_lm_prob)))` tokens, each `[MASK]` 80%, kept 10%, a
random id in `[0, vocab_size)` 10%.

Where this differs from the official script, on purpose (the pairs' own
differences are listed in `data_prep.sentence_order`):
- Everything is drawn from seeded generators (the official n-gram draw uses
  the unseeded global numpy RNG), so output is reproducible.
- A segment start always starts a word, and n-grams do not cross `[SEP]`.
- `<unk>` (as every special piece) is never masked, and it ends words and
  n-grams as `[SEP]` does (`data_prep.ngram_masking`).
"""
import dataclasses

import numpy as np

from data_prep import ngram_masking
from data_prep import static_masking
from data_prep import vocab

_MASKING_DEFAULTS = ngram_masking.MaskingOptions()


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """How instances are built (official flag names and defaults).

    The masking fields mean what `ngram_masking.MaskingOptions` says (and take its
    defaults); `masking` returns them as one.
    """

    max_seq_length: int = 512
    max_predictions_per_seq: int = _MASKING_DEFAULTS.max_predictions_per_seq
    masked_lm_prob: float = _MASKING_DEFAULTS.masked_lm_prob
    short_seq_prob: float = 0.1
    ngram: int = _MASKING_DEFAULTS.ngram
    do_whole_word_mask: bool = _MASKING_DEFAULTS.do_whole_word_mask
    favor_shorter_ngram: bool = _MASKING_DEFAULTS.favor_shorter_ngram
    random_next_sentence: bool = False

    @property
    def masking(self):
        """The masking fields, as a `ngram_masking.MaskingOptions`."""
        return ngram_masking.MaskingOptions(
            masked_lm_prob=self.masked_lm_prob,
            max_predictions_per_seq=self.max_predictions_per_seq,
            ngram=self.ngram, favor_shorter_ngram=self.favor_shorter_ngram,
            do_whole_word_mask=self.do_whole_word_mask)

    def validate(self):
        """Checks the options.

        Raises:
            ValueError: an unusable value (the message holds it).
        """
        checks = [
            (self.max_seq_length >= 5, "max_seq_length must be >= 5",
             self.max_seq_length),
            (0.0 <= self.short_seq_prob <= 1.0,
             "short_seq_prob must be in [0, 1]", self.short_seq_prob),
        ]
        for ok, message, value in checks:
            if not ok:
                raise ValueError("%s. Received: %r" % (message, value))
        self.masking.validate()


def assemble(flat_ids, pairs, max_seq_length, start_table):
    """Lays pairs out as unmasked records: `[CLS] A [SEP] B [SEP]`, padded.

    Shape legend: N instances, L = max_seq_length.

    Args:
        flat_ids: int array of the chunk's token ids.
        pairs: `sentence_order.Pairs` (ranges into `flat_ids`).
        max_seq_length: L.
        start_table: bool array `[V]` from `ngram_masking.start_piece_table`.

    Returns:
        A dict of the schema's unmasked features: `input_ids` `[N, L]`,
        `input_mask`, `segment_ids`, `token_boundary` (int8 `[N, L]`; word
        starts, `[CLS]` and `[SEP]`) and `next_sentence_labels` `[N, 1]`.
    """
    rows = np.arange(len(pairs))
    a_len, b_len = pairs.a_len, pairs.b_len
    seq_len = a_len + b_len + 3  # [N]
    b_first = a_len + 2  # [N] position of B's first token
    pos = np.arange(max_seq_length)[None, :]  # [1, L]
    in_a = (pos >= 1) & (pos <= a_len[:, None])  # [N, L]
    in_b = (pos >= b_first[:, None]) & (pos < (seq_len - 1)[:, None])
    content = in_a | in_b
    source = np.where(in_a, pairs.a_start[:, None] + pos - 1,
                      pairs.b_start[:, None] + pos - b_first[:, None])
    ids = np.where(content, flat_ids[np.where(content, source, 0)], vocab.PAD_ID)
    ids[:, 0] = vocab.CLS_ID
    ids[rows, a_len + 1] = vocab.SEP_ID
    ids[rows, seq_len - 1] = vocab.SEP_ID
    input_mask = pos < seq_len[:, None]
    segment_ids = (pos >= b_first[:, None]) & input_mask
    special = input_mask & ~content  # [CLS] and the two [SEP]
    token_boundary = (start_table[ids] & content) | special
    return {
        "input_ids": ids,
        "input_mask": input_mask.astype(np.int8),
        "segment_ids": segment_ids.astype(np.int8),
        "token_boundary": token_boundary.astype(np.int8),
        "next_sentence_labels": pairs.label.astype(np.int64)[:, None],
    }


def assemble_and_mask(flat_ids, pairs, options, start_table, vocab_size, rng):
    """Builds the padded, masked feature arrays of a batch of pairs.

    Args:
        flat_ids: int array of the chunk's token ids.
        pairs: `sentence_order.Pairs` (ranges into `flat_ids`).
        options: `InstanceOptions`.
        start_table: bool array `[V]` from `ngram_masking.start_piece_table`.
        vocab_size: V; random replacements are drawn from `[0, V)`.
        rng: a `numpy.random.Generator`.

    Returns:
        `(features, stats)`: features is a dict of the schema's arrays
        (`[N, L]`, `[N, P]`, `[N, 1]`); stats as
        `static_masking.mask_records` returns.
    """
    features = assemble(flat_ids, pairs, options.max_seq_length, start_table)
    return static_masking.mask_records(features, options.masking, vocab_size,
                                       rng)
