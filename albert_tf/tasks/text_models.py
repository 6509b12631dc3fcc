"""Keras-native fine-tuning on raw strings: `AlbertTextClassifier`.

The path a Keras user takes first: build from an encoder or a pretrained
directory, `compile()` with the paper's fine-tuning recipe by default,
`fit()` / `evaluate()` / `predict()` on strings (Python lists or `tf.data`),
and export to the TF Serving layout of the CLIs with
`export.tasks.export_text_classifier`. Inside it is the CLIs' own
`AlbertClassifier` (ids in) behind an `AlbertTextPreprocessor`, so both
routes train the same model on the same ids.

    model = AlbertTextClassifier("path/to/albert_base", num_classes=2)
    model.compile(num_train_steps=1000)
    model.fit(["a fine film", "a dull film"], [1, 0], batch_size=32)
    model.predict(["what a film"])  # logits [1, 2]
"""

import glob
import os

import keras
import tensorflow as tf

from albert_tf.convert import pretrained
from albert_tf.layers.text_preprocessor import AlbertTextPreprocessor
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.task_models import AlbertClassifier
from albert_tf.training import optimization

# Where the formats keep their SentencePiece model, most specific first.
_SPM_PATTERNS = ("spiece.model", "30k-clean.model", "spm.model", "*.model",
                 os.path.join("assets", "tokenizer", "vocabulary.spm"), "*.spm")


def find_spm_model(path):
    """The SentencePiece model inside a pretrained directory.

    Raises:
        FileNotFoundError: none is there (pass `spm_model=`).
    """
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    for pattern in _SPM_PATTERNS:
        found = sorted(glob.glob(os.path.join(folder, pattern)))
        if found:
            return found[0]
    raise FileNotFoundError(
        f"No SentencePiece model (*.model, *.spm) in {folder!r}; pass "
        "spm_model=.")


def model_and_spm(encoder_or_path, spm_model):
    """The model a text model starts from, and its SentencePiece model.

    Args:
        encoder_or_path: an `AlbertEncoder` or `AlbertPretrainer`, or a
            pretrained directory in any format `load_pretrained` reads.
        spm_model: the SentencePiece model, or None for the one in the
            directory.

    Returns:
        `(model, spm_model)`: the encoder or pretrainer as given, or the
        `AlbertPretrainer` loaded from the directory (its heads included).

    Raises:
        ValueError: a model without `spm_model`.
        TypeError: anything else as `encoder_or_path`.
        FileNotFoundError: a directory without a SentencePiece model.
    """
    if isinstance(encoder_or_path, (AlbertEncoder, AlbertPretrainer)):
        if spm_model is None:
            raise ValueError(f"An {type(encoder_or_path).__name__} needs its "
                             "SentencePiece model: pass spm_model=.")
        return encoder_or_path, spm_model
    if isinstance(encoder_or_path, (str, os.PathLike)):
        path = os.fspath(encoder_or_path)
        model = pretrained.load_pretrained(path)
        return model, spm_model if spm_model is not None else find_spm_model(path)
    raise TypeError("encoder_or_path must be an AlbertEncoder, an "
                    "AlbertPretrainer or a pretrained directory. "
                    f"Received: {type(encoder_or_path).__name__}")


def _is_text_list(value):
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def string_tensors(x):
    """A list of strings (or a pair of lists) as string tensors; else `x`."""
    if _is_text_list(x):
        return tf.constant(x, tf.string)
    if isinstance(x, tuple) and len(x) == 2 and all(map(_is_text_list, x)):
        return tuple(tf.constant(v, tf.string) for v in x)
    return x


def recipe_optimizer(learning_rate, num_train_steps, warmup_ratio):
    """The paper's fine-tuning optimizer (see `AlbertTextClassifier.compile`)."""
    return optimization.create_optimizer(
        "adamw", learning_rate, num_train_steps,
        int(warmup_ratio * num_train_steps))


class TextModel(keras.Model):
    """What the models on strings share: `predict` on Python lists, and the
    config of the preprocessor and of the model they start from.

    A subclass sets `preprocessor` (an `AlbertTextPreprocessor`) and
    `base_model` (what `from_config` passes back as `encoder_or_path`), and
    adds its own arguments to `get_config`.
    """

    # Keras takes arrays and tensors; Python lists of strings become tensors.
    def predict(self, x, *args, **kwargs):
        return super().predict(string_tensors(x), *args, **kwargs)

    def get_config(self):
        return {
            "name": self.name, "trainable": self.trainable,
            "encoder_or_path": keras.saving.serialize_keras_object(
                self.base_model),
            "spm_model": self.preprocessor.get_config()["spm_model"],
            "seq_length": self.preprocessor.seq_length,
            "do_lower_case": self.preprocessor.do_lower_case,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder_or_path"] = keras.saving.deserialize_keras_object(
            config["encoder_or_path"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextClassifier(TextModel):
    """A sequence classifier (or regressor) taking raw strings.

    Call arguments:
        inputs: strings `[B]`, or `(text, text_b)` pairs of `[B]` strings.

    Returns logits `[B, num_classes]` (the score `[B, 1]` for regression).

    Args:
        encoder_or_path: an `AlbertEncoder` (or an `AlbertPretrainer`, whose
            encoder is taken), or a pretrained directory in any format
            `albert_tf.load_pretrained` reads.
        num_classes: C (1 for regression).
        spm_model: the SentencePiece model (path, bytes or base64); default:
            the one in the pretrained directory.
        seq_length: T (longer inputs are trimmed as the exports trim).
        do_lower_case: as the vocabulary was built.
        dropout: dropout on the pooled output (official: 0.1).
    """

    def __init__(self, encoder_or_path, num_classes, spm_model=None,
                 seq_length=128, do_lower_case=True, dropout=0.1, **kwargs):
        model, spm_model = model_and_spm(encoder_or_path, spm_model)
        encoder = getattr(model, "encoder", model)
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.dropout = dropout
        self.preprocessor = AlbertTextPreprocessor(
            spm_model, seq_length, do_lower_case, name="preprocessor")
        self.classifier = AlbertClassifier(encoder, num_classes,
                                           dropout=dropout, name="classifier")

    def call(self, inputs, training=False):
        return self.classifier(self.preprocessor(inputs),
                               training=training)["logits"]

    def compile(self, optimizer=None, loss=None, metrics=None,
                learning_rate=3e-5, num_train_steps=1000, warmup_ratio=0.1,
                **kwargs):
        """Keras `compile`, with the paper's fine-tuning recipe by default.

        The default optimizer is the official AdamW (weight decay 0.01, no
        decay on LayerNorm and biases) with linear warmup over
        `warmup_ratio` of `num_train_steps` and linear decay to 0 after it,
        gradients clipped to global norm 1.0; the default loss is
        cross-entropy on the logits (mean squared error for regression),
        with accuracy as the metric.

        Args:
            optimizer, loss, metrics: as Keras; None takes the defaults.
            learning_rate: peak learning rate of the default optimizer.
            num_train_steps: steps the default schedule decays over.
            warmup_ratio: share of them spent warming up.
            **kwargs: the other arguments of `keras.Model.compile`.
        """
        if optimizer is None:
            optimizer = recipe_optimizer(learning_rate, num_train_steps,
                                         warmup_ratio)
        regression = self.num_classes == 1
        if loss is None:
            loss = (keras.losses.MeanSquaredError() if regression else
                    keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if metrics is None:
            metrics = [] if regression else ["accuracy"]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                        **kwargs)

    def fit(self, x=None, y=None, *args, **kwargs):
        return super().fit(string_tensors(x), y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        return super().evaluate(string_tensors(x), y, *args, **kwargs)

    @property
    def encoder(self):
        return self.classifier.encoder

    @property
    def base_model(self):
        return self.encoder

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes,
                       "dropout": self.dropout})
        return config
