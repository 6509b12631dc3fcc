"""Hostile cases of the model cache, run as a user runs them.

`python -m albert_tf.convert_checkpoint --input=<URL or released name>`
against a live HTTP server on the loopback address (the server of
`tests/fixtures_downloads.py`), with `$ALBERT_TF_CACHE` in the case's folder.
Every case asserts a one-line error naming the thing at fault, or a correct
result, and that the files that existed before are unchanged.
"""

import os
import shutil

import pytest

from tests import fixtures_downloads
from tests.hostile import common

PROGRAM = "albert_tf.convert_checkpoint"
CACHE_ENV = "ALBERT_TF_CACHE"
MIRROR_ENV = "ALBERT_TF_MIRROR"


@pytest.fixture
def server():
    s = fixtures_downloads.FileServer()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tiny_tf1(tmp_path_factory, albert_spm_model):
    """A tiny model in the official TF1 layout: `(folder, archive bytes)`."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.convert import pretrained
    from albert_tf.training import model_dir

    root = tmp_path_factory.mktemp("tiny_release")
    model = AlbertPretrainer(AlbertConfig.from_preset("tiny", vocab_size=48))
    model_dir.save_model_dir(model, str(root / "ours"), albert_spm_model)
    pretrained.convert_checkpoint(str(root / "ours"), str(root / "tf1"),
                                  target="tf1")
    return str(root / "tf1"), fixtures_downloads.release_tar(str(root / "tf1"))


def _convert(cache, reference, output_dir, **env):
    return common.run_program(
        PROGRAM, f"--input={reference}", f"--output_dir={output_dir}",
        env=common.environment(**{CACHE_ENV: str(cache)}, **env))


def _cache_key(url):
    from albert_tf.convert import released

    return released.resolve(url).cache_key


def test_an_archive_that_escapes_tarfiles_filter_is_refused_by_member(
        server, tmp_path):
    """The archive that wrote a file beside the cache through tarfile's
    `data` filter (CVE-2025-4517 pattern, shaped for the fetch's unpacking
    folder): one line naming the member; nothing outside the cache, nothing
    left in it, and a user's folder named like a partial fetch survives."""
    cache = tmp_path / "cache"
    url = server.url + "/albert_evil.tar.gz"
    key = _cache_key(url)
    length = len(str(cache)) + len(f"/.{key}.partial-") + 8 + len("/unpacked")
    fixtures_downloads.make_tar(
        tmp_path / "evil.tar.gz",
        fixtures_downloads.escaping_members(length, climb=3))
    server.files["/albert_evil.tar.gz"] = (tmp_path / "evil.tar.gz").read_bytes()
    os.remove(tmp_path / "evil.tar.gz")
    mine = cache / f".{key}.partial-mine"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("not the cache's")
    snapshot = common.Snapshot(tmp_path)
    result = _convert(cache, url, tmp_path / "out")
    line = common.assert_one_line_error(
        result, "the archive's member 'a' is a symbolic link", url,
        os.path.join(str(cache), key))
    assert "nothing was extracted" in line
    snapshot.assert_unchanged()
    assert sorted(os.listdir(tmp_path)) == ["cache"]
    assert sorted(os.listdir(cache)) == [mine.name]


@pytest.mark.slow
def test_a_basic_auth_url_works_and_its_password_is_written_nowhere(
        server, tmp_path, tiny_tf1):
    password = "hunter2-Secret"
    server.auth = ("me", password)
    server.files["/private/tiny.tar.gz"] = tiny_tf1[1]
    cache, out = tmp_path / "cache", tmp_path / "out"
    url = server.url.replace("//", f"//me:{password}@") + "/private/tiny.tar.gz"
    wrong = _convert(cache, url.replace(password, "wrong-Guess"),
                     tmp_path / "never")
    common.assert_one_line_error(wrong, "HTTP 401", "me:***@127.0.0.1")
    assert "wrong-Guess" not in wrong.stdout + wrong.stderr
    assert not os.path.exists(tmp_path / "never")
    done = _convert(cache, url, out)
    assert done.returncode == 0, done.stderr[-3000:]
    assert os.path.isfile(out / "albert_config.json")
    assert server.hits["/private/tiny.tar.gz"] == 1
    shown = done.stdout + done.stderr
    assert "me:***@" in shown
    assert password not in shown
    for folder, _, names in os.walk(tmp_path):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                assert password.encode() not in f.read(), name


def test_another_model_unpacked_by_hand_under_a_released_name_is_refused(
        tmp_path, tiny_tf1):
    """The fetch error advises unpacking the archive by hand into the
    entry; a folder there holding another model is refused in one line
    naming it and how to clear it, and left as it is."""
    cache = tmp_path / "cache"
    entry = cache / "albert_base_v2"
    shutil.copytree(tiny_tf1[0], entry / "albert_base")
    snapshot = common.Snapshot(tmp_path)
    result = _convert(cache, "albert_base_v2", tmp_path / "out",
                      **{MIRROR_ENV: "http://127.0.0.1:9"})
    common.assert_one_line_error(
        result, f"the cached folder {entry} has no record of a check",
        "is not albert_base_v2",
        f"rm -r {entry}")
    snapshot.assert_unchanged()
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.slow
def test_a_fetch_killed_mid_download_is_cleared_by_the_next_one(
        server, tmp_path, tiny_tf1):
    """SIGKILL while the archive streams in: nothing under the entry's
    name, and the next fetch removes the killed one's folder (its lock
    lists it) and loads the model; a user's folder of that shape stays."""
    cache = tmp_path / "cache"
    url = server.url + "/slow/tiny.tar.gz"
    key = _cache_key(url)
    server.files["/slow/tiny.tar.gz"] = tiny_tf1[1]
    server.behaviour["/slow/tiny.tar.gz"] = "slow"
    mine = cache / f".{key}.partial-mine"
    mine.mkdir(parents=True)
    (mine / "archive").write_text("mine")
    kept = common.Snapshot(mine)

    def partials():
        return [p for p in cache.glob(f".{key}.partial-*") if p != mine]

    def downloading():
        return any(os.path.exists(p / "archive") for p in partials())

    process = common.start_program(
        PROGRAM, f"--input={url}", f"--output_dir={tmp_path / 'out'}",
        env=common.environment(**{CACHE_ENV: str(cache)}))
    assert common.kill_when(process, downloading, timeout=120)
    (killed,) = partials()
    assert not (cache / key).exists()
    server.behaviour.pop("/slow/tiny.tar.gz")
    done = _convert(cache, url, tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not killed.exists()
    assert sorted(os.listdir(cache)) == sorted([key, mine.name])
    kept.assert_unchanged()
