"""Where the pretraining-data builder writes, and how it replaces a run.

Names: `--output_file=data/train.tfrecord` gives one shard of that name, or
`data/train.tfrecord-00000-of-00064`, ... (`--num_output_shards=64`), or a
comma-separated list; the statistics file is `<directory>/stats.<name>.json`
(`stats_path`), which no record glob of the shards catches.

A run never loses data: its outputs are checked against its inputs before
anything is written (`check_not_inputs`, `check_outputs`); shards are
written under hidden temporary names; then `commit_run` removes the earlier
run's files of the same output (`earlier_outputs`: only files whose name and
content show they are) and renames the shards and, last, the statistics
into place. A kill before the commit leaves the earlier run whole; a kill
during it leaves no statistics file and a shard set that readers refuse
(`safe_io.check_shard_set`) until the next run rebuilds it.

One sharding rule for the local builder and the Beam pipeline, so both
write the same bytes: the record at position p of the output order goes to
shard `p % num_shards` (`shard_of`). The local builder deals records as they
come (`ShardSet`); the Beam pipeline stores each piece's records grouped by
their index modulo `num_shards`.

The user's view (names, statistics, reruns, kills, temporary folders):
docs/pretraining_data.md and docs/reliability.md.
"""

import json
import os
import posixpath
import re

from absl import logging

from data_prep import reader
from data_prep import tfrecord
from foundation import filesystems
from foundation import safe_io

STATS_PREFIX = "stats."
STATS_EXTENSION = ".json"
# The names of earlier versions: "<stem>.stats.json", "<output>.stats.json".
OLD_STATS_SUFFIX = ".stats.json"
# Shard names made from one path: "<path>-00003-of-00064".
_SHARD_PATTERN = r"-\d{5}-of-\d{5}"
_MAX_SHARDS = 99999  # Five digits in "-NNNNN-of-NNNNN".


def output_paths(output_file, num_output_shards=1):
    """Returns the shard paths for `--output_file` / `--num_output_shards`.

    A comma-separated list names the shards itself; a single path with
    `num_output_shards > 1` becomes `<path>-00000-of-0000N`, ...

    Raises:
        ValueError: a list whose length disagrees with `num_output_shards`,
            or a name given twice.
    """
    paths = [p.strip() for p in output_file.split(",") if p.strip()]
    if not paths:
        raise ValueError("--output_file is empty. Received: %r" % output_file)
    if not 1 <= num_output_shards <= _MAX_SHARDS:
        raise ValueError("--num_output_shards must be in [1, %d]. Received: %d"
                         % (_MAX_SHARDS, num_output_shards))
    if len(paths) > 1:
        if num_output_shards not in (1, len(paths)):
            raise ValueError(
                "--output_file lists %d files but --num_output_shards is %d."
                % (len(paths), num_output_shards))
        if len({p if "://" in p else os.path.normpath(p)
                for p in paths}) != len(paths):
            raise ValueError("--output_file names a file twice: %s"
                             % output_file)
        return paths
    if num_output_shards == 1:
        return paths
    return ["%s-%05d-of-%05d" % (paths[0], i, num_output_shards)
            for i in range(num_output_shards)]


def _path_module(path):
    return posixpath if filesystems.is_remote(path) else os.path


def stats_path(output_file):
    """The statistics file of `--output_file`: `<directory>/stats.<name>.json`.

    Named after the whole output name (the first path of a list), so two
    outputs in one folder (`wiki.part_a`, `wiki.part_b`) never share one,
    and starting with `stats.`, so a glob over the shards
    (`train.tfrecord*`, `train.tfrecord-*`) does not match it.

    Args:
        output_file: the `--output_file` value (a path or a comma-separated
            list of shard paths; the first one names the file).

    Returns:
        The path, e.g. `data/stats.train.tfrecord.json` for
        `data/train.tfrecord`.
    """
    first = output_paths(output_file)[0]
    path_lib = _path_module(first)
    directory, name = path_lib.split(first)
    return path_lib.join(directory, STATS_PREFIX + name + STATS_EXTENSION)


def written_paths(output_file, num_output_shards=1):
    """Every final path a run of `--output_file` writes: its shards and its
    statistics file."""
    return (output_paths(output_file, num_output_shards)
            + [stats_path(output_file)])


def temporary_paths(paths):
    """The names `paths` are written under before they are committed: the
    hidden `.<name>.incomplete` (`safe_io.temporary_path`)."""
    return [safe_io.temporary_path(p) for p in paths]


def check_outputs(output_file, num_output_shards=1):
    """Refuses outputs that cannot be written, before any work: a folder
    where a shard goes, a read-only or missing-permission folder, a file in
    the way of a folder.

    Raises:
        safe_io.OutputError: naming `--output_file` and what is wrong.
    """
    for path in output_file.split(","):
        path = path.strip()
        if path and (path.endswith("/")
                     or os.path.basename(path) in (".", "..")):
            raise safe_io.OutputError(
                "--output_file=%s names a folder; give a file name, such as "
                "data/train.tfrecord" % path)
    for path in written_paths(output_file, num_output_shards):
        safe_io.check_output_path(path, "--output_file", kind="file")
        if not filesystems.is_remote(path):
            try:
                safe_io.check_replaceable(path)
            except safe_io.OutputError as error:
                raise safe_io.OutputError(f"--output_file: {error}") from None


def resolve_output_file(output_file):
    """`--output_file` with each path that is a symbolic link resolved to
    its target, once, up front (named in the log): the shards and the
    statistics are written beside the target, never over the link."""
    return ",".join(safe_io.resolve_output(p.strip(), "--output_file")
                    for p in output_file.split(",") if p.strip())


def _is_earlier_output(path, kind, base, remote):
    """Whether the content of `path` shows it was written by the builder
    for the output named `base` (`kind`: "shard", "stats" or "temp")."""
    if not filesystems.is_remote(path) and os.path.islink(path):
        return False  # Not made by a builder: builders never make links.
    if kind == "temp":
        # An unfinished shard or statistics file: its content says which.
        kind = "stats" if (STATS_PREFIX + base + STATS_EXTENSION) in path \
            else "shard"
    try:
        data = (reader.read_bytes(path, remote) if kind == "stats"
                else _head(path, remote))
    except (OSError, reader.InputError):  # Unreadable: not touched.
        return False
    if kind == "stats":
        return _stats_of(data, base)
    # An empty shard (more shards than records) is an output too.
    return not data or tfrecord.is_record_header(data)


def _stats_of(data, base):
    """Whether statistics JSON `data` describes shards of the output `base`
    (an older name may be shared by two outputs: `wiki.stats.json` of
    `wiki.part_a` and `wiki.part_b`; only this output's is touched)."""
    try:
        values = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return False
    if not isinstance(values, dict) or not isinstance(
            values.get("output_files"), list) or not values["output_files"]:
        return False
    ours = re.compile(re.escape(base) + "(%s)?$" % _SHARD_PATTERN)
    return all(isinstance(f, str) and ours.match(posixpath.basename(f))
               for f in values["output_files"])


def _head(path, remote):
    with reader.open_binary(path, remote) as stream:
        return stream.read(tfrecord.HEADER_BYTES)


def _kind_of(name, base):
    """What the file `name` beside the output `base` is to a rerun: "shard"
    (a shard of any count, or one left under an older unfinished name),
    "stats" (a statistics file of any naming), "temp" (an unfinished file
    of the current naming) or None (not this output's)."""
    shard = re.escape(base) + "(%s)?" % _SHARD_PATTERN
    stats = re.escape(STATS_PREFIX + base + STATS_EXTENSION)
    if re.fullmatch(shard + "(%s)?" % re.escape(tfrecord.INCOMPLETE_SUFFIX),
                    name):
        return "shard"
    if re.fullmatch(r"\.{1,2}(%s|%s)(%s){1,2}" % (
            shard, stats, re.escape(tfrecord.INCOMPLETE_SUFFIX)), name):
        return "temp"
    old = {base + OLD_STATS_SUFFIX,
           (posixpath.splitext(base)[0] or base) + OLD_STATS_SUFFIX}
    if name in old:
        return "stats"
    return None


def earlier_outputs(output_file, new_files, remote=filesystems.GFILE):
    """Files of an earlier run of the same `--output_file` to remove.

    Only a single-path `output_file` has shards named after it (a list names
    its shards explicitly, and only their unfinished files are found).

    Args:
        output_file: the `--output_file` value.
        new_files: the paths this run writes (kept).
        remote: the backend of URLs (`foundation.filesystems`).

    Returns:
        The paths, sorted: `<output_file>`, `<output_file>-NNNNN-of-NNNNN`
        and the unfinished files of a killed run (`.<name>.incomplete`, and
        `<name>.incomplete` of older versions) whose content shows they are
        outputs; statistics files of older namings (`<output_file>.stats.json`,
        `<stem>.stats.json`) that describe this output's shards and no
        other's. Never a file in `new_files` nor their temporary files.
    """
    paths = [p.strip() for p in output_file.split(",") if p.strip()]
    # This run's own temporary files (a killed run's of the same names are
    # overwritten by this run) are never "earlier".
    keep = set(new_files) | set(temporary_paths(new_files))
    found = []
    for prefix in paths:
        path_lib = _path_module(prefix)
        directory, base = path_lib.split(prefix)
        for name in sorted(filesystems.listdir(directory, remote)):
            path = path_lib.join(directory, name)
            kind = _kind_of(name, base)
            if len(paths) > 1 and kind != "temp":
                continue  # A list names its files: nothing else is touched.
            if (path in keep or kind is None or path in found
                    or not _is_earlier_output(path, kind, base, remote)):
                continue
            found.append(path)
    return sorted(found)


def _identities(path):
    """Keys equal for two names of one file: resolved path, device+inode."""
    if filesystems.is_remote(path):
        return {path}
    keys = {os.path.realpath(path)}
    try:
        stat = os.stat(path)
        keys.add((stat.st_dev, stat.st_ino))  # Hard links.
    except OSError:
        pass
    return keys


def check_not_inputs(input_paths, touched_paths):
    """Refuses a run that would write or remove one of its inputs.

    Args:
        input_paths: the input files (globs and lists already expanded).
        touched_paths: every path the run writes, renames or removes.

    Raises:
        ValueError: naming the output and the input it is.
    """
    inputs = {}
    for path in input_paths:
        for key in _identities(path):
            inputs.setdefault(key, path)
    for path in touched_paths:
        for key in _identities(path):
            if key in inputs:
                same = inputs[key]
                alias = "" if same == path else " (as %s)" % same
                raise ValueError(
                    "Output %s is also an input file%s; writing it would "
                    "destroy the input. Choose an output_file that no "
                    "input_file pattern matches." % (path, alias))


def remove_earlier_outputs(paths, output_file, remote=filesystems.GFILE):
    """Removes the files `earlier_outputs` found, logging them in one line.

    A file already gone (a retried commit) is passed over.
    """
    if not paths:
        return
    for path in paths:
        if filesystems.exists(path, remote):
            filesystems.remove(path, remote)
    logging.info("Removed %d files of an earlier run of %s: %s", len(paths),
                 output_file, ", ".join(paths))


def shard_of(position, num_shards):
    """The shard of the record at `position` of the output order (the
    sharding rule: round-robin, see the module docstring)."""
    return position % num_shards


def finished_path(path, remote=filesystems.GFILE):
    """Where a finished file of a run being committed is now: its temporary
    name until `commit_run` renames it, then its final name (a retried
    commit finds some shards already renamed)."""
    temp = safe_io.temporary_path(path)
    return temp if filesystems.exists(temp, remote) else path


def commit_run(shard_paths, stats_file, stats_text, earlier, output_file,
               remote=filesystems.GFILE):
    """Puts a run whose shards are finished under their temporary names in
    place of the earlier run's files.

    Steps (see the module docstring for what a kill between two leaves):
    1. the statistics are written under their temporary name: the last
       write, so a full disk fails here with every earlier file whole;
    2. the earlier statistics file is removed: until step 5 the output has
       none, the mark of a set being replaced;
    3. the earlier run's other files are removed, and, with several shards,
       the earlier shards of the same names: a kill during step 4 leaves a
       set with missing shards, which readers refuse
       (`safe_io.check_shard_set`), never a mix of two runs' shards;
    4. each shard is renamed to its final name;
    5. the statistics are renamed to theirs.
    Every step can run again (a Beam runner retries a commit).

    Args:
        shard_paths: the final shard paths.
        stats_file: the statistics file (`stats_path`).
        stats_text: its content.
        earlier: files of an earlier run to remove (`earlier_outputs`).
        output_file: the `--output_file` value (for the log).
        remote: the backend of URLs.

    Raises:
        safe_io.OutputError: a write or rename failed (names the file).
    """
    stats = tfrecord.ShardWriter(stats_file, remote)
    stats.write(stats_text.encode("utf-8"))
    stats.finish()
    try:
        if filesystems.exists(stats_file, remote):
            filesystems.remove(stats_file, remote)
        remove_earlier_outputs(earlier, output_file, remote)
        pending = [p for p in shard_paths if filesystems.exists(
            safe_io.temporary_path(p), remote)]
        if len(shard_paths) > 1:
            for path in pending:
                if filesystems.exists(path, remote):
                    filesystems.remove(path, remote)
        for path in pending:
            tfrecord.rename_into_place(safe_io.temporary_path(path), path,
                                       remote)
    except OSError as e:
        raise safe_io.OutputError(safe_io.describe_os_error(
            e, getattr(e, "filename", None) or output_file)) from None
    tfrecord.rename_into_place(stats.temp_path, stats_file, remote)


class LockedOutput:
    """Holds an `output_lock.OutputLock` for a run; on leaving, also removes the
    folder its lock file made if the run left it empty (a failed first run
    leaves nothing behind).

    Args:
        lock: the `output_lock.OutputLock`.
    """

    def __init__(self, lock):
        self._lock = lock
        self._made = None

    def __enter__(self):
        if self._lock.path:
            folder = os.path.dirname(self._lock.path)
            missing = []
            while folder and not os.path.exists(folder):
                missing.append(folder)
                folder = os.path.dirname(folder)
            self._made = missing
        self._lock.acquire()
        return self

    @property
    def lock(self):
        """The `output_lock.OutputLock` held (its record lists what the run may
        remove)."""
        return self._lock

    @property
    def fds(self):
        """The lock's open file descriptors (none for a remote output), for
        forked workers to close: the kernel drops the lock only when every
        copy of its descriptor is closed."""
        fd = self._lock.fileno()
        return () if fd is None else (fd,)

    def __exit__(self, *exc):
        self._lock.release()
        for folder in self._made or ():
            try:
                os.rmdir(folder)  # Only when empty.
            except OSError:
                break
        return False


class ShardSet:
    """Deals framed records round-robin to shards under temporary names.

    Nothing appears under a final name before `commit_run`; `abort()`
    deletes the temporary files and leaves any earlier files untouched.

    Args:
        paths: the final shard paths.
        remote: the backend of URLs.

    Raises:
        safe_io.OutputError: a shard cannot be created or written.
    """

    def __init__(self, paths, remote=filesystems.GFILE):
        self.paths = list(paths)
        self._writers = []
        self.written = 0
        try:
            for path in paths:
                self._writers.append(tfrecord.ShardWriter(path, remote))
        except BaseException:
            self.abort()
            raise

    @staticmethod
    def temporary_paths(paths):
        """The names shards are written under before they are committed."""
        return temporary_paths(paths)

    def write(self, frame):
        """Appends one framed record to the next shard."""
        self._writers[shard_of(self.written, len(self._writers))].write(frame)
        self.written += 1

    def finish(self):
        """Completes every shard under its temporary name (checked)."""
        for writer in self._writers:
            writer.finish()

    def commit(self):
        """Finishes every shard and renames each to its final name (a set
        without statistics; a run uses `commit_run`)."""
        self.finish()
        for writer in self._writers:
            writer.commit()

    @property
    def finished_paths(self):
        """The shards' temporary paths (complete after `finish`)."""
        return [writer.temp_path for writer in self._writers]

    def abort(self):
        """Deletes the temporary files (best effort)."""
        for writer in self._writers:
            writer.abort()

    @property
    def counts(self):
        """Records written to each shard."""
        return [writer.count for writer in self._writers]
