"""Streaming reads of the text corpus: files -> lines -> documents -> chunks.

Input format (as the official ALBERT/BERT data script): one sentence per line,
a blank (or whitespace-only) line between documents. The end of a file also
ends a document. Files may be plain or gzip text (detected from the content),
local or URLs such as gs:// (through `foundation.filesystems`: every function
here takes the backend as `remote`).

Nothing here holds more than one chunk of text: lines stream from the files
and `iter_chunks` groups whole documents into chunks of about `chunk_bytes`
characters. The corpus is first cut into reading units (`plan_units`):
runs of consecutive files of at least `chunk_bytes` bytes together, so a
Beam pipeline reads the units in parallel while small files still share
chunks; chunk boundaries depend only on the input and `chunk_bytes`.
Bad input is either a clear `InputError` (missing or unreadable files, a
pattern matching nothing, a file in another encoding than UTF-8, named with
its first bad line) or a counted and logged skip (`ReadCounters`: a stray
non-UTF-8 line in UTF-8 text, lines over `max_line_bytes`, empty files). Files that are
not text at all (TFRecords, JSON such as the builder's own statistics files,
unfinished outputs, binary files) are dropped by `text_files` before
reading, so a glob that also covers earlier outputs reads only the corpus.
"""

import dataclasses
import gzip
import io
import os
import zlib

from absl import logging

from data_prep import tfrecord
from foundation import filesystems
from foundation import safe_io

_BUFFER_SIZE = 1 << 20
DEFAULT_MAX_LINE_BYTES = 1 << 20
_MAX_LOGGED_EXAMPLES = 5
# Bytes of each input looked at to tell text from other formats.
_SNIFF_BYTES = 8192


class InputError(ValueError):
    """The input files cannot be used (missing, unreadable, no text)."""


def expand_input_patterns(input_patterns, remote=filesystems.GFILE):
    """Expands comma-separated paths and glob patterns to a list of files.

    Order: patterns in the order given, each pattern's matches sorted.

    Args:
        input_patterns: a comma-separated string or a list of strings.
        remote: the backend of URLs (`foundation.filesystems`).

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
        matches = filesystems.glob(pattern, remote)
        if not matches:
            raise InputError("No file matches input pattern %r." % pattern)
        paths.extend(matches)
    _refuse_repeated_files(paths)
    problems = []
    for path in paths:
        if filesystems.is_remote(path):
            continue  # Opening reports remote problems.
        if not os.path.isfile(path):
            problems.append("%s is not a file" % path)
        elif not os.access(path, os.R_OK):
            problems.append("%s is not readable" % path)
    if problems:
        raise InputError("Unusable input files: " + "; ".join(problems))
    return paths


def _refuse_repeated_files(paths):
    """Refuses a file matched twice (`a.txt,a.txt`, `a.txt,*.txt`, a link and
    its target): read twice, its documents would silently be duplicated.

    Raises:
        InputError: naming the file.
    """
    seen = {}
    for path in paths:
        key = path if filesystems.is_remote(path) else os.path.realpath(path)
        if key in seen:
            raise InputError(
                "Input file %s is given twice (also as %s); name each file "
                "once (--dupe_factor repeats the data)" % (path, seen[key]))
        seen[key] = path


def _not_text_reason(path, remote):
    """Why `path` is not a text input (a short phrase), or None if it is."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if safe_io.is_temporary(name):
        return "an unfinished output"
    if name.endswith(".json"):
        return "JSON"
    with open_binary(path, remote) as stream:  # Decompresses gzip.
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
    _check_utf8(path, head, full=len(head) == _SNIFF_BYTES)
    return None


def _check_utf8(path, head, full):
    """Refuses a file in another encoding (Latin-1, UTF-16 ...): most of the
    lines of its first `_SNIFF_BYTES` do not decode as UTF-8. A stray bad
    line in UTF-8 text is skipped and counted later instead.

    Args:
        path: the file, for the message.
        head: its first bytes (decompressed).
        full: whether `head` was cut at `_SNIFF_BYTES` (its last line may
            be cut in a character).

    Raises:
        InputError: naming the file, the first bad line and the byte.
    """
    lines = head.split(b"\n")
    if full:
        lines = lines[:-1]
    bad, nonblank = [], 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        nonblank += 1
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            bad.append((number, line[e.start], e.start + 1))
    if bad and 2 * len(bad) >= nonblank:
        number, byte, column = bad[0]
        raise InputError(
            "Input file %s is not UTF-8 text (line %d, byte 0x%02x at column "
            "%d; %d of its first %d lines do not decode); convert it to "
            "UTF-8 (e.g. iconv -f latin1 -t utf-8)"
            % (path, number, byte, column, len(bad), nonblank))


def text_files(paths, remote=filesystems.GFILE):
    """Drops the inputs that are not text, logging them in one line.

    Args:
        paths: file paths (from `expand_input_patterns`).
        remote: the backend of URLs.

    Returns:
        The text files, in order.

    Raises:
        InputError: no input is text (the message names each file and why),
            or a file cannot be opened.
    """
    kept, dropped = [], []
    for path in paths:
        reason = _not_text_reason(path, remote)
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


def open_binary(path, remote=filesystems.GFILE):
    """Opens a plain or gzip file for buffered binary reading.

    Args:
        path: a local path or a URL.
        remote: the backend of URLs.

    Returns:
        A binary file object with `readline(limit)`.

    Raises:
        InputError: the file cannot be opened.
    """
    try:
        stream = filesystems.open_read(path, remote, _BUFFER_SIZE)
        if stream.peek(2)[:2] == b"\x1f\x8b":
            stream = io.BufferedReader(
                gzip.GzipFile(fileobj=stream, mode="rb"), _BUFFER_SIZE)
    except Exception as e:  # OSError locally, the backend's errors remotely.
        raise InputError("Cannot open input file %s: %s" % (path, e)) from None
    return stream


def read_bytes(path, remote=filesystems.GFILE):
    """Returns the whole content of a local file or a URL.

    Raises:
        OSError: the file cannot be read (the backend's message).
    """
    if not filesystems.is_remote(path):
        with open(path, "rb") as f:
            return f.read()
    try:
        with filesystems.open_read(path, remote) as f:
            return f.read()
    except Exception as e:
        raise OSError(str(e)) from None


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
                first = self.examples.get(kind)
                logging.warning("Skipped %d %s%s.", count,
                                kind.replace("_", " "),
                                " (first: %s)" % ", ".join(first) if first
                                else "")

    def as_dict(self):
        """Returns the counts as a plain dict (no examples)."""
        result = dataclasses.asdict(self)
        result.pop("examples")
        return result

    def merge(self, other):
        """Adds the counts (and the first examples) of another reader's
        `ReadCounters` to these, as when several units are read apart."""
        for name, value in other.as_dict().items():
            setattr(self, name, getattr(self, name) + value)
        for kind, seen in other.examples.items():
            mine = self.examples.setdefault(kind, [])
            mine.extend(seen[:_MAX_LOGGED_EXAMPLES - len(mine)])
        return self


def iter_numbered_lines(path, counters, max_line_bytes=DEFAULT_MAX_LINE_BYTES,
                        remote=filesystems.GFILE):
    """Yields `(line number, line)` for the decoded lines of one file.

    Line numbers count from 1 and include the skipped lines, so they name
    the same line whoever reads the file. Non-UTF-8 lines and lines over
    `max_line_bytes` are skipped and counted.

    Args:
        path: a file path or URL.
        counters: a `ReadCounters`, updated in place.
        max_line_bytes: longest line kept, in bytes.
        remote: the backend of URLs.

    Yields:
        `(int, str)`: the line number and the line, newline removed, blank
        ones included.

    Raises:
        InputError: the file cannot be opened or read (corrupt gzip...).
    """
    counters.files += 1
    file_lines = 0
    with open_binary(path, remote) as stream:
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
            yield line_number, line.rstrip("\r\n")
    counters.lines += file_lines
    if not line_number:
        counters.note("empty_files", path)


def iter_file_lines(path, counters, max_line_bytes=DEFAULT_MAX_LINE_BYTES,
                    remote=filesystems.GFILE):
    """Yields the decoded lines of one file (see `iter_numbered_lines`)."""
    for _, line in iter_numbered_lines(path, counters, max_line_bytes, remote):
        yield line


def plan_units(paths, sizes, chunk_bytes):
    """Cuts the file list into reading units.

    A unit is a run of consecutive files whose sizes add up to at least
    `chunk_bytes` (the last unit may hold less). Chunks never span two
    units, so units can be read apart (in parallel, by a Beam pipeline)
    while small files still share chunks with their neighbours.

    Args:
        paths: the input files, in corpus order.
        sizes: their sizes in bytes, as stored (compressed for gzip).
        chunk_bytes: the chunk size (see `iter_chunks`).

    Returns:
        A list of lists of paths, in corpus order.
    """
    units, current, current_size = [], [], 0
    for path, size in zip(paths, sizes):
        current.append(path)
        current_size += size
        if current_size >= chunk_bytes:
            units.append(current)
            current, current_size = [], 0
    if current:
        units.append(current)
    return units


def file_sizes(paths, remote=filesystems.GFILE):
    """The sizes of the input files, in bytes.

    Raises:
        InputError: a file cannot be sized.
    """
    sizes = []
    for path in paths:
        try:
            sizes.append(filesystems.size(path, remote))
        except Exception as e:  # OSError locally, the backend's errors remotely.
            raise InputError("Cannot read input file %s: %s" % (path, e)) from None
    return sizes


@dataclasses.dataclass
class Chunk:
    """Whole documents of the corpus, the unit of work and of shuffling.

    Attributes:
        index: position of the chunk in its reading unit (0, 1, ...).
        lines: the sentences, documents one after the other.
        doc_starts: index in `lines` where each document starts.
        unit: the reading unit (`plan_units`) the chunk comes from.
    """

    index: int
    lines: list
    doc_starts: list
    unit: int = 0

    @property
    def key(self):
        """`(unit, index)`: the chunk's place in the corpus and its seed."""
        return self.unit, self.index


def iter_chunks(paths, counters, chunk_bytes,
                max_line_bytes=DEFAULT_MAX_LINE_BYTES, unit=0,
                remote=filesystems.GFILE):
    """Groups the files of one reading unit into chunks of whole documents.

    A chunk closes at the first document end after it holds `chunk_bytes`
    characters of text (newlines included). A document that alone reaches
    `chunk_bytes` is split there (counted in `counters.split_documents`), so
    no chunk exceeds about twice `chunk_bytes` whatever the input. Chunk
    boundaries depend only on the input, so the work split is the same for
    any number of workers.

    Args:
        paths: the input files of the unit.
        counters: a `ReadCounters`, updated in place.
        chunk_bytes: target size of a chunk, in characters.
        max_line_bytes: longest line kept, in bytes.
        unit: the unit's index, stored in each chunk.
        remote: the backend of URLs.

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
        for line in iter_file_lines(path, counters, max_line_bytes, remote):
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
                yield Chunk(index, lines, doc_starts, unit)
                index += 1
                lines, doc_starts, chunk_size = [], [], 0
        close_document()  # A file end ends a document.
        if chunk_size >= chunk_bytes:
            yield Chunk(index, lines, doc_starts, unit)
            index += 1
            lines, doc_starts, chunk_size = [], [], 0
    if lines:
        yield Chunk(index, lines, doc_starts, unit)


def iter_corpus_chunks(units, counters, chunk_bytes,
                       max_line_bytes=DEFAULT_MAX_LINE_BYTES,
                       remote=filesystems.GFILE):
    """Yields the chunks of every reading unit, in corpus order."""
    for unit, paths in enumerate(units):
        yield from iter_chunks(paths, counters, chunk_bytes, max_line_bytes,
                               unit, remote)
