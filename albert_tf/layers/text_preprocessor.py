"""Raw strings to encoder inputs, as a Keras layer.

`AlbertTextPreprocessor` wraps `albert_tf.layers.preprocessing.
TextPreprocessor` (the in-graph preprocessing, SentencePiece with the
official tokenizer's rules, trimming and packing of the exports), so a Keras
model can take strings: `compile`, `fit`, `predict` and `evaluate` run the
same tokenization as training data and the served SavedModels. Rows are
padded to `seq_length` (static shapes for Keras' compiled steps).

The SentencePiece model travels in the layer's config (base64), so a saved
`.keras` model needs no other file.
"""

import base64
import os

import keras
import tensorflow as tf

from albert_tf.layers import preprocessing


def _model_proto(spm_model):
    """The serialized SentencePiece model of a path, bytes or base64 text."""
    if isinstance(spm_model, bytes):
        return spm_model
    if isinstance(spm_model, str) and os.path.exists(spm_model):
        with open(spm_model, "rb") as f:
            return f.read()
    if isinstance(spm_model, str):
        try:
            return base64.b64decode(spm_model, validate=True)
        except ValueError:
            pass
    raise ValueError("spm_model must be a SentencePiece model file, its bytes "
                     f"or their base64. Received: {str(spm_model)[:80]!r}")


def _one_text_per_row(value, name):
    """`[B]` strings from `[B]` or `[B, 1]` (a Keras `Input(shape=(1,))`).

    Anything else (`[B, 2]`, a scalar, numbers) is refused naming `name`:
    flattening a `[B, 2]` batch would read it as 2B texts.
    """
    try:
        value = tf.convert_to_tensor(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be strings, one text per row. "
                         f"Received: {error}") from None
    if value.shape.rank == 2 and value.shape[1] in (None, 1):
        value = tf.raw_ops.EnsureShape(input=value, shape=[None, 1])[:, 0]
    return preprocessing.checked_texts(value, name)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextPreprocessor(keras.layers.Layer):
    """Strings to `input_word_ids`, `input_mask`, `input_type_ids` `[B, T]`.

    Call arguments:
        inputs: a string tensor `[B]` (single texts), or a pair `(text,
            text_b)` / dict `{"text", "text_b"}` of `[B]` string tensors
            (an empty `text_b` packs as a single text).

    Args:
        spm_model: the SentencePiece model: a file path, its bytes, or base64.
        seq_length: T (at least 3).
        do_lower_case: as the vocabulary was built.

    Example:

    ```python
    import os
    import tempfile

    import tensorflow as tf
    from albert_tf import AlbertTextPreprocessor
    from data_prep import builtin_corpus, vocab

    folder = tempfile.mkdtemp()
    corpus = os.path.join(folder, "corpus.txt")
    builtin_corpus.write_corpus(corpus, max_chars=200_000)
    vocab.train_vocab(corpus, os.path.join(folder, "spm"), vocab_size=800)
    preprocessor = AlbertTextPreprocessor(os.path.join(folder, "spm.model"),
                                          seq_length=12)
    ids = preprocessor(tf.constant(["Return the sum of a list.", "Open a file."]))
    print(sorted(ids), ids["input_word_ids"].shape)  # ... (2, 12)
    ```
    """

    def __init__(self, spm_model, seq_length=128, do_lower_case=True, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self._proto = _model_proto(spm_model)
        self.seq_length = int(seq_length)
        self.do_lower_case = bool(do_lower_case)
        self.text_preprocessor = preprocessing.TextPreprocessor(
            self._proto, self.seq_length, self.do_lower_case)
        # String ops have no XLA kernels: Keras' jit_compile="auto" skips XLA.
        self.supports_jit = False

    def call(self, inputs):
        text_b = None
        if isinstance(inputs, dict):
            text, text_b = inputs["text"], inputs.get("text_b")
        elif isinstance(inputs, (list, tuple)):
            text, text_b = inputs
        else:
            text = inputs
        text = _one_text_per_row(text, "text")
        if text_b is not None:
            text_b = _one_text_per_row(text_b, "text_b")
        return self.text_preprocessor.encode(text, text_b)

    def compute_output_spec(self, inputs):
        if isinstance(inputs, dict):
            inputs = inputs["text"]
        elif isinstance(inputs, (list, tuple)):
            inputs = inputs[0]
        shape = (inputs.shape[0], self.seq_length)
        return {name: keras.KerasTensor(shape, dtype="int32")
                for name in ("input_word_ids", "input_mask", "input_type_ids")}

    @property
    def spm_model_proto(self):
        """The serialized SentencePiece model."""
        return self._proto

    def get_config(self):
        config = super().get_config()
        config.update({
            "spm_model": base64.b64encode(self._proto).decode("ascii"),
            "seq_length": self.seq_length,
            "do_lower_case": self.do_lower_case,
        })
        return config
