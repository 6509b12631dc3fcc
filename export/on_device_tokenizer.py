"""ALBERT's tokenization as one LiteRT-ready op.

`compile_normalizer` compiles ALBERT's preprocessing into the
SentencePiece model's own normalizer, `comma_table` turns the official
digit-comma rule into a table over piece ids, and `OnDeviceTokenizer` runs
both with tensorflow-text's `FastSentencepieceTokenizer`, which has a LiteRT
kernel, giving the SavedModel preprocessor's ids. How, and the two known
differences: docs/on_device.md#what-runs-where-and-the-differences.
"""

import functools
import unicodedata

import numpy as np
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from data_prep import text as text_lib
from foundation import protobuf_wire

# SentencePiece's ModelProto.normalizer_spec and its NormalizerSpec fields.
_NORMALIZER_SPEC_FIELD = 3
_SPEC_NAME, _SPEC_CHARSMAP = 1, 2
_SPEC_FLAGS = (3, 4, 5)  # add_dummy_prefix, remove_extra_whitespaces,
#                          escape_whitespaces: kept from the model.
NORMALIZER_NAME = "albert_on_device"
_SIGMA = "\u03a3"
# Hangul: leading consonants and vowels compose with what follows.
_HANGUL_FIRST = list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176))
_HANGUL_SYLLABLES = 0xAC00  # LV syllables are every 28th from here.
_HANGUL_SECOND = list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3))


def _with_normalizer(model_proto, charsmap_spec):
    """`model_proto` with the charsmap of `charsmap_spec` and its own flags."""
    old_spec = b""
    for number, value, _ in protobuf_wire.fields(model_proto):
        if number == _NORMALIZER_SPEC_FIELD:
            old_spec = value
    spec = protobuf_wire.length_delimited(_SPEC_NAME, NORMALIZER_NAME.encode())
    for number, _, raw in protobuf_wire.fields(charsmap_spec):
        if number == _SPEC_CHARSMAP:
            spec += raw
    for number, _, raw in protobuf_wire.fields(old_spec):
        if number in _SPEC_FLAGS:
            spec += raw
    out = bytearray()
    for number, _, raw in protobuf_wire.fields(model_proto):
        out += (protobuf_wire.length_delimited(_NORMALIZER_SPEC_FIELD, spec)
                if number == _NORMALIZER_SPEC_FIELD else raw)
    return bytes(out)


def _code_points():
    """Every assigned code point UTF-8 can carry, but U+0000 (a charsmap
    key cannot hold it)."""
    return [cp for block in text_lib._ASSIGNED for cp in block
            if cp and not 0xD800 <= cp < 0xE000]


def _composition_pairs():
    """Characters `(first, second)` that canonical composition joins where
    `second` is a starter (so dropping combining marks keeps them apart)."""
    first, second = set(map(chr, _HANGUL_FIRST)), set(map(chr, _HANGUL_SECOND))
    for cp in _code_points():
        parts = unicodedata.decomposition(chr(cp)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            a, b = (chr(int(p, 16)) for p in parts)
            if unicodedata.combining(b) == 0:
                first.add(a)
                second.add(b)
    return first, second


def _preprocessed(texts, do_lower_case):
    """The graph face of `data_prep.text` on each text (as the SavedModels
    run it)."""
    values = text_lib.preprocess_text_graph(
        tf.constant([t.encode("utf-8") for t in texts]), do_lower_case)
    return [v.decode("utf-8") for v in values.numpy()]


@functools.lru_cache(maxsize=4)
def _charsmap(model_proto, do_lower_case):
    """The rules of the compiled normalizer: a sorted list of `(source,
    target)` strings."""
    normalizer = spm.SentencePieceNormalizer(
        model_proto=model_proto, add_dummy_prefix=False,
        escape_whitespaces=False, remove_extra_whitespaces=False)
    whitespace = set(text_lib._whitespace_code_points())
    code_points = _code_points()
    chars = [chr(cp) for cp in code_points]
    # A lone whitespace character is stripped by the first step; inside a
    # text it becomes one space, which the normalizer collapses.
    pre = _preprocessed(chars, do_lower_case)
    pre = [" " if cp in whitespace else p for cp, p in zip(code_points, pre)]
    single = dict(zip(chars, normalizer.normalize(pre)))
    rules = {c: t for c, t in single.items() if t != c}
    quote = normalizer.normalize('"')
    rules["``"] = rules["''"] = quote
    first, second = _composition_pairs()
    # Letters only, so the first step works on each character alone (no
    # whitespace or quote rule spans two) and a source's preprocessing is
    # the concatenation of its characters'.
    letters = {c: p for c, p in zip(chars, pre)
               if p and unicodedata.category(c)[0] in "LM"}
    heads = [c for c, p in letters.items() if p[-1] in first]
    tails = [c for c, p in letters.items() if p[0] in second]

    def joined(prefixes, previous):
        sources = [p + t for p in prefixes for t in tails]
        targets = normalizer.normalize(
            ["".join(letters[c] for c in s) for s in sources])
        return {s: t for s, t in zip(sources, targets)
                if t != previous(s[:-1]) + single[s[-1]]}

    pairs = joined(heads, lambda s: single[s])
    rules.update(pairs)
    # Three characters only where a pair composed into one that composes
    # again (Hangul LV then T, a Kannada vowel sign twice).
    again = [s for s, t in pairs.items() if t and (
        t[-1] in first or 0 <= ord(t[-1]) - _HANGUL_SYLLABLES < 11172
        and (ord(t[-1]) - _HANGUL_SYLLABLES) % 28 == 0)]
    rules.update(joined(again, lambda s: pairs[s]))
    if do_lower_case:
        rules.update(_final_sigma_rules(letters, normalizer))
    return sorted(rules.items())


def _final_sigma_rules(letters, normalizer):
    """Lowercasing makes "Σ" "ς" after a cased letter when no cased letter
    follows (Unicode's final-sigma context). Rules keyed on the letter
    before (and, to keep "σ", the letter after), for ASCII and Greek
    letters."""
    cased = [c for c, p in letters.items()
             if len(p) == 1 and p.lower() != p.upper()
             and (ord(c) < 0x80 or 0x370 <= ord(c) < 0x400
                  or 0x1F00 <= ord(c) < 0x2000)]
    sources = [c + _SIGMA for c in cased] + [
        c + _SIGMA + d for c in cased for d in cased]
    targets = normalizer.normalize(_preprocessed(sources, True))
    return dict(zip(sources, targets))


def compile_normalizer(spm_model_proto, do_lower_case=True):
    """A copy of a SentencePiece model whose normalizer preprocesses too.

    Args:
        spm_model_proto: the serialized SentencePiece model (`bytes`).
        do_lower_case: as the vocabulary was built.

    Returns:
        The serialized model: SentencePiece (and `FastSentencepieceTokenizer`)
        on raw text with it give the ids that the SavedModels' preprocessing
        and SentencePiece give before the digit-comma rule.
    """
    rules = _charsmap(bytes(spm_model_proto), bool(do_lower_case))
    compiled = spm.SentencePieceNormalizer(norm_map=rules)
    return _with_normalizer(spm_model_proto,
                            compiled.serialized_normalizer_spec())


def comma_table(spm_model_proto):
    """The official digit-comma rule as a table over piece ids.

    Args:
        spm_model_proto: the serialized SentencePiece model.

    Returns:
        `(table, lengths)`: int32 `[V, K]` and `[V]`; id `i` becomes
        `table[i, :lengths[i]]` (`[i]` for a piece the rule leaves alone).
    """
    sp_model = spm.SentencePieceProcessor(model_proto=spm_model_proto)
    size = sp_model.get_piece_size()
    replaced = {}
    for piece_id in range(size):
        piece = sp_model.id_to_piece(piece_id)
        parts = text_lib.split_digit_commas(sp_model, [piece])
        if parts != [piece]:
            replaced[piece_id] = [sp_model.piece_to_id(p) for p in parts]
    width = max([1] + [len(ids) for ids in replaced.values()])
    table = np.zeros([size, width], np.int32)
    table[:, 0] = np.arange(size)
    lengths = np.ones([size], np.int32)
    for piece_id, ids in replaced.items():
        table[piece_id, :len(ids)] = ids
        lengths[piece_id] = len(ids)
    return table, lengths


class OnDeviceTokenizer(tf.Module):
    """Raw strings to ALBERT piece ids, with ops that LiteRT runs.

    Args:
        spm_model_proto: the serialized SentencePiece model.
        do_lower_case: as the vocabulary was built.
        name: module name.

    Example:
        >>> tokenizer = OnDeviceTokenizer(spm_model_proto)  # doctest: +SKIP
        >>> tokenizer.tokenize(tf.constant(["In 1990, 3,000 people"]))
    """

    def __init__(self, spm_model_proto, do_lower_case=True, name=None):
        super().__init__(name=name)
        self.tokenizer = tf_text.FastSentencepieceTokenizer(
            compile_normalizer(spm_model_proto, do_lower_case))
        table, lengths = comma_table(spm_model_proto)
        self.width = table.shape[1]
        self.table = tf.constant(table)
        self.lengths = tf.constant(lengths)

    def tokenize(self, text):
        """`[B]` strings to int32 ragged `[B, (n)]` ids."""
        tokens = self.tokenizer.tokenize(text)
        if self.width == 1:
            return tokens
        ids = tokens.flat_values  # [N]
        counts = tf.gather(self.lengths, ids)  # [N]
        parts = tf.gather(self.table, ids)  # [N, K]
        keep = tf.range(self.width)[tf.newaxis, :] < counts[:, tf.newaxis]
        values = tf.boolean_mask(parts, keep)
        ends = tf.concat([[0], tf.cumsum(counts)], axis=0)  # [N + 1]
        splits = tf.gather(ends, tokens.row_splits)  # [B + 1]
        return tf.RaggedTensor.from_row_splits(values, splits, validate=False)
