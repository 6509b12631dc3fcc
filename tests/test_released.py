import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf.convert import names
from albert_tf.convert import released


@pytest.mark.parametrize("name", sorted(released.RELEASES))
def test_each_release_count_is_its_presets_encoder(name):
    shapes = names.official_shapes(AlbertConfig.from_preset(name))
    count = sum(int(np.prod(s)) for n, s in shapes.items()
                if n.startswith("bert/"))
    assert released.RELEASES[name].num_parameters == count


def test_the_eight_releases_and_their_copies():
    assert sorted(released.RELEASES) == sorted(
        f"albert_{s}_{v}" for s in ("base", "large", "xlarge", "xxlarge")
        for v in ("v1", "v2"))
    base = released.RELEASES["albert_base_v2"]
    assert base.hf_repo == "albert/albert-base-v2"
    assert base.keras_hub_preset == "albert_base_en_uncased"
    # keras-hub's presets are the v2 weights only.
    assert released.RELEASES["albert_base_v1"].keras_hub_preset is None
    assert (released.RELEASES["albert_xxlarge_v2"].keras_hub_preset
            == "albert_extra_extra_large_en_uncased")


def test_a_name_resolves_to_the_official_archive_or_its_mirror(monkeypatch):
    monkeypatch.delenv(released.MIRROR_ENV, raising=False)
    source = released.resolve("albert_large_v1")
    assert source.kind == "archive"
    assert source.location == (
        "https://storage.googleapis.com/albert_models/albert_large_v1.tar.gz")
    assert source.cache_key == "albert_large_v1"
    monkeypatch.setenv(released.MIRROR_ENV, "http://127.0.0.1:9/models/")
    source = released.resolve("albert_large_v1")
    assert source.location == "http://127.0.0.1:9/models/albert_large_v1.tar.gz"
    assert source.cache_key == "albert_large_v1"  # one cache entry per name


def test_a_name_resolves_to_its_other_sources():
    hf = released.resolve("albert_base_v2", fetch_from="huggingface")
    assert (hf.kind, hf.location) == ("huggingface", "albert/albert-base-v2")
    kh = released.resolve("albert_base_v2", fetch_from="keras_hub")
    assert (kh.kind, kh.location) == ("keras_hub", "albert_base_en_uncased")
    with pytest.raises(ValueError, match="keras-hub has no preset of albert_base_v1"):
        released.resolve("albert_base_v1", fetch_from="keras_hub")
    with pytest.raises(ValueError, match="fetch_from must be one of"):
        released.resolve("albert_base_v2", fetch_from="s3")


def test_explicit_references():
    hf = released.resolve("hf://albert/albert-large-v2@abc123")
    assert (hf.kind, hf.location, hf.revision) == (
        "huggingface", "albert/albert-large-v2", "abc123")
    assert hf.release.name == "albert_large_v2"  # checked by its size
    mine = released.resolve("hf://me/my-albert")
    assert mine.release is None and mine.revision is None
    kaggle = released.resolve("kaggle://keras/albert/keras/albert_base_en_uncased/5")
    assert kaggle.kind == "keras_hub"
    assert kaggle.release.name == "albert_base_v2"
    assert released.resolve("albert_base_en_uncased").kind == "keras_hub"
    url = released.resolve("https://example.org/x/albert_base_v2.tar.gz")
    assert url.kind == "archive" and url.release.name == "albert_base_v2"
    other = released.resolve("https://example.org/y/albert_base_v2.tar.gz")
    assert other.cache_key != url.cache_key  # two URLs never share an entry
    assert released.resolve("http://h/m.tgz").release is None


@pytest.mark.parametrize("reference, message", [
    ("albert_base_v3", "Unknown model"),
    ("hf://just-a-name", "hf://org/repo"),
    ("https://example.org/albert.zip", "must end in .tar.gz or .tgz"),
])
def test_bad_references_say_what_is_known(reference, message):
    with pytest.raises(ValueError, match=message):
        released.resolve(reference)


def test_a_local_path_wins_over_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert released.is_reference("albert_base_v2")
    (tmp_path / "albert_base_v2").mkdir()
    assert not released.is_reference("albert_base_v2")
    assert not released.is_reference("runs/mine")  # a path, not a name
    assert not released.is_reference(None)
    assert released.is_reference("hf://albert/albert-base-v2")


def test_credentials_in_a_url_are_shown_nowhere_and_key_nothing():
    plain = released.resolve("https://h/m/albert_base_v2.tar.gz")
    signed = released.resolve("https://me:pw1@h/m/albert_base_v2.tar.gz")
    renewed = released.resolve("https://me:pw2@h/m/albert_base_v2.tar.gz")
    # The key is of the URL without its credentials: a renewed password
    # finds the same entry, and no password is hashed into a path.
    assert signed.cache_key == renewed.cache_key
    assert signed.location == "https://me:pw1@h/m/albert_base_v2.tar.gz"
    assert signed.release is plain.release
    with pytest.raises(ValueError) as error:
        released.resolve("https://me:pw1@h/m/albert.zip?token=t0k")
    assert "pw1" not in str(error.value) and "t0k" not in str(error.value)
    assert "https://me:***@h/m/albert.zip?token=***" in str(error.value)
