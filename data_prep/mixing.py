"""How well the output is mixed: the block-divergence ratio.

Neighbouring records say little about the order of a shuffled output (a
shuffle within a chunk already makes them look random); what differs
between an output in corpus order and a global shuffle is the large scale.
So: cut the output order (record `p` of the order is record `p // S` of
shard `p % S`) into `BLOCKS` contiguous blocks, take the Jensen-Shannon
divergence of each block's token distribution from the whole output's, and
average over the blocks. The ratio divides that by the same mean for random
permutations of the same records (`PERMUTATIONS` of them, seeded): about 1
for a global random order, more when parts of the corpus cluster in the
output (a document's `dupe_factor` maskings together, topics in corpus
order).

Tokens are the `input_ids` of each record, padding (id 0) left out. Past
`MAX_SAMPLED` records, every k-th record of the order is used, so the cost
stays bounded; the ratio is computed on that sample, its permutations
included.
"""

import numpy as np

from foundation import filesystems
from foundation import protobuf_wire

BLOCKS = 10
PERMUTATIONS = 4
MAX_SAMPLED = 200_000
_BATCH = 2048
_SEED = 0x313C5  # The permutations' seed: the measure is a fixed function.


def _fields(data, start, end):
    """Yields `(field number, payload start, payload end)` of the
    length-delimited fields of a protobuf message (others are skipped)."""
    position = start
    while position < end:
        tag, position = protobuf_wire.read_varint(data, position)
        kind = tag & 7
        if kind == 2:
            length, position = protobuf_wire.read_varint(data, position)
            yield tag >> 3, position, position + length
            position += length
        elif kind == 0:
            _, position = protobuf_wire.read_varint(data, position)
        elif kind == 5:
            position += 4
        elif kind == 1:
            position += 8
        else:
            raise ValueError("Not a tf.train.Example: wire type %d." % kind)


_INPUT_IDS_KEY = b"\n\tinput_ids"  # A map entry's key field.


def _input_ids_payload(data):
    """The packed varint bytes of `input_ids` in a serialized Example.

    The builder writes the features in name order, so `input_ids` comes
    first and its key is found at once; anything else takes the slow walk
    over the fields.
    """
    at = data.find(_INPUT_IDS_KEY)
    if at >= 0:
        position = at + len(_INPUT_IDS_KEY)
        try:
            for tag in (0x12, 0x1A, 0x0A):  # Feature, Int64List, packed.
                if data[position] != tag:
                    break
                length, position = protobuf_wire.read_varint(data, position + 1)
            else:
                return data[position:position + length]
        except IndexError:
            pass
    for _, f_start, f_end in _fields(data, 0, len(data)):  # Example.features
        for _, e_start, e_end in _fields(data, f_start, f_end):  # map entries
            entry = list(_fields(data, e_start, e_end))
            if not entry or data[entry[0][1]:entry[0][2]] != b"input_ids":
                continue
            for _, v_start, v_end in entry[1:]:  # Feature
                for _, l_start, l_end in _fields(data, v_start, v_end):
                    for _, p_start, p_end in _fields(data, l_start, l_end):
                        return data[p_start:p_end]
    return b""


def input_ids(record):
    """The `input_ids` of a serialized `tf.train.Example` (int64 array;
    empty if it has none)."""
    return _packed_varints([_input_ids_payload(bytes(record))])[0]


def _packed_varints(payloads):
    """Decodes packed varint payloads, all at once with numpy.

    Returns:
        `(values, counts)`: every payload's int64 values one after the
        other, and how many each payload holds.
    """
    raw = np.frombuffer(b"".join(payloads), np.uint8)
    if not raw.size:
        return np.zeros(0, np.int64), np.zeros(len(payloads), np.int64)
    last = raw < 0x80
    ends = np.cumsum([len(p) for p in payloads])
    counts = np.diff(np.concatenate([[0], np.cumsum(last)])[
        np.concatenate([[0], ends])])
    value_index = np.concatenate([[0], np.cumsum(last[:-1])])
    first = np.concatenate([[True], last[:-1]])
    starts = np.flatnonzero(first)
    shift = 7 * (np.arange(raw.size) - starts[value_index])
    parts = (raw & 0x7F).astype(np.int64) << shift
    values = np.bincount(value_index, weights=parts).astype(np.int64)
    return values, counts


def _mean_jsd(histograms):
    """Mean JS divergence (nats) of each row's distribution from the sum's."""
    histograms = histograms.astype(np.float64)
    whole = histograms.sum(0)
    whole /= max(whole.sum(), 1.0)
    values = []
    for row in histograms:
        total = row.sum()
        if not total:
            continue
        p = row / total
        m = (p + whole) / 2
        values.append(0.5 * _kl(p, m) + 0.5 * _kl(whole, m))
    return float(np.mean(values)) if values else 0.0


def _kl(p, q):
    nonzero = p > 0
    return float(np.sum(p[nonzero] * np.log(p[nonzero] / q[nonzero])))


class MixingMeter:
    """Computes the block-divergence ratio from the records in output order.

    Args:
        total_records: the output's record count.
        vocab_size: ids are below it.
    """

    def __init__(self, total_records, vocab_size):
        self.total = total_records
        self.vocab_size = vocab_size
        self.stride = max(1, -(-total_records // MAX_SAMPLED))
        sampled = -(-total_records // self.stride)
        blocks = np.arange(0, total_records, self.stride) * BLOCKS // max(
            1, total_records)
        rng = np.random.default_rng(_SEED)
        # Row 0: the output's blocks; then the permutations' blocks.
        self._labels = np.stack(
            [blocks] + [rng.permutation(blocks) for _ in range(PERMUTATIONS)])
        self._histograms = np.zeros((1 + PERMUTATIONS, BLOCKS * vocab_size),
                                    np.int32)
        self._position = 0
        self._sampled = 0
        self._batch, self._batch_rows = [], []
        assert sampled == blocks.size

    def add(self, record):
        """Counts the next record of the output order (serialized Example;
        a framed record is unwrapped)."""
        if self._position % self.stride == 0:
            self._batch.append(_input_ids_payload(bytes(record)))
            self._batch_rows.append(self._sampled)
            self._sampled += 1
            if len(self._batch) >= _BATCH:
                self._flush()
        self._position += 1

    def add_frame(self, frame):
        """`add` for a TFRecord frame (length, checksum, data, checksum)."""
        if self._position % self.stride == 0:
            self.add(memoryview(frame)[12:-4])
        else:
            self._position += 1

    def _flush(self):
        if not self._batch:
            return
        ids, counts = _packed_varints(self._batch)
        rows = np.repeat(self._batch_rows, counts)
        keep = (ids > 0) & (ids < self.vocab_size)
        ids, rows = ids[keep], rows[keep]
        for h, labels in zip(self._histograms, self._labels):
            h += np.bincount(labels[rows] * self.vocab_size + ids,
                             minlength=h.size)
        self._batch, self._batch_rows = [], []

    def result(self):
        """The measure, as the statistics file reports it."""
        self._flush()
        if self._position != self.total:
            raise ValueError("MixingMeter saw %d records of %d."
                             % (self._position, self.total))
        shape = (BLOCKS, self.vocab_size)
        divergences = [_mean_jsd(h.reshape(shape)) for h in self._histograms]
        random_mean = float(np.mean(divergences[1:]))
        return {
            "block_divergence_ratio": round(
                divergences[0] / random_mean, 4) if random_mean else 1.0,
            "block_divergence": round(divergences[0], 8),
            "random_block_divergence": round(random_mean, 8),
            "blocks": BLOCKS,
            "sampled_records": self._sampled,
        }


def _frames(stream, path):
    """Yields the framed records of an open TFRecord file."""
    while True:
        header = stream.read(8)
        if not header:
            return
        length = int.from_bytes(header, "little")
        rest = stream.read(length + 8)
        if len(header) < 8 or len(rest) < length + 8:
            raise ValueError("TFRecord file %s is truncated." % path)
        yield header + rest


def measure_files(paths, total_records, vocab_size,
                  remote=filesystems.GFILE):
    """The measure of written shards: record `p` of the output order is
    record `p // len(paths)` of shard `p % len(paths)`.

    Args:
        paths: the shards, in shard order.
        total_records: their record count.
        vocab_size: ids are below it.
        remote: the backend of URLs.
    """
    meter = MixingMeter(total_records, vocab_size)
    streams = [filesystems.open_read(p, remote) for p in paths]
    try:
        readers = [_frames(s, p) for s, p in zip(streams, paths)]
        for position in range(total_records):
            shard = position % len(readers)
            frame = next(readers[shard], None)
            if frame is None:
                raise ValueError("TFRecord file %s ends before record %d of "
                                 "the output." % (paths[shard], position))
            meter.add_frame(frame)
    finally:
        for stream in streams:
            stream.close()
    return meter.result()
