"""Fetching released weights into a local cache, checked before use.

Archives are downloaded here into `$ALBERT_TF_CACHE`, unpacked only after
every member is checked, checked as a model, and renamed into place with a
record that every later load compares cheaply; Hugging Face repositories
and keras-hub presets come through their own libraries' caches. Every
failure is one `FetchError` line and leaves nothing in the cache. Guide:
docs/converting.md#released-weights-by-name.
"""

import base64
import contextlib
import errno
import http.client
import json
import logging
import os
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from albert_tf.convert import released
from albert_tf.training import model_dir
from foundation import output_lock
from foundation import progress
from foundation import redaction
from foundation import run_record
from foundation import safe_archive
from foundation import safe_io

CACHE_ENV = "ALBERT_TF_CACHE"
ATTEMPTS = 3
# Seconds without a byte before a download counts as dropped.
TIMEOUT = 60.0
# What a cache entry holds about itself once checked.
RECORD_NAME = ".albert_cache.json"
RECORD_VERSION = 1
# How often a fetch waiting for another one's lock looks again.
_LOCK_POLL = 0.5
_CHUNK = 1 << 20


class FetchError(ValueError):
    """A model that could not be fetched or failed its checks (one line,
    URLs without their credentials)."""

    def __init__(self, message):
        super().__init__(redaction.redact(message))


def cache_root():
    """The archives' cache folder: `$ALBERT_TF_CACHE`, else
    `$XDG_CACHE_HOME/albert_tf`, else `~/.cache/albert_tf`."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "albert_tf")
    return os.path.abspath(root)


def fetch(source, check):
    """The local folder holding `source`'s weights, fetched if not cached.

    Args:
        source: a `released.Source`.
        check: called with the local model folder and the `Source`; raises
            (any exception, its message says what is wrong) when the weights
            are not the release's.

    Returns:
        The local model folder (any format `load_pretrained` reads).

    Raises:
        FetchError: the download, the unpacking or the check failed, the
            cached entry is not the release, or the network is not reachable
            and nothing is cached.
    """
    if source.kind == "archive":
        return _fetch_archive(source, check)
    if source.kind == "huggingface":
        return _fetch_huggingface(source, check)
    return _fetch_keras_hub(source, check)


# === Archives ===

def _fetch_archive(source, check):
    root = cache_root()
    entry = os.path.join(root, source.cache_key)
    if os.path.isdir(entry):
        return verified_entry(entry, source, check)
    try:
        os.makedirs(root, exist_ok=True)
        lock = _take_turn(root, source.cache_key)
        try:
            if not os.path.isdir(entry):  # else another process fetched it
                _fetch_locked(source, check, lock, root, entry)
        finally:
            lock.release()
    except safe_io.OutputError as error:
        raise FetchError(_archive_line(source, entry, str(error))) from None
    except OSError as error:
        # A read-only or full cache: no network problem, nothing to fetch
        # by hand.
        raise FetchError(_archive_line(
            source, entry, "cannot write the cache "
            f"({error.strerror or error}: {error.filename or root})")) from None
    return verified_entry(entry, source, check)


def _take_turn(root, key):
    """The lock of `key`'s entry, once no other fetch holds it."""
    lock = output_lock.OutputLock(os.path.join(root, key), "fetch",
                                  flag="cache entry", kind="file")
    waiting = False
    while True:
        try:
            return lock.acquire()
        except output_lock.OutputLockedError:
            if not waiting:
                logging.info("Waiting for another process fetching %s",
                             os.path.join(root, key))
                waiting = True
            time.sleep(_LOCK_POLL)


def _fetch_locked(source, check, lock, root, entry):
    """Downloads, unpacks, checks and renames into place (the lock held)."""
    lock.remove_previous_leftovers()
    staging = lock.make_folder(root, f".{source.cache_key}.partial-")
    try:
        archive = os.path.join(staging, "archive")
        _download(source, archive, entry)
        unpacked = os.path.join(staging, "unpacked")
        try:
            safe_archive.extract(archive, unpacked)
        except safe_archive.ArchiveError as error:
            problem = str(error)
            if problem.startswith("not a whole"):
                problem = "the download is " + problem
            raise FetchError(_archive_line(source, entry, problem)) from None
        os.remove(archive)
        folder = unpacked_model_folder(unpacked, source, entry)
        try:
            check(folder, source)
        except Exception as error:  # noqa: BLE001 - any check failure
            raise FetchError(_archive_line(
                source, entry, f"the archive is not {_expected(source)}: "
                f"{_first_line(error)}")) from None
        _write_record(unpacked, folder, source)
        os.rename(unpacked, entry)
    finally:
        lock.remove_recorded(staging)
        if os.path.lexists(staging):
            shutil.rmtree(staging, ignore_errors=True)


# === Downloading ===

def _download(source, path, entry):
    """Downloads `source.location` into the new file `path`, restarting a
    dropped download up to `ATTEMPTS` times."""
    request = _request(source.location)
    errors = []
    while len(errors) < ATTEMPTS:
        try:
            _download_once(request, path, source, entry)
            return
        except urllib.error.HTTPError as error:
            error.close()
            errors.append(f"HTTP {error.code} {error.reason}")
            if 400 <= error.code < 500:
                break  # the server's answer: asking again gets the same
        except urllib.error.URLError as error:
            errors.append(f"cannot connect ({error.reason})")
            if isinstance(error.reason, OSError) and error.reason.errno in (
                    -2, -3, -5):
                break  # no such host: asking again gets the same
        except (http.client.HTTPException, ConnectionError, TimeoutError,
                _Dropped) as error:
            errors.append(f"the connection dropped ({_first_line(error)})")
        except OSError as error:
            if error.errno in _WRITE_ERRNOS or isinstance(
                    error, safe_io.OutputError):
                raise
            errors.append(f"the connection dropped ({_first_line(error)})")
        if os.path.lexists(path):
            os.remove(path)
    raise FetchError(_archive_line(source, entry, errors[-1], by_hand=True))


class _Dropped(Exception):
    """A download that ended before its announced length."""


def _request(url):
    """The request for `url`: its `user:password@` taken out of the URL
    and sent as a basic `Authorization` header, which urllib does not send
    on to where a redirect leads."""
    bare, credentials = redaction.split_credentials(url)
    request = urllib.request.Request(bare, headers={
        "User-Agent": "albert_tf (model cache)"})
    if credentials:
        token = base64.b64encode(":".join(credentials).encode("utf-8"))
        request.add_unredirected_header("Authorization",
                                        "Basic " + token.decode("ascii"))
    return request


def _download_once(request, path, source, entry):
    name = urllib.parse.urlsplit(request.full_url).path.rsplit("/", 1)[-1]
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        length = response.headers.get("Content-Length")
        length = int(length) if length and length.isdigit() else None
        print(f"Downloading {redaction.redact(source.location)} into {entry}",
              file=sys.stderr, flush=True)
        received = 0
        with safe_io.open_new(path) as out, progress.bar(
                total=length / 1e6 if length else None,
                description=f"Downloading {name}", unit="MB") as bar:
            for block in iter(lambda: response.read(_CHUNK), b""):
                out.write(block)
                received += len(block)
                bar.update(len(block) / 1e6)
    if length is not None and received != length:
        raise _Dropped(f"{received:,} of {length:,} bytes")


# Failures of the cache's disk, not of the archive.
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS,
                 errno.EFBIG, errno.EPERM)


def unpacked_model_folder(folder, source, entry=None):
    """The folder inside an unpacked archive that holds the model: the
    folder itself or its only subfolder (the official archives hold one,
    e.g. `albert_base/`)."""
    entries = [e for e in os.listdir(folder) if not e.startswith(".")]
    subfolders = [e for e in entries if os.path.isdir(os.path.join(folder, e))]
    if len(subfolders) == 1 and len(entries) == 1:
        return os.path.join(folder, subfolders[0])
    if entries:
        return folder
    raise FetchError(_archive_line(source, entry or folder,
                                   "the archive is empty"))


# === A cached entry, checked on every load ===

def verified_entry(entry, source, check):
    """The model folder of a cached entry, once it is shown to hold
    `source`'s weights.

    Its record (`RECORD_NAME`, written when it was fetched or first checked)
    must name the same release and match the entry's facts now: the files'
    sizes and ends, the config, the tensor shapes (no tensor is read).
    Otherwise (a folder unpacked by hand, or changed since) the entry is
    checked in full with `check`, and recorded when it passes.

    Args:
        entry: the cache folder of `source`.
        source: a `released.Source` of kind "archive".
        check: as `fetch`'s.

    Returns:
        The model folder inside `entry`.

    Raises:
        FetchError: the entry is not `source`'s weights (names the folder
            and how to clear it).
    """
    try:
        names = [e for e in os.listdir(entry) if not e.startswith(".")]
    except OSError as error:
        raise FetchError(_entry_line(
            source, entry, f"cannot be read ({error.strerror})")) from None
    if not names:
        raise FetchError(_entry_line(source, entry, "is empty"))
    folder = unpacked_model_folder(entry, source)
    record = _read_record(entry)
    if record is not None and _same(record, _record(entry, folder, source)):
        return folder
    try:
        check(folder, source)
    except Exception as error:  # noqa: BLE001 - any check failure
        what = ("changed since it was checked" if record else
                "has no record of a check (unpacked by hand?)")
        raise FetchError(_entry_line(
            source, entry, f"{what} and is not {_expected(source)}: "
            f"{_first_line(error)}")) from None
    if os.path.islink(entry):
        # Never written through a link the cache did not make: checked in
        # full on each load instead.
        logging.info("%s is a symbolic link: checked in full on every load",
                     entry)
    else:
        try:
            _write_record(entry, folder, source)
        except (OSError, safe_io.OutputError) as error:
            logging.warning("Could not record the check of %s (%s); it is "
                            "checked in full on the next load", entry,
                            _first_line(error))
    return folder


def _entry_line(source, entry, problem):
    return (f"Cannot load {source.reference!r}: the cached folder {entry} "
            f"{problem}. Remove it (rm -r {entry}) to fetch {source.location} "
            "again, or unpack the release's archive into it")


def _record(entry, folder, source):
    """What the record of `entry` says when it holds `source` unchanged."""
    return {
        "version": RECORD_VERSION,
        "source": redaction.redact(source.location),
        "release": source.release.name if source.release else None,
        "num_parameters": (source.release.num_parameters if source.release
                           else None),
        **model_facts(entry, folder),
    }


def _same(record, expected):
    """Whether a record read back matches; the URL it was fetched from
    may differ (a mirror, a renewed signature): the key names the release
    or the URL already."""
    return all(record.get(k) == v for k, v in expected.items()
               if k != "source")


def _write_record(entry, folder, source):
    safe_io.write_atomically(
        os.path.join(entry, RECORD_NAME),
        json.dumps(_record(entry, folder, source), indent=1, sort_keys=True))


def _read_record(entry):
    return _read_json(os.path.join(entry, RECORD_NAME))


def model_facts(entry, folder):
    """Facts about a model folder, cheap to read again on every load.

    Args:
        entry: the cache entry (file paths are given relative to it).
        folder: the model folder inside it.

    Returns:
        A JSON-ready dict: `files` (each file's path and size, and a
        fingerprint of their first and last MiB), `config` (the config
        file's fields), `shapes` (`{tensor: shape}` from a checkpoint
        index or a safetensors header, else None).
    """
    paths = sorted(
        os.path.join(parent, name)
        for parent, folders, names in os.walk(entry)
        for name in names if not name.startswith(".")
        and os.path.isfile(os.path.join(parent, name)))
    return {
        "files": {os.path.relpath(p, entry): os.path.getsize(p)
                  for p in paths},
        "fingerprint": run_record.content_fingerprint(paths),
        "config": _config_fields(folder),
        "shapes": _tensor_shapes(folder),
    }


def _config_fields(folder):
    for name in (model_dir.CONFIG_NAME, "config.json"):  # TF1/ours, HF
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
    return None


def _tensor_shapes(folder):
    """`{tensor: shape}` from the checkpoint's index or the safetensors
    file's header: no tensor is read."""
    safetensors = os.path.join(folder, "model.safetensors")
    if os.path.isfile(safetensors):
        return _safetensors_shapes(safetensors)
    from albert_tf.convert import tf1

    try:
        prefix = model_dir.resolve_checkpoint(folder, release=True)
        shapes = tf1.checkpoint_names(prefix)
    except Exception:  # noqa: BLE001 - no checkpoint, or not readable
        return None
    return {name: list(shape) for name, shape in sorted(shapes.items())}


def _safetensors_shapes(path):
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if size > 100 << 20:
                return None
            header = json.loads(f.read(size))
    except (OSError, ValueError):
        return None
    return {name: info.get("shape") for name, info in sorted(header.items())
            if isinstance(info, dict) and name != "__metadata__"}


def _archive_line(source, entry, problem, by_hand=False):
    line = (f"Cannot load {source.reference!r} from {source.location}: "
            f"{problem}. Cache: {entry}")
    if by_hand:
        line += (f" (fetch the archive by hand and unpack it into that "
                 f"folder, or set ${released.MIRROR_ENV})")
    return line


# === Hugging Face ===

_HF_FILES = ("config.json", "spiece.model", "model.safetensors")
# Seconds the first request to the Hugging Face endpoint may wait for an
# answer: huggingface_hub retries an unreachable one for half a minute
# before it says so.
HF_PROBE_TIMEOUT = 5.0


def _fetch_huggingface(source, check):
    try:
        import huggingface_hub
        from huggingface_hub import constants
    except ImportError:
        raise FetchError(f"Cannot load {source.reference!r}: fetching from "
                         "Hugging Face needs huggingface_hub (pip install "
                         "huggingface_hub)") from None
    cached = _hf_cached(huggingface_hub, source)
    if cached:
        return _verified_snapshot(cached, source, check)

    def failed(name, problem):
        url = huggingface_hub.hf_hub_url(source.location, name,
                                         revision=source.revision)
        return FetchError(
            f"Cannot load {source.reference!r}: {name} from {url}: "
            f"{problem}. Cache: {constants.HF_HUB_CACHE} (download "
            f"{', '.join(_HF_FILES)} by hand into one folder and pass that "
            "folder)")

    # Offline, huggingface_hub answers at once from its cache.
    unreachable = (None if constants.HF_HUB_OFFLINE
                   else _unreachable(constants.ENDPOINT))
    if unreachable:
        raise failed(_HF_FILES[0], f"cannot connect to {constants.ENDPOINT} "
                     f"({unreachable}) and it is not in the cache")
    paths = []
    for name in _HF_FILES:
        try:
            paths.append(huggingface_hub.hf_hub_download(
                source.location, name, revision=source.revision))
        except Exception as error:  # noqa: BLE001 - its errors have no base
            raise failed(name, _first_line(error)) from None
    folder = os.path.dirname(paths[0])
    try:
        check(folder, source)
    except Exception as error:  # noqa: BLE001 - any check failure
        _remove_hf_files(paths)
        raise FetchError(
            f"Cannot load {source.reference!r} from "
            f"{constants.ENDPOINT}/{source.location}: the repository is not "
            f"{_expected(source)}: {_first_line(error)}. Removed from the "
            f"cache: {folder}") from None
    _write_snapshot_record(folder, source)
    return folder


def _snapshot_record_path(source):
    """Where the check of a Hugging Face snapshot is recorded: in this
    package's cache (huggingface_hub's cache is its own), one file per
    repository and revision."""
    import hashlib
    key = hashlib.sha256(f"{source.location}@{source.revision}".encode(
        "utf-8")).hexdigest()[:16]
    return os.path.join(cache_root(), "huggingface", f"{key}.json")


def _verified_snapshot(folder, source, check):
    """A snapshot already in huggingface_hub's cache, once it is shown to
    hold `source`'s weights: its facts against the record of its last check
    (milliseconds, no tensor read), else a full check, recorded when it
    passes. A snapshot that is not the release is refused in one line
    naming it; it is not removed (it is huggingface_hub's)."""
    record = _read_json(_snapshot_record_path(source))
    expected = _record(folder, folder, source)
    if record is not None and _same(record, expected):
        return folder
    try:
        check(folder, source)
    except Exception as error:  # noqa: BLE001 - any check failure
        raise FetchError(
            f"Cannot load {source.reference!r}: the copy in huggingface_hub's "
            f"cache ({folder}) is not {_expected(source)}: "
            f"{_first_line(error)}. Remove it (huggingface-cli delete-cache, "
            "or rm -r the repository's folder there) to download it "
            "again") from None
    _write_snapshot_record(folder, source)
    return folder


def _write_snapshot_record(folder, source):
    path = _snapshot_record_path(source)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        safe_io.write_atomically(path, json.dumps(
            _record(folder, folder, source), indent=1, sort_keys=True))
    except (OSError, safe_io.OutputError) as error:
        logging.warning("Could not record the check of %s (%s); it is "
                        "checked in full on the next load", folder,
                        _first_line(error))


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _unreachable(endpoint):
    """Why `endpoint` gives no answer within `HF_PROBE_TIMEOUT` (refused, no
    such host, no route, timed out), or None when it answers.

    One request, through the proxies the environment names (as
    huggingface_hub's requests go). Any HTTP answer, an error status
    included, and a TLS failure count as an answer: huggingface_hub then
    says what is wrong.
    """
    request = urllib.request.Request(endpoint, method="HEAD", headers={
        "User-Agent": "albert_tf (model cache)"})
    try:
        with urllib.request.urlopen(request, timeout=HF_PROBE_TIMEOUT):
            return None
    except urllib.error.HTTPError as error:
        error.close()
        return None
    except urllib.error.URLError as error:
        reason = error.reason
    except (http.client.HTTPException, ValueError):
        return None
    except OSError as error:  # A timeout or a reset while reading.
        reason = error
    if isinstance(reason, ssl.SSLError) or not isinstance(reason, OSError):
        return None
    return _first_line(reason)


def _hf_cached(huggingface_hub, source):
    """The snapshot folder when every file is in huggingface_hub's cache
    (no network asked), else None."""
    paths = []
    for name in _HF_FILES:
        try:
            paths.append(huggingface_hub.hf_hub_download(
                source.location, name, revision=source.revision,
                local_files_only=True))
        except Exception:  # noqa: BLE001 - not cached, whatever the reason
            return None
    return os.path.dirname(paths[0])


def _remove_hf_files(paths):
    """The snapshot's links and the blobs they point to."""
    for path in paths:
        target = os.path.realpath(path)
        for p in {path, target}:
            with contextlib.suppress(OSError):
                os.remove(p)


# === keras-hub presets ===

def _fetch_keras_hub(source, check):
    from albert_tf.convert import keras_hub as keras_hub_lib
    try:
        from keras_hub.src.utils import preset_utils
    except ImportError:
        raise FetchError(f"Cannot load {source.reference!r}: keras-hub is "
                         "not installed") from None
    names = (keras_hub_lib.CONFIG_NAME, keras_hub_lib.WEIGHTS_NAME,
             keras_hub_lib.SPM_PATH)
    for name in names:
        try:
            path = preset_utils.get_file(source.location, name)
        except Exception as error:  # noqa: BLE001 - kagglehub's errors vary
            cache = os.environ.get("KAGGLEHUB_CACHE") or os.path.join(
                os.path.expanduser("~"), ".cache", "kagglehub")
            raise FetchError(
                f"Cannot load {source.reference!r}: {name} of keras-hub "
                f"preset {source.location}: {_first_line(error)}. Cache: "
                f"{cache} (or download the preset by hand and pass its "
                "folder)") from None
        if name == keras_hub_lib.CONFIG_NAME:
            folder = os.path.dirname(path)
    try:
        check(folder, source)
    except Exception as error:  # noqa: BLE001 - any check failure
        raise FetchError(
            f"Cannot load {source.reference!r} from keras-hub preset "
            f"{source.location}: it is not {_expected(source)}: "
            f"{_first_line(error)}. Cache: {folder}") from None
    return folder


def _expected(source):
    if source.release is None:
        return "an ALBERT model"
    return (f"{source.release.name} ({source.release.num_parameters:,} "
            "parameters)")


def _first_line(error):
    text = str(getattr(error, "message", None) or error).strip()
    return (text.splitlines() or [type(error).__name__])[0].rstrip(".")


__all__ = ["ATTEMPTS", "CACHE_ENV", "FetchError", "RECORD_NAME", "cache_root",
           "fetch", "model_facts", "unpacked_model_folder", "verified_entry"]
