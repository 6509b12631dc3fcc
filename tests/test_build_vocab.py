"""Tests for the build_vocab CLI (run as a subprocess, like a user would)."""

import subprocess
import sys

from data_prep import vocab


def _run(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "data_prep.build_vocab", *args],
        capture_output=True, text=True, env=env, timeout=300)


def test_cli_writes_model_and_vocab(corpus_cli_env, tmp_path, corpus_dir):
    prefix = tmp_path / "out" / "v"
    result = _run(corpus_cli_env,
                  "--input_file=%s" % (corpus_dir / "*.txt"),
                  "--model_prefix=%s" % prefix, "--vocab_size=300",
                  "--nohard_vocab_limit", "--num_threads=1")
    assert result.returncode == 0, result.stderr
    vocab.check_special_pieces(str(prefix) + ".model")
    assert (tmp_path / "out" / "v.vocab").exists()


def test_cli_bad_input_is_a_clear_error(corpus_cli_env, tmp_path):
    result = _run(corpus_cli_env,
                  "--input_file=%s" % (tmp_path / "missing.txt"),
                  "--model_prefix=%s" % (tmp_path / "v"))
    assert result.returncode == 1
    assert "No file matches" in result.stderr
    assert "Traceback" not in result.stderr
