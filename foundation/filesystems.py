"""Where data prep reads and writes: local paths, and URLs through a backend.

A local path goes through `os` and `open`. A path holding "://" (gs://,
s3://, hdfs://) goes through one of two backends, chosen by the caller:

- `GFILE`, `tf.io.gfile`: the local builder and the vocabulary trainer (the
  default). gs:// works with TensorFlow alone.
- `BEAM`, Apache Beam's `FileSystems`: the Beam runner path, whose workers
  never load TensorFlow. gs:// needs `apache-beam[gcp]`.

Both are stateless (they pickle into Beam transforms), and TensorFlow and
Beam are imported only when a URL is met, so workers that read local files
import neither.
"""

import glob as glob_lib
import io
import os
import shutil


def is_remote(path):
    """Whether `path` goes through a backend (it holds "://")."""
    return "://" in path


class _RawReader(io.RawIOBase):
    """A raw stream over any object with `read(n)`, for `io.BufferedReader`."""

    def __init__(self, stream):
        self._stream = stream

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def seekable(self):
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        self._stream.seek(offset, whence)  # GFile's returns None.
        return self._stream.tell()

    def tell(self):
        return self._stream.tell()

    def close(self):
        self._stream.close()
        super().close()


class GFileBackend:
    """URLs through `tf.io.gfile`."""

    name = "tf.io.gfile"

    def glob(self, pattern):
        import tensorflow as tf
        return tf.io.gfile.glob(pattern)

    def open(self, path):
        import tensorflow as tf
        return _RawReader(tf.io.gfile.GFile(path, "rb"))

    def create(self, path):
        import tensorflow as tf
        parent = path.rsplit("/", 1)[0]
        if not tf.io.gfile.isdir(parent):  # file:// and HDFS need folders.
            tf.io.gfile.makedirs(parent)
        return tf.io.gfile.GFile(path, "wb")

    def rename(self, source, target):
        import tensorflow as tf
        tf.io.gfile.rename(source, target, overwrite=True)

    def remove(self, path):
        import tensorflow as tf
        tf.io.gfile.remove(path)

    def exists(self, path):
        import tensorflow as tf
        return tf.io.gfile.exists(path)

    def listdir(self, directory):
        import tensorflow as tf
        if not tf.io.gfile.isdir(directory):
            return []
        return [name.rstrip("/") for name in tf.io.gfile.listdir(directory)]

    def size(self, path):
        import tensorflow as tf
        return tf.io.gfile.stat(path).length

    def remove_tree(self, directory):
        import tensorflow as tf
        if tf.io.gfile.exists(directory):
            tf.io.gfile.rmtree(directory)


class BeamBackend:
    """URLs through Apache Beam's `FileSystems` (no TensorFlow)."""

    name = "apache_beam FileSystems"

    @staticmethod
    def _fs():
        from apache_beam.io.filesystems import FileSystems
        return FileSystems

    @staticmethod
    def _uncompressed():
        from apache_beam.io.filesystem import CompressionTypes
        return CompressionTypes.UNCOMPRESSED

    def glob(self, pattern):
        (result,) = self._fs().match([pattern])
        return [metadata.path for metadata in result.metadata_list]

    def open(self, path):
        # Gzip is detected from the content by the reader, not the name.
        return _RawReader(self._fs().open(
            path, compression_type=self._uncompressed()))

    def create(self, path):
        return self._fs().create(path, compression_type=self._uncompressed())

    def rename(self, source, target):
        fs = self._fs()
        if fs.exists(target):  # Some stores refuse to rename over a file.
            fs.delete([target])
        fs.rename([source], [target])

    def remove(self, path):
        self._fs().delete([path])

    def exists(self, path):
        return self._fs().exists(path)

    def listdir(self, directory):
        fs = self._fs()
        prefix = directory.rstrip("/") + "/"
        (result,) = fs.match([prefix + "*"])
        return [m.path[len(prefix):].rstrip("/") for m in result.metadata_list]

    def size(self, path):
        (result,) = self._fs().match([path])
        return result.metadata_list[0].size_in_bytes

    def remove_tree(self, directory):
        fs = self._fs()
        directory = directory.rstrip("/") + "/"
        if fs.exists(directory):
            fs.delete([directory])


GFILE = GFileBackend()
BEAM = BeamBackend()


def glob(pattern, remote=GFILE):
    """The paths matching a glob pattern, sorted."""
    if is_remote(pattern):
        return sorted(remote.glob(pattern))
    return sorted(glob_lib.glob(pattern))


def open_read(path, remote=GFILE, buffering=1 << 20):
    """Opens a file for buffered binary reading (seekable)."""
    if is_remote(path):
        return io.BufferedReader(remote.open(path), buffering)
    return open(path, "rb", buffering=buffering)


def create(path, remote=GFILE):
    """Opens a new binary file for writing, replacing any file there
    (missing folders are made)."""
    if is_remote(path):
        return remote.create(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    from foundation import safe_io  # A link planted there is never followed.
    return safe_io.open_for_writing(path)


def rename(source, target, remote=GFILE):
    """Renames a file, replacing `target`."""
    if is_remote(target):
        remote.rename(source, target)
    else:
        os.replace(source, target)


def remove(path, remote=GFILE):
    """Deletes a file."""
    if is_remote(path):
        remote.remove(path)
    else:
        os.remove(path)


def exists(path, remote=GFILE):
    """Whether a file exists."""
    return remote.exists(path) if is_remote(path) else os.path.exists(path)


def listdir(directory, remote=GFILE):
    """The names in `directory`; none when it does not exist."""
    if is_remote(directory):
        return remote.listdir(directory)
    directory = directory or "."
    return os.listdir(directory) if os.path.isdir(directory) else []


def size(path, remote=GFILE):
    """A file's size in bytes."""
    return remote.size(path) if is_remote(path) else os.path.getsize(path)


def remove_tree(directory, remote=GFILE):
    """Deletes a directory and everything in it (nothing if it is gone)."""
    if is_remote(directory):
        remote.remove_tree(directory)
    else:
        shutil.rmtree(directory, ignore_errors=True)


def require_beam():
    """Checks that Apache Beam is installed (for `--runner`).

    Raises:
        ValueError: it is not, naming the package to install.
    """
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        raise ValueError(
            "--runner needs Apache Beam: pip install apache-beam==2.77.0 "
            "(apache-beam[gcp] for gs://), or this package's [beam] extra."
        ) from None
