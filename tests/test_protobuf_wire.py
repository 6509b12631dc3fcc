import pytest

from data_prep import protobuf_wire


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31, 2**63 - 1])
def test_encode_and_read_round_trip(value):
    data = b"\x05" + protobuf_wire.encode_varint(value) + b"\xff"
    assert protobuf_wire.read_varint(data, 1) == (value, len(data) - 1)


def test_a_known_encoding_and_a_cut_varint():
    assert protobuf_wire.encode_varint(300) == b"\xac\x02"
    with pytest.raises(IndexError):
        protobuf_wire.read_varint(b"\xac", 0)
