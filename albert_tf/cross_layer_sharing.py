"""Cross-layer parameter sharing: which weights each executed layer uses.

ALBERT runs `num_hidden_layers` (L) transformer layers but stores the weights
of only `num_hidden_groups` (G) groups of them: layer `l` runs group
`int(l / L * G)` (the official formula, `group_of_layer`), and a group holds
`inner_group_num` blocks run one after the other. Each block is two
sub-blocks, self-attention and feed-forward (FFN), so either half can be
shared on its own. `AlbertConfig.share` picks one of `SHARE_MODES`, the
paper's sharing ablations:

- `"all"` (all-shared, ALBERT): attention and FFN follow the groups. With
  G = 1 every layer runs the same weights; with 1 < G < L the layers are
  shared in G consecutive runs (grouped).
- `"attention"` (shared-attention): the attention sub-blocks follow the
  groups; every layer owns its FFN.
- `"ffn"` (shared-FFN): the FFN sub-blocks follow the groups; every layer owns
  its attention.
- `"none"` (not-shared, BERT-style with the factorized embedding): every layer
  owns both.

`sub_block_keys` turns a config into the names of the sub-blocks each
executed block runs; `AlbertEncoder` builds one layer per distinct name, so
equal names are the same weights. This module imports no TensorFlow.
"""

SHARE_MODES = ("all", "attention", "ffn", "none")


def group_of_layer(layer_index, num_hidden_layers, num_hidden_groups):
    """The group executed at `layer_index`: `int(l / L * G)` (official)."""
    return int(layer_index / num_hidden_layers * num_hidden_groups)


def sub_block_keys(config):
    """Which attention and FFN sub-block each executed block uses.

    Args:
        config: an `AlbertConfig` (its `num_hidden_layers`,
            `num_hidden_groups`, `inner_group_num` and `share`).

    Returns:
        A list with one `(attention_key, ffn_key)` per executed block, in order
        (`num_hidden_layers * inner_group_num` entries). Keys are layer names;
        equal keys mean the same weights. A shared sub-block is named for its
        group (`group_{g}_inner_group_{i}_...`), an unshared one for its layer
        (`layer_{l}_inner_group_{i}_...`).
    """
    keys = []
    for layer in range(config.num_hidden_layers):
        group = group_of_layer(layer, config.num_hidden_layers,
                               config.num_hidden_groups)
        for inner in range(config.inner_group_num):
            shared = f"group_{group}_inner_group_{inner}"
            own = f"layer_{layer}_inner_group_{inner}"
            attention = shared if config.share in ("all", "attention") else own
            ffn = shared if config.share in ("all", "ffn") else own
            keys.append((f"{attention}_attention", f"{ffn}_ffn"))
    return keys
