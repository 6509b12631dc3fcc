"""Tests of foundation.safe_archive: every member checked, then extracted.

The crafted archive is the published pattern that defeats the standard
library's `data` filter on Pythons before 3.11.13 / 3.12.11 / 3.13.4
(CVE-2025-4517): nested folders with long names, a link per level, a last
link whose path overflows PATH_MAX (so the filter's realpath stops
resolving) pointing back up, and links through it that climb out.
"""

import os
import sys
import tarfile

import pytest

from foundation import safe_archive
from tests.fixtures_downloads import escaping_members
from tests.fixtures_downloads import make_tar


def _files(root):
    return sorted(os.path.relpath(os.path.join(folder, name), root)
                  for folder, _, names in os.walk(root) for name in names)


def test_a_release_shaped_archive_is_extracted_byte_for_byte(tmp_path):
    members = [("./", tarfile.DIRTYPE), ("./albert_base", tarfile.DIRTYPE),
               ("./albert_base/albert_config.json", tarfile.REGTYPE, "",
                b'{"hidden_size": 4}'),
               ("albert_base/sub/model.ckpt.index", tarfile.REGTYPE, "",
                b"\x00" * 3000000)]
    archive = make_tar(tmp_path / "a.tar.gz", members)
    out = tmp_path / "out"
    assert safe_archive.extract(archive, str(out)) == 2
    assert _files(out) == ["albert_base/albert_config.json",
                           "albert_base/sub/model.ckpt.index"]
    assert (out / "albert_base" / "albert_config.json").read_bytes() == \
        b'{"hidden_size": 4}'
    assert (out / "albert_base" / "sub" / "model.ckpt.index").stat().st_size \
        == 3000000
    # Plain and other compressions are read too.
    for mode, suffix in (("w", "tar"), ("w:xz", "tar.xz")):
        other = make_tar(tmp_path / f"a.{suffix}", members, mode)
        assert safe_archive.extract(other, str(tmp_path / suffix)) == 2


@pytest.mark.skipif(
    sys.version_info >= (3, 13, 4)
    or (3, 12, 11) <= sys.version_info < (3, 13)
    or (3, 11, 13) <= sys.version_info < (3, 12),
    reason="this Python's tarfile filter has the CVE-2025-4517 fix")
def test_the_standard_library_filter_alone_writes_outside_on_this_python(
        tmp_path):
    """Why the project checks members itself: on this Python, `tarfile`'s
    `data` filter extracts the crafted archive and a file lands two
    folders above the destination."""
    destination = tmp_path / "cache" / "entry" / "unpacked"
    destination.parent.mkdir(parents=True)
    archive = make_tar(tmp_path / "crafted.tar",
                       escaping_members(len(str(destination)), climb=2), "w")
    with tarfile.open(archive) as tar:
        tar.extractall(destination, filter="data")
    assert (tmp_path / "cache" / "pwned").read_bytes() == b"written outside"


def test_the_archive_that_defeats_the_standard_filter_is_refused(tmp_path):
    destination = tmp_path / "cache" / "entry" / "unpacked"
    destination.parent.mkdir(parents=True)
    archive = make_tar(tmp_path / "crafted.tar",
                       escaping_members(len(str(destination)), climb=2), "w")
    with pytest.raises(safe_archive.ArchiveError) as error:
        safe_archive.extract(archive, str(destination))
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("the archive's member 'a' is a symbolic link "
                              "(to 'dddd"), message
    assert message.endswith("nothing was extracted")
    assert _files(tmp_path) == ["crafted.tar"]
    assert not destination.exists()


@pytest.mark.parametrize("members,named,why", [
    ([("../x", tarfile.REGTYPE, "", b"x")], "../x", "climbs out"),
    ([("a/./../../x", tarfile.REGTYPE, "", b"x")], "a/./../../x",
     "climbs out"),
    ([("/tmp/abs", tarfile.REGTYPE, "", b"x")], "/tmp/abs",
     "absolute path"),
    ([("C:x", tarfile.REGTYPE, "", b"x")], "C:x", "drive"),
    ([("a\\..\\x", tarfile.REGTYPE, "", b"x")], "a\\\\..\\\\x", "backslash"),
    ([("ok", tarfile.REGTYPE, "", b"x"), ("link", tarfile.SYMTYPE, "ok")],
     "link", "symbolic link (to 'ok')"),
    ([("ok", tarfile.REGTYPE, "", b"x"), ("hard", tarfile.LNKTYPE, "ok")],
     "hard", "hard link (to 'ok')"),
    ([("dev", tarfile.CHRTYPE)], "dev", "a device"),
    ([("disk", tarfile.BLKTYPE)], "disk", "a device"),
    ([("pipe", tarfile.FIFOTYPE)], "pipe", "named pipe"),
    ([("f", tarfile.REGTYPE, "", b"1"), ("f", tarfile.REGTYPE, "", b"2")],
     "f", "appears twice"),
    ([("f", tarfile.REGTYPE, "", b"1"), ("f/g", tarfile.REGTYPE, "", b"2")],
     "f/g", "holds as a file"),
    ([("d/g", tarfile.REGTYPE, "", b"1"), ("d", tarfile.REGTYPE, "", b"2")],
     "d", "holds a folder"),
    ([("x" * 300, tarfile.REGTYPE, "", b"1")], "xxxx", "over 255 bytes"),
])
def test_a_bad_member_refuses_the_whole_archive(tmp_path, members, named, why):
    # A good member first: nothing at all is written, not even it.
    archive = make_tar(tmp_path / "bad.tar.gz",
                       [("good/a.txt", tarfile.REGTYPE, "", b"a")] + members)
    out = tmp_path / "out"
    with pytest.raises(safe_archive.ArchiveError) as error:
        safe_archive.extract(archive, str(out))
    message = str(error.value)
    assert "\n" not in message
    assert f"member '{named}" in message and why in message, message
    assert not out.exists()
    assert _files(tmp_path) == ["bad.tar.gz"]


def test_member_count_and_size_are_bounded(tmp_path):
    members = [(f"f{i}", tarfile.REGTYPE, "", b"12345") for i in range(4)]
    archive = make_tar(tmp_path / "many.tar.gz", members)
    with pytest.raises(safe_archive.ArchiveError, match="more than 3 "
                       "members, the most allowed"):
        safe_archive.extract(archive, str(tmp_path / "a"), max_members=3)
    with pytest.raises(safe_archive.ArchiveError,
                       match="more than 12 bytes .at member 'f2'"):
        safe_archive.extract(archive, str(tmp_path / "b"), max_bytes=12)
    assert _files(tmp_path) == ["many.tar.gz"]


def test_a_truncated_or_foreign_file_is_not_a_whole_archive(tmp_path):
    archive = make_tar(tmp_path / "t.tar.gz",
                       [("a", tarfile.REGTYPE, "", os.urandom(200000))])
    data = (tmp_path / "t.tar.gz").read_bytes()
    (tmp_path / "t.tar.gz").write_bytes(data[:len(data) // 2])
    (tmp_path / "page.tar.gz").write_text("<html>not found</html>")
    for path in (archive, str(tmp_path / "page.tar.gz")):
        with pytest.raises(safe_archive.ArchiveError,
                           match="not a whole tar archive"):
            safe_archive.extract(path, str(tmp_path / "out"))
        assert not (tmp_path / "out").exists()
