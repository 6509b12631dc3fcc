import json
import struct

import numpy as np
import pytest

from albert_tf.convert import safetensors_io


def test_round_trip_and_layout(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "b.weight": rng.normal(size=(3, 5)).astype(np.float32),
        "transposed": np.arange(6, dtype=np.int32).reshape(2, 3).T,
        "a.bias": rng.normal(size=(3,)).astype(np.float16),
        "ids": np.arange(7, dtype=np.int64),
        "flag": np.array([True, False]),
        "scalar": np.array(2.5, dtype=np.float64),
    }
    path = str(tmp_path / "t.safetensors")
    safetensors_io.save_file(tensors, path, metadata={"format": "pt"})
    raw = open(path, "rb").read()
    (header_size,) = struct.unpack("<Q", raw[:8])
    assert header_size % 8 == 0
    header = json.loads(raw[8:8 + header_size])
    assert header["__metadata__"] == {"format": "pt"}
    assert header["b.weight"] == {"dtype": "F32", "shape": [3, 5],
                                  "data_offsets": header["b.weight"]["data_offsets"]}
    # The byte buffer is fully indexed, with no holes.
    spans = sorted(e["data_offsets"] for k, e in header.items() if k != "__metadata__")
    assert spans[0][0] == 0 and spans[-1][1] == len(raw) - 8 - header_size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    loaded = safetensors_io.load_file(path)
    assert sorted(loaded) == sorted(tensors)
    for name, value in tensors.items():
        assert loaded[name].dtype == value.dtype
        assert loaded[name].shape == value.shape
        np.testing.assert_array_equal(loaded[name], value)
    f = safetensors_io.SafetensorsFile(path)
    assert f.metadata == {"format": "pt"} and f.shapes()["ids"] == (7,)


def _write_raw(path, header, data):
    encoded = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded + data)


def test_reads_bfloat16_as_float32(tmp_path):
    value = np.array([1.0, -2.5, 3.140625], dtype=np.float32)
    bf16 = (value.view(np.uint32) >> 16).astype("<u2").tobytes()
    path = str(tmp_path / "bf16.safetensors")
    _write_raw(path, {"x": {"dtype": "BF16", "shape": [3],
                            "data_offsets": [0, 6]}}, bf16)
    np.testing.assert_array_equal(safetensors_io.load_file(path)["x"], value)


def test_rejects_corrupt_files(tmp_path):
    path = str(tmp_path / "bad.safetensors")
    _write_raw(path, {"x": {"dtype": "F32", "shape": [4],
                            "data_offsets": [0, 12]}}, b"\0" * 12)
    with pytest.raises(safetensors_io.SafetensorsError,
                       match="bad.safetensors' is not a valid safetensors "
                       "file.*offset"):
        safetensors_io.SafetensorsFile(path)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", 10 ** 9) + b"{}")
    with pytest.raises(safetensors_io.SafetensorsError, match="header too large"):
        safetensors_io.SafetensorsFile(path)
    with pytest.raises(safetensors_io.SafetensorsError, match="metadata maps str"):
        safetensors_io.save_file({"x": np.zeros(2)}, path, metadata={"a": 1})


def test_refuses_non_finite_floats_naming_tensor_and_file(tmp_path):
    path = str(tmp_path / "w.safetensors")
    safetensors_io.save_file({"a": np.arange(6, dtype=np.float32),
                              "b": np.ones(3, np.float32),
                              "ids": np.arange(3, dtype=np.int64)}, path)
    raw = bytearray(open(path, "rb").read())
    header_size = int.from_bytes(raw[:8], "little")
    offset = json.loads(raw[8:8 + header_size])["a"]["data_offsets"][0]
    begin = 8 + header_size + offset
    raw[begin + 8:begin + 16] = b"\xff" * 8  # a[2], a[3]: NaN bit patterns.
    with open(path, "wb") as f:
        f.write(raw)
    f = safetensors_io.SafetensorsFile(path)
    np.testing.assert_array_equal(f.get("b"), np.ones(3, np.float32))
    with pytest.raises(safetensors_io.SafetensorsError) as error:
        f.get("a")
    assert str(error.value) == (
        f"{path!r}: tensor 'a' holds 2 NaN or infinite values of 6 (first at "
        "index [2]: nan); the file is corrupt")
    with pytest.raises(safetensors_io.SafetensorsError, match="'a' holds 2"):
        safetensors_io.load_file(path)
    assert np.isnan(safetensors_io.load_file(path, check_finite=False)["a"]).sum() == 2
    # Infinity too, and in bfloat16.
    bf16 = np.array([0x3F80, 0x7F80], "<u2").tobytes()  # 1.0, +inf
    _write_raw(path, {"x": {"dtype": "BF16", "shape": [2],
                            "data_offsets": [0, 4]}}, bf16)
    with pytest.raises(safetensors_io.SafetensorsError,
                       match=r"'x' holds 1 NaN or infinite values of 2 .*inf"):
        safetensors_io.load_file(path)
