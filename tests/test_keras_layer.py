"""Loading the exported encoder back into Keras, and fine-tuning through it."""

import keras
import numpy as np
import pytest

from export import keras_layer
from tests.journeys import documented

_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
# The encoder path of the README's "Load as a Keras layer" example.
_README_ENCODER = "/models/albert_encoder/1"


def _inputs(vocab_size, batch=16, length=10, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, (batch, length)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    mask[::2, length // 2:] = 0
    return {"input_word_ids": ids * mask, "input_mask": mask,
            "input_type_ids": np.zeros_like(ids)}


def test_round_trip_gives_the_same_outputs(exported_albert):
    encoder = exported_albert.pretrainer.encoder
    inputs = _inputs(encoder.config.vocab_size)
    expected = encoder(inputs, training=False)
    for path in (exported_albert.paths["encoder"], exported_albert.paths["keras"]):
        loaded = keras_layer.load_exported_encoder(path)
        outputs = loaded(inputs)
        for key in ("pooled_output", "sequence_output"):
            np.testing.assert_allclose(np.asarray(outputs[key]),
                                       np.asarray(expected[key]), atol=1e-5,
                                       err_msg="%s %s" % (path, key))
        assert len(outputs["encoder_outputs"]) == len(expected["encoder_outputs"])


def test_the_readme_keras_example_builds_a_classifier(exported_albert):
    """The README's block, run as written on an exported encoder."""
    code = documented.code_block(
        'keras_layer.load_exported_encoder("/models/albert_encoder/1")')
    names = {}
    exec(code.replace(_README_ENCODER, exported_albert.paths["encoder"]),
         names)
    classifier = names["classifier"]
    inputs = _inputs(exported_albert.pretrainer.encoder.config.vocab_size,
                     batch=4)
    assert classifier.predict(inputs, verbose=0).shape == (4, 2)
    # The encoder's weights train with the new head.
    assert len(classifier.trainable_weights) > 2


def _exported_encoder(path, vocab_size=64):
    """A tiny encoder with its initial weights, exported as the TF-Hub model.

    The shared fixture's weights are drawn at a large scale to make output
    comparisons sensitive; there `pooled_output` is nearly the same vector
    for every input, which a classifier cannot learn from.
    """
    import tensorflow as tf

    from albert_tf import AlbertConfig
    from albert_tf import AlbertEncoder
    from export import signatures

    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(AlbertConfig.from_preset(
        "tiny", vocab_size=vocab_size, num_hidden_layers=2,
        max_position_embeddings=16))
    root, signatures = signatures.build_encoder_model(encoder)
    tf.saved_model.save(root, str(path), signatures=signatures)
    return str(path), vocab_size


@pytest.mark.slow
def test_fine_tuning_through_the_savedmodel_lowers_the_loss(tmp_path):
    path, vocab_size = _exported_encoder(tmp_path / "encoder")
    layer = keras_layer.load_exported_encoder(path)
    assert layer.trainable_weights
    assert not any(":" in w.name for w in layer.weights)
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in _NAMES}
    logits = keras.layers.Dense(2, name="classifier")(
        layer(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    x = _inputs(vocab_size, batch=32)
    y = (x["input_word_ids"][:, 1] % 2).astype(np.int32)
    word_embeddings = [w for w in layer.weights
                       if "word_embeddings" in w.name][0]
    before = np.array(word_embeddings.numpy())
    loss_before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=8, batch_size=16, verbose=0)
    loss_after = model.evaluate(x, y, verbose=0)
    assert loss_after < loss_before - 0.1
    # The wrapped encoder itself was trained, not only the classifier.
    assert np.abs(word_embeddings.numpy() - before).max() > 0


def test_frozen_load_and_errors(exported_albert, tmp_path):
    for path in (exported_albert.paths["encoder"],
                 exported_albert.paths["keras"]):
        loaded = keras_layer.load_exported_encoder(path, trainable=False)
        assert not loaded.trainable_weights
    with pytest.raises(FileNotFoundError, match="No SavedModel"):
        keras_layer.load_exported_encoder(tmp_path)
    with pytest.raises(FileNotFoundError, match="No Keras file"):
        keras_layer.load_exported_encoder(tmp_path / "missing.keras")
