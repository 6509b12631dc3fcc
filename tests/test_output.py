"""Tests for data_prep.output: names, the input check, earlier outputs."""

import json
import os

import pytest

from data_prep import output
from data_prep import tfrecord


def test_output_paths_and_statistics_name():
    assert output.output_paths("d/t.tfrecord", 2) == [
        "d/t.tfrecord-00000-of-00002", "d/t.tfrecord-00001-of-00002"]
    assert output.output_paths(" a , b ", 2) == ["a", "b"]
    with pytest.raises(ValueError, match="lists 2 files"):
        output.output_paths("a,b", 3)
    assert output.stats_path("data/train.tfrecord") == (
        "data/stats.train.tfrecord.json")
    assert output.stats_path("a/x.tfrecord,a/y.tfrecord") == (
        "a/stats.x.tfrecord.json")
    assert output.stats_path("train") == "stats.train.json"
    assert output.stats_path("gs://b/d/e.tfrecord") == (
        "gs://b/d/stats.e.tfrecord.json")
    # Two outputs in one folder never share one.
    assert output.stats_path("d/wiki.part_a") != output.stats_path(
        "d/wiki.part_b")


def _shard(path, records=1):
    path.write_bytes(b"".join(tfrecord.frame_records([b"r"] * records)))


def test_earlier_outputs_are_only_the_builders_files(tmp_path):
    out = tmp_path / "t.tfrecord"
    for i in range(3):
        _shard(tmp_path / ("t.tfrecord-%05d-of-00003" % i))
    (tmp_path / "t.tfrecord-00000-of-00001").write_bytes(b"")  # Empty shard.
    _shard(out)
    _shard(tmp_path / "t.tfrecord-00000-of-00002.incomplete")  # Old naming.
    _shard(tmp_path / ".t.tfrecord-00001-of-00005.incomplete")
    (tmp_path / "..t.tfrecord.incomplete.incomplete").write_bytes(b"")
    (tmp_path / "t.tfrecord.stats.json").write_text(
        json.dumps({"output_files": [str(out)]}))
    (tmp_path / "t.stats.json").write_text(  # Older naming, this output's.
        json.dumps({"output_files": ["elsewhere/t.tfrecord-00000-of-00003"]}))
    # Another output's statistics under the shared older name: kept.
    (tmp_path / "u.stats.json").write_text(
        json.dumps({"output_files": [str(tmp_path / "u.tfrecord")]}))
    # Same prefix, but not the builder's outputs: kept.
    (tmp_path / "t.tfrecord-00001-of-00003x").write_bytes(b"")
    (tmp_path / "t.tfrecord-00000-of-00004").write_text("notes, not a shard")
    _shard(tmp_path / "t.tfrecord-backup")
    _shard(tmp_path / "u.tfrecord")
    (tmp_path / "t.tfrecord.json").write_text("{}")
    new = output.output_paths(str(out), 2) + [output.stats_path(str(out))]
    found = output.earlier_outputs(str(out), new)
    assert found == [str(tmp_path / n) for n in (
        "..t.tfrecord.incomplete.incomplete",
        ".t.tfrecord-00001-of-00005.incomplete", "t.stats.json",
        "t.tfrecord", "t.tfrecord-00000-of-00001",
        "t.tfrecord-00000-of-00002.incomplete", "t.tfrecord-00000-of-00003",
        "t.tfrecord-00001-of-00003", "t.tfrecord-00002-of-00003",
        "t.tfrecord.stats.json")]
    # The files the new run writes are never "earlier".
    assert str(out) not in output.earlier_outputs(str(out), [str(out)])
    # A list: only the unfinished files of its names.
    assert output.earlier_outputs("%s,%s" % (out, tmp_path / "v"), []) == [
        str(tmp_path / n) for n in ("..t.tfrecord.incomplete.incomplete",
                                    ".t.tfrecord-00001-of-00005.incomplete")]
    assert output.earlier_outputs(str(tmp_path / "no" / "t"), []) == []
    output.remove_earlier_outputs(found, str(out))
    assert sorted(os.listdir(tmp_path)) == [
        "t.tfrecord-00000-of-00004", "t.tfrecord-00001-of-00003x",
        "t.tfrecord-backup", "t.tfrecord.json", "u.stats.json", "u.tfrecord"]


def test_earlier_outputs_never_take_another_outputs_files(tmp_path):
    for name in ("wiki.part_a", "wiki.part_b"):
        _shard(tmp_path / name)
    (tmp_path / "wiki.stats.json").write_text(  # The older shared name.
        json.dumps({"output_files": [str(tmp_path / "wiki.part_b")]}))
    out = str(tmp_path / "wiki.part_a")
    assert output.earlier_outputs(out, output.written_paths(out)) == []


def test_check_not_inputs_sees_through_links(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("text\n")
    (tmp_path / "sym.txt").symlink_to(corpus)
    os.link(corpus, tmp_path / "hard.txt")
    (tmp_path / "dir").symlink_to(tmp_path)
    output.check_not_inputs([str(corpus)], [str(tmp_path / "other")])
    for alias in ("corpus.txt", "sym.txt", "hard.txt", "dir/corpus.txt",
                  "dir/./dir/corpus.txt"):
        with pytest.raises(ValueError, match="is also an input file"):
            output.check_not_inputs([str(corpus)], [str(tmp_path / alias)])
    with pytest.raises(ValueError, match=r"sym.txt is also an input file \(as "):
        output.check_not_inputs([str(tmp_path / "hard.txt")],
                                [str(tmp_path / "sym.txt")])


def test_shard_set_deals_round_robin_and_commits_all_or_nothing(tmp_path):
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    shards = output.ShardSet(paths)
    for frame in (b"1", b"2", b"3"):
        shards.write(frame)
    shards.finish()
    assert not os.path.exists(paths[0])
    assert sorted(os.listdir(tmp_path)) == [".a.incomplete", ".b.incomplete"]
    shards.commit()
    assert shards.counts == [2, 1]
    assert open(paths[0], "rb").read() == b"13"
    shards = output.ShardSet(paths)
    shards.write(b"x")
    shards.abort()
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]
    assert open(paths[1], "rb").read() == b"2"
    assert output.ShardSet.temporary_paths(["d/p"]) == ["d/.p.incomplete"]


def _commit(tmp_path, records, count=3):
    out = str(tmp_path / "t")
    paths = output.output_paths(out, count)
    shards = output.ShardSet(paths)
    for record in records:
        shards.write(b"".join(tfrecord.frame_records([record])))
    shards.finish()
    earlier = output.earlier_outputs(out, output.written_paths(out, count))
    output.commit_run(paths, output.stats_path(out),
                      json.dumps({"output_files": paths}), earlier, out)
    return paths


def test_commit_run_replaces_a_set_and_its_statistics(tmp_path):
    _commit(tmp_path, [b"old"] * 5, count=2)
    paths = _commit(tmp_path, [b"new"] * 6)
    assert sorted(os.listdir(tmp_path)) == ["stats.t.json"] + [
        os.path.basename(p) for p in paths]
    for path in paths:
        assert b"old" not in open(path, "rb").read()


def test_earlier_outputs_through_gfile(tmp_path):
    url = "file://" + str(tmp_path)
    _shard(tmp_path / "t.tfrecord-00000-of-00002")
    assert output.stats_path(url + "/t.tfrecord") == (
        url + "/stats.t.tfrecord.json")
    found = output.earlier_outputs(url + "/t.tfrecord", [url + "/t.tfrecord"])
    assert found == [url + "/t.tfrecord-00000-of-00002"]
    output.remove_earlier_outputs(found, url + "/t.tfrecord")
    assert os.listdir(tmp_path) == []
    assert output.earlier_outputs(url + "/none/t.tfrecord", []) == []
