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


def fields(message):
    """The fields of a serialized message, in order.

    Yields:
        `(number, value, raw)`: the field number; its value (an int for a
        varint, the payload `bytes` for a length-delimited field, the 4 or 8
        raw bytes of a fixed-width one); and the field's whole encoding
        (key included), to copy it as it is.

    Raises:
        ValueError: a wire type protobuf does not have (not a message).
    """
    index = 0
    while index < len(message):
        start = index
        key, index = read_varint(message, index)
        wire_type = key & 7
        if wire_type == 0:
            value, index = read_varint(message, index)
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            value, index = message[index:index + size], index + size
        elif wire_type == 2:
            length, index = read_varint(message, index)
            value, index = message[index:index + length], index + length
        else:
            raise ValueError(f"Not a protobuf message: wire type {wire_type} "
                             f"at byte {start}. Received: {len(message)} "
                             "bytes")
        yield key >> 3, value, message[start:index]


def length_delimited(number, payload):
    """Field `number` holding `payload` (bytes), encoded."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload
