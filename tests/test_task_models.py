"""Task heads (common layer checks) and task models (common model checks,
scores per option, dtypes of the heads)."""

import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf import AlbertEncoder
from albert_tf.layers import task_heads as heads
from albert_tf.models import task_models as models
from tests.layer_checks import run_layer_test
from tests.layer_checks import run_model_test

CONFIG = AlbertConfig.from_preset("tiny", num_hidden_layers=1)


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
                   (4, 3), expected_num_trainable_weights=2,
                   mixed_output_dtype="float32")
    with pytest.raises(ValueError, match="Received: num_classes=0"):
        heads.ClassificationHead(0)


def test_span_head_masks_padding():
    mask = np.ones((2, 6), "int32")
    mask[:, 4:] = 0
    layer = run_layer_test(
        heads.SpanHead, {}, {"sequence_output": np.random.rand(2, 6, 8).astype(
            "float32"), "input_mask": mask}, (2, 6, 2),
        expected_num_trainable_weights=2, has_dropout=False,
        mixed_output_dtype="float32")
    out = np.asarray(layer(np.random.rand(2, 6, 8).astype("float32"), mask))
    assert (out[:, 4:] < -1e3).all() and (np.abs(out[:, :4]) < 10).all()


def test_multiple_choice_head_and_fold():
    run_layer_test(heads.MultipleChoiceHead, dict(num_choices=4, dropout=0.5),
                   {"pooled_output": np.random.rand(8, 8).astype("float32")},
                   (2, 4), expected_num_trainable_weights=2,
                   mixed_output_dtype="float32")
    run_layer_test(heads.FoldChoices, {},
                   {"inputs": np.arange(24, dtype="int32").reshape(2, 3, 4)},
                   (6, 4), expected_num_trainable_weights=0, has_dropout=False,
                   mixed_output_dtype="int32")


# kind -> (class, constructor arguments but the encoder, input shape,
# output shapes, variables of the heads).
KINDS = {
    "classifier": (models.AlbertClassifier, {"num_classes": 3}, (2, 7),
                   {"logits": (2, 3)}, 2),
    "regressor": (models.AlbertClassifier, {"num_classes": 1}, (2, 7),
                  {"logits": (2, 1)}, 2),
    "span": (models.AlbertSpanExtractor, {}, (2, 7),
             {"start_logits": (2, 7), "end_logits": (2, 7)}, 2),
    "span_v2": (models.AlbertSpanExtractor, {"with_no_answer": True}, (2, 7),
                {"start_logits": (2, 7), "end_logits": (2, 7),
                 "no_answer_logits": (2,)}, 4),
    "choice": (models.AlbertMultipleChoice, {"num_choices": 4}, (2, 4, 7),
               {"logits": (2, 4)}, 2),
}


def _owns_its_encoder(model):
    # The encoder's weights are the model's (fine-tuning trains them).
    assert all(any(w is v for v in model.weights)
               for w in model.encoder.weights)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_task_model_checks(kind):
    cls, kwargs, shape, expected, head_weights = KINDS[kind]
    encoder = AlbertEncoder(CONFIG)
    run_model_test(
        cls, {"encoder": encoder, **kwargs}, _inputs(shape), expected,
        expected_num_trainable_weights=len(encoder.trainable_weights)
        + head_weights,
        mixed_init_kwargs={
            "encoder": AlbertEncoder(CONFIG, dtype="mixed_bfloat16"), **kwargs},
        mixed_output_dtype="float32", each_model=_owns_its_encoder)


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
    # The head takes the encoder's policy.
    assert model.head.dense.kernel.dtype == "float32"
    assert model.head.dense.compute_dtype == "bfloat16"
    with pytest.raises(TypeError, match="Received: str"):
        models.AlbertClassifier("encoder", 2)
