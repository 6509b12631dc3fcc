"""Text-in exports of fine-tuned models: dynamic and fixed shapes agree, and
`text_b` can be left out. The exports are the session's (`exported_tasks`
in tests/fixtures_export.py)."""

import numpy as np
import pytest
import tensorflow as tf

from export import finetuned_exports

TEXTS = ["The cat sat on the mat.", "Naïve café.", "", "the " * 80]
TEXTS_B = ["It was in Paris.", "", "fine", ""]
QUESTIONS = ["Where did the cat sit?", "When?", "", "who " * 30]
CONTEXTS = ["The cat sat on the mat in Paris.",
            "In the 1990s, Paris was fine.", "Naïve café.",
            "the mat " * 60]


@pytest.fixture(scope="module")
def classifiers(exported_tasks):
    """The session's classifier exports (dynamic and fixed), loaded."""
    import tensorflow_text  # noqa: F401

    paths = exported_tasks.paths
    return exported_tasks.classifier, {
        "dynamic": tf.saved_model.load(paths["albert_classifier"]),
        "fixed": tf.saved_model.load(
            exported_tasks.fixed_path("albert_classifier"))}


@pytest.mark.slow
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


@pytest.mark.slow
def test_span_extractor_dynamic_equals_fixed(exported_tasks, tmp_path):
    import tensorflow_text  # noqa: F401

    answers = {}
    for shape, path in (
            ("dynamic", exported_tasks.paths["albert_squad"]),
            ("fixed", exported_tasks.fixed_path("albert_squad"))):
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
        finetuned_exports.export_span_extractor(exported_tasks.span_extractor,
                                                exported_tasks.spm_path, str(tmp_path),
                                                serving_shape="padded")
