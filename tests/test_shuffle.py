"""Tests for data_prep.shuffle: keys, buckets, the two passes, bad buckets."""

import collections
import glob
import os

import numpy as np
import pytest

from data_prep import shuffle
from data_prep import tfrecord
from foundation import output_lock


def _records(count, seed=0, size=(20, 200)):
    """Framed records of random lengths and bytes."""
    rng = np.random.default_rng(seed)
    return tfrecord.frame_records([
        rng.integers(0, 256, rng.integers(*size), dtype=np.uint8).tobytes()
        for _ in range(count)])


def _scatter_gather(tmp_path, chunks, bits, memory_bytes, name="t"):
    """Both passes over `chunks` (lists of `(keys, frames)`)."""
    directory = str(tmp_path / name)
    scatter = shuffle.BucketScatter(directory, bits, buffer_bytes=1 << 14)
    for keys, frames in chunks:
        scatter.add(keys, frames)
    paths = scatter.close()
    out = [bytes(f) for f in shuffle.sorted_frames(paths, bits, memory_bytes)]
    assert os.listdir(directory) == []  # Every bucket file is removed.
    return out


def test_keys_are_seeded_by_run_and_chunk():
    keys = shuffle.record_keys(12345, (0, 3), 1000)
    assert keys.dtype == np.uint64 and keys.shape == (1000,)
    assert (keys == shuffle.record_keys(12345, (0, 3), 1000)).all()
    assert (keys[:10] == shuffle.record_keys(12345, (0, 3), 10)).all()
    for other in (shuffle.record_keys(12346, (0, 3), 1000),
                  shuffle.record_keys(12345, (1, 3), 1000),
                  shuffle.record_keys(12345, (0, 4), 1000)):
        assert not np.isin(keys, other).any()
    # The top bits (the bucket) are uniform.
    counts = np.bincount(shuffle.bucket_of(keys, 2), minlength=4)
    assert counts.min() > 200


def test_bucket_of_and_bucket_bits():
    keys = np.array([0, 1 << 62, 1 << 63, (1 << 64) - 1], np.uint64)
    assert shuffle.bucket_of(keys, 0).tolist() == [0, 0, 0, 0]
    assert shuffle.bucket_of(keys, 1).tolist() == [0, 0, 1, 1]
    assert shuffle.bucket_of(keys, 2).tolist() == [0, 1, 2, 3]
    assert shuffle.bucket_bits(10, 100) == 0
    assert shuffle.bucket_bits(100, 100) == 0
    assert shuffle.bucket_bits(101, 100) == 1
    assert shuffle.bucket_bits(1000, 100) == 4
    assert shuffle.bucket_bits(1 << 40, 1, limit=256) == 8


def test_split_bits_leave_room_for_uneven_parts():
    assert shuffle.split_bits(101, 100) == 1
    assert shuffle.split_bits(170, 100) == 2  # 1.25 * 170 > 2 * 100.
    assert shuffle.split_bits(1000, 100) == 4
    assert shuffle.split_bits(1 << 40, 1 << 20) == 8  # At most 256 parts.


def test_output_is_the_key_order_whatever_the_buckets_and_memory(tmp_path):
    frames = _records(3000)
    chunks = [(shuffle.record_keys(7, (0, c), 500), frames[500 * c:500 * c + 500])
              for c in range(6)]
    keys = np.concatenate([k for k, _ in chunks])
    expected = [frames[i] for i in np.argsort(keys)]
    size = sum(len(f) + 8 for f in frames)
    runs = {(bits, memory): _scatter_gather(tmp_path, chunks, bits, memory,
                                            "%d-%d" % (bits, memory))
            for bits, memory in ((0, 1 << 30), (3, 1 << 30), (0, size // 40),
                                 (2, size // 100))}
    for out in runs.values():
        assert out == expected


def test_split_buckets_stay_under_the_budget(tmp_path, monkeypatch):
    frames = _records(2000)
    keys = shuffle.record_keys(1, (0, 0), 2000)
    sizes = []
    real_read = shuffle._read

    def read(path, remote):
        data = real_read(path, remote)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(shuffle, "_read", read)
    budget = sum(len(f) + 8 for f in frames) // 50
    _scatter_gather(tmp_path, [(keys, frames)], 0, budget)
    assert len(sizes) > 50 and max(sizes) <= budget


def test_equal_keys_are_ordered_by_bytes(tmp_path):
    frames = _records(50, seed=3)
    keys = np.full(50, 99, np.uint64)
    out = _scatter_gather(tmp_path, [(keys, frames)], 1, 1 << 20)
    assert out == sorted(frames)


def test_the_order_is_a_uniform_permutation():
    """Sorting by the keys of 4 records: each of the 24 orders about equally
    often over 4,800 chunks (a chi-square test, 23 degrees of freedom)."""
    counts = collections.Counter(
        tuple(np.argsort(shuffle.record_keys(5, (0, c), 4)))
        for c in range(4800))
    assert len(counts) == 24
    chi2 = sum((n - 200) ** 2 / 200 for n in counts.values())
    assert chi2 < 50  # p < 0.001 at 49.7.


def _bucket_file(tmp_path, frames):
    directory = str(tmp_path / "b")
    scatter = shuffle.BucketScatter(directory, 0)
    scatter.add(shuffle.record_keys(0, (0, 0), len(frames)), frames)
    (path,) = scatter.close()
    return path


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:-3], "truncated"),
    (lambda data: data + b"\x01\x02", "truncated"),
    # The first record's length checksum.
    (lambda data: data[:17] + bytes([data[17] ^ 1]) + data[18:], "checksum"),
    # Its length: misread records, cut short or failing their checksums.
    (lambda data: data[:8] + b"\x07" + data[9:], None),
])
def test_a_damaged_bucket_is_an_error_naming_it(tmp_path, damage, message):
    frames = _records(5, seed=4, size=(40, 41))
    path = _bucket_file(tmp_path, frames)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(damage(data))
    with pytest.raises(shuffle.BucketError) as error:
        list(shuffle.sorted_frames([path], 0, 1 << 20))
    assert path in str(error.value)
    if message:
        assert message in str(error.value)


def test_a_damaged_bucket_is_found_while_splitting(tmp_path):
    frames = _records(200, seed=5)
    path = _bucket_file(tmp_path, frames)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 10)
    with pytest.raises(shuffle.BucketError, match="truncated"):
        list(shuffle.sorted_frames([path], 0, 1000))


def test_temp_dir_is_beside_the_output_and_outside_its_glob(tmp_path):
    first = str(tmp_path / "train.tfrecord")
    directory = shuffle.temp_dir(first)
    assert os.path.dirname(directory) == str(tmp_path)
    name = os.path.basename(directory)
    assert name.startswith(".train.tfrecord" + shuffle.TEMP_INFIX)
    os.makedirs(directory)
    assert not glob.glob(str(tmp_path / "train.tfrecord*"))
    assert shuffle.temp_dir(first) != directory


def test_a_runs_temp_dir_is_recorded_in_its_lock(tmp_path):
    first = str(tmp_path / "wiki.part_a")
    with output_lock.OutputLock(first, "x", kind="file") as lock:
        folder = shuffle.make_temp_dir(first, lock)
        assert os.path.isdir(folder)
        assert os.path.basename(folder).startswith(
            ".wiki.part_a" + shuffle.TEMP_INFIX)
        assert lock.is_recorded(folder)
