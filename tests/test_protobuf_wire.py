import pytest

from foundation import protobuf_wire


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31, 2**63 - 1])
def test_encode_and_read_round_trip(value):
    data = b"\x05" + protobuf_wire.encode_varint(value) + b"\xff"
    assert protobuf_wire.read_varint(data, 1) == (value, len(data) - 1)


def test_a_known_encoding_and_a_cut_varint():
    assert protobuf_wire.encode_varint(300) == b"\xac\x02"
    with pytest.raises(IndexError):
        protobuf_wire.read_varint(b"\xac", 0)


def test_fields_read_every_wire_type_and_refuse_what_is_no_message():
    message = (protobuf_wire.encode_varint(1 << 3) + protobuf_wire.encode_varint(300)
               + protobuf_wire.length_delimited(2, b"abc")
               + protobuf_wire.encode_varint(3 << 3 | 5) + b"\x00\x00\x80\x3f"
               + protobuf_wire.encode_varint(4 << 3 | 1) + bytes(8))
    got = list(protobuf_wire.fields(message))
    assert [(n, v) for n, v, _ in got] == [
        (1, 300), (2, b"abc"), (3, b"\x00\x00\x80\x3f"), (4, bytes(8))]
    assert b"".join(raw for _, _, raw in got) == message
    with pytest.raises(ValueError, match="wire type 7"):
        list(protobuf_wire.fields(b"\x0f\x00"))
