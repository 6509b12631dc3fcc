"""Tests of foundation.safe_io: the lock, atomic files, shard sets, run records."""

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from foundation import safe_io

_HOLD = textwrap.dedent("""
    import sys, time
    from foundation import safe_io
    lock = safe_io.OutputLock(sys.argv[1], "holder").acquire()
    print("held", flush=True)
    time.sleep(60)
""")


def _holder(folder):
    process = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_second_run_is_refused_and_a_killed_holders_lock_is_taken_over(
        tmp_path, caplog):
    process = _holder(tmp_path)
    try:
        with pytest.raises(safe_io.OutputLockedError,
                           match=f"process {process.pid}") as error:
            safe_io.OutputLock(tmp_path, "second").acquire()
        assert str(tmp_path) in str(error.value)
        assert "\n" not in str(error.value)
    finally:
        process.kill()
        process.wait()
    # The killed holder's file is still there; the kernel's lock is not.
    assert os.path.exists(safe_io.lock_path(tmp_path))
    with safe_io.OutputLock(tmp_path, "third") as lock:
        assert lock.held
    assert f"process {process.pid}" in caplog.text
    assert not os.path.exists(safe_io.lock_path(tmp_path))


def test_a_file_outputs_lock_does_not_block_its_neighbours(tmp_path):
    a = tmp_path / "wiki.part_a"
    b = tmp_path / "wiki.part_b"
    with safe_io.OutputLock(a, "x", kind="file"):
        with safe_io.OutputLock(b, "y", kind="file"):
            pass
        with pytest.raises(safe_io.OutputLockedError, match="wiki.part_a"):
            safe_io.OutputLock(a, "z", flag="--output_file",
                               kind="file").acquire()


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


def test_run_record_refuses_other_inputs(tmp_path):
    safe_io.RunRecord(tmp_path, "prog", {"--input_file": "a"}).claim()
    safe_io.RunRecord(tmp_path, "prog", {"--input_file": "a"}).claim()
    before = (tmp_path / safe_io.RUN_RECORD_NAME).read_text()
    with pytest.raises(safe_io.OutputError,
                       match="--input_file='a' there, 'b' now"):
        safe_io.RunRecord(tmp_path, "prog", {"--input_file": "b"}).claim()
    with pytest.raises(safe_io.OutputError, match="a run of prog"):
        safe_io.RunRecord(tmp_path, "other", {}).claim()
    assert (tmp_path / safe_io.RUN_RECORD_NAME).read_text() == before
    assert json.loads(before)["settings"] == {"--input_file": "a"}


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


# === Facts, not names: links, records, fingerprints ===

def test_a_planted_link_at_the_lock_is_refused_and_its_target_kept(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("mine")
    out = tmp_path / "train.tfrecord"
    os.symlink(target, tmp_path / ".train.tfrecord.lock")
    with pytest.raises(safe_io.OutputError, match="symbolic link") as error:
        safe_io.OutputLock(out, "x", flag="--output_file", kind="file").acquire()
    assert "--output_file" in str(error.value)
    assert target.read_text() == "mine"


def test_a_lock_name_holding_other_data_or_hard_links_is_left_alone(tmp_path):
    lock = tmp_path / safe_io.LOCK_NAME
    lock.write_text("my notes, not a lock")
    with pytest.raises(safe_io.OutputError, match="not a lock file"):
        safe_io.OutputLock(tmp_path, "x").acquire()
    assert lock.read_text() == "my notes, not a lock"
    lock.unlink()
    other = tmp_path / "other.json"
    other.write_text("")
    os.link(other, lock)
    with pytest.raises(safe_io.OutputError, match="hard link"):
        safe_io.OutputLock(tmp_path, "x").acquire()


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


def test_leftovers_are_removed_by_record_only(tmp_path):
    user_folder = tmp_path / ".staging-mine"
    user_folder.mkdir()
    (user_folder / "notes.txt").write_text("mine")
    script = textwrap.dedent("""
        import os, sys
        from foundation import safe_io
        lock = safe_io.OutputLock(sys.argv[1], "killed").acquire()
        folder = lock.make_folder(sys.argv[1], ".staging-")
        f = safe_io.AtomicFile(os.path.join(sys.argv[1], "a.bin"), lock=lock)
        f.write(b"x")
        print(folder, flush=True)
        os._exit(9)  # Killed: nothing cleaned up.
    """)
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)],
                            capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=os.getcwd()))
    folder = result.stdout.strip()
    assert os.path.isdir(folder), result.stderr
    temp = safe_io.temporary_path(str(tmp_path / "a.bin"))
    assert os.path.exists(temp)
    with safe_io.OutputLock(tmp_path, "next") as lock:
        assert sorted(lock.previous_leftovers) == sorted([folder, temp])
        assert sorted(lock.remove_previous_leftovers()) == sorted(
            [folder, temp])
    assert not os.path.exists(folder) and not os.path.exists(temp)
    assert (user_folder / "notes.txt").read_text() == "mine"
    assert not os.path.exists(safe_io.lock_path(tmp_path))


def test_a_recorded_name_taken_by_something_else_is_left_alone(tmp_path):
    with safe_io.OutputLock(tmp_path, "first") as lock:
        folder = lock.make_folder(tmp_path, ".staging-")
        os.rmdir(folder)
        mine = tmp_path / "mine"
        mine.mkdir()
        (mine / "marker").write_text("x")
        os.symlink(mine, folder)  # Another entry under the recorded name.
        assert not lock.is_recorded(folder)
        assert not lock.remove_recorded(folder)
    assert os.path.islink(folder) and (mine / "marker").exists()


def test_content_fingerprint_sees_content_not_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x.tfrecord").write_bytes(b"1" * 3000000)
    (b / "x.tfrecord").write_bytes(b"1" * 3000000)
    same_a = safe_io.content_fingerprint([str(a / "x.tfrecord")])
    assert same_a == safe_io.content_fingerprint([str(b / "x.tfrecord")])
    assert same_a.startswith("1 files, 3000000 bytes, sha256 ")
    (b / "x.tfrecord").write_bytes(b"1" * 2999999 + b"2")
    assert same_a != safe_io.content_fingerprint([str(b / "x.tfrecord")])
