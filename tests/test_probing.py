"""Linear probes of a frozen encoder (`albert_apps.quickstart.probing`)."""

import keras
import numpy as np
import pytest

from albert_apps.quickstart import probing
from albert_tf import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder

T = 12


def _encoder():
    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_preset("tiny", vocab_size=64,
                                      max_position_embeddings=T)
    return AlbertEncoder(config)


def _inputs(rng, n, lengths):
    ids = rng.integers(5, 64, (n, T)).astype(np.int32)
    mask = (np.arange(T)[None] < np.asarray(lengths)[:, None]).astype(np.int32)
    return {"input_word_ids": ids * mask, "input_mask": mask,
            "input_type_ids": np.zeros_like(ids)}


def test_features_are_pooled_and_mean_token_outputs_of_the_real_tokens():
    encoder = _encoder()
    rng = np.random.default_rng(0)
    x = _inputs(rng, 5, [3, 12, 7, 1, 5])
    feats = probing.features(encoder, x, batch_size=2)
    hidden = encoder.config.hidden_size
    assert feats.shape == (5, 2 * hidden) and feats.dtype == np.float64
    out = encoder(x)
    np.testing.assert_allclose(feats[:, :hidden], out["pooled_output"],
                               atol=1e-5)
    mean = np.asarray(out["sequence_output"])[2, :7].mean(0)
    np.testing.assert_allclose(feats[2, hidden:], mean, atol=1e-5)
    # Padding ids past the mask change nothing.
    noisy = dict(x, input_word_ids=np.where(x["input_mask"] > 0,
                                            x["input_word_ids"], 9))
    np.testing.assert_allclose(probing.features(encoder, noisy), feats,
                               atol=1e-5)
    with pytest.raises(ValueError, match="No examples"):
        probing.features(encoder, {k: v[:0] for k, v in x.items()})


def test_a_probe_learns_what_the_features_hold_and_only_that():
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(3, 10)) * 3
    labels = rng.integers(0, 3, 600)
    feats = centres[labels] + rng.normal(size=(600, 10))
    probe = probing.fit(feats[:300], labels[:300], 3)
    assert probing.accuracy(probe, feats[300:], labels[300:]) > 0.9
    # Deterministic: the same data give the same probe.
    again = probing.fit(feats[:300], labels[:300], 3)
    np.testing.assert_array_equal(again.kernel, probe.kernel)
    # Labels the features do not hold: dev accuracy stays near chance.
    shuffled = rng.permutation(labels)
    noise = probing.fit(feats[:300], shuffled[:300], 3)
    assert abs(probing.accuracy(noise, feats[300:], shuffled[300:]) -
               1 / 3) < 0.1


@pytest.mark.parametrize("examples, labels, match", [
    (3, [0, 1, 3], r"Labels must be in \[0, 3\). Received: 0 to 3"),
    (3, [0, 1], "as many labels as examples"),
    (0, [], "as many labels as examples")])
def test_bad_labels_are_named(examples, labels, match):
    with pytest.raises(ValueError, match=match):
        probing.fit(np.zeros((examples, 2)), np.array(labels, np.int64), 3)
