"""Where the pretraining-data builder writes, and how it replaces a run.

Names. `--output_file=data/train.tfrecord` gives the shard
`data/train.tfrecord` (one shard) or `data/train.tfrecord-00000-of-00064`, ...
(`--num_output_shards=64`), or the shards are listed, comma-separated. The
statistics file sits beside them as `<directory>/<stem>.stats.json`, where
`<stem>` is the first shard's base name without its last extension:
`data/train.stats.json`. It does not start with the shard name, so a record
glob such as `data/train.tfrecord*` never catches it (`stats_path`).

Replacing a run, never losing data:
- every file a run would write or remove is checked against the inputs
  first, after globs, comma lists and links are resolved, and the run is
  refused before anything is written if one of them is an input
  (`check_not_inputs`);
- shards are written under temporary names and renamed when all are complete
  (`ShardSet`), so an interrupted run leaves the previous run's files as they
  were;
- only then are the earlier run's files of the same `--output_file` that the
  new run did not replace removed (`earlier_outputs`): shards of another
  shard count (`-of-00004` beside the new `-of-00008`), the unsharded file,
  unfinished temporary files and the statistics file of the older naming
  (`<output_file>.stats.json`). A file is removed only if its content shows
  it is one of those outputs (TFRecord framing or the statistics JSON).

Order and sharding, one rule for the local builder and the Beam pipeline
(so both write the same bytes for the same input, seed and flags):
- the output order is one global random order: the records sorted by their
  seeded shuffle keys (`data_prep.shuffle`); with `--noglobal_shuffle`, the
  chunks in corpus order (`reader.Chunk.key`: the reading unit, then the
  chunk within it), each chunk's records in the chunk's own seeded shuffled
  order;
- the record at position p of that order goes to shard `p % num_shards`
  (`shard_of`), so shard sizes differ by at most one record, and in the
  global order every shard is a random sample of the whole output.
The local builder deals records as they come (`ShardSet`). The Beam pipeline
knows a piece's position (a bucket of the shuffle, or a chunk) only once
every earlier piece is counted, so each piece's records are stored grouped
by their index modulo `num_shards`, and each shard then copies, piece by
piece, the one group that falls to it (`data_prep.beam_pipeline`).

Temporary files. Besides the `.incomplete` shards, the global shuffle keeps
its buckets in a directory beside the shards, `<stem>.shuffle-temp-<id>`
(`data_prep.shuffle.temp_dir`), removed at the end of the run, also after an
error; a glob over the shards (`train.tfrecord*`) never matches it, and the
next run of the same output removes one that a killed run left.
"""

import json
import os
import posixpath
import re

from absl import logging

from data_prep import filesystems
from data_prep import reader
from data_prep import tfrecord

STATS_SUFFIX = ".stats.json"
# Shard names made from one path: "<path>-00003-of-00064".
_SHARD_PATTERN = r"-\d{5}-of-\d{5}"


def output_paths(output_file, num_output_shards=1):
    """Returns the shard paths for `--output_file` / `--num_output_shards`.

    A comma-separated list names the shards itself; a single path with
    `num_output_shards > 1` becomes `<path>-00000-of-0000N`, ...

    Raises:
        ValueError: a list whose length disagrees with `num_output_shards`.
    """
    paths = [p.strip() for p in output_file.split(",") if p.strip()]
    if not paths:
        raise ValueError("No output file given. Received: %r" % output_file)
    if num_output_shards < 1:
        raise ValueError("num_output_shards must be >= 1. Received: %d"
                         % num_output_shards)
    if len(paths) > 1:
        if num_output_shards not in (1, len(paths)):
            raise ValueError(
                "--output_file lists %d files but --num_output_shards is %d."
                % (len(paths), num_output_shards))
        return paths
    if num_output_shards == 1:
        return paths
    return ["%s-%05d-of-%05d" % (paths[0], i, num_output_shards)
            for i in range(num_output_shards)]


def _path_module(path):
    return posixpath if filesystems.is_remote(path) else os.path


def stats_path(output_file):
    """The statistics file of `--output_file`: `<directory>/<stem>.stats.json`.

    Args:
        output_file: the `--output_file` value (a path or a comma-separated
            list of shard paths; the first one names the file).

    Returns:
        The path, e.g. `data/train.stats.json` for `data/train.tfrecord`.
    """
    first = output_paths(output_file)[0]
    path_lib = _path_module(first)
    directory, name = path_lib.split(first)
    stem = path_lib.splitext(name)[0] or name
    return path_lib.join(directory, stem + STATS_SUFFIX)


def _is_earlier_output(path, name_is_stats, remote):
    """Whether the content of `path` shows it was written by the builder."""
    try:
        data = (reader.read_bytes(path, remote) if name_is_stats
                else _head(path, remote))
    except (OSError, reader.InputError):  # Unreadable: not touched.
        return False
    if name_is_stats:
        try:
            values = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            return False
        return isinstance(values, dict) and "output_files" in values
    # An empty shard (more shards than records) is an output too.
    return not data or tfrecord.is_record_header(data)


def _head(path, remote):
    with reader.open_binary(path, remote) as stream:
        return stream.read(tfrecord.HEADER_BYTES)


def earlier_outputs(output_file, new_files, remote=filesystems.GFILE):
    """Files of an earlier run of the same `--output_file` to remove.

    Only a single-path `output_file` has shards named after it (a list names
    its shards explicitly, and nothing else is touched).

    Args:
        output_file: the `--output_file` value.
        new_files: the paths this run writes (kept).
        remote: the backend of URLs (`data_prep.filesystems`).

    Returns:
        The paths, sorted: `<output_file>`, `<output_file>-NNNNN-of-NNNNN`,
        their unfinished `.incomplete` files and `<output_file>.stats.json`,
        when they exist, are not in `new_files` and their content shows they
        are outputs.
    """
    paths = [p.strip() for p in output_file.split(",") if p.strip()]
    if len(paths) != 1:
        return []
    prefix = paths[0]
    path_lib = _path_module(prefix)
    directory, base = path_lib.split(prefix)
    shard = re.compile(re.escape(base) + "(%s)?(%s)?$" % (
        _SHARD_PATTERN, re.escape(tfrecord.INCOMPLETE_SUFFIX)))
    old_stats = base + STATS_SUFFIX
    names = filesystems.listdir(directory, remote)
    keep = set(new_files)
    found = []
    for name in sorted(names):
        path = path_lib.join(directory, name)
        if path in keep or not (shard.match(name) or name == old_stats):
            continue
        if _is_earlier_output(path, name == old_stats, remote):
            found.append(path)
    return found


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


class ShardSet:
    """Deals framed records round-robin to shards under temporary names.

    Nothing appears under a final name before `commit()`; `abort()` deletes
    the temporary files and leaves any earlier files untouched.

    Args:
        paths: the final shard paths.
        remote: the backend of URLs.
    """

    def __init__(self, paths, remote=filesystems.GFILE):
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
        """The names shards are written under before `commit()`."""
        return [path + tfrecord.INCOMPLETE_SUFFIX for path in paths]

    def write(self, frame):
        """Appends one framed record to the next shard."""
        self._writers[shard_of(self.written, len(self._writers))].write(frame)
        self.written += 1

    def commit(self):
        """Renames every complete shard to its final name."""
        for writer in self._writers:
            writer.commit()

    def abort(self):
        """Deletes the temporary files (best effort)."""
        for writer in self._writers:
            writer.abort()

    @property
    def counts(self):
        """Records written to each shard."""
        return [writer.count for writer in self._writers]
