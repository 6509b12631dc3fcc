"""Cross-layer sharing: the official layer -> group rule and the sub-block
names each sharing mode gives (the encoder's weights follow the names;
`test_encoder` checks that by variable identity)."""

import subprocess
import sys

import pytest

from albert_tf import AlbertConfig
from albert_tf import cross_layer_sharing
from albert_tf.cross_layer_sharing import group_of_layer
from albert_tf.cross_layer_sharing import sub_block_keys


def test_group_of_layer_is_the_official_formula():
    assert [group_of_layer(layer, 12, 3) for layer in range(12)] == (
        [0] * 4 + [1] * 4 + [2] * 4)
    assert {group_of_layer(layer, 12, 1) for layer in range(12)} == {0}
    assert [group_of_layer(layer, 4, 4) for layer in range(4)] == [0, 1, 2, 3]


def _config(share, layers=4, groups=2, inner=1):
    return AlbertConfig.from_preset("tiny", num_hidden_layers=layers,
                                    num_hidden_groups=groups,
                                    inner_group_num=inner, share=share)


@pytest.mark.parametrize("share, attentions, ffns", [
    ("all", 2, 2),         # grouped: 2 groups for 4 layers
    ("attention", 2, 4),   # shared attention, an FFN per layer
    ("ffn", 4, 2),         # shared FFN, an attention per layer
    ("none", 4, 4),        # not shared
])
def test_distinct_sub_blocks_per_mode(share, attentions, ffns):
    keys = sub_block_keys(_config(share))
    assert len(keys) == 4
    assert len({attention for attention, _ in keys}) == attentions
    assert len({ffn for _, ffn in keys}) == ffns


def test_key_names_and_inner_groups():
    keys = sub_block_keys(_config("attention", layers=2, groups=1, inner=2))
    assert keys == [
        ("group_0_inner_group_0_attention", "layer_0_inner_group_0_ffn"),
        ("group_0_inner_group_1_attention", "layer_0_inner_group_1_ffn"),
        ("group_0_inner_group_0_attention", "layer_1_inner_group_0_ffn"),
        ("group_0_inner_group_1_attention", "layer_1_inner_group_1_ffn"),
    ]
    all_shared = sub_block_keys(_config("all", layers=12, groups=1))
    assert set(all_shared) == {("group_0_inner_group_0_attention",
                                "group_0_inner_group_0_ffn")}


def test_every_mode_is_a_config_choice():
    assert cross_layer_sharing.SHARE_MODES == ("all", "attention", "ffn", "none")
    for share in cross_layer_sharing.SHARE_MODES:
        _config(share)
    with pytest.raises(ValueError, match="share='some'"):
        _config("some")


def test_imports_no_tensorflow():
    code = ("import sys, albert_tf.cross_layer_sharing; "
            "sys.exit('tensorflow' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
