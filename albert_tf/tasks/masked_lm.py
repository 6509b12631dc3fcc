"""Keras-native masked-LM training on raw strings: `AlbertMaskedLM`.

Continued pretraining (domain adaptation) and fill-in-the-blank queries the
Keras way: build from an encoder, a pretrainer or a pretrained directory
(the MLM head's weights come along), `compile()` with the paper's
fine-tuning recipe by default, `fit()` / `evaluate()` on plain texts,
`predict()` / `fill_mask()` on texts holding `[MASK]`, and export to the
CLIs' TF Serving layout with `export.finetuned_exports.export_masked_lm`.

Masking is the project's one specification (`data_prep.ngram_masking`), applied
by the dynamic pretraining masker (`dynamic_masking.mask_example`) to each
tokenized text inside the `tf.data` pipeline that `fit` and `evaluate`
build: whole words, n-grams of 1..3 words with p(n) ∝ 1/n, 15% of the
tokens (at most `max_predictions_per_seq`), each 80% `[MASK]`, 10% kept,
10% a random id. `fit` draws new masks every epoch; `evaluate` masks each
text the same way every time (seeded by the text), so two evaluations of
one model agree and a before/after comparison sees the same masks.

    model = AlbertMaskedLM("path/to/albert_base")
    model.compile(num_train_steps=1000)
    model.fit(["one line of text", "another line"], batch_size=32)
    model.evaluate(["held-out text"])           # masked-LM loss, accuracy
    model.fill_mask(["the cat sat on the [MASK]."])
    # e.g. [[[("▁mat", 0.41), ("▁floor", 0.12), ...]]]: per text, per mask

Shape legend: B batch, T `seq_length`, P `max_predictions_per_seq`,
V vocabulary, K top k.
"""

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.layers import preprocessing
from albert_tf.layers.text_preprocessor import AlbertTextPreprocessor
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.tasks import fill_mask as fill_mask_lib
from albert_tf.tasks import text_models
from albert_tf.training import dynamic_masking
from data_prep import ngram_masking
from data_prep import vocab

_MASKING = ngram_masking.MaskingOptions()
# What `evaluate` mixes into each text's masking seed (`fit` mixes a draw).
_EVALUATE_TAG = "evaluate"


def _texts(x, what):
    """`x` (a list, tuple, array or tensor of strings) as a string tensor `[N]`.

    Raises:
        TextInputError: anything else, or no texts, naming `what`.
    """
    texts = text_models.texts_array(x, what)
    if not len(texts):
        raise text_models.TextInputError(f"{what} holds no texts.")
    return tf.constant(texts, tf.string)


def _is_masked(spec):
    """Whether a dataset's `element_spec` is that of `mask_texts` batches."""
    return (isinstance(spec, tuple) and len(spec) == 3
            and isinstance(spec[0], dict)
            and "masked_lm_positions" in spec[0])


def _no_labels(method, y, kwargs):
    """Refuses labels: the model makes its own by masking the texts."""
    given = {"y": y} if y is not None else {}
    given.update({k: kwargs[k] for k in ("sample_weight", "class_weight",
                                         "validation_split")
                  if kwargs.get(k)})
    if given:
        raise ValueError(
            f"AlbertMaskedLM.{method} takes texts only: it masks them and "
            "makes the labels itself (pass validation texts as "
            f"validation_data=). Received: {', '.join(sorted(given))}")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMaskedLM(text_models.TextModel):
    """ALBERT's masked LM on raw strings (see the module docstring).

    Call arguments:
        inputs: strings `[B]` holding `[MASK]` markers, or the packed
            inputs of a masked batch (the encoder's three int32 `[B, T]`
            tensors and `masked_lm_positions` int32 `[B, P]`).

    Returns the MLM logits float32 `[B, P, V]`: for strings, at the first P
    markers of each text, in order (slots past a text's markers hold the
    logits at `[CLS]`; `fill_mask` answers for every marker).

    `fit` trains the encoder and the MLM head (its dense, LayerNorm and
    bias; the decoder is the word-embedding table). The pooler and the SOP
    head, which the masked-LM loss does not reach, are left out of the
    trainable weights and keep theirs; they are exported as they are.

    Args:
        encoder_or_path: an `AlbertPretrainer` (its MLM head is used), an
            `AlbertEncoder` (new heads are put on it; the encoder itself is
            shared, not copied), or a pretrained directory in any format
            `albert_tf.load_pretrained` reads (heads included).
        spm_model: the SentencePiece model (path, bytes or base64); default:
            the one in the pretrained directory.
        seq_length: T (longer texts are trimmed as the exports trim).
        do_lower_case: as the vocabulary was built.
        max_predictions_per_seq: P, the most masked tokens per text.
        masked_lm_prob: fraction of the tokens masked.
        max_ngram: longest masked span, in words.
        favor_shorter_ngram: p(n) ∝ 1/n (else the weights reversed).
        do_whole_word_mask: spans are whole words (else single pieces).
        seed: seed of the masks (of `fit` and `evaluate`) and of the
            shuffle of `fit`.

    Raises:
        ValueError: bad masking options, a SentencePiece model without the
            ALBERT special pieces or larger than the vocabulary, or a
            `seq_length` beyond the model's positions.

    Example:

    ```python
    import albert_tf
    from data_prep import vocab

    # A tiny vocabulary (with ALBERT's special pieces) and a tiny encoder;
    # a pretrained directory replaces both: AlbertMaskedLM(path).
    words = "the quick brown fox jumps over a lazy dog".split()
    texts = [" ".join(words[i:] + words[:i]) for i in range(len(words))]
    spm_model = vocab.model_from_texts(texts * 20, vocab_size=40)
    encoder = albert_tf.AlbertEncoder(
        albert_tf.AlbertConfig.from_preset("tiny", vocab_size=40))

    model = albert_tf.AlbertMaskedLM(
        encoder, spm_model=spm_model, seq_length=16)
    model.compile(num_train_steps=100)  # Then model.fit(texts).
    # Per text, per [MASK]: the top_k (piece, probability) pairs (random
    # here: the model is untrained).
    answers = model.fill_mask(["the quick [MASK] fox"], top_k=3)
    len(answers[0][0])  # 3
    ```
    """

    def __init__(self, encoder_or_path, spm_model=None, seq_length=128,
                 do_lower_case=True,
                 max_predictions_per_seq=_MASKING.max_predictions_per_seq,
                 masked_lm_prob=_MASKING.masked_lm_prob,
                 max_ngram=_MASKING.ngram,
                 favor_shorter_ngram=_MASKING.favor_shorter_ngram,
                 do_whole_word_mask=_MASKING.do_whole_word_mask, seed=12345,
                 **kwargs):
        model, spm_model = text_models.model_and_spm(encoder_or_path,
                                                     spm_model)
        if not isinstance(model, AlbertPretrainer):
            model = AlbertPretrainer(model.config, encoder=model,
                                     name="pretrainer")
        config = model.config
        ngram_masking.MaskingOptions(masked_lm_prob, max_predictions_per_seq,
                                     max_ngram, favor_shorter_ngram,
                                     do_whole_word_mask).validate()
        if seq_length > config.max_position_embeddings:
            raise ValueError(
                "seq_length exceeds the model's max_position_embeddings. "
                f"Received: seq_length={seq_length}, "
                f"max_position_embeddings={config.max_position_embeddings}")
        super().__init__(**kwargs)
        self.pretrainer = model
        self.preprocessor = AlbertTextPreprocessor(
            spm_model, seq_length, do_lower_case, name="preprocessor")
        sp_model = vocab.check_special_pieces(self.preprocessor.spm_model_proto)
        if sp_model.get_piece_size() > config.vocab_size:
            raise ValueError(
                "The SentencePiece model has more pieces than the model's "
                f"vocabulary. Received: {sp_model.get_piece_size()} pieces, "
                f"vocab_size={config.vocab_size}")
        # Whole-word masking needs each id's "starts a word" bit, as the
        # record builder's `token_boundary`.
        self._start_pieces = ngram_masking.start_piece_table(sp_model)
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.seed = int(seed)
        self.masking = dynamic_masking.DynamicMasking(
            vocab_size=config.vocab_size, masked_lm_prob=masked_lm_prob,
            max_ngram=max_ngram, favor_shorter_ngram=favor_shorter_ngram,
            do_whole_word_mask=do_whole_word_mask, seed=self.seed)
        self._fill_mask_function = tf.function(
            self._fill_mask_outputs,
            input_signature=[tf.TensorSpec([None], tf.string),
                             tf.TensorSpec([], tf.int32)],
            autograph=False)

    @property
    def encoder(self):
        return self.pretrainer.encoder

    @property
    def trainable_weights(self):
        unused = {id(v) for layer in (self.encoder.pooler,
                                      self.pretrainer.sop_head)
                  for v in layer.weights}
        return [v for v in super().trainable_weights if id(v) not in unused]

    # --- The model ---

    def build(self, input_shape=None):
        # The pretrainer is a Functional model: its weights exist already,
        # and the preprocessor has none.
        self.built = True

    def call(self, inputs, training=False):
        if not isinstance(inputs, dict):
            inputs = self.query_inputs(inputs)
        return self.pretrainer.masked_lm_logits(inputs, training=training)

    def query_inputs(self, text):
        """Packed inputs of texts holding `[MASK]`, predicting the first P.

        Args:
            text: strings `[B]`.

        Returns:
            The encoder's inputs (int32 `[B, T]`) and `masked_lm_positions`
            (int32 `[B, P]`, 0 past a text's markers).
        """
        text = tf.reshape(tf.convert_to_tensor(text, tf.string), [-1])
        tokenizer = self.preprocessor.text_preprocessor
        inputs = tokenizer.pack(tokenizer.tokenize_with_masks(text))
        positions = fill_mask_lib.marker_positions(inputs["input_word_ids"])
        inputs["masked_lm_positions"] = positions[
            :, :self.max_predictions_per_seq].to_tensor(
                0, shape=[None, self.max_predictions_per_seq])
        return inputs

    def mask_texts(self, text, tag):
        """Tokenizes and masks a batch of texts (the training examples).

        Each text's masks are a function of the text and `tag` alone.

        Args:
            text: strings `[B]`.
            tag: a string scalar mixed into every text's seed.

        Returns:
            `(inputs, masked_lm_ids, masked_lm_weights)`: the model's inputs
            (see `call`), the original ids int32 `[B, P]` and the weights
            float32 `[B, P]` (1 at real predictions).
        """
        length, predictions = self.preprocessor.seq_length, \
            self.max_predictions_per_seq
        text = tf.reshape(tf.convert_to_tensor(text, tf.string), [-1])
        packed = {key: tf.ensure_shape(value, [None, length]) for key, value
                  in self.preprocessor.text_preprocessor.encode(text).items()}
        ids = packed["input_word_ids"]
        features = {
            "input_ids": ids, "input_mask": packed["input_mask"],
            "segment_ids": packed["input_type_ids"],
            "token_boundary": tf.cast(tf.gather(
                tf.constant(self._start_pieces), ids), tf.int32),
        }
        seeds = tf.strings.to_hash_bucket_fast(text + "\x00" + tag, 2**62)

        def spec(width, dtype=tf.int32):
            return tf.TensorSpec([width], dtype)

        masked = tf.map_fn(
            lambda args: dynamic_masking.mask_example(
                args[0], args[1], predictions, self.masking),
            (features, seeds), fn_output_signature={
                "input_ids": spec(length), "input_mask": spec(length),
                "segment_ids": spec(length), "token_boundary": spec(length),
                "masked_lm_positions": spec(predictions),
                "masked_lm_ids": spec(predictions),
                "masked_lm_weights": spec(predictions, tf.float32)})
        inputs = {"input_word_ids": masked["input_ids"],
                  "input_mask": masked["input_mask"],
                  "input_type_ids": masked["segment_ids"],
                  "masked_lm_positions": masked["masked_lm_positions"]}
        return inputs, masked["masked_lm_ids"], masked["masked_lm_weights"]

    def masked_dataset(self, x, batch_size=None, training=True, shuffle=True):
        """The `tf.data` pipeline `fit` (training) and `evaluate` run.

        Args:
            x: a list (or 1-D array or tensor) of strings, or a
                `tf.data.Dataset` of batches of strings `[B]` (or of batches
                masked already, `mask_texts`' triples, taken as they are).
            batch_size: B for a list (default 32); None for a dataset.
            training: new masks every epoch; else each text's fixed masks.
            shuffle: shuffle a list every epoch (training only).

        Returns:
            A dataset of `mask_texts` batches.

        Raises:
            TypeError, ValueError: `x` is not texts, or a dataset yields
                anything but batches of strings.
        """
        if isinstance(x, tf.data.Dataset):
            spec = x.element_spec
            if _is_masked(spec):
                return x
            if not (isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string
                    and spec.shape.rank == 1):
                raise ValueError(
                    "The dataset must yield batches of texts (string [B]); "
                    "AlbertMaskedLM makes the labels itself. Received: "
                    f"element_spec={spec}")
            if batch_size is not None:
                raise ValueError("batch_size is for lists of texts; a dataset "
                                 f"comes batched. Received: batch_size={batch_size}")
            dataset = x
        else:
            text = _texts(x, "x")
            dataset = tf.data.Dataset.from_tensor_slices(text)
            if training and shuffle:
                dataset = dataset.shuffle(int(text.shape[0]), seed=self.seed,
                                          reshuffle_each_iteration=True)
            dataset = dataset.batch(batch_size or 32)
        if training:
            tags = tf.data.Dataset.random(
                seed=self.seed, rerandomize_each_iteration=True).map(
                    tf.strings.as_string)
        else:
            tags = tf.data.Dataset.from_tensors(
                "%s %d" % (_EVALUATE_TAG, self.seed)).repeat()
        dataset = tf.data.Dataset.zip((dataset, tags)).map(
            self.mask_texts, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    # --- Keras training API ---

    def compile(self, optimizer=None, loss=None, metrics=None,
                weighted_metrics=None, learning_rate=5e-5,
                num_train_steps=1000, warmup_ratio=0.1, **kwargs):
        """Keras `compile`, with the paper's fine-tuning recipe by default.

        The default optimizer is that of `AlbertTextClassifier.compile`:
        the official AdamW (weight decay 0.01, none on LayerNorm and
        biases), linear warmup over `warmup_ratio` of `num_train_steps` then
        linear decay to 0, gradients clipped to global norm 1.0. It is the
        recipe for a pretrained model trained on at fine-tuning batch sizes
        (a few dozen texts), which is what continued masked-LM training
        here is; pretraining's LAMB at 0.00176 is tuned for batches of 4096
        (`lamb.create_optimizer("lamb", ...)` gives it). The
        default loss is the official masked-LM loss, `sum(w * CE) / sum(w)`
        over the masked positions (without the official `+ 1e-5` in the
        denominator, which changes it by less than 1e-5 of itself), and the
        metric the weighted masked-LM accuracy (`accuracy`).

        Args:
            optimizer, loss, metrics, weighted_metrics: as Keras; None takes
                the defaults.
            learning_rate: peak learning rate of the default optimizer (the
                top of the paper's fine-tuning range, 1e-5 to 5e-5).
            num_train_steps: steps the default schedule decays over.
            warmup_ratio: share of them spent warming up.
            **kwargs: the other arguments of `keras.Model.compile`.
        """
        if optimizer is None:
            optimizer = text_models.recipe_optimizer(
                learning_rate, num_train_steps, warmup_ratio)
        if loss is None:
            loss = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="mean_with_sample_weight")
        if metrics is None and weighted_metrics is None:
            weighted_metrics = [
                keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                        weighted_metrics=weighted_metrics, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, validation_data=None,
            shuffle=True, validation_batch_size=None, **kwargs):
        """Keras `fit` on texts: `x` as in `masked_dataset`, no `y`.

        `validation_data` takes texts too (masked as `evaluate` masks).
        """
        _no_labels("fit", y, kwargs)
        if validation_data is not None:
            validation_data = self.masked_dataset(
                validation_data, validation_batch_size or batch_size,
                training=False)
        # The dataset is shuffled already (when `shuffle`).
        dataset = self.masked_dataset(x, batch_size, training=True,
                                      shuffle=shuffle)
        if not isinstance(x, tf.data.Dataset):
            # One iterator for all epochs: a new one per epoch would set the
            # tokenizer's ops up again (about a second on a CPU).
            kwargs.setdefault("steps_per_epoch", int(dataset.cardinality()))
            dataset = dataset.repeat()
        return super().fit(dataset, validation_data=validation_data,
                           shuffle=False, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """Keras `evaluate` on texts: the masked-LM loss and accuracy."""
        _no_labels("evaluate", y, kwargs)
        return super().evaluate(
            self.masked_dataset(x, batch_size, training=False), **kwargs)

    # --- Queries ---

    def _fill_mask_outputs(self, text, top_k):
        return fill_mask_lib.fill_mask_outputs(
            self.pretrainer, self.preprocessor.text_preprocessor, text, top_k)

    def fill_mask(self, texts, top_k=5, batch_size=32):
        """The `top_k` most probable pieces at every `[MASK]` of each text.

        The numbers are those of the exported `fill_mask` signature (the
        same function runs there). A marker cut off by `seq_length` gets no
        prediction (and a warning).

        Args:
            texts: a list of strings, each holding `[MASK]` (upper case).
            top_k: K, predictions per mask.
            batch_size: texts run together.

        Returns:
            A list with, per text, a list with, per `[MASK]` in order, a
            list of K `(piece, probability)` pairs, most probable first.

        Raises:
            TextInputError (a TypeError and a ValueError): `texts` is not
                a list of strings.
            ValueError: a text without `[MASK]`, or `top_k` out of
                `1..vocab_size`.
        """
        texts = [t.decode("utf-8") if isinstance(t, bytes) else t
                 for t in text_models.texts_array(texts, "texts")]
        vocab_size = self.pretrainer.config.vocab_size
        if not 1 <= top_k <= vocab_size:
            raise ValueError(f"top_k must be in 1..{vocab_size}. Received: "
                             f"top_k={top_k!r}")
        for text in texts:
            if preprocessing.MASK_TOKEN not in text:
                raise ValueError(
                    f"Every text needs a {preprocessing.MASK_TOKEN} marker "
                    "(in upper case) to fill. Received: " + repr(text[:200]))
        results = []
        for start in range(0, len(texts), batch_size):
            batch = list(texts[start:start + batch_size])
            out = {key: value.numpy() for key, value in self._fill_mask_function(
                tf.constant(batch, tf.string), tf.constant(top_k)).items()}
            for row, text in enumerate(batch):
                if out["dropped_masks"][row]:
                    logging.warning(
                        "%d [MASK] marker(s) beyond seq_length=%d got no "
                        "prediction in %r", out["dropped_masks"][row],
                        self.preprocessor.seq_length, text[:200])
                results.append([
                    [(piece.decode("utf-8"), float(p)) for piece, p in zip(
                        out["top_k_pieces"][row, m],
                        out["top_k_probabilities"][row, m])]
                    for m in np.flatnonzero(out["mask_positions"][row] >= 0)])
        return results

    def empty_prediction(self):
        return np.zeros((0, self.max_predictions_per_seq,
                         self.pretrainer.config.vocab_size), np.float32)

    # --- Serialization ---

    @property
    def base_model(self):
        return self.pretrainer

    def get_config(self):
        config = super().get_config()
        options = self.masking
        config.update({
            "max_predictions_per_seq": self.max_predictions_per_seq,
            "masked_lm_prob": options.masked_lm_prob,
            "max_ngram": options.max_ngram,
            "favor_shorter_ngram": options.favor_shorter_ngram,
            "do_whole_word_mask": options.do_whole_word_mask,
            "seed": self.seed,
        })
        return config
