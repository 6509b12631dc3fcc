"""Which op types an exported SavedModel runs, and who registers them.

The official model server links TensorFlow's ops and tensorflow-text's (and
no others), so every op type in an exported graph must be registered by one
of the two. `unregistered_ops` is what the export tests assert empty;
`python -m export.graph_ops DIR...` prints the report. Which TF Serving
release links them (its bundled TensorFlow and tensorflow-text versions) is
`export.serving_compat`'s question.
"""

import functools
import json
import subprocess
import sys

from tensorflow.core.protobuf import saved_model_pb2


def read_saved_model(path):
    """The `SavedModel` proto of a SavedModel folder (its graphs, function
    library and signatures), read without loading the model."""
    import tensorflow as tf

    with tf.io.gfile.GFile(path.rstrip("/") + "/saved_model.pb", "rb") as f:
        saved_model = saved_model_pb2.SavedModel()
        saved_model.ParseFromString(f.read())
    return saved_model


def op_types(path):
    """Op types of every graph and function of a SavedModel.

    Calls of the SavedModel's own functions (a node whose op names a function
    of the library) are not op types and are left out.

    Args:
        path: the SavedModel folder.

    Returns:
        A sorted list of op type names.
    """
    types = set()
    for meta_graph in read_saved_model(path).meta_graphs:
        graph = meta_graph.graph_def
        functions = {f.signature.name for f in graph.library.function}
        types.update(node.op for node in graph.node)
        for function in graph.library.function:
            types.update(node.op for node in function.node_def)
        types -= functions
    return sorted(types)


def _called_functions(nodes, library):
    """Names of the library functions that `nodes` call: as their op, or
    through a function-valued attr (`f`, `body`, `then_branch`, ...)."""
    for node in nodes:
        if node.op in library:
            yield node.op
        for value in node.attr.values():
            if value.HasField("func"):
                yield value.func.name
            yield from (func.name for func in value.list.func)


def _signature_functions(meta_graph):
    """The library functions a meta graph's signatures can run: those the
    nodes behind their outputs call, and the functions those call."""
    graph = meta_graph.graph_def
    library = {f.signature.name: f for f in graph.library.function}
    nodes = {node.name: node for node in graph.node}
    pending = [info.name.split(":")[0].lstrip("^")
               for signature in meta_graph.signature_def.values()
               for info in signature.outputs.values()]
    seen_nodes = set()
    while pending:  # the graph nodes the outputs depend on
        name = pending.pop()
        if name in seen_nodes or name not in nodes:
            continue
        seen_nodes.add(name)
        pending.extend(i.split(":")[0].lstrip("^") for i in nodes[name].input)
    reached = set()
    calls = list(_called_functions((nodes[n] for n in seen_nodes), library))
    while calls:
        name = calls.pop()
        if name in reached or name not in library:
            continue
        reached.add(name)
        calls.extend(_called_functions(library[name].node_def, library))
    return [library[name] for name in reached]


def xla_compiled(path):
    """Whether a SavedModel's signatures run functions that must be compiled
    by XLA (`jit_compile=True`): the model server runs them only with
    `--xla_cpu_compilation_enabled=true` (TF Serving 2.5 and later).
    Functions no signature reaches (the TF-Hub-style encoder's training-mode
    call, for Python callers) do not count: the server never runs them."""
    for meta_graph in read_saved_model(path).meta_graphs:
        for function in _signature_functions(meta_graph):
            attr = function.attr.get("_XlaMustCompile")
            if attr is not None and attr.b:
                return True
    return False


# Run in a fresh interpreter (`-I`: no PYTHONPATH, no user site), so that
# only TensorFlow and then tensorflow-text have registered ops: nothing this
# process imported can hide a missing op.
_LIST_OPS = """
import json
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api

def names():
    buf = c_api.TF_GetAllOpList()
    try:
        ops = op_def_pb2.OpList.FromString(c_api.TF_GetBuffer(buf))
    finally:
        c_api.TF_DeleteBuffer(buf)
    return sorted(op.name for op in ops.op)

base = names()
import tensorflow_text
print(json.dumps({"tensorflow": base, "with_text": names()}))
"""


def registered_ops():
    """Op types registered by tensorflow, then by tensorflow-text.

    Listed by a fresh interpreter that imports only those two packages (once
    per process).

    Returns:
        A dict op type -> "tensorflow" or "tensorflow_text".

    Raises:
        RuntimeError: the interpreter failed (its stderr is in the message).
    """
    return dict(_registered_ops())


@functools.lru_cache(maxsize=None)
def _registered_ops():
    result = subprocess.run([sys.executable, "-I", "-c", _LIST_OPS],
                            capture_output=True, text=True, check=False)
    if result.returncode:
        raise RuntimeError("Listing registered ops failed: %s"
                           % result.stderr[-2000:])
    lists = json.loads(result.stdout.strip().splitlines()[-1])
    owners = {name: "tensorflow_text" for name in lists["with_text"]}
    owners.update({name: "tensorflow" for name in lists["tensorflow"]})
    return owners


def unregistered_ops(path, owners=None):
    """Op types of a SavedModel that neither TensorFlow nor tensorflow-text has.

    Args:
        path: the SavedModel folder.
        owners: the result of `registered_ops` (computed when None).

    Returns:
        A sorted list (empty when the model server can run the SavedModel).
    """
    owners = registered_ops() if owners is None else owners
    return [op for op in op_types(path) if op not in owners]


def main(paths):
    owners = registered_ops()
    missing = False
    for path in paths:
        ops = op_types(path)
        text_ops = [op for op in ops if owners.get(op) == "tensorflow_text"]
        unknown = [op for op in ops if op not in owners]
        missing = missing or bool(unknown)
        print("%s: %d op types; tensorflow-text: %s; unregistered: %s"
              % (path, len(ops), ", ".join(text_ops) or "none",
                 ", ".join(unknown) or "none"))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
