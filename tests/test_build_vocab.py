"""Tests for the build_vocab CLI (run as a subprocess, like a user would)."""

import subprocess
import sys

from data_prep import tfrecord
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


def test_cli_skips_files_that_are_not_text(corpus_cli_env, tmp_path, corpus_dir):
    (tmp_path / "corpus.txt").write_bytes((corpus_dir / "a.txt").read_bytes())
    (tmp_path / "corpus.stats.json").write_text('{"instances": 3}')
    (tmp_path / "corpus.tfrecord").write_bytes(
        tfrecord.frame_records([b"\0\1record"])[0])
    result = _run(corpus_cli_env, "--input_file=%s" % (tmp_path / "corpus*"),
                  "--model_prefix=%s" % (tmp_path / "v"), "--vocab_size=300",
                  "--nohard_vocab_limit", "--num_threads=1")
    assert result.returncode == 0, result.stderr
    assert ("Skipping 2 input files that are not text: %s (JSON); %s (TFRecord)"
            % (tmp_path / "corpus.stats.json", tmp_path / "corpus.tfrecord")
            in result.stderr)


def test_cli_trainer_failure_is_one_line_and_help_lists_flags(
        corpus_cli_env, tmp_path, corpus_dir):
    result = _run(corpus_cli_env,
                  "--input_file=%s" % (corpus_dir / "a.txt"),
                  "--model_prefix=%s" % (tmp_path / "v"),
                  "--vocab_size=100000", "--num_threads=1")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("build_vocab: error: --vocab_size=100000 is more "
                           "pieces than this corpus can give (at most ")
    assert "100000" in last
    help_text = _run(corpus_cli_env, "--help").stdout
    assert "Trains an ALBERT SentencePiece vocabulary" in help_text
    for flag in ("--input_file", "--model_prefix", "--vocab_size",
                 "--[no]hard_vocab_limit", "--num_threads"):
        assert flag in help_text, flag
    assert "(default: '30000')" in help_text


def test_cli_samples_with_a_beam_runner(corpus_cli_env, tmp_path, corpus_dir):
    flags = ["--input_file=%s" % (corpus_dir / "*.txt"), "--vocab_size=300",
             "--nohard_vocab_limit", "--num_threads=1",
             "--input_sentence_size=2000"]
    local = _run(corpus_cli_env, "--model_prefix=%s" % (tmp_path / "l"), *flags)
    assert local.returncode == 0, local.stderr
    beam = _run(corpus_cli_env, "--model_prefix=%s" % (tmp_path / "b"), *flags,
                "--runner=DirectRunner", "--direct_num_workers=1",
                "--temp_location=%s" % (tmp_path / "tmp"))
    assert beam.returncode == 0, beam.stderr
    assert ((tmp_path / "l.vocab").read_text()
            == (tmp_path / "b.vocab").read_text())
    assert list((tmp_path / "tmp").iterdir()) == []  # The sample is removed.
