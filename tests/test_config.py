import json
import logging

import pytest

from albert_tf import PRESETS
from albert_tf import AlbertConfig


def test_presets_match_released_configs():
    base = AlbertConfig.from_preset("albert_base_v2")
    assert (base.hidden_size, base.intermediate_size, base.num_attention_heads,
            base.num_hidden_layers) == (768, 3072, 12, 12)
    assert base.hidden_dropout_prob == 0.0
    assert AlbertConfig.from_preset("albert_base_v1").hidden_dropout_prob == 0.1
    heads = {name: AlbertConfig.from_preset(f"albert_{name}_v2").num_attention_heads
             for name in ("base", "large", "xlarge", "xxlarge")}
    # xlarge: 16 heads as in the released TF-Hub module (some json files say 32).
    assert heads == {"base": 12, "large": 16, "xlarge": 16, "xxlarge": 64}
    xxl = AlbertConfig.from_preset("albert_xxlarge_v1")
    assert (xxl.hidden_size, xxl.num_attention_heads, xxl.num_hidden_layers) == (
        4096, 64, 12)
    assert xxl.hidden_dropout_prob == 0.0
    for name in PRESETS:
        config = AlbertConfig.from_preset(name)
        assert config.layer_norm_epsilon == 1e-12
        assert config.hidden_act == "gelu"
        if name != "tiny":
            assert (config.vocab_size, config.embedding_size) == (30000, 128)


def test_preset_overrides_and_unknown_preset():
    assert AlbertConfig.from_preset("tiny", share="none").share == "none"
    with pytest.raises(ValueError, match="albert_huge"):
        AlbertConfig.from_preset("albert_huge")


@pytest.mark.parametrize("field,value,match", [
    ("hidden_size", 33, "hidden_size=33"),
    ("num_hidden_groups", 3, "num_hidden_groups=3"),
    ("share", "half", "share='half'"),
    ("hidden_act", "swiglu", "hidden_act='swiglu'"),
    ("vocab_size", 0, "vocab_size=0"),
    ("embedding_size", -4, "embedding_size=-4"),
    ("num_attention_heads", 2.5, "num_attention_heads=2.5"),
    ("hidden_dropout_prob", 1.5, "hidden_dropout_prob=1.5"),
    ("layer_norm_epsilon", 0, "layer_norm_epsilon=0"),
])
def test_bad_values_name_the_field(field, value, match):
    kwargs = dict(PRESETS["tiny"])
    kwargs[field] = value
    with pytest.raises(ValueError, match=match.replace(".", r"\.")) as info:
        AlbertConfig(**kwargs)
    assert field in str(info.value)


def test_json_round_trip(tmp_path):
    config = AlbertConfig.from_preset("tiny", share="ffn", num_hidden_groups=2,
                                      inner_group_num=2)
    path = str(tmp_path / "sub" / "config.json")
    config.to_json_file(path)
    assert AlbertConfig.from_json_file(path) == config


def test_reads_official_albert_config_json(tmp_path, caplog):
    official = {
        "attention_probs_dropout_prob": 0, "hidden_act": "gelu",
        "hidden_dropout_prob": 0, "embedding_size": 128, "hidden_size": 768,
        "initializer_range": 0.02, "intermediate_size": 3072,
        "max_position_embeddings": 512, "num_attention_heads": 12,
        "num_hidden_layers": 12, "num_hidden_groups": 1,
        "net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0,
        "inner_group_num": 1, "down_scale_factor": 1, "type_vocab_size": 2,
        "vocab_size": 30000}
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(official))
    with caplog.at_level(logging.INFO):
        config = AlbertConfig.from_json_file(str(path))
    assert config == AlbertConfig.from_preset("albert_base_v2")
    assert "net_structure_type" in caplog.text


def test_reads_hugging_face_config_json(tmp_path):
    hf = {
        "architectures": ["AlbertForMaskedLM"], "model_type": "albert",
        "attention_probs_dropout_prob": 0, "bos_token_id": 2,
        "classifier_dropout_prob": 0.1, "embedding_size": 128, "eos_token_id": 3,
        "hidden_act": "gelu_new", "hidden_dropout_prob": 0, "hidden_size": 768,
        "initializer_range": 0.02, "inner_group_num": 1,
        "intermediate_size": 3072, "layer_norm_eps": 1e-12,
        "max_position_embeddings": 512, "num_attention_heads": 12,
        "num_hidden_groups": 1, "num_hidden_layers": 12, "pad_token_id": 0,
        "type_vocab_size": 2, "vocab_size": 30000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf))
    assert AlbertConfig.from_json_file(str(path)) == AlbertConfig.from_preset(
        "albert_base_v2")
    hf["hidden_act"] = "gelu"  # The erf form in Hugging Face's naming.
    path.write_text(json.dumps(hf))
    assert AlbertConfig.from_json_file(str(path)).hidden_act == "gelu_exact"


def test_bad_json_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.json"):
        AlbertConfig.from_json_file(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        AlbertConfig.from_json_file(str(bad))
    listy = tmp_path / "list.json"
    listy.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        AlbertConfig.from_json_file(str(listy))
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"hidden_sise": 768}))
    with pytest.raises(ValueError, match="hidden_sise"):
        AlbertConfig.from_json_file(str(unknown))


def test_truncated_json_names_the_file_in_one_line(tmp_path):
    path = tmp_path / "config.json"
    full = json.dumps(AlbertConfig.from_preset("tiny").to_dict())
    path.write_text(full[:40])
    with pytest.raises(ValueError) as error:
        AlbertConfig.from_json_file(str(path))
    message = str(error.value)
    assert message.startswith(f"{str(path)!r} is not valid JSON (truncated or "
                              "corrupt?): ")
    assert "\n" not in message
