"""Tests for export/litert.py: text-in `.tflite` models agree with the
SavedModels of the same weights, run in LiteRT's interpreter with
tensorflow-text's ops, and answer bad input."""

import os

import numpy as np
import pytest

from export import options

_HARD = ["", "CAFÉ Naïve ÜBER", "In 1990, 3,000 people; 12,5 and 7,",
         "word " * 400]
_INVALID = b"\xff\xfe broken \xc3("


def test_quantizations_are_the_flag_choices():
    from albert_tf.tasks.options import ClassifierOptions
    from export import litert

    for program in (options.ExportOptions, ClassifierOptions):
        field = program.__dataclass_fields__["litert_quantization"]
        assert field.default == "int8"
        assert field.metadata["choices"] == litert.QUANTIZATIONS
    with pytest.raises(ValueError, match="Received: quantization='int4'"):
        litert.check_quantization("int4")


def test_packing_in_int32_is_the_saved_models_packing():
    import tensorflow as tf

    from albert_tf.layers import preprocessing
    from export import litert

    rng = np.random.default_rng(0)
    for seq_length in (3, 8, 13, 32):
        for pairs in (False, True):
            rows = [rng.integers(5, 50, rng.integers(0, 40)).tolist()
                    for _ in range(6)]
            first = tf.ragged.constant(rows, dtype=tf.int32)
            second = tf.ragged.constant(
                [rng.integers(5, 50, rng.integers(0, 30)).tolist()
                 for _ in range(6)], dtype=tf.int32) if pairs else None
            got = litert.pack(first, second, seq_length)
            want = preprocessing.pack_segments(first, second, seq_length,
                                               pad_to_longest=True)
            for name, value in want.items():
                np.testing.assert_array_equal(got[name], value, name)


def _runner(model_bytes, threads=1):
    from ai_edge_litert import interpreter as litert
    from tensorflow_text import tflite_registrar

    interpreter = litert.InterpreterWithCustomOps(
        custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
        model_content=model_bytes, num_threads=threads)
    return interpreter.get_signature_runner("serving_default")


def _strings(texts):
    return np.array(list(texts), dtype=object)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny random ALBERT and a classifier on it, as `.tflite` (each
    quantization) and as float32 SavedModels."""
    import sentencepiece as spm
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf import AlbertClassifier
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from data_prep import vocab
    from export import finetuned_exports
    from export import litert
    from export import pretrained_export

    texts = [f"Sentence {i}: the café sold {i * 7 % 13} cakes, {i},{i}00 of "
             "them to ÜBER people." for i in range(300)]
    proto = vocab.model_from_texts(texts, 300)
    root = tmp_path_factory.mktemp("litert")
    spm_path = root / "spm.model"
    spm_path.write_bytes(proto)
    config = AlbertConfig.from_preset("tiny", vocab_size=300,
                                      num_hidden_layers=2,
                                      max_position_embeddings=64)
    pretrainer = AlbertPretrainer(config)
    classifier = AlbertClassifier(pretrainer.encoder, num_classes=3)
    rng = np.random.default_rng(7)
    for v in pretrainer.weights + classifier.weights:
        v.assign(rng.normal(scale=0.2, size=v.shape).astype("float32"))
    labels = ["neg", "neutral", "pos"]
    encoder = {q: litert.encoder_model(pretrainer.encoder, proto, 32,
                                       quantization=q)
               for q in litert.QUANTIZATIONS}
    classifier_int8 = litert.classifier_model(classifier, proto, labels, 32)
    serving = pretrained_export.export_pretrainer(
        pretrainer, proto, str(root / "serving"), max_seq_length=32,
        save_keras=False)["serving"]
    saved_classifier = finetuned_exports.export_classifier(
        classifier, str(spm_path), str(root / "classifier"), labels=labels,
        max_seq_length=32)
    held_out = [f"Held out {i}: {i * 11 % 97} café Zürich, ÉCOLE {i},5"
                for i in range(200)]
    return {"encoder": encoder, "classifier": classifier_int8,
            "pretrainer": pretrainer, "proto": proto,
            "serving": tf.saved_model.load(serving).signatures,
            "saved_classifier": tf.saved_model.load(
                saved_classifier).signatures,
            "held_out": held_out, "labels": labels,
            "sp_model": spm.SentencePieceProcessor(model_proto=proto)}


@pytest.mark.slow
def test_only_the_tokenizer_is_a_custom_op_and_no_tensorflow_op(models):
    from tensorflow.lite.tools import flatbuffer_utils

    for model_bytes in list(models["encoder"].values()) + [models["classifier"]]:
        model = flatbuffer_utils.read_model_from_bytearray(
            bytearray(model_bytes))
        custom = {code.customCode.decode() for code in model.operatorCodes
                  if code.customCode}
        assert custom == {"TFText>FastSentencepieceTokenize"}, custom


@pytest.mark.slow
def test_int8_is_the_smallest_and_float32_the_largest(models):
    sizes = {q: len(b) for q, b in models["encoder"].items()}
    assert sizes["int8"] < sizes["float16"] < sizes["float32"], sizes


@pytest.mark.slow
@pytest.mark.parametrize("quantization", ["float32", "float16", "int8"])
def test_pooled_output_agrees_with_the_saved_model(models, quantization):
    import tensorflow as tf

    run = _runner(models["encoder"][quantization])
    texts = models["held_out"] + _HARD
    want = models["serving"]["serving_single"](
        text=tf.constant(texts))["pooled_output"].numpy()
    for text, reference in zip(texts, want):
        got = run(text=_strings([text]))["pooled_output"][0]
        cosine = got @ reference / (np.linalg.norm(got)
                                    * np.linalg.norm(reference))
        assert cosine >= 0.99, (quantization, text, cosine)
    batch = run(text=_strings(texts[:5]))["pooled_output"]
    np.testing.assert_allclose(batch, want[:5], atol=0.05)


@pytest.mark.slow
def test_control_characters_give_the_saved_models_answer(models):
    """NUL (the SavedModels once dropped the text after it), other
    controls, noncharacters, format characters and a lone surrogate: the
    float32 `.tflite` gives the SavedModel's pooled output, so the same
    ids."""
    import tensorflow as tf

    from tests import fixtures_text

    run = _runner(models["encoder"]["float32"])
    want = models["serving"]["serving_single"](
        text=tf.constant(fixtures_text.CONTROL_TEXTS))["pooled_output"].numpy()
    got = np.concatenate([run(text=_strings([text]))["pooled_output"]
                          for text in fixtures_text.CONTROL_TEXTS])
    np.testing.assert_allclose(got, want, atol=2e-5)
    # Text after a NUL counts: "a\0b" is not "a".
    cut = models["serving"]["serving_single"](
        text=tf.constant(["a"]))["pooled_output"].numpy()
    assert np.abs(want[0] - cut[0]).max() > 1e-4


def test_agreement_finds_texts_nearest_another_texts_vector():
    from export import litert

    rng = np.random.default_rng(0)
    # Nearly parallel vectors (as a small model's pooled outputs are),
    # told apart only by what they do not share.
    reference = 5.0 + 0.01 * rng.normal(size=(6, 16))
    same = litert.agreement(reference, reference.copy())
    assert same["confused"] == [] and same["nearest_own"] == 6
    swapped = reference.copy()
    swapped[[0, 1]] = reference[[1, 0]]
    measures = litert.agreement(reference, swapped)
    assert measures["confused"] == [0, 1] and measures["min_cosine"] > 0.99
    assert "2 of 6 sample texts" in litert._failure(measures)
    assert litert._failure(same) is None


@pytest.mark.slow
def test_a_quantization_that_confuses_texts_falls_back(models, tmp_path,
                                                       monkeypatch):
    """The written `.tflite` agrees with float32 on the sample; a
    quantization that does not is replaced by a wider one, and the record
    says so."""
    import json

    from export import litert

    path, record = litert.export_checked_encoder(
        models["pretrainer"].encoder, models["proto"], str(tmp_path / "a"),
        32, quantization="int8")
    chosen = record["quantization"]
    assert record["agreement"][chosen]["failure"] is None
    assert json.loads((tmp_path / "a" / litert.RECORD_FILE).read_text()) == \
        json.loads(json.dumps(record))
    assert (chosen == "int8") == (record["fallback"] == [])
    # A check that int8 and float16 cannot pass: float32 is written.
    monkeypatch.setattr(litert, "MIN_COSINE", 1.0 + 1e-9)
    _, record = litert.export_checked_encoder(
        models["pretrainer"].encoder, models["proto"], str(tmp_path / "b"),
        32, quantization="int8")
    assert record["quantization"] == "float32"
    assert [line.split(":")[0] for line in record["fallback"]] == [
        "int8", "float16"]
    assert len((tmp_path / "b" / litert.ENCODER_FILE).read_bytes()) > len(
        open(path, "rb").read())


@pytest.mark.slow
def test_classifier_labels_agree_with_the_saved_model(models):
    import tensorflow as tf

    run = _runner(models["classifier"])
    texts = models["held_out"]
    pairs = texts[1:] + texts[:1]
    saved = models["saved_classifier"]["serving_default"]
    for text_b in ([""] * len(texts), pairs):
        want = saved(text=tf.constant(texts), text_b=tf.constant(text_b))
        got = [run(text=_strings([a]), text_b=_strings([b]))
               for a, b in zip(texts, text_b)]
        same = np.mean([int(g["label_id"][0]) == int(w) for g, w in
                        zip(got, want["label_id"].numpy())])
        assert same >= 0.995, same
        assert got[0]["label"][0].decode() in models["labels"]
        np.testing.assert_allclose(got[0]["probabilities"][0].sum(), 1.0,
                                   rtol=1e-5)


@pytest.mark.slow
def test_bad_input_gets_an_answer(models):
    encode = _runner(models["encoder"]["int8"], threads=2)
    classify = _runner(models["classifier"])
    for text in ["", "word " * 2000, _INVALID, "\x00", " \t\n "]:
        pooled = encode(text=_strings([text]))["pooled_output"]
        assert pooled.shape == (1, 32) and np.all(np.isfinite(pooled))
        out = classify(text=_strings([text]), text_b=_strings([_INVALID]))
        assert np.all(np.isfinite(out["probabilities"]))
    # An empty batch gets empty outputs (LiteRT's kernels refuse zero-sized
    # tensors inside; the models run one padding row and cut it off).
    assert encode(text=_strings([]))["pooled_output"].shape == (0, 32)
    out = classify(text=_strings([]), text_b=_strings([]))
    assert out["probabilities"].shape == (0, 3)
    assert out["label_id"].shape == out["label"].shape == (0,)
    assert encode(text=_strings(["ok"]))["pooled_output"].shape == (1, 32)


def test_classifier_needs_one_label_per_class():
    from albert_tf import AlbertClassifier
    from albert_tf import AlbertConfig
    from albert_tf import AlbertEncoder
    from export import litert

    model = AlbertClassifier(AlbertEncoder(AlbertConfig.from_preset("tiny")),
                             num_classes=2)
    with pytest.raises(ValueError, match="Received: labels=\\['a'\\]"):
        litert.classifier_model(model, b"", ["a"])


def test_an_existing_model_file_is_never_replaced(tmp_path):
    from albert_tf import AlbertConfig
    from albert_tf import AlbertEncoder
    from export import litert

    existing = tmp_path / litert.ENCODER_FILE
    existing.write_bytes(b"a model of another run")
    encoder = AlbertEncoder(AlbertConfig.from_preset("tiny"))
    with pytest.raises(FileExistsError, match="left as it is"):
        litert.export_encoder(encoder, b"", str(tmp_path))
    assert existing.read_bytes() == b"a model of another run"


def test_litert_inputs_are_the_flag_choices():
    from export import litert

    field = options.ExportOptions.__dataclass_fields__["litert_inputs"]
    assert field.default == "text"
    assert field.metadata["choices"] == litert.LITERT_INPUTS


def test_ids_inputs_without_the_litert_format_are_refused():
    import dataclasses

    from export import export_saved_model

    flags = options.ExportOptions(
        checkpoint="c", albert_config_file="a", spm_model_file="s",
        export_dir="e", litert_inputs="ids")
    with pytest.raises(ValueError, match="--litert_inputs=ids takes effect "
                       "with --format=litert only"):
        export_saved_model.check_options(flags)
    with pytest.raises(FileNotFoundError):  # past that check
        export_saved_model.check_options(dataclasses.replace(
            flags, format="litert"))


def test_ids_in_export_has_builtin_ops_only_and_agrees(tmp_path):
    """`--format=litert --litert_inputs=ids`: `model.tflite` beside the
    SavedModels, no custom op in its flatbuffer, loaded and run by the
    builtin op resolver alone, agreeing with the float32 encoder."""
    import tensorflow as tf
    from ai_edge_litert import interpreter as interpreter_lib
    from tensorflow.lite.tools import flatbuffer_utils

    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from data_prep import vocab
    from export import litert
    from export import pretrained_export

    texts = [f"Line {i}: {i * 3 % 7} boats sailed to the island."
             for i in range(200)]
    proto = vocab.model_from_texts(texts, 200)
    pretrainer = AlbertPretrainer(AlbertConfig.from_preset(
        "tiny", vocab_size=200, num_hidden_layers=2,
        max_position_embeddings=64))
    paths = pretrained_export.export_pretrainer(
        pretrainer, proto, str(tmp_path), max_seq_length=16,
        save_keras=False, litert_quantization="int8", litert_inputs="ids")
    path = paths["litert_encoder"]
    assert path == str(tmp_path / "albert_litert" / "1" / "model.tflite")
    block = pretrained_export.serving_block(str(tmp_path), "albert", paths)
    assert ("--model_name=albert_litert --model_base_path=%s "
            "--prefer_tflite_model=true" % (tmp_path / "albert_litert")
            in block), block
    with open(path, "rb") as f:
        model_bytes = f.read()
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(model_bytes))
    assert not [code.customCode for code in model.operatorCodes
                if code.customCode]
    assert "FULLY_CONNECTED" in litert.builtin_op_names(model_bytes)
    record = litert.read_record(os.path.dirname(path))
    assert record["file"] == "model.tflite"
    assert record["agreement"][record["quantization"]]["builtin_ops"]
    runner = interpreter_lib.Interpreter(
        model_content=model_bytes,
        experimental_op_resolver_type=(
            interpreter_lib.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
    ).get_signature_runner("serving_default")
    ids = np.array([[2, 10, 11, 12, 3, 0, 0, 0]], np.int32)
    mask = (ids > 0).astype(np.int32)
    got = runner(input_word_ids=ids, input_mask=mask,
                 input_type_ids=np.zeros_like(ids))
    want = pretrainer.encoder({"input_word_ids": ids, "input_mask": mask,
                               "input_type_ids": np.zeros_like(ids)},
                              training=False)
    assert got["sequence_output"].shape == (1, 8, 32)
    pooled = np.asarray(tf.cast(want["pooled_output"], tf.float32))
    cosine = np.sum(got["pooled_output"] * pooled) / (
        np.linalg.norm(got["pooled_output"]) * np.linalg.norm(pooled))
    assert cosine > 0.99, cosine


@pytest.mark.slow
def test_the_text_model_needs_its_custom_op(models):
    """The builtin op resolver (TF Serving's) refuses the text-in model,
    naming the tokenizer: why the ids-in model exists."""
    from export import litert

    with pytest.raises((RuntimeError, ValueError),
                       match="FastSentencepieceTokenize"):
        litert.builtin_op_names(models["encoder"]["int8"])
