"""Recorded op types of the exports, and the TF Serving release check."""

import copy
import os
import shutil

import pytest

from export import graph_ops
from export import serving_compat

_GUIDE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "docs", "serving.md")


def _without(table, op, release="2.19"):
    """A copy of `table` whose `release` links the ops it links now but
    `op` (which it must link now)."""
    table = copy.deepcopy(table)
    linked = serving_compat.linked_ops(release, table)["tensorflow_text"]
    assert op in linked
    table["tensorflow_text_ops"]["lacking"] = sorted(linked - {op})
    table["releases"][release]["tensorflow_text"] = "lacking"
    return table


@pytest.fixture(scope="module")
def task_exports(exported_tasks):
    """A fine-tuned classifier and span extractor (random weights), exported
    as the fine-tuning programs export them: the session's exports."""
    return {name: exported_tasks.paths[name]
            for name in ("albert_classifier", "albert_squad")}


@pytest.fixture(scope="module")
def all_models(exported_albert, task_exports):
    paths = exported_albert.paths
    return {"albert": paths["serving"], "albert_encoder": paths["encoder"],
            "albert_preprocessor": paths["preprocessor"], **task_exports}


def test_every_export_records_its_ops_and_oldest_release(all_models):
    text_ops = set()
    for name, path in all_models.items():
        record = serving_compat.read_record(path)
        ops = graph_ops.op_types(path)
        assert ops and record["ops"] == ops, name
        assert set(record["tensorflow_text_ops"]) <= set(ops)
        text_ops.update(record["tensorflow_text_ops"])
        releases = serving_compat.serving_releases(ops)
        assert record["tf_serving_releases"] == releases, name
        assert record["oldest_tf_serving"] == releases[0], name
        assert record["checked_against"] is None
    assert {"SentencepieceOp", "SentencepieceTokenizeOp",
            "NormalizeUTF8"} <= text_ops
    # The encoder takes ids: no tokenizer in it.
    assert serving_compat.read_record(
        all_models["albert_encoder"])["tensorflow_text_ops"] == []


def test_recorded_ops_are_all_in_the_table(all_models):
    # Every op the installed TensorFlow and tensorflow-text register for our
    # exports is linked by some release: the table is not missing an owner.
    table = serving_compat.load_table()
    for name, path in all_models.items():
        ops = graph_ops.op_types(path)
        assert serving_compat.serving_releases(ops, table), name


def test_a_release_lacking_an_op_refuses_naming_it(exported_albert, tmp_path):
    path = str(tmp_path / "preprocessor")
    shutil.copytree(exported_albert.paths["preprocessor"], path)
    table = _without(serving_compat.load_table(), "SentencepieceTokenizeOp")
    with pytest.raises(serving_compat.UnsupportedOpsError) as error:
        serving_compat.check_export({"albert_preprocessor": path}, "2.19",
                                    table=table)
    message = str(error.value)
    assert "SentencepieceTokenizeOp" in message and "2.19" in message
    assert "albert_preprocessor" in message
    others = [v for v in serving_compat.known_versions() if v != "2.19"]
    assert "can serve this export: %s." % ", ".join(others) in message
    # Without the flag the same table records the other releases.
    records = serving_compat.check_export({"p": path}, table=table)
    assert records["p"]["tf_serving_releases"] == others
    assert serving_compat.read_record(path)["oldest_tf_serving"] == others[0]
    # And with the real table 2.19 serves it.
    serving_compat.check_export({"p": path}, "2.19.1")
    assert serving_compat.read_record(path)["checked_against"] == "2.19"


@pytest.mark.slow
def test_refused_export_leaves_no_version(exported_albert, tmp_path,
                                          monkeypatch):
    from export import pretrained_export

    table = _without(serving_compat.load_table(), "NormalizeUTF8")
    monkeypatch.setattr(serving_compat, "load_table", lambda path=None: table)
    with open(os.path.join(exported_albert.model_dir, "spm.model"), "rb") as f:
        spm_proto = f.read()
    export_dir = str(tmp_path / "serving")
    with pytest.raises(serving_compat.UnsupportedOpsError,
                       match="NormalizeUTF8"):
        pretrained_export.export_pretrainer(
            exported_albert.pretrainer, spm_proto, export_dir,
            max_seq_length=16, save_keras=False, tf_serving_version="2.19")
    leftovers = [os.path.join(d, f) for d, _, files in os.walk(export_dir)
                 for f in files]
    assert leftovers == []
    assert not [e for e in os.listdir(export_dir) if e.startswith(".staging")]


def test_unknown_version_is_refused_naming_the_known_ones():
    from export import export_saved_model
    from export.options import ExportOptions

    known = serving_compat.known_versions()
    assert known[0] == "2.12" and known[-1] == "2.20" and len(known) == 9
    options = ExportOptions(
        checkpoint="/does/not/exist", albert_config_file="/does/not/exist",
        spm_model_file="/does/not/exist", export_dir="/does/not/exist",
        tf_serving_version="2.11")
    # Refused before the (missing) checkpoint is read.
    with pytest.raises(serving_compat.UnknownServingVersionError) as error:
        export_saved_model.export(options)
    assert "'2.11'" in str(error.value)
    assert ", ".join(known) in str(error.value)
    for bad in ("2.19.x", "2", "latest", "2.19.1.0"):
        with pytest.raises(serving_compat.UnknownServingVersionError):
            serving_compat.release_name(bad)
    assert serving_compat.release_name("2.19.1") == "2.19"


def test_table_rows_name_their_sources():
    table = serving_compat.load_table()
    for version, info in table["releases"].items():
        assert info["tag"].startswith(version + ".")
        assert info["tag"] in info["patch_tags"]
        assert len(info["commit"]) == 40 and len(info["tensorflow_commit"]) == 40
        linked = serving_compat.linked_ops(version, table)
        assert len(linked["tensorflow"]) > 1000 and linked["tensorflow_text"]
        assert not linked["tensorflow"] & linked["tensorflow_text"]
    for key in ("releases", "tensorflow_text_ops", "tensorflow_ops"):
        assert table["sources"][key]


def test_readme_table_is_rendered_from_the_table_and_exports(all_models):
    text = serving_compat.markdown_table(all_models)
    for name in all_models:
        assert "`%s`" % name in text
    for version in serving_compat.known_versions():
        assert "| %s |" % serving_compat.load_table()[
            "releases"][version]["tag"] in text
    with open(_GUIDE, encoding="utf-8") as f:
        assert text in f.read(), (
            "docs/serving.md's TF Serving table is out of date; regenerate "
            "it with "
            "python -m export.serving_compat on a fresh export:\n" + text)


def test_program_prints_the_table_of_an_export_folder(exported_albert, capsys,
                                                      tmp_path):
    assert serving_compat.main([exported_albert.export_dir]) == 0
    models = serving_compat.exported_models(exported_albert.export_dir)
    assert list(models) == ["albert", "albert_encoder", "albert_preprocessor"]
    assert capsys.readouterr().out == serving_compat.markdown_table(models)
    with pytest.raises(FileNotFoundError):
        serving_compat.exported_models(str(tmp_path))


@pytest.mark.slow
def test_precision_table_is_rendered_from_the_exports(exported_albert,
                                                      reduced_precision_exports):
    models = {"float32": exported_albert.paths["serving"],
              "bfloat16": reduced_precision_exports["bfloat16"],
              "int8": reduced_precision_exports["int8"]}
    text = serving_compat.precision_table(models)
    lines = text.splitlines()
    assert lines[2].startswith("| float32 | none | >= ")
    assert lines[3].startswith("| bfloat16 | none | >= ")  # casts only
    assert "`BatchMatMulV3`" in lines[4]  # the int8 matmul
    assert lines[4].endswith("| `%s` |" % serving_compat.XLA_SERVER_FLAG)
    with open(_GUIDE, encoding="utf-8") as f:
        assert text in f.read(), (
            "docs/serving.md's table of the serving dtypes is out of date:\n"
            + text)
