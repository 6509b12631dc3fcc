"""The conversion machinery shared by every format.

A reader turns a source into `Weights`: a config, the canonical tensors (a dict
from official TF1 name to a float32 array in the official layout, see
`albert_tf.convert.names`), the release's SentencePiece model and a
`ConversionReport`. A writer turns `Weights` into files. `gather` is the one
place where source tensors are matched against the expected names and shapes:
every source tensor ends up mapped, skipped for a stated reason, or rejected.
"""

import contextlib
import dataclasses
import json
import logging
import os
import secrets

import numpy as np

from albert_tf import config as config_lib
from albert_tf.convert import names
from albert_tf.training import model_dir
from foundation import output_lock
from foundation import progress
from foundation import safe_io

REPORT_NAME = "conversion_report.txt"

# How many names an error message lists before summarizing.
_MAX_LISTED = 20


class ConversionError(ValueError):
    """A source does not match what the conversion expects."""


@dataclasses.dataclass
class ConversionReport:
    """What happened to every tensor of a conversion.

    Attributes:
        source: a description of the source (format and path).
        mapped: `(source_name, official_name, shape, transform)` per tensor.
        skipped: `(source_name, reason)` per source tensor left out on purpose.
        absent: `(official_name, reason)` per expected tensor the source does
            not have (only whole pretraining heads may be absent).
        notes: other facts worth knowing (files copied, dtype casts, ...).
    """

    source: str = ""
    mapped: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    absent: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)

    def to_text(self):
        """The report as readable text, one tensor a line."""
        lines = [f"Source: {self.source}",
                 f"Mapped tensors: {len(self.mapped)}"]
        for source_name, official, shape, transform in self.mapped:
            arrow = official if source_name == official else (
                f"{source_name} -> {official}")
            lines.append(f"  {arrow} {list(shape)} ({transform})")
        lines.append(f"Skipped source tensors: {len(self.skipped)}")
        lines += [f"  {name}: {reason}" for name, reason in self.skipped]
        lines.append(f"Absent from the source: {len(self.absent)}")
        lines += [f"  {name}: {reason}" for name, reason in self.absent]
        if self.notes:
            lines.append("Notes:")
            lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines) + "\n"

    def write(self, directory):
        """Writes the report as `conversion_report.txt` in `directory`."""
        safe_io.write_atomically(os.path.join(directory, REPORT_NAME),
                                 self.to_text())


@dataclasses.dataclass
class Weights:
    """A model's tensors in the canonical (official TF1) form.

    Attributes:
        config: the `AlbertConfig`.
        tensors: `{official_name: float32 np.ndarray}` in the official layout;
            a pretraining head the source lacks is missing from it.
        spm_model_file: path of the SentencePiece model that came with the
            weights, or None.
        report: the `ConversionReport` of the read.
        do_lower_case: whether the vocabulary lowercases text, where the
            source records it (a Hugging Face `tokenizer_config.json`),
            else None.
    """

    config: object
    tensors: dict
    spm_model_file: str = None
    report: ConversionReport = dataclasses.field(default_factory=ConversionReport)
    do_lower_case: bool = None


def _listing(items):
    items = list(items)
    text = ", ".join(items[:_MAX_LISTED])
    if len(items) > _MAX_LISTED:
        text += f", ... ({len(items) - _MAX_LISTED} more)"
    return text


def read_json(path):
    """The JSON object in a local file (a config); errors name the file.

    Raises:
        ValueError: the file is not UTF-8, not JSON (truncated, say) or not
            a JSON object; one line naming `path`.
    """
    with open(path, encoding="utf-8") as f:
        try:
            text = f.read()
        except UnicodeDecodeError as e:
            raise ConversionError(f"{path!r} is not UTF-8 text: {e}") from e
    return config_lib.parse_json_object(text, path)


def to_float32(name, value, report):
    """Casts a floating-point source array to float32, noting the cast."""
    value = np.asarray(value)
    if value.dtype == np.float32:
        return value
    # bfloat16 (from ml_dtypes) is not a NumPy floating subtype.
    if not (np.issubdtype(value.dtype, np.floating) or
            value.dtype.name == "bfloat16"):
        raise ConversionError(
            f"Tensor {name!r} has dtype {value.dtype}; ALBERT weights are "
            "floating point.")
    report.notes.append(f"{name}: cast from {value.dtype} to float32")
    return value.astype(np.float32)


def gather(source_shapes, read, rules, report, skip=None):
    """Matches source tensors to official ones and reads them.

    Args:
        source_shapes: `{source_name: shape}` for every tensor of the source.
        read: `read(source_name)` returns that tensor's value (array-like).
        rules: the `names.TensorRule`s of the format for the expected config.
        report: a `ConversionReport`, filled in.
        skip: optional `skip(source_name)` returning a reason to leave that
            tensor out (optimizer slots, step counters, buffers), else None.

    Returns:
        `{official_name: float32 np.ndarray}` in the official layout, without
        the pretraining heads the source does not have.

    Raises:
        ConversionError: naming the tensor, when a source tensor has the wrong
            shape (both shapes given), an encoder tensor or part of a head is
            missing, or a source tensor is not expected.
    """
    source_shapes = {k: tuple(int(d) for d in v) for k, v in source_shapes.items()}
    by_external = {rule.external: rule for rule in rules}
    unexpected, skipped = [], set()
    for name in sorted(source_shapes):
        if name in by_external:
            continue
        reason = skip(name) if skip else None
        if reason:
            report.skipped.append((name, reason))
            skipped.add(name)
        else:
            unexpected.append(name)

    missing = [rule for rule in rules if rule.external not in source_shapes]
    missing_by_head = {}
    for rule in missing:
        missing_by_head.setdefault(names.head_of(rule.official), []).append(rule)
    fatal = list(missing_by_head.pop(None, []))
    for head, head_missing in missing_by_head.items():
        expected = [r for r in rules if r.official.startswith(head)]
        if len(head_missing) == len(expected):
            for rule in head_missing:
                report.absent.append(
                    (rule.official, "the source has no such head; a model "
                                    "built from it initializes this tensor"))
        else:
            fatal += head_missing
    if fatal:
        raise ConversionError(
            f"{len(fatal)} expected tensor(s) missing from {report.source}: "
            + _listing(f"{r.external} (expected shape {list(r.external_shape)})"
                       for r in fatal))
    if unexpected:
        raise ConversionError(
            f"{len(unexpected)} unexpected tensor(s) in {report.source} (not "
            "part of an ALBERT pretraining model with this config): "
            + _listing(f"{n} {list(source_shapes[n])}" for n in unexpected))

    tensors = {}
    present = [rule for rule in rules if rule.external in source_shapes]
    # Reading is the slow part (xxlarge: 0.9 GB): a bar on a terminal.
    with progress.bar(total=len(present), description="read tensors",
                      unit="tensor") as bar:
        for rule in present:
            tensors[rule.official] = _read_checked(rule, source_shapes, read,
                                                   report)
            bar.update()
    return tensors


def _read_checked(rule, source_shapes, read, report):
    """One source tensor in the official layout, its shape checked."""
    shape = source_shapes[rule.external]
    if shape != rule.external_shape:
        raise ConversionError(
            f"Shape mismatch for tensor {rule.external!r} of "
            f"{report.source}: the source has {list(shape)}, the config "
            f"expects {list(rule.external_shape)} (official name "
            f"{rule.official!r}).")
    value = to_float32(rule.external, read(rule.external), report)
    report.mapped.append(
        (rule.external, rule.official, rule.external_shape, rule.transform))
    return rule.to_official(value)


def model_to_official(model):
    """The canonical tensors of an `AlbertPretrainer` (or `AlbertEncoder`).

    Args:
        model: a built `AlbertPretrainer`, or an `AlbertEncoder` (whose result
            then lacks the heads).

    Returns:
        `{official_name: float32 np.ndarray}`.

    Raises:
        names.UnsupportedConfigError: for a sharing ablation.
    """
    by_path = {v.path: v for v in model.weights}
    tensors = {}
    for official, _, path in names.official_variables(model.config):
        if path in by_path:
            tensors[official] = np.asarray(
                by_path[path].numpy()).astype(np.float32, copy=False)
    return tensors


def assign_to_model(model, tensors):
    """Assigns canonical tensors to an `AlbertPretrainer`'s variables.

    Args:
        model: a built `AlbertPretrainer` (or `AlbertEncoder`).
        tensors: `{official_name: array}`; tensors of heads the model lacks
            (an encoder) are an error, heads missing from `tensors` keep the
            model's initial values.

    Returns:
        The official names of the model's variables left at their initial
        values.

    Raises:
        ConversionError: on a shape mismatch, an unknown name, or a missing
            encoder tensor.
    """
    by_path = {v.path: v for v in model.weights}
    table = {official: path for official, _, path in
             names.official_variables(model.config) if path in by_path}
    unknown = sorted(set(tensors) - set(table))
    if unknown:
        raise ConversionError(
            "Tensors with no variable in the model: " + _listing(unknown))
    untouched = []
    for official, path in table.items():
        variable = by_path[path]
        if official not in tensors:
            if names.head_of(official) is None:
                raise ConversionError(f"Missing encoder tensor {official!r}")
            untouched.append(official)
            continue
        value = np.asarray(tensors[official])
        if tuple(value.shape) != tuple(variable.shape):
            raise ConversionError(
                f"Shape mismatch for {official!r}: the weights have "
                f"{list(value.shape)}, the model variable {path!r} has "
                f"{list(variable.shape)}.")
        variable.assign(value.astype(variable.dtype))
    return untouched


# === The output folder ===

PROGRAM = "convert_checkpoint"
# What a conversion wrote, so that `--overwrite` replaces only that.
MANIFEST_NAME = "conversion_manifest.json"


def _files_under(folder):
    """The files under `folder`, as sorted paths relative to it."""
    found = []
    for root, _, files in os.walk(folder):
        for name in files:
            found.append(os.path.relpath(os.path.join(root, name), folder))
    return sorted(found)


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_output_dir(output_dir, overwrite=False, input_path=None):
    """Refuses an output folder a conversion must not write or replace.

    Args:
        output_dir: `--output_dir`.
        overwrite: `--overwrite`: replace an earlier conversion there.
        input_path: `--input`, which the output must not hold.

    Raises:
        safe_io.OutputError: the folder cannot be written, holds the input,
            is not empty (without `overwrite`), or holds files that no
            conversion wrote (with `overwrite`); one line naming the flags.
    """
    safe_io.check_output_path(output_dir, "--output_dir")
    real = os.path.realpath(output_dir)
    # The input's model folder, links resolved (a TF1 prefix's folder).
    if input_path and _inside(
            model_dir.model_folder(os.path.realpath(input_path)), real):
        raise safe_io.OutputError(
            f"--output_dir={output_dir} holds --input={input_path}; a "
            "conversion never replaces its input: choose another --output_dir")
    if not os.path.isdir(real) or not os.listdir(real):
        return
    if not overwrite:
        raise safe_io.OutputError(
            f"--output_dir={output_dir} is not empty; pass --overwrite to "
            "replace an earlier conversion there, or choose another "
            "--output_dir")
    written = _manifest_files(real)
    if written is None:
        raise safe_io.OutputError(
            f"--overwrite: --output_dir={output_dir} was not written by "
            f"{PROGRAM} (it has no {MANIFEST_NAME}) and holds "
            f"{_listing(_files_under(real))}; move them or choose another "
            "--output_dir")
    extra = [f for f in _files_under(real)
             if f not in written and f != MANIFEST_NAME
             and not safe_io.is_temporary(f)]
    if extra:
        raise safe_io.OutputError(
            f"--overwrite: --output_dir={output_dir} holds files the earlier "
            f"conversion did not write: {_listing(extra)}; move them or "
            "choose another --output_dir")


def _manifest_files(folder):
    """The files an earlier conversion wrote in `folder`, or None."""
    try:
        with open(os.path.join(folder, MANIFEST_NAME), encoding="utf-8") as f:
            manifest = json.load(f)
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if manifest.get("program") != PROGRAM or not isinstance(files, list):
        return None
    return set(files)


def _fresh_name(parent, base, role):
    """A hidden name beside the output that nothing holds yet:
    `.<base>.<role>-<random>`."""
    while True:
        path = os.path.join(parent, f".{base}.{role}-{secrets.token_hex(4)}")
        if not os.path.lexists(path):
            return path


def _make_partial(lock, parent, base):
    """A new folder for the conversion to fill, with the user's umask,
    recorded in the lock as this run's."""
    while True:
        path = _fresh_name(parent, base, "partial")
        try:
            os.mkdir(path)  # 0o777 less the umask
        except FileExistsError:
            continue  # made meanwhile by someone else: never ours
        lock.record(path)
        return path


def _recover(lock, final):
    """Finishes what a killed conversion into `final` left, from the lock's
    record of that run (never from names alone).

    Called with the output's lock held: no other conversion is running. An
    earlier output that the killed run had set aside for replacement, still
    the very folder it recorded, is put back when the new one never
    arrived; what else the record lists (its unfinished folder, an earlier
    output already replaced) is removed. A folder the record does not list
    is never touched, whatever its name.
    """
    set_aside = f".{os.path.basename(final)}.old-"
    for path in lock.previous_leftovers:
        if (os.path.basename(path).startswith(set_aside)
                and lock.is_recorded(path) and not os.path.lexists(final)):
            logging.warning("Restoring %s from %s (a conversion was killed "
                            "while replacing it)", final, path)
            os.rename(path, final)
            lock.forget(path)
    lock.remove_previous_leftovers()


def _put_in_place(lock, tmp, output_dir):
    """Renames the finished `tmp` to `output_dir`, an earlier conversion
    there set aside first and removed last (each step in the lock's record,
    so a kill at any point is finished by the next run: `_recover`)."""
    parent, base = os.path.split(output_dir)
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        old = _fresh_name(parent, base, "old")
        lock.record(old, before_rename_from=output_dir)
        os.rename(output_dir, old)
        os.rename(tmp, output_dir)
        lock.forget(tmp)
        lock.remove_recorded(old)
    else:
        os.replace(tmp, output_dir)  # onto nothing, or an empty folder
        lock.forget(tmp)


@contextlib.contextmanager
def atomic_output_dir(output_dir, overwrite=False, input_path=None):
    """Yields a temporary directory that becomes `output_dir` on success.

    The run holds the output's lock (`output_lock.OutputLock` on its name, in
    the parent folder: the folder itself is replaced). The temporary
    directory sits next to `output_dir` (same filesystem, a hidden name),
    so the final rename is atomic; on any error it is deleted and
    `output_dir` is left as it was. With `overwrite`, only an earlier
    conversion (its `conversion_manifest.json` lists every file there) is
    replaced. The lock's record lists the temporary directory and the
    earlier output while it is set aside, so the next run finishes a killed
    one from that record alone. Folders and files get the user's umask.

    Args:
        output_dir: the local directory to create (a symbolic link is
            resolved once, and the folder it names is written).
        overwrite: replace an earlier conversion in `output_dir`.
        input_path: the conversion's input, which `output_dir` must not hold.

    Raises:
        safe_io.OutputError: see `check_output_dir`; a write that failed
            (names the file and the cause).
        output_lock.OutputLockedError: another conversion writes `output_dir`.
        ValueError: for a remote (`scheme://`) path.
    """
    if "://" in output_dir:
        raise ValueError("Conversions write to a local directory (copy it "
                         f"afterwards). Received: output_dir={output_dir!r}")
    output_dir = safe_io.resolve_output(output_dir, "--output_dir")
    check_output_dir(output_dir, overwrite, input_path)
    output_dir = os.path.abspath(output_dir)
    parent, base = os.path.split(output_dir)
    with output_lock.OutputLock(output_dir, PROGRAM, flag="--output_dir",
                                kind="file") as lock:
        _recover(lock, output_dir)
        check_output_dir(output_dir, overwrite, input_path)
        tmp = _make_partial(lock, parent, base)
        try:
            yield tmp
            safe_io.write_atomically(
                os.path.join(tmp, MANIFEST_NAME), json.dumps(
                    {"program": PROGRAM, "files": _files_under(tmp)},
                    indent=1) + "\n")
        except BaseException as error:
            lock.remove_recorded(tmp)
            converted = safe_io.write_failure(error, tmp)
            if converted is not error:
                raise converted from None
            raise
        _put_in_place(lock, tmp, output_dir)
    logging.info("Wrote %s", output_dir)
