"""The model server command lines an export's SavedModels need.

Every export ends with one block (`command_block`): the exact
`tensorflow_model_server` command and the `docker run` command that serve
the SavedModels it wrote, flags included:

- `--xla_cpu_compilation_enabled=true` exactly when one of them holds
  XLA-compiled functions (an int8 export; read from each SavedModel's
  `assets.extra/ops.json`, which `export.serving_compat.check_export`
  writes from the graph), since without it the model server fails the
  first request;
- one SavedModel: `--model_name` and `--model_base_path`; several (the
  pretrained export's text-in model, encoder and preprocessor):
  `--model_config_file`, a config listing them all (`CONFIG_FILE`, written
  into the text-in model's version folder with the rest of the version);
- the REST port (`REST_PORT`) and the gRPC port (`GRPC_PORT`).

Docker mounts a local export at the same path inside the container, so the
config's absolute paths hold in both commands. The image tag is `latest`
when the newest TF Serving release of `export/tf_serving_ops.json` links
every op of the export, else the newest release that does. A `.tflite`
folder is not a TF Serving model and is not listed.
"""

import os
import shlex

import tensorflow as tf

from export import serving_compat

REST_PORT = 8501
GRPC_PORT = 8500
IMAGE = "tensorflow/serving"
CONFIG_FILE = os.path.join("assets.extra", "models.config")


def _is_remote(path):
    return "://" in str(path)


def _absolute(path):
    return str(path) if _is_remote(path) else os.path.abspath(path)


def model_config(export_dir, model_names):
    """The text of a `--model_config_file` serving `model_names` from
    `export_dir` (absolute base paths)."""
    base = _absolute(export_dir)
    entries = "".join(
        "  config {\n    name: %s\n    base_path: %s\n"
        "    model_platform: \"tensorflow\"\n  }\n"
        % (_quoted(name), _quoted(os.path.join(base, name)))
        for name in model_names)
    return "model_config_list {\n%s}\n" % entries


def _quoted(text):
    """A text-format protobuf string."""
    return '"%s"' % str(text).replace("\\", "\\\\").replace('"', '\\"')


def write_config(version_folder, export_dir, model_names):
    """Writes `model_config(export_dir, model_names)` to
    `<version_folder>/CONFIG_FILE` (a staged folder: written with the
    version, never over a file that exists); returns the final path the
    commands name, given the version folder it will be renamed to."""
    path = os.path.join(version_folder, CONFIG_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(model_config(export_dir, model_names))
    return path


def _image_tag(records, table=None):
    """`latest` when the newest known release serves every record's
    SavedModel, else the newest release that does (None when none does)."""
    table = table or serving_compat.load_table()
    known = serving_compat.known_versions(table)
    common = set(known)
    for record in records:
        common &= set(record.get("tf_serving_releases") or ())
    if known[-1] in common:
        return "latest"
    ordered = [v for v in known if v in common]
    return table["releases"][ordered[-1]]["tag"] if ordered else None


def command_block(export_dir, model_names, xla, tag="latest",
                  config_file=None):
    """The block an export prints at its end.

    Args:
        export_dir: the serving base folder.
        model_names: the SavedModel folders to serve (not `.tflite` ones).
        xla: whether any of them holds XLA-compiled functions.
        tag: the `tensorflow/serving` image tag, or None when no known
            release serves the export (said in the block).
        config_file: with several models, the final path of their
            `--model_config_file`.

    Returns:
        The text (several lines, no trailing newline).
    """
    base = _absolute(export_dir)
    ports = ["--port=%d" % GRPC_PORT, "--rest_api_port=%d" % REST_PORT]
    flags = [serving_compat.XLA_SERVER_FLAG] if xla else []
    remote = _is_remote(base)
    publish = ["-p", "%d:%d" % (REST_PORT, REST_PORT),
               "-p", "%d:%d" % (GRPC_PORT, GRPC_PORT)]
    if len(model_names) == 1:
        name = model_names[0]
        served = os.path.join(base, name)
        server = ["--model_name=" + name, "--model_base_path=" + served]
        if remote:
            mount = ["-e", "MODEL_BASE_PATH=" + base]
        else:
            mount = ["--mount", "type=bind,source=%s,target=/models/%s"
                     % (served, name)]
        docker_env = ["-e", "MODEL_NAME=" + name]
        docker_args = []
    else:
        server = ["--model_config_file=" + _absolute(config_file)]
        mount = [] if remote else [
            "--mount", "type=bind,source=%s,target=%s" % (base, base)]
        docker_env = []
        docker_args = list(server)
    command = ["tensorflow_model_server", *ports, *server, *flags]
    docker = ["docker", "run", "--rm", *publish, *mount, *docker_env, "-t",
              "%s:%s" % (IMAGE, tag or "latest"), *docker_args, *flags]
    lines = [
        "To serve %s with TF Serving (REST on port %d, gRPC on %d):"
        % (", ".join(model_names), REST_PORT, GRPC_PORT),
        "  " + shlex.join(command),
        "or with Docker:",
        "  " + shlex.join(docker),
    ]
    if xla:
        lines.append("%s is needed: the int8 model runs XLA-compiled "
                     "functions, and the model server fails its first "
                     "request without it." % serving_compat.XLA_SERVER_FLAG)
    if tag is None:
        lines.append("No TF Serving release of export/tf_serving_ops.json "
                     "links all the ops of this export (see "
                     "assets.extra/ops.json).")
    return "\n".join(lines)


def tflite_lines(export_dir, model_name):
    """The lines for an ids-in `model.tflite` folder (`export.litert`'s
    `--litert_inputs=ids`): the model server command with
    `--prefer_tflite_model=true`, said to be untried."""
    base = os.path.join(_absolute(export_dir), model_name)
    command = ["tensorflow_model_server", "--port=%d" % GRPC_PORT,
               "--rest_api_port=%d" % REST_PORT, "--model_name=" + model_name,
               "--model_base_path=" + base, "--prefer_tflite_model=true"]
    return ["%s (token ids in, LiteRT builtin ops only; not tried on a "
            "model server, see docs/serving.md):" % model_name,
            "  " + shlex.join(command)]


def block_for_export(export_dir, version_folders):
    """`command_block` for the SavedModel version folders an export wrote,
    from what they hold (their `ops.json` records and the config file).

    Args:
        export_dir: the serving base folder.
        version_folders: a dict model name -> final version folder (the
            text-in model first); folders without `saved_model.pb` (a
            `.tflite`) are left out.

    Returns:
        The block's text.
    """
    saved = {name: folder for name, folder in version_folders.items()
             if tf.io.gfile.exists(os.path.join(folder, "saved_model.pb"))}
    records = [serving_compat.read_record(folder) for folder in saved.values()]
    xla = any(record.get("xla_compiled") for record in records)
    names = list(saved)
    config_file = None
    if len(names) > 1:
        config_file = os.path.join(saved[names[0]], CONFIG_FILE)
    return command_block(export_dir, names, xla, _image_tag(records),
                         config_file)
