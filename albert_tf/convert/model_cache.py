"""Fetching released weights into a local cache, checked before use.

Each source is fetched by the library that keeps it: archives by
`keras.utils.get_file`, Hugging Face repositories by `huggingface_hub`
(its own cache, `HF_ENDPOINT`, `HF_HUB_OFFLINE`), keras-hub presets by
keras-hub's preset loader (Kaggle's cache). All show a progress bar.

Archives live in `$ALBERT_TF_CACHE` (default `~/.cache/albert_tf`, or
under `$XDG_CACHE_HOME`), one folder per archive, unpacked. A download
goes to a hidden `.<key>.partial-*` folder, is unpacked and checked there
(`check`: the converter reads it and the model has the release's
parameter count), and only then renamed to `<key>/`: a folder of that
name is always whole. A dropped connection restarts the download (up to
`ATTEMPTS` times); a killed run leaves only a hidden partial folder, which
the next fetch of the same key removes. Two processes fetching one key
take turns on `.<key>.lock`: the second finds the first's copy.

Every failure is one `FetchError` line naming the URL, the cache path and
what was wrong; nothing is left in the cache. Guide: docs/converting.md.
"""

import contextlib
import errno
import glob
import os
import re
import shutil
import socket
import tarfile
import tempfile

import filelock

from albert_tf.convert import released

CACHE_ENV = "ALBERT_TF_CACHE"
ATTEMPTS = 3
# Seconds without a byte before a download counts as dropped.
TIMEOUT = 60.0


class FetchError(ValueError):
    """A model that could not be fetched or failed its checks (one line)."""


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
        FetchError: the download, the unpacking or the check failed, or the
            network is not reachable and nothing is cached.
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
        return model_folder(entry, source)
    try:
        os.makedirs(root, exist_ok=True)
        with filelock.FileLock(os.path.join(root, f".{source.cache_key}.lock")):
            if not os.path.isdir(entry):  # else another process fetched it
                _fetch_locked(source, check, root, entry)
    except OSError as error:
        # A read-only or full cache: no network problem, nothing to fetch
        # by hand.
        raise FetchError(_archive_line(
            source, entry, "cannot write the cache "
            f"({error.strerror or error}: {error.filename or root})")) from None
    return model_folder(entry, source)


def _fetch_locked(source, check, root, entry):
    """Downloads, unpacks, checks and renames into place (the lock held)."""
    _remove_partials(root, source.cache_key)
    staging = tempfile.mkdtemp(prefix=f".{source.cache_key}.partial-", dir=root)
    try:
        unpacked = _download_and_unpack(source, staging, entry)
        folder = model_folder(unpacked, source, entry)
        try:
            check(folder, source)
        except Exception as error:  # noqa: BLE001 - any check failure
            raise FetchError(_archive_line(
                source, entry, f"the archive is not {_expected(source)}: "
                f"{_first_line(error)}")) from None
        os.rename(unpacked, entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove_partials(root, key):
    """Partial folders of `key` left by a killed fetch (the lock is held,
    so none is being written)."""
    for partial in glob.glob(os.path.join(root, glob.escape(f".{key}.partial-")
                                          + "*")):
        shutil.rmtree(partial, ignore_errors=True)


def _download_and_unpack(source, staging, entry):
    import keras

    name = source.location.rsplit("/", 1)[-1].split("?", 1)[0]
    archive, errors = None, []
    while archive is None and len(errors) < ATTEMPTS:
        try:
            with _socket_timeout(TIMEOUT):
                archive = keras.utils.get_file(
                    fname=name, origin=source.location, cache_dir=staging,
                    cache_subdir="download")
        except Exception as error:  # noqa: BLE001 - get_file raises Exception
            errors.append(_fetch_failure(error))
            if _is_final(error):
                break
    if archive is None or not os.path.isfile(archive):
        raise FetchError(_archive_line(source, entry, errors[-1], by_hand=True))
    unpacked = os.path.join(staging, "unpacked")
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
    except OSError as error:
        if error.errno in _WRITE_ERRNOS:
            raise
        raise FetchError(_archive_line(
            source, entry, "the download is not a whole .tar.gz archive "
            f"({_first_line(error)})")) from None
    except (tarfile.TarError, EOFError, ValueError) as error:
        raise FetchError(_archive_line(
            source, entry, "the download is not a whole .tar.gz archive "
            f"({_first_line(error)})")) from None
    os.remove(archive)
    return unpacked


# Failures of the cache's disk, not of the archive.
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS,
                 errno.EFBIG, errno.EPERM)


def _fetch_failure(error):
    """get_file's "URL fetch failure on <url>: <code> -- <reason>" without
    the URL, which the caller's line already names."""
    text = _first_line(error)
    match = re.match(r"URL fetch failure on \S+: (\S+) -- (.*)", text)
    if not match:
        return text
    code, reason = match.groups()
    if code in ("None", "-2", "-3", "111", "110", "101"):
        return f"cannot connect ({reason})"
    return f"HTTP {code} {reason}"


def _is_final(error):
    """An answer from the server (404, 403...) or no network at all:
    trying again would get the same."""
    text = str(error)
    return (" 4" in text and " -- " in text) or "Name or service not known" in text \
        or "Temporary failure in name resolution" in text


@contextlib.contextmanager
def _socket_timeout(seconds):
    # keras.utils.get_file opens its URL without a timeout; a stalled
    # server would hang the fetch forever.
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(old)


def model_folder(folder, source, entry=None):
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


def _archive_line(source, entry, problem, by_hand=False):
    line = (f"Cannot load {source.reference!r} from {source.location}: "
            f"{problem}. Cache: {entry}")
    if by_hand:
        line += (f" (fetch the archive by hand and unpack it into that "
                 f"folder, or set ${released.MIRROR_ENV})")
    return line


# === Hugging Face ===

_HF_FILES = ("config.json", "spiece.model", "model.safetensors")


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
        # Checked when it was downloaded (a copy that failed was removed).
        return cached
    paths = []
    for name in _HF_FILES:
        try:
            paths.append(huggingface_hub.hf_hub_download(
                source.location, name, revision=source.revision))
        except Exception as error:  # noqa: BLE001 - its errors have no base
            url = huggingface_hub.hf_hub_url(source.location, name,
                                             revision=source.revision)
            raise FetchError(
                f"Cannot load {source.reference!r}: {name} from {url}: "
                f"{_first_line(error)}. Cache: {constants.HF_HUB_CACHE} "
                f"(download {', '.join(_HF_FILES)} by hand into one folder "
                "and pass that folder)") from None
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
    return folder


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
    from albert_tf.convert import keras_hub as keras_hub_format

    try:
        from keras_hub.src.utils import preset_utils
    except ImportError:
        raise FetchError(f"Cannot load {source.reference!r}: keras-hub is "
                         "not installed") from None
    names = (keras_hub_format.CONFIG_NAME, keras_hub_format.WEIGHTS_NAME,
             keras_hub_format.SPM_PATH)
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
        if name == keras_hub_format.CONFIG_NAME:
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


__all__ = ["ATTEMPTS", "CACHE_ENV", "FetchError", "cache_root", "fetch",
           "model_folder"]
