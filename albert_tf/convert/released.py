"""The released ALBERT weights by name, and where each can be fetched.

A *reference* names weights that are not (yet) on this machine:

- a released preset, `albert_{base,large,xlarge,xxlarge}_{v1,v2}`: the
  official TF1 archive (`<base URL>/<name>.tar.gz`, the base URL replaced
  by `$ALBERT_TF_MIRROR` when set); with `fetch_from="huggingface"` its
  Hugging Face repository, with `fetch_from="keras_hub"` its keras-hub preset
  (v2 only: keras-hub's presets are the v2 weights);
- `hf://org/repo` (optionally `@revision`): a Hugging Face repository;
- `kaggle://org/model/keras/variant[/version]` or a keras-hub preset name
  (`albert_base_en_uncased`): keras-hub's preset loader;
- `http(s)://.../name.tar.gz` (or `.tgz`): an archive in the official
  layout (`albert_config.json`, `model.ckpt*`, `30k-clean.model`); a
  `user:password@` in it is sent as a basic `Authorization` header, and
  shown nowhere (`foundation.redaction`).

An existing local path always wins over a reference of the same spelling.
`albert_tf.convert.model_cache` fetches, checks and caches what `resolve`
describes; guide: docs/converting.md.
"""

import dataclasses
import hashlib
import os
import re

from foundation import redaction

OFFICIAL_BASE_URL = "https://storage.googleapis.com/albert_models"
MIRROR_ENV = "ALBERT_TF_MIRROR"
SOURCES = ("archive", "huggingface", "keras_hub")


@dataclasses.dataclass(frozen=True)
class Release:
    """One released model: its name, its copies elsewhere and its size.

    Attributes:
        name: the preset name, also an `AlbertConfig.from_preset` name.
        hf_repo: the Hugging Face repository holding the same weights.
        keras_hub_preset: keras-hub's preset of the same weights, or None.
        num_parameters: the encoder's parameter count (embeddings and
            transformer, no pretraining heads), checked after every fetch.
    """
    name: str
    hf_repo: str
    keras_hub_preset: str | None
    num_parameters: int


def _release(size, version, num_parameters, keras_hub_preset=None):
    return Release(f"albert_{size}_{version}", f"albert/albert-{size}-{version}",
                   keras_hub_preset if version == "v2" else None, num_parameters)


RELEASES = {r.name: r for r in [
    _release(size, version, count, preset)
    for size, count, preset in [
        ("base", 11_683_584, "albert_base_en_uncased"),
        ("large", 17_683_968, "albert_large_en_uncased"),
        ("xlarge", 58_724_864, "albert_extra_large_en_uncased"),
        ("xxlarge", 222_595_584, "albert_extra_extra_large_en_uncased"),
    ]
    for version in ("v1", "v2")
]}
KERAS_HUB_PRESETS = {r.keras_hub_preset: r for r in RELEASES.values()
                     if r.keras_hub_preset}


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a reference's weights are fetched from.

    Attributes:
        reference: what the user passed.
        kind: one of `SOURCES`.
        location: the archive URL, the Hugging Face repository id or the
            keras-hub preset handle.
        revision: the Hugging Face revision, or None (the default branch).
        cache_key: the archive's folder name in the cache.
        release: the `Release` it is a copy of, or None (then only the
            format is checked, not the size).
    """
    reference: str
    kind: str
    location: str
    revision: str | None = None
    cache_key: str | None = None
    release: Release | None = None


def is_reference(path):
    """Whether `path` names weights to fetch rather than a local path.

    An existing file, folder or checkpoint prefix is local, whatever its
    spelling.
    """
    if not isinstance(path, str) or not path:
        return False
    if os.path.exists(path) or os.path.exists(path + ".index"):
        return False
    return (path in RELEASES or path in KERAS_HUB_PRESETS
            or path.startswith(("hf://", "kaggle://", "http://", "https://")))


def archive_url(name):
    """The official archive of a released preset, or its mirror's copy."""
    base = os.environ.get(MIRROR_ENV) or OFFICIAL_BASE_URL
    return f"{base.rstrip('/')}/{name}.tar.gz"


def resolve(reference, fetch_from=None):
    """Where `reference` is fetched from.

    Args:
        reference: a released preset name, `hf://...`, `kaggle://...`, a
            keras-hub preset name or an archive URL (see module docstring).
        fetch_from: for a released preset, one of `SOURCES` (default
            `"archive"`, the official release); for anything else None or
            the kind the reference already names.

    Returns:
        A `Source`.

    Raises:
        ValueError: an unknown name, a malformed reference, or a
            `fetch_from` the reference has no copy in (one line naming both).
    """
    if fetch_from is not None and fetch_from not in SOURCES:
        raise ValueError(f"fetch_from must be one of {list(SOURCES)}. "
                         f"Received: fetch_from={fetch_from!r}")
    release = RELEASES.get(reference)
    if release is not None:
        return _release_source(reference, release, fetch_from or "archive")
    if reference in KERAS_HUB_PRESETS:
        found = _keras_hub_source(reference, reference)
    elif reference.startswith("hf://"):
        found = _hf_source(reference)
    elif reference.startswith("kaggle://"):
        found = _keras_hub_source(reference, reference)
    elif reference.startswith(("http://", "https://")):
        found = _url_source(reference)
    else:
        raise ValueError(
            "Unknown model: not a local path, a released preset "
            f"({', '.join(sorted(RELEASES))}), a keras-hub preset, hf://, "
            "kaggle:// or an http(s) archive URL. Received: "
            f"{redaction.redact(reference)!r}")
    if fetch_from is not None and fetch_from != found.kind:
        raise ValueError(f"{redaction.redact(reference)!r} is a "
                         f"{found.kind} reference; "
                         f"fetch_from={fetch_from!r} applies to released "
                         "preset names")
    return found


def _release_source(reference, release, fetch_from):
    if fetch_from == "archive":
        return Source(reference, "archive", archive_url(release.name),
                      cache_key=release.name, release=release)
    if fetch_from == "huggingface":
        return Source(reference, "huggingface", release.hf_repo,
                      release=release)
    if release.keras_hub_preset is None:
        raise ValueError(f"keras-hub has no preset of {release.name} (its "
                         "ALBERT presets are the v2 weights). Received: "
                         f"fetch_from='keras_hub' for {reference!r}")
    return Source(reference, "keras_hub", release.keras_hub_preset,
                  release=release)


def _hf_source(reference):
    repo, _, revision = reference[len("hf://"):].partition("@")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ValueError("A Hugging Face reference is hf://org/repo or "
                         f"hf://org/repo@revision. Received: {reference!r}")
    release = next((r for r in RELEASES.values() if r.hf_repo == repo), None)
    return Source(reference, "huggingface", repo, revision or None,
                  release=release)


def _keras_hub_source(reference, handle):
    release = KERAS_HUB_PRESETS.get(handle)
    if release is None and handle.startswith("kaggle://"):
        # kaggle://keras/albert/keras/<preset>[/<version>]
        parts = handle[len("kaggle://"):].split("/")
        release = KERAS_HUB_PRESETS.get(parts[3]) if len(parts) >= 4 else None
    return Source(reference, "keras_hub", handle, release=release)


def _url_source(reference):
    base = reference.rsplit("/", 1)[-1].split("?", 1)[0]
    stem = re.sub(r"(\.tar\.gz|\.tgz)$", "", base)
    if stem == base or not stem:
        raise ValueError("An archive URL must end in .tar.gz or .tgz (the "
                         "official layout). Received: "
                         f"{redaction.redact(reference)!r}")
    release = RELEASES.get(stem)
    # Another URL of the same name is another entry: the key carries a
    # digest of the URL, so two archives never share a cache folder. The
    # digest is of the URL without its credentials: a key shown in a path
    # never derives from a password, and a renewed token finds its entry.
    digest = hashlib.sha256(
        redaction.redact(reference).encode()).hexdigest()[:12]
    key = re.sub(r"[^\w.-]", "_", stem) + "-" + digest
    return Source(reference, "archive", reference, cache_key=key,
                  release=release)


__all__ = ["KERAS_HUB_PRESETS", "MIRROR_ENV", "OFFICIAL_BASE_URL", "RELEASES",
           "SOURCES", "Release", "Source", "archive_url", "is_reference",
           "resolve"]
