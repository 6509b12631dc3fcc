"""Task heads (common layer checks) and task models (outputs, save/load, dtypes)."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.layers import task_heads as heads
from albert_tf.models import task_models as models
from tests.layer_checks import assert_nested_close, run_layer_test

CONFIG = AlbertConfig.from_preset("tiny", num_hidden_layers=2)


def _inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones(shape, "int32")
    mask[..., -2:] = 0
    return {"input_word_ids": rng.integers(5, 100, shape).astype("int32"),
            "input_mask": mask, "input_type_ids": np.zeros(shape, "int32")}


def test_classification_head():
    run_layer_test(heads.ClassificationHead,
                   dict(num_classes=3, dropout=0.5),
                   {"pooled_output": np.random.rand(4, 8).astype("float32")},
                   (4, 3), mixed_output_dtype="float32")
    with pytest.raises(ValueError, match="Received: num_classes=0"):
        heads.ClassificationHead(0)


def test_span_head_masks_padding():
    mask = np.ones((2, 6), "int32")
    mask[:, 4:] = 0
    layer = run_layer_test(
        heads.SpanHead, {}, {"sequence_output": np.random.rand(2, 6, 8).astype(
            "float32"), "input_mask": mask}, (2, 6, 2), has_dropout=False,
        mixed_output_dtype="float32")
    out = np.asarray(layer(np.random.rand(2, 6, 8).astype("float32"), mask))
    assert (out[:, 4:] < -1e3).all() and (np.abs(out[:, :4]) < 10).all()


def test_multiple_choice_head_and_fold():
    run_layer_test(heads.MultipleChoiceHead, dict(num_choices=4, dropout=0.5),
                   {"pooled_output": np.random.rand(8, 8).astype("float32")},
                   (2, 4), mixed_output_dtype="float32")
    run_layer_test(heads.FoldChoices, {},
                   {"inputs": np.arange(24, dtype="int32").reshape(2, 3, 4)},
                   (6, 4), has_dropout=False, mixed_output_dtype="int32")


@pytest.mark.parametrize("kind", ["classifier", "regressor", "span", "span_v2",
                                  "choice"])
def test_task_models_save_and_reload(kind, tmp_path):
    encoder = AlbertEncoder(CONFIG)
    if kind == "classifier":
        model, x = models.AlbertClassifier(encoder, 3), _inputs((2, 7))
        expected = {"logits": (2, 3)}
    elif kind == "regressor":
        model, x = models.AlbertClassifier(encoder, 1), _inputs((2, 7))
        expected = {"logits": (2, 1)}
    elif kind.startswith("span"):
        v2 = kind == "span_v2"
        model, x = models.AlbertSpanExtractor(encoder, with_no_answer=v2), \
            _inputs((2, 7))
        expected = {"start_logits": (2, 7), "end_logits": (2, 7)}
        if v2:
            expected["no_answer_logits"] = (2,)
    else:
        model, x = models.AlbertMultipleChoice(encoder, 4), _inputs((2, 4, 7))
        expected = {"logits": (2, 4)}
    out = model(x)
    assert {k: tuple(v.shape) for k, v in out.items()} == expected
    assert all(v.dtype == tf.float32 for v in out.values())
    # The encoder's weights are the model's (fine-tuning trains them).
    assert all(any(w is v for v in model.weights) for w in encoder.weights)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert_nested_close(out, restored(x), atol=1e-6)
    clone = type(model).from_config(model.get_config())
    assert clone.get_config() == model.get_config()


def test_choice_scores_are_per_option():
    model = models.AlbertMultipleChoice(AlbertEncoder(CONFIG), 4)
    x = _inputs((1, 4, 7))
    scores = np.asarray(model(x)["logits"])[0]
    # Scoring the options one by one gives the same numbers.
    single = models.AlbertClassifier(model.encoder, 1)
    single.head.set_weights(model.head.get_weights())
    alone = [float(single({k: v[:, i] for k, v in x.items()})["logits"][0, 0])
             for i in range(4)]
    np.testing.assert_allclose(scores, alone, atol=1e-5)


def test_mixed_precision_classifier():
    encoder = AlbertEncoder(CONFIG, dtype="mixed_bfloat16")
    model = models.AlbertClassifier(encoder, 2)
    out = model(_inputs((2, 7)))["logits"]
    assert out.dtype == tf.float32 and np.isfinite(np.asarray(out)).all()
    assert model.head.dense.kernel.dtype == "float32"
    assert model.head.dense.compute_dtype == "bfloat16"
    with pytest.raises(TypeError, match="Received: str"):
        models.AlbertClassifier("encoder", 2)
