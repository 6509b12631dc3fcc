"""Keeping the user's data whole: one mechanism for every program.

Every program of the project (the data builders, training and fine-tuning,
the main job, export, conversion) writes its outputs through this module,
so each of the promises in docs/reliability.md is kept in one place:

- `OutputLock`: one writer per output. A run holds an exclusive lock on its
  output folder (or, for a file output, on that file's name); a second run
  fails at once with one line naming the output and the holder's process
  id. The lock is the kernel's (`flock`), so a killed holder's lock is gone
  with it, and the next run says that it took the lock over.
- `temporary_path` and `write_atomically`: a file is written under a hidden
  temporary name (`.<name>.incomplete`) that no glob of the final name
  matches, checked (a short write, a full disk or a file-size limit is an
  `OutputError` naming the file and the cause), and renamed into place. A
  half-written file is never mistaken for a result.
- `check_shard_set`: a reader refuses a set of `-NNNNN-of-MMMMM` shards with
  missing or extra shards, and unfinished temporary files.
- `check_output_path`: an output that cannot be written (a file where a
  folder is needed, a read-only place) is refused before any work.
- `RunRecord`: a rerun into an output folder that holds a run made from
  other inputs is refused before anything in it changes.

Remote paths (`gs://`, ...) have no kernel lock: `OutputLock` is then a
no-op that says so in one log line. This module imports no TensorFlow.
"""

import errno
import json
import os
import re
import secrets
import shutil
import socket
import stat
import time

from absl import logging

INCOMPLETE_SUFFIX = ".incomplete"
LOCK_NAME = ".albert.lock"
RUN_RECORD_NAME = "albert_run.json"
# "<prefix>-00003-of-00064", the official sharded names.
_SHARD = re.compile(r"^(?P<prefix>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})$")


class OutputError(ValueError):
    """An output cannot be written, or is held by another run (one line)."""


class OutputLockedError(OutputError):
    """Another live process holds the output's lock."""


def _is_remote(path):
    return "://" in str(path)


# === Errors ===

_CAUSES = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EFBIG: "the file-size limit was reached (ulimit -f)",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a file is in the way of a folder in the path",
    errno.EISDIR: "it is a folder",
}


def describe_os_error(error, path):
    """One line for an OSError met while writing `path`."""
    cause = _CAUSES.get(error.errno) or error.strerror or str(error)
    return f"could not write {path}: {cause}"


# The errnos of a write that failed for want of room or rights.
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS,
                 errno.EACCES, errno.EPERM, errno.EIO)


def write_failure(error, folder):
    """A failed write into `folder` (a full disk, a file-size limit, a
    read-only place) as one `OutputError` naming the file and the cause.

    Args:
        error: the exception met while writing: an `OSError`, or a
            TensorFlow file error (whose message reads "<path>; <cause>").
        folder: the folder being written.

    Returns:
        The `OutputError`, or `error` itself when it is not such a failure.
    """
    if isinstance(error, OSError) and error.errno in _WRITE_ERRNOS:
        return OutputError(describe_os_error(
            error, getattr(error, "filename", None) or folder))
    message = str(getattr(error, "message", "") or "")
    if folder and folder in message and hasattr(error, "error_code"):
        return OutputError("could not write "
                           + message.strip().splitlines()[0])
    return error


# === Atomic files ===

def temporary_path(path):
    """The hidden name `path` is written under until it is complete.

    `data/train.tfrecord-00000-of-00004` is written as
    `data/.train.tfrecord-00000-of-00004.incomplete`: no glob of the final
    names (`train.tfrecord-*`, `*.tfrecord*`) matches a name that starts
    with a dot.
    """
    path = str(path)
    head, sep, base = path.rpartition("/")
    return f"{head}{sep}.{base}{INCOMPLETE_SUFFIX}"


def unique_temporary_path(path):
    """A fresh hidden temporary name for `path`:
    `.<name>.<random>.incomplete` (see `temporary_path`)."""
    head, sep, base = str(path).rpartition("/")
    return f"{head}{sep}.{base}.{secrets.token_hex(4)}{INCOMPLETE_SUFFIX}"


def check_replaceable(path):
    """Refuses to rename a new file over `path` when what is there is not
    a plain file: a symbolic link (this program does not replace a link it
    did not make; an output named by a link is resolved up front by
    `resolve_output`), a device, a pipe or a socket.

    Raises:
        OutputError: naming `path` and what is there.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise OutputError(_planted_link(path))
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise OutputError(f"could not write {path}: a device, a pipe or a "
                          "socket is there; remove it or name another file")


def resolve_output(path, flag):
    """An output named by a symbolic link, resolved once, up front.

    A program writes beside the file or into the folder the link points to
    (never replacing the link), and says so in the log.

    Args:
        path: the output as the user gave it (local paths only are resolved).
        flag: the flag naming it, as the user typed it.

    Returns:
        The path to write: `path` itself, or the link's resolved target.
    """
    path = str(path)
    if _is_remote(path) or not os.path.islink(path.rstrip("/") or path):
        return path
    target = os.path.realpath(path)
    logging.info("%s=%s is a symbolic link: writing %s", flag, path, target)
    return target


def is_temporary(path):
    """Whether `path` is an unfinished file (this or an older naming)."""
    base = str(path).rstrip("/").rsplit("/", 1)[-1]
    return base.endswith(INCOMPLETE_SUFFIX)


def open_for_writing(path):
    """Opens a local file of this program's for writing, from empty, with
    the user's umask (binary, buffered).

    The file is opened without following a link (`O_NOFOLLOW`) and checked
    before it is truncated: a symbolic link, a device, a pipe or a file with
    other hard links planted under the name is refused, so a write never
    lands in a file elsewhere.

    Raises:
        OSError: the file cannot be opened (as `os.open` raises it).
        OutputError: something other than a plain file of one name is there.
    """
    fd = _open_no_follow(path, os.O_WRONLY | os.O_CREAT)
    try:
        _check_plain_file(fd, path)
        os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb", buffering=1 << 20)


def open_new(path):
    """Creates a new local file exclusively (`O_EXCL`, never through a
    link), with the user's umask (binary, buffered).

    Raises:
        OutputError: something already exists at `path` (names it).
    """
    try:
        fd = _open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        raise OutputError(f"could not write {path}: something is already "
                          "there (this program only creates new files under "
                          "this name)") from None
    return os.fdopen(fd, "wb", buffering=1 << 20)


def _open_no_follow(path, flags):
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise OutputError(_planted_link(path)) from None
        raise


def _planted_link(path):
    target = os.readlink(path) if os.path.islink(path) else "?"
    return (f"{path} is a symbolic link (to {target}) that this program did "
            "not make; it never writes through a link it did not make: "
            "remove the link")


def _check_plain_file(fd, path):
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise OutputError(f"could not write {path}: it is not a regular file "
                          "(a device, a pipe or a socket); remove it")
    if info.st_nlink > 1:
        raise OutputError(
            f"could not write {path}: it is a hard link to a file with "
            f"{info.st_nlink} names; this program never writes into a file "
            "it did not make: remove this name")


class AtomicFile:
    """A local file written under `temporary_path` and renamed on `commit`.

    Every write is checked: an `OSError` (a full disk, a file-size limit, a
    read-only file system) becomes an `OutputError` naming the final path
    and the cause, and the temporary file is removed.

    The temporary is opened without following a link: a link planted under
    its name is refused. With `unique`, it also has a fresh random name and
    is created exclusively (`O_EXCL`), so no earlier entry is ever reused;
    with `lock`, it is recorded in that `OutputLock` as this run's leftover
    until it is committed or aborted, so a killed run's temporary is removed
    by the next holder from that record.

    Args:
        path: the final path (local).
        lock: an `OutputLock` held on the output, or None.
        unique: a fresh random temporary name instead of `temporary_path`.
    """

    def __init__(self, path, lock=None, unique=False):
        self.path = str(path)
        self.temp_path = (unique_temporary_path(self.path) if unique
                          else temporary_path(self.path))
        self._lock = lock
        directory = os.path.dirname(self.path)
        try:
            if directory:
                os.makedirs(directory, exist_ok=True)
            self._file = (open_new(self.temp_path) if unique
                          else open_for_writing(self.temp_path))
        except OSError as error:
            raise OutputError(describe_os_error(error, self.path)) from None
        if lock is not None:
            lock.record(self.temp_path)
        self.bytes = 0

    def write(self, data):
        try:
            written = self._file.write(data)
        except OSError as error:
            self.abort()
            raise OutputError(describe_os_error(error, self.path)) from None
        if written is not None and written != len(data):
            self.abort()
            raise OutputError(f"could not write {self.path}: a short write "
                              f"({written} of {len(data)} bytes)")
        self.bytes += len(data)

    def finish(self):
        """Completes the file under its temporary name: flushed, synced and
        its size checked; the final name is untouched (a set of files is
        finished first, then renamed)."""
        if self._file.closed:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            if os.path.getsize(self.temp_path) != self.bytes:
                raise OSError(errno.EIO, "the file is shorter than written")
        except OSError as error:
            self.abort()
            raise OutputError(describe_os_error(error, self.path)) from None

    def commit(self):
        """Finishes the file and renames it to its final name (never over
        a device, a pipe or a socket)."""
        self.finish()
        try:
            check_replaceable(self.path)
            os.replace(self.temp_path, self.path)
        except OSError as error:
            self.abort()
            raise OutputError(describe_os_error(error, self.path)) from None
        except OutputError:
            self.abort()
            raise
        if self._lock is not None:
            self._lock.forget(self.temp_path)

    def abort(self):
        """Closes and removes the temporary file (best effort)."""
        try:
            self._file.close()
        except OSError:
            pass
        try:
            os.remove(self.temp_path)
        except OSError:
            pass
        if self._lock is not None:
            self._lock.forget(self.temp_path)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.commit()
        else:
            self.abort()
        return False


def write_atomically(path, data):
    """Writes `data` (bytes or str) to `path` through a checked temporary
    file and a rename: readers see the old file or the new one, never part.

    Remote paths go through `tf.io.gfile` (a temporary name, then a rename).

    Raises:
        OutputError: the file could not be written (names it and the cause).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = str(path)
    if _is_remote(path):
        import tensorflow as tf
        temp = temporary_path(path)
        with tf.io.gfile.GFile(temp, "wb") as f:
            f.write(data)
        tf.io.gfile.rename(temp, path, overwrite=True)
        return
    with AtomicFile(path, unique=True) as f:
        f.write(data)


# === Checks before any work ===

def check_output_path(path, flag, kind="folder"):
    """Refuses an output that cannot be made, before anything is written.

    Args:
        path: the output folder (kind "folder") or file (kind "file").
        flag: the flag as the user typed it (`--output_dir`).
        kind: "folder" or "file".

    Raises:
        OutputError: naming the flag, the path and what is wrong.
    """
    path = str(path)
    if not path:
        raise OutputError(f"{flag} is empty")
    if _is_remote(path):
        return
    if kind == "folder" and os.path.exists(path) and not os.path.isdir(path):
        raise OutputError(f"{flag}={path} is a file, not a folder")
    if kind == "file" and os.path.isdir(path):
        raise OutputError(f"{flag}={path} is a folder, not a file")
    if kind == "file" and os.path.exists(path) and not os.path.isfile(path):
        # A device, a pipe or a socket: renaming over it would destroy it.
        raise OutputError(f"{flag}={path} is not a regular file (a device, "
                          "a pipe or a socket); name a file")
    # The nearest existing folder must be writable (a read-only mount, a
    # folder of another user), and no file may stand where a folder goes.
    probe = os.path.abspath(path if kind == "folder" else
                            os.path.dirname(os.path.abspath(path)))
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise OutputError(f"{flag}={path}: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        cause = ("the file system is read-only" if _read_only(probe)
                 else "permission denied")
        raise OutputError(f"{flag}={path} cannot be written: {cause} ({probe})")
    if _read_only(probe):
        raise OutputError(f"{flag}={path} cannot be written: the file system "
                          f"is read-only ({probe})")


def _read_only(folder):
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_shard_set(paths, flag="--input_file"):
    """Refuses unfinished files and incomplete `-NNNNN-of-MMMMM` shard sets.

    Args:
        paths: the files a glob or list gave.
        flag: the flag they came from, as the user typed it.

    Returns:
        `paths`, unchanged, when they are whole.

    Raises:
        ValueError: an unfinished (`.incomplete`) file, or a shard set whose
            shards disagree on their count or miss some (names them).
    """
    unfinished = [p for p in paths if is_temporary(p)]
    if unfinished:
        raise ValueError(
            f"{flag} matches unfinished files of a build that did not "
            f"complete: {', '.join(unfinished[:3])}; run the build again")
    sets = {}
    for path in paths:
        match = _SHARD.match(str(path))
        if match:
            sets.setdefault(match["prefix"], []).append(
                (int(match["index"]), int(match["count"])))
    for prefix, shards in sorted(sets.items()):
        counts = sorted({count for _, count in shards})
        if len(counts) > 1:
            raise ValueError(
                f"{flag} matches shards of {prefix} from two builds (-of-"
                f"{'/'.join('%05d' % c for c in counts)}); remove the older "
                "set or name one")
        (count,) = counts
        present = {index for index, _ in shards}
        missing = sorted(set(range(count)) - present)
        extra = sorted(i for i in present if i >= count)
        if missing or extra:
            what = []
            if missing:
                what.append("missing " + ", ".join(
                    "%05d" % i for i in missing[:5])
                    + (" ..." if len(missing) > 5 else ""))
            if extra:
                what.append("extra " + ", ".join("%05d" % i for i in extra))
            raise ValueError(
                f"{flag}: the shard set {prefix}-NNNNN-of-{count:05d} is "
                f"incomplete ({'; '.join(what)} of {count} shards)")
    return paths


# === One writer per output ===

def lock_path(output, kind="folder"):
    """The lock file of an output folder, or of an output file's name."""
    output = os.path.abspath(str(output))
    if kind == "folder":
        return os.path.join(output, LOCK_NAME)
    directory, base = os.path.split(output)
    return os.path.join(directory, f".{base}.lock")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OutputLock:
    """An exclusive lock on one output, held for a run.

        with safe_io.OutputLock(options.output_dir, "run_pretraining",
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
        self.path = None if _is_remote(output) else lock_path(output, kind)
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
            raise OutputError(
                f"{self.flag}={self.output}: "
                + describe_os_error(error, os.path.dirname(self.path))) from None
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
                raise OutputError(
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
            fd = _open_no_follow(self.path, os.O_RDWR | os.O_CREAT)
        except OutputError as error:
            raise OutputError(f"{self.flag}={self.output}: {error}") from None
        except OSError as error:
            raise OutputError(f"{self.flag}={self.output}: "
                              + describe_os_error(error, self.path)) from None
        try:
            _check_plain_file(fd, self.path)
        except OutputError as error:
            os.close(fd)
            raise OutputError(f"{self.flag}={self.output}: {error}") from None
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
        if _is_remote(parent):
            import tensorflow as tf
            folder = parent.rstrip("/") + "/" + prefix + secrets.token_hex(4)
            tf.io.gfile.makedirs(folder)
            return folder
        import tempfile
        try:
            folder = tempfile.mkdtemp(prefix=prefix, dir=parent)
        except OSError as error:
            raise OutputError(describe_os_error(error, parent)) from None
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


# === What a run was made from ===

# Bytes read from each end of a file for its fingerprint.
_FINGERPRINT_BYTES = 1 << 20


def content_fingerprint(paths):
    """A cheap fingerprint of files' content, for a resumed run to check
    that its inputs are the ones it started from.

    Each file contributes its name (not its folder: a moved data set is the
    same data), its size and its first and last MiB: records rebuilt with
    another vocabulary, or another corpus, differ there. Reading is bounded
    (2 MiB a file), so shard sets of any size answer in moments.

    Args:
        paths: the files (local or remote), in the order the run reads them.

    Returns:
        A string: `"<n> files, <bytes> bytes, sha256 <hex16>"`.
    """
    import hashlib

    digest = hashlib.sha256()
    total = 0
    for path in paths:
        path = str(path)
        head, tail, size = _ends(path)
        total += size
        digest.update(os.path.basename(path).encode("utf-8") + b"\0")
        digest.update(str(size).encode("ascii") + b"\0" + head + tail)
    return (f"{len(paths)} files, {total} bytes, "
            f"sha256 {digest.hexdigest()[:16]}")


def _ends(path):
    """The first and last `_FINGERPRINT_BYTES` of a file, and its size."""
    if _is_remote(path):
        import tensorflow as tf
        size = tf.io.gfile.stat(path).length
        with tf.io.gfile.GFile(path, "rb") as f:
            head = f.read(_FINGERPRINT_BYTES)
            f.seek(max(size - _FINGERPRINT_BYTES, 0))
            tail = f.read()
        return head, tail, size
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(_FINGERPRINT_BYTES)
        f.seek(max(size - _FINGERPRINT_BYTES, 0))
        tail = f.read()
    return head, tail, size


class RunRecord:
    """What an output folder's run was made from: `albert_run.json`.

    A program names the settings that make its output what it is (its
    inputs, its model); `claim` writes them on the first run and, on a
    rerun, refuses one whose settings differ, naming each difference by its
    flag, before anything in the folder changes.

    Args:
        output_dir: the run's folder (local or remote).
        program: the program's name.
        settings: `{flag as typed: value}` (JSON values).
    """

    def __init__(self, output_dir, program, settings):
        self.output_dir = str(output_dir)
        self.program = program
        self.settings = {k: v for k, v in settings.items()}
        self.path = self.output_dir.rstrip("/") + "/" + RUN_RECORD_NAME

    def read(self):
        """The recorded run (a dict), or None when there is none."""
        try:
            if _is_remote(self.path):
                import tensorflow as tf
                if not tf.io.gfile.exists(self.path):
                    return None
                text = tf.io.gfile.GFile(self.path, "r").read()
            else:
                if not os.path.exists(self.path):
                    return None
                with open(self.path, encoding="utf-8") as f:
                    text = f.read()
            record = json.loads(text)
        except (OSError, ValueError, UnicodeDecodeError):
            raise OutputError(f"{self.path} is not readable JSON; it records "
                              "what this folder's run was made from") from None
        if not isinstance(record, dict):
            raise OutputError(f"{self.path} is not a run record")
        return record

    def differences(self, record):
        """The settings that differ from `record`'s, as `flag: old -> new`."""
        if record.get("program") != self.program:
            return [f"it holds a run of {record.get('program')}, not "
                    f"{self.program}"]
        old = record.get("settings", {})
        return [f"{flag}={old.get(flag)!r} there, {value!r} now"
                for flag, value in sorted(self.settings.items())
                if flag in old and old[flag] != value]

    def claim(self, flag="--output_dir"):
        """Records this run, or refuses a different earlier one.

        Raises:
            OutputError: the folder holds a run made from other settings.
        """
        record = self.read()
        if record is not None:
            changed = self.differences(record)
            if changed:
                raise OutputError(
                    f"{flag}={self.output_dir} holds an earlier run made from "
                    f"other inputs ({'; '.join(changed)}); choose another "
                    f"{flag}, or remove the folder to start over")
            return
        write_atomically(self.path, json.dumps(
            {"program": self.program, "settings": self.settings},
            indent=1, sort_keys=True) + "\n")
