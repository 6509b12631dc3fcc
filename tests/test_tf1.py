import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.convert import names
from albert_tf.convert import tf1
from albert_tf.convert import weight_set
from albert_tf.convert.pretrained import convert_checkpoint
from albert_tf.convert.pretrained import load_pretrained
from albert_tf.training import model_dir

_CONFIGS = {
    "groups_2_inner_2": dict(num_hidden_groups=2, inner_group_num=2),
    "groups_4_inner_3_no_projection": dict(
        num_hidden_groups=4, inner_group_num=3, embedding_size=32),
}


def _tf1_variable(name, value):
    """Creates `name` as the official code does: nested variable scopes."""
    *scopes, leaf = name.split("/")
    if not scopes:
        return tf.compat.v1.get_variable(leaf, initializer=value)
    with tf.compat.v1.variable_scope(scopes[0]):
        return _tf1_variable("/".join(scopes[1:] + [leaf]), value)


def _write_release(directory, config, tensors, prefix="", slots=True,
                   spm_model_file=None, with_config=True):
    """Writes a release as the official TF1 scripts did (graph, Saver)."""
    os.makedirs(directory, exist_ok=True)
    with tf.Graph().as_default():
        for name, value in tensors.items():
            _tf1_variable(prefix + name, value)
            if slots:
                _tf1_variable(prefix + name + "/adam_m", np.zeros_like(value))
                _tf1_variable(prefix + name + "/adam_v", np.zeros_like(value))
        if slots:
            tf.compat.v1.train.get_or_create_global_step()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.train.Saver().save(
                session, os.path.join(directory, "model.ckpt-best"),
                write_meta_graph=False)
    if with_config:
        values = tf1.official_config_dict(config)
        values["layers_to_keep"] = []
        with open(os.path.join(directory, "albert_config.json"), "w") as f:
            json.dump(values, f)
    if spm_model_file:
        tf.io.gfile.copy(spm_model_file, os.path.join(directory, "30k-clean.model"))


def test_loads_a_release_written_with_tf_compat_v1(
        tmp_path, random_pretrainer, assert_same_model, albert_spm_model):
    model = random_pretrainer(num_hidden_groups=2, inner_group_num=2)
    release = str(tmp_path / "albert_tiny")
    _write_release(release, model.config, weight_set.model_to_official(model),
                   spm_model_file=albert_spm_model)
    loaded = load_pretrained(release)
    assert_same_model(model, loaded)

    report = convert_checkpoint(release, str(tmp_path / "ours"), source="tf1")
    skipped = dict(report.skipped)
    assert skipped["global_step"] == "training step counter"
    assert skipped["bert/pooler/dense/kernel/adam_m"] == "optimizer slot"
    assert len(report.mapped) == len(model.weights) and not report.absent
    out = tmp_path / "ours"
    assert (out / "spm.model").read_bytes() == open(albert_spm_model, "rb").read()
    assert "global_step: training step counter" in (
        out / weight_set.REPORT_NAME).read_text()
    assert_same_model(model, load_pretrained(str(out)))


def test_loads_tf_hub_module_variables(tmp_path, random_pretrainer,
                                       assert_same_model):
    model = random_pretrainer(num_hidden_groups=2, inner_group_num=2)
    hub = str(tmp_path / "hub")
    _write_release(hub, model.config, weight_set.model_to_official(model),
                   prefix="module/", slots=False, with_config=False)
    with pytest.raises(FileNotFoundError, match="config_file"):
        load_pretrained(hub)
    config_file = str(tmp_path / "albert_config.json")
    model.config.to_json_file(config_file)
    assert_same_model(model, load_pretrained(hub, config_file=config_file))
    weights = tf1.read(hub, config_file)
    assert weights.report.mapped[0][0].startswith("module/bert/")


@pytest.mark.parametrize("overrides", _CONFIGS.values(), ids=_CONFIGS.keys())
def test_round_trip_through_the_official_format(
        tmp_path, random_pretrainer, assert_same_model, albert_spm_model,
        overrides):
    model = random_pretrainer(**overrides)
    ours = str(tmp_path / "ours")
    model_dir.save_model_dir(model, ours, spm_model_file=albert_spm_model)
    official = str(tmp_path / "official")
    convert_checkpoint(ours, official, source="albert_tf", target="tf1")
    assert sorted(os.listdir(official)) == [
        "30k-clean.model", "30k-clean.vocab", "albert_config.json",
        weight_set.MANIFEST_NAME, weight_set.REPORT_NAME,
        "model.ckpt-best.data-00000-of-00001",
        "model.ckpt-best.index"]

    # Readable by tf.train, with exactly the official names and shapes.
    reader = tf.train.load_checkpoint(os.path.join(official, "model.ckpt-best"))
    listed = {k: tuple(v) for k, v in reader.get_variable_to_shape_map().items()}
    assert listed == names.official_shapes(model.config)
    with open(os.path.join(official, "albert_config.json")) as f:
        assert json.load(f)["inner_group_num"] == overrides["inner_group_num"]

    back = str(tmp_path / "back")
    convert_checkpoint(official, back, target="albert_tf")
    assert_same_model(model, load_pretrained(back))


def _assert_nothing_written(parent, name):
    assert not os.path.exists(os.path.join(parent, name))
    assert not [p for p in os.listdir(parent) if ".partial-" in p]


def test_missing_unexpected_and_misshaped_tensors_stop_the_conversion(
        tmp_path, random_pretrainer):
    model = random_pretrainer(num_hidden_groups=2, inner_group_num=2)
    tensors = weight_set.model_to_official(model)
    key = "bert/encoder/transformer/group_1/inner_group_0/attention_1/self/key/kernel"

    missing = dict(tensors)
    del missing[key]
    _write_release(str(tmp_path / "missing"), model.config, missing, slots=False)
    with pytest.raises(weight_set.ConversionError,
                       match=f"missing.*{key} \\(expected shape \\[32, 32\\]\\)"):
        convert_checkpoint(str(tmp_path / "missing"), str(tmp_path / "out"))
    _assert_nothing_written(str(tmp_path), "out")

    extra = dict(tensors, **{"output_weights": np.zeros((3, 32), np.float32)})
    _write_release(str(tmp_path / "extra"), model.config, extra, slots=False)
    with pytest.raises(weight_set.ConversionError,
                       match=r"unexpected.*output_weights \[3, 32\]"):
        convert_checkpoint(str(tmp_path / "extra"), str(tmp_path / "out"))
    _assert_nothing_written(str(tmp_path), "out")

    wrong = dict(tensors, **{key: np.zeros((32, 16), np.float32)})
    _write_release(str(tmp_path / "wrong"), model.config, wrong, slots=False)
    with pytest.raises(weight_set.ConversionError,
                       match=r"key/kernel.*source has \[32, 16\].*expects \[32, 32\]"):
        convert_checkpoint(str(tmp_path / "wrong"), str(tmp_path / "out"))
    _assert_nothing_written(str(tmp_path), "out")


def test_a_release_without_heads_loads_with_fresh_heads(tmp_path, random_pretrainer):
    model = random_pretrainer()
    encoder_only = {k: v for k, v in weight_set.model_to_official(model).items()
                    if k.startswith("bert/")}
    _write_release(str(tmp_path / "r"), model.config, encoder_only, slots=False)
    weights = tf1.read(str(tmp_path / "r"))
    assert {n for n, _ in weights.report.absent} == {
        n for n in names.official_shapes(model.config) if n.startswith("cls/")}
    partial = dict(encoder_only)
    partial["cls/predictions/output_bias"] = np.zeros(48, np.float32)
    _write_release(str(tmp_path / "p"), model.config, partial, slots=False)
    with pytest.raises(weight_set.ConversionError, match="transform/dense/kernel"):
        tf1.read(str(tmp_path / "p"))


def test_refuses_what_the_official_format_cannot_express(tmp_path, random_pretrainer):
    ours = str(tmp_path / "ours")
    model_dir.save_model_dir(random_pretrainer(share="ffn"), ours)
    with pytest.raises(names.UnsupportedConfigError, match="share='ffn'"):
        convert_checkpoint(ours, str(tmp_path / "out"), target="tf1")
    _assert_nothing_written(str(tmp_path), "out")
    model_dir.save_model_dir(random_pretrainer(layer_norm_epsilon=1e-6),
                             str(tmp_path / "eps"))
    with pytest.raises(names.UnsupportedConfigError, match="1e-12"):
        convert_checkpoint(str(tmp_path / "eps"), str(tmp_path / "out"),
                           target="tf1")


def test_half_precision_release_is_read_as_float32(tmp_path, random_pretrainer):
    model = random_pretrainer()
    tensors = weight_set.model_to_official(model)
    half = {k: tf.constant(v, tf.bfloat16).numpy() for k, v in tensors.items()}
    _write_release(str(tmp_path / "r"), model.config, half, slots=False)
    weights = tf1.read(str(tmp_path / "r"))
    key = "bert/pooler/dense/kernel"
    assert weights.tensors[key].dtype == np.float32
    np.testing.assert_array_equal(weights.tensors[key],
                                  half[key].astype(np.float32))
    assert f"{key}: cast from bfloat16 to float32" in weights.report.notes
