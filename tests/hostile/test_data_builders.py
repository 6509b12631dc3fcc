"""Hostile cases of the data builders.

`python -m data_prep.create_pretraining_data` (the local builder and the Beam
path, `--runner=DirectRunner`) and `python -m data_prep.build_vocab`. Every
case asserts its outcome (a one-line error naming the thing at fault, or a
correct result) and that the files that existed before are unchanged. Library
cases call the programs' work in this process; the lock, full-disk and kill
cases run the programs.
"""

import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from data_prep import build_vocab
from data_prep import create_pretraining_data as cpd
from data_prep import instances
from data_prep import output
from data_prep import pipeline
from data_prep import reader
from data_prep import vocab
from foundation import flag_options as options_lib
from foundation import output_lock
from foundation import safe_io
from tests.conftest import corpus_text
from tests.hostile import common

BUILDER = "data_prep.create_pretraining_data"
VOCAB = "data_prep.build_vocab"
SMALL = instances.InstanceOptions(max_seq_length=64)
CHUNK = int(0.05 * (1 << 20))  # --chunk_mb=0.05
FLAGS = ["--max_seq_length=64", "--max_predictions_per_seq=10",
         "--dupe_factor=1", "--num_output_shards=3", "--chunk_mb=0.05"]


def _build(corpus, out, model, **kwargs):
    kwargs.setdefault("options", SMALL)
    kwargs.setdefault("dupe_factor", 1)
    kwargs.setdefault("num_output_shards", 3)
    kwargs.setdefault("chunk_bytes", CHUNK)
    return pipeline.create_pretraining_data(str(corpus), str(out), model,
                                            **kwargs)


def _one_line(error):
    message = str(error)
    assert "\n" not in message, message
    return message


def _visible(folder):
    """What a reader's glob of the folder sees (no hidden names)."""
    return sorted(os.path.basename(p) for p in glob.glob(str(folder) + "/*"))


def _bytes(paths):
    return [open(p, "rb").read() for p in sorted(paths)]


@pytest.fixture()
def earlier(tmp_path, corpus_dir, spm_model_path):
    """A folder holding an earlier run of `t.tfrecord` (3 shards + stats)."""
    folder = tmp_path / "data"
    _build(corpus_dir / "b.txt", folder / "t.tfrecord", spm_model_path)
    return folder


# === Unfinished files never match the readers' globs ===

def test_shards_being_written_are_hidden_from_the_readers_globs(tmp_path):
    """Shards being written were `<shard>.incomplete`: `train.tfrecord-*`
    matched them, and training read a killed build's half shards."""
    out = str(tmp_path / "train.tfrecord")
    shards = output.ShardSet(output.output_paths(out, 2))
    shards.write(b"x" * 100)
    shards.finish()
    for pattern in ("train.tfrecord*", "train.tfrecord-*", "*.tfrecord*", "*"):
        assert glob.glob(str(tmp_path / pattern)) == [], pattern
    assert all(safe_io.is_temporary(p) for p in shards.finished_paths)
    shards.abort()
    assert os.listdir(tmp_path) == []


_KILLED_SCATTERING = textwrap.dedent("""
    import os, sys
    from data_prep import pipeline, shuffle
    first = sys.argv[1]
    with pipeline.output_lock(first) as locked:
        folder = shuffle.make_temp_dir(first, locked.lock)
        os._exit(9)  # Killed mid-scatter: no cleanup.
""")


def test_a_killed_runs_leftovers_go_with_the_next_run_and_nothing_else(
        earlier, corpus_dir, spm_model_path):
    """Unfinished shards of both namings (told by their content) and the
    shuffle folder a killed run recorded in its lock are removed by the
    next run; look-alikes are kept: a folder of the shuffle's naming that
    no record lists, a link at an unfinished shard's name, other files."""
    leftovers = [".t.tfrecord-00001-of-00003.incomplete",  # This naming.
                 "t.tfrecord-00000-of-00002.incomplete"]   # The older one.
    for name in leftovers:
        shutil.copy(earlier / "t.tfrecord-00000-of-00003", earlier / name)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_SCATTERING,
         str(earlier / "t.tfrecord")], cwd=common.REPO,
        env=common.environment(), capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    assert len(_hidden(earlier, "t.tfrecord.shuffle-temp-*")) == 1
    (earlier / ".t.tfrecord.shuffle-temp-0123456789ab").mkdir()
    elsewhere = earlier.parent / "elsewhere.tfrecord"
    shutil.copy(earlier / "t.tfrecord-00000-of-00003", elsewhere)
    os.symlink(elsewhere, earlier / ".t.tfrecord-00002-of-00004.incomplete")
    keep = {"notes.txt": "mine", "t.tfrecord-notes": "mine too",
            "u.tfrecord-00000-of-00002.incomplete": "another output's"}
    for name, text in keep.items():
        (earlier / name).write_text(text)
    snapshot = common.Snapshot(elsewhere, *[earlier / name for name in keep])
    _build(corpus_dir / "b.txt", earlier / "t.tfrecord", spm_model_path)
    snapshot.assert_unchanged()
    assert sorted(os.listdir(earlier)) == sorted(list(keep) + [
        ".t.tfrecord-00002-of-00004.incomplete",
        ".t.tfrecord.shuffle-temp-0123456789ab", "stats.t.tfrecord.json"] + [
        "t.tfrecord-%05d-of-00003" % i for i in range(3)])


# === Side files belong to one output ===

def test_two_outputs_in_one_folder_keep_their_own_statistics(
        tmp_path, corpus_dir, spm_model_path):
    """`wiki.part_a` and `wiki.part_b` shared `wiki.stats.json`: one run's
    statistics overwrote the other's, and a rerun could remove them."""
    folder = tmp_path / "d"
    a = _build(corpus_dir / "a.txt", folder / "wiki.part_a", spm_model_path,
               num_output_shards=1)
    b = _build(corpus_dir / "b.txt", folder / "wiki.part_b", spm_model_path,
               num_output_shards=1)
    # The older shared name, holding part_b's statistics: part_a's reruns
    # must leave it.
    (folder / "wiki.stats.json").write_text(json.dumps(b))
    snapshot = common.Snapshot(folder / "wiki.part_b",
                               folder / "stats.wiki.part_b.json",
                               folder / "wiki.stats.json")
    again = _build(corpus_dir / "a.txt", folder / "wiki.part_a",
                   spm_model_path, num_output_shards=1)
    snapshot.assert_unchanged()
    assert again["instances"] == a["instances"] != b["instances"]
    for name, stats in (("part_a", a), ("part_b", b)):
        on_disk = json.loads((folder / f"stats.wiki.{name}.json").read_text())
        assert on_disk["output_files"] == stats["output_files"]


def test_another_outputs_live_shuffle_folder_is_left_alone(
        tmp_path, corpus_dir, spm_model_path):
    """Both outputs' shuffle folders were `wiki.shuffle-temp-<id>`: the end
    of part_a's run removed part_b's, live, as "left by a killed run"."""
    folder = tmp_path / "d"
    live = folder / ".wiki.part_b.shuffle-temp-0123456789ab"
    live.mkdir(parents=True)
    (live / "bucket-02-00000001").write_bytes(b"records of a live run")
    snapshot = common.Snapshot(live)
    _build(corpus_dir / "a.txt", folder / "wiki.part_a", spm_model_path)
    snapshot.assert_unchanged()


# === One writer per output ===

def test_a_second_build_into_the_same_output_fails_at_once_naming_the_pid(
        earlier, corpus_dir, spm_model_path):
    snapshot = common.Snapshot(earlier)
    with pipeline.output_lock(str(earlier / "t.tfrecord")):
        result = common.run_program(
            BUILDER, f"--input_file={corpus_dir / 'a.txt'}",
            f"--output_file={earlier / 't.tfrecord'}",
            f"--spm_model_file={spm_model_path}", *FLAGS, timeout=120)
    common.assert_one_line_error(result, "--output_file", "in use",
                                 f"process {os.getpid()}")
    snapshot.assert_unchanged()


def test_a_second_vocabulary_into_the_same_prefix_fails_at_once(
        tmp_path, corpus_dir):
    prefix = str(tmp_path / "v" / "m")
    vocab.train_vocab(str(corpus_dir / "a.txt"), prefix, vocab_size=300,
                      hard_vocab_limit=False, num_threads=1)
    snapshot = common.Snapshot(tmp_path)
    with vocab.output_lock(prefix):
        with pytest.raises(output_lock.OutputLockedError) as error:
            vocab.train_vocab(str(corpus_dir / "b.txt"), prefix,
                              vocab_size=300, num_threads=1)
    assert "--model_prefix" in _one_line(error.value)
    assert f"process {os.getpid()}" in str(error.value)
    snapshot.assert_unchanged()


# === Every value checked before any work ===

@pytest.mark.parametrize("options_cls,field,value", [
    (cpd.Options, "dupe_factor", 0),
    (cpd.Options, "max_seq_length", 4),
    (cpd.Options, "masked_lm_prob", 0.0),
    (cpd.Options, "masked_lm_prob", 1.5),
    (cpd.Options, "short_seq_prob", -0.1),
    (cpd.Options, "short_seq_prob", float("nan")),
    (cpd.Options, "ngram", 0),
    (cpd.Options, "num_output_shards", 0),
    (cpd.Options, "num_output_shards", 100_000),
    (cpd.Options, "max_predictions_per_seq", -1),
    (cpd.Options, "random_seed", -1),
    (cpd.Options, "chunk_mb", 0.0),
    (cpd.Options, "num_workers", 0),
    (build_vocab.Options, "vocab_size", 5),
    (build_vocab.Options, "character_coverage", 0.0),
    (build_vocab.Options, "num_threads", 0),
])
def test_numeric_flags_out_of_range_are_one_line_naming_the_flag(
        options_cls, field, value):
    options = options_cls(input_file="x", output_file="y", spm_model_file="z",
                          **{field: value}) if options_cls is cpd.Options \
        else options_cls(input_file="x", model_prefix="y", **{field: value})
    with pytest.raises(ValueError) as error:
        options_lib.check_values(options)
    assert _one_line(error.value).startswith(f"--{field} must be")


def test_no_masked_token_without_dynamic_masking_is_refused(
        tmp_path, corpus_dir, spm_model_path):
    """`--max_predictions_per_seq=0` built records with no masked token, for
    static masking: training on them learns nothing from MLM."""
    out = tmp_path / "o" / "t.tfrecord"
    result = common.run_program(
        BUILDER, f"--input_file={corpus_dir / 'a.txt'}",
        f"--output_file={out}", f"--spm_model_file={spm_model_path}",
        "--max_predictions_per_seq=0", timeout=120)
    common.assert_one_line_error(result, "--max_predictions_per_seq=0",
                                 "--dynamic_masking")
    assert not os.path.exists(out.parent)


def test_a_vocabulary_too_small_for_the_corpus_characters_is_one_line(
        tmp_path, corpus_dir):
    """SentencePiece raised a long internal error for this."""
    (tmp_path / "c.txt").write_text("".join(
        "%s word %d here.\n" % (chr(0x4E00 + i), i) for i in range(200)),
        encoding="utf-8")
    snapshot = common.Snapshot(tmp_path)
    with pytest.raises(ValueError) as error:
        vocab.train_vocab(str(tmp_path / "c.txt"), str(tmp_path / "v"),
                          vocab_size=60, num_threads=1)
    message = _one_line(error.value)
    assert "--vocab_size=60 is too small" in message
    assert "INTERNAL" not in message and "trainer_interface" not in message
    needed = int(message.split("need at least ")[1].split()[0])
    assert needed > 200
    snapshot.assert_unchanged()
    assert sorted(os.listdir(tmp_path)) == ["c.txt"]


# === Bad input, one line each ===

def test_a_non_utf8_input_file_is_named_with_its_line(tmp_path,
                                                      spm_model_path):
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("Première ligne.\nDeuxième phrase.\n\nÉté là.\n"
                       .encode("latin-1"))
    snapshot = common.Snapshot(tmp_path)
    with pytest.raises(reader.InputError) as error:
        _build(corpus, tmp_path / "o" / "t.tfrecord", spm_model_path)
    assert f"{corpus} is not UTF-8 text (line 1" in _one_line(error.value)
    with pytest.raises(reader.InputError, match="line 1"):
        vocab.train_vocab(str(corpus), str(tmp_path / "v" / "m"))
    snapshot.assert_unchanged()
    assert os.listdir(tmp_path) == ["latin1.txt"]


@pytest.mark.parametrize("content,expected,for_vocab", [
    (b"", "No instances could be built from 1 input files", "No text"),
    (b"\x00\x01\x02binary\x00" * 100, "(binary)", "(binary)"),
    (b"Only one line in the whole corpus.\n", "1 one-sentence documents",
     "--vocab_size=30000 is more pieces than this corpus can give"),
])
def test_an_unusable_corpus_is_one_line(tmp_path, spm_model_path, content,
                                        expected, for_vocab):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    snapshot = common.Snapshot(tmp_path)
    with pytest.raises(reader.InputError) as error:
        _build(corpus, tmp_path / "o" / "t.tfrecord", spm_model_path)
    assert expected in _one_line(error.value)
    with pytest.raises(ValueError) as error:
        vocab.train_vocab(str(corpus), str(tmp_path / "v" / "m"),
                          num_threads=1)
    assert for_vocab in _one_line(error.value)
    snapshot.assert_unchanged()
    assert not glob.glob(str(tmp_path / "o" / "*"))


def test_an_output_that_is_a_folder_or_an_input_is_refused_before_writing(
        earlier, corpus_dir, spm_model_path):
    snapshot = common.Snapshot(earlier)
    (earlier / "folder").mkdir()
    with pytest.raises(safe_io.OutputError) as error:
        _build(corpus_dir / "a.txt", earlier / "folder", spm_model_path,
               num_output_shards=1)
    assert "--output_file=" in _one_line(error.value)
    assert "is a folder" in str(error.value)
    with pytest.raises(safe_io.OutputError, match="names a folder"):
        vocab.train_vocab(str(corpus_dir / "a.txt"), str(earlier) + "/")
    text = earlier / "corpus.txt"
    shutil.copy(corpus_dir / "a.txt", text)
    with pytest.raises(ValueError, match="is also an input file"):
        _build(f"{corpus_dir / 'b.txt'},{text}", text, spm_model_path,
               num_output_shards=1)
    snapshot.assert_unchanged()
    assert os.listdir(earlier / "folder") == []


@pytest.fixture()
def read_only_folder(tmp_path):
    """A folder that cannot be written: a read-only tmpfs as root (whom
    permissions do not stop), a folder without write permission otherwise."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "corpus.txt").write_text("kept\n")
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m",
                              "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode:
        pytest.skip("cannot mount a read-only file system here")
    (folder / "corpus.txt").write_text("kept\n")
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def test_a_read_only_output_folder_is_refused_before_any_work(
        read_only_folder, corpus_dir, spm_model_path):
    snapshot = common.Snapshot(read_only_folder)
    with pytest.raises(safe_io.OutputError) as error:
        _build(corpus_dir / "a.txt", read_only_folder / "t.tfrecord",
               spm_model_path)
    assert "--output_file=" in _one_line(error.value)
    assert "cannot be written" in str(error.value)
    with pytest.raises(safe_io.OutputError, match="--model_prefix="):
        vocab.train_vocab(str(corpus_dir / "a.txt"),
                          str(read_only_folder / "m"))
    snapshot.assert_unchanged()


# === A full disk: one line, the earlier run whole ===

def _file_size_limit(limit):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return set_limit


def test_a_file_size_limit_during_the_shards_keeps_the_earlier_run(
        earlier, corpus_dir, spm_model_path):
    snapshot = common.Snapshot(earlier)
    result = common.run_program(
        BUILDER, f"--input_file={corpus_dir / 'a.txt'}",
        f"--output_file={earlier / 't.tfrecord'}",
        f"--spm_model_file={spm_model_path}", *FLAGS, "--noglobal_shuffle",
        preexec_fn=_file_size_limit(100_000), timeout=120)
    line = common.assert_one_line_error(result, "could not write",
                                        "file-size limit")
    assert str(earlier / "t.tfrecord-0000") in line
    snapshot.assert_unchanged()  # No unfinished file left either:
    assert sorted(os.listdir(earlier)) == sorted(
        os.path.basename(p) for p in snapshot.before)


def test_a_file_size_limit_while_writing_the_vocabulary_keeps_the_old_one(
        tmp_path, corpus_dir):
    prefix = tmp_path / "v" / "m"
    vocab.train_vocab(str(corpus_dir / "b.txt"), str(prefix), vocab_size=300,
                      hard_vocab_limit=False, num_threads=1)
    snapshot = common.Snapshot(tmp_path)
    result = common.run_program(
        VOCAB, f"--input_file={corpus_dir / 'a.txt'}",
        f"--model_prefix={prefix}", "--vocab_size=400",
        "--nohard_vocab_limit", "--num_threads=1",
        preexec_fn=_file_size_limit(2_000), timeout=120)
    common.assert_one_line_error(result, "could not write", str(prefix),
                                 "file-size limit")
    snapshot.assert_unchanged()
    assert sorted(os.listdir(prefix.parent)) == ["m.model", "m.vocab"]


# === Kills: outputs complete or absent, the rerun gives the same bytes ===

@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory):
    """A corpus that takes the builder seconds (time to kill it)."""
    path = tmp_path_factory.mktemp("big") / "big.txt"
    path.write_text(corpus_text(3000, seed=5), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, big_corpus, spm_model_path):
    """The uninterrupted build's shard bytes (and the earlier run's files,
    a build of other flags, to copy into each case's folder)."""
    root = tmp_path_factory.mktemp("reference")
    stats = _build(big_corpus, root / "ref" / "t.tfrecord", spm_model_path,
                   dupe_factor=2)
    _build(big_corpus, root / "old" / "t.tfrecord", spm_model_path,
           random_seed=7)
    return _bytes(stats["output_files"]), root / "old"


def _killed_then_rerun(tmp_path, big_corpus, spm_model_path, reference,
                       condition_of, extra=()):
    expected, old = reference
    folder = tmp_path / "data"
    shutil.copytree(old, folder)
    snapshot = common.Snapshot(folder)
    process = common.start_program(
        BUILDER, f"--input_file={big_corpus}",
        f"--output_file={folder / 't.tfrecord'}",
        f"--spm_model_file={spm_model_path}", *FLAGS, "--dupe_factor=2",
        *extra)
    assert common.kill_when(process, condition_of(folder), timeout=120), (
        "the build ended before the kill: " + process.stdout.read()[-2000:])
    # Nothing half-done under a final name: the earlier run is whole.
    snapshot.assert_unchanged()
    assert _visible(folder) == sorted(os.path.basename(p)
                                      for p in snapshot.before)
    stats = _build(big_corpus, folder / "t.tfrecord", spm_model_path,
                   dupe_factor=2)
    assert _bytes(stats["output_files"]) == expected
    assert sorted(os.listdir(folder)) == ["stats.t.tfrecord.json"] + [
        "t.tfrecord-%05d-of-00003" % i for i in range(3)]


def _hidden(folder, pattern):
    return glob.glob(os.path.join(str(folder), "." + pattern))


@pytest.mark.slow
def test_killed_while_reading_the_corpus(tmp_path, big_corpus,
                                         spm_model_path, reference):
    """With worker processes: a kill of the main process leaves them
    finishing their chunks, and they held the output's lock (a shared open
    file) until then; the rerun at once takes it over."""
    def reading(folder):  # The scatter pass has begun.
        return lambda: bool(_hidden(folder, "t.tfrecord.shuffle-temp-*"))
    _killed_then_rerun(tmp_path, big_corpus, spm_model_path, reference,
                       reading, extra=["--num_workers=2"])


@pytest.mark.slow
def test_killed_while_writing_the_shards(tmp_path, big_corpus,
                                         spm_model_path, reference):
    def writing(folder):
        return lambda: any(os.path.getsize(p) > 0 for p in _hidden(
            folder, "t.tfrecord-*.incomplete"))
    _killed_then_rerun(tmp_path, big_corpus, spm_model_path, reference,
                       writing)


_KILL_BETWEEN_RENAMES = textwrap.dedent("""
    import os, signal, sys
    from data_prep import instances, pipeline
    from foundation import filesystems
    real, renamed = filesystems.rename, []
    def rename(source, target, remote=None):
        real(source, target)
        renamed.append(target)
        if len(renamed) == 2:  # Two of three shards in place.
            os.kill(os.getpid(), signal.SIGKILL)
    filesystems.rename = rename
    corpus, out, model = sys.argv[1:]
    pipeline.create_pretraining_data(
        corpus, out, model, options=instances.InstanceOptions(
            max_seq_length=64), dupe_factor=2, num_output_shards=3,
        chunk_bytes=int(0.05 * (1 << 20)))
""")


@pytest.mark.slow
def test_killed_between_shard_renames_is_refused_by_readers_and_repaired(
        tmp_path, big_corpus, spm_model_path, reference):
    """A kill between the renames of a commit left, before, a silent mix of
    old and new shards of one -of-N set."""
    expected, old = reference
    folder = tmp_path / "data"
    shutil.copytree(old, folder)
    result = subprocess.run(
        [sys.executable, "-c", _KILL_BETWEEN_RENAMES, str(big_corpus),
         str(folder / "t.tfrecord"), spm_model_path], cwd=common.REPO,
        env=common.environment(), capture_output=True, text=True,
        timeout=300)
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    # No statistics file, and a set with a missing shard: refused.
    visible = _visible(folder)
    assert visible == ["t.tfrecord-00000-of-00003", "t.tfrecord-00001-of-00003"]
    with pytest.raises(ValueError, match="incomplete .missing 00002"):
        safe_io.check_shard_set(glob.glob(str(folder / "t.tfrecord*")))
    stats = _build(big_corpus, folder / "t.tfrecord", spm_model_path,
                   dupe_factor=2)
    assert _bytes(stats["output_files"]) == expected
    assert sorted(os.listdir(folder)) == ["stats.t.tfrecord.json"] + [
        "t.tfrecord-%05d-of-00003" % i for i in range(3)]


@pytest.mark.slow
def test_beam_direct_runner_killed_mid_pipeline(tmp_path, corpus_dir,
                                                spm_model_path):
    pytest.importorskip("apache_beam")
    corpus = corpus_dir / "a.txt"
    expected = _build(corpus, tmp_path / "ref" / "t.tfrecord", spm_model_path)
    folder = tmp_path / "data"
    _build(corpus_dir / "b.txt", folder / "t.tfrecord", spm_model_path)
    snapshot = common.Snapshot(folder)
    flags = [f"--input_file={corpus}", f"--output_file={folder / 't.tfrecord'}",
             f"--spm_model_file={spm_model_path}", "--max_seq_length=64",
             "--dupe_factor=1", "--num_output_shards=3", "--chunk_mb=0.05",
             "--runner=DirectRunner"]  # The flags of `_build`.
    process = common.start_program(BUILDER, *flags)

    def pieces():
        return any(os.listdir(d) for d in _hidden(
            folder, "t.tfrecord.beam-temp-*"))
    assert common.kill_when(process, pieces, timeout=240)
    snapshot.assert_unchanged()
    assert _visible(folder) == sorted(os.path.basename(p)
                                      for p in snapshot.before)
    result = common.run_program(BUILDER, *flags, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _bytes(glob.glob(str(folder / "t.tfrecord-*"))) == _bytes(
        expected["output_files"])
    assert sorted(os.listdir(folder)) == ["stats.t.tfrecord.json"] + [
        "t.tfrecord-%05d-of-00003" % i for i in range(3)]


@pytest.mark.slow
def test_beam_refuses_a_bad_output_before_the_pipeline_runs(
        earlier, corpus_dir, spm_model_path):
    pytest.importorskip("apache_beam")
    from data_prep import beam_pipeline

    snapshot = common.Snapshot(earlier)
    (earlier / "folder").mkdir()
    with pytest.raises(safe_io.OutputError, match="is a folder"):
        beam_pipeline.create_pretraining_data(
            str(corpus_dir / "a.txt"), str(earlier / "folder"),
            spm_model_path, options=SMALL, dupe_factor=1)
    with pipeline.output_lock(str(earlier / "t.tfrecord")):
        with pytest.raises(output_lock.OutputLockedError, match="in use"):
            beam_pipeline.create_pretraining_data(
                str(corpus_dir / "a.txt"), str(earlier / "t.tfrecord"),
                spm_model_path, options=SMALL, dupe_factor=1,
                num_output_shards=3)
    snapshot.assert_unchanged()


# === Second tester: paths, repeated inputs, huge values ===

def test_the_same_input_file_twice_or_through_a_link_is_refused(
        tmp_path, corpus_dir, spm_model_path):
    """`a.txt,a.txt` (or a link to it) silently duplicated its documents."""
    corpus = tmp_path / "a.txt"
    shutil.copy(corpus_dir / "a.txt", corpus)
    os.symlink(corpus, tmp_path / "link.txt")
    snapshot = common.Snapshot(tmp_path)
    for inputs in (f"{corpus},{corpus}", f"{corpus},{tmp_path / 'link.txt'}"):
        with pytest.raises(reader.InputError) as error:
            _build(inputs, tmp_path / "o" / "t.tfrecord", spm_model_path)
        assert "is given twice" in _one_line(error.value)
    snapshot.assert_unchanged()
    assert not os.path.exists(tmp_path / "o")


def test_an_output_file_with_a_trailing_slash_is_named_a_folder(
        tmp_path, corpus_dir, spm_model_path):
    """`--output_file=out/` made the folder and said a file was in the way."""
    for name in ("out/", "out/."):
        with pytest.raises(safe_io.OutputError) as error:
            _build(corpus_dir / "a.txt", str(tmp_path) + "/" + name,
                   spm_model_path)
        assert "names a folder" in _one_line(error.value)
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("options_cls,field,value", [
    (cpd.Options, "max_seq_length", 10**11),
    (cpd.Options, "ngram", 10**12),
    (cpd.Options, "max_predictions_per_seq", 10**11),
    (cpd.Options, "max_line_bytes", 10**20),
    (build_vocab.Options, "vocab_size", 2 * 10**9),
])
def test_huge_values_that_crashed_or_hung_are_one_line(options_cls, field,
                                                       value):
    """Tracebacks (MemoryError, OverflowError) or a hang before."""
    options = options_cls(input_file="x", output_file="y", spm_model_file="z",
                          **{field: value}) if options_cls is cpd.Options \
        else options_cls(input_file="x", model_prefix="y", **{field: value})
    with pytest.raises(ValueError) as error:
        options_lib.check_values(options)
    assert _one_line(error.value).startswith(f"--{field} must be")
