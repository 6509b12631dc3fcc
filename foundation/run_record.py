"""What a run was made from: the run record and content fingerprints.

A program names the settings that make its output what it is (its inputs,
its model); `RunRecord` writes them to `<output_dir>/albert_run.json`
(`RUN_RECORD_NAME`) on the first run and refuses a rerun whose settings
differ, naming each flag, before anything in the folder changes.
`content_fingerprint` hashes each file's name, size and first and last MiB,
so a resumed run, or a cache, checks that its inputs are the ones it
started from in moments, for shard sets of any size. No TensorFlow at
import. Guide: docs/reliability.md.
"""

import json
import os

from foundation import filesystems
from foundation import safe_io

RUN_RECORD_NAME = "albert_run.json"

# Bytes read from each end of a file for its fingerprint.
_FINGERPRINT_BYTES = 1 << 20


def content_fingerprint(paths):
    """A cheap fingerprint of files' content, for a resumed run to check
    that its inputs are the ones it started from.

    Each file contributes its name (not its folder: a moved data set is the
    same data), its size and its first and last MiB: records rebuilt with
    another vocabulary, or another corpus, differ there. Reading is bounded
    (2 MiB a file), so shard sets of any size answer in moments.

    Args:
        paths: the files (local or remote), in the order the run reads them.

    Returns:
        A string: `"<n> files, <bytes> bytes, sha256 <hex16>"`.
    """
    import hashlib

    digest = hashlib.sha256()
    total = 0
    for path in paths:
        path = str(path)
        head, tail, size = _ends(path)
        total += size
        digest.update(os.path.basename(path).encode("utf-8") + b"\0")
        digest.update(str(size).encode("ascii") + b"\0" + head + tail)
    return (f"{len(paths)} files, {total} bytes, "
            f"sha256 {digest.hexdigest()[:16]}")


def _ends(path):
    """The first and last `_FINGERPRINT_BYTES` of a file, and its size."""
    if filesystems.is_remote(path):
        import tensorflow as tf
        size = tf.io.gfile.stat(path).length
        with tf.io.gfile.GFile(path, "rb") as f:
            head = f.read(_FINGERPRINT_BYTES)
            f.seek(max(size - _FINGERPRINT_BYTES, 0))
            tail = f.read()
        return head, tail, size
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(_FINGERPRINT_BYTES)
        f.seek(max(size - _FINGERPRINT_BYTES, 0))
        tail = f.read()
    return head, tail, size


class RunRecord:
    """What an output folder's run was made from: `albert_run.json`.

    A program names the settings that make its output what it is (its
    inputs, its model); `claim` writes them on the first run and, on a
    rerun, refuses one whose settings differ, naming each difference by its
    flag, before anything in the folder changes.

    Args:
        output_dir: the run's folder (local or remote).
        program: the program's name.
        settings: `{flag as typed: value}` (JSON values).
    """

    def __init__(self, output_dir, program, settings):
        self.output_dir = str(output_dir)
        self.program = program
        self.settings = {k: v for k, v in settings.items()}
        self.path = self.output_dir.rstrip("/") + "/" + RUN_RECORD_NAME

    def read(self):
        """The recorded run (a dict), or None when there is none."""
        try:
            if filesystems.is_remote(self.path):
                import tensorflow as tf
                if not tf.io.gfile.exists(self.path):
                    return None
                text = tf.io.gfile.GFile(self.path, "r").read()
            else:
                if not os.path.exists(self.path):
                    return None
                with open(self.path, encoding="utf-8") as f:
                    text = f.read()
            record = json.loads(text)
        except (OSError, ValueError, UnicodeDecodeError):
            raise safe_io.OutputError(
                f"{self.path} is not readable JSON; it records what this "
                "folder's run was made from") from None
        if not isinstance(record, dict):
            raise safe_io.OutputError(f"{self.path} is not a run record")
        return record

    def differences(self, record):
        """The settings that differ from `record`'s, as `flag: old -> new`."""
        if record.get("program") != self.program:
            return [f"it holds a run of {record.get('program')}, not "
                    f"{self.program}"]
        old = record.get("settings", {})
        return [f"{flag}={old.get(flag)!r} there, {value!r} now"
                for flag, value in sorted(self.settings.items())
                if flag in old and old[flag] != value]

    def claim(self, flag="--output_dir"):
        """Records this run, or refuses a different earlier one.

        Raises:
            safe_io.OutputError: the folder holds a run made from other
                settings.
        """
        record = self.read()
        if record is not None:
            changed = self.differences(record)
            if changed:
                raise safe_io.OutputError(
                    f"{flag}={self.output_dir} holds an earlier run made from "
                    f"other inputs ({'; '.join(changed)}); choose another "
                    f"{flag}, or remove the folder to start over")
            return
        safe_io.write_atomically(self.path, json.dumps(
            {"program": self.program, "settings": self.settings},
            indent=1, sort_keys=True) + "\n")
