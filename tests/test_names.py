import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.convert import names


def test_official_names_and_shapes_of_albert_base():
    shapes = names.official_shapes(AlbertConfig.from_preset("albert_base_v2"))
    assert shapes["bert/embeddings/word_embeddings"] == (30000, 128)
    assert shapes["bert/encoder/embedding_hidden_mapping_in/kernel"] == (128, 768)
    block = "bert/encoder/transformer/group_0/inner_group_0/"
    assert shapes[block + "attention_1/self/query/kernel"] == (768, 768)
    assert shapes[block + "attention_1/output/dense/kernel"] == (768, 768)
    assert shapes[block + "ffn_1/intermediate/dense/kernel"] == (768, 3072)
    assert shapes[block + "ffn_1/intermediate/output/dense/kernel"] == (3072, 768)
    assert shapes[block + "LayerNorm_1/gamma"] == (768,)
    assert shapes["cls/predictions/output_bias"] == (30000,)
    assert shapes["cls/seq_relationship/output_weights"] == (2, 768)
    # The reference parameter counts: encoder, MLM head, SOP head.
    def count(prefix):
        return sum(int(np.prod(s)) for n, s in shapes.items()
                   if n.startswith(prefix))
    assert count("bert/") == 11_683_584
    assert count("cls/predictions/") == 128_688
    assert count("cls/seq_relationship/") == 1_538


def test_every_model_variable_has_one_official_name():
    config = AlbertConfig.from_preset("tiny", num_hidden_groups=2,
                                      inner_group_num=3, num_hidden_layers=4)
    model = AlbertPretrainer(config)
    table = names.official_variables(config)
    assert sorted(p for _, _, p in table) == sorted(v.path for v in model.weights)
    by_path = {v.path: tuple(v.shape) for v in model.weights}
    assert all(by_path[path] == shape for _, shape, path in table)
    assert len({n for n, _, _ in table}) == len(table)
    assert "bert/encoder/transformer/group_1/inner_group_2/LayerNorm/beta" in {
        n for n, _, _ in table}


def test_no_projection_when_embedding_equals_hidden():
    shapes = names.official_shapes(
        AlbertConfig.from_preset("tiny", embedding_size=32))
    assert not any("embedding_hidden_mapping_in" in n for n in shapes)


@pytest.mark.parametrize("share", ["attention", "ffn", "none"])
def test_sharing_ablations_have_no_official_names(share):
    with pytest.raises(names.UnsupportedConfigError, match=f"share='{share}'"):
        names.official_variables(AlbertConfig.from_preset("tiny", share=share))


def test_tensor_rules_invert():
    value = np.arange(24, dtype=np.float32).reshape(4, 6)
    rule = names.TensorRule.transposed("a", "b", (4, 6))
    assert rule.external_shape == (6, 4) and rule.transform == "transpose"
    np.testing.assert_array_equal(rule.to_external(value), value.T)
    np.testing.assert_array_equal(rule.to_official(rule.to_external(value)), value)
    rule = names.TensorRule.reshaped("a", "b", (4, 6), (4, 2, 3))
    assert rule.to_external(value).shape == (4, 2, 3)
    np.testing.assert_array_equal(rule.to_official(rule.to_external(value)), value)
