import keras
import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf import AlbertEncoder
from tests.layer_checks import assert_nested_close
from tests.layer_checks import run_model_test

# albert-reference.md §3: exact encoder parameter counts.
RELEASED_COUNTS = {
    "albert_base_v2": 11_683_584,
    "albert_large_v2": 17_683_968,
    "albert_xlarge_v2": 58_724_864,
    "albert_xxlarge_v2": 222_595_584,
}
ABLATION_COUNTS = {  # (share, E) on ALBERT-base.
    ("all", 64): 9_681_408, ("all", 128): 11_683_584,
    ("all", 256): 15_687_936, ("all", 768): 31_114_752,
    ("none", 64): 87_648_000, ("none", 128): 89_650_176,
    ("none", 256): 93_654_528, ("none", 768): 109_081_344,
    ("attention", 128): 63_647_232, ("attention", 768): 83_078_400,
    ("ffn", 128): 37_686_528, ("ffn", 768): 57_117_696,
}


def _inputs(config, batch=2, length=9, seed=0, pad_from=6):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), "int32")
    mask[1, pad_from:] = 0
    return {
        "input_word_ids": rng.integers(
            0, config.vocab_size, (batch, length)).astype("int32"),
        "input_mask": mask,
        "input_type_ids": (np.arange(length)[None, :] >= length // 2).astype(
            "int32").repeat(batch, 0),
    }


def _tiny(**overrides):
    return AlbertConfig.from_preset("tiny", **overrides)


@pytest.mark.usefixtures("zero_initialized")
@pytest.mark.parametrize("preset", sorted(RELEASED_COUNTS))
def test_released_parameter_counts(preset):
    encoder = AlbertEncoder(AlbertConfig.from_preset(preset))
    assert encoder.count_params() == RELEASED_COUNTS[preset]
    del encoder
    keras.backend.clear_session()


@pytest.mark.usefixtures("zero_initialized")
@pytest.mark.parametrize("share,embedding_size", sorted(ABLATION_COUNTS))
def test_ablation_parameter_counts(share, embedding_size):
    config = AlbertConfig.from_preset("albert_base_v2", share=share,
                                      embedding_size=embedding_size)
    encoder = AlbertEncoder(config)
    assert encoder.count_params() == ABLATION_COUNTS[(share, embedding_size)]
    del encoder
    keras.backend.clear_session()


def test_outputs_and_shapes():
    config = _tiny(inner_group_num=2)
    encoder = AlbertEncoder(config)
    out = encoder(_inputs(config))
    assert out["sequence_output"].shape == (2, 9, 32)
    assert out["pooled_output"].shape == (2, 32)
    assert len(out["encoder_outputs"]) == config.num_hidden_layers * 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    pooled = np.tanh(
        np.asarray(out["sequence_output"])[:, 0] @ encoder.pooler.kernel.numpy()
        + encoder.pooler.bias.numpy())
    np.testing.assert_allclose(out["pooled_output"], pooled, atol=1e-5)
    positions = np.array([[0, 8, 2], [5, 5, 1]], "int32")
    rows = encoder.hidden_states_at(_inputs(config), positions)
    np.testing.assert_allclose(
        rows, np.take_along_axis(np.asarray(out["sequence_output"]),
                                 positions[:, :, None], axis=1), atol=1e-5)


def test_all_shared_variables_do_not_grow_with_depth():
    counts = {layers: len(AlbertEncoder(
        _tiny(num_hidden_layers=layers)).trainable_variables)
              for layers in (1, 4, 12)}
    assert len(set(counts.values())) == 1, counts
    params = {layers: AlbertEncoder(_tiny(num_hidden_layers=layers)).count_params()
              for layers in (1, 12)}
    assert params[1] == params[12]
    not_shared = AlbertEncoder(_tiny(num_hidden_layers=4, share="none"))
    assert len(not_shared.trainable_variables) > counts[4]


def _executed_blocks(encoder):
    """(attention layer, ffn layer) per executed block, read from the graph."""
    blocks = []
    for tensor in encoder.output["encoder_outputs"]:
        ffn, node_index, _ = tensor._keras_history
        attention_output = ffn._inbound_nodes[node_index].input_tensors[0]
        blocks.append((attention_output._keras_history.operation, ffn))
    return blocks


@pytest.mark.parametrize("share", ["all", "attention", "ffn", "none"])
def test_layer_to_group_mapping_by_variable_identity(share):
    config = _tiny(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=2,
                   share=share)
    encoder = AlbertEncoder(config)
    blocks = _executed_blocks(encoder)
    assert len(blocks) == 12

    def var_ids(layer):
        return frozenset(id(v) for v in layer.trainable_variables)

    for a in range(12):
        for b in range(12):
            layer_a, inner_a = divmod(a, 2)
            layer_b, inner_b = divmod(b, 2)
            same_group = (int(layer_a / 6 * 3) == int(layer_b / 6 * 3)
                          and inner_a == inner_b)
            same_layer = layer_a == layer_b and inner_a == inner_b
            want_attention = same_group if share in ("all", "attention") else same_layer
            want_ffn = same_group if share in ("all", "ffn") else same_layer
            assert (var_ids(blocks[a][0]) == var_ids(blocks[b][0])) == want_attention
            assert (var_ids(blocks[a][1]) == var_ids(blocks[b][1])) == want_ffn
    # Different sub-blocks never share a single variable.
    layers = {id(layer): layer for block in blocks for layer in block}
    all_ids = [var_ids(layer) for layer in layers.values()]
    assert sum(len(s) for s in all_ids) == len(frozenset().union(*all_ids))


def test_perturbing_a_group_changes_outputs_from_its_first_layer():
    config = _tiny(num_hidden_layers=6, num_hidden_groups=3)
    encoder = AlbertEncoder(config)
    inputs = _inputs(config)
    before = [np.asarray(t) for t in encoder(inputs)["encoder_outputs"]]
    kernel = encoder.get_layer("group_1_inner_group_0_ffn").output_dense.kernel
    # Random, not constant: a constant shift along H is undone by LayerNorm.
    kernel.assign(kernel + np.random.default_rng(0).normal(size=kernel.shape))
    after = [np.asarray(t) for t in encoder(inputs)["encoder_outputs"]]
    changed = [not np.allclose(b, a) for b, a in zip(before, after)]
    # Group 1 holds layers 2 and 3 (int(l / 6 * 3) == 1).
    assert changed == [False, False, True, True, True, True]


def test_matches_keras_hub_backbone():
    keras_hub = pytest.importorskip("keras_hub")
    from albert_tf.convert.keras_hub import encoder_from_keras_hub

    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=120, num_layers=4, num_heads=4, embedding_dim=16,
        hidden_dim=32, intermediate_dim=48, num_groups=2,
        num_inner_repetitions=2, max_sequence_length=32)
    # Give every weight (LayerNorms and biases included) a random value.
    rng = np.random.default_rng(1)
    for w in backbone.weights:
        w.assign(rng.normal(scale=0.2, size=w.shape).astype("float32"))
    encoder = encoder_from_keras_hub(backbone)
    config = encoder.config
    inputs = _inputs(config, batch=3, length=12, pad_from=5)
    theirs = backbone({"token_ids": inputs["input_word_ids"],
                       "segment_ids": inputs["input_type_ids"],
                       "padding_mask": inputs["input_mask"]})
    ours = encoder(inputs)
    real = inputs["input_mask"].astype(bool)
    seq_diff = np.abs(np.asarray(ours["sequence_output"])
                      - np.asarray(theirs["sequence_output"]))
    assert seq_diff[real].max() < 1e-5
    pooled_diff = np.abs(np.asarray(ours["pooled_output"])
                         - np.asarray(theirs["pooled_output"]))
    assert pooled_diff.max() < 1e-5


def test_padding_does_not_change_real_positions():
    config = _tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    encoder = AlbertEncoder(config)
    inputs = _inputs(config, pad_from=5)
    out = encoder(inputs)
    # Other ids at the padded positions, and more padding at the end.
    noisy = {k: v.copy() for k, v in inputs.items()}
    noisy["input_word_ids"][1, 5:] = 7
    longer = {k: np.pad(v, ((0, 0), (0, 4)),
                        constant_values=3 if k == "input_word_ids" else 0)
              for k, v in noisy.items()}
    for variant in (noisy, longer):
        other = encoder(variant)
        np.testing.assert_allclose(np.asarray(other["sequence_output"])[1, :5],
                                   np.asarray(out["sequence_output"])[1, :5], atol=1e-5)
        np.testing.assert_allclose(other["pooled_output"], out["pooled_output"],
                                   atol=1e-5)


def test_missing_mask_and_type_ids_default():
    config = _tiny()
    encoder = AlbertEncoder(config)
    ids = _inputs(config)["input_word_ids"]
    full = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}
    assert_nested_close(encoder({"input_word_ids": ids}), encoder(full), atol=0)
    assert_nested_close(encoder({"input_word_ids": ids, "input_mask": None}),
                        encoder(full), atol=0)


def test_model_checks():
    # "ffn" shares the feed-forward blocks of a group and not its attention
    # blocks: the clone, the loaded copy and the mixed model must rebuild
    # both kinds.
    config = _tiny(share="ffn", num_hidden_layers=2, num_hidden_groups=1,
                   inner_group_num=2)
    assert config.hidden_dropout_prob > 0
    blocks = config.num_hidden_layers * config.inner_group_num
    run_model_test(
        AlbertEncoder, {"config": config, "name": "my_encoder"},
        _inputs(config),
        {"sequence_output": (2, 9, 32), "pooled_output": (2, 32),
         "encoder_outputs": [(2, 9, 32)] * blocks},
        # 7 embedding, 2 pooler, and 10 per attention and 6 per feed-forward
        # sub-block: 4 attention (2 layers x 2 inner), 2 feed-forward (one
        # group x 2 inner).
        expected_num_trainable_weights=7 + 2 + 4 * 10 + 2 * 6,
        each_model=lambda model: _assert_config(model, config))


def _assert_config(model, config):
    assert model.config == config


@pytest.mark.parametrize("share", ["all", "attention", "none"])
def test_config_round_trip_keeps_the_sharing(share):
    config = _tiny(share=share, num_hidden_layers=2, num_hidden_groups=1,
                   inner_group_num=2)
    encoder = AlbertEncoder(config)
    inputs = _inputs(config)
    clone = AlbertEncoder.from_config(encoder.get_config())
    assert clone.config == config
    assert len(clone.trainable_weights) == len(encoder.trainable_weights)
    clone.set_weights(encoder.get_weights())
    assert_nested_close(encoder(inputs), clone(inputs), atol=0)


def test_bad_config_type():
    with pytest.raises(TypeError, match="AlbertConfig"):
        AlbertEncoder("albert_base_v2")
