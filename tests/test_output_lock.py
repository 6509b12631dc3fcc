"""Tests of foundation.output_lock: one writer per output, a killed
holder's lock taken over, and leftovers removed by record only."""

import os
import subprocess
import sys
import textwrap

import pytest

from foundation import output_lock
from foundation import safe_io

_HOLD = textwrap.dedent("""
    import sys, time
    from foundation import output_lock
    lock = output_lock.OutputLock(sys.argv[1], "holder").acquire()
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
        with pytest.raises(output_lock.OutputLockedError,
                           match=f"process {process.pid}") as error:
            output_lock.OutputLock(tmp_path, "second").acquire()
        assert str(tmp_path) in str(error.value)
        assert "\n" not in str(error.value)
    finally:
        process.kill()
        process.wait()
    # The killed holder's file is still there; the kernel's lock is not.
    assert os.path.exists(output_lock.lock_path(tmp_path))
    with output_lock.OutputLock(tmp_path, "third") as lock:
        assert lock.held
    assert f"process {process.pid}" in caplog.text
    assert not os.path.exists(output_lock.lock_path(tmp_path))


def test_a_file_outputs_lock_does_not_block_its_neighbours(tmp_path):
    a = tmp_path / "wiki.part_a"
    b = tmp_path / "wiki.part_b"
    with output_lock.OutputLock(a, "x", kind="file"):
        with output_lock.OutputLock(b, "y", kind="file"):
            pass
        with pytest.raises(output_lock.OutputLockedError, match="wiki.part_a"):
            output_lock.OutputLock(a, "z", flag="--output_file",
                                   kind="file").acquire()


def test_a_planted_link_at_the_lock_is_refused_and_its_target_kept(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("mine")
    out = tmp_path / "train.tfrecord"
    os.symlink(target, tmp_path / ".train.tfrecord.lock")
    with pytest.raises(safe_io.OutputError, match="symbolic link") as error:
        output_lock.OutputLock(out, "x", flag="--output_file",
                               kind="file").acquire()
    assert "--output_file" in str(error.value)
    assert target.read_text() == "mine"


def test_a_lock_name_holding_other_data_or_hard_links_is_left_alone(tmp_path):
    lock = tmp_path / output_lock.LOCK_NAME
    lock.write_text("my notes, not a lock")
    with pytest.raises(safe_io.OutputError, match="not a lock file"):
        output_lock.OutputLock(tmp_path, "x").acquire()
    assert lock.read_text() == "my notes, not a lock"
    lock.unlink()
    other = tmp_path / "other.json"
    other.write_text("")
    os.link(other, lock)
    with pytest.raises(safe_io.OutputError, match="hard link"):
        output_lock.OutputLock(tmp_path, "x").acquire()


def test_leftovers_are_removed_by_record_only(tmp_path):
    user_folder = tmp_path / ".staging-mine"
    user_folder.mkdir()
    (user_folder / "notes.txt").write_text("mine")
    script = textwrap.dedent("""
        import os, sys
        from foundation import output_lock
        from foundation import safe_io
        lock = output_lock.OutputLock(sys.argv[1], "killed").acquire()
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
    with output_lock.OutputLock(tmp_path, "next") as lock:
        assert sorted(lock.previous_leftovers) == sorted([folder, temp])
        assert sorted(lock.remove_previous_leftovers()) == sorted(
            [folder, temp])
    assert not os.path.exists(folder) and not os.path.exists(temp)
    assert (user_folder / "notes.txt").read_text() == "mine"
    assert not os.path.exists(output_lock.lock_path(tmp_path))


def test_a_recorded_name_taken_by_something_else_is_left_alone(tmp_path):
    with output_lock.OutputLock(tmp_path, "first") as lock:
        folder = lock.make_folder(tmp_path, ".staging-")
        os.rmdir(folder)
        mine = tmp_path / "mine"
        mine.mkdir()
        (mine / "marker").write_text("x")
        os.symlink(mine, folder)  # Another entry under the recorded name.
        assert not lock.is_recorded(folder)
        assert not lock.remove_recorded(folder)
    assert os.path.islink(folder) and (mine / "marker").exists()
