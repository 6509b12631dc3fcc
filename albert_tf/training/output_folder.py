"""A training job's hold on its output folder (pretraining and fine-tuning).

Every training job writes one folder (`--output_dir`). Two promises of
docs/reliability.md are kept here, with `foundation`'s mechanisms:

- one writer per folder: `hold` takes `output_lock.OutputLock` on it for a
  block. The hold is re-entrant within a process, so the program (the whole
  run, `albert_tf.cli.run_training_program`) and the `Trainer` (each of its
  steps, for library callers) can both hold it without locking each other
  out; a second process fails at once naming the holder's pid.
- what the folder's run was made from: `claim_run` writes (first run) or
  checks (rerun) `albert_run.json` (`run_record.RunRecord`) with the job's
  `run_settings()`, before anything in the folder changes.

This module imports no TensorFlow.
"""

import contextlib
import os

from foundation import output_lock
from foundation import run_record
from foundation import safe_io

FLAG = "--output_dir"
# Folder -> [lock, depth] of the holds this process has.
_HELD = {}


def _key(output_dir):
    output_dir = str(output_dir)
    return output_dir if "://" in output_dir else os.path.realpath(output_dir)


@contextlib.contextmanager
def hold(output_dir, program, flag=FLAG):
    """Holds the lock on `output_dir` for the block (re-entrant).

    A folder this hold created is removed again when the block fails and
    leaves it empty (a refused run leaves no trace).

    Args:
        output_dir: the job's output folder.
        program: what a second run's error names as the holder.
        flag: the flag naming the folder, as the user typed it.

    Raises:
        output_lock.OutputLockedError: another live process holds it.
        safe_io.OutputError: the folder cannot be made.
    """
    key = _key(output_dir)
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield _HELD[key][0]
        finally:
            _HELD[key][1] -= 1
        return
    local = "://" not in str(output_dir)
    created = local and not os.path.exists(output_dir)
    lock = output_lock.OutputLock(output_dir, program, flag=flag).acquire()
    _HELD[key] = [lock, 1]
    finished = False
    try:
        yield lock
        finished = True
    finally:
        del _HELD[key]
        lock.release()
        if created and not finished:
            _remove_if_empty(output_dir)


def held_lock(output_dir):
    """The `output_lock.OutputLock` this process holds on `output_dir`, or
    None (its record lists what the run may remove)."""
    held = _HELD.get(_key(output_dir))
    return held[0] if held else None


def _remove_if_empty(folder):
    try:
        os.rmdir(folder)  # Only ever an empty folder.
    except OSError:
        pass


# The run record's key of an input's content fingerprint: "<flag> (content)".
CONTENT = " (content)"


def claim_run(output_dir, options, inputs=None, flag=FLAG):
    """Records (first run) or checks (rerun) what `output_dir`'s run is
    made from: `options.run_program()`, `options.run_settings()` and a
    content fingerprint of each input (`run_record.content_fingerprint`).

    A record without an input's fingerprint (an older run's) is not
    checked on it.

    Args:
        output_dir: the job's output folder.
        options: the job's options.
        inputs: `{flag: [files]}` (see `TrainingTask.input_files`).
        flag: the flag naming the folder.

    Raises:
        safe_io.OutputError: the folder holds a run made from other
            settings (names each one, old and new), or one whose inputs'
            content changed under the same names (names the flag).
    """
    settings = dict(options.run_settings())
    fingerprints = {name + CONTENT: run_record.content_fingerprint(paths)
                    for name, paths in (inputs or {}).items() if paths}
    settings.update(fingerprints)
    record = run_record.RunRecord(output_dir, options.run_program(), settings)
    old = record.read()
    if old is not None:
        _check_content(old, record, fingerprints, output_dir, flag)
    record.claim(flag)


def _check_content(old, record, fingerprints, output_dir, flag):
    """Refuses a rerun whose only differences are inputs' content (other
    differences are named together by `RunRecord.claim`)."""
    changed = record.differences(old)
    if not changed or len(changed) != sum(
            item.startswith(tuple(fingerprints)) for item in changed):
        return
    before = old.get("settings", {})
    name = next(key for key in sorted(fingerprints)
                if before.get(key) not in (None, fingerprints[key]))
    raise safe_io.OutputError(
        f"{name[:-len(CONTENT)]}: the content changed since this run "
        f"started in {flag}={output_dir} ({before[name]} then, "
        f"{fingerprints[name]} now); a resumed run must read the inputs it "
        "started from: restore them, or choose another "
        f"{flag} to start over")
