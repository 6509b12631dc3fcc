"""Tests for data_prep.reader: patterns, plain/gzip/gfile, skips, chunks."""

import gzip
import os

import pytest

from data_prep import reader


def _write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def test_expand_patterns_order_and_errors(tmp_path):
    for name in ("b.txt", "a.txt", "c.log"):
        _write(tmp_path / name, "x\n")
    paths = reader.expand_input_patterns(
        "%s,%s" % (tmp_path / "c.log", tmp_path / "*.txt"))
    assert [os.path.basename(p) for p in paths] == ["c.log", "a.txt", "b.txt"]
    with pytest.raises(reader.InputError, match="No file matches"):
        reader.expand_input_patterns(str(tmp_path / "missing*.txt"))
    with pytest.raises(reader.InputError, match="No input files"):
        reader.expand_input_patterns(" , ")
    with pytest.raises(reader.InputError, match="not a file"):
        reader.expand_input_patterns(str(tmp_path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_an_error(tmp_path):
    path = _write(tmp_path / "secret.txt", "x\n")
    os.chmod(path, 0)
    with pytest.raises(reader.InputError, match="not readable"):
        reader.expand_input_patterns(path)


def test_plain_gzip_and_gfile_read_the_same(tmp_path):
    text = "first line\nsecond\n\nthird\r\n"
    plain = _write(tmp_path / "p.txt", text)
    packed = _write(tmp_path / "p.txt.gz", gzip.compress(text.encode()))
    disguised = _write(tmp_path / "gz_without_suffix", gzip.compress(text.encode()))
    expected = ["first line", "second", "", "third"]
    for path in (plain, packed, disguised, "file://" + plain):
        counters = reader.ReadCounters()
        assert list(reader.iter_file_lines(path, counters)) == expected
        assert counters.lines == 4


def test_bad_lines_are_counted_skips(tmp_path):
    data = b"good one\nbad \xff\xfe bytes\n" + b"y" * 100 + b"\nlast\n"
    path = _write(tmp_path / "mixed.txt", data)
    empty = _write(tmp_path / "empty.txt", b"")
    counters = reader.ReadCounters()
    lines = [line for name in (path, empty)
             for line in reader.iter_file_lines(name, counters,
                                                max_line_bytes=50)]
    assert lines == ["good one", "last"]
    assert counters.non_utf8_lines == 1
    assert counters.overlong_lines == 1
    assert counters.empty_files == 1
    assert "mixed.txt:2" in counters.examples["non_utf8_lines"][0]


def test_corrupt_gzip_is_a_clear_error(tmp_path):
    data = gzip.compress(b"some text\n" * 1000)
    path = _write(tmp_path / "broken.gz", data[:len(data) // 2])
    with pytest.raises(reader.InputError, match="broken.gz"):
        list(reader.iter_file_lines(path, reader.ReadCounters()))


def test_chunks_hold_whole_documents(tmp_path):
    docs = [["d%d s%d" % (d, s) for s in range(3)] for d in range(20)]
    text = "\n\n".join("\n".join(doc) for doc in docs) + "\n"
    path = _write(tmp_path / "c.txt", text)
    other = _write(tmp_path / "d.txt", "tail a\ntail b\n")  # No blank line.
    counters = reader.ReadCounters()
    chunks = list(reader.iter_chunks([path, other], counters, chunk_bytes=40))
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert len(chunks) > 3
    rebuilt = []
    for chunk in chunks:
        bounds = chunk.doc_starts + [len(chunk.lines)]
        for i in range(len(chunk.doc_starts)):
            rebuilt.append(chunk.lines[bounds[i]:bounds[i + 1]])
    assert rebuilt == docs + [["tail a", "tail b"]]
    assert counters.documents == 21 and counters.split_documents == 0


def test_huge_document_is_split_so_chunks_stay_bounded(tmp_path):
    text = "".join("line %d\n" % i for i in range(500))
    path = _write(tmp_path / "one_doc.txt", text)
    counters = reader.ReadCounters()
    chunks = list(reader.iter_chunks([path], counters, chunk_bytes=200))
    assert len(chunks) > 10
    assert max(sum(len(line) + 1 for line in c.lines) for c in chunks) <= 400
    assert counters.split_documents >= 10
    assert sum(len(c.lines) for c in chunks) == 500


def test_text_files_drops_other_formats_by_content_and_name(tmp_path, caplog):
    import logging

    from data_prep import tfrecord

    text = _write(tmp_path / "a.txt", "One line.\nbad \xff line?\n")
    packed = _write(tmp_path / "b.gz", gzip.compress(b"Gzip text.\n"))
    records = _write(tmp_path / "c", b"".join(tfrecord.frame_records([b"x"])))
    packed_records = _write(tmp_path / "d.gz", gzip.compress(
        b"".join(tfrecord.frame_records([b"y" * 100]))))
    sidecar = _write(tmp_path / "e.stats.json", '{"instances": 1}')
    binary = _write(tmp_path / "f.model", b"\n\x05piece\x00\x00\x80?")
    unfinished = _write(tmp_path / "g.txt.incomplete", "text\n")
    empty = _write(tmp_path / "h.txt", b"")
    caplog.set_level(logging.WARNING, logger="absl")
    kept = reader.text_files([text, packed, records, packed_records, sidecar,
                              binary, unfinished, empty])
    assert kept == [text, packed, empty]
    assert [r.getMessage() for r in caplog.records] == [
        "Skipping 5 input files that are not text: %s (TFRecord); "
        "%s (TFRecord); %s (JSON); %s (binary); %s (an unfinished output)"
        % (records, packed_records, sidecar, binary, unfinished)]
    with pytest.raises(reader.InputError,
                       match=r"No text among the input files: .*c \(TFRecord\)$"):
        reader.text_files([records])


def test_reading_units_and_their_chunks(tmp_path):
    sizes = [5, 30, 2, 2, 50, 1]
    paths = ["f%d" % i for i in range(len(sizes))]
    assert reader.plan_units(paths, sizes, 20) == [
        ["f0", "f1"], ["f2", "f3", "f4"], ["f5"]]
    assert reader.plan_units(paths, sizes, 1000) == [paths]
    docs = ["a%d\nb%d\n" % (i, i) for i in range(6)]
    files = [_write(tmp_path / ("%d.txt" % i), docs[i]) for i in range(6)]
    counters = reader.ReadCounters()
    units = reader.plan_units(files, reader.file_sizes(files), 12)
    chunks = list(reader.iter_corpus_chunks(units, counters, chunk_bytes=12))
    # Chunks never span two units; keys order them through the corpus.
    assert [c.key for c in chunks] == [(0, 0), (1, 0), (2, 0)]
    assert [c.lines for c in chunks] == [
        ["a0", "b0", "a1", "b1"], ["a2", "b2", "a3", "b3"],
        ["a4", "b4", "a5", "b5"]]
    assert counters.files == 6 and counters.documents == 6


def test_read_counters_merge_counts_and_first_examples():
    first, second = reader.ReadCounters(), reader.ReadCounters()
    first.files, second.files = 2, 3
    for i in range(4):
        first.note("non_utf8_lines", "a:%d" % i)
        second.note("non_utf8_lines", "b:%d" % i)
    second.note("empty_files", "e")
    first.merge(second)
    assert first.files == 5 and first.non_utf8_lines == 8
    assert first.examples["non_utf8_lines"] == [
        "a:0", "a:1", "a:2", "a:3", "b:0"]
    assert first.examples["empty_files"] == ["e"]
