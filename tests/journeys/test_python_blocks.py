"""The Python blocks of the README and `docs/` that no other test runs, run
as written.

Each block is read from the documentation (`documented.code_block`); only
its placeholder paths are filled in. The README's first block (Keras on raw
text) runs from an empty folder, as a user's first script would; the
serving guide's block, which needs an export, is in the slow set.
"""

import keras
import numpy as np
import pytest

from tests.journeys import documented

_README_KERAS = 'AlbertTextPreprocessor("runs/keras/spm.model"'
_MODEL_GUIDE = 'AlbertConfig.from_preset("albert_base_v2")'
_SERVING_GUIDE = 'tf.saved_model.load("$EXPORT_DIR/albert/1")'


def test_the_readme_keras_block_trains_a_classifier_on_strings(
        tmp_path, monkeypatch):
    import tensorflow as tf

    monkeypatch.chdir(tmp_path)
    keras.utils.set_random_seed(0)
    names = {}
    exec(documented.code_block(_README_KERAS), names)
    # Its vocabulary was made here, from the built-in corpus.
    assert (tmp_path / "runs/keras/spm.model").is_file()
    classifier = names["classifier"]
    texts = tf.constant(names["texts"][:4])
    _, accuracy = classifier.evaluate(texts, tf.constant(names["labels"][:4]),
                                      verbose=0)
    assert accuracy == 1.0
    logits = classifier.predict(tf.constant(["a fine story", "a dull plot"]),
                                verbose=0)
    assert logits.shape == (2, 2)
    assert list(np.argmax(logits, -1)) == [1, 0]


def test_the_model_guide_block_runs_the_base_encoder():
    names = {}
    exec(documented.code_block(_MODEL_GUIDE), names)
    outputs = names["outputs"]
    assert tuple(outputs["sequence_output"].shape) == (1, 5, 768)
    assert tuple(outputs["pooled_output"].shape) == (1, 768)
    assert len(outputs["encoder_outputs"]) == 12


@pytest.mark.slow
def test_the_serving_guide_block_loads_every_export(exported_albert):
    code = documented.code_block(_SERVING_GUIDE).replace(
        "$EXPORT_DIR", exported_albert.export_dir)
    names = {}
    exec(code, names)
    hidden = exported_albert.pretrainer.encoder.config.hidden_size
    assert tuple(names["pooled"].shape) == (1, hidden)
    assert names["layer"].trainable_weights
    assert names["keras_encoder"].count_params() == (
        exported_albert.pretrainer.encoder.count_params())
