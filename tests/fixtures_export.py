"""Exports made once per session and read by several test modules (a pytest
plugin that tests/conftest.py loads).

- `exported_albert`: tests/test_pretrained_export.py, test_graph_ops.py,
  test_keras_layer.py, test_rest_examples.py, test_serving_compat.py,
  test_serving_command.py and tests/hostile/test_export.py.
- `loaded_serving_model`: tests/test_pretrained_export.py and
  test_rest_examples.py.
- `reduced_precision_exports`: tests/test_pretrained_export.py,
  test_serving_compat.py and test_serving_command.py.
- `exported_tasks`: tests/test_finetuned_exports.py, test_serving_compat.py
  and test_serving_command.py.

These modules run on one xdist worker (the "exports" group of
`XDIST_GROUPS` in tests/speed_plugin.py), so each export is made once.
TensorFlow and the package are imported inside the fixtures: this module
loads before tests/speed_plugin.py sets XLA_FLAGS.
"""

import types

import numpy as np
import pytest

# --- A pretrained model's exports ---
# One tiny model, exported once per session as the program exports it.

EXPORT_SEQ_LENGTH = 32
EXPORT_TOP_K = 3


@pytest.fixture(scope="session")
def exported_albert(tmp_path_factory, spm_model_path):
    """A tiny pretrainer with random weights, saved and exported.

    Returns:
        A `types.SimpleNamespace` with `pretrainer` (the in-process Keras
        model), `sp_model`, `model_dir`, `export_dir`, `paths` (what the
        exporter returned), `max_seq_length` and `top_k`.
    """
    import sentencepiece as spm
    from absl import flags

    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import model_dir as model_dir_lib
    from export import export_saved_model
    from export import pretrained_export
    from export.options import ExportOptions
    from foundation import flag_options as options_lib

    sp_model = spm.SentencePieceProcessor(model_file=spm_model_path)
    config = AlbertConfig.from_preset(
        "tiny", vocab_size=sp_model.get_piece_size(), num_hidden_layers=2,
        max_position_embeddings=64)
    pretrainer = AlbertPretrainer(config)
    rng = np.random.default_rng(5)
    for v in pretrainer.weights:
        v.assign(rng.normal(scale=0.2, size=v.shape).astype("float32"))
    root = tmp_path_factory.mktemp("export")
    model_dir = str(root / "model")
    model_dir_lib.save_model_dir(pretrainer, model_dir, spm_model_file=spm_model_path)
    export_dir = str(root / "serving")
    argv = ["export_saved_model", "--checkpoint=" + model_dir,
            "--albert_config_file=" + model_dir + "/albert_config.json",
            "--spm_model_file=" + model_dir + "/spm.model",
            "--export_dir=" + export_dir,
            "--max_seq_length=%d" % EXPORT_SEQ_LENGTH,
            "--top_k=%d" % EXPORT_TOP_K]
    # The program's own flags, parsed as `main` parses them, into a private
    # registry (the global one belongs to whichever program runs).
    flag_values = flags.FlagValues()
    options_lib.define_flags(ExportOptions, flag_values,
                             module_name="export_saved_model")
    flag_values(argv)
    export_saved_model.export(
        options_lib.from_flags(ExportOptions, flag_values))

    names = pretrained_export.model_names("albert")
    paths = {key: export_dir + "/%s/1" % name for key, name in names.items()}
    paths["keras"] = paths["encoder"] + "/" + pretrained_export.KERAS_FILE_NAME
    return types.SimpleNamespace(
        pretrainer=pretrainer, sp_model=sp_model, model_dir=model_dir,
        export_dir=export_dir, paths=paths, max_seq_length=EXPORT_SEQ_LENGTH,
        top_k=EXPORT_TOP_K)


@pytest.fixture(scope="session")
def loaded_serving_model(exported_albert):
    """The text-in SavedModel, loaded in this process."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    return tf.saved_model.load(exported_albert.paths["serving"])


@pytest.fixture(scope="session")
def reduced_precision_exports(exported_albert, tmp_path_factory):
    """`exported_albert`'s checkpoint exported again by the program's
    `export` with `--serving_dtype=<dtype>`, on first use of
    `exports[dtype]`; each value is the text-in model's version folder."""
    from export import export_saved_model

    root = tmp_path_factory.mktemp("precision")
    model_dir = exported_albert.model_dir

    def export(serving_dtype):
        return export_saved_model.export(export_options(
            "--checkpoint=" + model_dir,
            "--export_dir=" + str(root / serving_dtype), "--save_keras=false",
            "--max_seq_length=%d" % exported_albert.max_seq_length,
            "--top_k=%d" % exported_albert.top_k,
            "--serving_dtype=" + serving_dtype))["serving"]

    class Exports(dict):
        def __missing__(self, serving_dtype):
            self[serving_dtype] = export(serving_dtype)
            return self[serving_dtype]

    return Exports()


# --- Task exports ---
# A classifier and a span extractor, exported once per session in both
# serving shapes.

TASK_SEQ_LENGTH = 48
TASK_QUERY_LENGTH = 12
TASK_ANSWER_LENGTH = 5


@pytest.fixture(scope="session")
def exported_tasks(tmp_path_factory):
    """A classifier (3 labels) and a span extractor (with a no-answer head),
    every weight random, on a tiny encoder; each exported as the fine-tuning
    programs export it, with `serving_shape="dynamic"` under the programs'
    model names; `fixed_path(name)` exports `"fixed"` under `<name>_fixed`.

    Returns:
        A `types.SimpleNamespace` with `classifier`, `span_extractor` (the
        Keras models), `spm_path`, `export_dir`, `paths` (model name -> the
        version folder), `fixed_path` and `max_seq_length`.
    """
    from albert_tf import AlbertConfig
    from albert_tf.models.encoder import AlbertEncoder
    from albert_tf.models.task_models import AlbertClassifier
    from albert_tf.models.task_models import AlbertSpanExtractor
    from export import finetuned_exports
    from tests import tasks_testdata

    def randomized(model, seed):
        rng = np.random.default_rng(seed)
        for v in model.weights:
            v.assign(rng.normal(scale=0.2, size=v.shape).astype("float32"))
        return model

    def encoder():
        return AlbertEncoder(AlbertConfig.from_preset(
            "tiny", vocab_size=600, num_hidden_layers=2,
            max_position_embeddings=64))

    spm_path = tasks_testdata.spm_model_path()
    classifier = randomized(AlbertClassifier(encoder(), num_classes=3), 1)
    span_extractor = randomized(
        AlbertSpanExtractor(encoder(), with_no_answer=True), 3)
    export_dir = str(tmp_path_factory.mktemp("task_serving"))

    def export(name, shape):
        if name.startswith("albert_classifier"):
            return finetuned_exports.export_classifier(
                classifier, spm_path, export_dir, labels=["a", "b", "c"],
                max_seq_length=TASK_SEQ_LENGTH, model_name=name,
                serving_shape=shape)
        return finetuned_exports.export_span_extractor(
            span_extractor, spm_path, export_dir,
            max_seq_length=TASK_SEQ_LENGTH,
            max_query_length=TASK_QUERY_LENGTH,
            max_answer_length=TASK_ANSWER_LENGTH, model_name=name,
            serving_shape=shape)

    # Exports are slow: the fixed-shape ones (only the slow
    # dynamic-equals-fixed tests use them) are made when first asked for.
    paths = {name: export(name, "dynamic")
             for name in ("albert_classifier", "albert_squad")}

    def fixed_path(name):
        """The version folder of `name` exported with the fixed shape."""
        if name + "_fixed" not in paths:
            paths[name + "_fixed"] = export(name + "_fixed", "fixed")
        return paths[name + "_fixed"]

    return types.SimpleNamespace(
        classifier=classifier, span_extractor=span_extractor,
        spm_path=spm_path, export_dir=export_dir, paths=paths,
        fixed_path=fixed_path, max_seq_length=TASK_SEQ_LENGTH)


def export_options(*flags):
    """`ExportOptions` parsed from `export_saved_model`'s flags, as the
    program parses them."""
    from absl import flags as absl_flags

    from export.options import ExportOptions
    from foundation import flag_options

    flag_values = absl_flags.FlagValues()
    flag_options.define_flags(ExportOptions, flag_values,
                              module_name="export_saved_model")
    flag_values(["export_saved_model", *flags])
    return flag_options.from_flags(ExportOptions, flag_values)
