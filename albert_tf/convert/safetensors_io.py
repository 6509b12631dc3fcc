"""A small reader and writer of the safetensors format, with NumPy only.

The format: an unsigned 64-bit little-endian header length `n`, then `n` bytes
of JSON (`{name: {"dtype", "shape", "data_offsets": [begin, end]}}` plus an
optional `"__metadata__"` map of strings), then the tensors' raw little-endian
bytes, with offsets counted from the end of the header. Reading maps the file
into memory, so only the tensors asked for are loaded.

The format has no checksum: bytes overwritten on disk still load. Weights
never hold NaN or infinity, and corrupted float bytes nearly always decode
to some, so reading refuses a floating-point tensor that holds them, naming
the tensor and the file (`check_finite`).
"""

import json
import os
import struct

import numpy as np

_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
    "U16": np.dtype("<u2"), "U32": np.dtype("<u4"), "U64": np.dtype("<u8"),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
# Larger headers are refused as corrupt (the format's own limit is 100 MB).
_MAX_HEADER_BYTES = 100_000_000


class SafetensorsError(ValueError):
    """A file is not valid safetensors."""


class SafetensorsFile:
    """Lazy access to the tensors of one `.safetensors` file.

    Args:
        path: the file.

    Raises:
        SafetensorsError: for a malformed header.
    """

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise SafetensorsError(f"{path!r} is too short for safetensors")
            (header_size,) = struct.unpack("<Q", prefix)
            if header_size > min(_MAX_HEADER_BYTES, size - 8):
                raise SafetensorsError(
                    f"{path!r}: header length {header_size} does not fit in "
                    f"a file of {size} bytes")
            try:
                header = json.loads(f.read(header_size))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise SafetensorsError(f"{path!r}: bad JSON header: {e}") from e
        self.metadata = header.pop("__metadata__", None) or {}
        self._entries = header
        self._data_start = 8 + header_size
        self._data_size = size - self._data_start
        self._buffer = None
        for name, entry in header.items():
            self._check(name, entry)

    def _check(self, name, entry):
        dtype = entry.get("dtype")
        if dtype not in _DTYPES and dtype != "BF16":
            raise SafetensorsError(f"{self.path!r}: tensor {name!r} has an "
                                   f"unsupported dtype {dtype!r}")
        begin, end = entry["data_offsets"]
        itemsize = 2 if dtype == "BF16" else _DTYPES[dtype].itemsize
        expected = itemsize * int(np.prod(entry["shape"], dtype=np.int64))
        if not 0 <= begin <= end <= self._data_size or end - begin != expected:
            raise SafetensorsError(
                f"{self.path!r}: tensor {name!r} has data offsets "
                f"{[begin, end]}, inconsistent with its shape {entry['shape']} "
                f"and dtype {dtype} or the file size")

    def keys(self):
        """The tensor names, in header order."""
        return list(self._entries)

    def shapes(self):
        """`{name: shape tuple}`."""
        return {k: tuple(e["shape"]) for k, e in self._entries.items()}

    def dtype_name(self, name):
        """The safetensors dtype string of a tensor (e.g. `"F32"`)."""
        return self._entries[name]["dtype"]

    def get(self, name, check_finite=True):
        """Reads one tensor; BF16 becomes float32 (NumPy has no bfloat16).

        Args:
            name: the tensor's name.
            check_finite: refuse a floating-point tensor holding NaN or
                infinity (see the module docstring).

        Raises:
            SafetensorsError: the tensor holds non-finite values.
        """
        if self._buffer is None:
            self._buffer = np.memmap(self.path, dtype=np.uint8, mode="r")
        entry = self._entries[name]
        begin, end = entry["data_offsets"]
        raw = self._buffer[self._data_start + begin:self._data_start + end]
        if entry["dtype"] == "BF16":
            bits = raw.view("<u2").astype(np.uint32) << 16
            value = bits.view(np.float32)
        else:
            value = raw.view(_DTYPES[entry["dtype"]])
        value = np.array(value.reshape(entry["shape"]), copy=True)
        if check_finite and value.dtype.kind == "f":
            self._check_finite(name, value)
        return value

    def _check_finite(self, name, value):
        finite = np.isfinite(value)
        if finite.all():
            return
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise SafetensorsError(
            f"{self.path!r}: tensor {name!r} holds {value.size - int(finite.sum())}"
            f" NaN or infinite values of {value.size} (first at index "
            f"{list(first)}: {value[first]}); the file is corrupt")


def load_file(path, check_finite=True):
    """Reads every tensor of a `.safetensors` file into `{name: np.ndarray}`.

    Raises:
        SafetensorsError: a malformed file, or (with `check_finite`) a
            floating-point tensor holding NaN or infinity.
    """
    f = SafetensorsFile(path)
    return {name: f.get(name, check_finite) for name in f.keys()}


def save_file(tensors, path, metadata=None):
    """Writes `{name: np.ndarray}` as a `.safetensors` file.

    Tensors are written back to back in name order (the format allows no
    gaps), after a header padded with spaces to a multiple of 8 bytes.

    Args:
        tensors: `{name: array}`; dtypes in the table above.
        path: the file to write.
        metadata: optional `{str: str}` stored as `"__metadata__"`.

    Raises:
        SafetensorsError: for an unsupported dtype or a non-string metadata.
    """
    header, arrays, offset = {}, [], 0
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str)
                   for k, v in metadata.items()):
            raise SafetensorsError("safetensors metadata maps str to str. "
                                   f"Received: {metadata!r}")
        header["__metadata__"] = dict(metadata)
    for name in sorted(tensors):
        value = np.asarray(tensors[name])
        if not value.flags.c_contiguous:
            # (Not np.ascontiguousarray: it turns a 0-d array into 1-d.)
            value = value.copy(order="C")
        dtype = value.dtype.newbyteorder("<") if value.dtype.itemsize > 1 else (
            value.dtype)
        if dtype not in _NAMES:
            raise SafetensorsError(f"Tensor {name!r} has unsupported dtype "
                                   f"{value.dtype}")
        value = value.astype(dtype, copy=False)
        header[name] = {"dtype": _NAMES[dtype], "shape": list(value.shape),
                        "data_offsets": [offset, offset + value.nbytes]}
        arrays.append(value)
        offset += value.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for value in arrays:
            f.write(value.tobytes())
