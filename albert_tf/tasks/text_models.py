"""Keras-native fine-tuning on raw strings: `AlbertTextClassifier`.

The path a Keras user takes first: build from an encoder or a pretrained
directory, `compile()` with the paper's fine-tuning recipe by default,
`fit()` / `evaluate()` / `predict()` on strings (Python lists, tuples,
arrays, tensors or `tf.data`; an empty list predicts an empty result),
and export to the TF Serving layout of the CLIs with
`export.finetuned_exports.export_text_classifier`. Inside it is the CLIs' own
`AlbertClassifier` (ids in) behind an `AlbertTextPreprocessor`, so both
routes train the same model on the same ids.

    model = AlbertTextClassifier("path/to/albert_base", num_classes=2)
    model.compile(num_train_steps=1000)
    model.fit(["a fine film", "a dull film"], [1, 0], batch_size=32)
    model.predict(["what a film"])  # logits [1, 2]
"""

import collections.abc
import os

import keras
import numpy as np
import tensorflow as tf

from albert_tf.convert import pretrained
from albert_tf.layers.text_preprocessor import AlbertTextPreprocessor
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.task_models import AlbertClassifier
from albert_tf.training import lamb


def model_and_spm(encoder_or_path, spm_model):
    """The model a text model starts from, and its SentencePiece model.

    Args:
        encoder_or_path: an `AlbertEncoder` or `AlbertPretrainer`, or a
            pretrained directory in any format `load_pretrained` reads.
        spm_model: the SentencePiece model, or None for the one that comes
            with the directory (`pretrained.spm_model_path`).

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
        # Resolved once: a released name is fetched (or found) here, and
        # the model and its tokenizer are read from the same folder.
        path = pretrained.local_model_path(os.fspath(encoder_or_path))
        model = pretrained.load_pretrained(path)
        if spm_model is None:
            spm_model = pretrained.spm_model_path(path)
        if spm_model is None:
            raise FileNotFoundError(
                "No SentencePiece model comes with the pretrained directory; "
                f"pass spm_model=. Received: encoder_or_path={path!r}")
        return model, spm_model
    raise TypeError("encoder_or_path must be an AlbertEncoder, an "
                    "AlbertPretrainer or a pretrained directory. "
                    f"Received: {type(encoder_or_path).__name__}")


class TextInputError(ValueError, TypeError):
    """Texts or labels a text model cannot take (names the argument).

    Both a `ValueError` and a `TypeError`: a wrong type of value is what a
    caller of Keras expects as either.
    """


def _describe(value):
    return type(value).__name__


def texts_array(value, argument="x"):
    """Texts as a 1-D NumPy array of `str`/`bytes` objects.

    Args:
        value: a list or tuple of strings, a 1-D NumPy array of strings
            (`str`, `bytes` or objects holding them), or a 1-D string tensor.
        argument: the argument's name, for the error.

    Returns:
        An object array `[N]` (N may be 0).

    Raises:
        TextInputError: anything else, naming `argument` and what is wrong.
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        if value.dtype != tf.string or value.shape.rank != 1:
            raise TextInputError(
                f"{argument} must be a list of strings (a 1-D string "
                f"tensor). Received: a {value.dtype.name} tensor of shape "
                f"{value.shape}")
        array = value.numpy().astype(object)
    elif isinstance(value, (str, bytes)):
        raise TextInputError(f"{argument} must be a list of strings, not one "
                             f"string. Received: {value[:80]!r}; wrap it in "
                             "a list")
    elif isinstance(value, (list, tuple)):
        array = np.empty(len(value), object)
        for index, item in enumerate(value):  # Nested lists stay items.
            array[index] = item
    elif hasattr(value, "__array__"):  # NumPy, pandas
        array = np.asarray(value)
        if array.dtype.kind in "US":
            array = array.astype(object)
    else:
        raise TextInputError(f"{argument} must be a list of strings (or a 1-D "
                             "array or tensor of strings, or a tf.data."
                             f"Dataset). Received: {_describe(value)}")
    if array.ndim != 1 or array.dtype.kind != "O":
        raise TextInputError(
            f"{argument} must be a flat list of strings. Received: an array of "
            f"shape {array.shape} and dtype {array.dtype}")
    for index, item in enumerate(array):
        if isinstance(item, bytes):
            # Keras batches arrays of `str` (bytes from a tensor are text).
            try:
                array[index] = item.decode("utf-8")
            except UnicodeDecodeError:
                raise TextInputError(
                    f"{argument}[{index}] is not UTF-8 text. Received: "
                    f"{item[:40]!r}") from None
        elif not isinstance(item, str):
            raise TextInputError(
                f"{argument}[{index}] must be a string. Received: "
                f"{_describe(item)} {str(item)[:80]!r}")
        else:
            _check_encodable(item, f"{argument}[{index}]")
    return array


def _check_encodable(text, where):
    """Raises TextInputError for a `str` that has no UTF-8 form (a lone
    surrogate, e.g. from `surrogateescape` decoding), which TensorFlow
    would otherwise reject without naming the text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise TextInputError(
            f"{where} is not valid text: {text[error.start]!r} at character "
            f"{error.start} has no UTF-8 form (a lone surrogate); decode "
            "the text with errors='replace'") from None


def _is_sequence_of_texts(value):
    if isinstance(value, (str, bytes)):
        return False
    if isinstance(value, (tf.Tensor, np.ndarray)):
        return value.ndim == 1 if isinstance(value, np.ndarray) else (
            value.shape.rank == 1)
    return isinstance(value, (list, tuple))


def text_inputs(x, argument="x", pairs=True):
    """What a text model's `fit`/`evaluate`/`predict` get as `x`.

    Args:
        x: texts (see `texts_array`); with `pairs`, a pair `(texts,
            texts_b)` or a dict `{"text", "text_b"}` of them; a generator
            or iterator of such batches, alone or as `(x, y[, weights])`
            (each batch checked, its texts given to Keras as string
            tensors); or a `tf.data.Dataset` or `keras.utils.PyDataset`,
            passed on unchanged.
        argument: the argument's name, for errors.
        pairs: whether the model takes pairs of texts.

    Returns:
        `(inputs, count)`: arrays Keras takes, and the number of examples
        (None for what Keras iterates itself).

    Raises:
        TextInputError: not texts, or a pair whose halves differ in length.
    """
    if x is None:
        raise TextInputError(f"{argument} is missing: pass a list of strings")
    if isinstance(x, collections.abc.Iterator):  # A generator, an iterator.
        return _tensor_batches(x, argument, pairs), None
    if isinstance(x, tf.data.Dataset) or not (
            isinstance(x, (list, tuple, dict, str, bytes, tf.Tensor))
            or hasattr(x, "__array__")):
        if isinstance(x, (int, float)):
            raise TextInputError(f"{argument} must be a list of strings. "
                                 f"Received: {_describe(x)}")
        return x, None
    if isinstance(x, dict) and not pairs:
        return x, None  # Packed model inputs: Keras checks them.
    if pairs and isinstance(x, dict):
        unknown = sorted(set(x) - {"text", "text_b"})
        if unknown or "text" not in x:
            raise TextInputError(
                f"{argument} as a dict takes the keys 'text' and 'text_b'. "
                f"Received: {sorted(x)}")
        x = (x["text"], x["text_b"]) if "text_b" in x else x["text"]
    if (pairs and isinstance(x, (list, tuple)) and len(x) == 2
            and all(map(_is_sequence_of_texts, x))):
        text = texts_array(x[0], f"{argument}[0] (the first texts)")
        text_b = texts_array(x[1], f"{argument}[1] (the second texts)")
        if len(text) != len(text_b):
            raise TextInputError(
                f"{argument} is a pair of texts of different lengths. "
                f"Received: {len(text)} and {len(text_b)} texts")
        return (text, text_b), len(text)
    text = texts_array(x, argument)
    return text, len(text)


def _tensor_batches(batches, argument, pairs):
    """A generator's batches `x` or `(x, y[, sample_weight])`, each `x`
    checked as texts and given to Keras as string tensors (Keras' generator
    input takes no NumPy strings or lists of them)."""
    for number, batch in enumerate(batches):
        rest = ()
        if isinstance(batch, tuple) and 2 <= len(batch) <= 3:
            batch, rest = batch[0], tuple(np.asarray(v) for v in batch[1:])
        texts, _ = text_inputs(batch, f"{argument} (batch {number})", pairs)
        if isinstance(texts, tuple):
            texts = tuple(tf.constant(list(t), tf.string) for t in texts)
        elif isinstance(texts, np.ndarray):
            texts = tf.constant(list(texts), tf.string)
        yield (texts, *rest)  # Keras takes (x,) for inputs alone.


def labels_array(y, count, num_classes=None, argument="y"):
    """Labels as a NumPy array, checked against the texts.

    Args:
        y: a list, tuple, array or tensor of numbers (or None).
        count: the number of texts (None: not checked).
        num_classes: C; with C > 1, 1-D labels must be class indices.
        argument: the argument's name, for errors.

    Returns:
        A NumPy array (or None for None).

    Raises:
        TextInputError: not numbers, another count than the texts, or a
            class index outside `0..C-1`.
    """
    if y is None:
        return None
    if isinstance(y, (tf.Tensor, tf.Variable)):
        y = y.numpy()
    if isinstance(y, (str, bytes)) or not (
            isinstance(y, (list, tuple)) or hasattr(y, "__array__")):
        raise TextInputError(f"{argument} must be a list or array of labels. "
                             f"Received: {_describe(y)}")
    try:
        array = np.asarray(y)
    except ValueError:  # Ragged nesting.
        raise TextInputError(f"{argument} must be a rectangular list or array "
                             "of numbers. Received: ragged nesting") from None
    if array.dtype.kind not in "biuf":
        raise TextInputError(f"{argument} must hold numbers. Received: an "
                             f"array of dtype {array.dtype}")
    if count is not None and (array.ndim == 0 or len(array) != count):
        size = "one value" if array.ndim == 0 else f"{len(array)} labels"
        raise TextInputError(f"x and {argument} must have one label per text. "
                             f"Received: {count} texts and {size}")
    if num_classes and num_classes > 1 and array.ndim == 1 and array.size:
        if (array != np.round(array)).any() or array.min() < 0 or (
                array.max() >= num_classes):
            bad = array[(array != np.round(array)) | (array < 0)
                        | (array >= num_classes)][0]
            raise TextInputError(
                f"{argument} must hold class indices in 0..{num_classes - 1}."
                f" Received: {bad.item()!r}")
        array = array.astype(np.int32)
    return array


def recipe_optimizer(learning_rate, num_train_steps, warmup_ratio):
    """The paper's fine-tuning optimizer (see `AlbertTextClassifier.compile`)."""
    return lamb.create_optimizer(
        "adamw", learning_rate, num_train_steps,
        int(warmup_ratio * num_train_steps))


class TextModel(keras.Model):
    """What the models on strings share: `predict` on Python lists, and the
    config of the preprocessor and of the model they start from.

    A subclass sets `preprocessor` (an `AlbertTextPreprocessor`) and
    `base_model` (what `from_config` passes back as `encoder_or_path`), and
    adds its own arguments to `get_config`.
    """

    # Whether `x` may be a pair of texts (`(text, text_b)`).
    takes_pairs = False

    def predict(self, x, *args, **kwargs):
        """Keras `predict` on texts: Python lists, tuples, arrays of
        strings or string tensors too; no texts give an empty result.

        Raises:
            TextInputError: `x` is not texts (names what is wrong).
        """
        x, count = text_inputs(x, "x", pairs=self.takes_pairs)
        if count == 0:
            return self.empty_prediction()
        return super().predict(x, *args, **kwargs)

    def empty_prediction(self):
        """What `predict` returns for no texts (shape `[0, ...]`)."""
        raise NotImplementedError

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

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved (optimizer, loss,
        metrics). Keras skips a model whose `compile` is its own, and the
        loaded model then said it was compiled with no optimizer; the
        optimizer's variables are built here for the file's state to load
        into."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built and getattr(self, "optimizer", None) is not None:
            self.optimizer.build(self.trainable_weights)


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

    Example:

    ```python
    import albert_tf
    from data_prep import vocab

    texts = ["a fine film", "a dull film", "fine acting", "dull acting"]
    labels = [1, 0, 1, 0]
    # A pretrained directory gives both the encoder and the vocabulary:
    # AlbertTextClassifier(path, num_classes=2). Here, tiny random ones.
    config = albert_tf.AlbertConfig.from_preset("tiny", vocab_size=40)
    model = albert_tf.AlbertTextClassifier(
        albert_tf.AlbertEncoder(config), num_classes=2, seq_length=16,
        spm_model=vocab.model_from_texts(texts * 10, vocab_size=40))
    model.compile(num_train_steps=100)  # Then model.fit(texts, labels).
    logits = model.predict(["a fine play", "dull"], verbose=0)
    logits.shape  # (2, 2)
    ```
    """

    def __init__(self, encoder_or_path, num_classes, spm_model=None,
                 seq_length=128, do_lower_case=True, dropout=0.1, **kwargs):
        if isinstance(num_classes, bool) or not isinstance(
                num_classes, (int, np.integer)) or num_classes < 1:
            raise ValueError("num_classes must be a positive integer (1 for "
                             f"regression). Received: {num_classes!r}")
        model, spm_model = model_and_spm(encoder_or_path, spm_model)
        encoder = getattr(model, "encoder", model)
        super().__init__(**kwargs)
        self.num_classes = int(num_classes)
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

    takes_pairs = True

    def _examples(self, method, x, y, sample_weight=None):
        """`(x, y, sample_weight)` as Keras takes them, checked."""
        x, count = text_inputs(x, "x", pairs=True)
        if count is None:  # A dataset or generator: Keras checks it.
            return x, y, sample_weight
        if count == 0:
            raise TextInputError(f"AlbertTextClassifier.{method}: x holds no "
                                 "texts")
        if y is None:
            raise TextInputError(f"AlbertTextClassifier.{method} needs labels "
                                 "y, one per text of x")
        y = labels_array(y, count, self.num_classes, "y")
        if sample_weight is not None:
            sample_weight = labels_array(sample_weight, count, None,
                                         "sample_weight")
        return x, y, sample_weight

    def fit(self, x=None, y=None, *args, validation_data=None,
            sample_weight=None, **kwargs):
        """Keras `fit` on texts and labels: Python lists, tuples, arrays
        or tensors (or a `tf.data.Dataset` of `(texts, labels)` batches).

        Raises:
            TextInputError: `x`, `y` or `validation_data` is not texts and
                one label per text (names which).
        """
        x, y, sample_weight = self._examples("fit", x, y, sample_weight)
        if isinstance(validation_data, (list, tuple)) and len(
                validation_data) in (2, 3):
            validation_data = tuple(
                value for value in self._examples(
                    "fit (validation_data)", *validation_data)
                if value is not None)
        return super().fit(x, y, *args, validation_data=validation_data,
                           sample_weight=sample_weight, **kwargs)

    def evaluate(self, x=None, y=None, *args, sample_weight=None, **kwargs):
        """Keras `evaluate` on texts and labels (as `fit` takes them)."""
        x, y, sample_weight = self._examples("evaluate", x, y, sample_weight)
        return super().evaluate(x, y, *args, sample_weight=sample_weight,
                                **kwargs)

    def empty_prediction(self):
        return np.zeros((0, self.num_classes), np.float32)

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
