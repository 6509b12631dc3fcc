"""Serving speed on this CPU: this project's exports beside other runtimes.

Run as `python -m benchmarks.serving --mode=runtimes`: batch 1, one text of
`--seq_length` tokens, the SavedModels, the `.tflite` models, ONNX Runtime
and PyTorch dynamic int8, every runtime on one thread, in turns in one
process. The rows and how each runtime is built:
docs/benchmarks.md#how-the-serving-benchmarks-measure.
"""

import os

import numpy as np

FLOAT32 = "float32 SavedModel"


class Skipped(Exception):
    """A runtime that cannot run here; the message says why."""


def _peers(*modules):
    """Imports `modules` or raises `Skipped` naming the missing one."""
    import importlib

    loaded = []
    for name in modules:
        try:
            loaded.append(importlib.import_module(name))
        except ImportError as error:
            raise Skipped("%s is not installed (pip install -r "
                          "requirements-peers.txt)" % name.split(".")[0]) \
                from error
    return loaded


def _saved_models(pretrainer, proto, workdir, seq_length):
    """`{row name: callable(text)}` of the text-in SavedModels."""
    import tensorflow as tf

    from export import pretrained_export

    runs = {}
    for dtype in ("float32", "bfloat16", "int8"):
        path = pretrained_export.export_pretrainer(
            pretrainer, proto, os.path.join(workdir, "saved_" + dtype),
            max_seq_length=seq_length, save_keras=False,
            serving_dtype=dtype, announce=False)["serving"]
        model = tf.saved_model.load(path).signatures["serving_single"]
        runs["%s SavedModel" % dtype] = (
            lambda text, m=model: m(text=tf.constant([text]))[
                "pooled_output"].numpy()[0])
        print("  exported the %s SavedModel" % dtype, flush=True)
    return runs


def _litert_text(pretrainer, proto, seq_length):
    from ai_edge_litert import interpreter as interpreter_lib
    from tensorflow_text import tflite_registrar

    from export import litert

    runner = interpreter_lib.InterpreterWithCustomOps(
        custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
        model_content=litert.encoder_model(pretrainer.encoder, proto,
                                           seq_length, quantization="int8"),
        num_threads=1).get_signature_runner("serving_default")
    return lambda text: runner(text=np.array([text], dtype=object))[
        "pooled_output"][0]


def _litert_ids(pretrainer):
    from ai_edge_litert import interpreter as interpreter_lib

    from export import litert

    runner = interpreter_lib.Interpreter(
        model_content=litert.ids_encoder_model(pretrainer.encoder, "int8"),
        num_threads=1).get_signature_runner("serving_default")
    return lambda ids: runner(**ids)["pooled_output"][0]


def _huggingface(pretrainer, proto, workdir):
    """`transformers.AlbertModel` of the same weights (float32, eval)."""
    torch, transformers = _peers("torch", "transformers")
    from albert_tf.convert import huggingface
    from albert_tf.convert import weight_set

    folder = os.path.join(workdir, "huggingface")
    if not os.path.isdir(folder):
        os.makedirs(folder)
        spm_file = os.path.join(workdir, "runtimes_spm.model")
        with open(spm_file, "wb") as f:
            f.write(proto)
        huggingface.write(weight_set.Weights(
            pretrainer.config, weight_set.model_to_official(pretrainer),
            spm_model_file=spm_file), folder)
    transformers.logging.set_verbosity_error()
    model = transformers.AlbertModel.from_pretrained(folder)
    return torch, model.eval()


def _torch_int8(pretrainer, proto, workdir):
    import warnings

    torch, model = _huggingface(pretrainer, proto, workdir)
    torch.set_num_threads(1)
    with warnings.catch_warnings():  # its deprecation notice
        warnings.simplefilter("ignore")
        quantized = torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8)

    def run(ids):
        with torch.inference_mode():
            return quantized(**{key: torch.from_numpy(value)
                                for key, value in _hf_inputs(ids).items()}
                             ).pooler_output[0].numpy()

    return run


def _hf_inputs(ids):
    return {"input_ids": ids["input_word_ids"].astype(np.int64),
            "attention_mask": ids["input_mask"].astype(np.int64),
            "token_type_ids": ids["input_type_ids"].astype(np.int64)}


def _onnx_int8(pretrainer, proto, workdir, example):
    import logging
    import warnings

    torch, model = _huggingface(pretrainer, proto, workdir)
    onnx, onnxruntime = _peers("onnx", "onnxruntime")
    from onnxruntime import quantization
    from onnxruntime.transformers import optimizer

    names = ["input_ids", "attention_mask", "token_type_ids"]
    float_path = os.path.join(workdir, "albert.onnx")
    int8_path = os.path.join(workdir, "albert_int8.onnx")
    inputs = _hf_inputs(example)
    with warnings.catch_warnings():  # tracer notices
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, tuple(torch.from_numpy(inputs[n]) for n in names),
            float_path, dynamo=False, opset_version=17, input_names=names,
            output_names=["last_hidden_state", "pooler_output"],
            dynamic_axes={n: {0: "batch", 1: "length"} for n in names})
    # Its advice to pre-process first is printed through the root logger.
    logging.getLogger().setLevel(logging.ERROR)
    # The fusions ONNX Runtime documents for BERT-like models (attention,
    # skip-LayerNorm, GELU): the traced graph quantized as it is ran slower
    # than float32.
    fused = optimizer.optimize_model(
        float_path, model_type="bert",
        num_heads=pretrainer.config.num_attention_heads,
        hidden_size=pretrainer.config.hidden_size)
    fused_path = os.path.join(workdir, "albert_fused.onnx")
    fused.save_model_to_file(fused_path)
    quantization.quantize_dynamic(
        fused_path, int8_path, weight_type=quantization.QuantType.QInt8,
        # Types of the fused ops' outputs, which shape inference leaves out.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        int8_path, options, providers=["CPUExecutionProvider"])
    return lambda ids: session.run(["pooler_output"], _hf_inputs(ids))[0][0]


def _cosine(a, b):
    a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))


def run(preset, seq_length, iterations, warmup, workdir, checkpoint=None,
        spm_model_file=None):
    """Builds every runtime and times them in turns.

    Returns:
        `(rows, tokens)`: rows is a list of `(name, input, seconds or None,
        cosine or None, why skipped or None)`, float32 first; tokens the
        text's packed length.
    """
    import tensorflow as tf

    from albert_tf.layers import preprocessing
    from benchmarks import serving_common

    proto, _, pretrainer = serving_common.albert_model(
        workdir, preset, spm_model_file, checkpoint)
    # Longer than the export takes: every runtime gets exactly seq_length.
    text = " ".join(" ".join(serving_common.texts(4)).split()[
        :4 * seq_length])
    packed = preprocessing.TextPreprocessor(proto, seq_length).encode(
        tf.constant([text]), pad_to_longest=True)
    ids = {key: np.asarray(value, np.int32) for key, value in packed.items()}
    tokens = int(ids["input_mask"].sum())

    runs = {name: ("text", call, text) for name, call in _saved_models(
        pretrainer, proto, workdir, seq_length).items()}
    builders = [
        ("int8 .tflite, text in (XNNPACK)", "text", text,
         lambda: _litert_text(pretrainer, proto, seq_length)),
        ("int8 .tflite, ids in (XNNPACK)", "ids", ids,
         lambda: _litert_ids(pretrainer)),
        ("ONNX Runtime dynamic int8", "ids", ids,
         lambda: _onnx_int8(pretrainer, proto, workdir, ids)),
        ("PyTorch dynamic int8", "ids", ids,
         lambda: _torch_int8(pretrainer, proto, workdir)),
    ]
    skipped = {}
    for name, kind, feed, build in builders:
        try:
            runs[name] = (kind, build(), feed)
            print("  built %s" % name, flush=True)
        except Skipped as why:
            skipped[name] = (kind, str(why))
            print("  skipped %s: %s" % (name, why), flush=True)
    reference = runs[FLOAT32][1](text)
    cosines = {name: _cosine(call(feed), reference)
               for name, (_, call, feed) in runs.items()}
    times = serving_common.time_interleaved(
        [lambda c=call, f=feed: c(f) for _, call, feed in runs.values()],
        iterations, warmup)
    rows = [(name, kind, float(np.median(seconds)), cosines[name], None)
            for (name, (kind, _, _)), seconds in zip(runs.items(), times)]
    rows += [(name, kind, None, None, why)
             for name, (kind, why) in skipped.items()]
    return rows, tokens


def speed_words(reference, seconds):
    """A row's median against float32's, in words ("2.60x faster than
    float32", "1.25x the latency of float32")."""
    from export import serving_dtype_auto

    if seconds == reference:
        return "the reference"
    return serving_dtype_auto.compared_with_float32(seconds / reference)


def format_table(rows, preset, tokens, hardware_line, load=None):
    """The markdown table of `run`'s rows."""
    reference = rows[0][2]
    lines = ["%s, batch 1 x %d tokens, one thread per runtime, medians of "
             "turns in one run" % (preset, tokens),
             "CPU: %s" % hardware_line]
    if load:
        lines.append("Load: %s" % load)
    lines += ["", "| runtime | input | median ms | speed vs float32 "
              "SavedModel | pooled cosine to float32 |",
              "|---|---|---|---|---|"]
    for name, kind, seconds, cosine, why in rows:
        if seconds is None:
            lines.append("| %s | %s | - | skipped: %s | - |"
                         % (name, kind, why))
            continue
        lines.append("| %s | %s | %.1f | %s | %.4f |" % (
            name, kind, 1e3 * seconds, speed_words(reference, seconds),
            cosine))
    return "\n".join(lines)
