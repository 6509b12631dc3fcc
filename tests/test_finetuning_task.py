"""`albert_tf.tasks.finetuning_task`: where a fine-tuning job's encoder comes from."""

import numpy as np
import pytest
from absl import logging

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.tasks import finetuning_task
from albert_tf.training import model_dir


def test_the_encoder_starts_from_the_checkpoint_it_names(tmp_path, caplog):
    pretrained = AlbertPretrainer(AlbertConfig.from_preset("tiny"))
    model_dir.save_model_dir(pretrained, str(tmp_path))
    logging.set_verbosity(logging.INFO)
    with caplog.at_level("INFO"):
        encoder = finetuning_task.encoder_from_checkpoint(str(tmp_path))
    np.testing.assert_array_equal(encoder.word_embeddings.numpy(),
                                  pretrained.encoder.word_embeddings.numpy())
    # The checkpoint read, not just the folder: a run folder holds several.
    prefix = str(tmp_path / model_dir.CHECKPOINT_NAME)
    assert f"Initialized the encoder from {prefix} (albert_tf)" in caplog.text


def test_without_checkpoint_or_config_names_both():
    with pytest.raises(ValueError, match="Received: neither"):
        finetuning_task.encoder_from_checkpoint(None)


def test_chance_losses_are_what_a_model_blind_to_its_input_reaches():
    # Balanced classes: ln k; skewed ones: their entropy, lower.
    assert finetuning_task.label_chance_loss([0, 1] * 8) == pytest.approx(np.log(2))
    assert finetuning_task.label_chance_loss([0, 1, 2, 3] * 3) == pytest.approx(
        np.log(4))
    assert finetuning_task.label_chance_loss([0] * 9 + [1]) == pytest.approx(
        -(0.9 * np.log(0.9) + 0.1 * np.log(0.1)))
    # A regression's best constant is the mean: its squared error, the
    # variance.
    assert finetuning_task.regression_chance_loss([0.0, 5.0, 5.0, 0.0]) == 6.25
