"""Tests for the create_pretraining_data CLI (subprocess, like a user)."""

import json
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
    stats = json.loads(
        (tmp_path / "data" / "train.tfrecord.stats.json").read_text())
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
        "max_seq_length must be >= 5")
    assert not list(tmp_path.glob("o.tfrecord*"))
