"""Hugging Face weights in the safetensors format, through the `safetensors`
package (its NumPy API: no PyTorch needed).

This module adds what the converters need around the library: lazy access
by name with shapes and dtypes, bfloat16 read as float32 (NumPy has no
bfloat16: those tensors are read through the library's TensorFlow API), one
error type naming the file, and a check of the values. The format has no
checksum: bytes overwritten on disk still load. Weights never hold NaN or
infinity, and corrupted float bytes nearly always decode to some, so reading
refuses a floating-point tensor that holds them, naming the tensor and the
file (`check_finite`).
"""

import numpy as np
import safetensors
import safetensors.numpy

from foundation import safe_io


class SafetensorsError(ValueError):
    """A file is not valid safetensors, or holds corrupt values."""


def _open(path, framework="np"):
    try:
        return safetensors.safe_open(path, framework=framework)
    except (safetensors.SafetensorError, OSError) as e:
        raise SafetensorsError(
            f"{path!r} is not a valid safetensors file: {e}") from e


class SafetensorsFile:
    """Lazy access to the tensors of one `.safetensors` file.

    Args:
        path: the file.

    Raises:
        SafetensorsError: a malformed file (its header, or a tensor's
            offsets against its shape, dtype or the file size).
    """

    def __init__(self, path):
        self.path = path
        self._file = _open(path)
        self.metadata = self._file.metadata() or {}
        self._slices = {name: self._file.get_slice(name)
                        for name in self._file.keys()}

    def keys(self):
        """The tensor names (sorted, as the library lists them)."""
        return list(self._slices)

    def shapes(self):
        """`{name: shape tuple}`."""
        return {name: tuple(s.get_shape()) for name, s in self._slices.items()}

    def dtype_name(self, name):
        """The safetensors dtype string of a tensor (e.g. `"F32"`)."""
        return self._slices[name].get_dtype()

    def get(self, name, check_finite=True):
        """Reads one tensor; BF16 becomes float32.

        Args:
            name: the tensor's name.
            check_finite: refuse a floating-point tensor holding NaN or
                infinity (see the module docstring).

        Raises:
            SafetensorsError: the tensor holds non-finite values.
        """
        if self.dtype_name(name) == "BF16":
            with _open(self.path, "tf") as f:
                value = np.asarray(f.get_tensor(name), dtype=np.float32)
        else:
            value = self._file.get_tensor(name)
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

    Args:
        tensors: `{name: array}` (any layout: arrays are made contiguous).
        path: the file to write.
        metadata: optional `{str: str}` stored as `"__metadata__"`.

    Raises:
        SafetensorsError: an unsupported dtype or a non-string metadata.
        foundation.safe_io.OutputError: the file could not be written (names
            it and the cause).
    """
    if metadata and not all(isinstance(k, str) and isinstance(v, str)
                            for k, v in metadata.items()):
        raise SafetensorsError("safetensors metadata maps str to str. "
                               f"Received: {metadata!r}")
    arrays = {}
    for name, value in tensors.items():
        value = np.asarray(value)
        # (Not np.ascontiguousarray: it turns a 0-d array into 1-d.)
        arrays[name] = value if value.flags.c_contiguous else value.copy(order="C")
    try:
        data = safetensors.numpy.save(arrays, metadata=metadata)
    except (ValueError, TypeError, safetensors.SafetensorError) as e:
        raise SafetensorsError(f"Could not write {path!r}: {e}") from e
    # The library's own `save_file` writes mode 0600, whatever the umask;
    # this write is checked (a full disk names the file) and atomic.
    safe_io.write_atomically(path, data)
