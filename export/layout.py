"""TF Serving layout: `<export_dir>/<model_name>/<version>/`, written safely.

TF Serving watches `<export_dir>/<model_name>/` and serves the highest
numeric version folder. So a version folder must appear complete or not at
all, and an existing version is never touched: everything is written under a
staging folder first (whose name is not a number, so TF Serving never looks
at it) and then renamed into place.

The staging folder is made and recorded in `<export_dir>`'s lock
(`foundation.output_lock.OutputLock.make_folder`); the next export removes what
a killed one recorded, and only that entry: a user's `.staging-mine` is
never touched. Every version folder gets `assets.extra/export.json`
(`RECORD_FILE`): the model folders written with it and their files, so a
version that a kill cut short between two renames is named by the next
export (`incomplete_versions`), with what to do.

Works on local paths and on anything `tf.io.gfile` reads (`gs://...`); on
object stores a folder rename is a copy, so only local renames are atomic.
"""

import contextlib
import json
import os

import tensorflow as tf
from absl import logging

from albert_tf.training import output_folder
from export.options import check_model_name

STAGING_PREFIX = ".staging-"
RECORD_FILE = os.path.join("assets.extra", "export.json")
PROGRAM = "export"


class VersionExistsError(FileExistsError):
    """The requested version folder already exists."""


def list_versions(model_dir):
    """The numeric version folders of `<export_dir>/<model_name>`.

    Args:
        model_dir: the model's folder (may not exist).

    Returns:
        A sorted list of ints.
    """
    if not tf.io.gfile.isdir(model_dir):
        return []
    versions = []
    for entry in tf.io.gfile.listdir(model_dir):
        entry = entry.rstrip("/")
        if entry.isdigit():
            versions.append(int(entry))
    return sorted(versions)


def next_version(model_dirs):
    """The next free version, shared by several models exported together.

    Args:
        model_dirs: folders of the models that get the same version.

    Returns:
        One more than the highest existing version of any of them (1 when none
        exists).
    """
    highest = 0
    for model_dir in model_dirs:
        versions = list_versions(model_dir)
        if versions:
            highest = max(highest, versions[-1])
    return highest + 1


def version_dir(export_dir, model_name, version):
    """`<export_dir>/<model_name>/<version>`."""
    return os.path.join(export_dir, model_name, str(int(version)))


def read_record(folder):
    """The `RECORD_FILE` of a version folder, or None (an export made
    before the record existed, or a record that is not this package's)."""
    path = os.path.join(folder, RECORD_FILE)
    try:
        with tf.io.gfile.GFile(path) as f:
            record = json.loads(f.read())
    except (tf.errors.OpError, OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(
            record.get("files"), dict):
        return None
    return record


def incomplete_versions(export_dir, model_names):
    """Versions of `model_names` that an export left incomplete.

    A version is incomplete when the record of one of its folders lists a
    model folder or a file that is not there (a kill between the renames
    of `StagedExport.commit`).

    Args:
        export_dir: the serving base folder.
        model_names: the model folders to look at.

    Returns:
        A sorted list of `(version, missing)`: the version and the missing
        paths, relative to `export_dir`.
    """
    found = {}
    for name in model_names:
        for version in list_versions(os.path.join(export_dir, name)):
            record = read_record(version_dir(export_dir, name, version))
            if record is None or version in found:
                continue
            missing = []
            for model, files in sorted(record["files"].items()):
                folder = version_dir(export_dir, str(model), version)
                relative = os.path.join(str(model), str(version))
                if not tf.io.gfile.isdir(folder):
                    missing.append(relative)
                    continue
                missing += [os.path.join(relative, str(f)) for f in files
                            if not tf.io.gfile.exists(
                                os.path.join(folder, str(f)))]
            if missing:
                found[version] = missing
    return sorted(found.items())


def _describe_incomplete(export_dir, model_names, version, missing):
    """The one line that names an incomplete version and what to do."""
    present = [version_dir(export_dir, n, version) for n in model_names
               if tf.io.gfile.exists(version_dir(export_dir, n, version))]
    return ("version %d of %s was left incomplete by a killed export (no %s); "
            "export again with --version=%d, or remove %s"
            % (version, model_names[0], ", no ".join(missing),
               next_version([os.path.join(export_dir, n)
                             for n in model_names]),
               " and ".join(present) or "nothing"))


def check_version_free(export_dir, model_names, version):
    """Refuses a version that exists for one of `model_names`.

    Raises:
        VersionExistsError: naming the version folder (and, for a version
            a killed export left incomplete, what is missing and what to
            do).
    """
    model_names = list(model_names)
    for version_found, missing in incomplete_versions(export_dir, model_names):
        if version_found == version:
            raise VersionExistsError(_describe_incomplete(
                export_dir, model_names, version, missing))
    for name in model_names:
        target = version_dir(export_dir, name, version)
        if tf.io.gfile.exists(target):
            raise VersionExistsError(
                "Version %d of %r already exists; versions are never "
                "overwritten (leave --version unset for the next free "
                "one). Received: %s" % (version, name, target))


def warn_incomplete(export_dir, model_names):
    """Logs every version of `model_names` a killed export left incomplete
    (TF Serving may serve part of it), with what to do."""
    model_names = list(model_names)
    for version, missing in incomplete_versions(export_dir, model_names):
        logging.warning("%s", _describe_incomplete(export_dir, model_names,
                                                   version, missing))


class StagedExport:
    """Writes several versioned artifacts and moves them into place at the end.

    Usage:

        staged = StagedExport(export_dir, ["albert", "albert_encoder"], version)
        for name in ...:
            write(staged.path(name))    # a folder that does not exist yet
        final_paths = staged.commit()

    The export holds `export_dir`'s lock from here to `commit` or `abort`
    (re-entrant: a program that holds it already keeps it), and the staging
    folder is recorded there, so a killed export's folder is removed by the
    next one and nothing else is.

    Args:
        export_dir: the serving base folder.
        model_names: the model folders written together.
        version: an int, or None for `next_version` of those models.

    Raises:
        ValueError: a version below 1, or a model name that is not one
            folder name (`export.options.check_model_name`).
        VersionExistsError: the version exists for one of the models.
        foundation.output_lock.OutputLockedError: another process exports
            there.
    """

    def __init__(self, export_dir, model_names, version=None):
        self.export_dir = export_dir
        self.model_names = list(model_names)
        for name in self.model_names:
            check_model_name(name)
        model_dirs = [os.path.join(export_dir, n) for n in self.model_names]
        if version is not None and int(version) < 1:
            raise ValueError("version must be a positive integer. "
                             "Received: version=%r" % version)
        self._hold = contextlib.ExitStack()
        self._lock = self._hold.enter_context(holding(export_dir, PROGRAM))
        try:
            if version is None:
                warn_incomplete(export_dir, self.model_names)
                version = next_version(model_dirs)
            self.version = int(version)
            self._check_free()
            self.staging_dir = self._lock.make_folder(
                export_dir, "%s%d-" % (STAGING_PREFIX, self.version))
        except BaseException:
            self._hold.close()
            raise

    def _check_free(self):
        check_version_free(self.export_dir, self.model_names, self.version)

    def path(self, model_name):
        """Where to write `model_name` before `commit`."""
        return os.path.join(self.staging_dir, model_name)

    def _write_records(self):
        """Writes `RECORD_FILE` into every staged folder: the folders of
        this version and the files each holds."""
        files = {name: sorted(e.rstrip("/") for e in tf.io.gfile.listdir(
            self.path(name)) if e.rstrip("/") != "assets.extra")
            for name in self.model_names}
        record = json.dumps({"version": self.version, "files": files},
                            indent=1) + "\n"
        for name in self.model_names:
            path = os.path.join(self.path(name), RECORD_FILE)
            tf.io.gfile.makedirs(os.path.dirname(path))
            with tf.io.gfile.GFile(path, "w") as f:
                f.write(record)

    def commit(self):
        """Renames every staged artifact to its version folder.

        Returns:
            A dict model name -> final version folder.

        Raises:
            VersionExistsError: a version folder appeared meanwhile (nothing
                is overwritten; call `abort`).
        """
        self._check_free()
        self._write_records()
        final = {}
        for name in self.model_names:
            target = version_dir(self.export_dir, name, self.version)
            tf.io.gfile.makedirs(os.path.dirname(target))
            try:
                tf.io.gfile.rename(self.path(name), target, overwrite=False)
            except tf.errors.AlreadyExistsError as e:
                raise VersionExistsError(
                    "Version folder appeared while exporting: %s"
                    % target) from e
            logging.info("Exported %s", target)
            final[name] = target
        self.abort()
        return final

    def _remove_staging(self):
        if tf.io.gfile.exists(self.staging_dir):
            tf.io.gfile.rmtree(self.staging_dir)
        self._lock.forget(self.staging_dir)

    def abort(self):
        """Removes the staging folder and lets the lock go (after `commit`,
        or instead of it)."""
        try:
            self._remove_staging()
        finally:
            self._hold.close()


@contextlib.contextmanager
def holding(export_dir, program):
    """Holds `export_dir`'s lock for a block of exports (re-entrant within
    a process, so a fine-tuning program that exports into its own
    `--output_dir` keeps the lock it has), after removing what killed
    exports recorded there (their staging folders; nothing else).

    Yields:
        The `foundation.output_lock.OutputLock`.

    Raises:
        foundation.output_lock.OutputLockedError: another process exports
            there.
    """
    with output_folder.hold(export_dir, program, flag="--export_dir") as lock:
        lock.remove_previous_leftovers()
        yield lock
