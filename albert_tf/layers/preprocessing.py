"""In-graph text preprocessing for the exported models, and its Python twin.

Text becomes encoder inputs in three steps, the same in every exported model:

1. `data_prep.text` preprocessing and SentencePiece (the graph face, with
   tensorflow-text ops; a malformed UTF-8 sequence becomes `<unk>` inside its
   word, `text_lib.MALFORMED_CHAR`);
2. trimming to the sequence length, round robin between the two segments
   (the longer segment loses tokens first; on a tie the first keeps one more,
   as the official `truncate_seq_pair`);
3. packing `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` with segment ids 0
   through the first `[SEP]` and 1 after, zero padded to the sequence length
   (`fixed`), or only to the batch's longest packed row rounded up to a
   multiple of `LENGTH_MULTIPLE` and capped at the sequence length
   (`dynamic`, what the text-in serving models do by default; see
   `SERVING_SHAPES`).

A second segment that holds no token (an empty or blank string) is left out
with its `[SEP]`: such a row packs exactly like a single segment. So one
signature serves single texts and pairs, and a batch may mix them.

`[MASK]` typed in the text (for the fill-mask signature) is split off before
step 1 and becomes the `[MASK]` id: SentencePiece never emits control ids from
text, and lowercasing would turn the marker into "[mask]".

`pack_ids` and `tokenize_with_masks_py` are the pure-Python twins of the graph
code; tests compare the two.

Shape legend: B batch, T sequence length, S segments.
"""

import math

import tensorflow as tf

from data_prep import text as text_lib

PAD_ID = 0
UNK_ID = 1
CLS_ID = 2
SEP_ID = 3
MASK_ID = 4
MASK_TOKEN = "[MASK]"
# The shortest sequence that holds `[CLS] x [SEP] y [SEP]` trimmed to nothing.
MIN_SEQ_LENGTH = 3
# Dynamic padding rounds the batch's length up to a multiple of this: few
# distinct shapes (T / 8 at most) and lengths the matrix kernels like.
LENGTH_MULTIPLE = 8
# How the text-in serving models pad: "dynamic" to the batch's longest row
# (rounded up, capped at max_seq_length), "fixed" always to max_seq_length
# (static shapes, for TPUs and batching servers).
SERVING_SHAPES = ("dynamic", "fixed")


def check_serving_shape(serving_shape):
    """Returns `serving_shape` if it is one of `SERVING_SHAPES`.

    Raises:
        ValueError: any other value.
    """
    if serving_shape not in SERVING_SHAPES:
        raise ValueError("serving_shape must be one of %s. Received: "
                         "serving_shape=%r" % (", ".join(SERVING_SHAPES),
                                               serving_shape))
    return serving_shape


def _texts_error(name, received):
    return (f"{name} must be a [B] string tensor (one text per row). "
            f"Received {received}")


def checked_texts(text, name="text"):
    """`text` as a `[B]` string tensor, checked when traced and when run.

    A signature's input spec (`[None]`) is not enforced by every caller: a
    SavedModel's signature called from Python, and a model server, feed a
    `[B, 2]` or a scalar tensor through unchecked, and the tokenizer would
    read a `[B, 2]` batch as 2B texts. So the rank is checked in the graph
    too: an `Assert` whose message names `name` (what a model server
    reports), and an `EnsureShape`, which no graph optimizer removes (a
    function called from Python reports it, naming the input tensor).

    Args:
        text: strings, `[B]`.
        name: the input's name in errors (a signature's argument).

    Returns:
        `text` as a string tensor of static shape `[B]`.

    Raises:
        ValueError: `text` is known, when traced, not to be `[B]` strings.
        tf.errors.InvalidArgumentError: at run time, a tensor not `[B]`
            (naming `name`).
    """
    try:
        text = tf.convert_to_tensor(text)
    except (TypeError, ValueError) as error:
        raise ValueError(_texts_error(name, f"{error}")) from None
    if text.dtype != tf.string:
        raise ValueError(_texts_error(name, f"dtype: {text.dtype.name}"))
    if text.shape.rank is not None and text.shape.rank != 1:
        raise ValueError(_texts_error(name, f"shape: {text.shape}"))
    if tf.executing_eagerly():
        return text
    # `raw_ops.Rank` is not folded to a constant when traced, as `tf.rank`
    # of a `[None]` tensor is.
    check = tf.debugging.Assert(
        tf.equal(tf.raw_ops.Rank(input=text), 1),
        [_texts_error(name, "shape:"), tf.shape(text)])
    with tf.control_dependencies([check]):
        return tf.raw_ops.EnsureShape(input=text, shape=[None])


def padded_length(longest, seq_length, multiple=LENGTH_MULTIPLE):
    """The dynamic T of a batch (works on Python ints and on tensors).

    Args:
        longest: the longest packed row of the batch (0 for an empty batch).
        seq_length: the cap (the export's `max_seq_length`).
        multiple: T is rounded up to a multiple of this.

    Returns:
        `min(seq_length, max(multiple, longest rounded up to multiple))`.
    """
    if isinstance(longest, int) and isinstance(seq_length, int):
        rounded = -(-max(longest, 1) // multiple) * multiple
        return min(seq_length, rounded)
    longest = tf.cast(longest, tf.int64)
    rounded = (tf.maximum(longest, 1) + multiple - 1) // multiple * multiple
    return tf.minimum(tf.cast(seq_length, tf.int64), rounded)


def _trimmed_lengths(first_lengths, second_lengths, seq_length):
    """Lengths kept of each segment (works on Python ints and on tensors).

    Returns:
        `(first, second)` lengths after round-robin trimming to
        `seq_length - 2` (one segment) or `seq_length - 3` (two).
    """
    if isinstance(first_lengths, int):
        has_second = 1 if second_lengths > 0 else 0
        budget = seq_length - 2 - has_second
        first = min(first_lengths,
                    max(budget - second_lengths, math.ceil(budget / 2)))
        return first, min(second_lengths, budget - first)
    has_second = tf.cast(second_lengths > 0, first_lengths.dtype)
    budget = tf.cast(seq_length, first_lengths.dtype) - 2 - has_second
    half_up = (budget + 1) // 2
    first = tf.minimum(first_lengths,
                       tf.maximum(budget - second_lengths, half_up))
    return first, tf.minimum(second_lengths, budget - first)


def pack_ids(first, second=None, seq_length=128):
    """Packs one example's token ids (the Python twin of the graph packing).

    Args:
        first: list of int ids of the first segment.
        second: optional list of int ids of the second segment; empty or None
            means a single segment.
        seq_length: T, the padded length (at least 3).

    Returns:
        A dict of int lists of length T: `input_word_ids`, `input_mask`,
        `input_type_ids`.
    """
    second = list(second or [])
    keep_first, keep_second = _trimmed_lengths(len(first), len(second),
                                               seq_length)
    ids = [CLS_ID] + list(first[:keep_first]) + [SEP_ID]
    types = [0] * len(ids)
    if second:
        ids += list(second[:keep_second]) + [SEP_ID]
        types += [1] * (keep_second + 1)
    padding = seq_length - len(ids)
    return {
        "input_word_ids": ids + [PAD_ID] * padding,
        "input_mask": [1] * len(ids) + [0] * padding,
        "input_type_ids": types + [0] * padding,
    }


def tokenize_with_masks_py(sp_model, text, do_lower_case=True):
    """Tokenizes text holding `[MASK]` markers (the Python twin).

    Args:
        sp_model: a loaded `sentencepiece.SentencePieceProcessor`.
        text: a `str`.
        do_lower_case: whether to lowercase.

    Returns:
        A list of int ids, with `MASK_ID` at every marker.
    """
    ids = []
    for index, part in enumerate(text.split(MASK_TOKEN)):
        if index:
            ids.append(MASK_ID)
        ids.extend(text_lib.tokenize_to_ids(sp_model, [part], do_lower_case)[0])
    return ids


def _keep_prefix(tokens, lengths):
    """The first `lengths[b]` tokens of each row of a ragged `[B, (n)]`.

    Works on the flat values (a ragged-to-dense comparison would trace a
    broadcast with dozens of shape assertions).
    """
    splits = tokens.row_splits
    lengths = tf.clip_by_value(tf.cast(lengths, splits.dtype), 0,
                               tokens.row_lengths())
    rows = tokens.value_rowids()
    positions = (tf.range(tf.shape(tokens.values, out_type=splits.dtype)[0])
                 - tf.gather(splits, rows))
    keep = positions < tf.gather(lengths, rows)
    return tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(tokens.values, keep), lengths, validate=False)


def _column(value, rows):
    """A ragged `[rows, 1]` column holding `value`."""
    return tf.RaggedTensor.from_tensor(tf.fill([rows, 1], value))


def _gather_rows(tokens, index, valid):
    """`tokens.values[index]` where `valid`, else `PAD_ID` (`[B, T]` int32)."""
    values = tf.concat([tokens.values, [PAD_ID]], axis=0)
    outside = tf.shape(tokens.values, out_type=index.dtype)[0]
    return tf.gather(values, tf.where(valid, index, outside))


def pack_segments(first, second, seq_length, pad_to_longest=False):
    """Trims and packs ragged token ids into encoder inputs (graph code).

    Dense arithmetic on column positions: position j of row b is `[CLS]` at
    0, the first segment's token j - 1 up to its kept length, `[SEP]`, the
    second segment's tokens, its `[SEP]`, then padding.

    Args:
        first: int32 ragged `[B, (n)]`, the first segment.
        second: int32 ragged `[B, (m)]` or None.
        seq_length: the sequence length trimmed to, a Python int or an int32
            scalar tensor (at least 3).
        pad_to_longest: pad only to `padded_length` of the batch's longest
            packed row instead of to `seq_length`. The rows are the same
            either way up to the shorter width, which holds every real token.

    Returns:
        A dict of int32 `[B, T]` tensors `input_word_ids`, `input_mask`,
        `input_type_ids`; T is `seq_length`, or the dynamic length with
        `pad_to_longest`.
    """
    first = first.with_row_splits_dtype(tf.int64)
    if second is None:
        second = tf.RaggedTensor.from_row_lengths(
            tf.zeros([0], first.dtype), tf.zeros([first.nrows()], tf.int64),
            validate=False)
    second = second.with_row_splits_dtype(tf.int64)
    # A second segment with tokens keeps its [SEP] even if trimmed to none.
    has_second = tf.minimum(second.row_lengths(), 1)
    keep_first, keep_second = _trimmed_lengths(
        first.row_lengths(), second.row_lengths(), seq_length)
    packed = 2 + keep_first + keep_second + has_second  # [B]
    width = tf.cast(seq_length, tf.int64)
    if pad_to_longest:
        width = padded_length(tf.reduce_max(packed), seq_length)
    j = tf.range(width)[tf.newaxis, :]  # [1, T]
    keep_first = keep_first[:, tf.newaxis]
    second_start = keep_first + 2
    second_end = second_start + keep_second[:, tf.newaxis]
    in_first = (j >= 1) & (j <= keep_first)
    in_second = (j >= second_start) & (j < second_end)
    is_sep = (j == keep_first + 1) | (
        (j == second_end) & (has_second[:, tf.newaxis] > 0))
    mask = j < packed[:, tf.newaxis]
    word_ids = tf.where(
        in_first, _gather_rows(first, first.row_starts()[:, tf.newaxis] + j - 1,
                               in_first),
        _gather_rows(second, second.row_starts()[:, tf.newaxis] + j
                     - second_start, in_second))
    word_ids = tf.where(is_sep, SEP_ID, word_ids)
    word_ids = tf.where(j == 0, CLS_ID, word_ids)
    return {
        "input_word_ids": tf.cast(word_ids, tf.int32),
        "input_mask": tf.cast(mask, tf.int32),
        "input_type_ids": tf.cast((j >= second_start) & mask, tf.int32),
    }


class TextPreprocessor(tf.Module):
    """Strings to ALBERT encoder inputs, in the graph (tensorflow-text ops).

    Tracks the SentencePiece resource, so a SavedModel holding it serves
    without the `.model` file (the file travels as an asset beside it).

    Args:
        spm_model_proto: the serialized SentencePiece model (`bytes`).
        max_seq_length: default T of `pack`.
        do_lower_case: whether preprocessing lowercases (as the vocabulary).
        name: module name.

    Raises:
        ValueError: `max_seq_length` below 3.
    """

    def __init__(self, spm_model_proto, max_seq_length=128, do_lower_case=True,
                 name=None):
        super().__init__(name=name)
        if max_seq_length < MIN_SEQ_LENGTH:
            raise ValueError(
                "max_seq_length must be at least %d. Received: max_seq_length=%r"
                % (MIN_SEQ_LENGTH, max_seq_length))
        self.max_seq_length = int(max_seq_length)
        self.do_lower_case = bool(do_lower_case)
        self.tokenizer = text_lib.make_graph_tokenizer(spm_model_proto)
        # One trace of the tokenization, which every function that tokenizes
        # calls (an export's signatures, both segments of a pair): tracing
        # its ragged ops again at each call site made exports slow.
        self._tokenize = tf.function(
            lambda text: text_lib.tokenize_to_ids_graph(
                self.tokenizer, text, self.do_lower_case),
            input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False)

    def tokenize(self, text):
        """Tokenizes a `[B]` string tensor into int32 ragged `[B, (n)]` ids.

        Raises:
            ValueError: `text` is not a string tensor of one dimension
                (`checked_texts`).
        """
        return self._tokenize(checked_texts(text))

    def tokenize_with_masks(self, text):
        """Like `tokenize`, with every `[MASK]` in the text as `MASK_ID`."""
        text = checked_texts(text)
        parts = tf.strings.split(text, sep=MASK_TOKEN)  # [B, (S)]
        pieces = self.tokenize(parts.flat_values)  # [B*S, (n)]
        # Every part gets a trailing [MASK]; the last one of each text goes.
        pieces = tf.concat([pieces, _column(MASK_ID, pieces.nrows())], axis=1)
        tokens = tf.RaggedTensor.from_row_splits(
            pieces, parts.row_splits).merge_dims(1, 2)  # [B, (n)]
        return _keep_prefix(tokens, tf.maximum(tokens.row_lengths() - 1, 0))

    def pack(self, first, second=None, seq_length=None, pad_to_longest=False):
        """`pack_segments` with `max_seq_length` by default."""
        if seq_length is None:
            seq_length = self.max_seq_length
        return pack_segments(first, second, seq_length, pad_to_longest)

    def encode(self, text, text_b=None, seq_length=None, pad_to_longest=False):
        """Strings (and optional second segments) to encoder inputs."""
        second = None if text_b is None else self.tokenize(text_b)
        return self.pack(self.tokenize(text), second, seq_length,
                         pad_to_longest)

    def id_to_piece(self, ids):
        """Maps int32 ids (any shape) to SentencePiece pieces."""
        return self.tokenizer.id_to_string(ids)

    def vocab_size(self):
        """The vocabulary size, an int32 scalar tensor."""
        return tf.cast(self.tokenizer.vocab_size(), tf.int32)
