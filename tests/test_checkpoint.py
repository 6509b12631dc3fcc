import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.training import checkpoint


def _model(**overrides):
    return AlbertPretrainer(AlbertConfig.from_preset("tiny", **overrides))


def test_model_dir_round_trip(tmp_path):
    model = _model(num_hidden_groups=2, inner_group_num=2)
    spm = tmp_path / "fake.model"
    spm.write_bytes(b"spm bytes")
    checkpoint.save_model_dir(model, str(tmp_path / "out"), spm_model_file=str(spm))
    assert (tmp_path / "out" / "spm.model").read_bytes() == b"spm bytes"
    config = AlbertConfig.from_json_file(
        str(tmp_path / "out" / checkpoint.CONFIG_NAME))
    assert config == model.config
    loaded = AlbertPretrainer(config)
    checkpoint.restore_model(loaded, str(tmp_path / "out"))
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_files_beside_a_checkpoint_are_found_from_its_folder_or_prefix(
        tmp_path):
    checkpoint.save_model_dir(_model(), str(tmp_path))
    (tmp_path / checkpoint.SPM_NAME).write_bytes(b"spm bytes")
    config = str(tmp_path / checkpoint.CONFIG_NAME)
    prefix = str(tmp_path / checkpoint.CHECKPOINT_NAME)
    for path in (str(tmp_path), prefix, config):
        assert checkpoint.find_in_model_dir(
            path, ["missing.json", checkpoint.CONFIG_NAME]) == config
    assert checkpoint.find_in_model_dir(prefix, ["missing.json"]) is None
    assert checkpoint.model_folder(prefix) == str(tmp_path)


def test_restores_from_a_training_checkpoint(tmp_path):
    model = _model()
    step = tf.Variable(7, dtype=tf.int64)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, step=step), str(tmp_path), max_to_keep=2)
    manager.save()
    other = _model()
    prefix = checkpoint.restore_model(other, str(tmp_path))
    assert prefix.endswith("ckpt-1")
    np.testing.assert_array_equal(other.encoder.word_embeddings.numpy(),
                                  model.encoder.word_embeddings.numpy())


def test_missing_checkpoint_and_mismatched_config(tmp_path):
    with pytest.raises(FileNotFoundError, match="No TensorFlow checkpoint"):
        checkpoint.restore_model(_model(), str(tmp_path))
    checkpoint.save_model_dir(_model(), str(tmp_path / "a"))
    wider = AlbertPretrainer(AlbertConfig.from_preset("tiny", intermediate_size=96))
    with pytest.raises(Exception, match="shape|Shape"):
        checkpoint.restore_model(wider, str(tmp_path / "a"))


@pytest.mark.parametrize("change,expected", [
    (dict(vocab_size=400), r"variable embeddings/word_embeddings has shape "
     r"\(300, 16\) there and \(400, 16\) in the model; likely config field: "
     r"vocab_size \(400 in the config, 300 in the checkpoint\)"),
    (dict(hidden_size=64, num_attention_heads=2), r"likely config field: "
     r"hidden_size"),
    (dict(num_hidden_groups=2), r"16 model variables have no value there .*"
     r"num_hidden_groups"),
])
def test_a_checkpoint_of_another_config_is_one_line_naming_the_cause(
        tmp_path, change, expected):
    base = dict(vocab_size=300)
    checkpoint.save_model_dir(
        AlbertPretrainer(AlbertConfig.from_preset("tiny", **base)), str(tmp_path))
    other = AlbertPretrainer(AlbertConfig.from_preset("tiny", **dict(base, **change)))
    with pytest.raises(ValueError, match=expected) as error:
        checkpoint.restore_model(other, str(tmp_path))
    assert "\n" not in str(error.value)
