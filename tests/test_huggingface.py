import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.convert import huggingface
from albert_tf.convert import names
from albert_tf.convert import safetensors_io
from albert_tf.convert import weight_set
from albert_tf.convert.pretrained import convert_checkpoint
from albert_tf.convert.pretrained import load_pretrained
from albert_tf.training import model_dir

_CONFIGS = {
    "groups_2_inner_2": dict(num_hidden_groups=2, inner_group_num=2),
    "groups_4_inner_3_no_projection": dict(
        num_hidden_groups=4, inner_group_num=3, embedding_size=32),
}


@pytest.mark.parametrize("overrides", _CONFIGS.values(), ids=_CONFIGS.keys())
def test_round_trip_through_hugging_face(tmp_path, random_pretrainer,
                                         assert_same_model, albert_spm_model,
                                         overrides):
    model = random_pretrainer(**overrides)
    ours = str(tmp_path / "ours")
    model_dir.save_model_dir(model, ours, spm_model_file=albert_spm_model)
    hf = str(tmp_path / "hf")
    convert_checkpoint(ours, hf, source="albert_tf", target="huggingface")
    assert sorted(os.listdir(hf)) == [
        "config.json", weight_set.MANIFEST_NAME, weight_set.REPORT_NAME,
        "model.safetensors", "spiece.model", "tokenizer.json",
        "tokenizer_config.json"]
    with open(os.path.join(hf, "config.json")) as f:
        config = json.load(f)
    assert config["model_type"] == "albert"
    assert config["hidden_act"] == "gelu_new"  # The official tanh GELU.
    assert config["inner_group_num"] == overrides["inner_group_num"]
    assert config["layer_norm_eps"] == 1e-12

    back = str(tmp_path / "back")
    convert_checkpoint(hf, back, target="albert_tf")
    assert_same_model(model, load_pretrained(back))
    assert_same_model(model, load_pretrained(hf))


def test_hugging_face_names_and_layouts(tmp_path, random_pretrainer):
    model = random_pretrainer(num_hidden_groups=2, inner_group_num=2)
    official = weight_set.model_to_official(model)
    huggingface.write(weight_set.Weights(model.config, official), str(tmp_path))
    hf = safetensors_io.load_file(str(tmp_path / "model.safetensors"))
    block = "bert/encoder/transformer/group_1/inner_group_0/"
    layer = "albert.encoder.albert_layer_groups.1.albert_layers.0."
    pairs = [  # (HF name, official name, transposed)
        ("albert.embeddings.word_embeddings.weight",
         "bert/embeddings/word_embeddings", False),
        ("albert.embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma",
         False),
        ("albert.encoder.embedding_hidden_mapping_in.weight",
         "bert/encoder/embedding_hidden_mapping_in/kernel", True),
        (layer + "attention.query.weight", block + "attention_1/self/query/kernel",
         True),
        (layer + "attention.dense.weight", block + "attention_1/output/dense/kernel",
         True),
        (layer + "attention.LayerNorm.bias", block + "LayerNorm/beta", False),
        (layer + "ffn.weight", block + "ffn_1/intermediate/dense/kernel", True),
        (layer + "ffn_output.weight",
         block + "ffn_1/intermediate/output/dense/kernel", True),
        (layer + "full_layer_layer_norm.weight", block + "LayerNorm_1/gamma", False),
        ("albert.pooler.weight", "bert/pooler/dense/kernel", True),
        ("predictions.dense.weight", "cls/predictions/transform/dense/kernel", True),
        ("predictions.bias", "cls/predictions/output_bias", False),
        ("sop_classifier.classifier.weight", "cls/seq_relationship/output_weights",
         False),
    ]
    for hf_name, official_name, transposed in pairs:
        expected = official[official_name].T if transposed else official[official_name]
        np.testing.assert_array_equal(hf[hf_name], expected, err_msg=hf_name)
    assert len(hf) == len(official)


def test_reads_a_bare_model_with_tied_copies_buffers_and_bfloat16(
        tmp_path, random_pretrainer, make_inputs):
    model = random_pretrainer(num_hidden_groups=2, inner_group_num=2)
    huggingface.write(weight_set.Weights(
        model.config, weight_set.model_to_official(model)), str(tmp_path))
    hf = safetensors_io.load_file(str(tmp_path / "model.safetensors"))
    # An AlbertModel as saved by transformers: no "albert." prefix, no heads,
    # a position_ids buffer, bfloat16 values.
    bare = {k[len("albert."):]: v for k, v in hf.items() if k.startswith("albert.")}
    bare["embeddings.position_ids"] = np.arange(128, dtype=np.int64)[None]
    path = tmp_path / "bare"
    path.mkdir()
    with open(tmp_path / "config.json") as f:
        config = json.load(f)
    config.update(_name_or_path="somewhere", torch_dtype="bfloat16",
                  architectures=["AlbertModel"])
    (path / "config.json").write_text(json.dumps(config))
    bf16 = {}
    for name, value in bare.items():
        if value.dtype == np.float32:
            bits = (value.view(np.uint32) >> 16).astype(np.uint16)
            bf16[name] = bits  # Written as U16, relabelled BF16 below.
        else:
            bf16[name] = value
    safetensors_io.save_file(bf16, str(path / "model.safetensors"))
    raw = (path / "model.safetensors").read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = raw[8:8 + size].replace(b'"U16"', b'"BF16"')
    (path / "model.safetensors").write_bytes(
        len(header).to_bytes(8, "little") + header + raw[8 + size:])

    weights = huggingface.read(str(path))
    assert dict(weights.report.skipped) == {
        "embeddings.position_ids": "buffer, not a weight"}
    assert len(weights.report.absent) == 7  # Both heads.
    assert any("BF16" in note for note in weights.report.notes)
    expected = weight_set.model_to_official(model)
    for name, value in weights.tensors.items():
        truncated = (expected[name].view(np.uint32) & 0xFFFF0000).view(np.float32)
        np.testing.assert_array_equal(value, truncated, err_msg=name)
    loaded = load_pretrained(str(path))
    assert loaded(make_inputs(loaded.config))["sequence_output"].shape == (2, 9, 32)

    # A tied decoder copy is accepted when equal, refused when not.
    with_decoder = dict(hf)
    with_decoder["predictions.decoder.weight"] = hf[
        "albert.embeddings.word_embeddings.weight"]
    with_decoder["predictions.decoder.bias"] = hf["predictions.bias"]
    safetensors_io.save_file(with_decoder, str(tmp_path / "model.safetensors"))
    weights = huggingface.read(str(tmp_path))
    assert "predictions.decoder.weight" in dict(weights.report.skipped)
    with_decoder["predictions.decoder.weight"] = with_decoder[
        "predictions.decoder.weight"] + 1
    safetensors_io.save_file(with_decoder, str(tmp_path / "model.safetensors"))
    with pytest.raises(weight_set.ConversionError, match="decoder.weight.*differs"):
        huggingface.read(str(tmp_path))


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="torch is installed")
def test_pytorch_bin_without_torch_is_a_clear_error(tmp_path, random_pretrainer):
    model = random_pretrainer()
    huggingface.write(weight_set.Weights(
        model.config, weight_set.model_to_official(model)), str(tmp_path))
    os.rename(tmp_path / "model.safetensors", tmp_path / "pytorch_model.bin")
    with pytest.raises(weight_set.ConversionError, match="needs PyTorch.*safetensors"):
        load_pretrained(str(tmp_path))


def test_config_mapping():
    values = {"model_type": "albert", "vocab_size": 48, "embedding_size": 16,
              "hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 2,
              "intermediate_size": 64, "hidden_act": "gelu",
              "layer_norm_eps": 1e-6, "_name_or_path": "x", "id2label": {}}
    config = huggingface.config_from_hf(values)
    assert config.hidden_act == "gelu_exact" and config.layer_norm_epsilon == 1e-6
    assert huggingface.config_to_hf(config)["hidden_act"] == "gelu"
    values["hidden_act"] = "gelu_new"
    assert huggingface.config_from_hf(values).hidden_act == "gelu"
    with pytest.raises(names.UnsupportedConfigError, match="share='attention'"):
        huggingface.config_to_hf(
            huggingface.config_from_hf(values).__class__(share="attention"))


def _cli(*args):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # (The library module of `python -m albert_tf.convert_checkpoint`.)
    return subprocess.run(
        [sys.executable, "-m", "albert_tf.convert_checkpoint", *args],
        cwd=root, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2"))


def _files(directory):
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in sorted(os.listdir(directory))}


def test_corrupt_weights_and_truncated_config_are_named(tmp_path,
                                                        random_pretrainer):
    model = random_pretrainer()
    hf = str(tmp_path / "hf")
    os.makedirs(hf)
    huggingface.write(weight_set.Weights(
        model.config, weight_set.model_to_official(model)), hf)
    weights_file = os.path.join(hf, "model.safetensors")
    tensor = "albert.encoder.embedding_hidden_mapping_in.bias"
    raw = bytearray(open(weights_file, "rb").read())
    header_size = int.from_bytes(raw[:8], "little")
    begin = json.loads(raw[8:8 + header_size])[tensor]["data_offsets"][0]
    start = 8 + header_size + begin
    raw[start:start + 16] = b"\xff" * 16
    with open(weights_file, "wb") as f:
        f.write(raw)
    before = _files(hf)
    with pytest.raises(safetensors_io.SafetensorsError,
                       match=f"{weights_file!r}: tensor {tensor!r} holds 4 NaN"):
        huggingface.read(hf)
    out = str(tmp_path / "out")
    result = _cli("--source=huggingface", f"--input={hf}", f"--output_dir={out}")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"{weights_file!r}: tensor {tensor!r} holds 4 NaN" in result.stderr
    assert not os.path.exists(out)

    config_file = os.path.join(hf, "config.json")
    with open(config_file, "r+") as f:
        f.truncate(40)
    with pytest.raises(ValueError, match=f"^{config_file!r} is not valid JSON"):
        huggingface.read(hf)
    with pytest.raises(ValueError, match=f"^{config_file!r} is not valid JSON"):
        load_pretrained(hf)
    # The program's own work, in this process: a ValueError, which it prints
    # as one line (the CLI case above; this case as a command line: the
    # slow table of tests/test_bad_inputs.py).
    from albert_tf import convert_checkpoint as program
    from albert_tf.convert.options import ConvertOptions

    with pytest.raises(ValueError, match=(
            f"{config_file!r} is not valid JSON \\(truncated or corrupt\\?\\)")):
        program.convert(ConvertOptions(source="huggingface", input=hf,
                                       output_dir=out))
    assert _files(hf) == dict(before, **{"config.json": _files(hf)["config.json"]})
    assert not os.path.exists(out)
