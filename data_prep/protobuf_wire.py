"""Reading protobuf's wire format without generated classes.

The records and the SentencePiece model are read field by field where a
generated message class would cost more than the read (the records) or
needs another protobuf version than TensorFlow's (sentencepiece's own).
"""


def read_varint(data, position):
    """The base-128 varint at `data[position:]`.

    Returns:
        `(value, position after it)`.

    Raises:
        IndexError: the data ends inside the varint.
    """
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def encode_varint(value):
    """`value` (non-negative) as a base-128 varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
