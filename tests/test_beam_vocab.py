"""Tests for data_prep.beam_vocab: the Beam sample is the local sample."""

import gzip
import os

import pytest

from data_prep import beam_pipeline
from data_prep import beam_vocab
from data_prep import reader
from data_prep import vocab


@pytest.fixture(scope="module")
def files(tmp_path_factory, corpus_dir):
    """Three inputs: plain, gzip, and one with a bad line."""
    directory = tmp_path_factory.mktemp("vocab_corpus")
    (directory / "a.txt").write_bytes((corpus_dir / "a.txt").read_bytes())
    (directory / "b.txt.gz").write_bytes(
        gzip.compress((corpus_dir / "b.txt").read_bytes()))
    (directory / "c.txt").write_bytes(b"Line one.\nbad \xff line\nLine  two.\n")
    return [str(directory / n) for n in ("a.txt", "b.txt.gz", "c.txt")]


def _local_sample(paths, size, seed):
    counters = reader.ReadCounters()
    sentences = (item for index, path in enumerate(paths)
                 for item in vocab.numbered_sentences(path, index, counters,
                                                      True))
    return vocab.sample_sentences(sentences, size, seed), counters


@pytest.mark.parametrize("runner,args", [
    ("DirectRunner", []),
    ("BundleBasedDirectRunner", []),
])
def test_beam_sample_equals_the_local_sample(tmp_path, files, runner, args):
    local, local_counters = _local_sample(files, 700, seed=11)
    options = beam_pipeline.pipeline_options(runner, args)
    beam, beam_counters = beam_vocab.sample_sentences(
        files, 700, 11, True, options, str(tmp_path / "work"))
    assert len(beam) == 700 and beam == local
    assert beam_counters.as_dict() == local_counters.as_dict()
    assert beam_counters.non_utf8_lines == 1 and beam_counters.files == 3
    everything, _ = beam_vocab.sample_sentences(
        files, 0, 11, True, options, str(tmp_path / "all"))
    assert everything == _local_sample(files, 0, seed=11)[0]
    assert "line two." in everything


def test_train_vocab_on_beam_equals_local(tmp_path, files):
    kwargs = dict(vocab_size=200, hard_vocab_limit=False,
                  input_sentence_size=900, num_threads=1, seed=4)
    pattern = os.path.dirname(files[0]) + "/*"
    local = vocab.train_vocab(pattern, str(tmp_path / "l" / "m"), **kwargs)
    beam = beam_vocab.train_vocab(pattern, str(tmp_path / "b" / "m"),
                                  "DirectRunner", **kwargs)
    vocab.check_special_pieces(beam[0])
    # The .model holds its own path; the pieces and scores are the same.
    assert open(local[1]).read() == open(beam[1]).read()
    # The sample's folder (beside the model without --temp_location) is gone.
    assert sorted(os.listdir(tmp_path / "b")) == ["m.model", "m.vocab"]


def test_train_vocab_on_a_dask_cluster_equals_local(tmp_path, files,
                                                    monkeypatch):
    """The DaskRunner on an in-process cluster, through relative paths
    (made absolute for the workers)."""
    import distributed

    kwargs = dict(vocab_size=200, hard_vocab_limit=False,
                  input_sentence_size=900, num_threads=1, seed=4)
    pattern = os.path.dirname(files[0]) + "/*"
    local = vocab.train_vocab(pattern, str(tmp_path / "l" / "m"), **kwargs)
    monkeypatch.chdir(tmp_path)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                  processes=False, dashboard_address=None,
                                  protocol="tcp", host="127.0.0.1") as cluster:
        dask = beam_vocab.train_vocab(
            pattern, "d/m", "DaskRunner",
            ["--dask_client_address=" + cluster.scheduler_address], **kwargs)
    assert dask[1] == str(tmp_path / "d" / "m.vocab")
    assert open(local[1]).read() == open(dask[1]).read()
    assert sorted(os.listdir(tmp_path / "d")) == ["m.model", "m.vocab"]
