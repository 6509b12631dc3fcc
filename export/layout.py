"""TF Serving layout: `<export_dir>/<model_name>/<version>/`, written safely.

TF Serving watches `<export_dir>/<model_name>/` and serves the highest
numeric version folder. So a version folder must appear complete or not at
all, and an existing version is never touched: everything is written under a
staging folder first (whose name is not a number, so TF Serving never looks
at it) and then renamed into place.

Works on local paths and on anything `tf.io.gfile` reads (`gs://...`); on
object stores a folder rename is a copy, so only local renames are atomic.
"""

import contextlib
import os
import uuid

import tensorflow as tf
from absl import logging

from albert_tf.training import output_folder
from export.options import check_model_name

STAGING_PREFIX = ".staging-"


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


def check_version_free(export_dir, model_names, version):
    """Refuses a version that exists for one of `model_names`.

    Raises:
        VersionExistsError: naming the version folder.
    """
    for name in model_names:
        target = version_dir(export_dir, name, version)
        if tf.io.gfile.exists(target):
            raise VersionExistsError(
                "Version %d of %r already exists; versions are never "
                "overwritten (leave --version unset for the next free "
                "one). Received: %s" % (version, name, target))


class StagedExport:
    """Writes several versioned artifacts and moves them into place at the end.

    Usage:

        staged = StagedExport(export_dir, ["albert", "albert_encoder"], version)
        for name in ...:
            write(staged.path(name))    # a folder that does not exist yet
        final_paths = staged.commit()

    Args:
        export_dir: the serving base folder.
        model_names: the model folders written together.
        version: an int, or None for `next_version` of those models.

    Raises:
        ValueError: a version below 1, or a model name that is not one
            folder name (`export.options.check_model_name`).
        VersionExistsError: the version exists for one of the models.
    """

    def __init__(self, export_dir, model_names, version=None):
        self.export_dir = export_dir
        self.model_names = list(model_names)
        for name in self.model_names:
            check_model_name(name)
        model_dirs = [os.path.join(export_dir, n) for n in self.model_names]
        if version is None:
            version = next_version(model_dirs)
        version = int(version)
        if version < 1:
            raise ValueError("version must be a positive integer. "
                             "Received: version=%r" % version)
        self.version = version
        self._check_free()
        self.staging_dir = os.path.join(
            export_dir, "%s%d-%s" % (STAGING_PREFIX, version,
                                     uuid.uuid4().hex[:8]))
        tf.io.gfile.makedirs(self.staging_dir)

    def _check_free(self):
        check_version_free(self.export_dir, self.model_names, self.version)

    def path(self, model_name):
        """Where to write `model_name` before `commit`."""
        return os.path.join(self.staging_dir, model_name)

    def commit(self):
        """Renames every staged artifact to its version folder.

        Returns:
            A dict model name -> final version folder.

        Raises:
            VersionExistsError: a version folder appeared meanwhile (nothing
                is overwritten; the staging folder is kept for inspection).
        """
        self._check_free()
        final = {}
        for name in self.model_names:
            target = version_dir(self.export_dir, name, self.version)
            tf.io.gfile.makedirs(os.path.dirname(target))
            try:
                tf.io.gfile.rename(self.path(name), target, overwrite=False)
            except tf.errors.AlreadyExistsError as e:
                raise VersionExistsError(
                    "Version folder appeared while exporting: %s" % target) from e
            logging.info("Exported %s", target)
            final[name] = target
        tf.io.gfile.rmtree(self.staging_dir)
        return final

    def abort(self):
        """Removes the staging folder (nothing was moved into place)."""
        if tf.io.gfile.exists(self.staging_dir):
            tf.io.gfile.rmtree(self.staging_dir)


def remove_stale_staging(export_dir):
    """Removes the staging folders that killed exports left in `export_dir`.

    Only for a caller that holds `export_dir`'s lock
    (`data_prep.safe_io.OutputLock`): no other export is then writing one.

    Returns:
        The folders removed.
    """
    if not tf.io.gfile.isdir(export_dir):
        return []
    removed = []
    for entry in tf.io.gfile.listdir(export_dir):
        entry = entry.rstrip("/")
        if entry.startswith(STAGING_PREFIX):
            path = os.path.join(export_dir, entry)
            logging.warning("Removing %s, left by an export that did not "
                            "finish", path)
            tf.io.gfile.rmtree(path)
            removed.append(path)
    return removed


@contextlib.contextmanager
def holding(export_dir, program):
    """Holds `export_dir`'s lock for a block of exports (re-entrant within
    a process, so a fine-tuning program that exports into its own
    `--output_dir` keeps the lock it has), after removing the staging
    folders that killed exports left there.

    Raises:
        data_prep.safe_io.OutputLockedError: another process exports there.
    """
    with output_folder.hold(export_dir, program, flag="--export_dir"):
        remove_stale_staging(export_dir)
        yield
