"""Top predictions at the `[MASK]` markers of raw text, in the graph.

One function serves the exported SavedModel's `fill_mask` signature
(`export.signatures`) and `AlbertMaskedLM.fill_mask`, so both answer with
the same tokenization and the same numbers.

Shape legend: B batch, T packed length, M the most masks of a row in the
batch, K top k, V vocabulary.
"""

import tensorflow as tf

from albert_tf.layers import preprocessing

OUTPUT_NAMES = ("mask_positions", "top_k_ids", "top_k_pieces",
                "top_k_probabilities", "dropped_masks")


def count_markers(text):
    """`[MASK]` markers in each text, in any case (int32 `[B]`)."""
    rest = tf.strings.regex_replace(text, r"(?i)\[mask\]", "")
    removed = tf.strings.length(text) - tf.strings.length(rest)
    return removed // len(preprocessing.MASK_TOKEN)


def marker_positions(word_ids):
    """Where `[MASK]` is in packed ids `[B, T]`: int32 ragged `[B, (M)]`."""
    is_mask = tf.equal(word_ids, preprocessing.MASK_ID)
    positions = tf.RaggedTensor.from_tensor(
        tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)))
    return tf.ragged.boolean_mask(positions, is_mask)


def _predict(pretrainer, preprocessor, text, top_k, dynamic, encode):
    """The outputs for a non-empty batch of texts."""
    inputs = preprocessor.pack(preprocessor.tokenize_with_masks(text),
                               pad_to_longest=dynamic)
    positions = marker_positions(inputs["input_word_ids"])  # [B, (M)]
    valid = tf.ones_like(positions).to_tensor(0) > 0  # [B, M]
    mask_positions = positions.to_tensor(-1)
    if encode is None:
        sequence = pretrainer.encoder(inputs, training=False)["sequence_output"]
    else:
        sequence = encode(inputs)
    logits = tf.cast(pretrainer.mlm_head(
        sequence, tf.maximum(mask_positions, 0)), tf.float32)  # [B, M, V]
    probabilities, ids = tf.math.top_k(tf.nn.softmax(logits), k=top_k)
    valid = tf.broadcast_to(valid[:, :, None], tf.shape(ids))
    ids = tf.where(valid, ids, -1)
    pieces = tf.where(valid, preprocessor.id_to_piece(tf.maximum(ids, 0)),
                      "")
    return {
        "mask_positions": mask_positions,
        "top_k_ids": ids,
        "top_k_pieces": pieces,
        "top_k_probabilities": tf.where(valid, probabilities, 0.0),
        "dropped_masks": count_markers(text) - tf.cast(
            positions.row_lengths(), tf.int32),
    }


def _empty(top_k):
    """The outputs for an empty batch."""
    return {
        "mask_positions": tf.zeros([0, 0], tf.int32),
        "top_k_ids": tf.zeros([0, 0, top_k], tf.int32),
        "top_k_pieces": tf.fill([0, 0, top_k], ""),
        "top_k_probabilities": tf.zeros([0, 0, top_k], tf.float32),
        "dropped_masks": tf.zeros([0], tf.int32),
    }


def fill_mask_outputs(pretrainer, preprocessor, text, top_k, dynamic=True,
                      encode=None):
    """The top `top_k` pieces at every `[MASK]` marker of each text.

    Only `[MASK]` in upper case is a marker (other spellings are text);
    markers cut off by the sequence length get no prediction.

    Args:
        pretrainer: an `albert_tf.AlbertPretrainer` (its encoder and MLM head).
        preprocessor: an `albert_tf.layers.preprocessing.TextPreprocessor`.
        text: string `[B]`.
        top_k: K, a Python int (at most V).
        dynamic: pad the batch to its longest row (rounded up to a multiple
            of 8) instead of to the preprocessor's `max_seq_length`; the
            answers are the same to float rounding.
        encode: optional encoder inputs -> `sequence_output` (how an export
            runs the encoder, e.g. compiled by XLA); default: the
            pretrainer's encoder.

    Returns:
        A dict: `mask_positions` int32 `[B, M]` (index of each mask in the
        packed sequence), `top_k_ids` int32 `[B, M, K]`, `top_k_pieces`
        string `[B, M, K]`, `top_k_probabilities` float32 `[B, M, K]`
        (softmax over the vocabulary, best first); slots past a row's own
        masks hold -1, -1, "" and 0. `dropped_masks` int32 `[B]` counts the
        row's markers that got no prediction.
    """
    # The MLM head's gather rejects a batch of zero: answer it here.
    return tf.cond(
        tf.size(text) > 0,
        lambda: _predict(pretrainer, preprocessor, text, top_k, dynamic,
                         encode),
        lambda: _empty(top_k))
