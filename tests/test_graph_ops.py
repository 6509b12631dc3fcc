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
