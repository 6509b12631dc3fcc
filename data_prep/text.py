"""Text preprocessing and SentencePiece tokenization, with two faces.

The Python face (`preprocess_text`, `tokenize_to_ids`) serves data
preparation; the graph face (`preprocess_text_graph`,
`tokenize_to_ids_graph`) runs in `tf.function` and SavedModels. Both are
built from the same tables and give the same ids, the official digit-comma
rule included; TensorFlow is imported only inside the graph face. The
steps and the rule: docs/pretraining_data.md#text-and-tokenization.
"""

import codecs
import functools
import unicodedata

UNDERLINE = "\u2581"  # SentencePiece's word-start marker.
# What a malformed UTF-8 sequence (each maximal invalid part, as Python's
# and ICU's "replace" count them) reads as: U+FFFF, a noncharacter, which no
# vocabulary holds, so it tokenizes as `<unk>` inside its word. SentencePiece
# on device (tensorflow-text's `FastSentencepieceTokenizer`) does the same
# with the raw bytes, so both exports give the same ids (docs/on_device.md).
# U+FFFD would not do: SentencePiece's normalizers make it a space.
MALFORMED_CHAR = "\uffff"


def _malformed_as_char(error):
    return MALFORMED_CHAR, error.end


codecs.register_error("albert_malformed", _malformed_as_char)


# Unicode assigns characters only in planes 0-3 and 14 (15-16 are private
# use, with no whitespace or combining characters).
_ASSIGNED = (range(0x40000), range(0xE0000, 0xF0000))


@functools.lru_cache(maxsize=None)
def _combining_code_points():
    """Code points with a non-zero canonical combining class, sorted."""
    combining = unicodedata.combining
    return [cp for block in _ASSIGNED for cp in block if combining(chr(cp))]


@functools.lru_cache(maxsize=None)
def _whitespace_code_points():
    """Code points that `str.isspace()` accepts (what `str.split()` splits)."""
    return [cp for block in _ASSIGNED for cp in block if chr(cp).isspace()]


@functools.lru_cache(maxsize=None)
def _combining_translation():
    # `str.translate` deletes every key mapped to None, in C.
    return dict.fromkeys(_combining_code_points())


def _regex_class(code_points):
    """Builds an RE2 character class matching exactly `code_points`."""
    ranges = []
    for code_point in code_points:
        if ranges and ranges[-1][1] == code_point - 1:
            ranges[-1][1] = code_point
        else:
            ranges.append([code_point, code_point])
    parts = []
    for first, last in ranges:
        if first == last:
            parts.append("\\x{%X}" % first)
        else:
            parts.append("\\x{%X}-\\x{%X}" % (first, last))
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def _digit_code_points():
    """Code points that `str.isdigit()` accepts (the official rule's test)."""
    return [cp for block in _ASSIGNED for cp in block if chr(cp).isdigit()]


@functools.lru_cache(maxsize=None)
def digit_comma_pattern():
    """RE2 pattern of a piece the official rule splits: it ends in a digit
    and a comma (so it is longer than one character)."""
    return "(?s).*" + _regex_class(_digit_code_points()) + ","


@functools.lru_cache(maxsize=None)
def regex_classes():
    """Returns the RE2 classes `(whitespace, combining)` of the graph face."""
    return (_regex_class(_whitespace_code_points()),
            _regex_class(_combining_code_points()))


def preprocess_text(text, do_lower_case=True):
    """Preprocesses one line of text (the Python face).

    Args:
        text: a `str`, or UTF-8 `bytes` (invalid sequences become
            `MALFORMED_CHAR`).
        do_lower_case: whether to lowercase.

    Returns:
        The preprocessed `str` (see the module docstring).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="albert_malformed")
    text = " ".join(text.split())
    text = text.replace("``", '"').replace("''", '"')
    if not text.isascii():
        # ASCII text is already NFKD and has no combining marks.
        text = unicodedata.normalize("NFKD", text)
        text = text.translate(_combining_translation())
    if do_lower_case:
        text = text.lower()
    return text


def preprocess_text_graph(text, do_lower_case=True):
    """Preprocesses a `tf.string` tensor of any shape (the graph face).

    Uses only ops registered by TensorFlow and tensorflow-text, so it works
    inside `tf.function` and in a SavedModel (load it after
    `import tensorflow_text`). Invalid UTF-8 becomes `MALFORMED_CHAR`
    first.

    Args:
        text: a `tf.string` tensor.
        do_lower_case: whether to lowercase (a Python bool).

    Returns:
        A `tf.string` tensor of the same shape.
    """
    import tensorflow as tf
    import tensorflow_text as tf_text

    whitespace, combining = regex_classes()
    text = tf.strings.unicode_transcode(
        text, input_encoding="UTF-8", output_encoding="UTF-8",
        errors="replace", replacement_char=ord(MALFORMED_CHAR))
    text = tf.strings.regex_replace(text, whitespace + "+", " ")
    text = tf.strings.regex_replace(text, "^ | $", "")
    text = tf.strings.regex_replace(text, "``|''", '"')
    text = tf_text.normalize_utf8(text, "NFKD")
    text = tf.strings.regex_replace(text, combining, "")
    if do_lower_case:
        text = _lower_graph(text)
    return text


def _lower_graph(text):
    """`tf.strings.lower` in UTF-8, part by part between NUL characters:
    the op stops at the first NUL (it reads a C string), which dropped the
    rest of the text, where the Python face keeps it (an `<unk>`)."""
    import tensorflow as tf

    # Op attributes are C strings too, so NUL is swapped for a byte that
    # valid UTF-8 (all the text holds here) never contains.
    marked = tf.strings.regex_replace(tf.reshape(text, [-1]), "\\x00",
                                      b"\xff")
    parts = tf.strings.split(marked, sep=b"\xff")  # [N, (k)]
    ended = tf.ragged.map_flat_values(
        lambda values: tf.strings.join(
            [tf.strings.lower(values, encoding="utf-8"), "\0"]), parts)
    joined = tf.strings.reduce_join(ended, axis=-1)  # one NUL too many
    lengths = tf.strings.length(joined)
    return tf.reshape(tf.strings.substr(
        joined, tf.zeros_like(lengths), tf.maximum(lengths - 1, 0)),
        tf.shape(text))


def _has_digit_comma(text):
    """Whether a piece of `text` could end in a digit and a comma."""
    index = text.find(",", 1)
    while index > 0:
        if text[index - 1].isdigit():
            return True
        index = text.find(",", index + 1)
    return False


def split_digit_commas(sp_model, pieces):
    """The official `encode_pieces` rule on a list of piece strings.

    Args:
        sp_model: the `SentencePieceProcessor` that made `pieces`.
        pieces: a list of `str` pieces.

    Returns:
        The pieces, each ending in a digit and a comma split as the module
        docstring says.
    """
    result = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            parts = sp_model.encode(piece[:-1].replace(UNDERLINE, ""),
                                    out_type=str)
            if piece[0] != UNDERLINE and parts and parts[0][0] == UNDERLINE:
                if len(parts[0]) == 1:
                    parts = parts[1:]
                else:
                    parts[0] = parts[0][1:]
            result.extend(parts + [","])
        else:
            result.append(piece)
    return result


def encode_preprocessed(sp_model, lines):
    """Ids of already preprocessed lines, with the official comma rule.

    Lines without a digit before a comma (most) take SentencePiece's ids
    directly; the others go through their pieces.

    Args:
        sp_model: a loaded `sentencepiece.SentencePieceProcessor`.
        lines: a list of preprocessed `str`.

    Returns:
        A list with one list of int piece ids per line.
    """
    ids = sp_model.encode(lines, out_type=int, num_threads=1)
    for index, line in enumerate(lines):
        if _has_digit_comma(line):
            pieces = split_digit_commas(sp_model,
                                        sp_model.encode(line, out_type=str))
            ids[index] = [sp_model.piece_to_id(p) for p in pieces]
    return ids


def tokenize_to_ids(sp_model, texts, do_lower_case=True):
    """Preprocesses and tokenizes texts with a `SentencePieceProcessor`.

    Args:
        sp_model: a loaded `sentencepiece.SentencePieceProcessor`.
        texts: an iterable of `str` (or UTF-8 `bytes`).
        do_lower_case: whether to lowercase.

    Returns:
        A list with one list of int piece ids per text.
    """
    lines = [preprocess_text(t, do_lower_case) for t in texts]
    return encode_preprocessed(sp_model, lines)


def make_graph_tokenizer(model_proto):
    """Returns a `tensorflow_text.SentencepieceTokenizer` for a model.

    Args:
        model_proto: the serialized SentencePiece model (the `.model` bytes).

    Returns:
        A tokenizer that emits pieces (strings), without sampling, BOS or
        EOS; `tokenize_to_ids_graph` turns them into ids.
    """
    import tensorflow as tf
    import tensorflow_text as tf_text

    return tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.string)


def split_digit_commas_graph(tokenizer, pieces):
    """`split_digit_commas` on a ragged `[B, (n)]` string tensor of pieces.

    Flat-value arithmetic throughout (ragged concatenation and masking would
    trace hundreds of shape assertions into every exported signature).
    """
    import tensorflow as tf

    flat = pieces.flat_values  # [N]
    split = tf.strings.regex_full_match(flat, digit_comma_pattern())
    targets = tf.boolean_mask(flat, split)  # [M]
    stripped = tf.strings.regex_replace(
        tf.strings.regex_replace(targets, ",$", ""), UNDERLINE, "")
    parts = tokenizer.tokenize(stripped)  # [M, (k)]
    part_rows = parts.value_rowids()
    # The "▁" SentencePiece put before the first part goes where the
    # original piece had none (and a part that was only "▁" with it).
    fix_row = ~tf.strings.regex_full_match(targets, "(?s)" + UNDERLINE + ".*")
    is_first = tf.range(tf.size(part_rows, out_type=tf.int64)) == tf.gather(
        parts.row_splits, part_rows)
    fix = is_first & tf.gather(fix_row, part_rows)
    values = tf.where(fix, tf.strings.regex_replace(
        parts.flat_values, "^" + UNDERLINE, ""), parts.flat_values)
    nonempty = values != ""
    # Every piece becomes its own run of output pieces: itself, or its
    # non-empty parts and ",". A stable sort by source piece puts the runs
    # in order (for a split piece, its parts before its comma).
    piece_index = tf.range(tf.size(flat, out_type=tf.int64))
    target_index = tf.boolean_mask(piece_index, split)  # [M]
    source = tf.concat([tf.boolean_mask(piece_index, ~split),
                        tf.boolean_mask(tf.gather(target_index, part_rows),
                                        nonempty),
                        target_index], axis=0)
    output = tf.concat([tf.boolean_mask(flat, ~split),
                        tf.boolean_mask(values, nonempty),
                        tf.fill(tf.shape(targets), ",")], axis=0)
    output = tf.gather(output, tf.argsort(source, stable=True))
    per_piece = tf.math.unsorted_segment_sum(
        tf.ones_like(source), source, tf.size(flat, out_type=tf.int64))
    lengths = tf.math.unsorted_segment_sum(
        per_piece, pieces.value_rowids(), pieces.nrows())
    return tf.RaggedTensor.from_row_lengths(output, lengths, validate=False)


def tokenize_to_ids_graph(tokenizer, text, do_lower_case=True):
    """Preprocesses and tokenizes a `tf.string` tensor (the graph face).

    Args:
        tokenizer: from `make_graph_tokenizer`.
        text: a `tf.string` tensor of shape `[B]`.
        do_lower_case: whether to lowercase.

    Returns:
        An int32 `tf.RaggedTensor` of shape `[B, None]`.
    """
    import tensorflow as tf

    pieces = tokenizer.tokenize(preprocess_text_graph(text, do_lower_case))
    pieces = split_digit_commas_graph(tokenizer, pieces)
    return tf.cast(tokenizer.string_to_id(pieces), tf.int32)
