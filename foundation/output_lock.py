"""One writer per output, and the record of what a run may remove.

A run holds an exclusive lock on its output folder (or, for a file output,
on that file's name): `OutputLock`, the kernel's `flock` on
`<output_dir>/.albert.lock` (`LOCK_NAME`, `lock_path`). A second run fails
at once with one line naming the output and the holder (`OutputLockedError`);
a killed holder's lock is gone with it, and the next run says that it took
the lock over. The lock file also records what the run has made and not yet
put in place, so the next holder removes a killed run's leftovers by that
record only, never by name. Remote paths (`gs://`, ...) have no kernel lock:
the lock is then a no-op that says so in one log line. No TensorFlow at
import. Guide: docs/reliability.md.
"""

import json
import os
import secrets
import shutil
import socket
import stat
import time

from absl import logging

from foundation import filesystems
from foundation import safe_io

LOCK_NAME = ".albert.lock"


class OutputLockedError(safe_io.OutputError):
    """Another live process holds the output's lock."""


def lock_path(output, kind="folder"):
    """The lock file of an output folder, or of an output file's name."""
    output = os.path.abspath(str(output))
    if kind == "folder":
        return os.path.join(output, LOCK_NAME)
    directory, base = os.path.split(output)
    return os.path.join(directory, f".{base}.lock")


class OutputLock:
    """An exclusive lock on one output, held for a run.

        with output_lock.OutputLock(options.output_dir, "run_pretraining",
                                    flag="--output_dir"):
            ...

    Args:
        output: the output folder, or the output file (kind "file").
        program: the program's name (what a second run's error shows).
        flag: the flag naming the output, as the user typed it.
        kind: "folder" or "file".

    Raises (on entering):
        OutputLockedError: a live process holds the lock (names it).
    """

    def __init__(self, output, program, flag="--output_dir", kind="folder"):
        self.output = str(output)
        self.program = program
        self.flag = flag
        self.kind = kind
        self.path = (None if filesystems.is_remote(self.output)
                     else lock_path(output, kind))
        self._fd = None
        self._leftovers = []
        self.previous_leftovers = []

    def acquire(self):
        if self.path is None:
            logging.info("%s is remote: no lock is held on it (one run at a "
                         "time is up to you)", self.output)
            return self
        import fcntl
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        except OSError as error:
            folder = os.path.dirname(self.path)
            raise safe_io.OutputError(
                f"{self.flag}={self.output}: "
                + safe_io.describe_os_error(error, folder)) from None
        for _ in range(20):
            fd = self._open_lock_file()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise OutputLockedError(
                    f"{self.flag}={self.output} is in use by another run"
                    f"{_describe_holder(holder)}; wait for it to finish, or "
                    "choose another output") from None
            # A holder that released between our open and our lock removed
            # the file: lock the file that is there now.
            try:
                same = os.fstat(fd).st_ino == os.lstat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            previous = _read_holder(fd)
            if previous is None:
                os.close(fd)
                raise safe_io.OutputError(
                    f"{self.flag}={self.output}: {self.path} is not a lock "
                    "file of this package (it holds other data); it was left "
                    "as it is: move it away and run again")
            if previous.get("pid") and not previous.get("released"):
                logging.warning(
                    "Took over the lock of %s left by %s (process %s, no "
                    "longer running)", self.output,
                    previous.get("program", "a run"), previous["pid"])
            self._fd = fd
            self._leftovers = [entry for entry in previous.get("leftovers", [])
                               if _is_leftover_entry(entry)
                               and _still_the_same(entry)]
            self.previous_leftovers = [e["path"] for e in self._leftovers]
            self._write_record()
            return self
        raise OutputLockedError(f"{self.flag}={self.output}: its lock keeps "
                                "changing hands; another run is starting")

    def _open_lock_file(self):
        """Opens the lock file without following a link; only an empty file
        or one of this package's lock records is ever written."""
        try:
            fd = safe_io.open_no_follow(self.path, os.O_RDWR | os.O_CREAT)
        except safe_io.OutputError as error:
            raise safe_io.OutputError(
                f"{self.flag}={self.output}: {error}") from None
        except OSError as error:
            raise safe_io.OutputError(
                f"{self.flag}={self.output}: "
                + safe_io.describe_os_error(error, self.path)) from None
        try:
            safe_io.check_plain_file(fd, self.path)
        except safe_io.OutputError as error:
            os.close(fd)
            raise safe_io.OutputError(
                f"{self.flag}={self.output}: {error}") from None
        return fd

    def _write_record(self):
        record = json.dumps({
            "program": self.program, "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "leftovers": self._leftovers}).encode("utf-8")
        # Written over the old record, then cut to length: a reader that
        # finds it half-way reads the JSON value at the start.
        os.pwrite(self._fd, record, 0)
        os.ftruncate(self._fd, len(record))

    # === What this run may remove: its own record ===

    def record(self, path, before_rename_from=None):
        """Records `path` (a file or folder this run has just made, not yet
        in its final place) as removable by the next holder if this run is
        killed. The record holds what `path` is (device, inode, type), so
        only that very entry is ever removed, never something else under
        its name. A no-op for remote outputs.

        Args:
            path: the entry.
            before_rename_from: an entry this run is about to rename to
                `path` (recorded first, so a kill between the two steps
                leaves nothing unlisted).
        """
        if self._fd is None:
            return
        path = os.path.abspath(str(path))
        try:
            info = os.lstat(before_rename_from or path)
        except FileNotFoundError:
            return
        self._leftovers = [e for e in self._leftovers if e["path"] != path]
        self._leftovers.append({
            "path": path, "dev": info.st_dev, "ino": info.st_ino,
            "type": "folder" if stat.S_ISDIR(info.st_mode) else "file"})
        self._write_record()

    def forget(self, path):
        """Drops `path` from the record (it was renamed into place, or
        removed)."""
        if self._fd is None:
            return
        path = os.path.abspath(str(path))
        kept = [e for e in self._leftovers if e["path"] != path]
        if len(kept) != len(self._leftovers):
            self._leftovers = kept
            self._write_record()

    def make_folder(self, parent, prefix):
        """A new hidden folder `<parent>/<prefix><random>`, recorded.

        Returns:
            Its path.
        """
        parent = str(parent)
        if filesystems.is_remote(parent):
            import tensorflow as tf
            folder = parent.rstrip("/") + "/" + prefix + secrets.token_hex(4)
            tf.io.gfile.makedirs(folder)
            return folder
        import tempfile
        try:
            folder = tempfile.mkdtemp(prefix=prefix, dir=parent)
        except OSError as error:
            raise safe_io.OutputError(
                safe_io.describe_os_error(error, parent)) from None
        self.record(folder)
        return folder

    def is_recorded(self, path):
        """Whether `path` is in this lock's record, and is still the entry
        that was recorded."""
        path = os.path.abspath(str(path))
        return any(e["path"] == path and _still_the_same(e)
                   for e in self._leftovers)

    def remove_previous_leftovers(self):
        """Removes what a killed earlier holder recorded and never put in
        place, where the entry is still the one it made; anything else
        under such a name is left alone.

        Returns:
            The paths removed.
        """
        removed = []
        for path in list(getattr(self, "previous_leftovers", [])):
            if self.remove_recorded(path):
                removed.append(path)
        if removed:
            logging.info("Removed what a killed run of %s left: %s",
                         self.output, ", ".join(removed))
        return removed

    def remove_recorded(self, path):
        """Removes `path` if (and only if) this lock's record lists it and
        it is still the recorded entry; returns whether it did."""
        path = os.path.abspath(str(path))
        entry = next((e for e in self._leftovers if e["path"] == path), None)
        if entry is None:
            return False
        if _still_the_same(entry):
            if entry["type"] == "folder":
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
        else:
            logging.warning("Left %s alone: it is no longer what this "
                            "package's run made there", path)
        self.forget(path)
        return not os.path.lexists(path)

    def release(self):
        if self._fd is None:
            return
        if self._leftovers:
            # Kept for the next holder, which removes what is listed.
            record = _read_holder(self._fd) or {}
            record["released"] = True
            data = json.dumps(record).encode("utf-8")
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, len(data))
        else:
            try:
                if os.lstat(self.path).st_ino == os.fstat(self._fd).st_ino:
                    os.remove(self.path)
            except OSError:
                pass
        os.close(self._fd)
        self._fd = None

    @property
    def held(self):
        return self._fd is not None or self.path is None

    def fileno(self):
        """The lock file's descriptor (None: not held, or remote); a forked
        worker closes it so that the lock ends with its parent."""
        return self._fd

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


def _is_leftover_entry(entry):
    return (isinstance(entry, dict) and isinstance(entry.get("path"), str)
            and os.path.isabs(entry["path"])
            and isinstance(entry.get("dev"), int)
            and isinstance(entry.get("ino"), int)
            and entry.get("type") in ("file", "folder"))


def _still_the_same(entry):
    """Whether the recorded entry is still there, as it was recorded."""
    try:
        info = os.lstat(entry["path"])
    except OSError:
        return False
    kind = ("folder" if stat.S_ISDIR(info.st_mode) else
            "file" if stat.S_ISREG(info.st_mode) else None)
    return (kind == entry["type"] and info.st_dev == entry["dev"]
            and info.st_ino == entry["ino"])


def _read_holder(fd):
    """The lock file's record: {} when empty, None when it holds something
    that is not a record of this package's."""
    try:
        data = os.pread(fd, 1 << 20, 0)
    except OSError:
        return {}
    if not data.strip():
        return {}
    try:
        record, _ = json.JSONDecoder().raw_decode(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(record, dict) or not ("pid" in record
                                            or "program" in record):
        return None
    return record


def _describe_holder(holder):
    if not holder:
        return ""
    parts = [str(holder.get("program", "a program"))]
    if holder.get("pid"):
        parts.append(f"process {holder['pid']}")
    if holder.get("host") and holder.get("host") != socket.gethostname():
        parts.append(f"on {holder['host']}")
    if holder.get("started"):
        parts.append(f"since {holder['started']}")
    return " (" + ", ".join(parts) + ")"

