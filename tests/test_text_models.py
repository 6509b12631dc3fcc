"""Keras-native fine-tuning on strings: compile, fit, predict, save, export."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf import AlbertConfig
from albert_tf import AlbertEncoder
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.task_models import AlbertClassifier
from albert_tf.models.task_models import AlbertMultipleChoice
from albert_tf.models.task_models import AlbertSpanExtractor
from albert_tf.tasks.masked_lm import AlbertMaskedLM
from albert_tf.tasks.text_models import AlbertTextClassifier
from albert_tf.training import lamb
from albert_tf.training import model_dir
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
    model_dir.save_model_dir(pretrainer, directory,
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


# Loads each `.keras` file named in argv[1] (JSON: {name: [path, inputs]})
# with nothing imported but albert_tf and keras, as a user would.
_FRESH_LOAD = """
import json, sys
import albert_tf
import keras
import numpy as np
for name, (path, inputs) in json.loads(sys.argv[1]).items():
    model = keras.models.load_model(path)
    if isinstance(inputs, dict):
        inputs = {k: np.asarray(v, "int32") for k, v in inputs.items()}
        out = model(inputs)
    else:
        out = model.predict(inputs, verbose=0)
    out = out if isinstance(out, dict) else {"out": out}
    print(name, json.dumps({k: np.asarray(v).tolist()
                            for k, v in sorted(out.items())}))
    optimizer = getattr(model, "optimizer", None)
    print("optimizer", name, type(optimizer).__name__,
          int(optimizer.iterations) if optimizer is not None else -1)
"""


def _outputs(out):
    out = out if isinstance(out, dict) else {"out": out}
    return {k: np.asarray(v) for k, v in sorted(out.items())}


def _saveable_models(names, spm_model):
    """`{name: (model, inputs)}` of tiny models of each public class."""
    config = AlbertConfig.from_preset("tiny", vocab_size=48,
                                      num_hidden_layers=1)
    rng = np.random.default_rng(0)
    ids = {"input_word_ids": rng.integers(5, 48, (2, 8)).astype("int32"),
           "input_mask": np.ones((2, 8), "int32"),
           "input_type_ids": np.zeros((2, 8), "int32")}
    make = {
        "encoder": lambda: (AlbertEncoder(config), ids),
        "pretrainer": lambda: (AlbertPretrainer(config), dict(
            ids, masked_lm_positions=np.array([[1, 2], [3, 4]], "int32"))),
        "classifier": lambda: (AlbertClassifier(AlbertEncoder(config), 3),
                               ids),
        "span": lambda: (AlbertSpanExtractor(AlbertEncoder(config)), ids),
        "choice": lambda: (AlbertMultipleChoice(AlbertEncoder(config), 2),
                           {k: np.stack([v, v], axis=1)
                            for k, v in ids.items()}),
        "text": lambda: (AlbertTextClassifier(
            AlbertEncoder(config), 2, spm_model=spm_model, seq_length=8),
            ["the quick fox", "hello world"]),
        "mlm": lambda: (AlbertMaskedLM(AlbertEncoder(config),
                                       spm_model=spm_model, seq_length=8),
                        ["the [MASK] fox"]),
    }
    return {name: make[name]() for name in names}


def _check_loads_in_a_fresh_process(models, tmp_path):
    """Saves each model as `.keras`, loads it in a new interpreter after
    `import albert_tf` and `import keras` only, and compares outputs."""
    saved, expected, optimizers = {}, {}, {}
    for name, (model, inputs) in models.items():
        optimizer = getattr(model, "optimizer", None)
        optimizers[name] = [type(optimizer).__name__, int(
            optimizer.iterations) if optimizer is not None else -1]
        if isinstance(inputs, dict):
            expected[name] = _outputs(model(inputs))
            inputs = {k: v.tolist() for k, v in inputs.items()}
        else:
            expected[name] = _outputs(model.predict(inputs, verbose=0))
        path = str(tmp_path / f"{name}.keras")
        model.save(path)
        saved[name] = [path, inputs]
    done = subprocess.run([sys.executable, "-c", _FRESH_LOAD,
                           json.dumps(saved)], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = dict(line.split(" ", 1) for line in done.stdout.splitlines()
                  if line.split(" ", 1)[0] in models)
    assert sorted(loaded) == sorted(models)
    assert {line.split()[1]: [line.split()[2], int(line.split()[3])]
            for line in done.stdout.splitlines()
            if line.startswith("optimizer ")} == optimizers
    for name, outputs in expected.items():
        got = json.loads(loaded[name])
        assert sorted(got) == sorted(outputs), name
        for key, value in outputs.items():
            np.testing.assert_allclose(got[key], value, atol=1e-5,
                                       err_msg=f"{name}: {key}")


def test_text_models_load_in_a_fresh_process(albert_spm_model, tmp_path):
    _check_loads_in_a_fresh_process(
        _saveable_models(["text", "mlm"], albert_spm_model), tmp_path)


@pytest.mark.slow
def test_trained_text_models_load_with_their_optimizer(albert_spm_model,
                                                       tmp_path):
    """Compiled and trained one step: the optimizer and its state load too
    (a loaded model said it was compiled and had no optimizer)."""
    models = _saveable_models(["text", "mlm"], albert_spm_model)
    texts = ["the quick fox", "hello world"]
    for name, (model, _) in models.items():
        model.compile(num_train_steps=10)
        if name == "text":
            model.fit(texts, np.array([0, 1]), epochs=1, verbose=0)
        else:
            model.fit(texts * 4, batch_size=8, epochs=1, verbose=0)
    _check_loads_in_a_fresh_process(models, tmp_path)


@pytest.mark.slow
def test_every_public_model_loads_in_a_fresh_process(albert_spm_model,
                                                     tmp_path):
    _check_loads_in_a_fresh_process(_saveable_models(
        ["encoder", "pretrainer", "classifier", "span", "choice"],
        albert_spm_model), tmp_path)


def test_every_registered_class_has_a_stand_in_before_its_module_loads():
    import importlib
    import pkgutil
    for info in pkgutil.walk_packages(albert_tf.__path__, "albert_tf."):
        if not info.name.startswith(("albert_tf.convert_checkpoint",
                                     "albert_tf.run_", "albert_tf.cli")):
            importlib.import_module(info.name)
    registered = {name.split(">", 1)[1]: obj.__module__
                  for name, obj in keras.saving.get_custom_objects().items()
                  if name.startswith(albert_tf.KERAS_PACKAGE + ">")}
    assert registered == albert_tf.KERAS_CLASSES
