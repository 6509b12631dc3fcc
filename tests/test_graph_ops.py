"""Every op type of the exported graphs is one the model server links."""

from export import graph_ops


def test_exported_graphs_use_only_tensorflow_and_text_ops(exported_albert):
    owners = graph_ops.registered_ops()
    text_ops = set()
    for key in ("serving", "encoder", "preprocessor"):
        path = exported_albert.paths[key]
        ops = graph_ops.op_types(path)
        assert ops, path
        assert graph_ops.unregistered_ops(path, owners) == [], path
        text_ops.update(op for op in ops if owners[op] == "tensorflow_text")
    # The tokenizer really is in the graph (and is tensorflow-text's).
    assert {"SentencepieceOp", "SentencepieceTokenizeOp",
            "NormalizeUTF8"} <= text_ops


def test_an_unknown_op_is_reported(exported_albert):
    owners = graph_ops.registered_ops()
    path = exported_albert.paths["encoder"]
    ops = graph_ops.op_types(path)
    without_matmul = {op: who for op, who in owners.items()
                      if op != "BatchMatMulV2" and op != "MatMul"}
    missing = graph_ops.unregistered_ops(path, without_matmul)
    assert missing and set(missing) <= {"BatchMatMulV2", "MatMul"}
    assert set(missing) <= set(ops)


def test_xla_counts_only_what_a_signature_runs(exported_albert, tmp_path):
    import tensorflow as tf

    # The float32 encoder holds XLA-compiled training-mode functions (fused
    # kernels for `training=True` callers), which no signature runs.
    assert not graph_ops.xla_compiled(exported_albert.paths["encoder"])
    assert not graph_ops.xla_compiled(exported_albert.paths["serving"])

    compiled = tf.function(lambda x: x * 2.0, jit_compile=True)
    spec = tf.TensorSpec([None], tf.float32)

    def save(name, signature_fn):
        module = tf.Module()
        module.compiled = compiled
        module.compiled.get_concrete_function(spec)  # saved, not signed
        module.signed = tf.function(signature_fn, input_signature=[spec])
        path = str(tmp_path / name)
        tf.saved_model.save(module, path, signatures=module.signed)
        return path

    assert not graph_ops.xla_compiled(save("plain", lambda x: x + 1.0))
    # Reached through a call nested in a loop body.
    assert graph_ops.xla_compiled(save("nested", lambda x: tf.while_loop(
        lambda i, y: i < 2, lambda i, y: (i + 1, compiled(y)),
        (0, x))[1]))
