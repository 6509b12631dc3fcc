"""Text-in exports of fine-tuned models: dynamic and fixed shapes agree, and
`text_b` can be left out."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.models.task_models import AlbertClassifier, AlbertSpanExtractor
from export import tasks
from tests import tasks_testdata

MAX_SEQ_LENGTH = 48
TEXTS = ["The cat sat on the mat.", "Naïve café.", "", "the " * 80]
TEXTS_B = ["It was in Paris.", "", "fine", ""]
QUESTIONS = ["Where did the cat sit?", "When?", "", "who " * 30]
CONTEXTS = ["The cat sat on the mat in Paris.",
            "In the 1990s, Paris was fine.", "Naïve café.",
            "the mat " * 60]


def _encoder(seed):
    config = AlbertConfig.from_preset("tiny", vocab_size=600,
                                      num_hidden_layers=2,
                                      max_position_embeddings=64)
    encoder = AlbertEncoder(config)
    rng = np.random.default_rng(seed)
    for v in encoder.weights:
        v.assign(rng.normal(scale=0.2, size=v.shape).astype("float32"))
    return encoder


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(rng.normal(scale=0.2, size=v.shape).astype("float32"))
    return model


@pytest.fixture(scope="module")
def spm_path():
    return tasks_testdata.spm_model_path()


@pytest.fixture(scope="module")
def classifiers(spm_path, tmp_path_factory):
    import tensorflow_text  # noqa: F401

    model = _randomize(AlbertClassifier(_encoder(0), num_classes=3), 1)
    base = str(tmp_path_factory.mktemp("classifier"))
    loaded = {shape: tf.saved_model.load(tasks.export_classifier(
        model, spm_path, base, labels=["a", "b", "c"],
        max_seq_length=MAX_SEQ_LENGTH, model_name="clf_" + shape,
        serving_shape=shape)) for shape in ("dynamic", "fixed")}
    return model, loaded


def test_classifier_dynamic_equals_fixed_and_text_b_is_optional(classifiers):
    _, loaded = classifiers
    outputs = {}
    for shape, model in loaded.items():
        outputs[shape] = model.signatures["serving_default"](
            text=tf.constant(TEXTS), text_b=tf.constant(TEXTS_B))
        single = model.signatures["serving_single"](text=tf.constant(TEXTS))
        empty_b = model.signatures["serving_default"](
            text=tf.constant(TEXTS), text_b=tf.constant([], tf.string))
        np.testing.assert_allclose(single["probabilities"],
                                   empty_b["probabilities"], atol=1e-6)
        np.testing.assert_allclose(model.serve(tf.constant(TEXTS))[
            "probabilities"], single["probabilities"], atol=1e-6)
        short = model.signatures["serving_single"](text=tf.constant(TEXTS[:2]))
        outputs[shape + "_short"] = short
    for suffix in ("", "_short"):
        dynamic, fixed = outputs["dynamic" + suffix], outputs["fixed" + suffix]
        np.testing.assert_allclose(dynamic["probabilities"],
                                   fixed["probabilities"], atol=1e-5)
        np.testing.assert_array_equal(dynamic["label"], fixed["label"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_b must"):
        loaded["dynamic"].signatures["serving_default"](
            text=tf.constant(["a", "b"]), text_b=tf.constant(["a"]))


def test_span_extractor_dynamic_equals_fixed(spm_path, tmp_path_factory):
    import tensorflow_text  # noqa: F401

    model = _randomize(AlbertSpanExtractor(_encoder(2), with_no_answer=True),
                       3)
    base = str(tmp_path_factory.mktemp("squad"))
    answers = {}
    for shape in ("dynamic", "fixed"):
        path = tasks.export_span_extractor(
            model, spm_path, base, max_seq_length=MAX_SEQ_LENGTH,
            max_query_length=12, max_answer_length=5,
            model_name="squad_" + shape, serving_shape=shape)
        serve = tf.saved_model.load(path).signatures["serving_default"]
        # Short contexts alone (T well below max_seq_length), then a batch
        # with a context cut at max_seq_length.
        answers[shape] = [
            serve(question=tf.constant(QUESTIONS[:2]),
                  context=tf.constant(CONTEXTS[:2])),
            serve(question=tf.constant(QUESTIONS), context=tf.constant(CONTEXTS)),
        ]
    for dynamic, fixed in zip(answers["dynamic"], answers["fixed"]):
        np.testing.assert_array_equal(dynamic["answer"], fixed["answer"])
        np.testing.assert_allclose(dynamic["score"], fixed["score"], atol=1e-4)
        np.testing.assert_allclose(dynamic["no_answer_probability"],
                                   fixed["no_answer_probability"], atol=1e-5)
    for answer, context in zip(answers["dynamic"][1]["answer"].numpy(),
                               CONTEXTS):
        answer = answer.decode()
        assert answer and answer in context
        assert len(answer.split()) <= 5
    with pytest.raises(ValueError, match="serving_shape must be one of"):
        tasks.export_span_extractor(model, spm_path, base,
                                    serving_shape="padded")
