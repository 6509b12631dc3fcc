"""Tests for the create_pretraining_data CLI (subprocess, like a user)."""

import json
import os
import subprocess
import sys


def _run(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "data_prep.create_pretraining_data", *args],
        capture_output=True, text=True, env=env, timeout=300)


def test_cli_official_flags(corpus_cli_env, tmp_path, corpus_files,
                            spm_model_path):
    out = tmp_path / "data" / "train.tfrecord"
    result = _run(
        corpus_cli_env,
        "--input_file=%s" % corpus_files, "--output_file=%s" % out,
        "--spm_model_file=%s" % spm_model_path, "--max_seq_length=64",
        "--max_predictions_per_seq=10", "--masked_lm_prob=0.15",
        "--dupe_factor=1", "--short_seq_prob=0.1", "--ngram=3",
        "--do_whole_word_mask", "--favor_shorter_ngram",
        "--norandom_next_sentence", "--random_seed=3", "--do_lower_case",
        "--num_workers=1", "--num_output_shards=2")
    assert result.returncode == 0, result.stderr
    stats = json.loads((tmp_path / "data" / "stats.train.tfrecord.json").read_text())
    assert stats["instances"] > 100
    assert stats["settings"]["max_seq_length"] == 64
    assert (tmp_path / "data" / "train.tfrecord-00001-of-00002").exists()
    assert "Wrote %d instances" % stats["instances"] in result.stderr


def _assert_clean_failure(result, message):
    assert result.returncode == 1, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_bad_inputs_fail_cleanly(corpus_cli_env, tmp_path, corpus_files,
                                     spm_model_path, spm_plain_model_path):
    out = "--output_file=%s" % (tmp_path / "o.tfrecord")
    _assert_clean_failure(
        _run(corpus_cli_env, "--input_file=%s" % (tmp_path / "missing.txt"),
             out, "--spm_model_file=%s" % spm_model_path),
        "No file matches")
    _assert_clean_failure(
        _run(corpus_cli_env, "--input_file=%s" % corpus_files, out,
             "--spm_model_file=%s" % spm_plain_model_path),
        "does not have the ALBERT special pieces")
    _assert_clean_failure(
        _run(corpus_cli_env, "--input_file=%s" % corpus_files, out,
             "--spm_model_file=%s" % spm_model_path, "--max_seq_length=3"),
        "--max_seq_length must be a number >= 5")
    _assert_clean_failure(
        _run(corpus_cli_env, "--input_file=%s" % corpus_files, out,
             "--spm_model_file=%s" % spm_model_path, "--shuffle_memory_mb=0.1"),
        "--shuffle_memory_mb must be a finite number >= 1. Received: 0.1")
    assert not list(tmp_path.glob("o.tfrecord*"))
    assert not list(tmp_path.glob("o.*"))


def _files(directory):
    return {path.name: path.read_bytes() for path in directory.iterdir()}


def _error_line(result):
    """The one line the program ends with, after checking it failed cleanly."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_cli_refuses_an_output_that_is_an_input(corpus_cli_env, tmp_path,
                                                corpus_dir, spm_model_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((corpus_dir / "b.txt").read_bytes())
    shard = tmp_path / "x.tfrecord-00001-of-00002"  # Text with a shard's name.
    shard.write_bytes((corpus_dir / "a.txt").read_bytes())
    before = _files(tmp_path)
    model = "--spm_model_file=%s" % spm_model_path

    line = _error_line(_run(corpus_cli_env, "--input_file=%s" % corpus,
                            "--output_file=%s" % corpus, model))
    assert line == (
        "create_pretraining_data: error: Output %s is also an input file; "
        "writing it would destroy the input. Choose an output_file that no "
        "input_file pattern matches." % corpus)
    line = _error_line(_run(
        corpus_cli_env, "--input_file=%s" % (tmp_path / "*"),
        "--output_file=%s" % (tmp_path / "x.tfrecord"),
        "--num_output_shards=2", model))
    assert "Output %s is also an input file" % shard in line
    assert _files(tmp_path) == before


def test_cli_rerun_over_its_outputs_and_help(corpus_cli_env, tmp_path,
                                             corpus_dir, spm_model_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.txt").write_bytes((corpus_dir / "b.txt").read_bytes())
    flags = ["--spm_model_file=%s" % spm_model_path, "--max_seq_length=64",
             "--max_predictions_per_seq=10", "--dupe_factor=1",
             "--output_file=%s" % (data / "train.tfrecord")]
    first = _run(corpus_cli_env, "--input_file=%s" % (data / "corpus.txt"),
                 "--num_output_shards=4", *flags)
    assert first.returncode == 0, first.stderr
    # The glob covers the corpus and the first run's shards and statistics.
    second = _run(corpus_cli_env, "--input_file=%s" % (data / "*"),
                  "--num_output_shards=2", *flags)
    assert second.returncode == 0, second.stderr
    assert "Skipping 5 input files that are not text: " in second.stderr
    assert "%s (JSON)" % (data / "stats.train.tfrecord.json") in second.stderr
    assert sorted(os.listdir(data)) == [
        "corpus.txt", "stats.train.tfrecord.json",
        "train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002"]
    stats = json.loads((data / "stats.train.tfrecord.json").read_text())
    assert stats["input_files"] == [str(data / "corpus.txt")]
    # The same corpus, read once: as many instances as the first run.
    assert "Wrote %d instances" % stats["instances"] in first.stderr

    help_text = _run(corpus_cli_env, "--help").stdout
    assert "Builds ALBERT pretraining TFRecords" in help_text
    for flag in ("--input_file", "--output_file", "--dupe_factor",
                 "--num_output_shards", "--[no]do_whole_word_mask",
                 "--[no]global_shuffle", "--shuffle_memory_mb"):
        assert flag in help_text, flag
    assert "(default: '40')" in help_text


def test_cli_beam_runner_writes_the_local_bytes_without_tensorflow(
        corpus_cli_env, tmp_path, corpus_files, spm_model_path):
    flags = ["--input_file=%s" % corpus_files,
             "--spm_model_file=%s" % spm_model_path, "--max_seq_length=64",
             "--max_predictions_per_seq=10", "--dupe_factor=1",
             "--num_output_shards=2", "--random_seed=5"]
    local = _run(corpus_cli_env, "--output_file=%s" % (tmp_path / "l" / "t"),
                 *flags)
    assert local.returncode == 0, local.stderr
    # Through runpy, to see what the run imported: Beam's options pass
    # through, and neither the launcher nor the workers load TensorFlow.
    argv = ["create_pretraining_data",
            "--output_file=%s" % (tmp_path / "b" / "t"), *flags,
            "--runner=DirectRunner", "--direct_num_workers=1"]
    code = ("import runpy, sys\nsys.argv = %r\ntry:\n"
            "    runpy.run_module('data_prep.create_pretraining_data', "
            "run_name='__main__')\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "print('tensorflow loaded:', 'tensorflow' in sys.modules)\n" % argv)
    beam = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=corpus_cli_env, timeout=300)
    assert beam.returncode == 0, beam.stderr
    assert "tensorflow loaded: False" in beam.stdout
    for name in ("t-00000-of-00002", "t-00001-of-00002"):
        assert ((tmp_path / "l" / name).read_bytes()
                == (tmp_path / "b" / name).read_bytes())
    assert sorted(os.listdir(tmp_path / "b")) == [
        "stats.t.json", "t-00000-of-00002", "t-00001-of-00002"]


def test_cli_beam_options_need_a_runner_and_must_exist(
        corpus_cli_env, tmp_path, corpus_files, spm_model_path):
    flags = ["--input_file=%s" % corpus_files,
             "--output_file=%s" % (tmp_path / "t"),
             "--spm_model_file=%s" % spm_model_path]
    result = _run(corpus_cli_env, *flags, "--direct_num_workers=2")
    assert result.returncode == 1
    assert ("Unexpected arguments: --direct_num_workers=2 (other libraries' "
            "options need --runner)" in result.stderr)
    line = _error_line(_run(corpus_cli_env, *flags, "--runner=DirectRunner",
                            "--dupe_factr=2"))
    assert line == ("create_pretraining_data: error: Unknown flags: "
                    "--dupe_factr (neither flags of this program nor Beam "
                    "pipeline options)")
    assert not list(tmp_path.iterdir())
