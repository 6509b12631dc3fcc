"""Hostile cases of `python -m export.export_saved_model` and of the
exported SavedModels' signatures.

Every case asserts its outcome (a one-line error naming the thing at fault,
or a correct result) and that the files that existed before are unchanged.
The signature cases load the session's export (`exported_albert`) in a
fresh process, as a server or a user does.
"""

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.hostile import common

PROGRAM = "export.export_saved_model"


def _flags(exported, export_dir, *extra):
    model_dir = exported.model_dir
    return ("--checkpoint=" + model_dir,
            "--albert_config_file=" + model_dir + "/albert_config.json",
            "--spm_model_file=" + model_dir + "/spm.model",
            "--export_dir=" + str(export_dir), "--save_keras=false",
            "--max_seq_length=%d" % exported.max_seq_length, *extra)


def _versions(export_dir):
    """`{model folder: sorted entries}` under `export_dir` (what TF Serving
    watches: staging folders are hidden and not listed)."""
    return {name: sorted(os.listdir(os.path.join(export_dir, name)))
            for name in sorted(os.listdir(export_dir))
            if os.path.isdir(os.path.join(export_dir, name))
            and not name.startswith(".")}


# === Signatures: inputs checked by rank, dtype and shape ===

# Runs in a fresh process: each probe calls a signature of a loaded
# SavedModel with a wrong input and prints what happened, one JSON a line.
_PROBE = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    serving, encoder, preprocessor = sys.argv[1:4]
    models = {"serving": tf.saved_model.load(serving),
              "encoder": tf.saved_model.load(encoder),
              "preprocessor": tf.saved_model.load(preprocessor)}
    ids = lambda *shape, v=1: tf.fill(shape, v)
    probes = {
      "pairs_as_columns": ("serving", "serving_single",
                           dict(text=tf.constant([["a b", "c"], ["d", "e"]]))),
      "scalar_text": ("serving", "serving_default",
                      dict(text=tf.constant("a b"), text_b=tf.constant([""]))),
      "text_b_columns": ("serving", "sop",
                         dict(text=tf.constant(["a", "b"]),
                              text_b=tf.constant([["a"], ["b"]]))),
      "fill_mask_columns": ("serving", "fill_mask",
                            dict(text=tf.constant([["[MASK] a"]]))),
      "preprocessor_columns": ("preprocessor", "serving_default",
                               dict(text=tf.constant([["a"], ["b"]]))),
      "int_text": ("serving", "serving_single", dict(text=tf.constant([1]))),
      "ids_rank_3": ("encoder", "serving_default",
                     dict(input_word_ids=ids(1, 2, 3), input_mask=ids(1, 2, 3),
                          input_type_ids=ids(1, 2, 3, v=0))),
      "mask_shorter": ("encoder", "serving_default",
                       dict(input_word_ids=ids(2, 8), input_mask=ids(2, 7),
                            input_type_ids=ids(2, 8, v=0))),
      "too_long": ("encoder", "serving_default",
                   dict(input_word_ids=ids(1, 80), input_mask=ids(1, 80),
                        input_type_ids=ids(1, 80, v=0))),
      "id_out_of_vocab": ("encoder", "serving_default",
                          dict(input_word_ids=ids(1, 8, v=100000),
                               input_mask=ids(1, 8),
                               input_type_ids=ids(1, 8, v=0))),
      "good_text": ("serving", "serving_single",
                    dict(text=tf.constant(["a b", "c"]))),
      "ids_length_0": ("encoder", "serving_default",
                       dict(input_word_ids=ids(2, 0), input_mask=ids(2, 0),
                            input_type_ids=ids(2, 0, v=0))),
      "empty_batch": ("serving", "serving_default",
                      dict(text=tf.constant([], tf.string),
                           text_b=tf.constant([], tf.string))),
      "empty_batch_fill_mask": ("serving", "fill_mask",
                                dict(text=tf.constant([], tf.string))),
      "empty_texts": ("serving", "serving_single",
                      dict(text=tf.constant(["", "   ", "a\\x00b"]))),
    }
    for name, (model, signature, inputs) in probes.items():
        try:
            out = models[model].signatures[signature](**inputs)
            result = {"ok": {k: v.shape.as_list() for k, v in out.items()}}
        except Exception as error:  # what the caller sees
            result = {"error": str(error)}
        print(json.dumps({"probe": name, **result}), flush=True)
""")


@pytest.fixture(scope="module")
def signature_probes(exported_albert):
    """What each probe of `_PROBE` gave, in a fresh process."""
    paths = exported_albert.paths
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, paths["serving"], paths["encoder"],
         paths["preprocessor"]], env=common.environment(),
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return {line["probe"]: line for line in map(
        json.loads, [line for line in result.stdout.splitlines()
                     if line.startswith("{")])}


@pytest.mark.parametrize("probe, names", [
    ("pairs_as_columns", ["text", "[2,2]"]),
    ("scalar_text", ["text", "[]"]),
    ("text_b_columns", ["text_b", "[2,1]"]),
    ("fill_mask_columns", ["text", "[1,1]"]),
    ("preprocessor_columns", ["text", "[2,1]"]),
    ("ids_rank_3", ["input_", "[1,2,3]"]),
    ("mask_shorter", ["input_mask", "shape of input_word_ids"]),
    ("too_long", ["input_word_ids", "max_position_embeddings=64"]),
    # T=0 failed as "slice index 0 of dimension 1 out of bounds".
    ("ids_length_0", ["input_word_ids", "at least 1"]),
    ("id_out_of_vocab", ["input_word_ids", "the size of its table"]),
])
def test_signature_refuses_input_of_wrong_shape_naming_it(
        signature_probes, exported_albert, probe, names):
    """A `[B, 2]` text batch used to be read as 2B texts (and a scalar as
    one): every signature now refuses an input of the wrong rank or shape,
    naming it."""
    snapshot = common.Snapshot(exported_albert.export_dir)
    outcome = signature_probes[probe]
    assert "error" in outcome, f"{probe} was accepted: {outcome}"
    for name in names:
        assert name in outcome["error"], (name, outcome["error"][:600])
    snapshot.assert_unchanged()


def test_signature_refuses_numbers_for_text_and_serves_good_text(
        signature_probes):
    """An int tensor for `text` is refused by its dtype (TensorFlow names
    the input by position); good text still gives one row per text."""
    assert "string" in signature_probes["int_text"]["error"]
    ok = signature_probes["good_text"]["ok"]
    assert ok["pooled_output"][0] == 2 and ok["input_mask"][0] == 2


def test_keras_text_layer_refuses_pairs_as_columns(albert_spm_model):
    """`AlbertTextPreprocessor` flattened a `[B, 2]` batch into 2B texts;
    it takes `[B]` or `[B, 1]` and names anything else."""
    import tensorflow as tf

    from albert_tf.layers.text_preprocessor import AlbertTextPreprocessor

    layer = AlbertTextPreprocessor(albert_spm_model, seq_length=8)
    assert layer(tf.constant([["a b"], ["c"]]))["input_mask"].shape == (2, 8)
    for wrong in (tf.constant([["a", "b"]]), tf.constant("a"),
                  tf.constant([1, 2])):
        with pytest.raises(ValueError, match="text must be a .B. string"):
            layer(wrong)


# === The program: flags, outputs and inputs checked before any work ===

@pytest.mark.parametrize("flag", [
    "--model_name=../outside", "--model_name=a/b", "--model_name=/abs",
    "--model_name=", "--model_name=.", "--version=0"])
def test_model_name_or_version_leaving_the_export_folder_is_refused(
        tmp_path, flag):
    """`--model_name=../x` wrote the export next to `--export_dir`; a name
    that is not one folder name (or a version below 1) is one line, before
    TensorFlow is imported or anything written."""
    from export import export_saved_model
    from export.options import ExportOptions
    from foundation import flag_options as options_lib

    (tmp_path / "keep.txt").write_text("mine")
    snapshot = common.Snapshot(tmp_path)
    name, _, value = flag[2:].partition("=")
    options = ExportOptions(
        checkpoint=str(tmp_path), albert_config_file=str(tmp_path / "keep.txt"),
        spm_model_file=str(tmp_path / "keep.txt"),
        export_dir=str(tmp_path / "serving"))
    setattr(options, name, int(value) if name == "version" else value)
    with pytest.raises(ValueError, match="--" + name):
        export_saved_model.check_options(options)
    assert options_lib.USER_ERRORS  # the program prints it as one line
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]
    snapshot.assert_unchanged()


@pytest.mark.parametrize("case", ["export_dir_is_a_file", "read_only",
                                  "checkpoint_missing", "config_missing"])
def test_bad_output_or_missing_input_is_one_line_before_any_work(
        tmp_path, exported_albert, case):
    """A file where the export folder goes, a read-only folder, a missing
    checkpoint or config: one line naming the flag, nothing written."""
    from export import export_saved_model
    from export.options import ExportOptions

    model_dir = exported_albert.model_dir
    options = ExportOptions(
        checkpoint=model_dir,
        albert_config_file=model_dir + "/albert_config.json",
        spm_model_file=model_dir + "/spm.model",
        export_dir=str(tmp_path / "serving"))
    flag = "--export_dir"
    if case == "export_dir_is_a_file":
        (tmp_path / "serving").write_text("not a folder")
    elif case == "read_only":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        (tmp_path / "serving").mkdir()
        os.chmod(tmp_path / "serving", 0o555)
    elif case == "checkpoint_missing":
        options.checkpoint, flag = str(tmp_path / "nothing"), "--checkpoint"
    else:
        options.albert_config_file = str(tmp_path / "none.json")
        flag = "--albert_config_file"
    snapshot = common.Snapshot(tmp_path, model_dir)
    with pytest.raises(ValueError if "dir" in flag else OSError,
                       match=flag) as error:
        export_saved_model.check_options(options)
    assert "\n" not in str(error.value)
    assert not os.path.isdir(tmp_path / "serving") or not os.listdir(
        tmp_path / "serving")
    snapshot.assert_unchanged()


def test_second_export_into_a_locked_folder_fails_at_once(tmp_path,
                                                          exported_albert):
    """One writer per export folder: a second run fails at once, naming
    the folder and the holder's process; nothing in the folder changes."""
    from export import export_saved_model
    from export.options import ExportOptions
    from foundation import output_lock

    model_dir = exported_albert.model_dir
    export_dir = tmp_path / "serving"
    export_dir.mkdir()
    (export_dir / "README").write_text("the models of the team")
    options = ExportOptions(
        checkpoint=model_dir,
        albert_config_file=model_dir + "/albert_config.json",
        spm_model_file=model_dir + "/spm.model", export_dir=str(export_dir))
    snapshot = common.Snapshot(tmp_path, model_dir)
    with output_lock.OutputLock(export_dir, "export_saved_model",
                                flag="--export_dir"):
        with pytest.raises(output_lock.OutputLockedError,
                           match="--export_dir=.*serving is in use.*process %d"
                           % os.getpid()):
            export_saved_model.export(options)
    assert _versions(export_dir) == {}
    snapshot.assert_unchanged()


# === Kill and full disk (slow: whole exports in processes) ===

@pytest.mark.slow
def test_export_killed_midway_leaves_no_version_and_rerun_finishes(
        tmp_path, exported_albert):
    """SIGKILL once the staging folder appears: no numeric version folder
    (TF Serving loads any) exists; version 1 of an earlier export is whole;
    the rerun removes the staging folder and writes version 2."""
    export_dir = tmp_path / "serving"
    first = common.run_program(PROGRAM, *_flags(exported_albert, export_dir))
    assert first.returncode == 0, first.stderr[-2000:]
    snapshot = common.Snapshot(export_dir)
    process = common.start_program(PROGRAM,
                                   *_flags(exported_albert, export_dir))
    staging = lambda: [e for e in os.listdir(export_dir)  # noqa: E731
                       if e.startswith(".staging-")]
    saved = lambda: any(os.path.exists(os.path.join(  # noqa: E731
        export_dir, s, "albert", "saved_model.pb")) for s in staging())
    assert common.kill_when(process, saved)
    assert staging(), "the kill left no staging folder to test with"
    assert _versions(export_dir) == {
        "albert": ["1"], "albert_encoder": ["1"], "albert_preprocessor": ["1"]}
    snapshot.assert_unchanged()
    rerun = common.run_program(PROGRAM, *_flags(exported_albert, export_dir))
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert not staging()
    assert _versions(export_dir)["albert"] == ["1", "2"]
    snapshot.assert_unchanged()


def _file_size_limit(limit):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.slow
def test_export_on_full_disk_names_file_and_cause(tmp_path, exported_albert):
    """A file-size limit mid-export: one line naming the file and the
    cause; the earlier version and the export folder are as they were."""
    export_dir = tmp_path / "serving"
    first = common.run_program(PROGRAM, *_flags(exported_albert, export_dir))
    assert first.returncode == 0, first.stderr[-2000:]
    snapshot = common.Snapshot(export_dir, exported_albert.model_dir)
    result = common.run_program(PROGRAM, *_flags(exported_albert, export_dir),
                                preexec_fn=_file_size_limit(20000))
    common.assert_one_line_error(result, "could not write", str(export_dir),
                                 "File too large")
    assert sorted(os.listdir(export_dir)) == [
        "albert", "albert_encoder", "albert_preprocessor"]
    assert _versions(export_dir)["albert"] == ["1"]
    snapshot.assert_unchanged()


# === Cases found by a second hostile pass ===

def test_signature_serves_an_empty_batch_and_empty_texts(signature_probes):
    """A batch of 0 gives 0 rows; empty, blank and NUL-holding texts are
    text, one row each."""
    ok = signature_probes["empty_batch"]["ok"]
    assert ok["pooled_output"][0] == 0 and ok["sequence_output"][0] == 0
    assert signature_probes["empty_batch_fill_mask"]["ok"]["top_k_ids"][0] == 0
    assert signature_probes["empty_texts"]["ok"]["pooled_output"][0] == 3


# === Checks before commits, clean-up by record (issue #54) ===

def test_an_existing_tflite_is_refused_before_any_saved_model_is_written(
        tmp_path, exported_albert):
    """`--format=litert` over an existing `.tflite` was refused only after
    the SavedModels of that version were committed; now it is one line,
    before the checkpoint is read, and nothing changes."""
    export_dir = tmp_path / "serving"
    existing = export_dir / "albert_litert" / "1" / "encoder.tflite"
    existing.parent.mkdir(parents=True)
    existing.write_bytes(b"a model of another run")
    snapshot = common.Snapshot(export_dir)
    result = common.run_program(PROGRAM, *_flags(
        exported_albert, export_dir, "--format=litert", "--version=1"))
    common.assert_one_line_error(result, "Version 1", "albert_litert",
                                 "--version unset")
    assert sorted(os.listdir(export_dir)) == ["albert_litert"]
    snapshot.assert_unchanged()


@pytest.mark.slow
def test_kill_during_litert_conversion_leaves_no_version_and_no_user_file_is_removed(  # noqa: E501
        tmp_path, exported_albert):
    """SIGKILL once the SavedModels are staged (the `.tflite` conversion
    runs): no version folder of any model appears; the same command then
    writes version 1 whole, removing the killed run's staging folder and
    leaving the user's `.staging-*` file and folder alone. A version cut
    short afterwards (its `.tflite` gone) is named, with what to do."""
    export_dir = tmp_path / "serving"
    (export_dir / ".staging-mine").mkdir(parents=True)
    (export_dir / ".staging-mine" / "notes.txt").write_text("mine")
    (export_dir / ".staging-x").write_text("mine too")
    snapshot = common.Snapshot(export_dir)
    flags = _flags(exported_albert, export_dir, "--format=litert")
    process = common.start_program(PROGRAM, *flags)
    staging = lambda: [e for e in os.listdir(export_dir)  # noqa: E731
                       if e.startswith(".staging-1-")]
    converting = lambda: any(os.path.exists(os.path.join(  # noqa: E731
        export_dir, s, "albert_preprocessor", "assets.extra", "ops.json"))
        for s in staging())
    assert common.kill_when(process, converting)
    assert staging(), "the kill left no staging folder to test with"
    assert _versions(export_dir) == {}
    rerun = common.run_program(PROGRAM, *flags)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert not staging()
    assert _versions(export_dir) == {
        "albert": ["1"], "albert_encoder": ["1"], "albert_litert": ["1"],
        "albert_preprocessor": ["1"]}
    assert "litert_encoder: " in rerun.stdout
    record = json.loads((export_dir / "albert_litert" / "1" / "assets.extra"
                         / "litert.json").read_text())
    assert record["requested_quantization"] == "int8"
    assert record["agreement"][record["quantization"]]["failure"] is None
    snapshot.assert_unchanged()
    # A version left without its .tflite is named, with what to do.
    os.remove(export_dir / "albert_litert" / "1" / "encoder.tflite")
    again = common.run_program(PROGRAM, *flags, "--version=1")
    common.assert_one_line_error(
        again, "version 1 of albert was left incomplete by a killed export",
        "encoder.tflite", "--version=2", str(export_dir / "albert" / "1"))


# === python -m export.serving_compat on what an export folder holds ===

@pytest.fixture(scope="module")
def mixed_export_dir(tmp_path_factory, exported_albert):
    """A serving folder with a SavedModel and a LiteRT model beside it."""
    import shutil

    root = tmp_path_factory.mktemp("compat") / "serving"
    shutil.copytree(exported_albert.paths["preprocessor"],
                    root / "albert_preprocessor" / "1")
    (root / "albert_litert" / "1").mkdir(parents=True)
    (root / "albert_litert" / "1" / "encoder.tflite").write_bytes(b"TFL3")
    return root


def test_serving_compat_checks_what_it_can_and_names_what_it_skips(
        mixed_export_dir):
    """It raised a traceback on a folder holding LiteRT models and on one
    model's folder; now it checks every SavedModel it finds in a serving
    folder, a model's folder or a SavedModel folder, and says on stderr
    which folders it skips and why."""
    snapshot = common.Snapshot(mixed_export_dir)
    for path in (mixed_export_dir, mixed_export_dir / "albert_preprocessor",
                 mixed_export_dir / "albert_preprocessor" / "1"):
        from export import serving_compat

        models, skipped = serving_compat.find_models(path)
        assert models == {"albert_preprocessor": str(
            mixed_export_dir / "albert_preprocessor" / "1")}, path
        assert list(skipped) == ([str(mixed_export_dir / "albert_litert" / "1")]
                                 if path == mixed_export_dir else [])
    result = common.run_program("export.serving_compat", mixed_export_dir)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "`albert_preprocessor`" in result.stdout and "| 2.19" in \
        result.stdout
    assert "skipped %s: a LiteRT model" % (
        mixed_export_dir / "albert_litert" / "1") in result.stderr
    snapshot.assert_unchanged()


@pytest.mark.parametrize("case", [
    "litert_only", *[pytest.param(case, marks=pytest.mark.slow) for case in
                     ("a_file", "missing", "empty", "corrupt_saved_model")]])
def test_serving_compat_on_anything_else_is_one_line(tmp_path,
                                                     mixed_export_dir, case):
    path = tmp_path / "given"
    if case == "litert_only":
        path = mixed_export_dir / "albert_litert"
    elif case == "a_file":
        path.write_text("not a folder")
    elif case == "empty":
        path.mkdir()
    elif case == "corrupt_saved_model":
        (path / "1").mkdir(parents=True)
        (path / "1" / "saved_model.pb").write_bytes(b"\x00garbage\xff" * 9)
    snapshot = common.Snapshot(tmp_path, mixed_export_dir)
    result = common.run_program("export.serving_compat", path)
    common.assert_one_line_error(result, "serving_compat: error:")
    snapshot.assert_unchanged()
