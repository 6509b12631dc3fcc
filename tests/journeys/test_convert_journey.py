"""Journey 3: converting a model trained here to the official TF1 and Hugging
Face layouts and back, with the `albert_tf.convert_checkpoint` commands of
docs/converting.md (read from it): the two "and back" commands as written,
and the official-release, TF-Hub and Hugging Face commands on the outputs.

The model directory (`models/mine`) holds a tiny pretrainer with two hidden
groups of two inner blocks (so a group or block mapped to the wrong place
shows) and random weights everywhere, LayerNorms included (so a tensor
mapped to the wrong place changes the outputs), written by
`save_model_dir` with the journeys' vocabulary. Every directory the commands
write must load back (`albert_tf.load_pretrained`) to a model with the same
outputs on one batch, hold the tokenizer unchanged and use the target's own
names and layouts.
"""

import json

import numpy as np
import pytest

from tests.journeys import common
from tests.journeys import documented

pytestmark = pytest.mark.slow

MINE = "models/mine"
TF1, HF = "exports/mine_tf1", "exports/mine_hf"
FROM_TF1, FROM_HF = "models/mine_from_tf1", "models/mine_from_hf"
# The TF1 output's variables under TF-Hub's `module/` prefix, no config.
HUB, FROM_HUB = "models/mine_hub", "models/mine_from_hub"
# 5 embedding, 2 projection, 16 per inner block (2 groups x 2), 2 pooler and
# 7 head tensors.
TENSORS = 5 + 2 + 16 * 4 + 2 + 7
OUTPUTS = ("sequence_output", "pooled_output", "mlm_logits", "sop_logits")
SENTENCES = ["The module returns a new list of the items.",
             "Raise an error if the file is missing."]


@pytest.fixture(scope="module")
def mine():
    """`models/mine` in the workspace; returns `(root, model, batch)`."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import model_dir

    root = common.prepared_data().root
    config = AlbertConfig.from_preset(
        "tiny", vocab_size=common.VOCAB_SIZE, num_hidden_groups=2,
        inner_group_num=2)
    model = AlbertPretrainer(config)
    rng = np.random.default_rng(0)
    for v in model.weights:
        if v.dtype == "float32":
            v.assign(rng.normal(scale=0.3, size=v.shape).astype("float32"))
    model_dir.save_model_dir(model, str(root / MINE),
                             spm_model_file=str(root / common.SPM_MODEL))
    return root, model, _batch(root)


def _batch(root, length=16, predictions=3):
    """The SENTENCES as the encoder reads them: `[CLS] pieces [SEP]`, padded."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(root / common.SPM_MODEL))
    ids = np.zeros((len(SENTENCES), length), np.int32)
    for row, text in enumerate(SENTENCES):
        pieces = [2] + sp.encode(text.lower())[:length - 2] + [3]
        ids[row, :len(pieces)] = pieces
    return {"input_word_ids": ids,
            "input_mask": (ids > 0).astype(np.int32),
            "input_type_ids": np.zeros_like(ids),
            "masked_lm_positions": np.tile(
                np.arange(1, predictions + 1, dtype=np.int32),
                (len(SENTENCES), 1))}


def _convert(root, command):
    done = common.run(command, root)
    assert f"{TENSORS} tensors mapped, 0 skipped, 0 absent" in done.log
    return done


def _write_hub_module(root):
    """`HUB`: the TF1 output's tensors renamed as a TF-Hub module's."""
    import tensorflow as tf

    from albert_tf.convert import tf1

    reader = tf.train.load_checkpoint(str(root / TF1 / "model.ckpt-best"))
    tensors = {"module/" + name: reader.get_tensor(name)
               for name in reader.get_variable_to_shape_map()}
    (root / HUB).mkdir(parents=True)
    tf1.write_checkpoint(tensors, str(root / HUB / "model.ckpt"))


@pytest.fixture(scope="module")
def converted(mine):
    """The guide's commands ("And back, from a model trained here", which
    read `models/mine`), then its commands for an official release, a TF-Hub
    module and a Hugging Face directory on those outputs."""
    root, model, batch = mine
    _convert(root, documented.command(
        "--output_dir=exports/mine_tf1 --target=tf1"))
    _convert(root, documented.command(
        "--output_dir=exports/mine_hf --target=huggingface"))
    _convert(root, documented.command(
        "--source=tf1 --input=albert_base --output_dir",
        set={"input": TF1, "output_dir": FROM_TF1}))
    _convert(root, documented.command(
        "--source=huggingface --input=albert-base-v2",
        set={"input": HF, "output_dir": FROM_HF}))
    _write_hub_module(root)
    _convert(root, documented.command(
        "--source=tf1 --input=albert_base_hub",
        set={"input": HUB, "config_file": f"{TF1}/albert_config.json",
             "output_dir": FROM_HUB}))
    return root, model, batch


def _assert_same_outputs(expected_model, path, batch):
    from albert_tf import load_pretrained

    loaded = load_pretrained(str(path))
    assert loaded.config == expected_model.config
    expected, actual = expected_model(batch), loaded(batch)
    for key in OUTPUTS:
        np.testing.assert_allclose(np.asarray(actual[key]),
                                   np.asarray(expected[key]),
                                   rtol=1e-6, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("folder", [TF1, HF, FROM_TF1, FROM_HF, FROM_HUB])
def test_every_output_loads_back_with_the_same_outputs(converted, folder):
    root, model, batch = converted
    _assert_same_outputs(model, root / folder, batch)
    assert (root / folder / "conversion_report.txt").exists()


def test_outputs_carry_the_tokenizer_unchanged(converted):
    root = converted[0]
    vocab = (root / common.SPM_MODEL).read_bytes()
    for path in (f"{TF1}/30k-clean.model", f"{HF}/spiece.model",
                 f"{FROM_TF1}/spm.model", f"{FROM_HF}/spm.model"):
        assert (root / path).read_bytes() == vocab, path


def test_tf1_output_uses_the_official_names_and_layouts(converted):
    import tensorflow as tf

    root = converted[0]
    config = json.loads((root / TF1 / "albert_config.json").read_text())
    assert config["num_hidden_groups"] == 2 and config["inner_group_num"] == 2
    assert config["hidden_act"] == "gelu"
    reader = tf.train.load_checkpoint(str(root / TF1 / "model.ckpt-best"))
    shapes = reader.get_variable_to_shape_map()
    block = "bert/encoder/transformer/group_1/inner_group_1/"
    expected = {
        "bert/embeddings/word_embeddings": [1000, 16],
        "bert/encoder/embedding_hidden_mapping_in/kernel": [16, 32],
        block + "attention_1/self/query/kernel": [32, 32],
        block + "attention_1/output/dense/kernel": [32, 32],
        block + "LayerNorm/gamma": [32],
        block + "ffn_1/intermediate/dense/kernel": [32, 64],
        block + "ffn_1/intermediate/output/dense/kernel": [64, 32],
        block + "LayerNorm_1/gamma": [32],
        "bert/pooler/dense/kernel": [32, 32],
        "cls/predictions/transform/dense/kernel": [32, 16],
        "cls/predictions/output_bias": [1000],
        "cls/seq_relationship/output_weights": [2, 32],
    }
    for name, shape in expected.items():
        assert shapes.get(name) == shape, name
    # Each group's and inner block's weights land under its own official
    # index (a consistent swap would still round-trip).
    model = converted[1]
    ours = {v.path: v.numpy() for v in model.weights}
    for group in range(2):
        for inner in range(2):
            np.testing.assert_array_equal(
                reader.get_tensor(
                    f"bert/encoder/transformer/group_{group}/inner_group_"
                    f"{inner}/attention_1/self/query/kernel"),
                ours[f"group_{group}_inner_group_{inner}_attention/query/"
                     "kernel"])


def test_huggingface_output_uses_its_names_and_layouts(converted):
    import tensorflow as tf

    from albert_tf.convert import safetensors_io

    root = converted[0]
    config = json.loads((root / HF / "config.json").read_text())
    assert config["model_type"] == "albert"
    assert config["architectures"] == ["AlbertForPreTraining"]
    # The official tanh GELU is "gelu_new" in Hugging Face's names.
    assert config["hidden_act"] == "gelu_new"
    tensors = safetensors_io.load_file(str(root / HF / "model.safetensors"))
    reader = tf.train.load_checkpoint(str(root / TF1 / "model.ckpt-best"))
    # Hugging Face's Linear weights are [out, in]: the TF1 kernels transposed.
    layer = "albert.encoder.albert_layer_groups.1.albert_layers.1."
    block = "bert/encoder/transformer/group_1/inner_group_1/"
    pairs = {
        "albert.embeddings.word_embeddings.weight":
            ("bert/embeddings/word_embeddings", False),
        "albert.encoder.embedding_hidden_mapping_in.weight":
            ("bert/encoder/embedding_hidden_mapping_in/kernel", True),
        layer + "attention.query.weight":
            (block + "attention_1/self/query/kernel", True),
        layer + "attention.LayerNorm.weight":
            (block + "LayerNorm/gamma", False),
        layer + "ffn.weight": (block + "ffn_1/intermediate/dense/kernel", True),
        layer + "ffn_output.weight":
            (block + "ffn_1/intermediate/output/dense/kernel", True),
        layer + "full_layer_layer_norm.weight":
            (block + "LayerNorm_1/gamma", False),
        "albert.pooler.weight": ("bert/pooler/dense/kernel", True),
        "predictions.dense.weight":
            ("cls/predictions/transform/dense/kernel", True),
        "predictions.bias": ("cls/predictions/output_bias", False),
        "sop_classifier.classifier.weight":
            ("cls/seq_relationship/output_weights", False),
    }
    for name, (tf1_name, transposed) in pairs.items():
        value = reader.get_tensor(tf1_name)
        np.testing.assert_array_equal(
            tensors[name], value.T if transposed else value, err_msg=name)
    assert tensors[layer + "ffn.weight"].shape == (64, 32)


@pytest.mark.parametrize("folder, source", [
    (MINE, "albert_tf model directory"),
    (TF1, "TF1"),
    (HF, "Hugging Face directory"),
])
def test_source_is_detected_when_left_out(converted, folder, source):
    root, model, batch = converted
    output_dir = f"models/detected_{folder.replace('/', '_')}"
    _convert(root, "python -m albert_tf.convert_checkpoint "
             f"--input={folder} --output_dir={output_dir}")
    report = (root / output_dir / "conversion_report.txt").read_text()
    assert report.splitlines()[0].startswith("Source: " + source), report[:200]
    _assert_same_outputs(model, root / output_dir, batch)
