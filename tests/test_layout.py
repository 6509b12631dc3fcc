"""TF Serving layout: versions, staging, never overwriting."""

import os

import pytest

from export import layout


def _write(path, text="x"):
    os.makedirs(path)
    with open(os.path.join(path, "saved_model.pb"), "w") as f:
        f.write(text)


def test_next_version_is_shared_and_skips_non_numeric(tmp_path):
    assert layout.next_version([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    _write(str(tmp_path / "a" / "3"))
    _write(str(tmp_path / "b" / "7"))
    _write(str(tmp_path / "b" / "tmp"))
    assert layout.list_versions(str(tmp_path / "b")) == [7]
    assert layout.next_version([str(tmp_path / "a"), str(tmp_path / "b")]) == 8


def test_staged_export_moves_complete_folders_into_place(tmp_path):
    staged = layout.StagedExport(str(tmp_path), ["m", "m_encoder"])
    assert staged.version == 1
    for name in ("m", "m_encoder"):
        assert not os.path.exists(layout.version_dir(str(tmp_path), name, 1))
        _write(staged.path(name), name)
    # While staging, nothing TF Serving watches holds a partial version
    # (the export holds the folder's lock meanwhile).
    assert sorted(os.listdir(tmp_path)) == [
        ".albert.lock", os.path.basename(staged.staging_dir)]
    assert os.path.basename(staged.staging_dir).startswith(".staging-1-")
    final = staged.commit()
    assert final == {"m": str(tmp_path / "m" / "1"),
                     "m_encoder": str(tmp_path / "m_encoder" / "1")}
    assert sorted(os.listdir(tmp_path)) == ["m", "m_encoder"]
    assert layout.StagedExport(str(tmp_path), ["m"]).version == 2


def test_existing_versions_are_never_overwritten(tmp_path):
    _write(str(tmp_path / "m" / "2"), "old")
    with pytest.raises(layout.VersionExistsError, match="already exists"):
        layout.StagedExport(str(tmp_path), ["m"], version=2)
    staged = layout.StagedExport(str(tmp_path), ["m"], version=5)
    _write(staged.path("m"), "new")
    _write(str(tmp_path / "m" / "5"), "raced")  # appears meanwhile
    with pytest.raises(layout.VersionExistsError):
        staged.commit()
    with open(tmp_path / "m" / "5" / "saved_model.pb") as f:
        assert f.read() == "raced"
    with open(tmp_path / "m" / "2" / "saved_model.pb") as f:
        assert f.read() == "old"
    staged.abort()
    assert sorted(os.listdir(tmp_path)) == ["m"]
    with pytest.raises(ValueError, match="positive"):
        layout.StagedExport(str(tmp_path), ["m"], version=0)


def test_clean_up_removes_only_what_a_killed_export_recorded(tmp_path):
    """A user's `.staging-*` file or folder is never removed; the staging
    folder a killed export recorded in the lock is."""
    from foundation import output_lock

    (tmp_path / ".staging-mine").mkdir()
    (tmp_path / ".staging-mine" / "notes.txt").write_text("mine")
    (tmp_path / ".staging-file").write_text("mine too")
    killed = output_lock.OutputLock(tmp_path, "export", flag="--export_dir")
    killed.acquire()
    staged_by_killed = killed.make_folder(tmp_path, ".staging-3-")
    os.close(killed.fileno())  # a kill: the record stays, the lock goes
    killed._fd = None
    with layout.holding(str(tmp_path), "export"):
        pass
    assert not os.path.exists(staged_by_killed)
    assert (tmp_path / ".staging-mine" / "notes.txt").read_text() == "mine"
    assert (tmp_path / ".staging-file").read_text() == "mine too"


def test_a_version_cut_short_is_named_with_what_to_do(tmp_path):
    staged = layout.StagedExport(str(tmp_path), ["m", "m_litert"])
    _write(staged.path("m"), "m")
    os.makedirs(staged.path("m_litert"))
    with open(os.path.join(staged.path("m_litert"), "encoder.tflite"),
              "wb") as f:
        f.write(b"model")
    staged.commit()
    assert layout.incomplete_versions(str(tmp_path), ["m", "m_litert"]) == []
    # As if killed between the two renames.
    os.remove(tmp_path / "m_litert" / "1" / "encoder.tflite")
    assert layout.incomplete_versions(str(tmp_path), ["m", "m_litert"]) == [
        (1, [os.path.join("m_litert", "1", "encoder.tflite")])]
    with pytest.raises(layout.VersionExistsError) as error:
        layout.check_version_free(str(tmp_path), ["m", "m_litert"], 1)
    message = str(error.value)
    assert "version 1 of m was left incomplete by a killed export" in message
    assert "encoder.tflite" in message and "--version=2" in message
    assert str(tmp_path / "m" / "1") in message
