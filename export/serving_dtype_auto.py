"""The serving precision of an export, and `serving_dtype="auto"`.

"auto" builds the text-in model in each of float32, bfloat16 and int8 on
the exporting machine, compares each with float32 on pseudo-texts, times
them, and keeps the fastest that agrees; every export records its choice
in `<version>/assets.extra/serving_dtype.json` (`CHOICE_FILE`). The steps
and bounds: docs/serving.md#serving-precision-float32-bfloat16-int8.
"""

import json
import os

import numpy as np
import sentencepiece as spm
import tensorflow as tf
from absl import logging

from albert_tf.layers import preprocessing
from albert_tf.models import serving_copy
from albert_tf.models.serving_dtypes import SERVING_DTYPE_CHOICES
from albert_tf.models.serving_dtypes import SERVING_DTYPES
from albert_tf.training import hardware
from export import signatures

CHOICE_FILE = os.path.join("assets.extra", "serving_dtype.json")
SAMPLE_ROWS = 32
REPEATS = 5
TIMED_BATCHES = (1, 8)
# A candidate must agree with float32 at least this well on the sample.
TOLERANCES = {
    "pooled_cosine": 0.99,  # the lowest row's cosine
    "pooled_nearest_own": 1.0,  # rows nearest their own float32 vector
    "top1_agreement": 0.97,  # masked-LM top-1 at the sampled positions
    "label_agreement": 0.995,  # a classifier's labels, a span head's argmax
}


def check_choice(serving_dtype):
    """Returns `serving_dtype` if it is one of `SERVING_DTYPE_CHOICES`.

    Raises:
        ValueError: anything else, naming the accepted values.
    """
    return serving_copy.check_serving_dtype(serving_dtype,
                                            SERVING_DTYPE_CHOICES)


def sample_inputs(sp_model, seq_length, rows=SAMPLE_ROWS, masks=4, seed=0):
    """Encoder inputs (and `masked_lm_positions`) of pseudo-texts.

    Args:
        sp_model: a `sentencepiece.SentencePieceProcessor`.
        seq_length: T.
        rows: B.
        masks: masked positions per row (their ids become `[MASK]`).
        seed: the draw's seed.

    Returns:
        A dict of int32 numpy arrays: `input_word_ids`, `input_mask`,
        `input_type_ids` `[B, T]`, `masked_lm_positions` `[B, masks]`.
    """
    rng = np.random.default_rng(seed)
    size = sp_model.get_piece_size()
    ordinary = np.array([i for i in range(size) if not (
        sp_model.is_control(i) or sp_model.is_unknown(i) or
        sp_model.is_unused(i)) and i != preprocessing.MASK_ID])
    weights = np.exp([sp_model.get_score(int(i)) for i in ordinary])
    weights /= weights.sum()
    shape = (rows, seq_length)
    word_ids, mask = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
    positions = np.zeros((rows, masks), np.int32)
    for row in range(rows):
        length = int(rng.integers(max(masks + 2, seq_length // 4),
                                  seq_length + 1))
        pieces = rng.choice(ordinary, length - 2, p=weights)
        word_ids[row, :length] = [preprocessing.CLS_ID, *pieces,
                                  preprocessing.SEP_ID]
        mask[row, :length] = 1
        positions[row] = np.sort(rng.choice(np.arange(1, length - 1), masks,
                                            replace=False))
        word_ids[row, positions[row]] = preprocessing.MASK_ID
    return {"input_word_ids": word_ids, "input_mask": mask,
            "input_type_ids": np.zeros(shape, np.int32),
            "masked_lm_positions": positions}


def _cosines(a, b):
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    return (a * b).sum(-1) / np.maximum(
        np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-30)


# Float32 vectors (less the sample's mean) this close are one text's.
_SAME = 1 - 1e-4


def nearest_own(reference, outputs):
    """Which rows of `outputs` `[B, H]` are nearest (by cosine) their own
    row of `reference` among all of its rows.

    Vectors are taken less the mean of `reference`: what sets the texts
    apart, not what they all share (a small model's pooled vectors can be
    nearly parallel for every text). Rows whose float32 vectors are the
    same (`_SAME`) count as one text.

    Returns:
        A list of the indices of the rows that are not (confused rows).
    """
    def unit(x):
        return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True),
                              1e-30)

    center = reference.mean(axis=0, keepdims=True)
    apart = unit(reference - center)
    nearest = np.argmax(unit(outputs - center) @ apart.T, axis=-1)  # [B]
    same = np.sum(apart[nearest] * apart, axis=-1) >= _SAME
    return [i for i in range(len(reference))
            if nearest[i] != i and not same[i]]


def agreement(reference, outputs):
    """How well `outputs` agree with float32's `reference` (dicts of numpy
    arrays of one model's outputs on the same inputs).

    Returns:
        A dict with the measures that apply: `pooled_cosine` (lowest row
        cosine of `pooled_output`), `pooled_nearest_own` (share of rows
        nearest their own float32 vector, `nearest_own`),
        `top1_agreement` (share of equal argmax of `mlm_logits`),
        `label_agreement` (share of equal argmax of
        `logits` with more than one column, `start_logits`, `end_logits`,
        `choice_logits`) and `score_cosine` (a regressor's `logits` as one
        vector, reported only).
    """
    measures = {}
    if "pooled_output" in reference:
        measures["pooled_cosine"] = float(_cosines(
            reference["pooled_output"], outputs["pooled_output"]).min())
        rows = len(reference["pooled_output"])
        measures["pooled_nearest_own"] = float(1 - len(nearest_own(
            reference["pooled_output"].reshape(rows, -1),
            outputs["pooled_output"].reshape(rows, -1))) / max(rows, 1))
    if "mlm_logits" in reference:
        measures["top1_agreement"] = float(np.mean(
            reference["mlm_logits"].argmax(-1)
            == outputs["mlm_logits"].argmax(-1)))
    labels = [key for key in ("logits", "start_logits", "end_logits",
                              "choice_logits")
              if key in reference and reference[key].shape[-1] > 1]
    if labels:
        measures["label_agreement"] = float(np.mean(np.concatenate([
            (reference[key].argmax(-1) == outputs[key].argmax(-1)).ravel()
            for key in labels])))
    elif "logits" in reference:
        measures["score_cosine"] = float(_cosines(
            reference["logits"].T, outputs["logits"].T).min())
    return measures


def failures(measures):
    """The measures below their `TOLERANCES`, as readable strings."""
    return ["%s %.4f < %s" % (name, value, TOLERANCES[name])
            for name, value in sorted(measures.items())
            if name in TOLERANCES and value < TOLERANCES[name]]


def _numpy(outputs):
    return {key: np.asarray(tf.cast(value, tf.float32))
            for key, value in outputs.items()
            if isinstance(value, tf.Tensor) and value.dtype.is_floating}


def choose(make_run, inputs, candidates=SERVING_DTYPES, repeats=REPEATS):
    """Times and checks every candidate precision; returns the record.

    Args:
        make_run: serving dtype -> a callable from a dict of int32 tensors
            (`inputs`' keys) to the model's dict of outputs, running the
            model in that precision as the export will.
        inputs: `sample_inputs(...)`.
        candidates: the serving dtypes to try (float32 first).
        repeats: timed calls per candidate and batch size.

    Returns:
        The `CHOICE_FILE` record: `serving_dtype` (the choice), `how`,
        `device`, `tolerances`, and per candidate its `latency_ms` per batch
        size, `relative_latency` (mean over the batch sizes of its latency
        over float32's), `agreement` and `failures`.
    """
    tensors = {key: tf.constant(value) for key, value in inputs.items()}
    runs = {dtype: make_run(dtype) for dtype in candidates}
    reference = _numpy(runs["float32"](tensors))
    results = {}
    for dtype, run in runs.items():
        measures = agreement(reference, _numpy(run(tensors)))
        results[dtype] = {"agreement": measures, "failures": failures(measures)}
    timed = {}
    for batch in TIMED_BATCHES:
        rows = {key: value[:batch] for key, value in tensors.items()}
        for dtype, run in runs.items():
            timed[(dtype, batch)] = (
                lambda run=run, rows=rows: _numpy(run(rows)))
    seconds = hardware.median_seconds_in_turns(timed, repeats)
    for dtype in candidates:
        results[dtype]["latency_ms"] = {
            "batch_%d" % batch: 1e3 * seconds[(dtype, batch)]
            for batch in TIMED_BATCHES}
        results[dtype]["relative_latency"] = float(np.mean([
            seconds[(dtype, batch)] / seconds[("float32", batch)]
            for batch in TIMED_BATCHES]))
    passing = [dtype for dtype in candidates if not results[dtype]["failures"]]
    chosen = min(passing, key=lambda d: results[d]["relative_latency"])
    return {"serving_dtype": chosen, "how": "auto",
            "device": hardware.describe(), "tolerances": TOLERANCES,
            "sample": {"rows": int(len(inputs["input_mask"])),
                       "seq_length": int(inputs["input_mask"].shape[1])},
            "candidates": results}


def compared_with_float32(relative_latency):
    """A latency over float32's, in words: "1.72x faster than float32"
    below 1, "1.25x the latency of float32" above ("1.00x ..." at 1)."""
    if relative_latency < 1:
        return "%.2fx faster than float32" % (1 / relative_latency)
    return "%.2fx the latency of float32" % relative_latency


def describe(record):
    """One line for the log: the choice and each candidate's numbers."""
    if record.get("how") != "auto":
        if "agreement" not in record:
            return "serving_dtype=%s" % record["serving_dtype"]
        return "serving_dtype=%s (requested); against float32 on the " \
            "sample: %s" % (record["serving_dtype"], ", ".join(
                "%s %.4f" % item for item in sorted(
                    record["agreement"].items())))
    parts = []
    for dtype, result in record["candidates"].items():
        latency = ", ".join("%s %.1f ms" % (key.replace("_", " "), value)
                            for key, value in result["latency_ms"].items())
        verdict = ("; ".join(result["failures"]) if result["failures"]
                   else "agrees")
        speed = ("the reference" if dtype == "float32" else
                 compared_with_float32(result["relative_latency"]))
        parts.append("%s: %s, %s (%s)" % (dtype, latency, speed, verdict))
    return "serving_dtype=auto chose %s. %s" % (record["serving_dtype"],
                                                " | ".join(parts))


def write(record, folder):
    """Writes `record` to `<folder>/CHOICE_FILE`."""
    path = os.path.join(folder, CHOICE_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
        json.dump(record, f, indent=2)


def read(folder):
    """The record an export wrote in `folder` (its version folder), or None
    for an export made before the record existed."""
    path = os.path.join(folder, CHOICE_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def resolve(serving_dtype, make_run, sample):
    """The record of an export's precision: "auto" measured (`choose`, on
    `sample()`), any other value as requested. Logs it."""
    check_choice(serving_dtype)
    if serving_dtype == "auto":
        record = choose(make_run, sample())
    else:
        record = {"serving_dtype": serving_dtype, "how": "requested",
                  "device": hardware.describe()}
        if serving_dtype != "float32":
            record.update(measure(make_run, sample(), serving_dtype))
    logging.info("%s", describe(record))
    if record.get("how") == "requested" and record.get("failures"):
        logging.warning(
            "serving_dtype=%s does not agree with float32 on the sample "
            "(%s); it is exported as requested (--serving_dtype=auto or "
            "float32 would not use it)", serving_dtype,
            "; ".join(record["failures"]))
    return record


def measure(make_run, inputs, serving_dtype):
    """A requested precision's agreement with float32 on `inputs`
    (untimed).

    Returns:
        A dict: `agreement`, `failures`, `tolerances` and `sample`.
    """
    tensors = {key: tf.constant(value) for key, value in inputs.items()}
    reference = _numpy(make_run("float32")(tensors))
    measures = agreement(reference, _numpy(make_run(serving_dtype)(tensors)))
    return {"agreement": measures, "failures": failures(measures),
            "tolerances": TOLERANCES,
            "sample": {"rows": int(len(inputs["input_mask"])),
                       "seq_length": int(inputs["input_mask"].shape[1])}}


def _model_outputs(model):
    """Model inputs -> its tensor outputs (a pretrainer's per-block list
    left out), for any of this package's Functional models."""
    names = list(model.input) if isinstance(model.input, dict) else None

    def outputs(inputs):
        feed = {name: inputs[name] for name in names} if names else inputs
        return {key: value for key, value in
                model(feed, training=False).items()
                if isinstance(value, tf.Tensor)}

    return outputs


def serving_model(model, serving_dtype, spm_model_proto, seq_length):
    """`model` in the precision an export serves it in.

    Args:
        model: the trained model (an `AlbertPretrainer` or a task model).
        serving_dtype: one of `SERVING_DTYPE_CHOICES`.
        spm_model_proto: its SentencePiece model (for "auto"'s sample).
        seq_length: the export's `max_seq_length` (the sample's T).

    Returns:
        `(record, served)`: the `CHOICE_FILE` record and the model to
        export (`serving_copy.serving_copy` of the chosen dtype).

    Raises:
        ValueError: an unknown `serving_dtype`.
    """
    check_choice(serving_dtype)
    copies = {}

    def copy(dtype):
        if dtype not in copies:
            copies[dtype] = serving_copy.serving_copy(model, dtype)
        return copies[dtype]

    def make_run(dtype):
        return tf.function(signatures.model_runner(
            _model_outputs(copy(dtype)), serving_copy.needs_xla(dtype)),
                           autograph=False)

    def sample():
        return sample_inputs(spm.SentencePieceProcessor(
            model_proto=spm_model_proto), seq_length)

    record = resolve(serving_dtype, make_run, sample)
    return record, copy(record["serving_dtype"])
