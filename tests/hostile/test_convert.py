"""Hostile cases of `python -m albert_tf.convert_checkpoint`.

Every case asserts its outcome (a one-line error naming the thing at fault,
or a correct result) and that the files that existed before are unchanged.
The library cases call `convert_checkpoint`, the program's work, in this
process; the kill and full-disk cases run the program.
"""

import os
import resource
import signal
import stat

import pytest

from tests.hostile import common

PROGRAM = "albert_tf.convert_checkpoint"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, albert_spm_model):
    """A tiny model directory of this project (the conversions' input)."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import model_dir as model_dir_lib

    config = AlbertConfig.from_preset("tiny", vocab_size=48,
                                      num_hidden_layers=2)
    path = str(tmp_path_factory.mktemp("convert_input") / "ours")
    model_dir_lib.save_model_dir(AlbertPretrainer(config), path,
                                 spm_model_file=albert_spm_model)
    return path


def _convert(input_path, output_dir, **kwargs):
    from albert_tf.convert.pretrained import convert_checkpoint

    kwargs.setdefault("target", "huggingface")
    return convert_checkpoint(input_path, str(output_dir), **kwargs)


def _entries(folder):
    return sorted(os.listdir(folder))


# === --overwrite never removes what a conversion did not write ===

def test_overwrite_into_the_folder_that_holds_the_input_is_refused(
        tmp_path, model_dir):
    """`--output_dir` = the input's parent with `--overwrite` renamed the
    whole folder, input included, away and deleted it."""
    parent = os.path.dirname(model_dir)
    snapshot = common.Snapshot(parent)
    with pytest.raises(ValueError, match="holds --input") as error:
        _convert(model_dir, parent, overwrite=True)
    assert "--output_dir" in str(error.value)
    with pytest.raises(ValueError, match="holds --input"):
        _convert(model_dir, model_dir, overwrite=True)
    snapshot.assert_unchanged()


def test_overwrite_of_a_folder_of_user_files_is_refused(tmp_path, model_dir):
    """A folder no conversion wrote (no manifest) is never replaced."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("three years")
    snapshot = common.Snapshot(out)
    with pytest.raises(ValueError, match="--overwrite.*thesis.tex"):
        _convert(model_dir, out, overwrite=True)
    assert _entries(out) == ["thesis.tex"]
    assert _entries(tmp_path) == ["out"]
    snapshot.assert_unchanged()


def test_overwrite_replaces_an_earlier_conversion_but_not_files_added_to_it(
        tmp_path, model_dir):
    """An earlier conversion is replaced whole by `--overwrite`; once the
    user has added a file to it, it is refused, naming that file."""
    from albert_tf.convert import weight_set

    out = tmp_path / "out"
    _convert(model_dir, out)
    (out / "notes.txt").write_text("mine")
    snapshot = common.Snapshot(out)
    with pytest.raises(ValueError, match="did not write: notes.txt"):
        _convert(model_dir, out, target="tf1", overwrite=True)
    snapshot.assert_unchanged()
    (out / "notes.txt").unlink()
    _convert(model_dir, out, target="tf1", overwrite=True)
    assert "albert_config.json" in _entries(out)
    assert "model.safetensors" not in _entries(out)
    assert weight_set.MANIFEST_NAME in _entries(out)
    assert _entries(tmp_path) == ["out"]  # no lock, partial or old folder


def test_output_that_is_a_file_is_one_line_before_any_work(tmp_path,
                                                           model_dir):
    out = tmp_path / "out"
    out.write_text("a file")
    snapshot = common.Snapshot(tmp_path)
    with pytest.raises(ValueError, match="--output_dir=.* is a file"):
        _convert(model_dir, out, overwrite=True)
    assert _entries(tmp_path) == ["out"]
    snapshot.assert_unchanged()


# === Outputs honour the umask ===

@pytest.mark.parametrize("umask, file_mode, dir_mode", [
    (0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_outputs_get_the_users_umask(tmp_path, model_dir, umask, file_mode,
                                     dir_mode):
    """`model.safetensors` was 0600 and the folder 0755, whatever the umask."""
    old = os.umask(umask)
    try:
        _convert(model_dir, tmp_path / "out")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == dir_mode
    for name in _entries(tmp_path / "out"):
        mode = stat.S_IMODE(os.stat(tmp_path / "out" / name).st_mode)
        assert mode == file_mode, (name, oct(mode))


# === One writer per output ===

def test_second_conversion_into_a_locked_output_fails_at_once(tmp_path,
                                                              model_dir):
    from albert_tf.convert import weight_set
    from foundation import output_lock

    out = tmp_path / "out"
    _convert(model_dir, out)
    snapshot = common.Snapshot(tmp_path)
    with output_lock.OutputLock(out, weight_set.PROGRAM,
                                flag="--output_dir", kind="file"):
        with pytest.raises(output_lock.OutputLockedError,
                           match="--output_dir=.*out is in use.*process %d"
                           % os.getpid()):
            _convert(model_dir, out, overwrite=True)
    snapshot.assert_unchanged()
    assert _entries(tmp_path) == ["out"]


# === Corrupt inputs are named ===

def _truncate(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


@pytest.mark.parametrize("damage", ["safetensors", "checkpoint_data",
                                    "checkpoint_index"])
def test_truncated_input_is_one_line_naming_it(tmp_path, model_dir, damage):
    """A truncated safetensors file or TF checkpoint: one line naming the
    input, nothing written."""
    import shutil

    if damage == "safetensors":
        source = tmp_path / "hf"
        _convert(model_dir, source)
        _truncate(source / "model.safetensors", 300)
        named = str(source / "model.safetensors")
    else:
        source = tmp_path / "ours"
        shutil.copytree(model_dir, source)
        suffix = ".data-00000-of-00001" if damage == "checkpoint_data" \
            else ".index"
        (victim,) = [p for p in source.iterdir() if p.name.endswith(suffix)]
        _truncate(victim, victim.stat().st_size // 2)
        named = str(source)
    snapshot = common.Snapshot(tmp_path)
    with pytest.raises(ValueError) as error:
        _convert(str(source), tmp_path / "out", target="tf1")
    assert named in str(error.value)
    assert "\n" not in str(error.value)
    assert not os.path.exists(tmp_path / "out")
    assert not [e for e in _entries(tmp_path) if e.startswith(".")]
    snapshot.assert_unchanged()


# === Kill and full disk (slow: conversions in processes) ===

@pytest.mark.slow
def test_conversion_killed_midway_keeps_the_previous_output_and_rerun_finishes(
        tmp_path, model_dir):
    """SIGKILL once the unfinished folder appears: the previous conversion
    is whole under its name; the rerun cleans up and replaces it."""
    out = tmp_path / "out"
    _convert(model_dir, out)
    snapshot = common.Snapshot(out)
    flags = ("--input=" + model_dir, "--output_dir=%s" % out,
             "--target=tf1", "--overwrite")
    process = common.start_program(PROGRAM, *flags)
    partial = lambda: [e for e in os.listdir(tmp_path)  # noqa: E731
                       if ".partial-" in e]
    assert common.kill_when(process, partial)
    assert "model.safetensors" in _entries(out)
    snapshot.assert_unchanged()
    rerun = common.run_program(PROGRAM, *flags)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "albert_config.json" in _entries(out)
    assert _entries(tmp_path) == ["out"]


@pytest.mark.slow
def test_conversion_on_full_disk_names_file_and_cause(tmp_path, model_dir):
    """A file-size limit mid-conversion: one line naming the file and the
    cause; the previous output is whole and nothing else is left."""
    out = tmp_path / "out"
    _convert(model_dir, out)
    snapshot = common.Snapshot(tmp_path, model_dir)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))

    result = common.run_program(
        PROGRAM, "--input=" + model_dir, "--output_dir=%s" % out,
        "--target=huggingface", "--overwrite", preexec_fn=limit)
    common.assert_one_line_error(result, "could not write", "model.safetensors",
                                 "file-size limit")
    assert _entries(tmp_path) == ["out"]
    snapshot.assert_unchanged()


# === Cases found by a second hostile pass ===

def test_folder_holding_two_model_formats_is_refused_naming_both(
        tmp_path, model_dir):
    """A model folder with Hugging Face files dropped in was read as Hugging
    Face (and failed on PyTorch): an ambiguous folder is now named."""
    import shutil

    from albert_tf.convert import pretrained

    both = tmp_path / "both"
    shutil.copytree(model_dir, both)
    (both / "config.json").write_text("{}")
    (both / "model.safetensors").write_bytes(b"")
    before = common.Snapshot(str(both))
    for call in (pretrained.detect_format, pretrained.load_pretrained):
        with pytest.raises(ValueError) as error:
            call(str(both))
        message = str(error.value)
        assert "\n" not in message and str(both) in message
        assert "huggingface" in message and "albert_tf" in message
    # Naming the format still converts it.
    _convert(str(both), tmp_path / "out", source="albert_tf")
    assert os.path.isfile(tmp_path / "out" / "model.safetensors")
    before.assert_unchanged()


# === Clean-up only of what the run's own record lists ===

def _user_folders(parent, base):
    """Hidden folders of the user's, named as a conversion's leftovers."""
    folders = []
    for role in ("old", "partial"):
        folder = parent / f".{base}.{role}-mine"
        folder.mkdir()
        (folder / "keep.txt").write_text(f"the user's {role} copy")
        folders.append(folder)
    return folders


def test_overwrite_leaves_user_folders_named_like_leftovers_alone(
        tmp_path, model_dir):
    """`--overwrite` removed the user's `.out.old-*` and `.out.partial-*`
    folders by their names alone."""
    out = tmp_path / "out"
    _convert(model_dir, out)
    folders = _user_folders(tmp_path, "out")
    snapshot = common.Snapshot(*folders)
    _convert(model_dir, out, target="tf1", overwrite=True)
    assert "albert_config.json" in _entries(out)
    assert _entries(tmp_path) == [".out.old-mine", ".out.partial-mine", "out"]
    snapshot.assert_unchanged()


def test_a_user_old_folder_is_not_moved_into_place(tmp_path, model_dir):
    """With no output yet, the user's `.out.old-mine` was renamed to `out`
    (as if a killed conversion had set it aside), then refused."""
    folders = _user_folders(tmp_path, "out")
    snapshot = common.Snapshot(*folders)
    _convert(model_dir, tmp_path / "out", target="tf1")
    assert "keep.txt" not in _entries(tmp_path / "out")
    assert _entries(tmp_path) == [".out.old-mine", ".out.partial-mine", "out"]
    snapshot.assert_unchanged()


# Runs the program as `python -m albert_tf.convert_checkpoint` does, killed
# (SIGKILL) right after the earlier output is set aside, before the new one
# is renamed into place: the one moment a kill leaves no output under its
# name.
_KILLED_BETWEEN_RENAMES = """
import os, signal, sys
rename = os.rename
def rename_then_die(source, target, *args, **kwargs):
    rename(source, target, *args, **kwargs)
    if ".old-" in os.path.basename(str(target)):
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename_then_die
from albert_tf import convert_checkpoint
sys.argv = ["convert_checkpoint"] + sys.argv[1:]
convert_checkpoint.main()
"""


@pytest.mark.slow
def test_kill_between_the_two_renames_is_recovered_from_the_record(
        tmp_path, model_dir):
    """Killed with the earlier output set aside: the next run puts it back
    whole (its record lists it), and the user's look-alike stays."""
    import subprocess
    import sys

    out = tmp_path / "out"
    _convert(model_dir, out)
    before = common.checksums(out)
    folders = _user_folders(tmp_path, "out")
    snapshot = common.Snapshot(*folders)
    flags = ["--input=" + model_dir, f"--output_dir={out}", "--target=tf1",
             "--overwrite"]
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN_RENAMES, *flags],
        cwd=common.REPO, env=common.environment(), capture_output=True,
        text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not out.exists()
    (set_aside,) = [e for e in _entries(tmp_path)
                    if e.startswith(".out.old-") and e != ".out.old-mine"]
    # Without --overwrite the rerun refuses the output, once it is back.
    refused = common.run_program(PROGRAM, *flags[:-1])
    common.assert_one_line_error(refused, "--output_dir", "not empty")
    renamed = {os.path.relpath(p, out): d for p, d in
               common.checksums(out).items()}
    assert renamed == {os.path.relpath(p, out): d
                       for p, d in before.items()}
    assert set_aside not in _entries(tmp_path)
    rerun = common.run_program(PROGRAM, *flags)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "albert_config.json" in _entries(out)
    assert _entries(tmp_path) == [".out.old-mine", ".out.partial-mine", "out"]
    snapshot.assert_unchanged()


# === The tokenizer files say what the vocabulary says ===

# Hard texts: case, accents, digits, punctuation, CJK, emoji, spacing.
_HARD = ["Paris and NASA met the EU in 1990.", "The Café is NAÏVE, ÜBER",
         "ΟΔΟΣ 東京 ﬁne  x\ty 😀", "O'Neil's e-mail: ``quoted''", "MiXeD CaSe",
         "résumé 3.14 $45.99 (50%) -- [x]", "a", ""]


@pytest.fixture(scope="module")
def cased_model_dir(tmp_path_factory):
    """A tiny model directory whose vocabulary kept the corpus's case."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import model_dir as model_dir_lib
    from data_prep import builtin_corpus
    from data_prep import vocab

    texts = [line for document in builtin_corpus.iter_documents(
        max_chars=60_000) for line in document]
    texts += ["Paris and NASA met the EU.", "The Mat, the Cat."] * 20
    root = tmp_path_factory.mktemp("cased_input")
    spm_file = root / "cased.model"
    spm_file.write_bytes(vocab.model_from_texts(texts, 600,
                                                do_lower_case=False))
    pieces = vocab.load_model(str(spm_file)).get_piece_size()
    config = AlbertConfig.from_preset("tiny", vocab_size=pieces,
                                      num_hidden_layers=1)
    path = str(root / "ours")
    model_dir_lib.save_model_dir(AlbertPretrainer(config), path,
                                 spm_model_file=str(spm_file))
    return path


def _same_ids_as_the_project(spm_file, do_lower_case, load):
    from albert_tf.tasks.tokenization import Tokenizer

    ours = Tokenizer(str(spm_file), do_lower_case)
    for text in _HARD:
        assert load(text) == [ours.cls_id] + ours.encode(text) + [
            ours.sep_id], text


def test_a_cased_vocabulary_gives_a_tokenizer_that_keeps_case(
        tmp_path, cased_model_dir):
    """`tokenizer.json` lowercased every text whatever the vocabulary:
    "Paris" lost its "▁Paris" piece."""
    import json

    tokenizers = pytest.importorskip("tokenizers")
    out = tmp_path / "hf"
    report = _convert(cased_model_dir, out)
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["do_lower_case"] is False
    assert any("keeps the case" in note for note in report.notes)
    fast = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    _same_ids_as_the_project(out / "spiece.model", False,
                             lambda text: fast.encode(text).ids)
    assert fast.encode("Paris").ids != fast.encode("paris").ids
    # The flag wins over what the vocabulary says.
    _convert(cased_model_dir, tmp_path / "lower", do_lower_case=True)
    fast = tokenizers.Tokenizer.from_file(
        str(tmp_path / "lower" / "tokenizer.json"))
    assert fast.encode("Paris").ids == fast.encode("paris").ids


@pytest.mark.slow
def test_transformers_reads_the_cased_conversion_as_the_project_does(
        tmp_path, cased_model_dir, model_dir):
    """The program's output, loaded by `transformers.AutoTokenizer`, gives
    the project's ids on hard texts: cased and lowercased vocabularies."""
    transformers = pytest.importorskip("transformers")
    for name, source, lower in (("cased", cased_model_dir, False),
                                ("lower", model_dir, True)):
        out = tmp_path / name
        result = common.run_program(PROGRAM, "--input=" + source,
                                    f"--output_dir={out}",
                                    "--target=huggingface")
        assert result.returncode == 0, result.stderr[-2000:]
        _same_ids_as_the_project(
            out / "spiece.model", lower, _input_ids(
                transformers.AutoTokenizer.from_pretrained(str(out))))


def _input_ids(tokenizer):
    return lambda text: tokenizer(text)["input_ids"]


# === A training run's folder: its vocabulary, or one line ===

def _run_folder(root, model_dir, settings, best=False):
    """A training run's folder as `run_pretraining` leaves it: its config,
    `ckpt-N` checkpoints (model, step) and `albert_run.json`; with `best`,
    a `best/` model folder inside too."""
    import json

    import tensorflow as tf

    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import model_dir as model_dir_lib

    run = root / "run"
    run.mkdir()
    config = AlbertConfig.from_json_file(
        os.path.join(model_dir, model_dir_lib.CONFIG_NAME))
    model = AlbertPretrainer(config)
    state = tf.train.Checkpoint(model=model, step=tf.Variable(4, tf.int64))
    tf.train.CheckpointManager(state, str(run), max_to_keep=2).save(4)
    config.to_json_file(str(run / model_dir_lib.CONFIG_NAME))
    (run / "albert_run.json").write_text(json.dumps(
        {"program": "run_pretraining", "settings": settings}))
    if best:
        model_dir_lib.save_model_dir(model, str(run / "best"))
    return run


def test_a_run_folder_without_a_vocabulary_is_refused_in_one_line(
        tmp_path, model_dir):
    """A training run's folder converted to Hugging Face wrote no
    tokenizer files and said nothing."""
    run = _run_folder(tmp_path, model_dir, {"--input_file": "/nowhere/*"},
                      best=True)
    snapshot = common.Snapshot(tmp_path)
    for source in (run, run / "best"):
        with pytest.raises(ValueError, match="pass --spm_model_file") as error:
            _convert(str(source), tmp_path / "hf")
        assert "albert_run.json names none" in str(error.value)
        assert "\n" not in str(error.value)
    assert _entries(tmp_path) == ["run"]
    snapshot.assert_unchanged()


def test_a_run_folder_converts_with_the_vocabulary_its_records_name(
        tmp_path, model_dir, albert_spm_model):
    """`--init_checkpoint` in the run's record names a model folder that
    comes with its vocabulary; `--spm_model_file` names one directly."""
    run = _run_folder(tmp_path, model_dir,
                      {"--init_checkpoint": model_dir}, best=True)
    for source, name in ((run, "hf"), (run / "best", "hf_best")):
        report = _convert(str(source), tmp_path / name)
        assert any("--init_checkpoint" in n for n in report.notes)
        assert {"spiece.model", "tokenizer.json", "tokenizer_config.json"} <= (
            set(_entries(tmp_path / name)))
    (run / "albert_run.json").write_text("{}")
    report = _convert(str(run), tmp_path / "hf_flag",
                      spm_model_file=albert_spm_model)
    assert any("--spm_model_file" in n for n in report.notes)
    assert "tokenizer.json" in _entries(tmp_path / "hf_flag")


def test_a_vocabulary_larger_than_the_model_is_refused(tmp_path, model_dir,
                                                       cased_model_dir):
    """A vocabulary with ids the model cannot embed is not the model's."""
    big = os.path.join(cased_model_dir, "spm.model")
    snapshot = common.Snapshot(tmp_path)
    with pytest.raises(ValueError, match="pieces and the model 48 "
                       "embeddings") as error:
        _convert(model_dir, tmp_path / "hf", spm_model_file=big)
    assert "--spm_model_file" in str(error.value)
    assert _entries(tmp_path) == []
    snapshot.assert_unchanged()


@pytest.mark.slow
def test_a_real_run_folder_refuses_then_converts(tmp_path,
                                                 short_pretraining_run,
                                                 albert_spm_model):
    """The program on `run_pretraining`'s own output: one line without a
    vocabulary, a whole Hugging Face folder with `--spm_model_file`."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(short_pretraining_run.out, run)
    snapshot = common.Snapshot(run)
    refused = common.run_program(PROGRAM, f"--input={run}",
                                 f"--output_dir={tmp_path / 'hf'}",
                                 "--target=huggingface")
    common.assert_one_line_error(refused, "--spm_model_file", str(run))
    assert _entries(tmp_path) == ["run"]
    done = common.run_program(PROGRAM, f"--input={run}",
                              f"--output_dir={tmp_path / 'hf'}",
                              "--target=huggingface",
                              f"--spm_model_file={albert_spm_model}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert {"spiece.model", "tokenizer.json", "model.safetensors"} <= set(
        _entries(tmp_path / "hf"))
    snapshot.assert_unchanged()


@pytest.mark.parametrize("bad", ["folder", "not_a_model", "empty"])
def test_a_bad_spm_model_file_is_one_line_naming_it(tmp_path, model_dir,
                                                    bad):
    """A folder, a text file or an empty file as `--spm_model_file`."""
    path = tmp_path / bad
    if bad == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"" if bad == "empty" else b"not a model\n")
    snapshot = common.Snapshot(tmp_path)
    with pytest.raises(ValueError if bad != "folder" else OSError) as error:
        _convert(model_dir, tmp_path / "hf", spm_model_file=str(path))
    assert str(path) in str(error.value) and "\n" not in str(error.value)
    assert _entries(tmp_path) == [bad]
    snapshot.assert_unchanged()
