"""The main job (`python -m albert_apps.quickstart`) against a hostile user.

Each case runs the program as a user would, or its library entry, and
checks the outcome (one line naming the flag or file at fault, or a
correct result) and that nothing that existed before changed. The default
cases all fail before TensorFlow loads (the flags, the corpus and the
output folder are checked first), so each costs a fraction of a second; the
kill-and-resume case runs the real job, shortened, and is slow.
"""

import gzip
import json
import os
import random
import subprocess
import sys

import pytest

from foundation import output_lock
from foundation import safe_io
from tests.hostile import common

PROGRAM = "albert_apps.quickstart"
_WORDS = (["river", "stone", "market", "window", "garden", "engine", "paper",
           "signal", "orbit", "forest", "metal", "cloud", "music", "number"] +
          ["word%d" % i for i in range(120)])


def _write_corpus(path, documents=40, sentences=6, seed=0):
    """A small corpus of `documents` documents of `sentences` sentences."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(documents):
            for _ in range(sentences):
                words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 12))]
                f.write(" ".join(words).capitalize() + ".\n")
            f.write("\n")
    return str(path)


@pytest.fixture
def corpus(tmp_path):
    return _write_corpus(tmp_path / "corpus.txt")


def _refused(tmp_path, *flags, names=()):
    """Runs the job with `flags` into a new output folder; checks the one
    line names each of `names`, that nothing under `tmp_path` changed and
    that the output folder was not made."""
    out = tmp_path / "out"
    snapshot = common.Snapshot(tmp_path)
    # A check that let the job start would run for minutes: a short limit.
    result = common.run_program(PROGRAM, f"--output_dir={out}", *flags,
                                timeout=60)
    line = common.assert_one_line_error(result, *names)
    snapshot.assert_unchanged()
    assert not out.exists(), "the job wrote into its output before failing"
    return line


# === Flags ===

def test_mistyped_flag_is_named_and_nothing_runs(tmp_path, corpus):
    out = tmp_path / "out"
    snapshot = common.Snapshot(tmp_path)
    result = common.run_program(PROGRAM, f"--output_dir={out}",
                                f"--input_flie={corpus}", timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = common.error_lines(result.stderr)
    assert any("input_flie" in line and "input_file" in line
               for line in lines), lines
    snapshot.assert_unchanged()
    assert not out.exists()


@pytest.mark.parametrize("flag, value", [
    ("--num_train_steps", "-5"), ("--train_seconds", "-1"),
    ("--vocab_size", "0"), ("--max_seq_length", "2"),
    ("--train_batch_size", "0"), ("--dupe_factor", "0"),
    ("--train_seconds", "nan"), ("--max_corpus_chars", "-1")])
def test_out_of_range_value_is_one_line_naming_the_flag(tmp_path, corpus,
                                                        flag, value):
    _refused(tmp_path, f"--input_file={corpus}", f"{flag}={value}",
             names=(flag, "must be"))


def test_library_refuses_bad_arguments_before_any_work(tmp_path, corpus):
    from albert_apps.quickstart import inputs

    out = str(tmp_path / "out")
    for bad, name in ((dict(learning_rate=-1.0), "learning_rate"),
                      (dict(finetune_steps=0), "finetune_steps"),
                      (dict(vocab_size=0), "--vocab_size")):
        with pytest.raises(ValueError, match=name):
            with inputs.claim_output(out, input_file=corpus, **bad):
                pass
    assert not os.path.exists(out)


# === The corpus ===

def test_empty_corpus_is_refused(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n  \n", encoding="utf-8")
    _refused(tmp_path, f"--input_file={tmp_path / 'empty.txt'}",
             names=("--input_file", "empty.txt", "is empty"))


def test_single_line_corpus_is_refused(tmp_path):
    (tmp_path / "one.txt").write_text("A single line of text, no more.\n",
                                      encoding="utf-8")
    _refused(tmp_path, f"--input_file={tmp_path / 'one.txt'}",
             names=("--input_file", "single line", "at least 15 documents"))


def test_gzip_corpus_is_refused_saying_to_decompress(tmp_path, corpus):
    packed = tmp_path / "corpus.txt.gz"
    with open(corpus, "rb") as f:
        packed.write_bytes(gzip.compress(f.read()))
    _refused(tmp_path, f"--input_file={packed}",
             names=("--input_file", "gzip", "gunzip"))


def test_image_passed_as_corpus_is_refused(tmp_path):
    image = tmp_path / "picture.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    _refused(tmp_path, f"--input_file={image}",
             names=("--input_file", "picture.png", "not text", "PNG"))


def test_binary_corpus_with_nul_bytes_is_refused(tmp_path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"some text\n\0\0\0\1\2" * 100)
    _refused(tmp_path, f"--input_file={blob}",
             names=("--input_file", "not text"))


def test_latin1_corpus_is_refused_naming_the_line(tmp_path, corpus):
    text = open(corpus, encoding="utf-8").read().splitlines(keepends=True)
    text[20] = "Un caf\u00e9 cr\u00e8me.\n"
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("".join(text).encode("latin-1"))
    _refused(tmp_path, f"--input_file={latin}",
             names=("--input_file", "line 21", "not UTF-8", "0xe9"))


def test_too_few_documents_says_what_the_job_needs(tmp_path):
    small = _write_corpus(tmp_path / "small.txt", documents=8)
    line = _refused(tmp_path, f"--input_file={small}",
                    names=("--input_file", "too small", "8 documents",
                           "at least 15 documents"))
    assert "held-out" in line and "downstream" in line


def test_corpus_cut_too_short_by_the_character_cap_names_the_cap(tmp_path):
    # 60 documents of about 1,600 characters: 10,000 hold 6 of them.
    big = _write_corpus(tmp_path / "big.txt", documents=60, sentences=20)
    _refused(tmp_path, f"--input_file={big}", "--max_corpus_chars=10000",
             names=("too small", "60 documents", "--max_corpus_chars=10000"))


def test_vocabulary_too_small_for_the_characters_is_refused(tmp_path):
    # 300 CJK characters, each frequent: more than 100 pieces hold.
    alphabet = [chr(c) for c in range(0x4e00, 0x4e00 + 300)]
    rng = random.Random(1)
    path = tmp_path / "many_scripts.txt"
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(40):
            for _ in range(6):
                f.write(" ".join("".join(rng.choice(alphabet)
                                         for _ in range(6))
                                 for _ in range(10)) + ".\n")
            f.write("\n")
    _refused(tmp_path, f"--input_file={path}", "--vocab_size=100",
             names=("--vocab_size=100", "too small", "raise --vocab_size"))


def test_missing_corpus_and_folder_as_corpus_are_refused(tmp_path):
    _refused(tmp_path, f"--input_file={tmp_path / 'nope.txt'}",
             names=("--input_file", "nope.txt", "does not exist"))
    (tmp_path / "texts").mkdir()
    _refused(tmp_path, f"--input_file={tmp_path / 'texts'}",
             names=("--input_file", "is a folder"))


# === The output folder ===

def test_output_dir_that_is_a_file_is_refused(tmp_path, corpus):
    target = tmp_path / "results.txt"
    target.write_text("my results\n", encoding="utf-8")
    snapshot = common.Snapshot(tmp_path)
    for out in (target, target / "sub"):
        result = common.run_program(PROGRAM, f"--output_dir={out}",
                                    f"--input_file={corpus}", timeout=120)
        common.assert_one_line_error(result, "--output_dir", "is a file")
    snapshot.assert_unchanged()


def test_second_job_into_a_held_folder_fails_at_once_naming_the_pid(
        tmp_path, corpus):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    with output_lock.OutputLock(str(out), "quickstart", flag="--output_dir"):
        snapshot = common.Snapshot(tmp_path)
        result = common.run_program(PROGRAM, f"--output_dir={out}",
                                    f"--input_file={corpus}", timeout=120)
        common.assert_one_line_error(result, "--output_dir", "in use",
                                     f"process {os.getpid()}")
        snapshot.assert_unchanged()
    assert sorted(os.listdir(out)) == ["notes.txt"]


def _claim(out, corpus, **settings):
    """Records a run of `corpus` in `out` the way the job does first."""
    from albert_apps.quickstart import inputs

    with inputs.claim_output(str(out), input_file=corpus, **settings):
        pass


def test_rerun_with_another_corpus_is_refused_before_any_change(tmp_path,
                                                                corpus):
    out = tmp_path / "out"
    _claim(out, corpus)
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    other = _write_corpus(tmp_path / "other.txt", seed=7)
    snapshot = common.Snapshot(tmp_path)
    result = common.run_program(PROGRAM, f"--output_dir={out}",
                                f"--input_file={other}", timeout=120)
    common.assert_one_line_error(result, "--output_dir", "--input_file",
                                 "other.txt", "another --output_dir")
    snapshot.assert_unchanged()
    assert sorted(os.listdir(out)) == ["albert_run.json", "notes.txt"]


def test_rerun_with_the_same_corpus_file_edited_is_refused(tmp_path, corpus):
    out = tmp_path / "out"
    _claim(out, corpus)
    with open(corpus, "a", encoding="utf-8") as f:
        f.write("One more document appended.\nWith two sentences.\n\n")
    snapshot = common.Snapshot(tmp_path)
    result = common.run_program(PROGRAM, f"--output_dir={out}",
                                f"--input_file={corpus}", timeout=120)
    common.assert_one_line_error(result, "--input_file", "sha256",
                                 "another --output_dir")
    snapshot.assert_unchanged()


def test_rerun_with_another_vocab_size_is_refused(tmp_path, corpus):
    out = tmp_path / "out"
    _claim(out, corpus, vocab_size=300)
    snapshot = common.Snapshot(tmp_path)
    result = common.run_program(PROGRAM, f"--output_dir={out}",
                                f"--input_file={corpus}", "--vocab_size=400",
                                timeout=120)
    common.assert_one_line_error(result, "--vocab_size=300 there",
                                 "400 now")
    snapshot.assert_unchanged()


def test_folder_of_an_earlier_version_with_other_data_is_refused(tmp_path,
                                                                 corpus):
    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    (out / "data" / "corpus.json").write_text(json.dumps({"settings": {
        "input_file": None, "max_corpus_chars": 3_000_000}}))
    snapshot = common.Snapshot(tmp_path)
    result = common.run_program(PROGRAM, f"--output_dir={out}",
                                f"--input_file={corpus}", timeout=120)
    common.assert_one_line_error(result, "--output_dir", "--input_file",
                                 "earlier run")
    snapshot.assert_unchanged()
    assert not (out / "albert_run.json").exists()


def test_corpus_inside_the_jobs_own_data_folder_is_refused(tmp_path, corpus):
    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    inside = out / "data" / "train.txt"
    inside.write_bytes(open(corpus, "rb").read())
    snapshot = common.Snapshot(tmp_path)
    result = common.run_program(PROGRAM, f"--output_dir={out}",
                                f"--input_file={inside}", timeout=120)
    common.assert_one_line_error(result, "--input_file", "the job writes",
                                 "copy it elsewhere")
    snapshot.assert_unchanged()


# === Kill and resume (the real job, shortened) ===

_RUN = """
import sys
from albert_apps import quickstart
quickstart.run(sys.argv[1], input_file=sys.argv[2], max_corpus_chars=60_000,
               vocab_size=200, max_seq_length=32, num_train_steps=8,
               save_checkpoints_steps=4, train_batch_size=16, dupe_factor=1,
               max_eval_steps=1, finetune_seeds=(0,), finetune_steps=2)
"""


def _start(out, corpus):
    return subprocess.Popen([sys.executable, "-c", _RUN, str(out), corpus],
                            cwd=common.REPO, env=common.environment(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _exists(*paths):
    return lambda: any(os.path.exists(p) for p in paths)


def _unfinished(folder):
    return [os.path.join(d, n) for d, _, names in os.walk(folder)
            for n in names if safe_io.is_temporary(n) or n.endswith(".tmp")]


@pytest.mark.slow
def test_job_killed_in_data_training_and_export_resumes_and_finishes(
        tmp_path, corpus):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    snapshot = common.Snapshot(tmp_path)
    # 1. In the data stages (the corpus written, the records not yet).
    job = _start(out, corpus)
    assert common.kill_when(job, _exists(out / "data" / "corpus.json"))
    # 2. In training, once a checkpoint is saved.
    job = _start(out, corpus)
    assert common.kill_when(job, _exists(out / "pretrain" / "ckpt-4.index"))
    # 3. In the export.
    job = _start(out, corpus)
    assert common.kill_when(job, _exists(out / "export"))
    assert not (out / "report.json").exists()
    # Then a rerun takes the dead job's lock over, resumes and finishes.
    job = _start(out, corpus)
    _, stderr = job.communicate(timeout=600)
    assert job.returncode == 0, stderr[-3000:]
    snapshot.assert_unchanged()  # notes.txt, and the corpus.
    report = json.load(open(out / "report.json", encoding="utf-8"))
    assert report["stages"]["corpus"]["skipped"]
    assert report["pretrain"]["steps"] == 8
    assert report["pretrain"]["resumed_from_step"] >= 4
    best = int(report["pretrain"]["best_eval"]["global_step"])
    assert report["export"]["checkpoint_step"] == best
    for path in report["export"]["paths"].values():
        assert os.path.exists(path), path
    assert report["finetune"]["encoder_version"] == report["export"]["version"]
    assert not _unfinished(out), _unfinished(out)
    assert not (out / output_lock.LOCK_NAME).exists()
