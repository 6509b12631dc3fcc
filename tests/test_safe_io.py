"""Tests of foundation.safe_io: atomic files, links never followed, shard
sets, outputs checked before any work."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from foundation import safe_io


def test_temporary_names_match_no_glob_of_the_final_name(tmp_path):
    import glob
    path = tmp_path / "train.tfrecord-00000-of-00002"
    temp = safe_io.temporary_path(str(path))
    open(temp, "wb").close()
    assert glob.glob(str(tmp_path / "train.tfrecord-*")) == []
    assert glob.glob(str(tmp_path / "*.tfrecord*")) == []
    assert safe_io.is_temporary(temp)


def test_atomic_write_keeps_the_old_file_and_the_umask(tmp_path):
    path = tmp_path / "out.json"
    safe_io.write_atomically(path, "old")
    old_mask = os.umask(0o022)
    try:
        safe_io.write_atomically(path, "new")
    finally:
        os.umask(old_mask)
    assert path.read_text() == "new"
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    assert sorted(os.listdir(tmp_path)) == ["out.json"]


def test_a_file_size_limit_is_named_and_leaves_the_old_file(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(b"old")
    script = textwrap.dedent(f"""
        import resource
        from foundation import safe_io
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))
        try:
            safe_io.write_atomically({str(path)!r}, b"x" * (1 << 20))
        except safe_io.OutputError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True,
                         text=True, check=True).stdout
    assert "file-size limit" in out and str(path) in out
    assert path.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["big.bin"]


@pytest.mark.parametrize("names, message", [
    (["d/t-00000-of-00003", "d/t-00002-of-00003"], "missing 00001"),
    (["d/t-00000-of-00002", "d/t-00001-of-00002", "d/t-00002-of-00002"],
     "extra 00002"),
    (["d/t-00000-of-00001", "d/t-00000-of-00002", "d/t-00001-of-00002"],
     "two builds"),
    (["d/t-00000-of-00001", "d/t-00000-of-00001.incomplete"], "unfinished"),
])
def test_incomplete_shard_sets_are_refused(names, message):
    with pytest.raises(ValueError, match=message):
        safe_io.check_shard_set(names, "--input_file")


def test_whole_shard_sets_and_plain_files_pass():
    names = ["d/t-00001-of-00002", "d/t-00000-of-00002", "d/notes.tfrecord"]
    assert safe_io.check_shard_set(names) == names


def test_check_output_path(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(safe_io.OutputError, match="--output_dir=.* is a file"):
        safe_io.check_output_path(a_file, "--output_dir")
    with pytest.raises(safe_io.OutputError, match="is a file, not a folder"):
        safe_io.check_output_path(a_file / "sub", "--output_dir")
    safe_io.check_output_path(tmp_path / "new" / "deeper", "--output_dir")
    assert not (tmp_path / "new").exists()


def test_an_output_that_is_a_device_or_a_pipe_is_refused(tmp_path):
    """A rename over `/dev/full` or a named pipe would replace it."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(safe_io.OutputError, match="not a regular file"):
        safe_io.check_output_path(pipe, "--output_file", kind="file")
    with pytest.raises(safe_io.OutputError, match="a pipe or a socket"):
        with safe_io.AtomicFile(pipe) as f:
            f.write(b"x")
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


# === Facts, not names: links ===

def test_a_planted_link_at_a_temporary_name_is_never_written_through(
        tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("mine")
    out = tmp_path / "out.json"
    os.symlink(target, safe_io.temporary_path(str(out)))
    with pytest.raises(safe_io.OutputError, match="symbolic link"):
        safe_io.AtomicFile(str(out))
    # Side files take a fresh name each time: the planted link is unused.
    safe_io.write_atomically(str(out), "new")
    assert out.read_text() == "new"
    assert target.read_text() == "mine"


def test_a_link_at_the_final_name_is_not_replaced(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("mine")
    out = tmp_path / "out.json"
    os.symlink(target, out)
    with pytest.raises(safe_io.OutputError, match="symbolic link"):
        safe_io.write_atomically(str(out), "new")
    assert os.path.islink(out) and target.read_text() == "mine"
    assert safe_io.resolve_output(str(out), "--out") == str(target)
