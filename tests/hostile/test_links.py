"""Hostile cases: links planted in a shared output folder.

In a folder others can write, a link may be planted under any name a
program creates: its lock, its temporaries, its side files. Each case runs
the program as the README does and checks that no file elsewhere changed
(the link's target keeps its bytes), and that the program either refuses in
one line naming the link, or writes a correct result without touching it.
An output the user names by a link is resolved once and written at its
target (the log says so).
"""

import os

import pytest

from tests.hostile import common

BUILDER = "data_prep.create_pretraining_data"
VOCAB = "data_prep.build_vocab"
PRETRAIN = "albert_tf.run_pretraining"
FLAGS = ["--max_seq_length=64", "--max_predictions_per_seq=10",
         "--dupe_factor=1", "--chunk_mb=0.05"]


@pytest.fixture()
def precious(tmp_path):
    """A file of the user's elsewhere, and its bytes."""
    path = tmp_path / "elsewhere" / "precious.tfrecord"
    path.parent.mkdir()
    path.write_bytes(b"the user's own data\n" * 100)
    return path


def _builder(corpus_dir, out, spm_model_path, *extra):
    return common.run_program(
        BUILDER, f"--input_file={corpus_dir / 'a.txt'}",
        f"--output_file={out}", f"--spm_model_file={spm_model_path}",
        *FLAGS, *extra, timeout=300)


@pytest.mark.parametrize("planted", [".train.tfrecord.lock",
                                     ".train.tfrecord.incomplete",
                                     ".stats.train.tfrecord.json.incomplete"])
def test_a_link_planted_where_the_builder_writes_is_never_followed(
        tmp_path, precious, corpus_dir, spm_model_path, planted):
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(precious, data / planted)
    before = common.Snapshot(precious.parent)
    result = _builder(corpus_dir, data / "train.tfrecord", spm_model_path)
    before.assert_unchanged()
    assert os.path.islink(data / planted)
    if result.returncode == 0:
        # Written beside the link, never through it.
        assert not os.path.islink(data / "train.tfrecord")
        assert os.path.getsize(data / "train.tfrecord") > 0
    else:
        common.assert_one_line_error(result, planted, "link")
        assert not os.path.exists(data / "train.tfrecord")


def test_a_link_planted_at_a_shard_name_is_refused_before_any_work(
        tmp_path, precious, corpus_dir, spm_model_path):
    data = tmp_path / "data"
    data.mkdir()
    shard = "train.tfrecord-00001-of-00002"
    os.symlink(precious, data / shard)
    before = common.Snapshot(precious.parent)
    result = _builder(corpus_dir, data / "train.tfrecord", spm_model_path,
                      "--num_output_shards=2")
    common.assert_one_line_error(result, shard, "link")
    before.assert_unchanged()
    assert os.path.islink(data / shard)
    assert sorted(os.listdir(data)) == [shard]


def test_an_output_named_by_a_link_is_written_at_its_target(
        tmp_path, corpus_dir, spm_model_path):
    target = tmp_path / "big_disk" / "train.tfrecord"
    target.parent.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(target, data / "train.tfrecord")
    result = _builder(corpus_dir, data / "train.tfrecord", spm_model_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert os.path.islink(data / "train.tfrecord")
    assert os.path.getsize(target) > 0
    assert os.path.exists(target.parent / "stats.train.tfrecord.json")
    assert f"is a symbolic link: writing {target}" in result.stderr


def test_a_link_planted_at_the_vocabularys_temporaries_is_refused(
        tmp_path, precious, corpus_dir):
    out = tmp_path / "vocab"
    out.mkdir()
    planted = ".spm.incomplete.model"  # The fixed name of earlier versions.
    os.symlink(precious, out / planted)
    before = common.Snapshot(precious.parent)
    result = common.run_program(
        VOCAB, f"--input_file={corpus_dir / 'a.txt'}",
        f"--model_prefix={out / 'spm'}", "--vocab_size=300",
        "--nohard_vocab_limit", timeout=300)
    before.assert_unchanged()
    assert os.path.islink(out / planted)
    # SentencePiece writes in a fresh private folder: the link is unused.
    assert result.returncode == 0, result.stderr[-3000:]
    assert os.path.getsize(out / "spm.model") > 0
    assert sorted(os.listdir(out)) == [planted, "spm.model", "spm.vocab"]


def test_a_link_planted_at_a_training_runs_lock_is_refused(
        tmp_path, precious):
    out = tmp_path / "run"
    out.mkdir()
    os.symlink(precious, out / ".albert.lock")
    before = common.Snapshot(precious.parent)
    result = common.run_program(
        PRETRAIN, f"--input_file={precious}", f"--output_dir={out}",
        "--preset=tiny", "--num_train_steps=1", timeout=300)
    common.assert_one_line_error(result, ".albert.lock", "link")
    before.assert_unchanged()
    assert sorted(os.listdir(out)) == [".albert.lock"]
