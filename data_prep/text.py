"""Text preprocessing and SentencePiece tokenization, with two faces.

ALBERT feeds SentencePiece with text that went through one preprocessing step:

1. whitespace is collapsed: runs of whitespace become one space and leading
   and trailing whitespace is removed ("whitespace" is what Python's
   `str.split()` splits on, i.e. `str.isspace()`, Unicode-wide);
2. the text is put in Unicode normalization form NFKD;
3. every character with a non-zero canonical combining class is dropped
   (accents and other combining marks: "é" -> "e");
4. the text is lowercased when `do_lower_case` (full Unicode lowercasing).

That step exists twice here, and both faces are built from the same tables:

- `preprocess_text` is the Python face, used while building pretraining data
  and vocabularies;
- `preprocess_text_graph` is the graph face: plain TensorFlow /
  tensorflow-text ops on a `tf.string` tensor, usable inside `tf.function` and
  in a SavedModel (the serving preprocessor). Whitespace and combining marks
  are matched with regular-expression classes generated from Python's
  `unicodedata`, so the graph face removes exactly the characters the Python
  face removes.

`tokenize_to_ids` and `tokenize_to_ids_graph` add SentencePiece on top
(Python `sentencepiece` and `tensorflow_text.SentencepieceTokenizer`, which run
the same model, normalizer included). Tests check that both faces give
identical ids on hard text.

TensorFlow is imported only inside the graph-face functions: data-prep
worker processes use the Python face and stay free of TensorFlow.
"""

import functools
import unicodedata


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
def regex_classes():
    """Returns the RE2 classes `(whitespace, combining)` of the graph face."""
    return (_regex_class(_whitespace_code_points()),
            _regex_class(_combining_code_points()))


def preprocess_text(text, do_lower_case=True):
    """Preprocesses one line of text (the Python face).

    Args:
        text: a `str`, or UTF-8 `bytes` (invalid sequences become U+FFFD).
        do_lower_case: whether to lowercase.

    Returns:
        The preprocessed `str` (see the module docstring).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = " ".join(text.split())
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
    `import tensorflow_text`). Invalid UTF-8 becomes U+FFFD first.

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
        errors="replace", replacement_char=0xFFFD)
    text = tf.strings.regex_replace(text, whitespace + "+", " ")
    text = tf.strings.regex_replace(text, "^ | $", "")
    text = tf_text.normalize_utf8(text, "NFKD")
    text = tf.strings.regex_replace(text, combining, "")
    if do_lower_case:
        text = tf.strings.lower(text, encoding="utf-8")
    return text


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
    return sp_model.encode(lines, out_type=int)


def make_graph_tokenizer(model_proto):
    """Returns a `tensorflow_text.SentencepieceTokenizer` for a model.

    Args:
        model_proto: the serialized SentencePiece model (the `.model` bytes).

    Returns:
        A tokenizer that emits int32 ids, without sampling, BOS or EOS.
    """
    import tensorflow as tf
    import tensorflow_text as tf_text

    return tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)


def tokenize_to_ids_graph(tokenizer, text, do_lower_case=True):
    """Preprocesses and tokenizes a `tf.string` tensor (the graph face).

    Args:
        tokenizer: from `make_graph_tokenizer`.
        text: a `tf.string` tensor of shape `[B]`.
        do_lower_case: whether to lowercase.

    Returns:
        An int32 `tf.RaggedTensor` of shape `[B, None]`.
    """
    return tokenizer.tokenize(preprocess_text_graph(text, do_lower_case))
