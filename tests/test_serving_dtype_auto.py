"""An export's serving precision and `serving_dtype="auto"`
(`export.serving_dtype_auto`)."""

import re
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.layers import preprocessing
from export import serving_dtype_auto


def test_sample_inputs_are_packed_pseudo_texts(spm_model):
    inputs = serving_dtype_auto.sample_inputs(spm_model, seq_length=24,
                                              rows=6, masks=3)
    ids, mask = inputs["input_word_ids"], inputs["input_mask"]
    assert ids.shape == mask.shape == inputs["input_type_ids"].shape == (6, 24)
    assert inputs["masked_lm_positions"].shape == (6, 3)
    specials = {preprocessing.CLS_ID, preprocessing.SEP_ID,
                preprocessing.PAD_ID}
    for row in range(6):
        length = int(mask[row].sum())
        assert 6 <= length <= 24 and mask[row, :length].all()
        assert ids[row, 0] == preprocessing.CLS_ID
        assert ids[row, length - 1] == preprocessing.SEP_ID
        assert not ids[row, length:].any()
        positions = inputs["masked_lm_positions"][row]
        assert (ids[row, positions] == preprocessing.MASK_ID).all()
        assert 0 < positions.min() and positions.max() < length - 1
        inside = set(ids[row, 1:length - 1]) - {preprocessing.MASK_ID}
        assert not inside & specials
    again = serving_dtype_auto.sample_inputs(spm_model, 24, rows=6, masks=3)
    np.testing.assert_array_equal(again["input_word_ids"], ids)


def test_agreement_measures_and_tolerances():
    rng = np.random.default_rng(0)
    pooled = rng.normal(size=(4, 8))
    logits = rng.normal(size=(4, 3, 10))
    reference = {"pooled_output": pooled, "mlm_logits": logits}
    same = serving_dtype_auto.agreement(reference, reference)
    assert same == pytest.approx({"pooled_cosine": 1.0,
                                  "pooled_nearest_own": 1.0,
                                  "top1_agreement": 1.0})
    assert serving_dtype_auto.failures(same) == []
    flipped = logits.copy()
    flipped[0, 0] = -flipped[0, 0]  # one of 12 predictions changes
    noisy = serving_dtype_auto.agreement(
        reference, {"pooled_output": -pooled, "mlm_logits": flipped})
    assert noisy["top1_agreement"] == pytest.approx(11 / 12)
    assert noisy["pooled_cosine"] == pytest.approx(-1.0)
    assert noisy["pooled_nearest_own"] == 0.0
    assert serving_dtype_auto.failures(noisy) == [
        "pooled_cosine -1.0000 < 0.99", "pooled_nearest_own 0.0000 < 1.0",
        "top1_agreement 0.9167 < 0.97"]
    # Each row close to its own, but one nearest another text's vector.
    swapped = pooled.copy()
    swapped[[0, 1]] = 0.2 * pooled[[0, 1]] + 0.8 * pooled[[1, 0]]
    confused = serving_dtype_auto.agreement({"pooled_output": pooled},
                                            {"pooled_output": swapped})
    assert confused["pooled_nearest_own"] == pytest.approx(0.5)
    classes = {"logits": rng.normal(size=(200, 2))}
    one_flip = {"logits": classes["logits"].copy()}
    one_flip["logits"][0] = one_flip["logits"][0, ::-1]
    labels = serving_dtype_auto.agreement(classes, one_flip)
    assert labels == {"label_agreement": pytest.approx(199 / 200)}
    assert serving_dtype_auto.failures(labels) == []  # 99.5% is within 0.5
    score = serving_dtype_auto.agreement({"logits": rng.normal(size=(5, 1))},
                                         {"logits": rng.normal(size=(5, 1))})
    assert set(score) == {"score_cosine"}


def _fake_run(seconds, noise):
    """A candidate that takes `seconds` a call and adds `noise` to the
    float32 outputs."""
    def run(inputs):
        time.sleep(seconds)
        ids = tf.cast(inputs["input_word_ids"], tf.float32)
        return {"pooled_output": ids + noise * tf.reverse(ids, [1]),
                "input_mask": inputs["input_mask"]}
    return run


def test_auto_keeps_the_fastest_candidate_that_agrees():
    inputs = {"input_word_ids": np.arange(1, 41, dtype=np.int32).reshape(8, 5),
              "input_mask": np.ones((8, 5), np.int32)}
    # bfloat16 agrees but is slower than float32; int8 is fastest but off.
    runs = {"float32": _fake_run(0.01, 0.0), "bfloat16": _fake_run(0.04, 0.01),
            "int8": _fake_run(0.0, 1.0)}
    record = serving_dtype_auto.choose(runs.get, inputs, repeats=3)
    assert record["serving_dtype"] == "float32"
    assert record["how"] == "auto"
    candidates = record["candidates"]
    assert candidates["int8"]["failures"] and not candidates["bfloat16"]["failures"]
    assert candidates["float32"]["relative_latency"] == 1.0
    assert candidates["bfloat16"]["relative_latency"] > 2
    assert set(candidates["int8"]["latency_ms"]) == {"batch_1", "batch_8"}
    runs["int8"] = _fake_run(0.0, 0.0)
    assert serving_dtype_auto.choose(runs.get, inputs, repeats=3)[
        "serving_dtype"] == "int8"
    text = serving_dtype_auto.describe(record)
    assert text.startswith("serving_dtype=auto chose float32.")
    assert "int8: batch 1" in text and "pooled_cosine" in text
    # Ratios in words, never a bare "0.58x float32".
    assert re.search(r"bfloat16: [^|]*, \d+\.\d\dx the latency of float32",
                     text), text
    assert "float32: batch 1" in text and "the reference" in text
    assert not re.search(r"\dx float32", text), text


def test_latency_ratios_read_as_speed_or_latency():
    assert serving_dtype_auto.compared_with_float32(0.58) == (
        "1.72x faster than float32")
    assert serving_dtype_auto.compared_with_float32(1.25) == (
        "1.25x the latency of float32")


def test_auto_on_a_pretrainer_measures_every_precision(spm_model, tmp_path):
    config = AlbertConfig.from_preset(
        "tiny", vocab_size=spm_model.get_piece_size(), num_hidden_layers=1)
    model = AlbertPretrainer(config)
    rng = np.random.default_rng(2)
    for weight in model.weights:
        weight.assign(rng.normal(scale=0.1, size=weight.shape).astype("float32"))
    proto = spm_model.serialized_model_proto()
    record, served = serving_dtype_auto.serving_model(model, "auto", proto, 16)
    assert set(record["candidates"]) == {"float32", "bfloat16", "int8"}
    for result in record["candidates"].values():
        assert set(result["agreement"]) == {
            "pooled_cosine", "pooled_nearest_own", "top1_agreement"}
        assert all(ms > 0 for ms in result["latency_ms"].values())
    chosen = record["serving_dtype"]
    assert not record["candidates"][chosen]["failures"]
    assert served is model if chosen == "float32" else served is not model
    assert record["sample"] == {"rows": serving_dtype_auto.SAMPLE_ROWS,
                                "seq_length": 16}
    serving_dtype_auto.write(record, str(tmp_path))
    assert serving_dtype_auto.read(str(tmp_path)) == record
    assert serving_dtype_auto.read(str(tmp_path / "none")) is None


def test_requested_precision_is_measured_without_timing(caplog):
    """int8 by name is exported as asked, but measured against float32 on
    the sample: a disagreement is a warning and is in the record."""
    inputs = {"input_word_ids": np.arange(1, 41, dtype=np.int32).reshape(8, 5),
              "input_mask": np.ones((8, 5), np.int32)}
    runs = {"float32": _fake_run(0.0, 0.0), "int8": _fake_run(0.0, 1.0)}
    record = serving_dtype_auto.resolve("int8", runs.get, lambda: inputs)
    assert record["serving_dtype"] == "int8" and record["how"] == "requested"
    assert record["failures"] and "pooled_cosine" in record["agreement"]
    assert "latency_ms" not in record
    assert "does not agree with float32" in caplog.text
    assert "serving_dtype=int8 (requested)" in serving_dtype_auto.describe(
        record)
    runs["int8"] = _fake_run(0.0, 0.0)
    assert not serving_dtype_auto.resolve("int8", runs.get,
                                          lambda: inputs)["failures"]

    def never(dtype):
        raise AssertionError("float32 is not measured against itself")

    record = serving_dtype_auto.resolve("float32", never, sample=None)
    assert record == {"serving_dtype": "float32", "how": "requested",
                      "device": record["device"]}
    with pytest.raises(ValueError, match="Received: serving_dtype='int4'"):
        serving_dtype_auto.resolve("int4", never, sample=None)
