"""LiteRT (`.tflite`) models that take raw text, for phones.

The encoder (`--format=litert`), a fine-tuned classifier, and an ids-in
encoder with builtin ops only (`--litert_inputs=ids`, for TF Serving's
`--prefer_tflite_model`); the text models carry the tokenizer
(`export.on_device_tokenizer`), and a quantized model that does not agree
with float32 on sample texts is written in a wider precision. Files,
signatures and checks: docs/on_device.md#the-command.
"""

import json
import os

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.python.framework import convert_to_constants

from albert_tf.layers import preprocessing
from albert_tf.tasks.options import LITERT_QUANTIZATIONS
from export import on_device_tokenizer
from export import serving_dtype_auto
from foundation import safe_io

QUANTIZATIONS = LITERT_QUANTIZATIONS
ENCODER_FILE = "encoder.tflite"
CLASSIFIER_FILE = "classifier.tflite"
# Ids in, builtin ops only; the file name TF Serving's
# `--prefer_tflite_model` reads in a version folder.
IDS_ENCODER_FILE = "model.tflite"
LITERT_INPUTS = ("text", "ids")
LITERT_SUFFIX = "_litert"
RECORD_FILE = os.path.join("assets.extra", "litert.json")
# What a quantized encoder must keep on the sample: every text nearest its
# own float32 vector, and this cosine to it at least.
MIN_COSINE = 0.99
_WIDER = {"int8": "float16", "float16": "float32"}
# Texts of several kinds and lengths, for the agreement check.
SAMPLE_TEXTS = (
    "The cat sat on the mat.",
    "Stock markets fell sharply on Monday after the announcement.",
    "How do I reset my password?",
    "A quiet village by the sea, with fishing boats and narrow streets.",
    "The experiment was repeated three times with the same result.",
    "I loved this film; the acting was superb!",
    "Terrible service, we waited an hour and left hungry.",
    "Water boils at 100 degrees Celsius at sea level.",
    "In 1990, 3,000 people moved to the city.",
    "Please send the report by Friday.",
    "Quantum computers use qubits instead of bits.",
    "She plays the violin in an orchestra.",
    "The bridge was closed for repairs all summer.",
    "What time does the museum open?",
    "Rain is expected later this week in the north.",
    "ok",
)
_STRINGS = tf.TensorSpec([None], tf.string)
_IDS = tf.TensorSpec([None, None], tf.int32)


def check_quantization(quantization):
    """Returns `quantization` if it is one of `QUANTIZATIONS`.

    Raises:
        ValueError: any other value.
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError("quantization must be one of %s. Received: "
                         "quantization=%r" % (", ".join(QUANTIZATIONS),
                                              quantization))
    return quantization


class _TextInputs(tf.Module):
    """Raw text to packed encoder inputs with on-device ops."""

    def __init__(self, spm_model_proto, max_seq_length, do_lower_case):
        super().__init__()
        if max_seq_length < preprocessing.MIN_SEQ_LENGTH:
            raise ValueError(
                "max_seq_length must be at least %d. Received: "
                "max_seq_length=%r" % (preprocessing.MIN_SEQ_LENGTH,
                                       max_seq_length))
        self.max_seq_length = int(max_seq_length)
        self.tokenizer = on_device_tokenizer.OnDeviceTokenizer(
            spm_model_proto, do_lower_case)

    def encode(self, text, text_b=None):
        first = self.tokenizer.tokenize(text)
        second = None if text_b is None else self.tokenizer.tokenize(text_b)
        return pack(first, second, self.max_seq_length)


def pack(first, second, seq_length):
    """`preprocessing.pack_segments` with `pad_to_longest`, in int32.

    LiteRT's integer division and range ops take int32, not the int64 of
    the ragged row splits; tests check that both packings agree.

    Args:
        first: int32 ragged `[B, (n)]` ids.
        second: the same, or None.
        seq_length: T at most (a Python int, at least 3).

    Returns:
        The dict of int32 `[B, T]` encoder inputs.
    """
    first_starts = tf.cast(first.row_splits[:-1], tf.int32)  # [B]
    first_lengths = tf.cast(first.row_lengths(), tf.int32)
    first_values = first.flat_values
    if second is None:
        second_starts = tf.zeros_like(first_starts)
        second_lengths = tf.zeros_like(first_lengths)
        second_values = tf.zeros([0], tf.int32)
    else:
        second_starts = tf.cast(second.row_splits[:-1], tf.int32)
        second_lengths = tf.cast(second.row_lengths(), tf.int32)
        second_values = second.flat_values
    has_second = tf.minimum(second_lengths, 1)
    budget = seq_length - 2 - has_second
    keep_first = tf.minimum(first_lengths, tf.maximum(
        budget - second_lengths, (budget + 1) // 2))
    keep_second = tf.minimum(second_lengths, budget - keep_first)
    packed = 2 + keep_first + keep_second + has_second  # [B]
    multiple = preprocessing.LENGTH_MULTIPLE
    longest = tf.maximum(tf.reduce_max(tf.concat([packed, [1]], 0)), 1)
    width = tf.minimum(seq_length, (longest + multiple - 1) // multiple
                       * multiple)
    j = tf.range(width)[tf.newaxis, :]  # [1, T]
    keep_first = keep_first[:, tf.newaxis]  # [B, 1]
    second_start = keep_first + 2
    second_end = second_start + keep_second[:, tf.newaxis]
    in_first = (j >= 1) & (j <= keep_first)  # [B, T]
    in_second = (j >= second_start) & (j < second_end)
    is_sep = (j == keep_first + 1) | (
        (j == second_end) & (has_second[:, tf.newaxis] > 0))
    mask = j < packed[:, tf.newaxis]

    def gathered(values, index, valid):
        padded = tf.concat([values, [preprocessing.PAD_ID]], axis=0)
        outside = tf.zeros_like(index) + tf.shape(values)[0]
        return tf.gather(padded, tf.where(valid, index, outside))

    word_ids = tf.where(
        in_first,
        gathered(first_values, first_starts[:, tf.newaxis] + j - 1, in_first),
        gathered(second_values, second_starts[:, tf.newaxis] + j
                 - second_start, in_second))
    word_ids = tf.where(is_sep, preprocessing.SEP_ID, word_ids)
    word_ids = tf.where(j == 0, preprocessing.CLS_ID, word_ids)
    ones = tf.ones_like(word_ids)
    zeros = tf.zeros_like(word_ids)
    # Selects of int32 values, not casts of bools: the converter folds
    # Keras' negative-index check on a cast bool into a bool op LiteRT
    # lacks.
    return {
        "input_word_ids": word_ids,
        "input_mask": tf.where(mask, ones, zeros),
        "input_type_ids": tf.where((j >= second_start) & mask, ones, zeros),
    }


def _at_least_one_row(inputs):
    """Packed `inputs` with a row of padding appended when the batch is
    empty, and the batch size: LiteRT's kernels refuse zero-sized tensors
    (`UNPACK` in the encoder), so an empty batch runs one padding row and
    the outputs are cut back to `[0, ...]`. (Strings cannot be padded:
    LiteRT concatenates numbers only.)"""
    size = tf.shape(inputs["input_word_ids"])[0]
    filler = tf.zeros([tf.maximum(1 - size, 0),
                       tf.shape(inputs["input_word_ids"])[1]], tf.int32)
    return {name: tf.concat([value, filler], 0)
            for name, value in inputs.items()}, size


def _encoder_call(encoder, inputs):
    return encoder(inputs, training=False)


def _convert(function, quantization, custom_ops=True):
    """Converts a `tf.function` to `.tflite` bytes (signature
    `serving_default`, its inputs and outputs named as the function's);
    without `custom_ops` the converter refuses anything but LiteRT's
    builtin ops."""
    concrete = function.get_concrete_function()
    # Weights become constants (the converter keeps Keras' variables as
    # resource variables, left uninitialized and not quantized).
    frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
    names = sorted(concrete.structured_outputs)

    @tf.function(autograph=False,
                 input_signature=concrete.structured_input_signature[0])
    def named(*inputs):
        return dict(zip(names, frozen(*inputs)))

    root = tf.Module()
    root.serving_default = named
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [named.get_concrete_function()], root)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = custom_ops
    if quantization != "float32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def encoder_model(encoder, spm_model_proto, max_seq_length=128,
                  do_lower_case=True, quantization="int8"):
    """The text-in encoder as `.tflite` bytes (see the module docstring).

    Args:
        encoder: an `AlbertEncoder` with its weights.
        spm_model_proto: its serialized SentencePiece model.
        max_seq_length: longer text is trimmed to this many tokens.
        do_lower_case: as the vocabulary was built.
        quantization: one of `QUANTIZATIONS`.

    Returns:
        The model (`bytes`).
    """
    check_quantization(quantization)
    inputs = _TextInputs(spm_model_proto, max_seq_length, do_lower_case)

    @tf.function(autograph=False, input_signature=[_STRINGS])
    def serving_default(text):
        packed, size = _at_least_one_row(inputs.encode(text))
        outputs = _encoder_call(encoder, packed)
        return {"pooled_output": tf.cast(outputs["pooled_output"],
                                         tf.float32)[:size]}

    return _convert(serving_default, quantization)


def ids_encoder_model(encoder, quantization="int8"):
    """The encoder on token ids as `.tflite` bytes, LiteRT builtin ops only
    (no tokenizer: the caller packs the ids, as for the TF-Hub-style
    encoder SavedModel).

    Signature `serving_default`: `input_word_ids`, `input_mask`,
    `input_type_ids` int32 `[B, T]` -> `pooled_output` float32 `[B, H]`,
    `sequence_output` float32 `[B, T, H]`. With no custom op, an
    interpreter with only the builtin op resolver loads it
    (`builtin_op_names`), as TF Serving's `--prefer_tflite_model` does.

    Args:
        encoder: an `AlbertEncoder` with its weights.
        quantization: one of `QUANTIZATIONS`.

    Returns:
        The model (`bytes`).
    """
    check_quantization(quantization)

    @tf.function(autograph=False, input_signature=[_IDS] * 3)
    def serving_default(input_word_ids, input_mask, input_type_ids):
        outputs = _encoder_call(encoder, {
            "input_word_ids": input_word_ids, "input_mask": input_mask,
            "input_type_ids": input_type_ids})
        return {"pooled_output": tf.cast(outputs["pooled_output"],
                                         tf.float32),
                "sequence_output": tf.cast(outputs["sequence_output"],
                                           tf.float32)}

    return _convert(serving_default, quantization, custom_ops=False)


def builtin_op_names(model_bytes):
    """The op names of a `.tflite` model, loaded and run once by LiteRT's
    interpreter with the builtin op resolver alone (no custom op, no
    default delegate).

    Returns:
        A sorted list of op names.

    Raises:
        RuntimeError / ValueError: the model needs an op that is not a
            builtin (LiteRT names it).
    """
    from ai_edge_litert import interpreter as interpreter_lib

    interpreter = interpreter_lib.Interpreter(
        model_content=model_bytes,
        experimental_op_resolver_type=(
            interpreter_lib.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
    interpreter.allocate_tensors()
    return sorted({op["op_name"] for op in interpreter._get_ops_details()})


def classifier_model(model, spm_model_proto, labels, max_seq_length=128,
                     do_lower_case=True, quantization="int8"):
    """A fine-tuned `AlbertClassifier` as `.tflite` bytes.

    Args:
        model: the `AlbertClassifier`.
        spm_model_proto: its serialized SentencePiece model.
        labels: label names, one per class.
        max_seq_length: T at most (pairs are trimmed round robin).
        do_lower_case: as in training.
        quantization: one of `QUANTIZATIONS`.

    Returns:
        The model (`bytes`).

    Raises:
        ValueError: `labels` does not name each class, or a bad
            `quantization`.
    """
    check_quantization(quantization)
    if labels is None or len(labels) != model.num_classes:
        raise ValueError(f"One label per class is needed ({model.num_classes}). "
                         f"Received: labels={labels!r}")
    inputs = _TextInputs(spm_model_proto, max_seq_length, do_lower_case)
    names = tf.constant([str(label) for label in labels])

    @tf.function(autograph=False, input_signature=[_STRINGS, _STRINGS])
    def serving_default(text, text_b):
        packed, size = _at_least_one_row(inputs.encode(text, text_b))
        logits = _logits(model, packed)[:size]
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "label_id": label_id,
                "label": tf.gather(names, label_id)}

    return _convert(serving_default, quantization)


def _logits(model, inputs):
    """The classifier's logits `[B, C]`, its head as one multiply-and-sum
    per class rather than a matmul: int8 conversion quantizes matmul
    weights only, so the head (a tiny share of the weights) stays float32
    and labels the encoder nearly ties are not flipped by it."""
    pooled = tf.cast(model.encoder(inputs, training=False)["pooled_output"],
                     tf.float32)  # [B, H]
    kernel = tf.cast(model.head.dense.kernel, tf.float32)  # [H, C]
    bias = tf.cast(model.head.dense.bias, tf.float32)  # [C]
    columns = [tf.reduce_sum(pooled * kernel[:, c], axis=-1)
               for c in range(model.num_classes)]
    return tf.stack(columns, axis=-1) + bias  # [B, C]


def write_model(model_bytes, path):
    """Writes a `.tflite` file atomically (a hidden name, then a rename)."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    safe_io.write_atomically(path, model_bytes)
    return path


def litert_folder(export_dir, model_name, version):
    """`<export_dir>/<model_name>_litert/<version>`."""
    return os.path.join(export_dir, model_name + LITERT_SUFFIX, str(version))


def _free(path, overwrite):
    """`path`, refused before any conversion when a file is there (a model
    this run did not write is never replaced) unless `overwrite`."""
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; it is left as it is (export "
                              "into another folder or version, or remove it)")
    return path


def export_encoder(encoder, spm_model_proto, folder, max_seq_length=128,
                   do_lower_case=True, quantization="int8", overwrite=False):
    """Writes `folder/encoder.tflite`; returns its path.

    Raises:
        FileExistsError: the file exists and not `overwrite`.
    """
    path = _free(os.path.join(folder, ENCODER_FILE), overwrite)
    return write_model(
        encoder_model(encoder, spm_model_proto, max_seq_length, do_lower_case,
                      quantization), path)


def export_classifier(model, spm_model_proto, labels, folder,
                      max_seq_length=128, do_lower_case=True,
                      quantization="int8", overwrite=False):
    """Writes `folder/classifier.tflite`; returns its path.

    Raises:
        FileExistsError: the file exists and not `overwrite`.
    """
    path = _free(os.path.join(folder, CLASSIFIER_FILE), overwrite)
    return write_model(
        classifier_model(model, spm_model_proto, labels, max_seq_length,
                         do_lower_case, quantization), path)


def run_encoder(model_bytes, texts):
    """The `pooled_output` `[B, H]` of an encoder `.tflite` on `texts`, in
    LiteRT's interpreter with tensorflow-text's ops."""
    from ai_edge_litert import interpreter as interpreter_lib
    from tensorflow_text import tflite_registrar

    interpreter = interpreter_lib.InterpreterWithCustomOps(
        custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
        model_content=model_bytes)
    run = interpreter.get_signature_runner("serving_default")
    return np.asarray(run(text=np.array(list(texts), dtype=object))[
        "pooled_output"], np.float32)


def reference_pooled(encoder, spm_model_proto, texts, max_seq_length=128,
                     do_lower_case=True):
    """The float32 model's `pooled_output` `[B, H]` on `texts`, tokenized
    as the `.tflite` tokenizes."""
    inputs = _TextInputs(spm_model_proto, max_seq_length, do_lower_case)
    packed = inputs.encode(tf.constant(list(texts)))
    return np.asarray(tf.cast(_encoder_call(encoder, packed)["pooled_output"],
                              tf.float32))


def agreement(reference, outputs):
    """How well `outputs` `[B, H]` agree with float32's `reference`.

    Returns:
        A dict: `min_cosine` and `mean_cosine` (each row's cosine to its
        float32 row), `nearest_own` (rows whose nearest float32 row is
        their own, out of `rows`; `serving_dtype_auto.nearest_own`) and
        `confused` (the indices of the others).
    """
    def unit(x):
        return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True),
                              1e-30)

    own = np.sum(unit(outputs) * unit(reference), axis=-1)  # [B]
    confused = serving_dtype_auto.nearest_own(reference, outputs)
    return {"rows": len(own), "min_cosine": float(own.min()),
            "mean_cosine": float(own.mean()),
            "nearest_own": len(own) - len(confused), "confused": confused}


def _failure(measures):
    """Why `agreement`'s `measures` are not good enough, or None."""
    reasons = []
    if measures["confused"]:
        reasons.append("%d of %d sample texts were nearest another text's "
                       "float32 vector" % (len(measures["confused"]),
                                           measures["rows"]))
    if measures["min_cosine"] < MIN_COSINE:
        reasons.append("the lowest cosine to float32 was %.4f < %s"
                       % (measures["min_cosine"], MIN_COSINE))
    return "; ".join(reasons) or None


def _export_checked(folder, file_name, quantization, convert, measure,
                    failure_of):
    """Writes `folder/file_name` in the narrowest precision, from
    `quantization` up, whose `measure` has no `failure_of`, and
    `folder/RECORD_FILE` with what was measured.

    Args:
        folder: a new folder (a staging folder: nothing is replaced).
        file_name: the `.tflite` file's name.
        quantization: the precision asked for.
        convert: quantization -> the model's bytes.
        measure: the model's bytes -> a dict of measures.
        failure_of: measures -> why they are not good enough, or None.

    Returns:
        `(path, record)`.
    """
    check_quantization(quantization)
    tried, fallback, chosen = {}, [], quantization
    while True:
        model_bytes = convert(chosen)
        measures = measure(model_bytes)
        failure = failure_of(measures)
        tried[chosen] = dict(measures, failure=failure)
        if failure is None or chosen == "float32":
            break
        fallback.append("%s: %s" % (chosen, failure))
        logging.warning("The %s %s does not agree with the float32 model "
                        "(%s); writing %s instead", chosen, file_name,
                        failure, _WIDER[chosen])
        chosen = _WIDER[chosen]
    if tried[chosen]["failure"]:
        logging.warning("The float32 %s differs from the model it was "
                        "converted from (%s)", file_name,
                        tried[chosen]["failure"])
    record = {"file": file_name, "requested_quantization": quantization,
              "quantization": chosen, "fallback": fallback,
              "sample_texts": len(SAMPLE_TEXTS),
              "min_cosine_required": MIN_COSINE, "agreement": tried}
    logging.info("%s: %s weights%s; on %d sample texts against float32: %s",
                 file_name, chosen, " (fell back from %s)" % quantization
                 if chosen != quantization else "", len(SAMPLE_TEXTS),
                 ", ".join("%s %s" % (key, value if isinstance(value, int)
                                      else "%.4f" % value)
                           for key, value in measures.items()
                           if isinstance(value, (int, float))))
    path = write_model(model_bytes, os.path.join(folder, file_name))
    os.makedirs(os.path.join(folder, os.path.dirname(RECORD_FILE)),
                exist_ok=True)
    safe_io.write_atomically(os.path.join(folder, RECORD_FILE),
                             (json.dumps(record, indent=1) + "\n").encode())
    return path, record


def export_checked_encoder(encoder, spm_model_proto, folder,
                           max_seq_length=128, do_lower_case=True,
                           quantization="int8"):
    """Writes `folder/encoder.tflite` in the narrowest precision, from
    `quantization` up, that agrees with the float32 model on
    `SAMPLE_TEXTS` (`agreement`: no text nearest another text's vector,
    every cosine at least `MIN_COSINE`), and `folder/RECORD_FILE` saying
    what was measured.

    Args:
        encoder: an `AlbertEncoder` with its weights.
        spm_model_proto: its serialized SentencePiece model.
        folder: a new folder (a staging folder: nothing is replaced).
        max_seq_length, do_lower_case: as in `encoder_model`.
        quantization: the precision asked for, one of `QUANTIZATIONS`.

    Returns:
        `(path, record)`: the `.tflite` path and the record written.
    """
    check_quantization(quantization)
    reference = reference_pooled(encoder, spm_model_proto, SAMPLE_TEXTS,
                                 max_seq_length, do_lower_case)
    return _export_checked(
        folder, ENCODER_FILE, quantization,
        lambda q: encoder_model(encoder, spm_model_proto, max_seq_length,
                                do_lower_case, q),
        lambda model_bytes: agreement(
            reference, run_encoder(model_bytes, SAMPLE_TEXTS)), _failure)


def export_checked_ids_encoder(encoder, spm_model_proto, folder,
                               max_seq_length=128, do_lower_case=True,
                               quantization="int8"):
    """Writes `folder/IDS_ENCODER_FILE` (`ids_encoder_model`: ids in,
    builtin ops only) in the narrowest precision, from `quantization` up,
    that agrees with the float32 encoder on the ids of `SAMPLE_TEXTS` (as
    `export_checked_encoder`), and `folder/RECORD_FILE`, which also lists
    the model's ops as LiteRT's builtin op resolver loaded them
    (`builtin_op_names`).

    Returns:
        `(path, record)`: the `.tflite` path and the record written.
    """
    check_quantization(quantization)
    inputs = _TextInputs(spm_model_proto, max_seq_length, do_lower_case)
    packed = inputs.encode(tf.constant(list(SAMPLE_TEXTS)))
    reference = np.asarray(tf.cast(_encoder_call(encoder, packed)[
        "pooled_output"], tf.float32))
    feed = {name: np.asarray(value) for name, value in packed.items()}

    def measure(model_bytes):
        ops = builtin_op_names(model_bytes)
        from ai_edge_litert import interpreter as interpreter_lib

        run = interpreter_lib.Interpreter(
            model_content=model_bytes).get_signature_runner(
                "serving_default")
        measures = agreement(reference, np.asarray(
            run(**feed)["pooled_output"], np.float32))
        measures["builtin_ops"] = ops
        return measures

    return _export_checked(
        folder, IDS_ENCODER_FILE, quantization,
        lambda q: ids_encoder_model(encoder, q), measure, _failure)


def _label_failure(measures):
    if measures["label_agreement"] < 1:
        return "%d of %d sample texts got another label than float32's" % (
            len(measures["differing"]), measures["rows"])
    return None


def export_checked_classifier(model, spm_model_proto, labels, folder,
                              max_seq_length=128, do_lower_case=True,
                              quantization="int8"):
    """Writes `folder/classifier.tflite` in the narrowest precision, from
    `quantization` up, that gives the float32 model's label on every text
    of `SAMPLE_TEXTS`, and `folder/RECORD_FILE` saying what was measured.

    Args:
        model: the `AlbertClassifier`.
        spm_model_proto: its serialized SentencePiece model.
        labels: label names, one per class.
        folder: a new folder (a staging folder: nothing is replaced).
        max_seq_length, do_lower_case: as in `classifier_model`.
        quantization: the precision asked for, one of `QUANTIZATIONS`.

    Returns:
        `(path, record)`: the `.tflite` path and the record written.
    """
    from ai_edge_litert import interpreter as interpreter_lib
    from tensorflow_text import tflite_registrar

    check_quantization(quantization)
    texts = list(SAMPLE_TEXTS)
    inputs = _TextInputs(spm_model_proto, max_seq_length, do_lower_case)
    want = np.asarray(tf.argmax(_logits(model, inputs.encode(
        tf.constant(texts))), axis=-1))

    def measure(model_bytes):
        run = interpreter_lib.InterpreterWithCustomOps(
            custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
            model_content=model_bytes).get_signature_runner("serving_default")
        strings = np.array(texts, dtype=object)
        got = np.asarray(run(text=strings, text_b=np.array(
            [""] * len(texts), dtype=object))["label_id"])
        differing = [i for i in range(len(texts)) if got[i] != want[i]]
        return {"rows": len(texts), "differing": differing,
                "label_agreement": 1 - len(differing) / len(texts)}

    return _export_checked(
        folder, CLASSIFIER_FILE, quantization,
        lambda q: classifier_model(model, spm_model_proto, labels,
                                   max_seq_length, do_lower_case, q),
        measure, _label_failure)


def read_record(folder):
    """The `RECORD_FILE` of a LiteRT version folder, or None."""
    try:
        with open(os.path.join(folder, RECORD_FILE), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
