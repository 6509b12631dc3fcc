"""Exported SavedModels: fresh-process serving, numbers, bad input, layout."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import preprocessing
from data_prep import text as text_lib
from export import layout
from export import pretrained_export

TEXTS = ["The cat sat on the mat.", "Kato rimen sa lo, pre di!",
         "  Café   NAÏVE  Über  ", "", "ka " * 200]
TEXTS_B = ["", "Ta ver mi an.", "el us qua", "ble ing st ro", ""]

# Runs with `python -I` from an empty folder: no PYTHONPATH, no user site, no
# script folder. An editable install (`pip install -e .`) would still expose
# the project's packages, so an import hook refuses them as well.
_FRESH_PROCESS = r"""
import json, sys
import numpy as np

_PROJECT = ("albert_tf", "data_prep", "export")

class _RefuseProject:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _PROJECT:
            raise ModuleNotFoundError("blocked: %s" % name)
        return None

sys.meta_path.insert(0, _RefuseProject())
for package in _PROJECT:
    try:
        __import__(package)
    except ImportError:
        pass
    else:
        raise AssertionError("%s is importable" % package)
import tensorflow as tf
import tensorflow_text  # registers the ops of the SavedModel

job = json.load(open(sys.argv[1]))
model = tf.saved_model.load(job["path"])
serve = model.signatures["serving_default"]
out = serve(text=tf.constant(job["texts"]), text_b=tf.constant(job["texts_b"]))
single = serve(text=tf.constant(job["texts"]), text_b=tf.constant([], tf.string))
np.savez(job["output"], **{k: v.numpy() for k, v in out.items()},
         single_pooled=single["pooled_output"].numpy())

# Bad input: every call returns a result or raises a TensorFlow error.
def strings(values):
    return tf.constant(values, tf.string)

cases = {
    "empty": lambda: serve(text=strings([""]), text_b=strings([""])),
    "long": lambda: serve(text=strings(["word " * 20000]),
                          text_b=strings(["x" * 100000])),
    "invalid_utf8": lambda: serve(text=strings([b"\xff\xfe\x80 abc", b"\xc3"]),
                                  text_b=strings([b"\xed\xa0\x80", b""])),
    "zero_batch": lambda: serve(text=strings([]), text_b=strings([])),
    "pair_mismatch": lambda: serve(text=strings(["a", "b"]), text_b=strings(["a"])),
    "fill_mask_zero_batch": lambda: model.signatures["fill_mask"](text=strings([])),
    "fill_mask_many_masks": lambda: model.signatures["fill_mask"](
        text=strings(["[MASK] " * 500, b"\xff[MASK]"])),
    "fill_mask_no_mask": lambda: model.signatures["fill_mask"](
        text=strings(["no mask here", ""])),
    "sop_empty": lambda: model.signatures["sop"](
        text=strings(["", ""]), text_b=strings(["", "x"])),
    "sop_zero_batch": lambda: model.signatures["sop"](
        text=strings([]), text_b=strings([])),
}
report = {}
for name, call in cases.items():
    try:
        result = call()
        report[name] = {k: list(v.shape) for k, v in result.items()}
    except tf.errors.OpError as e:
        report[name] = {"error": type(e).__name__, "message": e.message[:300]}
json.dump(report, open(job["report"], "w"))
print("FRESH PROCESS OK")
"""


def _keras_outputs(pretrainer, sp_model, texts, texts_b, seq_length):
    """The in-process Keras encoder on ids from the Python tokenization."""
    rows = [preprocessing.pack_ids(
        text_lib.tokenize_to_ids(sp_model, [a])[0],
        text_lib.tokenize_to_ids(sp_model, [b])[0] if b is not None else None,
        seq_length) for a, b in zip(texts, texts_b)]
    inputs = {key: np.array([row[key] for row in rows], np.int32)
              for key in rows[0]}
    outputs = pretrainer.encoder(inputs, training=False)
    return inputs, {k: np.asarray(outputs[k])
                    for k in ("pooled_output", "sequence_output")}


def _serve_in_fresh_process(path, tmp_path):
    """Runs `_FRESH_PROCESS` on the text-in SavedModel at `path` in a new
    interpreter with only tensorflow and tensorflow-text; returns its
    outputs (npz) and its report of the edge cases."""
    job = {"path": path, "texts": TEXTS,
           "texts_b": TEXTS_B, "output": str(tmp_path / "out.npz"),
           "report": str(tmp_path / "report.json")}
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "run.py").write_text(_FRESH_PROCESS)
    empty = tmp_path / "cwd"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "run.py"),
         str(tmp_path / "job.json")],
        cwd=str(empty), env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "FRESH PROCESS OK" in result.stdout
    return (np.load(job["output"]),
            json.loads((tmp_path / "report.json").read_text()))


def _cosines(a, b):
    a, b = np.asarray(a, "float64"), np.asarray(b, "float64")
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1)
                              * np.linalg.norm(b, axis=-1))


def _check_served(served, exported_albert, close):
    """The served outputs against the Keras float32 encoder's, compared by
    `close(served, expected)`."""
    inputs, expected = _keras_outputs(
        exported_albert.pretrainer, exported_albert.sp_model, TEXTS, TEXTS_B,
        exported_albert.max_seq_length)
    np.testing.assert_array_equal(served["input_mask"], inputs["input_mask"])
    close(served["pooled_output"], expected["pooled_output"])
    # Real positions match (padding positions hold no defined values).
    real = inputs["input_mask"].astype(bool)
    close(served["sequence_output"][real], expected["sequence_output"][real])
    _, single = _keras_outputs(
        exported_albert.pretrainer, exported_albert.sp_model, TEXTS,
        [None] * len(TEXTS), exported_albert.max_seq_length)
    close(served["single_pooled"], single["pooled_output"])


@pytest.mark.slow
def test_fresh_process_serves_strings_like_keras(exported_albert, tmp_path):
    served, report = _serve_in_fresh_process(exported_albert.paths["serving"],
                                             tmp_path)
    _check_served(served, exported_albert, lambda a, b: np.testing.
                  assert_allclose(a, b, atol=1e-5, rtol=0))
    _check_edge_cases(report, exported_albert)


def _check_edge_cases(report, exported_albert):
    t, h = exported_albert.max_seq_length, exported_albert.pretrainer.config.hidden_size
    k = exported_albert.top_k
    # Dynamic T: the longest row rounded up to 8, capped at max_seq_length.
    assert report["empty"]["sequence_output"] == [1, 8, h]
    assert report["long"]["input_mask"] == [1, t]
    assert report["invalid_utf8"]["pooled_output"] == [2, h]
    assert report["zero_batch"]["pooled_output"] == [0, h]
    assert report["zero_batch"]["sequence_output"] == [0, 8, h]
    assert report["pair_mismatch"]["error"] == "InvalidArgumentError"
    assert "text_b must be empty" in report["pair_mismatch"]["message"]
    assert report["fill_mask_zero_batch"]["top_k_ids"] == [0, 0, k]
    # All masks that fit: T - 2 of them.
    assert report["fill_mask_many_masks"]["top_k_ids"] == [2, t - 2, k]
    assert report["fill_mask_no_mask"]["mask_positions"] == [2, 0]
    assert report["sop_empty"]["sop_logits"] == [2, 2]
    assert report["sop_zero_batch"]["sop_probabilities"] == [0, 2]


def test_fill_mask_matches_keras_pretrainer(exported_albert,
                                            loaded_serving_model):
    texts = ["the [MASK] sat on [MASK] mat.", "no mask", "[MASK]"]
    out = loaded_serving_model.signatures["fill_mask"](text=tf.constant(texts))
    sp_model, t = exported_albert.sp_model, exported_albert.max_seq_length
    rows = [preprocessing.pack_ids(
        preprocessing.tokenize_with_masks_py(sp_model, text), None, t)
        for text in texts]
    ids = np.array([r["input_word_ids"] for r in rows], np.int32)
    expected_positions = [np.flatnonzero(r == preprocessing.MASK_ID)
                          for r in ids]
    assert out["mask_positions"].shape == (3, 2)
    positions = np.full((3, 2), -1, np.int32)
    for i, p in enumerate(expected_positions):
        positions[i, :len(p)] = p
    np.testing.assert_array_equal(out["mask_positions"], positions)

    inputs = {key: np.array([r[key] for r in rows], np.int32) for key in rows[0]}
    inputs["masked_lm_positions"] = np.maximum(positions, 0)
    logits = np.asarray(exported_albert.pretrainer(inputs)["mlm_logits"])
    probabilities = tf.nn.softmax(logits).numpy()
    k = exported_albert.top_k
    for i in range(3):
        for j in range(2):
            if positions[i, j] < 0:
                assert list(out["top_k_ids"][i, j]) == [-1] * k
                assert list(out["top_k_pieces"][i, j]) == [b""] * k
                continue
            best = np.argsort(-probabilities[i, j])[:k]
            np.testing.assert_array_equal(out["top_k_ids"][i, j], best)
            np.testing.assert_allclose(out["top_k_probabilities"][i, j],
                                       probabilities[i, j, best], atol=1e-6)
            assert [p.decode() for p in out["top_k_pieces"][i, j].numpy()] == [
                sp_model.id_to_piece(int(x)) for x in best]


def test_fill_mask_counts_the_markers_it_did_not_predict(
        exported_albert, loaded_serving_model):
    t = exported_albert.max_seq_length
    out = loaded_serving_model.signatures["fill_mask"](text=tf.constant(
        ["[MASK] " * 500, "a [mask] b [MASK] c [Mask]", "no mask", "[MASK]"]))
    assert out["dropped_masks"].numpy().tolist() == [500 - (t - 2), 2, 0, 0]
    assert out["dropped_masks"].dtype == tf.int32


def test_sop_matches_keras_pretrainer(exported_albert, loaded_serving_model):
    out = loaded_serving_model.signatures["sop"](
        text=tf.constant(TEXTS[:3]), text_b=tf.constant(TEXTS_B[:3]))
    inputs, _ = _keras_outputs(
        exported_albert.pretrainer, exported_albert.sp_model, TEXTS[:3],
        TEXTS_B[:3], exported_albert.max_seq_length)
    inputs["masked_lm_positions"] = np.zeros((3, 1), np.int32)
    logits = np.asarray(exported_albert.pretrainer(inputs)["sop_logits"])
    np.testing.assert_allclose(out["sop_logits"], logits, atol=1e-5)
    np.testing.assert_allclose(out["sop_probabilities"].numpy().sum(-1), 1.0,
                               atol=1e-6)


def test_preprocessor_and_encoder_pair(exported_albert, loaded_serving_model):
    import tensorflow_text  # noqa: F401

    preprocessor = tf.saved_model.load(exported_albert.paths["preprocessor"])
    encoder = tf.saved_model.load(exported_albert.paths["encoder"])
    t = exported_albert.max_seq_length
    specials = {k: int(v) for k, v in
                preprocessor.tokenize.get_special_tokens_dict().items()}
    assert specials == {
        "vocab_size": exported_albert.sp_model.get_piece_size(),
        "start_of_sequence_id": 2, "end_of_segment_id": 3, "padding_id": 0,
        "mask_id": 4}

    tokens_a = preprocessor.tokenize(tf.constant(TEXTS))
    tokens_b = preprocessor.tokenize(tf.constant(TEXTS_B))
    assert tokens_a.to_list() == text_lib.tokenize_to_ids(
        exported_albert.sp_model, TEXTS)
    for seq_length in (t, 7):
        packed = preprocessor.bert_pack_inputs(
            [tokens_a, tokens_b], seq_length=tf.constant(seq_length))
        for i, (a, b) in enumerate(zip(tokens_a.to_list(), tokens_b.to_list())):
            expected = preprocessing.pack_ids(a, b, seq_length)
            for key, value in expected.items():
                assert packed[key][i].numpy().tolist() == value, (key, i)
    single = preprocessor.bert_pack_inputs([tokens_a])
    np.testing.assert_array_equal(single["input_word_ids"],
                                  preprocessor(tf.constant(TEXTS))["input_word_ids"])
    signature = preprocessor.signatures["serving_default"](text=tf.constant(TEXTS))
    np.testing.assert_array_equal(signature["input_mask"], single["input_mask"])

    # Preprocessor + encoder == the text-in model.
    encoded = encoder(preprocessor(tf.constant(TEXTS)))
    assert len(encoded["encoder_outputs"]) == 2
    np.testing.assert_array_equal(encoded["default"], encoded["pooled_output"])
    served = loaded_serving_model.signatures["serving_default"](
        text=tf.constant(TEXTS), text_b=tf.constant([], tf.string))
    np.testing.assert_allclose(encoded["pooled_output"], served["pooled_output"],
                               atol=1e-5)
    # From Python, `serve` takes the strings alone (`text_b` has a default).
    np.testing.assert_allclose(
        loaded_serving_model.serve(tf.constant(TEXTS))["pooled_output"],
        served["pooled_output"], atol=1e-6)
    by_signature = encoder.signatures["serving_default"](
        **preprocessor(tf.constant(TEXTS)))
    assert sorted(by_signature) == ["default", "pooled_output", "sequence_output"]
    np.testing.assert_allclose(by_signature["sequence_output"],
                               encoded["sequence_output"], atol=1e-6)
    assert len(encoder.trainable_variables) == len(
        exported_albert.pretrainer.encoder.trainable_variables)


def test_layout_assets_and_never_overwrite(exported_albert):
    serving = exported_albert.paths["serving"]
    assets = sorted(os.listdir(os.path.join(serving, "assets")))
    assert assets == [pretrained_export.CONFIG_ASSET, pretrained_export.SPM_ASSET]
    with open(os.path.join(serving, "assets", pretrained_export.SPM_ASSET), "rb") as f:
        assert f.read() == exported_albert.sp_model.serialized_model_proto()
    assert not [name for name in os.listdir(exported_albert.export_dir)
                if name.startswith(".staging")]
    for path in (exported_albert.paths["encoder"],
                 exported_albert.paths["preprocessor"]):
        assert tf.saved_model.contains_saved_model(path)
    assert os.path.isfile(exported_albert.paths["keras"])
    with pytest.raises(layout.VersionExistsError, match="already exists"):
        pretrained_export.export_from_checkpoint(
            exported_albert.model_dir,
            os.path.join(exported_albert.model_dir, "albert_config.json"),
            os.path.join(exported_albert.model_dir, "spm.model"),
            exported_albert.export_dir, version=1,
            max_seq_length=exported_albert.max_seq_length)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        pretrained_export.export_pretrainer(
            exported_albert.pretrainer,
            exported_albert.sp_model.serialized_model_proto(),
            exported_albert.export_dir, max_seq_length=1000)
    assert layout.list_versions(os.path.join(exported_albert.export_dir,
                                             "albert")) == [1]


def _functions_holding(path, op_type, at_least=1):
    """Names of the library functions of a SavedModel holding `op_type` at
    least `at_least` times."""
    from export import graph_ops

    return [function.signature.name
            for meta_graph in graph_ops.read_saved_model(path).meta_graphs
            for function in meta_graph.graph_def.library.function
            if sum(node.op == op_type
                   for node in function.node_def) >= at_least]


def test_every_signature_calls_one_trace_of_the_encoder_and_tokenizer(
        exported_albert):
    # The text-in model's four signatures (and the length groups inside
    # them) call one encoder function (attention: two batched matmuls per
    # block); the encoder model holds one per mode (inference, training).
    # Tokenization is one function too. A trace per call site made exports
    # slower, their files larger and their loading slower.
    paths = exported_albert.paths
    assert len(_functions_holding(paths["serving"], "BatchMatMulV2", 2)) == 1
    assert len(_functions_holding(paths["encoder"], "BatchMatMulV2", 2)) == 2
    for kind in ("serving", "preprocessor"):
        assert len(_functions_holding(
            paths[kind], "SentencepieceTokenizeOp")) == 1, kind


def test_preprocessor_seq_length_past_the_encoder_table_names_the_limit(
        exported_albert):
    import tensorflow_text  # noqa: F401

    preprocessor = tf.saved_model.load(exported_albert.paths["preprocessor"])
    encoder = tf.saved_model.load(exported_albert.paths["encoder"])
    tokens = preprocessor.tokenize(tf.constant(["a short text"]))
    limit = exported_albert.pretrainer.config.max_position_embeddings
    inputs = preprocessor.bert_pack_inputs([tokens],
                                           seq_length=tf.constant(limit + 36))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"exceeds max_position_embeddings={limit}"):
        encoder(inputs)


@pytest.fixture(scope="module")
def fixed_serving_model(exported_albert, tmp_path_factory):
    """The same pretrainer exported with `serving_shape="fixed"`, loaded."""
    import tensorflow_text  # noqa: F401

    paths = pretrained_export.export_pretrainer(
        exported_albert.pretrainer,
        exported_albert.sp_model.serialized_model_proto(),
        str(tmp_path_factory.mktemp("fixed")),
        max_seq_length=exported_albert.max_seq_length,
        top_k=exported_albert.top_k, save_keras=False, serving_shape="fixed")
    return tf.saved_model.load(paths["serving"])


def _assert_same_at_real_positions(dynamic, fixed, expected_t):
    """`dynamic` (T = expected_t) equals `fixed` (T = max) where mask is 1."""
    t = dynamic["input_mask"].shape[1]
    assert t == expected_t
    mask = fixed["input_mask"].numpy()
    np.testing.assert_array_equal(dynamic["input_mask"], mask[:, :t])
    assert not mask[:, t:].any()  # only padding was left out
    real = mask[:, :t].astype(bool)
    np.testing.assert_allclose(dynamic["sequence_output"].numpy()[real],
                               fixed["sequence_output"].numpy()[:, :t][real],
                               atol=1e-5, rtol=0)
    np.testing.assert_allclose(dynamic["pooled_output"],
                               fixed["pooled_output"], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_dynamic_export_pads_to_the_longest_row_and_matches_fixed(
        exported_albert, loaded_serving_model, fixed_serving_model):
    t_max = exported_albert.max_seq_length
    h = exported_albert.pretrainer.config.hidden_size
    short = ["ka"]
    n = len(text_lib.tokenize_to_ids(exported_albert.sp_model, short)[0]) + 2
    assert n <= 8
    cases = [
        # (text, text_b, the dynamic T)
        (short, None, 8),
        (TEXTS[:2], None, preprocessing.padded_length(max(
            len(ids) + 2 for ids in text_lib.tokenize_to_ids(
                exported_albert.sp_model, TEXTS[:2])), t_max)),
        (TEXTS, TEXTS_B, t_max),  # a row is truncated: capped at T
        ([""], [""], 8),
    ]
    for text, text_b, expected_t in cases:
        if text_b is None:
            dynamic = loaded_serving_model.signatures["serving_single"](
                text=tf.constant(text))
            fixed = fixed_serving_model.signatures["serving_single"](
                text=tf.constant(text))
        else:
            dynamic = loaded_serving_model.signatures["serving_default"](
                text=tf.constant(text), text_b=tf.constant(text_b))
            fixed = fixed_serving_model.signatures["serving_default"](
                text=tf.constant(text), text_b=tf.constant(text_b))
        assert fixed["sequence_output"].shape == (len(text), t_max, h)
        _assert_same_at_real_positions(dynamic, fixed, expected_t)
    zero = loaded_serving_model.signatures["serving_single"](
        text=tf.constant([], tf.string))
    assert zero["sequence_output"].shape == (0, 8, h)

    masked = ["the [MASK] sat.", "[MASK] is [MASK] here, " * 3]
    dynamic = loaded_serving_model.signatures["fill_mask"](
        text=tf.constant(masked))
    fixed = fixed_serving_model.signatures["fill_mask"](text=tf.constant(masked))
    for key in ("mask_positions", "top_k_ids", "dropped_masks"):
        np.testing.assert_array_equal(dynamic[key], fixed[key], err_msg=key)
    np.testing.assert_allclose(dynamic["top_k_probabilities"],
                               fixed["top_k_probabilities"], atol=1e-5)
    pair = dict(text=tf.constant(TEXTS[:3]), text_b=tf.constant(TEXTS_B[:3]))
    np.testing.assert_allclose(
        loaded_serving_model.signatures["sop"](**pair)["sop_logits"],
        fixed_serving_model.signatures["sop"](**pair)["sop_logits"], atol=1e-5)


def test_encoder_at_a_shorter_length_equals_the_padded_one(exported_albert):
    """Position embeddings are sliced to T: a short batch need no padding."""
    rows = [preprocessing.pack_ids(ids, None, 32) for ids in
            text_lib.tokenize_to_ids(exported_albert.sp_model, TEXTS[:3])]
    long = {key: np.array([r[key] for r in rows], np.int32) for key in rows[0]}
    t = int(long["input_mask"].sum(1).max())
    short = {key: value[:, :t] for key, value in long.items()}
    encoder = exported_albert.pretrainer.encoder
    out_long = encoder(long, training=False)
    out_short = encoder(short, training=False)
    assert out_short["sequence_output"].shape[1] == t
    real = short["input_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(out_short["sequence_output"])[real],
        np.asarray(out_long["sequence_output"])[:, :t][real], atol=1e-5)


def test_text_b_is_optional_through_every_entry_point(exported_albert,
                                                      loaded_serving_model):
    texts = tf.constant(TEXTS[:3])
    single = loaded_serving_model.signatures["serving_single"](text=texts)
    assert sorted(single) == ["input_mask", "pooled_output", "sequence_output"]
    empty_b = loaded_serving_model.signatures["serving_default"](
        text=texts, text_b=tf.constant([], tf.string))
    blank_b = loaded_serving_model.signatures["serving_default"](
        text=texts, text_b=tf.constant(["", "", ""]))
    by_method = loaded_serving_model.serve(texts)
    for other in (empty_b, blank_b, by_method):
        for key in single:
            np.testing.assert_allclose(single[key], other[key], atol=1e-6)
    with pytest.raises(ValueError, match="serving_shape must be one of"):
        pretrained_export.export_pretrainer(
            exported_albert.pretrainer,
            exported_albert.sp_model.serialized_model_proto(),
            exported_albert.export_dir, max_seq_length=16,
            serving_shape="static")


def _strings(values):
    return tf.constant(values, tf.string)


def _parse_export_flags(*extra):
    from absl import flags

    from export.options import ExportOptions
    from foundation import flag_options as options_lib

    flag_values = flags.FlagValues()
    options_lib.define_flags(ExportOptions, flag_values,
                             module_name="export_saved_model")
    flag_values(["export_saved_model", "--checkpoint=c",
                 "--albert_config_file=a", "--spm_model_file=s",
                 "--export_dir=e", *extra])
    return options_lib.from_flags(ExportOptions, flag_values)


def test_serving_shape_flag_takes_dynamic_or_fixed():
    from absl import flags

    assert _parse_export_flags().serving_shape == "dynamic"
    assert _parse_export_flags(
        "--serving_shape=fixed").serving_shape == "fixed"
    with pytest.raises(flags.IllegalFlagValueError):
        _parse_export_flags("--serving_shape=static")


def test_serving_dtype_flag_takes_the_precisions_and_auto():
    from absl import flags

    from albert_tf.models.serving_dtypes import SERVING_DTYPE_CHOICES

    assert _parse_export_flags().serving_dtype == "float32"
    for value in SERVING_DTYPE_CHOICES:
        assert _parse_export_flags(
            "--serving_dtype=" + value).serving_dtype == value
    with pytest.raises(flags.IllegalFlagValueError):
        _parse_export_flags("--serving_dtype=float16")


def _assert_cosines_above(threshold):
    def close(served, expected):
        cosines = _cosines(served, expected)
        assert cosines.min() >= threshold, cosines
    return close


# int8 (XLA-compiled) in the default set; bfloat16 (the same graph in
# another dtype) with the slow tests.
@pytest.mark.parametrize("serving_dtype", [
    pytest.param("bfloat16", marks=pytest.mark.slow), "int8"])
def test_reduced_precision_export_agrees_with_float32(
        exported_albert, reduced_precision_exports, loaded_serving_model,
        serving_dtype):
    from export import serving_compat
    from export import serving_dtype_auto

    path = reduced_precision_exports[serving_dtype]
    record = serving_dtype_auto.read(path)
    assert record["serving_dtype"] == serving_dtype
    assert record["how"] == "requested"
    # Measured against float32 when written (a text confused is in it).
    assert 0 <= record["agreement"]["pooled_nearest_own"] <= 1
    assert record["agreement"]["pooled_cosine"] > 0.9
    ops = serving_compat.read_record(path)
    # int8 runs compiled by XLA, which the model server does only when told.
    assert ops["xla_compiled"] == (serving_dtype == "int8")
    assert ops["model_server_flags"] == (
        [serving_compat.XLA_SERVER_FLAG] if serving_dtype == "int8" else [])
    model = tf.saved_model.load(path)
    out = model.signatures["serving_default"](
        text=_strings(TEXTS), text_b=_strings(TEXTS_B))
    single = model.signatures["serving_single"](text=_strings(TEXTS))
    served = {"input_mask": out["input_mask"].numpy(),
              "pooled_output": out["pooled_output"].numpy(),
              "sequence_output": out["sequence_output"].numpy(),
              "single_pooled": single["pooled_output"].numpy()}
    assert out["pooled_output"].dtype == tf.float32
    _check_served(served, exported_albert, _assert_cosines_above(0.99))
    # Dynamic length is kept: a short text is padded to 8, not to T.
    short = model.signatures["serving_single"](text=_strings(["a b"]))
    assert short["sequence_output"].shape[1] == 8
    texts = ["the [MASK] sat on [MASK] mat.", "[MASK] is here", "[MASK]"]
    ours = model.signatures["fill_mask"](text=_strings(texts))
    theirs = loaded_serving_model.signatures["fill_mask"](text=_strings(texts))
    np.testing.assert_array_equal(ours["mask_positions"],
                                  theirs["mask_positions"])
    top1 = np.mean(ours["top_k_ids"].numpy()[..., 0]
                   == theirs["top_k_ids"].numpy()[..., 0])
    assert top1 >= 0.75, top1


@pytest.mark.slow
def test_int8_export_serves_every_edge_case_in_a_fresh_process(
        exported_albert, reduced_precision_exports, tmp_path):
    served, report = _serve_in_fresh_process(
        reduced_precision_exports["int8"], tmp_path)
    _check_served(served, exported_albert, _assert_cosines_above(0.99))
    _check_edge_cases(report, exported_albert)


def test_length_groups_merge_where_a_call_costs_more_than_the_padding():
    from export import signatures

    def merged(widths, counts, cost):
        run_widths, run_counts = tf.function(signatures.merge_groups)(
            tf.constant(widths), tf.constant(counts), cost)
        return run_widths.numpy().tolist(), run_counts.numpy().tolist()

    # 8 and 16 merge (16 x 2 + 64 < 8 + 16 + 2 x 64); 128 stays alone.
    assert merged([8, 16, 128], [1, 1, 1], 64) == ([16, 128], [2, 1])
    assert merged([8, 16, 128], [1, 1, 1], 0) == ([8, 16, 128], [1, 1, 1])
    assert merged([8, 16, 128], [1, 1, 1], 10**6) == ([128], [3])
    assert merged([40], [5], 64) == ([40], [5])
    # Many rows at a length keep it apart: 10 x (32 - 8) tokens > 64.
    assert merged([8, 32], [10, 1], 64) == ([8, 32], [10, 1])
    widths = list(range(8, 129, 8))
    run_widths, run_counts = merged(widths, [2] * 16, 64)
    assert sum(run_counts) == 32 and run_widths[-1] == 128
    # The least total cost of any split into runs (brute force over all
    # 2^15 splits of 16 groups).
    def cost(ends):
        total, start = 0, 0
        for end in ends:
            total += 64 + widths[end] * 2 * (end - start + 1)
            start = end + 1
        return total
    best = min(cost([i for i in range(15) if mask >> i & 1] + [15])
               for mask in range(2 ** 15))
    assert cost([widths.index(w) for w in run_widths]) == best


def test_the_config_and_vocabulary_default_to_the_checkpoint_folder(tmp_path):
    from export import export_saved_model
    from export.options import ExportOptions

    folder = tmp_path / "best"
    folder.mkdir()
    (folder / "model.ckpt.index").write_bytes(b"")
    (folder / "albert_config.json").write_text("{}")
    options = ExportOptions(checkpoint=str(folder),
                            export_dir=str(tmp_path / "serving"))
    with pytest.raises(FileNotFoundError) as error:
        export_saved_model.check_options(options)
    message = str(error.value)
    assert "--spm_model_file is not given" in message
    assert str(folder) in message and "\n" not in message
    (folder / "spm.model").write_bytes(b"x")
    export_saved_model.check_options(options)
    assert options.albert_config_file == str(folder / "albert_config.json")
    assert options.spm_model_file == str(folder / "spm.model")
