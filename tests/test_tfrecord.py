"""Tests for data_prep.tfrecord: CRC-32C, framing, commit-or-nothing files."""

import os

import numpy as np
import tensorflow as tf

from data_prep import tfrecord


def _crc32c_reference(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c_known_vectors():
    crcs = tfrecord.crc32c_batch([b"123456789", b"", bytes(32), b"\xff" * 32])
    assert crcs.tolist() == [0xE3069283, 0, 0x8A9136AA, 0x62A8AB43]


def test_crc32c_matches_reference_on_random_lengths():
    rng = np.random.default_rng(0)
    records = [rng.integers(0, 256, n, dtype=np.uint8).tobytes()
               for n in list(range(0, 40)) + rng.integers(0, 3000, 30).tolist()]
    assert tfrecord.crc32c_batch(records).tolist() == [
        _crc32c_reference(r) for r in records]


def test_frames_read_back_with_tensorflow(tmp_path):
    rng = np.random.default_rng(1)
    records = [rng.integers(0, 256, n, dtype=np.uint8).tobytes()
               for n in rng.integers(0, 2000, 300)]
    path = tmp_path / "x.tfrecord"
    path.write_bytes(b"".join(tfrecord.frame_records(records)))
    read = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    assert read == records


def test_shard_writer_commit_and_abort(tmp_path):
    final = str(tmp_path / "sub" / "shard")
    writer = tfrecord.ShardWriter(final)
    writer.write(b"abc")
    assert not os.path.exists(final)
    # Hidden: no glob of the final name ("shard*") matches it.
    assert writer.temp_path == str(tmp_path / "sub" / ".shard.incomplete")
    writer.finish()
    assert open(writer.temp_path, "rb").read() == b"abc"
    writer.commit()
    assert open(final, "rb").read() == b"abc"
    assert os.listdir(tmp_path / "sub") == ["shard"]

    writer = tfrecord.ShardWriter(final)
    writer.write(b"new content")
    writer.abort()
    assert open(final, "rb").read() == b"abc"  # The old file is untouched.
    assert os.listdir(tmp_path / "sub") == ["shard"]


def test_shard_writer_through_gfile(tmp_path):
    url = "file://" + str(tmp_path / "remote_shard")
    writer = tfrecord.ShardWriter(url)
    writer.write(b"xyz")
    writer.commit()
    assert (tmp_path / "remote_shard").read_bytes() == b"xyz"


def test_is_record_header():
    frame = tfrecord.frame_records([b"some record"])[0]
    assert tfrecord.is_record_header(frame[:tfrecord.HEADER_BYTES])
    assert tfrecord.is_record_header(frame)  # Only the first 12 bytes count.
    broken = bytearray(frame)
    broken[9] ^= 1
    for data in (bytes(broken), frame[:11], b"", b'{\n  "instances": 4',
                 b"Plain text, one sentence a line.\n"):
        assert not tfrecord.is_record_header(data)
