"""Keeping the user's data whole: the safe files every program writes.

A file is written under a hidden temporary name (`temporary_path`,
`.<name>.incomplete`, which no glob of the final name matches), every write
checked, and renamed into place (`AtomicFile`, `write_atomically`); it is
opened without following a link (`open_for_writing`, `open_new`), and a
rename never replaces a link or a device (`check_replaceable`). A failed
write is one `OutputError` naming the file and the cause (`write_failure`),
an output that cannot be written is refused before any work
(`check_output_path`), and a reader refuses an incomplete
`-NNNNN-of-MMMMM` shard set (`check_shard_set`). The output's lock lives in
`output_lock`, the run record in `run_record`. No TensorFlow at import.
Guide: docs/reliability.md.
"""

import errno
import os
import re
import secrets
import stat

from absl import logging

INCOMPLETE_SUFFIX = ".incomplete"
# "<prefix>-00003-of-00064", the official sharded names.
_SHARD = re.compile(r"^(?P<prefix>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})$")


class OutputError(ValueError):
    """An output cannot be written, or is held by another run (one line)."""


# `filesystems.is_remote`'s rule, kept here: filesystems writes through this
# module, which therefore imports nothing of it.
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
    fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT)
    try:
        check_plain_file(fd, path)
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
        fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        raise OutputError(f"could not write {path}: something is already "
                          "there (this program only creates new files under "
                          "this name)") from None
    return os.fdopen(fd, "wb", buffering=1 << 20)


def open_no_follow(path, flags):
    """`os.open` of a local file, never through a symbolic link.

    Args:
        path: the file.
        flags: `os.O_*` flags (`O_NOFOLLOW` and `O_CLOEXEC` are added); a
            file made is given the user's umask.

    Returns:
        The file descriptor.

    Raises:
        OutputError: a symbolic link is at `path` (names it and its target).
        OSError: the file cannot be opened otherwise (as `os.open` raises it).
    """
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


def check_plain_file(fd, path):
    """Refuses an opened entry that is not a plain file of one name.

    Args:
        fd: the descriptor `open_no_follow` gave.
        path: its name, for the message.

    Raises:
        OutputError: a device, a pipe or a socket, or a file with other hard
            links (this program never writes into a file it did not make).
    """
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
    with `lock`, it is recorded in that `output_lock.OutputLock` as this
    run's leftover until it is committed or aborted, so a killed run's
    temporary is removed by the next holder from that record.

    Args:
        path: the final path (local).
        lock: an `output_lock.OutputLock` held on the output, or None.
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


