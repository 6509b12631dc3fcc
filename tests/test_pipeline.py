"""End-to-end tests for data_prep.pipeline on a generated corpus."""

import glob
import gzip
import json
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from data_prep import instances
from data_prep import pipeline
from data_prep import reader
from data_prep import shuffle
from data_prep import text
from data_prep import tfrecord
from data_prep import vocab

SEQ, PRED = 128, 20

# The spec of the official ALBERT run_pretraining.py, written out literally.
OFFICIAL_SPEC = {
    "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "token_boundary": tf.io.FixedLenFeature([SEQ], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([PRED], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([PRED], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([PRED], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}


def _parse(paths):
    records = [r.numpy() for r in tf.data.TFRecordDataset(paths)]
    parsed = tf.io.parse_example(records, OFFICIAL_SPEC)
    return {k: v.numpy() for k, v in parsed.items()}


@pytest.fixture(scope="module")
def built(tmp_path_factory, corpus_files, spm_model_path):
    """One run over the corpus: dupe 3, seq 128, 3 shards."""
    out = str(tmp_path_factory.mktemp("built") / "train.tfrecord")
    stats = pipeline.create_pretraining_data(
        corpus_files, out, spm_model_path,
        options=instances.InstanceOptions(max_seq_length=SEQ,
                                          max_predictions_per_seq=PRED),
        dupe_factor=3, num_output_shards=3, chunk_bytes=100_000)
    return out, stats, _parse(stats["output_files"])


def _interrupt_at_chunk(monkeypatch, index):
    """Makes the pipeline stop (as on Ctrl-C) when it reaches chunk `index`."""
    real_call = pipeline.ChunkProcessor.__call__

    def failing_call(self, chunk):
        if chunk.index == index:
            raise KeyboardInterrupt("simulated interruption")
        return real_call(self, chunk)

    monkeypatch.setattr(pipeline.ChunkProcessor, "__call__", failing_call)


def test_outputs_and_statistics_file(built):
    out, stats, features = built
    assert stats["output_files"] == ["%s-%05d-of-00003" % (out, i) for i in range(3)]
    assert not glob.glob(out + "*" + tfrecord.INCOMPLETE_SUFFIX)
    # The statistics file is not caught by a glob over the shards.
    assert sorted(glob.glob(out + "*")) == stats["output_files"]
    with open(os.path.join(os.path.dirname(out),
                           "stats.train.tfrecord.json")) as f:
        on_disk = json.load(f)
    assert on_disk["instances"] == stats["instances"] == len(features["input_ids"])
    assert sum(on_disk["records_per_shard"]) == stats["instances"]
    assert max(on_disk["records_per_shard"]) - min(on_disk["records_per_shard"]) <= 1
    for key in ("tokens", "masked_fraction", "ngram_histogram",
                "sop_label_counts", "short_seq_fraction", "skipped"):
        assert key in on_disk


def test_round_trip_layout_and_masks(built, spm_model, corpus_dir):
    _, _, f = built
    # Every document of the corpus as one comma-joined id string.
    docs = []
    for name in ("a.txt", "b.txt"):
        with open(corpus_dir / name, encoding="utf-8") as fh:
            for block in fh.read().split("\n\n"):
                lines = [line for line in block.split("\n") if line.strip()]
                ids = sum(text.tokenize_to_ids(spm_model, lines), [])
                docs.append("," + ",".join(map(str, ids)) + ",")
    corpus = "|".join(docs)
    special = {vocab.CLS_ID, vocab.SEP_ID, vocab.PAD_ID}
    for row in range(0, len(f["input_ids"]), 37):
        ids = f["input_ids"][row]
        n = int(f["input_mask"][row].sum())
        count = int(f["masked_lm_weights"][row].sum())
        positions = f["masked_lm_positions"][row, :count]
        original = ids.copy()
        original[positions] = f["masked_lm_ids"][row, :count]
        pieces = [spm_model.id_to_piece(int(i)) for i in original[:n]]
        seps = [i for i, p in enumerate(pieces) if p == "[SEP]"]
        assert pieces[0] == "[CLS]" and len(seps) == 2 and seps[1] == n - 1
        assert "[CLS]" not in pieces[1:] and "[MASK]" not in pieces
        a, b = original[1:seps[0]], original[seps[0] + 1:n - 1]
        assert len(a) and len(b)
        assert f["segment_ids"][row].tolist() == (
            [0] * (seps[0] + 1) + [1] * (n - seps[0] - 1) + [0] * (SEQ - n))
        assert not original[n:].any()
        # A and B are contiguous token runs of one corpus document.
        for segment in (a, b):
            assert "," + ",".join(map(str, segment)) + "," in corpus
        # Masked positions: recorded ids are the originals, specials never.
        assert not set(original[positions].tolist()) & special
        assert f["masked_lm_weights"][row].tolist() == (
            [1.0] * count + [0.0] * (PRED - count))
        assert not f["masked_lm_positions"][row, count:].any()
        assert (f["token_boundary"][row, [0, seps[0], n - 1]] == 1).all()


def test_statistics_over_thousands_of_instances(built):
    _, stats, f = built
    assert len(f["input_ids"]) >= 2000
    n = f["input_mask"].sum(axis=1)
    maskable = (n - 3).sum()
    weights = f["masked_lm_weights"]
    assert 0.13 <= weights.sum() / maskable <= 0.16
    assert abs(stats["masked_fraction"] - weights.sum() / maskable) < 1e-5
    assert 0.45 <= f["next_sentence_labels"].mean() <= 0.55
    assert 0.07 <= stats["short_seq_fraction"] <= 0.13
    histogram = stats["ngram_histogram"]
    assert histogram["1"] > histogram["2"] > histogram["3"] > 0
    # Spans do not overlap: positions are strictly increasing per row.
    for row in range(len(weights)):
        count = int(weights[row].sum())
        assert (np.diff(f["masked_lm_positions"][row, :count]) > 0).all()
    # [CLS], [SEP] and padding are never masked.
    rows, cols = np.nonzero(weights)
    positions = f["masked_lm_positions"][rows, cols]
    first_sep = (f["input_mask"] - f["segment_ids"]).sum(axis=1) - 1
    assert (positions > 0).all() and (positions < n[rows] - 1).all()
    assert (positions != first_sep[rows]).all()
    assert not np.isin(f["masked_lm_ids"][rows, cols],
                       [vocab.CLS_ID, vocab.SEP_ID, vocab.PAD_ID]).any()


@pytest.mark.slow
def test_byte_identical_for_one_and_two_workers(tmp_path, corpus_files, spm_model_path):
    outputs = {}
    for workers, seed in ((1, 7), (2, 7), (1, 8)):
        out = str(tmp_path / ("w%d_s%d" % (workers, seed)) / "x.tfrecord")
        stats = pipeline.create_pretraining_data(
            corpus_files, out, spm_model_path,
            options=instances.InstanceOptions(max_seq_length=64,
                                              max_predictions_per_seq=10),
            dupe_factor=2, random_seed=seed, num_workers=workers,
            num_output_shards=2, chunk_bytes=60_000)
        assert stats["read"]["files"] == 2
        outputs[workers, seed] = [open(p, "rb").read() for p in stats["output_files"]]
    assert outputs[1, 7] == outputs[2, 7]
    assert outputs[1, 7] != outputs[1, 8]
    assert all(len(shard) > 1000 for shard in outputs[1, 7])


def test_interrupted_run_leaves_no_whole_looking_shard(tmp_path, corpus_files,
                                                       spm_model_path, monkeypatch):
    out = str(tmp_path / "x.tfrecord")
    shards = pipeline.output_paths(out, 2)
    with open(shards[0], "wb") as f:
        f.write(b"previous complete shard")
    _interrupt_at_chunk(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        pipeline.create_pretraining_data(
            corpus_files, out, spm_model_path,
            options=instances.InstanceOptions(max_seq_length=64),
            dupe_factor=1, num_output_shards=2, chunk_bytes=30_000)
    assert open(shards[0], "rb").read() == b"previous complete shard"
    assert not os.path.exists(shards[1])
    assert not os.path.exists(pipeline.stats_path(out))
    assert not glob.glob(str(tmp_path / ("*" + tfrecord.INCOMPLETE_SUFFIX)))
    assert not glob.glob(str(tmp_path / ("*" + shuffle.TEMP_INFIX + "*")))


def test_bad_inputs_are_counted_not_fatal(tmp_path, spm_model_path):
    good = "\n".join("Sentence number %d is here and fine." % i for i in range(6))
    long_line = " ".join("word%d" % i for i in range(400)) + "."
    (tmp_path / "mixed.txt").write_bytes(
        (good + "\n\nonly one sentence here.\n\n" + good + "\n").encode()
        + b"bad \xff\xfe line\n" + (long_line + "\n" + good + "\n").encode())
    (tmp_path / "empty.txt").write_bytes(b"")
    with gzip.open(tmp_path / "packed.txt.gz", "wt", encoding="utf-8") as g:
        g.write(good + "\n\n" + good + "\n")
    stats = pipeline.create_pretraining_data(
        str(tmp_path / "*.txt") + "," + str(tmp_path / "*.gz"),
        str(tmp_path / "out" / "o.tfrecord"), spm_model_path,
        options=instances.InstanceOptions(max_seq_length=64), dupe_factor=1)
    skipped = stats["skipped"]
    assert skipped["non_utf8_lines"] == 1
    assert skipped["empty_files"] == 1
    assert skipped["one_sentence_documents"] == 1
    assert stats["long_sentences_truncated"] >= 1
    assert stats["read"]["files"] == 3 and stats["documents"] == 4
    assert stats["instances"] > 0


def test_clear_errors(tmp_path, corpus_files, spm_model_path, spm_plain_model_path):
    out = str(tmp_path / "o.tfrecord")
    with pytest.raises(reader.InputError, match="No file matches"):
        pipeline.create_pretraining_data(str(tmp_path / "none*.txt"), out,
                                         spm_model_path)
    with pytest.raises(vocab.SpecialPiecesError, match=r"\[CLS\]"):
        pipeline.create_pretraining_data(corpus_files, out, spm_plain_model_path)
    with pytest.raises(vocab.SpecialPiecesError, match="Cannot read"):
        pipeline.create_pretraining_data(corpus_files, out, str(tmp_path / "no.model"))
    (tmp_path / "singles.txt").write_text("one.\n\ntwo.\n\n", encoding="utf-8")
    with pytest.raises(reader.InputError, match="No instances"):
        pipeline.create_pretraining_data(str(tmp_path / "singles.txt"), out,
                                         spm_model_path)
    assert not os.path.exists(out)
    with pytest.raises(ValueError, match="lists 2 files"):
        pipeline.create_pretraining_data(corpus_files, out + "," + out + "2",
                                         spm_model_path, num_output_shards=3)


def test_random_next_sentence_mode_and_progress_log(tmp_path, corpus_files,
                                                    spm_model_path, caplog):
    caplog.set_level(logging.INFO, logger="absl")
    stats = pipeline.create_pretraining_data(
        corpus_files, str(tmp_path / "r.tfrecord"), spm_model_path,
        options=instances.InstanceOptions(max_seq_length=64,
                                          random_next_sentence=True),
        dupe_factor=1, chunk_bytes=100_000, progress_interval_s=0)
    progress = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("Progress:")]
    assert len(progress) >= 3 and "instances/s" in progress[-1]
    assert stats["random_next_instances"] > 0
    # Official NSP-style mode: half of the multi-sentence chunks and every
    # lone sentence take B from another document, so label 1 is over half.
    assert 0.5 <= stats["sop_swapped_fraction"] <= 0.8


def _small_corpus(directory, corpus_dir, documents=60):
    """The first documents of the generated corpus, as `directory/corpus.txt`."""
    text = (corpus_dir / "a.txt").read_text(encoding="utf-8")
    path = directory / "corpus.txt"
    path.write_text("\n\n".join(text.split("\n\n")[:documents]) + "\n",
                    encoding="utf-8")
    return path


def _build(inputs, out, spm_model_path, shards):
    return pipeline.create_pretraining_data(
        inputs, out, spm_model_path,
        options=instances.InstanceOptions(max_seq_length=64,
                                          max_predictions_per_seq=10),
        dupe_factor=1, num_output_shards=shards)


def _files(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def _records(paths):
    return sorted(r.numpy() for r in tf.data.TFRecordDataset(paths))


def test_rerun_over_its_own_outputs_reads_text_and_reshards(
        tmp_path, corpus_dir, spm_model_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    _small_corpus(data, corpus_dir)
    out = str(data / "train.tfrecord")
    first = _build(str(data / "corpus.txt"), out, spm_model_path, shards=4)
    first_records = _records(first["output_files"])
    # The statistics file of the older naming, and files that are not text.
    (data / "train.tfrecord.stats.json").write_text(
        json.dumps({"output_files": first["output_files"]}))
    (data / "train.tfrecord-backup").write_bytes(b"\0\1 not a shard")
    (data / "spm.model").write_bytes(open(spm_model_path, "rb").read())

    caplog.set_level(logging.INFO, logger="absl")
    second = _build(str(data / "*"), out, spm_model_path, shards=2)

    assert second["input_files"] == [str(data / "corpus.txt")]
    assert second["instances"] == first["instances"]
    assert _records(second["output_files"]) == first_records
    skips = [r.getMessage() for r in caplog.records
             if "not text" in r.getMessage()]
    assert len(skips) == 1
    for name, why in (("stats.train.tfrecord.json", "JSON"),
                      ("train.tfrecord.stats.json", "JSON"),
                      ("spm.model", "binary"),
                      ("train.tfrecord-00003-of-00004", "TFRecord"),
                      ("train.tfrecord-backup", "binary")):
        assert "%s (%s)" % (data / name, why) in skips[0]
    # The 4 old shards and the old statistics file are gone; the rest stays.
    assert sorted(os.listdir(data)) == [
        "corpus.txt", "spm.model", "stats.train.tfrecord.json",
        "train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002",
        "train.tfrecord-backup"]
    removed = [r.getMessage() for r in caplog.records
               if r.getMessage().startswith("Removed 5 files of an earlier run")]
    assert len(removed) == 1 and "train.tfrecord-00002-of-00004" in removed[0]

    # Back to one shard: the unsharded name replaces the two shards.
    third = _build(str(data / "corpus.txt"), out, spm_model_path, shards=1)
    assert sorted(glob.glob(out + "*")) == [
        out, str(data / "train.tfrecord-backup")]
    assert _records([out]) == first_records
    assert third["output_files"] == [out]


def test_interrupted_reshard_keeps_the_earlier_run(tmp_path, corpus_dir,
                                                   spm_model_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    _small_corpus(data, corpus_dir, documents=200)
    out = str(data / "train.tfrecord")
    pipeline.create_pretraining_data(
        str(data / "corpus.txt"), out, spm_model_path,
        options=instances.InstanceOptions(max_seq_length=64), dupe_factor=1,
        num_output_shards=3, chunk_bytes=5_000)
    before = _files(data)
    _interrupt_at_chunk(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        pipeline.create_pretraining_data(
            str(data / "corpus.txt"), out, spm_model_path,
            options=instances.InstanceOptions(max_seq_length=64),
            dupe_factor=1, num_output_shards=2, chunk_bytes=5_000)
    assert _files(data) == before


def test_output_that_is_an_input_is_refused_before_writing(
        tmp_path, corpus_dir, spm_model_path):
    data = tmp_path / "data"
    data.mkdir()
    corpus = _small_corpus(data, corpus_dir, documents=20)
    (data / "link.txt").symlink_to(corpus)
    (data / "x.tfrecord-00001-of-00002").write_text(corpus.read_text())
    before = _files(data)
    cases = [
        (str(corpus), str(corpus), 1, "Output %s is also an input" % corpus),
        # The glob names the corpus twice (the link too): refused first.
        (str(data / "*.txt"), str(data / "link.txt"), 1, "link.txt is given "
         "twice"),
        # An output named by a link is resolved first: its target is named.
        (str(data / "corpus.txt"), str(data / "link.txt"), 1,
         "Output %s is also an input" % corpus),
        ("%s,%s" % (data / "x*", corpus), str(data / "x.tfrecord"), 2,
         "x.tfrecord-00001-of-00002 is also an input"),
        (str(data / "c*"), "%s,%s" % (data / "new.tfrecord", corpus), 1,
         "corpus.txt is also an input"),
    ]
    for inputs, output, shards, message in cases:
        with pytest.raises(ValueError) as error:
            _build(inputs, output, spm_model_path, shards)
        assert message in str(error.value) and "\n" not in str(error.value)
        assert _files(data) == before


def _frames(path):
    """The framed records of a TFRecord file, in file order."""
    data, frames = open(path, "rb").read(), []
    while data:
        end = 16 + int.from_bytes(data[:8], "little")
        frames.append(data[:end])
        data = data[end:]
    return frames


def test_one_order_dealt_round_robin_over_the_shards(tmp_path, corpus_files,
                                                     spm_model_path):
    """The sharding rule (data_prep.output): one output order whatever the
    shard count, record p in shard p % N."""
    runs = {}
    for shards in (1, 3):
        out = str(tmp_path / str(shards) / "t.tfrecord")
        runs[shards] = pipeline.create_pretraining_data(
            corpus_files, out, spm_model_path,
            options=instances.InstanceOptions(max_seq_length=64),
            dupe_factor=1, num_output_shards=shards, chunk_bytes=50_000)
    order = _frames(runs[1]["output_files"][0])
    assert len(order) == runs[1]["instances"] > 1000
    assert [_frames(p) for p in runs[3]["output_files"]] == [
        order[s::3] for s in range(3)]


def _global_run(tmp_path, corpus_files, spm_model_path, name, **kwargs):
    kwargs = dict(dict(options=instances.InstanceOptions(max_seq_length=64),
                       dupe_factor=2, num_output_shards=2, chunk_bytes=50_000),
                  **kwargs)
    out = str(tmp_path / name / "t.tfrecord")
    stats = pipeline.create_pretraining_data(corpus_files, out, spm_model_path,
                                             **kwargs)
    return stats, [open(p, "rb").read() for p in stats["output_files"]]


def test_global_order_is_mixed_and_independent_of_the_memory_budget(
        tmp_path, corpus_files, spm_model_path, monkeypatch):
    stats, shards = _global_run(tmp_path, corpus_files, spm_model_path, "a")
    # One bucket at first, split in the second pass to fit the budget.
    monkeypatch.setattr(shuffle, "estimated_output_bytes", lambda *args: 1)
    small, small_shards = _global_run(
        tmp_path, corpus_files, spm_model_path, "b",
        shuffle_memory_bytes=pipeline.MIN_SHUFFLE_MEMORY_BYTES)
    assert sum(len(s) for s in shards) > 2 * pipeline.MIN_SHUFFLE_MEMORY_BYTES
    assert small_shards == shards  # Split buckets: the same bytes.
    chunk, chunk_shards = _global_run(tmp_path, corpus_files, spm_model_path,
                                      "c", global_shuffle=False)
    # The same records, in another order.
    assert sorted(_frames_of(chunk_shards)) == sorted(_frames_of(shards))
    assert 0.85 < stats["mixing"]["block_divergence_ratio"] < 1.15
    assert chunk["mixing"]["block_divergence_ratio"] > 3
    assert stats["settings"]["global_shuffle"] is True
    # Only the shards and the statistics remain.
    assert sorted(os.listdir(tmp_path / "b")) == [
        "stats.t.tfrecord.json", "t.tfrecord-00000-of-00002",
        "t.tfrecord-00001-of-00002"]


def _frames_of(shards):
    frames = []
    for data in shards:
        while data:
            end = 16 + int.from_bytes(data[:8], "little")
            frames.append(data[:end])
            data = data[end:]
    return frames


def test_interrupted_sort_leaves_no_output_and_no_temporary_files(
        tmp_path, corpus_files, spm_model_path, monkeypatch):
    real = shuffle.sorted_frames

    def interrupted(*args, **kwargs):
        for i, frame in enumerate(real(*args, **kwargs)):
            if i == 100:
                raise KeyboardInterrupt("simulated interruption")
            yield frame

    monkeypatch.setattr(shuffle, "sorted_frames", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _global_run(tmp_path, corpus_files, spm_model_path, "x")
    assert not os.path.exists(tmp_path / "x")  # Nor the folder made for it.


_KILLED_AFTER_ITS_TEMP_DIR = textwrap.dedent("""
    import os, sys
    from data_prep import pipeline, shuffle
    first = sys.argv[1]
    with pipeline.output_lock(first) as locked:
        folder = shuffle.make_temp_dir(first, locked.lock)
        open(os.path.join(folder, "bucket-02-00000001"), "wb").write(b"x")
        print(folder, flush=True)
        os._exit(9)  # Killed: no cleanup.
""")


def test_a_killed_runs_temporary_files_go_with_the_next_run(
        tmp_path, corpus_files, spm_model_path):
    """A killed run (no cleanup) leaves a temporary folder that no glob
    over the shards matches, listed in its lock's record; the next run of
    the output removes it and nothing else (not a folder of the same
    naming that no record lists)."""
    (tmp_path / "x").mkdir()
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_ITS_TEMP_DIR,
         str(tmp_path / "x" / "t.tfrecord")],
        capture_output=True, text=True, cwd=os.getcwd())
    stale = killed.stdout.strip()
    assert killed.returncode == 9 and os.path.isdir(stale), killed.stderr
    unfinished = tmp_path / "x" / ".t.tfrecord-00000-of-00007.incomplete"
    unfinished.write_bytes(b"")
    kept = [".t.tfrecord" + shuffle.TEMP_INFIX
            + "0123456789ab",  # Our naming, but no record lists it.
            ".u.tfrecord" + shuffle.TEMP_INFIX + "0123456789ab"]  # Another's.
    for name in kept:
        (tmp_path / "x" / name).mkdir()
    assert not glob.glob(str(tmp_path / "x" / "t.tfrecord*"))
    _global_run(tmp_path, corpus_files, spm_model_path, "x")
    assert sorted(os.listdir(tmp_path / "x")) == kept + [
        "stats.t.tfrecord.json", "t.tfrecord-00000-of-00002",
        "t.tfrecord-00001-of-00002"]


def test_damaged_bucket_fails_the_run_naming_the_file(
        tmp_path, corpus_files, spm_model_path, monkeypatch):
    real = shuffle.BucketScatter.close

    def close_and_damage(self):
        paths = real(self)
        with open(paths[0], "r+b") as f:
            f.seek(16)
            f.write(b"\xff\xff\xff")  # The first record's length checksum.
        return paths

    monkeypatch.setattr(shuffle.BucketScatter, "close", close_and_damage)
    with pytest.raises(shuffle.BucketError, match="bucket-.*fails its length"):
        _global_run(tmp_path, corpus_files, spm_model_path, "x")
    assert not os.path.exists(tmp_path / "x")  # Nor the folder made for it.


def test_too_small_shuffle_memory_is_refused(tmp_path, corpus_files,
                                             spm_model_path):
    with pytest.raises(ValueError, match=r"shuffle_memory_mb must be at least "
                       r"1 .* Received: 0.5$"):
        _global_run(tmp_path, corpus_files, spm_model_path, "x",
                    shuffle_memory_bytes=1 << 19)
    assert not os.path.exists(tmp_path / "x")
