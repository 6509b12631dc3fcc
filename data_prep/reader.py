"""Streaming reads of the text corpus: files -> lines -> documents -> chunks.

Input format (as the official ALBERT/BERT data script): one sentence per line,
a blank (or whitespace-only) line between documents. The end of a file also
ends a document. Files may be plain or gzip text (detected from the content),
local or anything `tf.io.gfile` opens (paths holding "://", such as gs://).

Nothing here holds more than one chunk of text: lines stream from the files
and `iter_chunks` groups whole documents into chunks of about `chunk_bytes`
characters.
Bad input is either a clear `InputError` (missing or unreadable files, a
pattern matching nothing) or a counted and logged skip (`ReadCounters`:
non-UTF-8 lines, lines over `max_line_bytes`, empty files). Files that are
not text at all (TFRecords, JSON such as the builder's own statistics files,
unfinished outputs, binary files) are dropped by `text_files` before
reading, so a glob that also covers earlier outputs reads only the corpus.
"""

import dataclasses
import glob
import gzip
import io
import os
import zlib

from absl import logging

from data_prep import tfrecord

_BUFFER_SIZE = 1 << 20
DEFAULT_MAX_LINE_BYTES = 1 << 20
_MAX_LOGGED_EXAMPLES = 5
# Bytes of each input looked at to tell text from other formats.
_SNIFF_BYTES = 8192


class InputError(ValueError):
    """The input files cannot be used (missing, unreadable, no text)."""


def is_remote(path):
    """Returns whether `path` goes through `tf.io.gfile` (holds "://")."""
    return "://" in path


def expand_input_patterns(input_patterns):
    """Expands comma-separated paths and glob patterns to a list of files.

    Order: patterns in the order given, each pattern's matches sorted.

    Args:
        input_patterns: a comma-separated string or a list of strings.

    Returns:
        The list of file paths.

    Raises:
        InputError: a pattern matches nothing, or a match is not a readable
            file.
    """
    if isinstance(input_patterns, str):
        input_patterns = input_patterns.split(",")
    patterns = [p.strip() for p in input_patterns if p and p.strip()]
    if not patterns:
        raise InputError("No input files given.")
    paths = []
    for pattern in patterns:
        if is_remote(pattern):
            import tensorflow as tf
            matches = sorted(tf.io.gfile.glob(pattern))
        else:
            matches = sorted(glob.glob(pattern))
        if not matches:
            raise InputError("No file matches input pattern %r." % pattern)
        paths.extend(matches)
    problems = []
    for path in paths:
        if is_remote(path):
            continue  # Opening reports remote problems.
        if not os.path.isfile(path):
            problems.append("%s is not a file" % path)
        elif not os.access(path, os.R_OK):
            problems.append("%s is not readable" % path)
    if problems:
        raise InputError("Unusable input files: " + "; ".join(problems))
    return paths


def _not_text_reason(path):
    """Why `path` is not a text input (a short phrase), or None if it is."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name.endswith(tfrecord.INCOMPLETE_SUFFIX):
        return "an unfinished output"
    if name.endswith(".json"):
        return "JSON"
    with open_binary(path) as stream:  # Decompresses gzip.
        try:
            head = stream.read(_SNIFF_BYTES)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError("Cannot read input file %s: %s" % (path, e)) from None
    if tfrecord.is_record_header(head[:tfrecord.HEADER_BYTES]):
        return "TFRecord"
    # Text never holds NUL bytes; binary formats nearly always do. Invalid
    # UTF-8 alone is not enough: such lines are skipped one by one.
    if b"\0" in head:
        return "binary"
    return None


def text_files(paths):
    """Drops the inputs that are not text, logging them in one line.

    Args:
        paths: file paths (from `expand_input_patterns`).

    Returns:
        The text files, in order.

    Raises:
        InputError: no input is text (the message names each file and why),
            or a file cannot be opened.
    """
    kept, dropped = [], []
    for path in paths:
        reason = _not_text_reason(path)
        if reason:
            dropped.append("%s (%s)" % (path, reason))
        else:
            kept.append(path)
    if not kept:
        raise InputError("No text among the input files: %s"
                         % "; ".join(dropped))
    if dropped:
        logging.warning("Skipping %d input files that are not text: %s",
                        len(dropped), "; ".join(dropped))
    return kept


class _GFileRaw(io.RawIOBase):
    """A raw stream over a `tf.io.gfile.GFile`, for `io.BufferedReader`."""

    def __init__(self, gfile):
        self._gfile = gfile

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self._gfile.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self):
        self._gfile.close()
        super().close()


def open_binary(path):
    """Opens a plain or gzip file for buffered binary reading.

    Args:
        path: a local path or a `tf.io.gfile` URL.

    Returns:
        A binary file object with `readline(limit)`.

    Raises:
        InputError: the file cannot be opened.
    """
    try:
        if is_remote(path):
            import tensorflow as tf
            stream = io.BufferedReader(
                _GFileRaw(tf.io.gfile.GFile(path, "rb")), _BUFFER_SIZE)
        else:
            stream = open(path, "rb", buffering=_BUFFER_SIZE)
        if stream.peek(2)[:2] == b"\x1f\x8b":
            stream = io.BufferedReader(
                gzip.GzipFile(fileobj=stream, mode="rb"), _BUFFER_SIZE)
    except Exception as e:  # OSError locally, tf.errors.* remotely.
        raise InputError("Cannot open input file %s: %s" % (path, e)) from None
    return stream


def read_bytes(path):
    """Returns the whole content of a local or `tf.io.gfile` file."""
    if is_remote(path):
        import tensorflow as tf
        try:
            with tf.io.gfile.GFile(path, "rb") as f:
                return f.read()
        except Exception as e:
            raise OSError(str(e)) from None
    with open(path, "rb") as f:
        return f.read()


@dataclasses.dataclass
class ReadCounters:
    """What reading saw and skipped (all counts; examples for the log)."""

    files: int = 0
    empty_files: int = 0
    lines: int = 0
    bytes: int = 0
    non_utf8_lines: int = 0
    overlong_lines: int = 0
    documents: int = 0
    split_documents: int = 0
    examples: dict = dataclasses.field(default_factory=dict)

    def note(self, kind, where):
        """Counts one skip of `kind` at `where` and logs the first few."""
        setattr(self, kind, getattr(self, kind) + 1)
        seen = self.examples.setdefault(kind, [])
        if len(seen) < _MAX_LOGGED_EXAMPLES:
            seen.append(where)
            logging.warning("Skipping %s: %s", kind.replace("_", " "), where)

    def log_skips(self):
        """Logs one summary line per kind of skip seen."""
        for kind in ("empty_files", "non_utf8_lines", "overlong_lines"):
            count = getattr(self, kind)
            if count:
                logging.warning("Skipped %d %s (first: %s).", count,
                                kind.replace("_", " "),
                                ", ".join(self.examples.get(kind, [])))

    def as_dict(self):
        """Returns the counts as a plain dict (no examples)."""
        result = dataclasses.asdict(self)
        result.pop("examples")
        return result


def iter_file_lines(path, counters, max_line_bytes=DEFAULT_MAX_LINE_BYTES):
    """Yields the decoded lines of one file (newline removed).

    Non-UTF-8 lines and lines over `max_line_bytes` are skipped and counted.

    Args:
        path: a file path.
        counters: a `ReadCounters`, updated in place.
        max_line_bytes: longest line kept, in bytes.

    Yields:
        `str` lines, blank ones included.

    Raises:
        InputError: the file cannot be opened or read (corrupt gzip...).
    """
    counters.files += 1
    file_lines = 0
    with open_binary(path) as stream:
        line_number = 0
        while True:
            try:
                raw = stream.readline(max_line_bytes + 1)
                if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                    # Drain the rest of the overlong line, a bounded piece at
                    # a time.
                    while raw and not raw.endswith(b"\n"):
                        raw = stream.readline(max_line_bytes + 1)
                    line_number += 1
                    counters.note("overlong_lines", "%s:%d" % (path, line_number))
                    continue
            except (OSError, EOFError, zlib.error) as e:
                raise InputError(
                    "Cannot read input file %s after line %d: %s"
                    % (path, line_number, e)) from None
            if not raw:
                break
            line_number += 1
            counters.bytes += len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                counters.note("non_utf8_lines",
                              "%s:%d (%s)" % (path, line_number, e.reason))
                continue
            file_lines += 1
            yield line.rstrip("\r\n")
    counters.lines += file_lines
    if not line_number:
        counters.note("empty_files", path)


def iter_lines(paths, counters, max_line_bytes=DEFAULT_MAX_LINE_BYTES):
    """Yields the decoded lines of several files in order (see above)."""
    for path in paths:
        yield from iter_file_lines(path, counters, max_line_bytes)


@dataclasses.dataclass
class Chunk:
    """Whole documents of the corpus, the unit of work and of shuffling.

    Attributes:
        index: position of the chunk in the corpus (0, 1, ...).
        lines: the sentences, documents one after the other.
        doc_starts: index in `lines` where each document starts.
    """

    index: int
    lines: list
    doc_starts: list


def iter_chunks(paths, counters, chunk_bytes,
                max_line_bytes=DEFAULT_MAX_LINE_BYTES):
    """Groups the corpus into chunks of whole documents.

    A chunk closes at the first document end after it holds `chunk_bytes`
    characters of text (newlines included). A document that alone reaches
    `chunk_bytes` is split there (counted in `counters.split_documents`), so
    no chunk exceeds about twice `chunk_bytes` whatever the input. Chunk
    boundaries depend only on the input, so the work split is the same for
    any number of workers.

    Args:
        paths: the input files.
        counters: a `ReadCounters`, updated in place.
        chunk_bytes: target size of a chunk, in characters.
        max_line_bytes: longest line kept, in bytes.

    Yields:
        `Chunk`s.
    """
    index = 0
    lines, doc_starts = [], []
    chunk_size = 0
    doc_size = 0  # Characters of the open document (0: none open).

    def close_document():
        nonlocal doc_size
        if doc_size:
            counters.documents += 1
        doc_size = 0

    for path in paths:
        for line in iter_file_lines(path, counters, max_line_bytes):
            if not line.strip():
                close_document()
            else:
                if not doc_size:
                    doc_starts.append(len(lines))
                lines.append(line)
                size = len(line) + 1
                doc_size += size
                chunk_size += size
                if doc_size >= chunk_bytes:
                    counters.split_documents += 1
                    close_document()
            if not doc_size and chunk_size >= chunk_bytes:
                yield Chunk(index, lines, doc_starts)
                index += 1
                lines, doc_starts, chunk_size = [], [], 0
        close_document()  # A file end ends a document.
        if chunk_size >= chunk_bytes:
            yield Chunk(index, lines, doc_starts)
            index += 1
            lines, doc_starts, chunk_size = [], [], 0
    if lines:
        yield Chunk(index, lines, doc_starts)
