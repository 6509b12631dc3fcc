"""Sentence-order prediction (SOP) data: the segment pairs and their labels.

`build_pairs` cuts each document into pairs of sentence runs, A and B, with
label 0 when A comes first and 1 when they were swapped, with the official
script's semantics on token ranges of one flat id array. The rules, and
where they differ from the official script on purpose:
docs/pretraining_data.md#sentence-order-pairs.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass
class Pairs:
    """SOP pairs as token ranges of a flat id array (one entry per pair).

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


class _PairBuilder:
    """Collects the pairs of a chunk, one document at a time.

    The random draws happen in the order of the official loop (and of every
    earlier version of this builder), so output stays reproducible.
    """

    def __init__(self, sentence_offsets, documents, word_starts, options, rng):
        self.offsets = sentence_offsets
        self.documents = documents
        self.word_starts = word_starts
        self.max_num_tokens = options.max_seq_length - 3
        self.short_prob = options.short_seq_prob
        self.random_next = options.random_next_sentence
        self.rng = rng
        self.columns = tuple([] for _ in dataclasses.fields(Pairs))
        self.counts = dict.fromkeys(
            ("truncated_instances", "random_next_instances",
             "split_sentences", "unpairable_chunks"), 0)

    def _draw_target(self):
        """Returns `(short, target length)` of the next instance."""
        short = self.rng.random() < self.short_prob
        if short:
            return short, self.rng.randint(2, self.max_num_tokens)
        return short, self.max_num_tokens

    def add_document(self, doc_index):
        """Adds the pairs of one pass over document `doc_index`."""
        offsets = self.offsets
        first, end = self.documents[doc_index]
        i = chunk_first = first
        current = 0
        short, target = self._draw_target()
        while i < end:
            current += offsets[i + 1] - offsets[i]
            if i == end - 1 or current >= target:
                added, i = self._add_chunk(doc_index, chunk_first, i, short,
                                           target)
                chunk_first, current = i + 1, 0
                if added:
                    short, target = self._draw_target()
            i += 1

    def _add_chunk(self, doc_index, chunk_first, last, short, target):
        """Splits sentences `chunk_first..last` into a pair and adds it.

        Returns:
            `(added, last)`: whether a pair was added, and the last sentence
            it used (earlier than `last` when sentences are put back).
        """
        offsets, rng = self.offsets, self.rng
        n = last + 1 - chunk_first
        a_end = chunk_first + (rng.randint(1, n - 1) if n >= 2 else 1)
        sa, ea = offsets[chunk_first], offsets[a_end]
        if self.random_next and (n == 1 or rng.random() < 0.5):
            sb, eb = self._other_document_segment(doc_index, target - (ea - sa))
            label = 1
            self.counts["random_next_instances"] += 1
            last = a_end - 1  # Put the unused sentences back.
        elif n == 1:
            if ea - sa < 2:
                self.counts["unpairable_chunks"] += 1
                return False, last
            sa, ea, sb, eb, label = self._split_sentence(sa, ea)
        else:
            sb, eb, label = ea, offsets[last + 1], 0
            if not self.random_next and rng.random() < 0.5:
                sa, ea, sb, eb, label = sb, eb, sa, ea, 1
        self._append(sa, ea - sa, sb, eb - sb, label, short)
        return True, last

    def _other_document_segment(self, doc_index, target_b):
        """Token range `(start, end)` of B taken from another document."""
        offsets, rng = self.offsets, self.rng
        other = doc_index
        for _ in range(10):
            other = rng.randrange(len(self.documents))
            if other != doc_index:
                break
        other_first, other_end = self.documents[other]
        j = rng.randint(other_first, other_end - 1)
        sb = offsets[j]
        while j < other_end - 1 and offsets[j + 1] - sb < target_b:
            j += 1
        return sb, offsets[j + 1]

    def _split_sentence(self, start, end):
        """Cuts a lone sentence at a random word start into A and B.

        Returns:
            `(a_start, a_end, b_start, b_end, label)`, swapped half the time.
        """
        rng = self.rng
        cut_points = np.flatnonzero(self.word_starts[start + 1:end])
        if cut_points.size:
            pick = rng.randint(0, cut_points.size - 1)
            cut = start + 1 + int(cut_points[pick])
        else:
            cut = rng.randint(start + 1, end - 1)
        self.counts["split_sentences"] += 1
        if rng.random() < 0.5:
            return cut, end, start, cut, 1
        return start, cut, cut, end, 0

    def _append(self, sa, la, sb, lb, label, short):
        """Truncates a pair to fit and adds it."""
        if la + lb > self.max_num_tokens:
            cut_a, cut_b = truncation_counts(la, lb, self.max_num_tokens)
            # The front share of k removals: k fair coin flips.
            getrandbits = self.rng.getrandbits
            sa += bin(getrandbits(cut_a)).count("1") if cut_a else 0
            sb += bin(getrandbits(cut_b)).count("1") if cut_b else 0
            la -= cut_a
            lb -= cut_b
            self.counts["truncated_instances"] += 1
        for column, value in zip(self.columns, (sa, la, sb, lb, label, short)):
            column.append(value)

    def pairs(self):
        """The pairs added so far, as `Pairs`."""
        ranges = [np.asarray(c, np.int64) for c in self.columns[:4]]
        return Pairs(*ranges, np.asarray(self.columns[4], np.int8),
                     np.asarray(self.columns[5], np.int8))


def build_pairs(sentence_offsets, documents, word_starts, options, dupe_factor,
                rng, counters):
    """Builds the sentence-order pairs of a chunk of documents.

    Args:
        sentence_offsets: list of ints `[S + 1]`; sentence `s` is the token
            range `[offsets[s], offsets[s + 1])` of the chunk's flat ids.
        documents: list of `(first, end)` sentence ranges, each of at least
            two sentences.
        word_starts: bool array over the flat ids, True where a word starts.
        options: `instances.InstanceOptions`.
        dupe_factor: passes over the documents.
        rng: a `random.Random`.
        counters: a dict of counts, updated in place (`truncated_instances`,
            `random_next_instances`, `split_sentences`, `unpairable_chunks`).

    Returns:
        `Pairs`, in document order.
    """
    builder = _PairBuilder(sentence_offsets, documents, word_starts, options,
                           rng)
    for _ in range(dupe_factor):
        for doc_index in range(len(documents)):
            builder.add_document(doc_index)
    for name, count in builder.counts.items():
        counters[name] += count
    return builder.pairs()
