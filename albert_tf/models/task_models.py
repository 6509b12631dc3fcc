"""Fine-tuning models on `AlbertEncoder`: classifier, span extractor, multiple choice.

Shape legend: B batch, K choices, T length, C classes.

Each is a Functional Keras model over an encoder passed in (fresh, or the
`.encoder` of a pretrained `AlbertPretrainer`), with dict inputs (the
encoder's three int32 inputs) and dict outputs. `get_config` holds the
serialized encoder, so `.keras` files and `from_config` rebuild the whole
model.
"""

import keras
from keras import ops

from albert_tf.layers.task_heads import ClassificationHead
from albert_tf.layers.task_heads import FoldChoices
from albert_tf.layers.task_heads import MultipleChoiceHead
from albert_tf.layers.task_heads import SpanHead
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.encoder import AlbertEncoder


def _check_encoder(encoder):
    if not isinstance(encoder, AlbertEncoder):
        raise TypeError("Task models take an AlbertEncoder. "
                        f"Received: {type(encoder).__name__}")
    return encoder


def _inputs(shape=(None,)):
    return {name: keras.Input(shape=shape, dtype="int32", name=name)
            for name in INPUT_NAMES}


class _TaskModel(keras.Model):
    """Shared (de)serialization: the encoder plus the subclass's own args."""

    _ARGS = ()

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable,
                  "encoder": keras.saving.serialize_keras_object(self.encoder)}
        config.update({arg: getattr(self, arg) for arg in self._ARGS})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(
            config["encoder"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(_TaskModel):
    """Sequence classifier or regressor (GLUE).

    Outputs: `{"logits": float32 [B, C]}`; with `num_classes=1` the single
    column is the regression score (STS-B, trained with MSE).

    Args:
        encoder: an `AlbertEncoder`.
        num_classes: C (1 for regression).
        dropout: dropout on `pooled_output` (official: 0.1).
        initializer_range: stddev of the head's initializer.

    Example:

    ```python
    import albert_tf
    import numpy as np

    encoder = albert_tf.AlbertEncoder(albert_tf.AlbertConfig.from_preset("tiny"))
    classifier = albert_tf.AlbertClassifier(encoder, num_classes=3)
    outputs = classifier({
        "input_word_ids": np.array([[2, 15, 16, 3]], "int32"),
        "input_mask": np.ones((1, 4), "int32"),
        "input_type_ids": np.zeros((1, 4), "int32"),
    })
    outputs["logits"].shape  # (1, 3)
    ```
    """

    _ARGS = ("num_classes", "dropout", "initializer_range")

    def __init__(self, encoder, num_classes, dropout=0.1,
                 initializer_range=0.02, **kwargs):
        _check_encoder(encoder)
        # === Layers ===
        head = ClassificationHead(
            num_classes, dropout=dropout, initializer_range=initializer_range,
            dtype=encoder.embedding.dtype_policy, name="classifier")
        # === Functional Model ===
        inputs = _inputs()
        pooled = encoder(inputs)["pooled_output"]
        outputs = {"logits": head(pooled)}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        self.encoder = encoder
        self.head = head
        self.num_classes = num_classes
        self.dropout = dropout
        self.initializer_range = initializer_range


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanExtractor(_TaskModel):
    """Answer-span extractor (SQuAD); the v2.0 variant can answer "no answer".

    Outputs: `start_logits` and `end_logits` (float32 `[B, T]`, padding
    masked) and, with `with_no_answer`, `no_answer_logits` (float32 `[B]`): a
    dense layer on `pooled_output` scoring "this window holds no answer"
    (sigmoid gives the no-answer probability of SQuAD v2.0's evaluation).

    Args:
        encoder: an `AlbertEncoder`.
        with_no_answer: whether to add the no-answer head (SQuAD v2.0).
        dropout: dropout before the no-answer head.
        initializer_range: stddev of the heads' initializers.

    Example:

    ```python
    import albert_tf
    import numpy as np

    encoder = albert_tf.AlbertEncoder(albert_tf.AlbertConfig.from_preset("tiny"))
    squad = albert_tf.AlbertSpanExtractor(encoder, with_no_answer=True)
    outputs = squad({
        "input_word_ids": np.array([[2, 15, 16, 3, 17, 18, 19, 3]], "int32"),
        "input_mask": np.ones((1, 8), "int32"),
        "input_type_ids": np.array([[0, 0, 0, 0, 1, 1, 1, 1]], "int32"),
    })
    outputs["start_logits"].shape  # (1, 8), as `end_logits`
    outputs["no_answer_logits"].shape  # (1,)
    ```
    """

    _ARGS = ("with_no_answer", "dropout", "initializer_range")

    def __init__(self, encoder, with_no_answer=False, dropout=0.1,
                 initializer_range=0.02, **kwargs):
        _check_encoder(encoder)
        dtype = encoder.embedding.dtype_policy
        # === Layers ===
        span_head = SpanHead(initializer_range, dtype=dtype, name="span")
        no_answer_head = None
        if with_no_answer:
            no_answer_head = ClassificationHead(
                1, dropout=dropout, initializer_range=initializer_range,
                dtype=dtype, name="no_answer")
        # === Functional Model ===
        inputs = _inputs()
        encoded = encoder(inputs)
        logits = span_head(encoded["sequence_output"], inputs["input_mask"])
        start, end = ops.unstack(logits, 2, axis=-1)  # [B, T] each
        outputs = {"start_logits": start, "end_logits": end}
        if with_no_answer:
            outputs["no_answer_logits"] = ops.squeeze(
                no_answer_head(encoded["pooled_output"]), axis=-1)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        self.encoder = encoder
        self.span_head = span_head
        self.no_answer_head = no_answer_head
        self.with_no_answer = with_no_answer
        self.dropout = dropout
        self.initializer_range = initializer_range


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(_TaskModel):
    """Multiple-choice scorer (RACE): one score per option.

    Inputs: the encoder's three inputs, each int32 `[B, K, T]`. Outputs:
    `{"logits": float32 [B, K]}`; the loss takes the softmax across choices.

    Args:
        encoder: an `AlbertEncoder`.
        num_choices: K.
        dropout: dropout on `pooled_output`.
        initializer_range: stddev of the head's initializer.

    Example:

    ```python
    import albert_tf
    import numpy as np

    encoder = albert_tf.AlbertEncoder(albert_tf.AlbertConfig.from_preset("tiny"))
    race = albert_tf.AlbertMultipleChoice(encoder, num_choices=2)
    outputs = race({  # [B, K, T]: one row per (question, option) pair
        "input_word_ids": np.array([[[2, 15, 3, 16, 3], [2, 15, 3, 17, 3]]],
                                   "int32"),
        "input_mask": np.ones((1, 2, 5), "int32"),
        "input_type_ids": np.array([[[0, 0, 0, 1, 1]] * 2], "int32"),
    })
    outputs["logits"].shape  # (1, 2)
    ```
    """

    _ARGS = ("num_choices", "dropout", "initializer_range")

    def __init__(self, encoder, num_choices=4, dropout=0.1,
                 initializer_range=0.02, **kwargs):
        _check_encoder(encoder)
        # === Layers ===
        fold = FoldChoices(name="fold_choices")
        head = MultipleChoiceHead(
            num_choices, dropout=dropout, initializer_range=initializer_range,
            dtype=encoder.embedding.dtype_policy, name="choice_scorer")
        # === Functional Model ===
        inputs = _inputs(shape=(num_choices, None))
        folded = {name: fold(inputs[name]) for name in INPUT_NAMES}  # [B*K, T]
        pooled = encoder(folded)["pooled_output"]
        outputs = {"logits": head(pooled)}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        self.encoder = encoder
        self.head = head
        self.num_choices = num_choices
        self.dropout = dropout
        self.initializer_range = initializer_range
