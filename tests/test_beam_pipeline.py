"""Tests for data_prep.beam_pipeline: the Beam runners write the local bytes."""

import glob
import gzip
import os
import urllib.request

import pytest
import tensorflow as tf

from data_prep import beam_pipeline
from data_prep import instances
from data_prep import pipeline
from data_prep import reader
from data_prep import tfrecord
from foundation import safe_io

OPTIONS = instances.InstanceOptions(max_seq_length=64,
                                    max_predictions_per_seq=10)
# What differs between two runs that wrote the same bytes.
_TIMING = ("elapsed_s", "instances_per_s", "output_files", "input_files")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, corpus_dir):
    """Five files of uneven sizes (several reading units and chunks)."""
    directory = tmp_path_factory.mktemp("beam_corpus")
    documents = (corpus_dir / "a.txt").read_text(encoding="utf-8").split("\n\n")
    for name, (start, end) in (("1.txt", (0, 5)), ("2.txt", (5, 7)),
                               ("3.txt", (7, 90)), ("4.txt", (90, 110)),
                               ("5.txt", (110, 160))):
        (directory / name).write_text("\n\n".join(documents[start:end]) + "\n",
                                      encoding="utf-8")
    return str(directory / "*.txt")


def _build(builder, inputs, out, model, **kwargs):
    kwargs = dict(dict(options=OPTIONS, dupe_factor=2, chunk_bytes=15_000),
                  **kwargs)
    if builder == "local":
        return pipeline.create_pretraining_data(inputs, out, model, **kwargs)
    return beam_pipeline.create_pretraining_data(inputs, out, model,
                                                 runner=builder, **kwargs)


def _same_run(local, beam):
    """Asserts the same shard bytes and the same statistics (but timing)."""
    assert [open(p, "rb").read() for p in local["output_files"]] == [
        open(p, "rb").read() for p in beam["output_files"]]
    assert ({k: v for k, v in local.items() if k not in _TIMING}
            == {k: v for k, v in beam.items() if k not in _TIMING})


@pytest.mark.parametrize("shards", [1, 3])
def test_direct_runner_writes_the_local_bytes(tmp_path, corpus,
                                              spm_model_path, shards):
    plan = pipeline.plan_run(corpus, str(tmp_path / "x"), spm_model_path,
                             OPTIONS, 2, shards, 15_000)
    assert [len(unit) for unit in plan.units] == [3, 1, 1]
    local = _build("local", corpus, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=shards)
    counters = {}
    beam = _build("DirectRunner", corpus, str(tmp_path / "b" / "t.tfrecord"),
                  spm_model_path, num_output_shards=shards,
                  counters_out=counters)
    assert local["read"]["files"] == 5 and local["instances"] > 500
    _same_run(local, beam)
    # Beam's counters: each chunk built once, each shard written once.
    chunks = sum(1 for _ in reader.iter_corpus_chunks(
        plan.units, reader.ReadCounters(), 15_000))
    assert counters["chunks_built"] == chunks
    assert counters["shards_written"] == shards
    assert counters["buckets_sorted"] == counters["measures"] == 1
    # Only the shards and the statistics remain: the pieces are gone.
    assert sorted(os.listdir(tmp_path / "b")) == sorted(
        os.path.basename(p) for p in beam["output_files"] + [
            pipeline.stats_path(str(tmp_path / "b" / "t.tfrecord"))])


@pytest.mark.slow
def test_multi_process_direct_runner(tmp_path, corpus, spm_model_path):
    local = _build("local", corpus, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=3, num_workers=2)
    beam = beam_pipeline.create_pretraining_data(
        corpus, str(tmp_path / "b" / "t.tfrecord"), spm_model_path,
        runner="DirectRunner", pipeline_args=[
            "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
        options=OPTIONS, dupe_factor=2, chunk_bytes=15_000,
        num_output_shards=3)
    _same_run(local, beam)


def test_reading_slots_spread_few_units_over_the_tasks_aimed_at():
    units = [["a", "b"], ["c"], ["d"]]
    sizes = {"a": 10, "b": 10, "c": 100, "d": 5}
    slots = beam_pipeline.reading_slots(units, sizes, chunk_bytes=10,
                                        spread=8)
    # 3 per unit at most (8 tasks over 3 units), never more than the
    # unit's estimated chunks; each unit's slots cover 0..n-1 once.
    assert [(u, s, n) for u, _, s, n in slots] == [
        (0, 0, 2), (0, 1, 2), (1, 0, 3), (1, 1, 3), (1, 2, 3), (2, 0, 1)]
    # Many units: each read once.
    many = [[str(i)] for i in range(40)]
    assert all(n == 1 for *_, n in beam_pipeline.reading_slots(
        many, {str(i): 100 for i in range(40)}, 10, spread=32))


def test_many_buckets_and_the_chunk_order_write_the_local_bytes(
        tmp_path, corpus, spm_model_path, monkeypatch):
    """64 buckets of the GroupByKey give the bytes of one local bucket; the
    chunk order (--noglobal_shuffle) is the local chunk order."""
    local = _build("local", corpus, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=2)
    chunk_local = _build("local", corpus, str(tmp_path / "cl" / "t.tfrecord"),
                         spm_model_path, num_output_shards=2,
                         global_shuffle=False)
    monkeypatch.setattr(beam_pipeline.shuffle, "estimated_output_bytes",
                        lambda input_bytes, dupe_factor: 64 << 20)
    beam = _build("DirectRunner", corpus, str(tmp_path / "b" / "t.tfrecord"),
                  spm_model_path, num_output_shards=2,
                  shuffle_memory_bytes=1 << 20)
    chunk_beam = _build("DirectRunner", corpus,
                        str(tmp_path / "cb" / "t.tfrecord"), spm_model_path,
                        num_output_shards=2, global_shuffle=False)
    _same_run(local, beam)
    _same_run(chunk_local, chunk_beam)
    assert 0.8 < beam["mixing"]["block_divergence_ratio"] < 1.2
    assert chunk_beam["mixing"]["block_divergence_ratio"] > 1.3
    assert chunk_beam["settings"]["global_shuffle"] is False


def test_document_longer_than_a_chunk(tmp_path, spm_model_path, corpus_dir):
    # One document (no blank line) of ~60 KB: four chunks of 15 KB, each a
    # separate element, built in separate bundles.
    lines = (corpus_dir / "b.txt").read_text(encoding="utf-8").split("\n")
    (tmp_path / "long.txt").write_text(
        "\n".join(line for line in lines if line)[:60_000] + "\n",
        encoding="utf-8")
    inputs = str(tmp_path / "long.txt")
    local = _build("local", inputs, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=2)
    beam = _build("DirectRunner", inputs, str(tmp_path / "b" / "t.tfrecord"),
                  spm_model_path, num_output_shards=2)
    assert local["read"]["split_documents"] >= 3
    assert local["documents"] >= 4
    _same_run(local, beam)


def test_empty_non_utf8_and_gzip_files_are_counted_as_locally(
        tmp_path, spm_model_path, corpus_dir):
    documents = (corpus_dir / "b.txt").read_text(encoding="utf-8").split("\n\n")
    (tmp_path / "a.txt").write_bytes(
        "\n\n".join(documents[:20]).encode() + b"\nbad \xff\xfe line\n\n"
        + "\n\n".join(documents[20:40]).encode() + b"\n")
    (tmp_path / "b.txt").write_bytes(b"")
    (tmp_path / "c.txt").write_bytes(  # Stray bad lines in UTF-8 text.
        b"One line.\n\xc3\x28 \xa0\xa1\n" * 3 + b"Last line.\n")
    with gzip.open(tmp_path / "d.txt", "wt", encoding="utf-8") as f:
        f.write("\n\n".join(documents[40:60]) + "\n\nonly one sentence.\n")
    inputs = str(tmp_path / "*.txt")
    local = _build("local", inputs, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=3)
    beam = _build("DirectRunner", inputs, str(tmp_path / "b" / "t.tfrecord"),
                  spm_model_path, num_output_shards=3)
    assert local["skipped"]["empty_files"] == 1
    assert local["skipped"]["non_utf8_lines"] == 4
    assert local["skipped"]["one_sentence_documents"] == 1
    _same_run(local, beam)


def test_dynamic_masking_records_have_no_masks(tmp_path, corpus,
                                               spm_model_path):
    local = _build("local", corpus, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, dynamic_masking=True)
    beam = _build("DirectRunner", corpus, str(tmp_path / "b" / "t.tfrecord"),
                  spm_model_path, dynamic_masking=True)
    _same_run(local, beam)
    assert beam["masked_tokens"] == 0 and beam["settings"]["dynamic_masking"]
    record = next(iter(tf.data.TFRecordDataset(beam["output_files"])))
    example = tf.train.Example.FromString(record.numpy())
    assert sorted(example.features.feature) == [
        "input_ids", "input_mask", "next_sentence_labels", "segment_ids",
        "token_boundary"]
    # The masked run's records are these records with masks laid over them.
    masked = _build("local", corpus, str(tmp_path / "m" / "t.tfrecord"),
                    spm_model_path)
    assert masked["instances"] == beam["instances"]
    assert masked["tokens"] == beam["tokens"]


def test_urls_go_through_beam_filesystems(tmp_path, corpus, spm_model_path,
                                          beam_test_urls):
    """gs:// takes this path: a glob, the model and the outputs are URLs."""
    local = _build("local", corpus, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=2)
    beam = _build("DirectRunner", beam_test_urls(corpus),
                  beam_test_urls(tmp_path / "b" / "t.tfrecord"),
                  beam_test_urls(spm_model_path), num_output_shards=2)
    assert beam["output_files"][0].startswith("beamtest://")
    assert beam["input_files"] == [beam_test_urls(p)
                                   for p in local["input_files"]]
    assert [open(p, "rb").read() for p in local["output_files"]] == [
        open(p, "rb").read() for p in sorted(glob.glob(
            str(tmp_path / "b" / "t.tfrecord-*")))]


def _files(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir()}


class _FailOnce:
    """Replaces `beam_pipeline.write_piece`: the first time a given piece
    (a chunk's, or a bucket's with the global shuffle) is written, writes it
    whole and then fails, as a worker lost after its output is on disk."""

    def __init__(self, real, suffix):
        self.real, self.suffix, self.calls = real, suffix, 0

    def __call__(self, path, frames, num_shards):
        self.real(path, frames, num_shards)
        if path.endswith(self.suffix):
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("injected failure after writing " + path)


@pytest.mark.parametrize("global_shuffle, suffix", [
    (True, "/bucket-00000000"), (False, "-000001")])
def test_a_retried_bundle_writes_no_duplicates(tmp_path, corpus,
                                               spm_model_path, monkeypatch,
                                               global_shuffle, suffix):
    """The BundleBasedDirectRunner retries a failed bundle (up to 4
    attempts): the retry rewrites the piece and the shards hold every record
    once."""
    local = _build("local", corpus, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=3,
                   global_shuffle=global_shuffle)
    failing = _FailOnce(beam_pipeline.write_piece, suffix)
    monkeypatch.setattr(beam_pipeline, "write_piece", failing)
    beam = _build("BundleBasedDirectRunner", corpus,
                  str(tmp_path / "b" / "t.tfrecord"), spm_model_path,
                  num_output_shards=3, global_shuffle=global_shuffle)
    assert failing.calls >= 2  # Failed after writing, then written again.
    _same_run(local, beam)


def test_a_failure_without_retry_keeps_the_earlier_run(
        tmp_path, corpus, spm_model_path, monkeypatch):
    """The DirectRunner does not retry: the run fails, its temporary files
    are removed and the earlier run's files stay as they were."""
    out = str(tmp_path / "t.tfrecord")
    _build("DirectRunner", corpus, out, spm_model_path, num_output_shards=2)
    before = _files(tmp_path)
    assert len(before) == 3
    monkeypatch.setattr(beam_pipeline, "write_piece",
                        _FailOnce(beam_pipeline.write_piece, "/bucket-00000000"))
    with pytest.raises(RuntimeError, match="injected failure"):
        _build("DirectRunner", corpus, out, spm_model_path,
               num_output_shards=3)
    assert _files(tmp_path) == before  # No piece, no .incomplete shard.


def test_no_instances_is_the_local_error(tmp_path, spm_model_path):
    (tmp_path / "singles.txt").write_text("one.\n\ntwo.\n\n", encoding="utf-8")
    with pytest.raises(reader.InputError, match=r"^No instances could be built "
                       r"from 1 input files: .*\(2 one-sentence documents, "
                       r"4 lines read\)\.$"):
        _build("DirectRunner", str(tmp_path / "singles.txt"),
               str(tmp_path / "o" / "o.tfrecord"), spm_model_path)
    assert not glob.glob(str(tmp_path / "o" / "*"))


def test_pipeline_options_refuse_what_would_fail_later(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"Unknown flags: --num_output_shard "):
        beam_pipeline.pipeline_options("DirectRunner",
                                       ["--num_output_shard=3"])
    with pytest.raises(ValueError, match="Unknown Beam runner 'DirectRuner'"):
        beam_pipeline.pipeline_options("DirectRuner")
    options = beam_pipeline.pipeline_options(
        "DirectRunner", ["--direct_num_workers=2"])
    assert options.get_all_options()["direct_num_workers"] == 2

    # Offline, the PrismRunner's download fails at once with a way out.
    from apache_beam.runners.portability import prism_runner

    def unreachable(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(prism_runner.PrismJobServer, "BIN_CACHE", str(tmp_path))
    monkeypatch.setattr(urllib.request, "urlopen", unreachable)
    with pytest.raises(ValueError, match=r"--runner=PrismRunner needs the "
                       r"Prism binary.*no network.*--prism_location=PATH"):
        beam_pipeline.pipeline_options("PrismRunner")
    # A cached binary needs no network.
    url = prism_runner.PrismJobServer(options).path_to_binary()
    (tmp_path / os.path.basename(url)).write_bytes(b"zip")
    beam_pipeline.pipeline_options("PrismRunner")


def test_piece_layout_gives_each_shard_one_group(tmp_path):
    frames = tfrecord.frame_records([b"r%d" % i for i in range(7)])
    beam_pipeline.write_piece(str(tmp_path / "piece-000000-000000"), frames, 3)
    # Chunk sizes 7 and 5 (the second piece the same records' first five).
    beam_pipeline.write_piece(str(tmp_path / "piece-000000-000001"),
                              frames[:5], 3)
    counts = [((0, 1), 5), ((0, 0), 7)]  # Any order: sorted by key.
    shards = []
    for shard in range(3):
        path = str(tmp_path / ("s%d" % shard))
        written = beam_pipeline.write_shard(shard, path, str(tmp_path),
                                            counts, 3)
        with open(safe_io.temporary_path(path), "rb") as f:
            shards.append(f.read())
        assert written == [4, 4, 4][shard]
    # Output positions 0..11 dealt round-robin: chunk (0, 0) then (0, 1).
    order = frames + frames[:5]
    assert shards == [b"".join(order[s::3]) for s in range(3)]
