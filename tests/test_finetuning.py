"""Many fine-tuning runs of one compiled model
(`albert_apps.quickstart.finetuning`)."""

import numpy as np
import pytest

from albert_apps.quickstart import finetuning
from albert_tf import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder

T = 16


def _data(rng, n):
    # Label 1 when token 7 is in the text: learnable in a few steps.
    ids = rng.integers(8, 60, size=(n, T)).astype(np.int32)
    labels = rng.integers(0, 2, size=n).astype(np.int32)
    ids[labels == 1, 3] = 7
    ids[:, 0] = 2
    x = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
         "input_type_ids": np.zeros_like(ids)}
    return x, labels


def _encoder(seed):
    import keras
    keras.utils.set_random_seed(seed)
    config = AlbertConfig.from_preset("tiny", vocab_size=64, num_hidden_layers=2,
                                      max_position_embeddings=T)
    encoder = AlbertEncoder(config)
    encoder({k: np.zeros((1, T), np.int32) for k in (
        "input_word_ids", "input_mask", "input_type_ids")})
    return encoder


# Four fine-tuning runs on two compiled models: with the slow tests (the
# main job's own runs are there too, tests/test_quickstart.py).
@pytest.mark.slow
def test_each_run_starts_afresh_and_a_reused_model_matches_a_new_one():
    rng = np.random.default_rng(0)
    train = _data(rng, 64)
    dev = _data(rng, 48)
    start = _encoder(1).get_weights()
    other = _encoder(2).get_weights()
    # Without XLA here (a minute less of compiling); the main job's runs
    # compile with it (tests/test_quickstart.py).
    tuner = finetuning.Finetuner(_encoder(0), 2, num_train_steps=8,
                                 batch_size=16, learning_rate=1e-3,
                                 jit_compile=False)
    first = tuner.run(*train, *dev, seed=3, encoder_weights=start)
    assert first["steps"] == 8 and 0 <= first["dev_accuracy"] <= 1
    # The run trained the encoder away from its start...
    trained = tuner.encoder.get_weights()
    assert any(not np.allclose(a, b) for a, b in zip(trained, start))
    # ... another start and seed give other numbers ...
    second = tuner.run(*train, *dev, seed=4, encoder_weights=other)
    assert second["dev_loss"] != first["dev_loss"]
    # ... and the first start and seed again give the first run's numbers,
    # as a newly built model does: weights, head, optimizer and dropout
    # seeds are all reset.
    again = tuner.run(*train, *dev, seed=3, encoder_weights=start)
    fresh = finetuning.Finetuner(_encoder(5), 2, num_train_steps=8,
                                 batch_size=16, learning_rate=1e-3,
                                 jit_compile=False).run(
        *train, *dev, seed=3, encoder_weights=start)
    for result in (again, fresh):
        np.testing.assert_allclose(result["dev_loss"], first["dev_loss"],
                                   rtol=1e-4)
        np.testing.assert_allclose(result["train_loss"],
                                   first["train_loss"], rtol=1e-4)


def test_the_classifier_names_its_classes():
    model = finetuning.classifier(_encoder(0), num_classes=4)
    assert model.num_classes == 4
    out = model({k: np.zeros((2, T), np.int32) for k in (
        "input_word_ids", "input_mask", "input_type_ids")})
    assert out["logits"].shape == (2, 4)


def test_a_run_reports_progress_and_a_collapse(monkeypatch):
    from absl import logging

    from foundation import progress

    lines = []
    monkeypatch.setattr(logging, "info", lambda msg, *args: lines.append(
        msg % args if args else msg))
    monkeypatch.setattr(progress, "interactive", lambda stream=None: False)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)  # A line every step.
    rng = np.random.default_rng(0)
    (train_x, _), (dev_x, _) = _data(rng, 32), _data(rng, 16)
    # One label everywhere: the classifier learns to answer it for all.
    tuner = finetuning.Finetuner(_encoder(0), 2, num_train_steps=6,
                                 batch_size=16, learning_rate=0.05,
                                 jit_compile=False)
    result = tuner.run(train_x, np.zeros(32, np.int32), dev_x,
                       np.zeros(16, np.int32), seed=0)
    assert [line.split(",")[0] for line in lines] == [
        f"fine-tune: step {step}/6" for step in range(1, 7)]
    assert "ETA" in lines[-1]
    assert result["collapsed"] and result["predicted_class"] == 0
    assert result["majority_accuracy"] == 1.0 and result["eval_examples"] == 16
