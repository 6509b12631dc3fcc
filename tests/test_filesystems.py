"""Tests for foundation.filesystems: local paths and both URL backends."""

import gzip

import pytest

from data_prep import reader
from foundation import filesystems


def _round_trip(root, remote):
    """Writes, renames, lists, sizes, reads and removes under `root`."""
    path = root + "/d/a.txt"
    with filesystems.create(path + ".tmp", remote) as f:
        f.write(b"one\ntwo\n")
    filesystems.rename(path + ".tmp", path, remote)
    with filesystems.create(root + "/d/b.txt", remote) as f:
        f.write(b"old")
    filesystems.rename(path, root + "/d/b.txt", remote)  # Replaces b.txt.
    assert filesystems.listdir(root + "/d", remote) == ["b.txt"]
    assert filesystems.glob(root + "/d/*.txt", remote) == [root + "/d/b.txt"]
    assert filesystems.size(root + "/d/b.txt", remote) == 8
    with filesystems.open_read(root + "/d/b.txt", remote) as f:
        f.seek(4)
        assert f.read() == b"two\n"
    assert filesystems.exists(root + "/d/b.txt", remote)
    filesystems.remove(root + "/d/b.txt", remote)
    assert not filesystems.exists(root + "/d/b.txt", remote)
    assert filesystems.listdir(root + "/missing", remote) == []
    with filesystems.create(root + "/d/e/f", remote) as f:
        f.write(b"x")
    filesystems.remove_tree(root + "/d", remote)
    assert not filesystems.exists(root + "/d/e/f", remote)
    filesystems.remove_tree(root + "/d", remote)  # Gone already: no error.


def test_local_paths(tmp_path):
    _round_trip(str(tmp_path), filesystems.GFILE)
    assert not filesystems.is_remote(str(tmp_path))


def test_urls_through_beam_filesystems(tmp_path, beam_test_urls):
    root = beam_test_urls(tmp_path)
    assert filesystems.is_remote(root)
    _round_trip(root, filesystems.BEAM)
    # The reader on a URL: globs, gzip detected from the content.
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(b"Hello there.\n\nBye.\n"))
    (tmp_path / "c.json").write_text("{}")
    inputs = reader.expand_input_patterns(root + "/c.*", filesystems.BEAM)
    assert inputs == [root + "/c.json", root + "/c.txt.gz"]
    texts = reader.text_files(inputs, filesystems.BEAM)
    counters = reader.ReadCounters()
    assert list(reader.iter_file_lines(texts[0], counters,
                                       remote=filesystems.BEAM)) == [
        "Hello there.", "", "Bye."]
    assert reader.read_bytes(root + "/c.json", filesystems.BEAM) == b"{}"
    with pytest.raises(reader.InputError, match="No file matches"):
        reader.expand_input_patterns(root + "/none*", filesystems.BEAM)


def test_urls_through_tf_io_gfile(tmp_path):
    _round_trip("file://" + str(tmp_path), filesystems.GFILE)
