"""Tests of foundation.run_record: a rerun from other inputs is refused,
and content fingerprints see content, not folders."""

import json

import pytest

from foundation import run_record
from foundation import safe_io


def test_run_record_refuses_other_inputs(tmp_path):
    run_record.RunRecord(tmp_path, "prog", {"--input_file": "a"}).claim()
    run_record.RunRecord(tmp_path, "prog", {"--input_file": "a"}).claim()
    before = (tmp_path / run_record.RUN_RECORD_NAME).read_text()
    with pytest.raises(safe_io.OutputError,
                       match="--input_file='a' there, 'b' now"):
        run_record.RunRecord(tmp_path, "prog", {"--input_file": "b"}).claim()
    with pytest.raises(safe_io.OutputError, match="a run of prog"):
        run_record.RunRecord(tmp_path, "other", {}).claim()
    assert (tmp_path / run_record.RUN_RECORD_NAME).read_text() == before
    assert json.loads(before)["settings"] == {"--input_file": "a"}


def test_content_fingerprint_sees_content_not_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x.tfrecord").write_bytes(b"1" * 3000000)
    (b / "x.tfrecord").write_bytes(b"1" * 3000000)
    same_a = run_record.content_fingerprint([str(a / "x.tfrecord")])
    assert same_a == run_record.content_fingerprint([str(b / "x.tfrecord")])
    assert same_a.startswith("1 files, 3000000 bytes, sha256 ")
    (b / "x.tfrecord").write_bytes(b"1" * 2999999 + b"2")
    assert same_a != run_record.content_fingerprint([str(b / "x.tfrecord")])
