"""Text-in SavedModels of fine-tuned models, in TF Serving layout.

A classifier, a span extractor or a masked LM, written to
`<export_dir>/<model_name>/<version>/` through `export.layout.StagedExport`
with the in-graph tokenization of
`albert_tf.layers.preprocessing.TextPreprocessor` (load them after
`import tensorflow_text`). Signatures, inputs, outputs and shapes:
docs/serving.md#fine-tuned-models.
"""

import os
import tempfile

import tensorflow as tf
import tensorflow_text as tf_text
from absl import logging

from albert_tf.layers import preprocessing
from albert_tf.models import serving_copy
from export import layout
from export import litert
from export import pretrained_export
from export import serving_command
from export import serving_compat
from export import serving_dtype_auto
from export import signatures
from foundation import safe_io

_STRINGS = tf.TensorSpec([None], tf.string)


def _root(model, preprocessor):
    """A trackable root holding the model's variables and the tokenizer."""
    root = tf.__internal__.tracking.AutoTrackable()
    root.variables = list(model.variables)
    root.trainable_variables = [v for v in model.variables if v.trainable]
    root.preprocessor = preprocessor
    return root


def _read(path):
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def _save(root, signatures, export_dir, model_name, version, spm_model_file,
          record, write_litert=None):
    """Writes the SavedModel (and, with `write_litert`, a function of a
    folder, the `.tflite` into `<model_name>_litert`) in one staging
    folder, then moves both into place; logs the commands that serve it
    (`export.serving_command`) and returns the SavedModel's version
    folder."""
    root.spm_model = tf.saved_model.Asset(spm_model_file)
    names = [model_name] + ([model_name + litert.LITERT_SUFFIX]
                            if write_litert else [])
    staged = layout.StagedExport(export_dir, names, version)
    try:
        tf.saved_model.save(root, staged.path(model_name), signatures=signatures)
        serving_dtype_auto.write(record, staged.path(model_name))
        serving_compat.check_export({model_name: staged.path(model_name)})
        if write_litert:
            write_litert(staged.path(names[1]))
        final = staged.commit()[model_name]
    except BaseException as error:
        staged.abort()
        converted = safe_io.write_failure(error, staged.staging_dir)
        if converted is not error:
            raise converted from None
        raise
    logging.info("%s", serving_command.block_for_export(
        export_dir, {model_name: final}))
    return final


def export_classifier(model, spm_model_file, export_dir, labels=None,
                      max_seq_length=128, do_lower_case=True,
                      model_name="albert_classifier", version=None,
                      serving_shape="dynamic", serving_dtype="float32",
                      litert_quantization=None):
    """Exports an `AlbertClassifier` that takes raw text.

    Args:
        model: the fine-tuned `AlbertClassifier`.
        spm_model_file: its SentencePiece model (kept as an asset).
        export_dir: the serving base folder.
        labels: label names, one per class; None for a regressor.
        max_seq_length: T of the packed inputs.
        do_lower_case: as in training.
        model_name: the folder under `export_dir`.
        version: int, or None for the next free one.
        serving_shape: "dynamic" (pad to the batch's longest row, rounded up
            to a multiple of 8) or "fixed" (always `max_seq_length`).
        serving_dtype: "float32", "bfloat16", "int8" or "auto" (see
            `export.serving_dtype_auto`).
        litert_quantization: None, or one of `export.litert.QUANTIZATIONS`
            to write `<model_name>_litert/<version>/classifier.tflite` in
            the same version, staged with the SavedModel
            (`export.litert.export_checked_classifier`).

    Returns:
        The version folder written (the `.tflite` is
        `litert_file(<it>)`).

    Raises:
        ValueError: when `labels` does not match the model's classes, an
            unknown `serving_shape` or `serving_dtype`, or a `.tflite` of a
            regressor.
    """
    dynamic = preprocessing.check_serving_shape(serving_shape) == "dynamic"
    serving_dtype_auto.check_choice(serving_dtype)
    regression = labels is None
    write_litert = None
    if litert_quantization is not None:
        litert.check_quantization(litert_quantization)
        if regression:
            raise ValueError("A .tflite is written for classifiers only (it "
                             "returns labels). Received: labels=None")
        float_model = model

        def write_litert(folder):
            litert.export_checked_classifier(
                float_model, _read(spm_model_file), labels, folder,
                max_seq_length, do_lower_case, litert_quantization)
    if not regression and len(labels) != model.num_classes:
        raise ValueError(f"One label per class is needed ({model.num_classes}). "
                         f"Received: labels={list(labels)!r}")
    spm_model_proto = _read(spm_model_file)
    preprocessor = preprocessing.TextPreprocessor(
        spm_model_proto, max_seq_length, do_lower_case)
    record, model = serving_dtype_auto.serving_model(
        model, serving_dtype, spm_model_proto, max_seq_length)
    root = _root(model, preprocessor)
    label_names = tf.constant(list(labels or ["score"]))

    def model_logits(inputs):
        return {"logits": tf.cast(model(inputs, training=False)["logits"],
                                  tf.float32)}

    run_model = signatures.model_runner(
        model_logits, serving_copy.needs_xla(record["serving_dtype"]))

    def classify(text, text_b=None):
        inputs = preprocessor.encode(text, text_b, pad_to_longest=dynamic)
        logits = (signatures.run_by_length(run_model, inputs) if dynamic
                  else run_model(inputs))["logits"]
        if regression:
            return {"score": logits[:, 0]}
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "label_id": label_id,
                "label": tf.gather(label_names, label_id)}

    @tf.function(autograph=False, input_signature=[_STRINGS, _STRINGS])
    def serve(text, text_b=tf.constant([], tf.string)):
        text = preprocessing.checked_texts(text, "text")
        return classify(text, signatures.optional_text_b(text, text_b))

    @tf.function(autograph=False, input_signature=[_STRINGS])
    def serve_single(text):
        return classify(preprocessing.checked_texts(text, "text"))

    root.serve = serve
    root.serve_single = serve_single
    return _save(root, {"serving_default": serve,
                        "serving_single": serve_single},
                 export_dir, model_name, version, spm_model_file, record,
                 write_litert)


def litert_file(saved_model_dir):
    """The `classifier.tflite` that `export_classifier` wrote beside the
    SavedModel version folder `saved_model_dir`."""
    model_dir, version = os.path.split(saved_model_dir.rstrip("/"))
    return os.path.join(litert.litert_folder(
        os.path.dirname(model_dir), os.path.basename(model_dir), version),
        litert.CLASSIFIER_FILE)


def export_text_classifier(model, export_dir, labels=None,
                           model_name="albert_classifier", version=None,
                           serving_shape="dynamic", serving_dtype="float32"):
    """Exports an `AlbertTextClassifier` in the layout of `export_classifier`.

    The SavedModel is the CLIs' (`serving_default(text, text_b)`,
    `serving_single(text)`), with the model's own SentencePiece model,
    sequence length and lowercasing.

    Args:
        model: the `albert_tf.tasks.text_models.AlbertTextClassifier`.
        export_dir: the serving base folder.
        labels: label names, one per class (default: "0", "1", ...); ignored
            for a regressor (`num_classes=1`).
        model_name, version, serving_shape, serving_dtype: see
            `export_classifier`.

    Returns:
        The version folder written.
    """
    preprocessor = model.preprocessor
    if model.num_classes == 1:
        labels = None
    elif labels is None:
        labels = [str(i) for i in range(model.num_classes)]
    with tempfile.TemporaryDirectory() as folder:
        spm_model_file = os.path.join(folder, "spm.model")
        with open(spm_model_file, "wb") as f:
            f.write(preprocessor.spm_model_proto)
        return export_classifier(
            model.classifier, spm_model_file, export_dir, labels,
            preprocessor.seq_length, preprocessor.do_lower_case, model_name,
            version, serving_shape, serving_dtype)


def export_masked_lm(model, export_dir, model_name="albert", version=None,
                     top_k=5, **kwargs):
    """Exports an `AlbertMaskedLM` as `python -m export.export_saved_model` does.

    The layout and signatures are the CLI's (`export.pretrained_export.
    export_pretrainer`): the text-in model (`fill_mask`, `serving_default`,
    `serving_single`, `sop`), the encoder and the preprocessor, with the
    model's own SentencePiece model, sequence length and lowercasing.

    Args:
        model: the `albert_tf.tasks.masked_lm.AlbertMaskedLM`.
        export_dir: the serving base folder.
        model_name: the text-in model's folder; the other two get
            `_encoder` and `_preprocessor` appended.
        version: int, or None for the next free one.
        top_k: predictions per mask of `fill_mask`.
        **kwargs: the other arguments of `export_pretrainer` (`save_keras`,
            `tf_serving_version`, `serving_shape`, `serving_dtype`).

    Returns:
        What `export_pretrainer` returns: the version folders by kind.
    """
    preprocessor = model.preprocessor
    return pretrained_export.export_pretrainer(
        model.pretrainer, preprocessor.spm_model_proto, export_dir,
        model_name=model_name, version=version,
        max_seq_length=preprocessor.seq_length,
        do_lower_case=preprocessor.do_lower_case, top_k=top_k, **kwargs)


_VERY_LOW = -1e9


def _best_span(outputs, offset, length, max_answer_length):
    """The best-scoring context span of each row (start <= end, at most
    `max_answer_length` pieces): `(start, end, score)`, each `[B]`."""
    start = tf.cast(outputs["start_logits"], tf.float32)  # [B, T]
    end = tf.cast(outputs["end_logits"], tf.float32)
    seq_length = tf.shape(start)[1]  # the packed T, up to max_seq_length
    positions = tf.range(seq_length)[None, :]
    in_context = (positions >= offset[:, None]) & (
        positions < (offset + length)[:, None])
    start = tf.where(in_context, start, _VERY_LOW)
    end = tf.where(in_context, end, _VERY_LOW)
    pair = start[:, :, None] + end[:, None, :]  # [B, T, T]
    gap = positions[0][None, :] - positions[0][:, None]  # end - start
    valid = (gap >= 0) & (gap < max_answer_length)
    pair = tf.reshape(tf.where(valid[None], pair, _VERY_LOW),
                      [tf.shape(pair)[0], -1])  # [B, T * T]
    best = tf.argmax(pair, axis=-1, output_type=tf.int32)
    return (best // seq_length, best % seq_length, tf.reduce_max(pair, -1))


def _context_pieces(preprocessor, words):
    """The context's pieces `[B, (P)]` and the word (within its row) each
    piece comes from, `[B, (P)]`, from the context's words `[B, (W)]`."""
    pieces = preprocessor.tokenize(words.flat_values)  # [B*W, (P)]
    flat_word = pieces.value_rowids()  # index into words.flat_values
    row_start = tf.gather(words.row_starts(), words.value_rowids())
    word_in_row = flat_word - tf.gather(row_start, flat_word)
    flat = tf.RaggedTensor.from_row_splits(
        pieces.values, tf.gather(pieces.row_splits, words.row_splits))
    return flat, flat.with_flat_values(tf.cast(word_in_row, tf.int32))


def _fit_beside_question(flat, piece_word, query, max_seq_length):
    """Keeps the context pieces that fit beside the question in T (with
    `[CLS]` and two `[SEP]`); returns them `[B, (P)]` and their words,
    padded `[B, P]`."""
    budget = max_seq_length - 3 - tf.cast(query.row_lengths(), tf.int32)
    keep = tf.ragged.range(flat.row_lengths(), dtype=tf.int64) < \
        tf.cast(budget, tf.int64)[:, None]
    return (tf.ragged.boolean_mask(flat, keep),
            tf.ragged.boolean_mask(piece_word, keep).to_tensor(0))


def _span_text(context, word_starts, word_ends, piece_word, first_piece,
               last_piece, found):
    """The context's text from the word of `first_piece` to the word of
    `last_piece` (context piece indices `[B]`), or "" where not `found`."""
    first_word = tf.gather(piece_word, tf.maximum(first_piece, 0),
                           batch_dims=1)
    last_word = tf.gather(piece_word, tf.maximum(last_piece, 0), batch_dims=1)
    begin = tf.gather(word_starts.to_tensor(0), first_word, batch_dims=1)
    finish = tf.gather(word_ends.to_tensor(0), last_word, batch_dims=1)
    return tf.where(
        found, tf.strings.substr(context, begin, finish - begin), "")


def export_span_extractor(model, spm_model_file, export_dir,
                          max_seq_length=384, max_query_length=64,
                          max_answer_length=30, do_lower_case=True,
                          model_name="albert_squad", version=None,
                          serving_shape="dynamic", serving_dtype="float32"):
    """Exports an `AlbertSpanExtractor` taking question and context strings.

    Args:
        model: the fine-tuned `AlbertSpanExtractor`.
        spm_model_file: its SentencePiece model.
        export_dir: the serving base folder.
        max_seq_length: T.
        max_query_length: question pieces kept.
        max_answer_length: longest answer, in pieces.
        do_lower_case: as in training.
        model_name: the folder under `export_dir`.
        version: int, or None for the next free one.
        serving_shape: "dynamic" (pad to the batch's longest row, rounded up
            to a multiple of 8) or "fixed" (always `max_seq_length`).
        serving_dtype: "float32", "bfloat16", "int8" or "auto" (see
            `export.serving_dtype_auto`).

    Returns:
        The version folder written.

    Raises:
        ValueError: an unknown `serving_shape` or `serving_dtype`.
    """
    dynamic = preprocessing.check_serving_shape(serving_shape) == "dynamic"
    serving_dtype_auto.check_choice(serving_dtype)
    spm_model_proto = _read(spm_model_file)
    preprocessor = preprocessing.TextPreprocessor(
        spm_model_proto, max_seq_length, do_lower_case)
    record, model = serving_dtype_auto.serving_model(
        model, serving_dtype, spm_model_proto, max_seq_length)
    root = _root(model, preprocessor)
    words_tokenizer = tf_text.WhitespaceTokenizer()

    def model_logits(inputs):
        return {key: tf.cast(value, tf.float32)
                for key, value in model(inputs, training=False).items()}

    model_logits.sequence_keys = ("start_logits", "end_logits")
    run_model = signatures.model_runner(
        model_logits, serving_copy.needs_xla(record["serving_dtype"]))

    @tf.function(autograph=False, input_signature=[_STRINGS, _STRINGS])
    def serve(question, context):
        question = preprocessing.checked_texts(question, "question")
        context = preprocessing.checked_texts(context, "context")
        with tf.control_dependencies([tf.debugging.assert_equal(
                tf.shape(context)[0], tf.shape(question)[0],
                message="context must hold one string per question")]):
            context = tf.identity(context)
        query = preprocessor.tokenize(question)[:, :max_query_length]
        words, word_starts, word_ends = words_tokenizer.tokenize_with_offsets(
            context)  # [B, (W)], byte offsets
        flat, piece_word = _fit_beside_question(
            *_context_pieces(preprocessor, words), query, max_seq_length)
        inputs = preprocessor.pack(query, flat, pad_to_longest=dynamic)
        outputs = (signatures.run_by_length(run_model, inputs) if dynamic
                   else run_model(inputs))
        offset = tf.cast(query.row_lengths(), tf.int32) + 2  # first context pos
        length = tf.cast(flat.row_lengths(), tf.int32)
        s_pos, e_pos, score = _best_span(
            outputs, offset, length, max_answer_length)
        found = (score > _VERY_LOW / 2) & (length > 0)
        answer = _span_text(context, word_starts, word_ends, piece_word,
                            s_pos - offset, e_pos - offset, found)
        result = {"answer": answer, "score": score}
        if "no_answer_logits" in outputs:
            result["no_answer_probability"] = tf.sigmoid(
                tf.cast(outputs["no_answer_logits"], tf.float32))
        return result

    root.serve = serve
    return _save(root, {"serving_default": serve},
                 export_dir, model_name, version, spm_model_file, record)
