"""A Beam file system for URLs that only Apache Beam can open, with no
network (a pytest plugin that tests/conftest.py loads).

- `beam_test_urls`: tests/test_filesystems.py and test_beam_pipeline.py.
"""

import os
import shutil

import pytest

BEAM_TEST_SCHEME = "beamtest://"


@pytest.fixture(scope="session")
def beam_test_urls():
    """URLs that only Apache Beam's FileSystems can open (no network).

    Registers, once per session, a Beam file system for the scheme
    `beamtest://` that maps `beamtest://<absolute path>` to the local file, so
    the code that gs:// paths take (through `FileSystems`, never `os`) runs
    offline. Returns a function: local path -> its URL.
    """
    # Imported here: Beam is slow to import, and only the Beam tests use it.
    from apache_beam.io.filesystem import FileMetadata
    from apache_beam.io.localfilesystem import LocalFileSystem

    def local(url):
        return url[len(BEAM_TEST_SCHEME):] if url.startswith(
            BEAM_TEST_SCHEME) else url

    class _BeamTestFileSystem(LocalFileSystem):
        @classmethod
        def scheme(cls):
            return BEAM_TEST_SCHEME[:-3]

        def _list(self, dir_or_prefix):
            for meta in super()._list(local(dir_or_prefix)):
                yield FileMetadata(BEAM_TEST_SCHEME + meta.path,
                                   meta.size_in_bytes,
                                   meta.last_updated_in_seconds)

        def mkdirs(self, path):
            return super().mkdirs(local(path))

        def create(self, path, *args, **kwargs):
            return super().create(local(path), *args, **kwargs)

        def open(self, path, *args, **kwargs):
            return super().open(local(path), *args, **kwargs)

        def copy(self, sources, targets):
            return super().copy([local(p) for p in sources],
                                [local(p) for p in targets])

        def rename(self, sources, targets):
            return super().rename([local(p) for p in sources],
                                  [local(p) for p in targets])

        def exists(self, path):
            return super().exists(local(path))

        def size(self, path):
            return super().size(local(path))

        def last_updated(self, path):
            return super().last_updated(local(path))

        def checksum(self, path):
            return super().checksum(local(path))

        def metadata(self, path):
            meta = super().metadata(local(path))
            return FileMetadata(path, meta.size_in_bytes,
                                meta.last_updated_in_seconds)

        def delete(self, paths):
            # As object stores: "dir/" deletes everything under it.
            for path in map(local, paths):
                if os.path.isdir(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)

    def to_url(path):
        return BEAM_TEST_SCHEME + str(path)

    # Beam finds file systems among the live subclasses: keep this one alive.
    to_url.file_system = _BeamTestFileSystem
    return to_url
