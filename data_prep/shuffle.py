"""The global shuffle: all instances of a run in one random order.

Each record gets a seeded 64-bit key and the output is the records sorted
by key, bucket by bucket, so the order is a uniform random permutation in
bounded memory, with the same bytes on every runner. The keys, the
buckets, the two passes and the bucket file layout:
docs/pretraining_data.md#the-global-shuffle-on-disk.
"""

import errno
import os
import uuid

import numpy as np

from data_prep import tfrecord
from foundation import filesystems
from foundation import safe_io

_KEY_STREAM = 0x5EED5  # Separates the key generator from the chunk's others.
_KEY_BYTES = 8
_FRAME_OVERHEAD = 16  # uint64 length, two uint32 checksums.
MAX_SCATTER_BUCKETS = 256  # Open files of the scatter pass, at most.
_MAX_SPLIT_BITS = 8  # An oversized bucket is split up to 256 ways at once.
TEMP_INFIX = ".shuffle-temp-"


class BucketError(OSError):
    """A temporary bucket file is truncated or corrupt."""


def record_keys(random_seed, chunk_key, count):
    """The shuffle keys of a chunk's records.

    Args:
        random_seed: the run's `--random_seed`.
        chunk_key: the chunk's `reader.Chunk.key`, `(unit, index)`.
        count: the chunk's record count.

    Returns:
        A uint64 array of `count` keys.
    """
    seed = np.random.SeedSequence([random_seed, *chunk_key, _KEY_STREAM])
    return np.random.PCG64(seed).random_raw(count).astype(np.uint64)


def bucket_of(keys, bits):
    """The bucket of each key among `2**bits` (its top `bits` bits)."""
    if not bits:
        return np.zeros(np.shape(keys), np.int64)
    return (np.asarray(keys, np.uint64) >> np.uint64(64 - bits)).astype(np.int64)


def bucket_bits(estimated_bytes, memory_bytes, limit=None):
    """The bucket count, as a power of two, for an output of about
    `estimated_bytes` and buckets of at most `memory_bytes`.

    Args:
        estimated_bytes: the expected size of all records.
        memory_bytes: the memory budget of one bucket.
        limit: the most buckets (a power of two), or None.

    Returns:
        `bits`, for `2**bits` buckets.
    """
    buckets = max(1, -(-int(estimated_bytes) // max(1, int(memory_bytes))))
    bits = (buckets - 1).bit_length()
    if limit:
        bits = min(bits, limit.bit_length() - 1)
    return bits


def estimated_output_bytes(input_bytes, dupe_factor):
    """A generous estimate of the records' size from the text's: about 4
    bytes of record per character per masking (tf.Example varints of every
    feature). The gather pass splits a bucket the estimate made too large."""
    return 4 * input_bytes * dupe_factor


def temp_dir(first_shard, kind=TEMP_INFIX):
    """A new folder name beside the outputs for a run's temporary files:
    `<directory>/.<name><kind><id>`, where `<name>` is the first shard's
    whole name: hidden, so no glob over the shards (`train.tfrecord*`)
    catches it, and of one output only, so two outputs in one folder
    (`wiki.part_a`, `wiki.part_b`) never take each other's for their own."""
    directory, name = os.path.split(first_shard)
    return "%s/.%s%s%s" % (directory or ".", name, kind, uuid.uuid4().hex[:12])


def make_temp_dir(first_shard, lock, kind=TEMP_INFIX):
    """Makes a run's temporary folder (`temp_dir`'s naming) and, when local,
    records it in the output's `output_lock.OutputLock`: a killed run's folder
    is removed by the next run from that record, never by its name.

    Returns:
        The folder's path (created).
    """
    if filesystems.is_remote(first_shard):
        return temp_dir(first_shard, kind)
    directory, name = os.path.split(first_shard)
    return lock.make_folder(directory or ".", "." + name + kind)


def bucket_path(directory, bucket, bits):
    """The file of bucket `bucket` of `2**bits` in `directory`."""
    return "%s/bucket-%02d-%08d" % (directory, bits, bucket)


class BucketScatter:
    """The scatter pass: appends keyed records to `2**bits` bucket files.

    Args:
        directory: the (new) temporary directory; created here.
        bits: `bucket_bits(...)`.
        buffer_bytes: the write buffer of all bucket files together.
        remote: the backend of URLs (`foundation.filesystems`).
    """

    def __init__(self, directory, bits, buffer_bytes=16 << 20,
                 remote=filesystems.GFILE):
        self.directory = directory
        self.bits = bits
        self.bytes = 0
        self._remote = remote
        self._buffer_bytes = max(1 << 12, buffer_bytes >> bits)
        self._buffers = [[] for _ in range(1 << bits)]
        self._sizes = [0] * (1 << bits)
        self._files = {}  # Remote: open streams. Local: reopened to append.
        if not filesystems.is_remote(directory):
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as e:
                raise safe_io.OutputError(
                    safe_io.describe_os_error(e, directory)) from None

    def add(self, keys, frames):
        """Adds framed records with their keys (a uint64 array)."""
        key_bytes = np.asarray(keys, "<u8").tobytes()
        for i, bucket in enumerate(bucket_of(keys, self.bits).tolist()):
            frame = frames[i]
            self._buffers[bucket].append(key_bytes[8 * i:8 * i + 8])
            self._buffers[bucket].append(frame)
            self._sizes[bucket] += _KEY_BYTES + len(frame)
            self.bytes += _KEY_BYTES + len(frame)
            if self._sizes[bucket] >= self._buffer_bytes:
                self._flush(bucket)

    def _flush(self, bucket):
        data = b"".join(self._buffers[bucket])
        self._buffers[bucket] = []
        self._sizes[bucket] = 0
        path = bucket_path(self.directory, bucket, self.bits)
        if filesystems.is_remote(path):
            if bucket not in self._files:
                self._files[bucket] = filesystems.create(path, self._remote)
            self._files[bucket].write(data)
        else:  # No write buffer held per bucket between flushes.
            _append(path, data)
            self._files[bucket] = None

    def close(self):
        """Flushes and closes every bucket file.

        Returns:
            The paths of the bucket files, in output order (empty buckets
            have none).
        """
        for bucket in range(1 << self.bits):
            if self._sizes[bucket]:
                self._flush(bucket)
        for stream in self._files.values():
            if stream is not None:
                stream.close()
        return [bucket_path(self.directory, b, self.bits)
                for b in sorted(self._files)]


def _append(path, data):
    """Appends `data` to a local file, every write checked: a partial write
    is continued, and the error that stops it (a full disk, a file-size
    limit) names the file and the cause.

    Raises:
        safe_io.OutputError: the data could not all be written.
    """
    view = memoryview(data)
    try:
        with open(path, "ab", buffering=0) as stream:
            while view:
                written = stream.write(view)
                if not written:
                    raise OSError(errno.ENOSPC, "no byte written")
                view = view[written:]
    except OSError as e:
        raise safe_io.OutputError("the global shuffle's temporary files: "
                                  + safe_io.describe_os_error(e, path)) from None


def parse_bucket(data, path="bucket"):
    """Splits a bucket file's bytes into records.

    Args:
        data: the file's bytes.
        path: its name, for errors.

    Returns:
        `(keys, starts, ends)`: uint64 keys and the byte range of each
        record's frame in `data`.

    Raises:
        BucketError: a truncated record or a frame whose length fails its
            checksum.
    """
    starts, ends, headers = [], [], []
    position, size = 0, len(data)
    view = memoryview(data)
    while position < size:
        start = position + _KEY_BYTES
        if start + tfrecord.HEADER_BYTES > size:
            raise BucketError("Temporary bucket file %s is truncated at byte "
                              "%d." % (path, position))
        length = int.from_bytes(view[start:start + 8], "little")
        end = start + length + _FRAME_OVERHEAD
        if end > size:
            raise BucketError("Temporary bucket file %s is truncated or "
                              "corrupt at byte %d (a record of %d bytes)."
                              % (path, position, length))
        starts.append(start)
        ends.append(end)
        headers.append(view[start:start + 8].tobytes())
        position = end
    raw = np.frombuffer(data, np.uint8)
    starts = np.asarray(starts, np.int64)

    def column(offsets, width, dtype):  # The bytes at each offset, as ints.
        return raw[(offsets[:, None] + np.arange(width)).ravel()].view(dtype)

    stored = column(starts + 8, 4, "<u4")
    bad = np.flatnonzero(stored != tfrecord.masked_crc32c_batch(headers))
    if bad.size:
        raise BucketError("Temporary bucket file %s is corrupt: the record at "
                          "byte %d fails its length checksum."
                          % (path, starts[bad[0]] - _KEY_BYTES))
    keys = column(starts - _KEY_BYTES, _KEY_BYTES, "<u8").astype(np.uint64)
    return keys, starts, np.asarray(ends, np.int64)


def sorted_order(keys, data, starts, ends):
    """The records' order: ascending key, then ascending bytes (ties between
    64-bit keys are rare, but their order must not depend on the runner)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    tied = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    i = 0
    while i < tied.size:
        first = j = tied[i]
        while i < tied.size and tied[i] == j:
            i, j = i + 1, j + 1
        run = order[first:j + 1]
        order[first:j + 1] = sorted(
            run.tolist(), key=lambda r: bytes(data[starts[r]:ends[r]]))
    return order


def _read(path, remote):
    with filesystems.open_read(path, remote) as f:
        return f.read()


def _iter_records(path, remote):
    """Yields `(key, record bytes)` of a bucket file, reading it in a
    stream (the checksums are checked when its parts are read back)."""
    with filesystems.open_read(path, remote) as f:
        position = 0
        while True:
            head = f.read(_KEY_BYTES + 8)
            if not head:
                return
            if len(head) < _KEY_BYTES + 8:
                raise BucketError("Temporary bucket file %s is truncated at "
                                  "byte %d." % (path, position))
            rest = int.from_bytes(head[_KEY_BYTES:], "little") + 8
            body = f.read(rest)
            if len(body) < rest:
                raise BucketError("Temporary bucket file %s is truncated or "
                                  "corrupt at byte %d." % (path, position))
            position += len(head) + rest
            yield int.from_bytes(head[:_KEY_BYTES], "little"), head + body


def split_bits(size, memory_bytes):
    """Key bits that split a bucket of `size` bytes into parts of about
    `memory_bytes` / 1.25 (a margin for the parts' uneven sizes)."""
    parts = -(-int(size * 1.25) // max(1, int(memory_bytes)))
    return min(_MAX_SPLIT_BITS, max(1, (parts - 1).bit_length()))


def _split(path, bits, split, remote):
    """Splits an oversized bucket into `2**split` files by the next key
    bits, in one streaming pass; returns their paths in output order."""
    shift = 64 - bits - split
    parts = {}
    try:
        for key, record in _iter_records(path, remote):
            part = (key >> shift) & ((1 << split) - 1)
            if part not in parts:
                part_path = "%s.%03d" % (path, part)
                parts[part] = (  # Small buffers: up to 256 files are open.
                    filesystems.create(part_path, remote)
                    if filesystems.is_remote(part_path)
                    else open(part_path, "wb", buffering=1 << 16))
            parts[part].write(record)
    finally:
        for stream in parts.values():
            stream.close()
    return ["%s.%03d" % (path, part) for part in sorted(parts)]


def sorted_frames(paths, bits, memory_bytes, remote=filesystems.GFILE):
    """The gather pass: yields every framed record of the buckets in output
    order, one bucket in memory at a time; each file is removed once read.

    Args:
        paths: the bucket files, in output order (`BucketScatter.close`).
        bits: their bucket bits.
        memory_bytes: the budget of one bucket; a larger file is split.
        remote: the backend of URLs.

    Yields:
        Memory views of the framed records.

    Raises:
        BucketError: a truncated or corrupt bucket file.
    """
    pending = [(path, bits) for path in reversed(paths)]
    while pending:
        path, path_bits = pending.pop()
        size = filesystems.size(path, remote)
        split = split_bits(size, memory_bytes)
        if size > memory_bytes and path_bits + split <= 64:
            try:
                parts = _split(path, path_bits, split, remote)
            except BucketError:
                raise
            except OSError as e:  # A full disk, a file-size limit.
                raise safe_io.OutputError(
                    "the global shuffle's temporary files: "
                    + safe_io.describe_os_error(e, path)) from None
            filesystems.remove(path, remote)
            pending.extend((p, path_bits + split) for p in reversed(parts))
            continue
        data = _read(path, remote)
        if len(data) != size:
            raise BucketError("Temporary bucket file %s is truncated: %d of "
                              "%d bytes read." % (path, len(data), size))
        keys, starts, ends = parse_bucket(data, path)
        view = memoryview(data)
        for r in sorted_order(keys, view, starts, ends).tolist():
            yield view[starts[r]:ends[r]]
        del view, data
        filesystems.remove(path, remote)
