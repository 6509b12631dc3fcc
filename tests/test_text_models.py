"""Keras-native fine-tuning on strings: compile, fit, predict, save, export."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf import AlbertEncoder
from albert_tf.tasks.text_models import AlbertTextClassifier
from albert_tf.training import checkpoint
from albert_tf.training import lamb
from export import finetuned_exports as export_tasks

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = "the quick brown fox jumps over a lazy dog hello world".split()


def _data(n=32, seed=0):
    """Texts labelled by whether "fox" is in them."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        words = list(rng.choice(WORDS[:3] + WORDS[4:], 6))
        if i % 2:
            words[rng.integers(6)] = "fox"
        texts.append(" ".join(words))
        labels.append(i % 2)
    return texts, np.array(labels, np.int32)


def _encoder():
    config = AlbertConfig.from_preset("tiny", vocab_size=48,
                                      hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0)
    return AlbertEncoder(config)


@pytest.mark.slow
def test_compile_fit_evaluate_predict_on_python_lists(albert_spm_model):
    keras.utils.set_random_seed(0)
    model = AlbertTextClassifier(_encoder(), 2, spm_model=albert_spm_model,
                                 seq_length=16)
    model.compile(learning_rate=1e-3, num_train_steps=80)
    # The paper's recipe by default: AdamW, warmup + linear decay, clip 1.0.
    assert isinstance(model.optimizer, lamb.AdamW)
    texts, labels = _data()
    history = model.fit(texts, labels, batch_size=8, epochs=20, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0]
    loss, accuracy = model.evaluate(texts, labels, verbose=0)
    assert accuracy >= 0.9
    logits = model.predict(["the quick fox", "a lazy dog"], verbose=0)
    assert logits.shape == (2, 2)
    # And on tf.data of (strings, labels).
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8)
    model.fit(dataset, epochs=1, verbose=0)


def _classifier(albert_spm_model):
    return AlbertTextClassifier(_encoder(), 3, spm_model=albert_spm_model,
                                seq_length=16)


def test_save_and_load_keep_predictions(albert_spm_model, tmp_path):
    model = _classifier(albert_spm_model)
    texts = ["the quick fox", "hello world", "a lazy dog jumps"]
    logits = model.predict(texts, verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(texts, verbose=0), logits,
                               atol=1e-5)


@pytest.mark.slow
def test_export_serves_in_a_fresh_process(albert_spm_model, tmp_path):
    model = _classifier(albert_spm_model)
    texts = ["the quick fox", "hello world", "a lazy dog jumps"]
    logits = model.predict(texts, verbose=0)
    version = export_tasks.export_text_classifier(
        model, str(tmp_path / "serving"), labels=["a", "b", "c"])
    code = (
        "import json, sys\n"
        "import tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "out = m.signatures['serving_single']"
        "(text=tf.constant(json.loads(sys.argv[2])))\n"
        "print(json.dumps({'p': out['probabilities'].numpy().tolist(),\n"
        "                  'label': [x.decode() for x in out['label'].numpy()]}))\n")
    done = subprocess.run([sys.executable, "-c", code, version, json.dumps(texts)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    served = json.loads(done.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(served["p"], tf.nn.softmax(logits).numpy(),
                               atol=1e-5)
    assert served["label"] == [["a", "b", "c"][i] for i in logits.argmax(-1)]


def test_from_a_pretrained_directory(albert_spm_model, tmp_path, random_pretrainer):
    pretrainer = random_pretrainer()
    directory = str(tmp_path / "pretrained")
    checkpoint.save_model_dir(pretrainer, directory,
                              spm_model_file=albert_spm_model)
    model = AlbertTextClassifier(directory, 2, seq_length=16)
    for mine, theirs in zip(model.encoder.weights, pretrainer.encoder.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    assert model.predict(["hello world"], verbose=0).shape == (1, 2)


def test_bad_arguments_are_named(albert_spm_model, tmp_path):
    with pytest.raises(ValueError, match="pass spm_model="):
        AlbertTextClassifier(_encoder(), 2)
    with pytest.raises(TypeError,
                       match="an AlbertPretrainer or a pretrained directory"):
        AlbertTextClassifier(42, 2, spm_model=albert_spm_model)
