"""Which TF Serving releases can serve an export, from the ops it runs.

The model server links the ops of the TensorFlow it bundles and those of one
tensorflow-text release (`@org_tensorflow_text//tensorflow_text:ops_lib`);
a SavedModel holding any other op type fails to load with "Op type not
registered". Stock TF Serving 2.13-2.19 still bundles tensorflow-text
2.12.1, so an op added to tensorflow-text later cannot be served there.

`export/tf_serving_ops.json` is the table: per TF Serving release (2.12 to
2.20) the TensorFlow and tensorflow-text versions it bundles and the op types
those register; its `sources` say where every entry was read.

Every export writes, next to each SavedModel's files,
`<version>/assets.extra/ops.json` (`OPS_FILE`): the op types of the
SavedModel and the TF Serving releases that link all of them. TF Serving
reads only its own file names in `assets.extra/` (`saved_model_config.pb`,
`tf_serving_warmup_requests`, `mlmd_uuid`), and TensorFlow's SavedModel loader does not
read the folder at all, so the record changes nothing that is served.
"""

import functools
import json
import os
import sys

import tensorflow as tf
from absl import logging
from google.protobuf import message as protobuf_message

from export import graph_ops
from export import layout

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "tf_serving_ops.json")
OPS_FILE = os.path.join("assets.extra", "ops.json")
# What the model server needs to run a SavedModel with XLA-compiled
# functions (an int8 export): without it the first request fails.
XLA_SERVER_FLAG = "--xla_cpu_compilation_enabled=true"


class UnknownServingVersionError(ValueError):
    """A TF Serving version the table does not list."""


class UnsupportedOpsError(ValueError):
    """An export uses op types the requested TF Serving release lacks."""


@functools.lru_cache(maxsize=None)
def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_table(path=None):
    """The table of TF Serving releases (a dict; see the module docstring).

    Args:
        path: a table file; default `TABLE_PATH`.

    Returns:
        The parsed table (shared: do not modify it).
    """
    return _load(path or TABLE_PATH)


def _version_key(version):
    return tuple(int(part) for part in version.split("."))


def known_versions(table=None):
    """TF Serving releases (`"2.12"`, ...) the table lists, oldest first."""
    table = table or load_table()
    return sorted(table["releases"], key=_version_key)


def release_name(version, table=None):
    """The table's name for `version` (`"2.19"` for `"2.19"` or `"2.19.1"`).

    Raises:
        UnknownServingVersionError: the table has no such release.
    """
    table = table or load_table()
    parts = str(version).strip().split(".")
    name = ".".join(parts[:2])
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts) or \
            name not in table["releases"]:
        raise UnknownServingVersionError(
            "Unknown TF Serving version; known releases: %s. Received: %r"
            % (", ".join(known_versions(table)), version))
    return name


def _op_set(table, kind, version):
    """Op types registered by `kind` ("tensorflow" or "tensorflow_text") at
    `version`: a full list, or changes (`base`, `added`, `removed`)."""
    entry = table[kind + "_ops"][version]
    if isinstance(entry, list):
        return frozenset(entry)
    return (_op_set(table, kind, entry["base"]) | set(entry["added"])) - set(
        entry["removed"])


def linked_ops(version, table=None):
    """Op types the model server of TF Serving `version` links.

    Returns:
        A dict `"tensorflow"` / `"tensorflow_text"` -> frozenset of names.
    """
    table = table or load_table()
    info = table["releases"][release_name(version, table)]
    return {kind: _op_set(table, kind, info[kind])
            for kind in ("tensorflow", "tensorflow_text")}


def unsupported_ops(ops, version, table=None):
    """The op types of `ops` that TF Serving `version` does not link.

    Returns:
        A sorted list (empty when the release can serve them all).
    """
    linked = linked_ops(version, table)
    known = linked["tensorflow"] | linked["tensorflow_text"]
    return sorted(set(ops) - known)


def serving_releases(ops, table=None):
    """The TF Serving releases that link every op type of `ops`, oldest
    first."""
    table = table or load_table()
    return [v for v in known_versions(table)
            if not unsupported_ops(ops, v, table)]


def _owner(op, table):
    """"tensorflow_text" for an op any tensorflow-text release of the table
    registers, else "tensorflow"."""
    for version in table["tensorflow_text_ops"]:
        if op in _op_set(table, "tensorflow_text", version):
            return "tensorflow_text"
    return "tensorflow"


def check_export(saved_models, tf_serving_version=None, table=None):
    """Records each SavedModel's ops and checks them against TF Serving.

    Writes `OPS_FILE` into every SavedModel folder, then, with
    `tf_serving_version`, refuses an export that release cannot serve.
    Call it on the staged folders, before they are moved into place, so a
    refused export leaves no version behind.

    Args:
        saved_models: a dict model name -> SavedModel folder.
        tf_serving_version: a TF Serving release (`"2.19"`), or None to
            only record and log the releases that can serve the export.
        table: a table as `load_table` returns (tests pass their own).

    Returns:
        A dict model name -> the record written (`ops`, `tensorflow_text_ops`,
        `tf_serving_releases`, `oldest_tf_serving`, `checked_against`).

    Raises:
        UnknownServingVersionError: `tf_serving_version` is not in the table.
        UnsupportedOpsError: the release lacks ops of a SavedModel (all are
            named, per model).
    """
    table = table or load_table()
    if tf_serving_version is not None:
        tf_serving_version = release_name(tf_serving_version, table)
    records, missing = {}, {}
    for name, path in saved_models.items():
        ops = graph_ops.op_types(path)
        releases = serving_releases(ops, table)
        xla = graph_ops.xla_compiled(path)
        record = {
            "ops": ops,
            "tensorflow_text_ops": [op for op in ops
                                    if _owner(op, table) == "tensorflow_text"],
            "tf_serving_releases": releases,
            "oldest_tf_serving": releases[0] if releases else None,
            "xla_compiled": xla,
            "model_server_flags": [XLA_SERVER_FLAG] if xla else [],
            "checked_against": tf_serving_version,
            "table": "export/tf_serving_ops.json",
        }
        records[name] = record
        tf.io.gfile.makedirs(os.path.join(path, os.path.dirname(OPS_FILE)))
        with tf.io.gfile.GFile(os.path.join(path, OPS_FILE), "w") as f:
            f.write(json.dumps(record, indent=1) + "\n")
        if tf_serving_version is not None:
            lacking = unsupported_ops(ops, tf_serving_version, table)
            if lacking:
                missing[name] = lacking
        if releases:
            logging.info("%s: %d op types; TF Serving %s can serve it "
                         "(oldest: %s)%s", name, len(ops),
                         _describe(releases, table), releases[0],
                         " with %s (it holds XLA-compiled functions)"
                         % XLA_SERVER_FLAG if xla else "")
        else:
            logging.warning(
                "%s: no TF Serving release of %s links all its op types "
                "(not linked by any: %s)", name, ", ".join(known_versions(table)),
                ", ".join(sorted(set(ops) - _all_linked(table))) or "-")
    if missing:
        info = table["releases"][tf_serving_version]
        raise UnsupportedOpsError(
            "TF Serving %s (TensorFlow %s, tensorflow-text %s) does not link "
            "these op types: %s. Releases that can serve this export: %s."
            % (tf_serving_version, info["tensorflow"], info["tensorflow_text"],
               "; ".join("%s: %s" % (name, ", ".join(ops))
                         for name, ops in missing.items()),
               ", ".join(_common(records)) or "none"))
    return records


def _describe(releases, table):
    """">= 2.12" when `releases` are all from the oldest of them on, else
    the list."""
    known = known_versions(table)
    if releases == known[known.index(releases[0]):]:
        return ">= " + releases[0]
    return ", ".join(releases)


def _all_linked(table):
    ops = set()
    for version in known_versions(table):
        for names in linked_ops(version, table).values():
            ops |= names
    return ops


def _common(records):
    """Releases that serve every SavedModel of `records`."""
    sets = [set(r["tf_serving_releases"]) for r in records.values()]
    common = set.intersection(*sets) if sets else set()
    return sorted(common, key=_version_key)


def read_record(saved_model):
    """The `OPS_FILE` record of an exported SavedModel folder."""
    with tf.io.gfile.GFile(os.path.join(saved_model, OPS_FILE)) as f:
        return json.loads(f.read())


def markdown_table(saved_models, table=None):
    """A markdown table: which TF Serving releases serve which SavedModel.

    Args:
        saved_models: a dict column name -> SavedModel folder, in column
            order.
        table: a table as `load_table` returns.

    Returns:
        The markdown text: the table (a row per release, with the TensorFlow
        and tensorflow-text versions it bundles), then the tensorflow-text ops
        of each SavedModel.
    """
    table = table or load_table()
    ops = {name: graph_ops.op_types(path) for name, path in saved_models.items()}
    names = list(saved_models)
    lines = ["| TF Serving | TensorFlow | tensorflow-text | %s |"
             % " | ".join("`%s`" % n for n in names),
             "|---|---|---|%s" % ("---|" * len(names))]
    for version in known_versions(table):
        info = table["releases"][version]
        cells = []
        for name in names:
            lacking = unsupported_ops(ops[name], version, table)
            cells.append("yes" if not lacking else "no (%s)" % _code(lacking))
        lines.append("| %s | %s | %s | %s |" % (
            info["tag"], info["tensorflow"], info["tensorflow_text"],
            " | ".join(cells)))
    lines.append("")
    for name in names:
        text_ops = [op for op in ops[name]
                    if _owner(op, table) == "tensorflow_text"]
        lines.append("- `%s`: %d op types; tensorflow-text ops: %s" % (
            name, len(ops[name]), _code(text_ops) or "none"))
    return "\n".join(lines) + "\n"


def precision_table(saved_models, table=None):
    """A markdown table: what each serving dtype adds to an export.

    Args:
        saved_models: a dict serving dtype -> the text-in SavedModel folder
            of one model exported in that dtype; "float32" is the base.
        table: a table as `load_table` returns.

    Returns:
        The markdown text: per dtype, the op types its SavedModel has and
        the float32 one has not, the TF Serving releases that link all its
        ops, and the model server flags it needs.
    """
    table = table or load_table()
    ops = {name: graph_ops.op_types(path) for name, path in saved_models.items()}
    base = set(ops.get("float32", ()))
    lines = ["| serving dtype | op types added to float32's | TF Serving "
             "releases | model server flags |", "|---|---|---|---|"]
    for name, path in saved_models.items():
        releases = serving_releases(ops[name], table)
        flags = [XLA_SERVER_FLAG] if graph_ops.xla_compiled(path) else []
        lines.append("| %s | %s | %s | %s |" % (
            name, _code(sorted(set(ops[name]) - base)) or "none",
            _describe(releases, table) if releases else "none",
            _code(flags) or "none"))
    return "\n".join(lines) + "\n"


def _code(names):
    return ", ".join("`%s`" % name for name in names)


SAVED_MODEL_FILE = "saved_model.pb"
PROGRAM = "serving_compat"


def _is_saved_model(folder):
    return tf.io.gfile.exists(os.path.join(folder, SAVED_MODEL_FILE))


def _not_a_saved_model(folder):
    """Why a version folder without `saved_model.pb` is skipped."""
    entries = [e.rstrip("/") for e in tf.io.gfile.listdir(folder)]
    if any(e.endswith(".tflite") for e in entries):
        return "a LiteRT model (.tflite), which TF Serving does not serve"
    return "no %s in it" % SAVED_MODEL_FILE


def find_models(path):
    """The SavedModels `path` holds, and what it holds that is skipped.

    `path` may be a serving base folder (`<model_name>/<version>/` inside:
    the newest version of each model), one model's folder (numeric
    version folders inside: the newest) or one SavedModel folder.

    Args:
        path: the folder.

    Returns:
        `(models, skipped)`: a dict model name -> SavedModel folder, sorted
        by name, and a dict folder -> why it was skipped (a LiteRT model,
        a folder without `saved_model.pb`).

    Raises:
        FileNotFoundError: `path` is no folder, or holds none of these.
    """
    path = str(path).rstrip("/") or "/"
    if not tf.io.gfile.isdir(path):
        raise FileNotFoundError(
            "Not a folder: pass a serving base folder, one model's folder "
            "or one SavedModel folder. Received: %s" % path)
    name = os.path.basename(os.path.abspath(path))
    if _is_saved_model(path):  # One SavedModel (a version folder).
        parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
        return {parent if name.isdigit() else name: path}, {}
    models, skipped = {}, {}
    versions = layout.list_versions(path)
    if versions:  # One model's folder.
        candidates = {name: layout.version_dir(
            os.path.dirname(os.path.abspath(path)), name, versions[-1])}
    else:
        candidates = {}
        for entry in sorted(tf.io.gfile.listdir(path)):
            entry = entry.rstrip("/")
            model_dir = os.path.join(path, entry)
            if entry.startswith(".") or not tf.io.gfile.isdir(model_dir):
                continue
            versions = layout.list_versions(model_dir)
            if versions:
                candidates[entry] = layout.version_dir(path, entry,
                                                       versions[-1])
    for model, folder in candidates.items():
        if _is_saved_model(folder):
            models[model] = folder
        else:
            skipped[folder] = _not_a_saved_model(folder)
    if not models and not skipped:
        raise FileNotFoundError(
            "No SavedModel here: pass a serving base folder "
            "(<model_name>/<version>/ inside), one model's folder or one "
            "SavedModel folder. Received: %s" % path)
    return models, skipped


def exported_models(export_dir):
    """The newest version folder of every SavedModel under a serving base
    folder (see `find_models`; LiteRT models are left out).

    Args:
        export_dir: the folder holding `<model_name>/<version>/`.

    Returns:
        A dict model name -> version folder, sorted by name.

    Raises:
        FileNotFoundError: no SavedModel version folder is there.
    """
    models, _ = find_models(export_dir)
    if not models:
        raise FileNotFoundError(
            "No <model_name>/<version>/ SavedModel folder under %r"
            % (export_dir,))
    return models


def main(argv):
    """`python -m export.serving_compat FOLDER...`: prints the markdown
    table for the newest version of every SavedModel the folders hold
    (serving base folders, model folders or SavedModel folders); says on
    stderr what it skips and why. A folder it cannot read is one line,
    `serving_compat: error: ...`, and exit status 1."""
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m export.serving_compat FOLDER...  (serving "
              "base folders, model folders or SavedModel folders)")
        return 0 if argv else 2
    models, skipped = {}, {}
    try:
        for path in argv:
            found, passed_over = find_models(path)
            models.update(found)
            skipped.update(passed_over)
        for folder, why in skipped.items():
            print("%s: skipped %s: %s" % (PROGRAM, folder, why),
                  file=sys.stderr)
        if not models:
            raise FileNotFoundError("no SavedModel to check (skipped: %s)"
                                    % ", ".join(skipped))
        text = markdown_table(models)
    except (OSError, ValueError, tf.errors.OpError,
            protobuf_message.DecodeError) as error:
        message = " ".join(str(getattr(error, "message", None) or error)
                           .split())
        print("%s: error: %s" % (PROGRAM, message), file=sys.stderr)
        return 1
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
