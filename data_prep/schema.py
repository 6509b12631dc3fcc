"""The pretraining TFRecord schema (the official ALBERT feature names).

Every record is a `tf.train.Example` with these fixed-length features
(`L` = max_seq_length, `P` = max_predictions_per_seq), zero padded:

    input_ids             int64[L]  [CLS] A [SEP] B [SEP], masked tokens replaced
    input_mask            int64[L]  1 on real tokens, 0 on padding
    segment_ids           int64[L]  0 through the first [SEP], 1 after
    token_boundary        int64[L]  1 where a word starts ([CLS]/[SEP] too)
    masked_lm_positions   int64[P]  positions of the masked tokens, ascending
    masked_lm_ids         int64[P]  original ids at those positions
    masked_lm_weights     float[P]  1.0 for real predictions, 0.0 for padding
    next_sentence_labels  int64[1]  the SOP label: 1 = segments swapped

Records written here parse with the official feature spec and the official
records parse with `feature_spec`. The training input pipeline and the
exporters import this module; it imports TensorFlow only inside
`feature_spec`, so that data-prep worker processes never load it.

`encode_examples` writes the protobuf wire format directly (sorted feature
keys, the same bytes as `tf.train.Example.SerializeToString(deterministic=True)`),
vectorized over a batch with numpy: no proto objects are built.
"""

import numpy as np

from foundation import protobuf_wire

FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "token_boundary",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)
FLOAT_FEATURES = frozenset({"masked_lm_weights"})


def feature_lengths(max_seq_length, max_predictions_per_seq):
    """Returns the length of every feature, by name.

    Args:
        max_seq_length: L.
        max_predictions_per_seq: P.

    Returns:
        A dict name -> int.
    """
    seq, pred = int(max_seq_length), int(max_predictions_per_seq)
    return {
        "input_ids": seq,
        "input_mask": seq,
        "segment_ids": seq,
        "token_boundary": seq,
        "masked_lm_positions": pred,
        "masked_lm_ids": pred,
        "masked_lm_weights": pred,
        "next_sentence_labels": 1,
    }


def feature_spec(max_seq_length, max_predictions_per_seq):
    """Returns the parsing spec of the records.

    Args:
        max_seq_length: L.
        max_predictions_per_seq: P.

    Returns:
        A dict name -> `tf.io.FixedLenFeature` (int64, or float32 for
        `masked_lm_weights`), for `tf.io.parse_example`.
    """
    import tensorflow as tf

    return {
        name: tf.io.FixedLenFeature(
            [length], tf.float32 if name in FLOAT_FEATURES else tf.int64)
        for name, length in feature_lengths(
            max_seq_length, max_predictions_per_seq).items()
    }


# === Protobuf wire format ===
# Example   { Features features = 1; }
# Features  { map<string, Feature> feature = 1; }   entry: key = 1, value = 2
# Feature   { FloatList float_list = 2; Int64List int64_list = 3; }
# Int64List { repeated int64 value = 1 [packed]; }  (varints)
# FloatList { repeated float value = 1 [packed]; }  (little-endian float32)


_varint = protobuf_wire.encode_varint


def _entry_header(key, is_float, payload_length):
    """Bytes of one map entry before its packed payload."""
    key_bytes = key.encode("utf-8")
    if payload_length:
        packed = b"\x0a" + _varint(payload_length)
    else:
        packed = b""  # An empty packed field is not written.
    list_length = len(packed) + payload_length
    feature = (b"\x12" if is_float else b"\x1a") + _varint(list_length) + packed
    feature_length = len(feature) + payload_length
    entry = (b"\x0a" + _varint(len(key_bytes)) + key_bytes + b"\x12"
             + _varint(feature_length) + feature)
    entry_length = len(entry) + payload_length
    return b"\x0a" + _varint(entry_length) + entry


def _varint_payloads(values):
    """Varint-encodes every row of a non-negative integer matrix.

    Args:
        values: an integer array `[N, K]`, all >= 0.

    Returns:
        `(flat, lengths)`: the concatenated row payloads as bytes and the
        byte length of each row payload (int array `[N]`).
    """
    top = int(values.max()) if values.size else 0
    values = values.astype(np.uint32 if top < 1 << 32 else np.uint64)
    groups = max(1, (top.bit_length() + 6) // 7)
    septets = np.empty(values.shape + (groups,), np.uint8)  # [N, K, G]
    keep = np.empty(values.shape + (groups,), bool)
    keep[..., 0] = True
    for g in range(groups):
        # A byte carries bit 7 when more bytes of the value follow it.
        more = values >= (1 << (7 * (g + 1)))
        septets[..., g] = ((values >> (7 * g)) & 0x7F) | (more.view(np.uint8) << 7)
        if g + 1 < groups:
            keep[..., g + 1] = more
    num_bytes = keep.sum(axis=(1, 2))
    return septets[keep].tobytes(), num_bytes


def _fixed_block(parts, num_rows):
    """Packs constant-width byte columns `[(header, matrix [N, W]), ...]`.

    Returns:
        `(blob, width)`: row `i` of the block is `blob[i*width:(i+1)*width]`.
    """
    columns = []
    for header, payload in parts:
        header_row = np.frombuffer(header, np.uint8)
        columns.append(np.broadcast_to(header_row, (num_rows, header_row.size)))
        columns.append(payload)
    block = np.concatenate(columns, axis=1)
    return block.tobytes(), block.shape[1]


def encode_examples(features):
    """Serializes a batch of examples to `tf.train.Example` wire bytes.

    Args:
        features: a dict name -> array `[N, K_name]`; float features
            (`FLOAT_FEATURES`) are written as float32, the others as int64
            (values must be >= 0). Keys other than the schema's are allowed
            (any flat int or float features).

    Returns:
        A list of N `bytes`, one serialized `tf.train.Example` per row.

    Raises:
        ValueError: arrays disagree on N, are not 2-D, or hold negative ints.
    """
    names = sorted(features)
    arrays = [np.asarray(features[name]) for name in names]
    rows = {a.shape[0] for a in arrays if a.ndim == 2}
    if len(rows) != 1 or any(a.ndim != 2 for a in arrays):
        raise ValueError(
            "encode_examples wants 2-D arrays with one row count. Received "
            "shapes: %s" % {n: a.shape for n, a in zip(names, arrays)})
    (num_rows,) = rows
    # The record is a sequence of segments, in key order: runs of features
    # whose bytes have the same width on every row are packed into one numpy
    # block; varint features of varying width keep a per-row header lookup.
    plan = []  # ("fixed", blob, width) or ("var", name, flat, offsets, cache)
    pending = []
    for name, array in zip(names, arrays):
        is_float = name in FLOAT_FEATURES
        if is_float:
            payload = np.ascontiguousarray(array, "<f4").view(np.uint8)
            pending.append((_entry_header(name, True, payload.shape[1]), payload))
            continue
        if array.size and array.min() < 0:
            raise ValueError(
                "Feature %s holds negative values, which this encoder "
                "does not write. Received min %d." % (name, array.min()))
        if not array.size or array.max() < 0x80:
            payload = array.astype(np.uint8)  # One byte per value.
            pending.append((_entry_header(name, False, payload.shape[1]), payload))
            continue
        if pending:
            plan.append(("fixed",) + _fixed_block(pending, num_rows))
            pending = []
        flat, lengths = _varint_payloads(array)
        offsets = np.zeros(num_rows + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        plan.append(("var", name, flat, offsets.tolist(), {}))
    if pending:
        plan.append(("fixed",) + _fixed_block(pending, num_rows))
    records = []
    for row in range(num_rows):
        parts = []
        for segment in plan:
            if segment[0] == "fixed":
                width = segment[2]
                parts.append(segment[1][row * width:(row + 1) * width])
            else:
                _, name, flat, offsets, headers = segment
                start, end = offsets[row], offsets[row + 1]
                header = headers.get(end - start)
                if header is None:
                    header = headers[end - start] = _entry_header(
                        name, False, end - start)
                parts.append(header)
                parts.append(flat[start:end])
        body = b"".join(parts)
        records.append(b"".join((b"\x0a", _varint(len(body)), body)))
    return records
