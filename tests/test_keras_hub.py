import os

import numpy as np
import pytest

from albert_tf.convert import keras_hub as keras_hub_convert
from albert_tf.convert import names
from albert_tf.convert import weight_set
from albert_tf.convert.pretrained import convert_checkpoint
from albert_tf.convert.pretrained import detect_format
from albert_tf.convert.pretrained import load_pretrained

keras_hub = pytest.importorskip("keras_hub")


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(scale=0.2, size=w.shape).astype("float32"))


@pytest.fixture(scope="module")
def keras_hub_preset(tmp_path_factory, albert_spm_model):
    """An `AlbertMaskedLM` preset saved by keras-hub, with random weights."""
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=48, num_layers=4, num_heads=4, embedding_dim=16,
        hidden_dim=32, intermediate_dim=48, num_groups=2,
        num_inner_repetitions=2, max_sequence_length=32)
    tokenizer = keras_hub.models.AlbertTokenizer(proto=albert_spm_model)
    preprocessor = keras_hub.models.AlbertMaskedLMPreprocessor(
        tokenizer=tokenizer, sequence_length=16)
    masked_lm = keras_hub.models.AlbertMaskedLM(backbone, preprocessor=preprocessor)
    _randomize(masked_lm, seed=3)
    directory = str(tmp_path_factory.mktemp("keras_hub") / "albert_preset")
    masked_lm.save_to_preset(directory)
    return directory, masked_lm


def test_matches_the_keras_hub_backbone_and_masked_lm(keras_hub_preset, make_inputs):
    directory, masked_lm = keras_hub_preset
    assert detect_format(directory) == "keras_hub"
    model = load_pretrained(directory)
    config = model.config
    assert (config.num_hidden_groups, config.inner_group_num) == (2, 2)
    inputs = make_inputs(config, batch=3, length=12, predictions=4)
    ours = model(inputs)
    theirs = masked_lm.backbone({"token_ids": inputs["input_word_ids"],
                                 "segment_ids": inputs["input_type_ids"],
                                 "padding_mask": inputs["input_mask"]})
    real = inputs["input_mask"].astype(bool)
    diff = np.abs(np.asarray(ours["sequence_output"]) -
                  np.asarray(theirs["sequence_output"]))
    assert diff[real].max() < 1e-5
    assert np.abs(np.asarray(ours["pooled_output"]) -
                  np.asarray(theirs["pooled_output"])).max() < 1e-5
    features = {"token_ids": inputs["input_word_ids"],
                "segment_ids": inputs["input_type_ids"],
                "padding_mask": inputs["input_mask"],
                "mask_positions": inputs["masked_lm_positions"]}
    # keras-hub's MLM head normalizes with epsilon 1e-5, the official head
    # (and this one) with 1e-12: a small, expected difference.
    stock = np.asarray(masked_lm(features))
    assert np.abs(np.asarray(ours["mlm_logits"]) - stock).max() < 1e-3
    # With the official epsilon, keras-hub computes the same logits.
    layer_norm = masked_lm.masked_lm_head._intermediate_layer_norm
    layer_norm.epsilon = 1e-12
    try:
        official_eps = np.asarray(masked_lm(features))
    finally:
        layer_norm.epsilon = 1e-5
    assert np.abs(np.asarray(ours["mlm_logits"]) - official_eps).max() < 1e-5


def test_converts_a_preset_with_its_tokenizer(keras_hub_preset, tmp_path,
                                              assert_same_model):
    directory, _ = keras_hub_preset
    out = str(tmp_path / "ours")
    report = convert_checkpoint(directory, out, source="keras_hub")
    with open(os.path.join(directory, keras_hub_convert.SPM_PATH), "rb") as f:
        assert open(os.path.join(out, "spm.model"), "rb").read() == f.read()
    # keras-hub has no SOP head: listed as absent, everything else mapped.
    assert sorted(n for n, _ in report.absent) == [
        "cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]
    mapped = dict((m[0], m) for m in report.mapped)
    assert mapped["group_1_inner_layer_0/self_attention_layer/query/kernel"][2:] == (
        (32, 4, 8), "reshape")
    converted = load_pretrained(out)
    assert len(mapped) == len(names.official_shapes(converted.config)) - 2
    assert not report.skipped
    # The HF round trip of a converted keras-hub model keeps it exactly.
    hf = str(tmp_path / "hf")
    convert_checkpoint(out, hf, target="huggingface")
    assert_same_model(converted, load_pretrained(hf))


def test_backbone_only_preset_and_refusals(tmp_path):
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=48, num_layers=2, num_heads=2, embedding_dim=16,
        hidden_dim=32, intermediate_dim=48, max_sequence_length=32)
    _randomize(backbone, seed=4)
    backbone.save_to_preset(str(tmp_path / "backbone"))
    weights = keras_hub_convert.read(str(tmp_path / "backbone"))
    assert len(weights.report.absent) == 7  # Both heads.
    assert weights.spm_model_file is None
    np.testing.assert_array_equal(
        weights.tensors["bert/embeddings/word_embeddings"],
        backbone.token_embedding.embeddings.numpy())

    square = keras_hub.models.AlbertBackbone(
        vocabulary_size=48, num_layers=2, num_heads=2, embedding_dim=32,
        hidden_dim=32, intermediate_dim=48, max_sequence_length=32)
    with pytest.raises(names.UnsupportedConfigError, match="projection"):
        keras_hub_convert.weights_from_model(square)
    with pytest.raises(weight_set.ConversionError, match="not a keras-hub ALBERT"):
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "config.json").write_text(
            '{"class_name": "BertBackbone"}')
        (tmp_path / "other" / "model.weights.h5").write_bytes(b"")
        keras_hub_convert.read(str(tmp_path / "other"))
