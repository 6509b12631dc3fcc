"""Sentence-order pairs and whole-word n-gram masking, as arrays.

The semantics are those of the official ALBERT `create_pretraining_data.py`;
the work is organised for speed: sentences are token ranges of one flat id
array, pairs are ranges into it, and the batch of instances is assembled and
masked with numpy, with a short Python loop per instance only for the span
choice.

Pairs (`build_pairs`), for each document and each dupe:
- a target length `max_seq_length - 3`, or with probability `short_seq_prob`
  a random length in `[2, max_seq_length - 3]`;
- sentences accumulate until the target is reached or the document ends;
  segment A takes the first `randint(1, n - 1)` of the n sentences, B the
  rest; with probability 0.5 A and B are swapped (SOP label 1), else label 0;
- `random_next_sentence`: with probability 0.5 (and always for a lone
  sentence) B comes from another document of the same chunk, label 1, and the
  unused sentences are put back (NSP-style, as the official flag);
- the longer side is truncated one token at a time, from the front or the
  back at random, until the pair fits `max_seq_length - 3`.

Masking (`assemble_and_mask`): words start at a piece beginning with "▁" or
"<", a punctuation piece, or a piece holding a character other than a-z and
punctuation (the official rule); `num_to_predict =
min(max_predictions_per_seq, max(1, round(len * masked_lm_prob)))`; candidate
words are visited in random order, each draws n in `1..ngram` with
p(n) ∝ 1/n (reversed when not `favor_shorter_ngram`), shrinks n while the span
would exceed the budget, and is skipped if it overlaps a chosen span; each
chosen token is `[MASK]` 80%, kept 10%, a random id in `[0, vocab_size)` 10%.

Where this differs from the official script, on purpose:
- Everything is drawn from seeded generators (the official n-gram draw uses
  the unseeded global numpy RNG), so output is reproducible.
- The target length is drawn per instance, not once per document, so the
  fraction of short instances is `short_seq_prob` whatever the document
  lengths.
- A lone sentence (one long sentence, or the last one of a document) is split
  at a random word start into A and B with the SOP swap, instead of being
  paired with a random document; so every instance is a true SOP pair and the
  labels stay balanced. Documents of one sentence are skipped (and counted)
  by the caller. With `random_next_sentence` the official behaviour is kept.
- A segment start always starts a word, and n-grams do not cross `[SEP]`.
- Truncation removes the same number of tokens from the same sides; the
  count taken from the front is drawn as Binomial(k, 1/2), which is the
  distribution of the official one-token-at-a-time coin flips.
"""

import dataclasses
import functools

import numpy as np

from data_prep import vocab

_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _PUNCTUATION


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """How instances are built (official flag names and defaults)."""

    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    ngram: int = 3
    do_whole_word_mask: bool = True
    favor_shorter_ngram: bool = True
    random_next_sentence: bool = False

    def validate(self):
        """Raises ValueError (with the bad value) on unusable options."""
        checks = [
            (self.max_seq_length >= 5, "max_seq_length must be >= 5",
             self.max_seq_length),
            (self.max_predictions_per_seq >= 0,
             "max_predictions_per_seq must be >= 0",
             self.max_predictions_per_seq),
            (0.0 <= self.masked_lm_prob <= 1.0,
             "masked_lm_prob must be in [0, 1]", self.masked_lm_prob),
            (0.0 <= self.short_seq_prob <= 1.0,
             "short_seq_prob must be in [0, 1]", self.short_seq_prob),
            (self.ngram >= 1, "ngram must be >= 1", self.ngram),
        ]
        for ok, message, value in checks:
            if not ok:
                raise ValueError("%s. Received: %r" % (message, value))


def is_start_piece(piece):
    """Whether a SentencePiece piece starts a word (the official rule)."""
    return (piece.startswith("\u2581") or piece.startswith("<")
            or piece in _PUNCTUATION
            or not all(c.lower() in _WORD_CHARS for c in piece))


def start_piece_table(sp_model):
    """Returns a bool array `[V]`: whether each id starts a word."""
    return np.array([is_start_piece(sp_model.id_to_piece(i))
                     for i in range(sp_model.get_piece_size())], bool)


@dataclasses.dataclass
class Pairs:
    """Instances as token ranges of a flat id array (one entry each).

    Attributes:
        a_start, a_len, b_start, b_len: the ranges of segments A and B, after
            truncation.
        label: SOP label (1: swapped, or B from another document).
        short: 1 when the instance had a short target length.
    """

    a_start: np.ndarray
    a_len: np.ndarray
    b_start: np.ndarray
    b_len: np.ndarray
    label: np.ndarray
    short: np.ndarray

    def __len__(self):
        return len(self.a_start)

    def take(self, index):
        """Returns the instances at `index` (an int array or slice)."""
        return Pairs(*(getattr(self, f.name)[index]
                       for f in dataclasses.fields(self)))


def truncation_counts(len_a, len_b, max_num_tokens):
    """Tokens the official truncation removes from A and from B.

    It removes one token at a time from the longer side (B on ties) until the
    pair fits.

    Returns:
        `(removed_a, removed_b)`.
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0
    removed_a = removed_b = 0
    if len_a > len_b:
        removed_a = min(excess, len_a - len_b)
        excess -= removed_a
    else:
        removed_b = min(excess, len_b - len_a)
        excess -= removed_b
    # Equal lengths now: B, A, B, A, ...
    return removed_a + excess // 2, removed_b + (excess + 1) // 2


def build_pairs(sentence_offsets, documents, word_starts, options, dupe_factor,
                rng, counters):
    """Builds the sentence-order pairs of a chunk of documents.

    Args:
        sentence_offsets: list of ints `[S + 1]`; sentence `s` is the token
            range `[offsets[s], offsets[s + 1])` of the chunk's flat ids.
        documents: list of `(first, end)` sentence ranges, each of at least
            two sentences.
        word_starts: bool array over the flat ids, True where a word starts.
        options: `InstanceOptions`.
        dupe_factor: passes over the documents.
        rng: a `random.Random`.
        counters: a dict of counts, updated in place (`truncated_instances`,
            `random_next_instances`, `split_sentences`, `unpairable_chunks`).

    Returns:
        `Pairs`, in document order.
    """
    offsets = sentence_offsets
    max_num_tokens = options.max_seq_length - 3
    short_prob = options.short_seq_prob
    random_next = options.random_next_sentence
    random, randint, getrandbits = rng.random, rng.randint, rng.getrandbits
    a_start, a_len, b_start, b_len, labels, shorts = [], [], [], [], [], []
    truncated = random_nexts = splits = unpairable = 0
    for _ in range(dupe_factor):
        for doc_index, (first, end) in enumerate(documents):
            i = chunk_first = first
            current = 0
            short = random() < short_prob
            target = randint(2, max_num_tokens) if short else max_num_tokens
            while i < end:
                current += offsets[i + 1] - offsets[i]
                if i == end - 1 or current >= target:
                    n = i + 1 - chunk_first
                    a_end = chunk_first + (randint(1, n - 1) if n >= 2 else 1)
                    sa, ea = offsets[chunk_first], offsets[a_end]
                    label = 0
                    if random_next and (n == 1 or random() < 0.5):
                        other = doc_index
                        for _ in range(10):
                            other = rng.randrange(len(documents))
                            if other != doc_index:
                                break
                        other_first, other_end = documents[other]
                        j = randint(other_first, other_end - 1)
                        target_b = target - (ea - sa)
                        sb = offsets[j]
                        while j < other_end - 1 and offsets[j + 1] - sb < target_b:
                            j += 1
                        eb = offsets[j + 1]
                        label = 1
                        random_nexts += 1
                        i = a_end - 1  # Put the unused sentences back.
                    elif n == 1:
                        if ea - sa < 2:
                            unpairable += 1
                            chunk_first, current = i + 1, 0
                            i += 1
                            continue
                        cut_points = np.flatnonzero(word_starts[sa + 1:ea])
                        if cut_points.size:
                            pick = randint(0, cut_points.size - 1)
                            cut = sa + 1 + int(cut_points[pick])
                        else:
                            cut = randint(sa + 1, ea - 1)
                        sa, ea, sb, eb = sa, cut, cut, ea
                        splits += 1
                        if random() < 0.5:
                            sa, ea, sb, eb = sb, eb, sa, ea
                            label = 1
                    else:
                        sb, eb = ea, offsets[i + 1]
                        if not random_next and random() < 0.5:
                            sa, ea, sb, eb = sb, eb, sa, ea
                            label = 1
                    la, lb = ea - sa, eb - sb
                    if la + lb > max_num_tokens:
                        cut_a, cut_b = truncation_counts(la, lb, max_num_tokens)
                        front_a = bin(getrandbits(cut_a)).count("1") if cut_a else 0
                        front_b = bin(getrandbits(cut_b)).count("1") if cut_b else 0
                        sa += front_a
                        la -= cut_a
                        sb += front_b
                        lb -= cut_b
                        truncated += 1
                    a_start.append(sa)
                    a_len.append(la)
                    b_start.append(sb)
                    b_len.append(lb)
                    labels.append(label)
                    shorts.append(short)
                    chunk_first, current = i + 1, 0
                    short = random() < short_prob
                    target = randint(2, max_num_tokens) if short else max_num_tokens
                i += 1
    counters["truncated_instances"] += truncated
    counters["random_next_instances"] += random_nexts
    counters["split_sentences"] += splits
    counters["unpairable_chunks"] += unpairable
    as_array = lambda values: np.asarray(values, np.int64)
    return Pairs(as_array(a_start), as_array(a_len), as_array(b_start),
                 as_array(b_len), np.asarray(labels, np.int8),
                 np.asarray(shorts, np.int8))


@functools.lru_cache(maxsize=None)
def _ngram_cdf(ngram, favor_shorter):
    """Cumulative n-gram probabilities truncated to each available length.

    Returns:
        A float array `[ngram, ngram - 1]`: row `a - 1` holds the CDF of
        p(n) for n < a, renormalised over `1..a`, padded with 2.0 (never
        reached), so `n = 1 + sum(u >= row)` for a uniform u.
    """
    p = 1.0 / np.arange(1, ngram + 1)
    if not favor_shorter:
        p = p[::-1]
    table = np.full((ngram, max(ngram - 1, 1)), 2.0)
    for available in range(1, ngram + 1):
        q = p[:available] / p[:available].sum()
        table[available - 1, :available - 1] = np.cumsum(q)[:-1]
    return table


def assemble_and_mask(flat_ids, pairs, options, start_table, vocab_size, rng):
    """Builds the padded, masked feature arrays of a batch of pairs.

    Shape legend: N instances, L = max_seq_length, P =
    max_predictions_per_seq, W candidate words in the batch, M masked tokens.

    Args:
        flat_ids: int array of the chunk's token ids.
        pairs: `Pairs` (ranges into `flat_ids`).
        options: `InstanceOptions`.
        start_table: bool array `[V]` from `start_piece_table`.
        vocab_size: V; random replacements are drawn from `[0, V)`.
        rng: a `numpy.random.Generator`.

    Returns:
        `(features, stats)`: features is a dict of the schema's arrays
        (`[N, L]`, `[N, P]`, `[N, 1]`); stats a dict with `tokens`,
        `maskable_tokens`, `masked_tokens` and `ngram_counts` (list, index n).
    """
    seq, max_pred = options.max_seq_length, options.max_predictions_per_seq
    count = len(pairs)
    rows = np.arange(count)
    a_len, b_len = pairs.a_len, pairs.b_len
    seq_len = a_len + b_len + 3  # [N]
    b_first = a_len + 2  # [N] position of B's first token
    pos = np.arange(seq)[None, :]  # [1, L]
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
    is_start = start_table[ids] & content
    special = input_mask & ~content  # [CLS] and the two [SEP]
    token_boundary = is_start | special

    # Candidate words: [N, L] -> W flat words, row-major (sorted by row, col).
    if options.do_whole_word_mask:
        word_start = is_start | (content & ((pos == 1) | (pos == b_first[:, None])))
    else:
        word_start = content
    word_row, word_col = np.nonzero(word_start)  # [W]
    word_seg = word_col >= b_first[word_row]
    segment_end = np.where(word_seg, seq_len[word_row] - 1, a_len[word_row] + 1)
    group = 2 * word_row + word_seg  # one group per (instance, segment)
    same_next = np.zeros(word_row.size, bool)
    same_next[:-1] = group[1:] == group[:-1]
    next_col = np.empty_like(word_col)
    next_col[:-1] = word_col[1:]
    word_end = np.where(same_next, next_col, segment_end)
    group_end = np.flatnonzero(~same_next) + 1  # exclusive end of each group
    group_index = np.cumsum(np.concatenate(([0], ~same_next[:-1])))
    words_left = group_end[group_index] - np.arange(word_row.size)
    available = np.minimum(words_left, options.ngram)
    cdf = _ngram_cdf(options.ngram, options.favor_shorter_ngram)[available - 1]
    draw = rng.random(word_row.size)
    ngram = np.ones(word_row.size, np.int64)
    for column in range(options.ngram - 1):
        ngram += draw >= cdf[:, column]
    # A random visiting order within each instance: sort by row + [0, 0.5).
    order = np.argsort(word_row + 0.5 * rng.random(word_row.size))
    row_offsets = np.searchsorted(word_row, np.arange(count + 1))
    if options.masked_lm_prob > 0:
        budget = np.minimum(
            max_pred, np.maximum(1, np.rint(seq_len * options.masked_lm_prob)))
    else:
        budget = np.zeros(count, np.int64)

    # The span choice: sequential per instance, few iterations each.
    starts_l, ends_l = word_col.tolist(), word_end.tolist()
    ngram_l, order_l = ngram.tolist(), order.tolist()
    offsets_l, budget_l = row_offsets.tolist(), budget.astype(np.int64).tolist()
    span_row, span_start, span_end = [], [], []
    ngram_counts = [0] * (options.ngram + 1)
    ones = [b"\x01" * n for n in range(options.ngram + 1)]
    for row in range(count):
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

    # Spans -> masked positions [M], sorted by (row, position).
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
    rank = np.arange(total) - row_first[masked_row]
    original = ids[masked_row, masked_pos]
    draw = rng.random(total)
    random_ids = rng.integers(0, vocab_size, total)
    ids[masked_row, masked_pos] = np.where(
        draw < 0.8, vocab.MASK_ID, np.where(draw < 0.9, original, random_ids))

    masked_lm_positions = np.zeros((count, max_pred), np.int64)
    masked_lm_ids = np.zeros((count, max_pred), np.int64)
    masked_lm_weights = np.zeros((count, max_pred), np.float32)
    masked_lm_positions[masked_row, rank] = masked_pos
    masked_lm_ids[masked_row, rank] = original
    masked_lm_weights[masked_row, rank] = 1.0
    features = {
        "input_ids": ids,
        "input_mask": input_mask.astype(np.int8),
        "segment_ids": segment_ids.astype(np.int8),
        "token_boundary": token_boundary.astype(np.int8),
        "masked_lm_positions": masked_lm_positions,
        "masked_lm_ids": masked_lm_ids,
        "masked_lm_weights": masked_lm_weights,
        "next_sentence_labels": pairs.label.astype(np.int64)[:, None],
    }
    stats = {
        "tokens": int(seq_len.sum()),
        "maskable_tokens": int((seq_len - 3).sum()),
        "masked_tokens": total,
        "ngram_counts": ngram_counts,
    }
    return features, stats
