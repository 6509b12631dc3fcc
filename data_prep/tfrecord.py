"""TFRecord framing and shard files, without TensorFlow.

A TFRecord file is a sequence of

    uint64 length (little endian) | uint32 masked_crc32c(length bytes)
    | data | uint32 masked_crc32c(data)

`frame_records` builds those frames for a batch of records with a CRC-32C
computed by numpy over all records at once (one table step per byte column),
so worker processes write TFRecords without loading TensorFlow.
`is_record_header` tells a TFRecord file from anything else by its first 12
bytes (a length and that length's checksum), without reading further.

`ShardWriter` writes a file under a hidden temporary name
(`safe_io.temporary_path`: `.<name>.incomplete`), checks every write, and
renames it to `path` only in `commit()`: an interrupted run never leaves a
file that looks complete, nor one that a glob of the final names matches.
"""

import numpy as np

from foundation import filesystems
from foundation import safe_io

INCOMPLETE_SUFFIX = safe_io.INCOMPLETE_SUFFIX
HEADER_BYTES = 12  # uint64 length + uint32 masked CRC of the length.
_MASK_DELTA = 0xA282EAD8


def _crc32c_tables():
    """Tables that advance a CRC-32C register by 4 bytes in two lookups."""
    byte_table = np.zeros(256, np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        byte_table[byte] = crc
    # t[k][b]: contribution of byte b when k more bytes follow it in the word.
    t = [byte_table]
    for _ in range(3):
        previous = t[-1]
        t.append((previous >> np.uint32(8)) ^ byte_table[previous & 0xFF])
    low = np.arange(1 << 16, dtype=np.uint32)
    # Register x (after xor with a little-endian word): bytes b0..b3.
    low_table = t[3][low & 0xFF] ^ t[2][low >> np.uint32(8)]
    high_table = t[1][low & 0xFF] ^ t[0][low >> np.uint32(8)]
    return byte_table, low_table, high_table


_BYTE_TABLE, _LOW_TABLE, _HIGH_TABLE = _crc32c_tables()
_BATCH = 4096


def _zero_advance(max_length):
    """State reached from 0xFFFFFFFF after n zero bytes, for n <= max."""
    states = np.zeros(max_length + 1, np.uint32)
    crc = 0xFFFFFFFF
    table = _BYTE_TABLE.tolist()
    for n in range(max_length + 1):
        states[n] = crc
        crc = table[crc & 0xFF] ^ (crc >> 8)
    return states


_ZERO_ADVANCE = _zero_advance(1 << 14)


def crc32c_batch(records):
    """Computes the CRC-32C (Castagnoli) of many byte strings at once.

    The CRC register is linear: from state 0, leading zero bytes leave it at
    0, and the standard initial state 0xFFFFFFFF only adds a term that
    depends on the length. So records are right-aligned in a zero-padded
    matrix, all rows advance together 4 bytes per step from state 0, and the
    length term is added at the end.

    Args:
        records: a list of `bytes`.

    Returns:
        A uint32 array with one CRC per record.
    """
    global _ZERO_ADVANCE
    count = len(records)
    if count > _BATCH:
        return np.concatenate([crc32c_batch(records[i:i + _BATCH])
                               for i in range(0, count, _BATCH)])
    if not count:
        return np.zeros(0, np.uint32)
    lengths = [len(r) for r in records]
    width = -(-max(lengths) // 4) * 4
    if width >= _ZERO_ADVANCE.size:
        _ZERO_ADVANCE = _zero_advance(2 * width)
    zeros = bytes(width)
    parts = []
    for record, length in zip(records, lengths):
        parts.append(zeros[:width - length])
        parts.append(record)
    words = np.frombuffer(b"".join(parts), "<u4").reshape(count, width // 4)
    words = np.ascontiguousarray(words.T)  # [W/4, N]
    crc = np.zeros(count, np.uint32)
    mask16 = np.uint32(0xFFFF)
    shift16 = np.uint32(16)
    for column in words:
        crc ^= column
        crc = _LOW_TABLE[crc & mask16] ^ _HIGH_TABLE[crc >> shift16]
    # The initial state's term: what 0xFFFFFFFF becomes after n bytes.
    crc ^= _ZERO_ADVANCE[np.asarray(lengths)]
    return crc ^ np.uint32(0xFFFFFFFF)


def _mask(crc):
    crc = crc.astype(np.uint64)
    rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    masked = (rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)
    return masked.astype(np.uint32)


def frame_records(records):
    """Frames serialized records as TFRecord bytes.

    Args:
        records: a list of `bytes`.

    Returns:
        A list of `bytes`, each one complete TFRecord frame.
    """
    if not records:
        return []
    lengths = np.fromiter((len(r) for r in records), np.uint64, len(records))
    length_bytes = lengths.astype("<u8").tobytes()
    headers = [length_bytes[8 * i:8 * i + 8] for i in range(len(records))]
    header_crcs = _mask(crc32c_batch(headers)).astype("<u4").tobytes()
    data_crcs = _mask(crc32c_batch(records)).astype("<u4").tobytes()
    return [
        b"".join((headers[i], header_crcs[4 * i:4 * i + 4], record,
                  data_crcs[4 * i:4 * i + 4]))
        for i, record in enumerate(records)
    ]


def is_record_header(header):
    """Whether `header` (a file's first 12 bytes) starts a TFRecord.

    The 8-byte length is followed by its own masked CRC-32C, so text, JSON or
    any other format passes only by a 1-in-2^32 accident.

    Args:
        header: `bytes`, the first `HEADER_BYTES` of a file (shorter: False).
    """
    if len(header) < HEADER_BYTES:
        return False
    return masked_crc32c(header[:8]) == int.from_bytes(
        header[8:HEADER_BYTES], "little")


def masked_crc32c(data):
    """The masked CRC-32C a TFRecord stores after a length or a record."""
    return int(_mask(crc32c_batch([bytes(data)]))[0])


def masked_crc32c_batch(records):
    """`masked_crc32c` of many byte strings at once (a uint32 array)."""
    return _mask(crc32c_batch(records))


class ShardWriter:
    """Writes one output file under its temporary name until committed.

    The file is written as `safe_io.temporary_path(path)` (the hidden
    `.<name>.incomplete`, which no glob of the final names matches), every
    write checked (a full disk or a file-size limit is a
    `safe_io.OutputError` naming `path` and the cause). `finish()` completes
    and checks it there; `commit()` also renames it to `path`. A set of
    files is committed in two steps (`data_prep.output.commit_run`): every
    file finished first, then the renames, so no write can fail once the
    first earlier file is replaced.

    Args:
        path: the final path (local, or a URL).
        remote: the backend of URLs (`foundation.filesystems`).

    Raises:
        safe_io.OutputError: the file cannot be created (names it).
    """

    def __init__(self, path, remote=filesystems.GFILE):
        self.path = path
        self.temp_path = safe_io.temporary_path(path)
        self.count = 0
        self._remote = remote
        self._finished = False
        if filesystems.is_remote(path):
            self._atomic = None
            self._file = filesystems.create(self.temp_path, remote)
        else:
            self._atomic = safe_io.AtomicFile(path)
            self._file = None

    def write(self, frame):
        """Appends one framed record."""
        if self._atomic is not None:
            self._atomic.write(frame)
        else:
            self._file.write(frame)
        self.count += 1

    def finish(self):
        """Completes the file under `temp_path` (flushed, synced, its size
        checked); the final name is untouched."""
        if self._finished:
            return
        if self._atomic is not None:
            self._atomic.finish()
        else:
            self._file.close()
        self._finished = True

    def commit(self):
        """Finishes the file and renames it to its final name."""
        self.finish()
        rename_into_place(self.temp_path, self.path, self._remote)

    def abort(self):
        """Closes and deletes the temporary file (best effort)."""
        try:
            if self._atomic is not None:
                self._atomic.abort()
            elif not self._finished:
                self._file.close()
            if filesystems.exists(self.temp_path, self._remote):
                filesystems.remove(self.temp_path, self._remote)
        except Exception:  # Cleanup must not hide the original error.
            pass


def rename_into_place(temp_path, path, remote=filesystems.GFILE):
    """Renames a finished temporary file to its final name.

    Raises:
        safe_io.OutputError: the rename failed (names `path` and the cause).
    """
    try:
        filesystems.rename(temp_path, path, remote)
    except OSError as e:
        raise safe_io.OutputError(safe_io.describe_os_error(e, path)) from None


def write_text_atomically(path, text, remote=filesystems.GFILE):
    """Writes a text file through a checked temporary file and a rename.

    Raises:
        safe_io.OutputError: it could not be written (names it and why).
    """
    writer = ShardWriter(path, remote)
    writer.write(text.encode("utf-8"))
    writer.commit()
