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
    # While staging, nothing TF Serving watches holds a partial version.
    assert sorted(os.listdir(tmp_path))[0].startswith(".staging-")
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
