import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.training import checkpoint
from albert_tf.training import model_dir


def _model(**overrides):
    return AlbertPretrainer(AlbertConfig.from_preset("tiny", **overrides))


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
    model_dir.save_model_dir(_model(), str(tmp_path / "a"))
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
    model_dir.save_model_dir(
        AlbertPretrainer(AlbertConfig.from_preset("tiny", **base)), str(tmp_path))
    other = AlbertPretrainer(AlbertConfig.from_preset("tiny", **dict(base, **change)))
    with pytest.raises(ValueError, match=expected) as error:
        checkpoint.restore_model(other, str(tmp_path))
    assert "\n" not in str(error.value)
