"""Released weights fetched from a live HTTP server on the loopback address.

The server serves fixture archives in the official layout (and the other
layouts) made from tiny models by the project's own converters, and the
two Hugging Face file routes `hf_hub_download` asks for
(`HEAD`/`GET /<repo>/resolve/<revision>/<file>`), reached through
`HF_ENDPOINT`. keras-hub's Kaggle presets cannot be served this way: their
path is covered by the offline error only. The server can ask for basic
authentication (`auth`) and redirect (`behaviour[path] = ("redirect",
url)`); it keeps every request's Authorization header (`seen`).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from albert_tf.convert import model_cache
from albert_tf.convert import pretrained
from albert_tf.convert import released
from albert_tf.training import model_dir
from tests import fixtures_downloads

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def server():
    s = fixtures_downloads.FileServer()
    yield s
    s.stop()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(model_cache.CACHE_ENV, str(root))
    return root


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory, albert_spm_model):
    """A tiny model written by this project's converters in the official
    TF1 layout and as a Hugging Face folder: `(tf1_dir, hf_dir, archive)`."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer

    model = AlbertPretrainer(AlbertConfig.from_preset("tiny", vocab_size=48))
    rng = np.random.default_rng(0)
    for v in model.weights:
        v.assign(rng.normal(scale=0.3, size=v.shape).astype("float32"))
    root = tmp_path_factory.mktemp("release")
    model_dir.save_model_dir(model, str(root / "ours"), albert_spm_model)
    pretrained.convert_checkpoint(str(root / "ours"), str(root / "tf1"),
                                  target="tf1")
    pretrained.convert_checkpoint(str(root / "ours"), str(root / "hf"),
                                  target="huggingface")
    return (str(root / "tf1"), str(root / "hf"),
            fixtures_downloads.release_tar(str(root / "tf1")))


def _weights(model):
    return {v.path: v.numpy() for v in model.weights}


def _assert_same(a, b):
    wa, wb = _weights(a), _weights(b)
    assert sorted(wa) == sorted(wb)
    for path, value in wa.items():
        np.testing.assert_array_equal(wb[path], value, err_msg=path)


def _entries(cache):
    return sorted(os.listdir(cache)) if os.path.isdir(cache) else []


def test_downloads_once_then_loads_from_the_cache_offline(
        server, cache, tiny_release):
    tf1_dir, _, archive = tiny_release
    server.files["/m/tiny.tar.gz"] = archive
    url = server.url + "/m/tiny.tar.gz"
    fetched = pretrained.load_pretrained(url)
    _assert_same(pretrained.load_pretrained(tf1_dir), fetched)
    assert server.hits["/m/tiny.tar.gz"] == 1
    key = released.resolve(url).cache_key
    # The entry, its lock; no partial folder, no archive left.
    assert [e for e in _entries(cache) if not e.endswith(".lock")] == [key]
    assert not any(f.endswith(".tar.gz") for _, _, fs in os.walk(cache)
                   for f in fs)
    server.stop()
    _assert_same(fetched, pretrained.load_pretrained(url))
    assert pretrained.spm_model_path(url).endswith("30k-clean.model")


def test_a_dropped_connection_restarts_the_download(server, cache, tiny_release):
    tf1_dir, _, archive = tiny_release
    server.files["/tiny.tar.gz"] = archive
    server.behaviour["/tiny.tar.gz"] = "drop_once"
    fetched = pretrained.load_pretrained(server.url + "/tiny.tar.gz")
    _assert_same(pretrained.load_pretrained(tf1_dir), fetched)
    assert server.hits["/tiny.tar.gz"] == 2


def _fails_leaving_nothing(cache, reference, *expected):
    with pytest.raises(model_cache.FetchError) as info:
        pretrained.load_pretrained(reference)
    message = str(info.value)
    assert "\n" not in message
    for text in expected:
        assert text in message, message
    assert [e for e in _entries(cache) if not e.endswith(".lock")] == []
    return message


def test_a_truncated_archive_is_named_and_not_cached(server, cache, tiny_release):
    server.files["/t.tar.gz"] = tiny_release[2][:len(tiny_release[2]) // 2]
    url = server.url + "/t.tar.gz"
    key = released.resolve(url).cache_key
    _fails_leaving_nothing(cache, url, url, "the download is not a whole tar archive",
                           os.path.join(str(cache), key))


def test_a_404_is_named_with_the_folder_to_fill_by_hand(server, cache):
    url = server.url + "/missing.tar.gz"
    _fails_leaving_nothing(cache, url, url, "HTTP 404", "by hand")
    assert server.hits["/missing.tar.gz"] == 0


def test_a_wrong_model_under_a_released_name_is_refused(
        server, cache, tiny_release, monkeypatch):
    server.files["/mirror/albert_base_v2.tar.gz"] = tiny_release[2]
    monkeypatch.setenv(released.MIRROR_ENV, server.url + "/mirror")
    _fails_leaving_nothing(
        cache, "albert_base_v2", server.url + "/mirror/albert_base_v2.tar.gz",
        "is not albert_base_v2 (11,683,584 parameters)", "vocab_size=48",
        os.path.join(str(cache), "albert_base_v2"))


def test_offline_an_uncached_name_says_what_to_fetch_and_where(
        cache, monkeypatch):
    # A port nobody listens on: what a machine without network sees.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(released.MIRROR_ENV, f"http://127.0.0.1:{port}")
    _fails_leaving_nothing(
        cache, "albert_xlarge_v1",
        f"http://127.0.0.1:{port}/albert_xlarge_v1.tar.gz", "by hand",
        os.path.join(str(cache), "albert_xlarge_v1"))


_KILLED_FETCH = """
import os, sys
from foundation import output_lock
root, key = sys.argv[1], sys.argv[2]
lock = output_lock.OutputLock(os.path.join(root, key), "fetch",
                              flag="cache entry", kind="file").acquire()
partial = lock.make_folder(root, "." + key + ".partial-")
os.makedirs(os.path.join(partial, "unpacked", "albert_base"))
print(partial)
os._exit(9)  # killed: the lock lists the partial folder
"""


def test_a_killed_fetch_is_cleared_but_a_folder_named_like_it_is_kept(
        server, cache, tiny_release):
    """What the lock lists as a killed fetch's is removed; a user's folder
    that merely has the name of a partial one is never touched."""
    from tests.hostile import common

    server.files["/k.tar.gz"] = tiny_release[2]
    url = server.url + "/k.tar.gz"
    key = released.resolve(url).cache_key
    cache.mkdir()
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_FETCH, str(cache), key],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    partial = killed.stdout.strip()
    assert os.path.isdir(os.path.join(partial, "unpacked")), killed.stderr
    mine = cache / f".{key}.partial-mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    kept = common.Snapshot(mine)
    pretrained.load_pretrained(url)
    assert server.hits["/k.tar.gz"] == 1
    assert not os.path.exists(partial)
    kept.assert_unchanged()
    assert sorted(_entries(cache)) == sorted([key, mine.name])


def test_a_crafted_archive_is_refused_naming_its_member(
        server, cache, tmp_path):
    """The archive that defeats tarfile's `data` filter on Pythons before
    3.11.13 (CVE-2025-4517), shaped for the fetch's own unpacking folder
    so that its file would land beside the cache: refused by the
    project's member check, nothing written outside the cache or left in
    it."""
    url = server.url + "/evil.tar.gz"
    key = released.resolve(url).cache_key
    destination = len(str(cache)) + len(f"/.{key}.partial-") + 8 + len(
        "/unpacked")
    archive = fixtures_downloads.make_tar(
        tmp_path / "evil.tar.gz",
        fixtures_downloads.escaping_members(destination, climb=3))
    server.files["/evil.tar.gz"] = (tmp_path / "evil.tar.gz").read_bytes()
    os.remove(archive)
    message = _fails_leaving_nothing(
        cache, url, "the archive's member 'a' is a symbolic link",
        "nothing was extracted", os.path.join(str(cache), key))
    assert url in message
    assert sorted(os.listdir(tmp_path)) == ["cache"]
    assert _entries(cache) == []


def test_basic_auth_urls_work_and_the_password_is_shown_nowhere(
        server, cache, tiny_release, capfd, caplog):
    server.auth = ("me", "pa:ss@word")
    server.files["/private/b.tar.gz"] = tiny_release[2]
    good = server.url.replace("//", "//me:pa%3Ass%40word@") + "/private/b.tar.gz"
    bad = server.url.replace("//", "//me:wrong-pw@") + "/private/b.tar.gz"
    caplog.set_level("DEBUG")
    with pytest.raises(model_cache.FetchError) as info:
        pretrained.load_pretrained(bad)
    assert "HTTP 401" in str(info.value) and "me:***@" in str(info.value)
    assert "wrong-pw" not in str(info.value)
    _assert_same(pretrained.load_pretrained(tiny_release[0]),
                 pretrained.load_pretrained(good))
    assert server.hits["/private/b.tar.gz"] == 1
    out, err = capfd.readouterr()
    shown = out + err + caplog.text
    assert "me:***@" in err
    for secret in ("pa:ss@word", "pa%3Ass%40word", "wrong-pw"):
        assert secret not in shown
    for folder, _, names in os.walk(cache):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                data = f.read()
            assert b"pa%3Ass" not in data and b"pa:ss@" not in data, name


def test_credentials_never_follow_a_redirect_to_another_host(
        server, cache, tiny_release):
    other = fixtures_downloads.FileServer()
    try:
        other.files["/b.tar.gz"] = tiny_release[2]
        server.behaviour["/b.tar.gz"] = ("redirect", other.url + "/b.tar.gz")
        url = server.url.replace("//", "//me:pw@") + "/b.tar.gz"
        pretrained.load_pretrained(url)
        assert server.seen == [("/b.tar.gz", "Basic bWU6cHc=")]
        assert other.seen == [("/b.tar.gz", None)]
    finally:
        other.stop()


def _unpack_by_hand(source_dir, entry):
    """What the fetch error advises: the archive unpacked into the entry."""
    os.makedirs(entry)
    shutil.copytree(source_dir, os.path.join(entry, "albert_base"))


def test_another_model_unpacked_by_hand_under_a_released_name_is_refused(
        cache, tiny_release):
    from tests.hostile import common

    entry = os.path.join(str(cache), "albert_base_v2")
    _unpack_by_hand(tiny_release[0], entry)
    snapshot = common.Snapshot(cache)
    with pytest.raises(model_cache.FetchError) as info:
        pretrained.load_pretrained("albert_base_v2")
    message = str(info.value)
    assert "\n" not in message
    assert (f"the cached folder {entry} has no record of a check (unpacked "
            "by hand?) and is not albert_base_v2 (11,683,584 parameters)") \
        in message, message
    assert f"rm -r {entry}" in message and "vocab_size=48" in message
    snapshot.assert_unchanged()
    assert not os.path.exists(os.path.join(entry, model_cache.RECORD_NAME))
    shutil.rmtree(os.path.join(entry, "albert_base"))
    with pytest.raises(model_cache.FetchError,
                       match=f"the cached folder {entry} is empty. Remove it"):
        pretrained.load_pretrained("albert_base_v2")


def test_an_entry_is_checked_again_on_every_load(cache, tiny_release,
                                                 tmp_path):
    """A folder unpacked by hand that holds what its URL names loads, once
    checked in full (then recorded); once changed, it is checked in full
    again and refused when it no longer reads as the model."""
    url = "http://127.0.0.1:9/models/tiny.tar.gz"  # nothing listens
    entry = os.path.join(str(cache), released.resolve(url).cache_key)
    _unpack_by_hand(tiny_release[0], entry)
    fetched = pretrained.load_pretrained(url)
    _assert_same(pretrained.load_pretrained(tiny_release[0]), fetched)
    with open(os.path.join(entry, model_cache.RECORD_NAME)) as f:
        record = json.load(f)
    assert record["source"] == url and record["release"] is None
    assert record["config"]["vocab_size"] == 48
    assert record["shapes"]["bert/embeddings/word_embeddings"][0] == 48
    assert record["files"]["albert_base/albert_config.json"] > 0
    # Another model's config under the same entry.
    config = os.path.join(entry, "albert_base", "albert_config.json")
    with open(config) as f:
        values = json.load(f)
    values["vocab_size"] = 64
    with open(config, "w") as f:
        json.dump(values, f)
    with pytest.raises(model_cache.FetchError) as info:
        pretrained.load_pretrained(url)
    message = str(info.value)
    assert f"the cached folder {entry} changed since it was checked and is " \
        "not an ALBERT model" in message, message
    assert f"rm -r {entry}" in message


def test_names_reach_the_text_models_and_continued_pretraining(
        server, cache, tiny_release):
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf import AlbertTextClassifier

    tf1_dir, _, archive = tiny_release
    server.files["/c.tar.gz"] = archive
    url = server.url + "/c.tar.gz"
    classifier = AlbertTextClassifier(url, num_classes=2)
    assert classifier.predict(["the quick brown fox"], verbose=0).shape == (1, 2)
    model = AlbertPretrainer(AlbertConfig.from_preset("tiny", vocab_size=48))
    read = pretrained.restore_into(model, url)
    assert read.endswith("(tf1)")
    _assert_same(pretrained.load_pretrained(tf1_dir), model)
    assert server.hits["/c.tar.gz"] == 1


def _run(code, env, timeout=300):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          env={**os.environ, **env}, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)


_LOAD_AND_SAVE = """
    import sys
    import numpy as np
    from albert_tf.convert import pretrained
    model = pretrained.load_pretrained(sys.argv[1] if len(sys.argv) > 1 else {ref!r})
    np.savez({out!r}, *[v.numpy() for v in model.weights])
"""


@pytest.mark.slow
def test_two_processes_fetching_one_name_end_with_one_copy(
        server, cache, tiny_release, tmp_path):
    server.files["/s.tar.gz"] = tiny_release[2]
    server.behaviour["/s.tar.gz"] = "slow"
    url = server.url + "/s.tar.gz"
    env = {model_cache.CACHE_ENV: str(cache)}
    procs = [subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_LOAD_AND_SAVE.format(
            ref=url, out=str(tmp_path / f"{i}.npz")))],
        env={**os.environ, **env}, cwd=REPO_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert server.hits["/s.tar.gz"] == 1
    a, b = np.load(tmp_path / "0.npz"), np.load(tmp_path / "1.npz")
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key])
    key = released.resolve(url).cache_key
    assert [e for e in _entries(cache) if not e.endswith(".lock")] == [key]


@pytest.mark.slow
def test_hugging_face_repositories_through_hf_endpoint(
        server, tiny_release, tmp_path):
    """`hf://` goes through huggingface_hub against the live local server,
    lands in its own cache, and loads offline (`HF_HUB_OFFLINE=1`) after."""
    _, hf_dir, _ = tiny_release
    for name in ("config.json", "spiece.model", "model.safetensors"):
        with open(os.path.join(hf_dir, name), "rb") as f:
            server.files[f"/me/tiny-albert/resolve/main/{name}"] = f.read()
    env = {"HF_ENDPOINT": server.url, "HF_HOME": str(tmp_path / "hf"),
           "HF_HUB_DISABLE_XET": "1",
           model_cache.CACHE_ENV: str(tmp_path / "albert_cache")}
    out = str(tmp_path / "w.npz")
    code = _LOAD_AND_SAVE.format(ref="hf://me/tiny-albert", out=out)
    first = _run(code, env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert server.hits["/me/tiny-albert/resolve/main/model.safetensors"] == 1
    assert os.path.isdir(tmp_path / "hf" / "hub" / "models--me--tiny-albert")
    expected = _weights(pretrained.load_pretrained(hf_dir))
    got = np.load(out)
    for value, key in zip(expected.values(), got.files):
        np.testing.assert_array_equal(got[key], value)
    # A repository of a release holding other weights: refused, and its
    # files removed from huggingface_hub's cache.
    for name in ("config.json", "spiece.model", "model.safetensors"):
        server.files[f"/albert/albert-base-v2/resolve/main/{name}"] = (
            server.files[f"/me/tiny-albert/resolve/main/{name}"])
    wrong = _run(code.replace("me/tiny-albert", "albert/albert-base-v2"), env)
    assert wrong.returncode != 0
    last = wrong.stderr.strip().splitlines()[-1]
    assert "is not albert_base_v2 (11,683,584 parameters)" in last, last
    repo_cache = tmp_path / "hf" / "hub" / "models--albert--albert-base-v2"
    assert not [f for _, _, fs in os.walk(repo_cache / "blobs") for f in fs]
    assert not [f for _, _, fs in os.walk(repo_cache / "snapshots") for f in fs]
    server.stop()
    again = _run(code, {**env, "HF_HUB_OFFLINE": "1"})
    assert again.returncode == 0, again.stderr[-3000:]
    # The cached snapshot is checked on every load against the record of
    # its check: edited by hand (another config), it is refused in one line.
    snapshot = next((tmp_path / "hf" / "hub" / "models--me--tiny-albert" /
                     "snapshots").iterdir())
    config = os.path.realpath(snapshot / "config.json")
    with open(config) as f:
        edited = json.load(f)
    edited["hidden_size"] = edited["hidden_size"] * 2
    with open(config, "w") as f:
        json.dump(edited, f)
    changed = _run(code, {**env, "HF_HUB_OFFLINE": "1"})
    assert changed.returncode != 0
    last = changed.stderr.strip().splitlines()[-1]
    assert "huggingface_hub's cache" in last and str(snapshot) in last, last
    # Offline and not cached: one line with the URL and the cache.
    missing = _run(code.replace("me/tiny-albert", "me/other"),
                   {**env, "HF_HUB_OFFLINE": "1"})
    assert missing.returncode != 0
    last = missing.stderr.strip().splitlines()[-1]
    assert "me/other/resolve/main/config.json" in last
    assert str(tmp_path / "hf" / "hub") in last


@pytest.mark.slow
def test_the_programs_take_names_and_say_one_line_offline(
        server, cache, tiny_release, tmp_path):
    env = {model_cache.CACHE_ENV: str(cache)}
    server.files["/p.tar.gz"] = tiny_release[2]
    url = server.url + "/p.tar.gz"
    done = subprocess.run(
        [sys.executable, "-m", "albert_tf.convert_checkpoint", f"--input={url}",
         f"--output_dir={tmp_path / 'converted'}"], env={**os.environ, **env},
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert os.path.exists(tmp_path / "converted" / "albert_config.json")
    server.stop()
    offline = subprocess.run(
        [sys.executable, "-m", "albert_tf.convert_checkpoint",
         "--input=albert_large_v2", f"--output_dir={tmp_path / 'large'}"],
        env={**os.environ, **env, released.MIRROR_ENV: server.url},
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert offline.returncode != 0
    assert "Traceback" not in offline.stderr
    last = offline.stderr.strip().splitlines()[-1]
    assert f"{server.url}/albert_large_v2.tar.gz" in last
    assert os.path.join(str(cache), "albert_large_v2") in last
    assert not os.path.exists(tmp_path / "large")


@pytest.mark.slow
def test_albert_base_v2_from_a_mirror_equals_the_unpacked_folder(
        server, cache, tmp_path, albert_spm_model, monkeypatch):
    """The done-when: a full-size albert_base_v2 archive in the official
    layout, fetched by name through `ALBERT_TF_MIRROR`, then again with the
    server stopped."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer

    model = AlbertPretrainer(AlbertConfig.from_preset("albert_base_v2"))
    model_dir.save_model_dir(model, str(tmp_path / "ours"), albert_spm_model)
    pretrained.convert_checkpoint(str(tmp_path / "ours"), str(tmp_path / "tf1"),
                                  target="tf1")
    server.files["/albert_base_v2.tar.gz"] = fixtures_downloads.release_tar(
        str(tmp_path / "tf1"))
    monkeypatch.setenv(released.MIRROR_ENV, server.url)
    fetched = pretrained.load_pretrained("albert_base_v2")
    assert fetched.encoder.count_params() == 11_683_584
    _assert_same(pretrained.load_pretrained(str(tmp_path / "tf1")), fetched)
    server.stop()
    _assert_same(fetched, pretrained.load_pretrained("albert_base_v2"))
    with open(cache / "albert_base_v2" / "albert_base" / "albert_config.json") as f:
        assert json.load(f)["hidden_size"] == 768
    record_path = cache / "albert_base_v2" / model_cache.RECORD_NAME
    record = json.loads(record_path.read_text())
    assert record["release"] == "albert_base_v2"
    assert record["source"] == server.url + "/albert_base_v2.tar.gz"
    assert record["shapes"]["bert/embeddings/word_embeddings"] == [30000, 128]
    # The release unpacked by hand (no record): checked in full, loaded,
    # recorded again.
    record_path.unlink()
    _assert_same(fetched, pretrained.load_pretrained("albert_base_v2"))
    assert json.loads(record_path.read_text()) == record
    # The README's block, as written, from the cache.
    from tests.journeys import documented
    names = {}
    exec(documented.code_block('load_pretrained("albert_base_v2").encoder'),
         names)
    assert names["encoder"].count_params() == 11_683_584
    assert names["classifier"].predict(["a fine film"], verbose=0).shape == (1, 2)


def test_a_cache_that_cannot_be_written_is_named(server, tmp_path, monkeypatch,
                                                 tiny_release):
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("mine")
    monkeypatch.setenv(model_cache.CACHE_ENV, str(not_a_folder))
    server.files["/w.tar.gz"] = tiny_release[2]
    with pytest.raises(model_cache.FetchError, match="cannot write the cache"):
        pretrained.load_pretrained(server.url + "/w.tar.gz")
    assert not_a_folder.read_text() == "mine"
    assert server.hits["/w.tar.gz"] == 0


def _closed_port():
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hugging_face_unreachable_fails_in_seconds_in_one_line(
        tmp_path, monkeypatch):
    """huggingface_hub retries an endpoint that does not answer for half a
    minute; the fetch asks once, briefly, and says so."""
    from huggingface_hub import constants

    endpoint = f"http://127.0.0.1:{_closed_port()}"
    # What `HF_ENDPOINT` sets when huggingface_hub is imported.
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    source = released.resolve("hf://albert/albert-base-v2")
    start = time.monotonic()
    with pytest.raises(model_cache.FetchError) as raised:
        model_cache.fetch(source, check=None)
    assert time.monotonic() - start < model_cache.HF_PROBE_TIMEOUT
    line = str(raised.value)
    assert "\n" not in line
    assert (f"config.json from {endpoint}/albert/albert-base-v2/resolve/main/"
            "config.json: cannot connect to") in line
    assert "Connection refused" in line
    assert str(tmp_path / "hub") in line


def test_an_answering_endpoint_is_left_to_huggingface_hub(server):
    server.files["/"] = b""
    assert model_cache._unreachable(server.url) is None
    assert model_cache._unreachable(server.url + "/no/such/page") is None
    assert "refused" in model_cache._unreachable(
        f"http://127.0.0.1:{_closed_port()}")
