import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.training import checkpoint
from albert_tf.training import model_dir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _model(**overrides):
    return AlbertPretrainer(AlbertConfig.from_preset("tiny", **overrides))


def _touch(folder, *names):
    """Empty files: the resolution looks at names, not at contents."""
    for name in names:
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").close()


def test_model_dir_round_trip(tmp_path):
    model = _model(num_hidden_groups=2, inner_group_num=2)
    spm = tmp_path / "fake.model"
    spm.write_bytes(b"spm bytes")
    model_dir.save_model_dir(model, str(tmp_path / "out"),
                             spm_model_file=str(spm))
    assert sorted(os.listdir(tmp_path / "out")) == [
        model_dir.CONFIG_NAME, model_dir.CHECKPOINT_NAME + ".data-00000-of-00001",
        model_dir.CHECKPOINT_NAME + ".index", model_dir.SPM_NAME]
    assert (tmp_path / "out" / model_dir.SPM_NAME).read_bytes() == b"spm bytes"
    config = AlbertConfig.from_json_file(
        str(tmp_path / "out" / model_dir.CONFIG_NAME))
    assert config == model.config
    loaded = AlbertPretrainer(config)
    checkpoint.restore_model(loaded, str(tmp_path / "out"))
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_files_beside_a_checkpoint_are_found_from_its_folder_or_prefix(
        tmp_path):
    model_dir.save_model_dir(_model(), str(tmp_path))
    (tmp_path / model_dir.SPM_NAME).write_bytes(b"spm bytes")
    config = str(tmp_path / model_dir.CONFIG_NAME)
    prefix = str(tmp_path / model_dir.CHECKPOINT_NAME)
    for path in (str(tmp_path), prefix, config):
        assert model_dir.find_in_model_dir(
            path, ["missing.json", model_dir.CONFIG_NAME]) == config
    assert model_dir.find_in_model_dir(prefix, ["missing.json"]) is None
    assert model_dir.model_folder(prefix) == str(tmp_path)
    assert model_dir.model_folder(tmp_path) == str(tmp_path)


def test_a_folder_names_its_newest_checkpoint_else_model_ckpt(tmp_path):
    state = tf.train.Checkpoint(step=tf.Variable(1))
    manager = tf.train.CheckpointManager(state, str(tmp_path / "run"),
                                         max_to_keep=3)
    manager.save(checkpoint_number=3)
    newest = manager.save(checkpoint_number=5)
    _touch(str(tmp_path / "run"), model_dir.CHECKPOINT_NAME + ".index")
    for release in (False, True):
        assert model_dir.resolve_checkpoint(
            str(tmp_path / "run"), release=release) == newest
    _touch(str(tmp_path / "ours"), model_dir.CHECKPOINT_NAME + ".index",
           "other.index")
    assert model_dir.resolve_checkpoint(str(tmp_path / "ours")) == str(
        tmp_path / "ours" / model_dir.CHECKPOINT_NAME)
    prefix = str(tmp_path / "ours" / "other")
    assert model_dir.resolve_checkpoint(prefix) == prefix


def test_no_checkpoint_is_one_line_naming_the_path(tmp_path):
    _touch(str(tmp_path), model_dir.RELEASE_CHECKPOINT_NAME + ".index")
    with pytest.raises(FileNotFoundError, match=r"^No TensorFlow checkpoint "
                       r"at '.*' \(looked for '.*model\.ckpt\.index'\)$"):
        model_dir.resolve_checkpoint(str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"^No TF1 checkpoint at "
                       r"'.*missing' \(looked for '.*missing\.index'\)$"):
        model_dir.resolve_checkpoint(str(tmp_path / "missing"), release=True)
    with pytest.raises(FileNotFoundError, match=r"^No TF1 checkpoint "
                       r"\(\*\.index\) in '.*empty'$"):
        os.mkdir(tmp_path / "empty")
        model_dir.resolve_checkpoint(str(tmp_path / "empty"), release=True)


@pytest.mark.parametrize("files,expected", [
    (["model.ckpt-best.index"], "model.ckpt-best"),
    (["model.ckpt-100.index", "model.ckpt-best.index"], "model.ckpt-best"),
    (["model.ckpt-100.index", "model.ckpt-2000.index"], "model.ckpt-2000"),
    (["a.index", "b.index"], "a"),
    (["variables/variables.index", "30k-clean.model"], "variables/variables"),
])
def test_a_release_folder_names_its_checkpoint(tmp_path, files, expected):
    _touch(str(tmp_path), *files)
    assert model_dir.resolve_checkpoint(str(tmp_path), release=True) == str(
        tmp_path / expected)


@pytest.mark.parametrize("files,expected", [
    (["30k-clean.model", "spiece.model"], "30k-clean.model"),
    (["spiece.model", "assets/30k-clean.model"], "spiece.model"),
    (["assets/30k-clean.model"], "assets/30k-clean.model"),
    (["assets/other.model"], "assets/other.model"),
    (["one.model", "two.model"], None),
    ([], None),
])
def test_a_release_folder_names_its_sentencepiece_model(tmp_path, files,
                                                        expected):
    _touch(str(tmp_path), *files, "model.ckpt-best.index")
    found = model_dir.find_release_spm(str(tmp_path / "model.ckpt-best"))
    assert found == (str(tmp_path / expected) if expected else None)


def test_local_paths_load_no_tensorflow(tmp_path):
    """A program checks the model files of its flags before TensorFlow
    loads (export_saved_model does)."""
    code = ("import sys\n"
            "from albert_tf.training import model_dir\n"
            f"print(model_dir.find_in_model_dir({str(tmp_path)!r}, ['x']))\n"
            "print('tensorflow' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, text=True,
                          capture_output=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["None", "False"]
