"""Hostile cases of the model folders a pretraining run writes, run as a
user runs the program: a --spm_model_file that is no vocabulary of the
model, a vocabulary changed under its name between two runs, and a link
planted where the run copies the vocabulary (refused: never written
through).

Each case asserts its outcome (an exit status and one line, or the files
read back) and that the files that existed before are unchanged.
"""

import os

import pytest

from albert_tf import AlbertConfig
from tests import fixtures_pretraining
from tests.hostile.common import Snapshot
from tests.hostile.common import assert_one_line_error
from tests.hostile.common import run_program


def _flags(data, out, config, *extra):
    return [f"--input_file={data}", f"--output_dir={out}",
            f"--albert_config_file={config}", "--train_batch_size=8",
            f"--max_seq_length={fixtures_pretraining.L}",
            f"--max_predictions_per_seq={fixtures_pretraining.P}",
            "--num_train_steps=2", "--num_warmup_steps=1",
            "--save_checkpoints_steps=2", "--nojit_compile", *extra]


@pytest.fixture
def inputs(tmp_path, spm_model_path):
    """Records, a config of the vocabulary's size, and a copy of it."""
    data = fixtures_pretraining.write_records(str(tmp_path / "r.tfrecord"),
                                              16, vocab=400)
    config = str(tmp_path / "config.json")
    AlbertConfig.from_dict(dict(fixtures_pretraining.TINY,
                                vocab_size=512)).to_json_file(config)
    vocabulary = tmp_path / "spm.model"
    with open(spm_model_path, "rb") as f:
        vocabulary.write_bytes(f.read())
    return data, config, str(vocabulary)


@pytest.mark.slow
def test_a_spm_model_file_that_is_no_vocabulary_is_one_line(tmp_path,
                                                            inputs):
    data, config, _ = inputs
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    out = str(tmp_path / "out")
    snapshot = Snapshot(str(tmp_path))
    done = run_program("albert_tf.run_pretraining", *_flags(
        data, out, config, f"--spm_model_file={notes}"))
    line = assert_one_line_error(done, "--spm_model_file", str(notes))
    assert "is not a SentencePiece model" in line, line
    snapshot.assert_unchanged()
    assert not os.path.exists(out)


@pytest.mark.slow
def test_a_vocabulary_changed_under_its_name_is_refused_on_resume(
        tmp_path, inputs, albert_spm_model):
    data, config, vocabulary = inputs
    out = str(tmp_path / "out")
    first = run_program("albert_tf.run_pretraining", *_flags(
        data, out, config, f"--spm_model_file={vocabulary}"))
    assert first.returncode == 0, first.stderr[-3000:]
    with open(vocabulary, "rb") as f:
        assert open(os.path.join(out, "spm.model"), "rb").read() == f.read()
    # Another vocabulary under the same name: the checkpoints were trained
    # on the first; the folders must not pair them with this one.
    with open(albert_spm_model, "rb") as f:
        other = f.read()
    with open(vocabulary, "wb") as f:
        f.write(other)
    snapshot = Snapshot(out)
    refused = run_program("albert_tf.run_pretraining", *_flags(
        data, out, config, f"--spm_model_file={vocabulary}",
        "--num_train_steps=4"))
    line = assert_one_line_error(refused, "--spm_model_file: the content "
                                 "changed", out)
    assert line.startswith("run_pretraining: error: "), line
    snapshot.assert_unchanged()


@pytest.mark.slow
def test_a_link_planted_at_the_vocabularys_place_is_not_written_through(
        tmp_path, inputs):
    data, config, vocabulary = inputs
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("a file of the user's\n")
    os.symlink(victim, out / "spm.model")
    done = run_program("albert_tf.run_pretraining", *_flags(
        data, str(out), config, f"--spm_model_file={vocabulary}"))
    line = assert_one_line_error(done, str(out / "spm.model"),
                                 "symbolic link")
    assert line.startswith("run_pretraining: error: "), line
    assert victim.read_text() == "a file of the user's\n"
    assert os.path.islink(out / "spm.model")
    assert not [name for name in os.listdir(out) if name.startswith("ckpt")]
