"""The TF Serving REST examples of docs/serving.md, and a local stand-in
server.

`EXAMPLES` holds every documented request with the response it promises; the
guide's section is rendered from them (`python -m tools.rest_examples` prints
it), and the tests push the same requests through the exported signatures
with `predict`, which maps JSON to tensors and back the way the model server's
REST API does:

- row format `{"instances": [...]}`: one object (or bare value, for one
  input) per example; the response is `{"predictions": [...]}`, likewise;
- columnar format `{"inputs": {...}}` (or a bare list for one input); the
  response is `{"outputs": {...}}` (a bare value for one output);
- `{"b64": "..."}` in place of a string carries raw bytes;
- an input left out of the request takes the signature's default (the
  `text_b` of `serving_default` has one: no second segment).

Shapes in the promised responses use the names `H` (the hidden size), `K`
(the export's `top_k`) and `T`, the response's sequence length: with the
default `--serving_shape=dynamic` the request's longest packed text rounded
up to a multiple of 8 and capped at `max_seq_length`, with `fixed`
`max_seq_length` itself. `check_response` binds a name missing from its
`dims` on first use and holds every later use to it.
"""

import base64
import collections
import json
import sys

MODEL_NAME = "albert"
PORT = 8501

Example = collections.namedtuple(
    "Example", ["title", "signature", "request", "returns", "expect"])

_ENCODING = {"pooled_output": ["H"], "sequence_output": ["T", "H"],
             "input_mask": ["T"]}


def _fill_mask_row(masks):
    return {"mask_positions": [masks], "top_k_ids": [masks, "K"],
            "top_k_pieces": [masks, "K"],
            "top_k_probabilities": [masks, "K"], "dropped_masks": []}


EXAMPLES = (
    Example(
        title="Row format: one object per text; `text_b` may be left out",
        signature="serving_default",
        request={"instances": [{"text": "The cat sat on the mat."},
                               {"text": "ALBERT shares its layers."}]},
        returns="`predictions`: one object per instance with "
                "`pooled_output` (H floats), `sequence_output` (T lists of "
                "H floats) and `input_mask` (T ints, 1 at real tokens).",
        expect={"predictions": [_ENCODING, _ENCODING]}),
    Example(
        title="Single texts where `text_b` cannot be left out",
        signature="serving_single",
        request={"signature_name": "serving_single",
                 "instances": ["The cat sat on the mat.",
                               "ALBERT shares its layers."]},
        returns="the same as above. `serving_single` has the one input "
                "`text`: for model servers that do not fill signature "
                "defaults, and for `signatures[...]` calls from Python.",
        expect={"predictions": [_ENCODING, _ENCODING]}),
    Example(
        title="Row format with sentence pairs (an empty `text_b` means none)",
        signature="serving_default",
        request={"signature_name": "serving_default",
                 "instances": [
                     {"text": "Is the cat on the mat?",
                      "text_b": "The cat sat on the mat."},
                     {"text": "A single sentence.", "text_b": ""}]},
        returns="the same as above; the pair is packed as "
                "`[CLS] text [SEP] text_b [SEP]`.",
        expect={"predictions": [_ENCODING, _ENCODING]}),
    Example(
        title="Columnar format",
        signature="serving_default",
        request={"inputs": {"text": ["The cat sat on the mat.",
                                     "ALBERT shares its layers."]}},
        returns="`outputs`: `pooled_output` (2 x H), `sequence_output` "
                "(2 x T x H), `input_mask` (2 x T).",
        expect={"outputs": {"pooled_output": [2, "H"],
                            "sequence_output": [2, "T", "H"],
                            "input_mask": [2, "T"]}}),
    Example(
        title="Bytes as base64 (any bytes; invalid UTF-8 becomes <unk>)",
        signature="serving_default",
        request={"instances": [
            {"text": {"b64": base64.b64encode(
                "Caf\u00e9 na\u00efve r\u00e9sum\u00e9".encode()).decode()}},
            {"text": {"b64": base64.b64encode(b"bad \xff\xfe bytes").decode()}},
        ]},
        returns="the same as the first example.",
        expect={"predictions": [_ENCODING, _ENCODING]}),
    Example(
        title="Fill in `[MASK]`",
        signature="fill_mask",
        request={"signature_name": "fill_mask",
                 "instances": ["The cat [MASK] on the mat.",
                               "[MASK] is the capital of [MASK]."]},
        returns="`predictions`: one object per text with `mask_positions` "
                "(M ints: where each mask sits in the packed sequence, M the "
                "most masks of a text in the request, -1 past a text's own), "
                "`top_k_ids`, `top_k_pieces` and `top_k_probabilities` "
                "(M lists of K, best first; -1, \"\" and 0 past a text's "
                "own masks), and `dropped_masks` (markers that got no "
                "prediction: cut off by T, or not written `[MASK]`).",
        expect={"predictions": [_fill_mask_row(2), _fill_mask_row(2)]}),
    Example(
        title="Sentence order",
        signature="sop",
        request={"signature_name": "sop",
                 "inputs": {"text": ["It rained all day."],
                            "text_b": ["So the match was cancelled."]}},
        returns="`outputs`: `sop_logits` and `sop_probabilities` (1 x 2; "
                "index 0: the segments are in order, 1: swapped).",
        expect={"outputs": {"sop_logits": [1, 2],
                            "sop_probabilities": [1, 2]}}),
)


# === Local stand-in of the REST API ===
def _decode_value(value):
    """JSON value -> Python value with `{"b64": ...}` turned into bytes."""
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_decode_value(v) for v in value]
    if isinstance(value, str):
        return value.encode("utf-8")
    return value


def _encode_value(value, name):
    """Numpy value -> JSON value (strings as text, `*_bytes` as base64)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return [_encode_value(v, name) for v in value]
    if isinstance(value, bytes):
        if name.endswith("_bytes"):
            return {"b64": base64.b64encode(value).decode()}
        return value.decode("utf-8", errors="replace")
    return value.item() if hasattr(value, "item") else value


def signature_defaults(saved_model_dir, signature_name):
    """The default input values a SignatureDef holds, as numpy arrays."""
    import tensorflow as tf

    from export import graph_ops

    signature = graph_ops.read_saved_model(
        saved_model_dir).meta_graphs[0].signature_def[signature_name]
    return {name: tf.make_ndarray(proto)
            for name, proto in signature.defaults.items()}


class RestError(ValueError):
    """A request the REST API would answer with an error."""


def predict(saved_model_dir, request, loaded=None):
    """Answers a `:predict` request body as the model server would.

    Args:
        saved_model_dir: the SavedModel version folder.
        request: the JSON body (a dict).
        loaded: the already loaded SavedModel (loaded when None).

    Returns:
        The JSON response body (a dict).

    Raises:
        RestError: a malformed request (missing or unknown inputs).
        tf.errors.InvalidArgumentError: the signature rejected the inputs.
    """
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    if loaded is None:
        loaded = tf.saved_model.load(saved_model_dir)
    name = request.get("signature_name", "serving_default")
    function = loaded.signatures[name]
    input_names = sorted(function.structured_input_signature[1])
    if ("instances" in request) == ("inputs" in request):
        raise RestError("A request holds either 'instances' or 'inputs'.")
    row_format = "instances" in request
    if row_format:
        instances = request["instances"]
        if instances and isinstance(instances[0], dict) and not (
                set(instances[0]) == {"b64"}):
            keys = set(instances[0])
            if any(set(i) != keys for i in instances):
                raise RestError("Every instance must have the same keys.")
            columns = {k: [_decode_value(i[k]) for i in instances]
                       for k in keys}
        else:
            columns = {input_names[0] if len(input_names) == 1 else "":
                       _decode_value(instances)}
    else:
        inputs = request["inputs"]
        columns = ({k: _decode_value(v) for k, v in inputs.items()}
                   if isinstance(inputs, dict) else
                   {input_names[0] if len(input_names) == 1 else "":
                    _decode_value(inputs)})
    unknown = set(columns) - set(input_names)
    if unknown:
        raise RestError("Inputs contains invalid name: %s" % sorted(unknown))
    defaults = signature_defaults(saved_model_dir, name)
    kwargs = {}
    for input_name in input_names:
        if input_name in columns:
            value = columns[input_name]
            spec = function.structured_input_signature[1][input_name]
            kwargs[input_name] = tf.constant(
                np.array(value, dtype=object) if spec.dtype == tf.string
                else value, dtype=spec.dtype)
        elif input_name in defaults:
            kwargs[input_name] = tf.constant(defaults[input_name])
        else:
            raise RestError("Missing input %r and no default value."
                            % input_name)
    outputs = {k: v.numpy() for k, v in function(**kwargs).items()}
    if row_format:
        rows = len(next(iter(outputs.values())))
        if len(outputs) == 1:
            (key, value), = outputs.items()
            return {"predictions": _encode_value(value, key)}
        return {"predictions": [
            {k: _encode_value(v[i], k) for k, v in outputs.items()}
            for i in range(rows)]}
    if len(outputs) == 1:
        (key, value), = outputs.items()
        return {"outputs": _encode_value(value, key)}
    return {"outputs": {k: _encode_value(v, k) for k, v in outputs.items()}}


def check_response(response, expect, dims):
    """Checks a response against an example's promise.

    Args:
        response: the JSON response.
        expect: the example's `expect`: dicts and lists mirror the response;
            a list of sizes (ints or names in `dims`) is a nested list shape.
        dims: sizes of the names, e.g. `{"H": 768, "K": 5}`. A name not in
            `dims` (such as `T`, which varies with the request) takes the
            size it first meets, and `dims` is updated with it.

    Raises:
        AssertionError: naming the first difference.
    """

    def shape_of(value):
        shape = []
        while isinstance(value, list):
            shape.append(len(value))
            value = value[0] if value else None
        return shape

    def check(value, spec, where):
        if isinstance(spec, dict):
            assert isinstance(value, dict) and set(value) == set(spec), (
                "%s: keys %s, expected %s" % (
                    where, sorted(value) if isinstance(value, dict) else value,
                    sorted(spec)))
            for key in spec:
                check(value[key], spec[key], where + "." + key)
        elif spec == []:  # a scalar
            assert isinstance(value, (int, float)), (where, value)
        elif spec and all(isinstance(s, (int, str)) for s in spec):
            actual = shape_of(value)
            for s, size in zip(spec, actual):
                if isinstance(s, str):
                    dims.setdefault(s, size)
            expected = [dims.get(s, s) if isinstance(s, str) else s
                        for s in spec]
            assert actual == expected, "%s: shape %s, expected %s" % (
                where, actual, expected)
        else:
            assert isinstance(value, list) and len(value) == len(spec), (
                "%s: %d items, expected %d" % (where, len(value), len(spec)))
            for index, (item, item_spec) in enumerate(zip(value, spec)):
                check(item, item_spec, "%s[%d]" % (where, index))

    check(response, expect, "response")


# === The serving guide's section ===
def render_markdown(model_name=MODEL_NAME, port=PORT):
    """The serving guide's section (commands and REST examples).

    Args:
        model_name: the exported model name.
        port: the REST port of the model server.

    Returns:
        Markdown text.
    """
    return "\n".join(_commands(model_name, port) + _signatures(model_name)
                     + _examples() + _from_python(model_name))


def _commands(model_name, port):
    return [
        "### Serving with TF Serving",
        "",
        "Export a checkpoint (writes `$EXPORT_DIR/%s/<version>/`, "
        "`%s_encoder/`, `%s_preprocessor/`, the next free version):"
        % (model_name, model_name, model_name),
        "",
        "```sh",
        "python -m export.export_saved_model --checkpoint=$MODEL_DIR "
        "--albert_config_file=$MODEL_DIR/albert_config.json "
        "--spm_model_file=$MODEL_DIR/spm.model --export_dir=$EXPORT_DIR "
        "--model_name=%s --max_seq_length=128" % model_name,
        "```",
        "",
        "Serve it (the official image links the tensorflow-text ops; "
        "`$EXPORT_DIR` must be an absolute path; "
        "`--xla_cpu_compilation_enabled=true` is what an int8 export needs, "
        "and a model without XLA-compiled functions does not use it). The "
        "export ends by printing the exact `tensorflow_model_server` and "
        "`docker run` commands for what it wrote (all three models, through "
        "a `--model_config_file` it writes into the version):",
        "",
        "```sh",
        "docker run --rm -p %d:8501 "
        "--mount type=bind,source=$EXPORT_DIR/%s,target=/models/%s "
        "-e MODEL_NAME=%s -t tensorflow/serving:latest "
        "--xla_cpu_compilation_enabled=true"
        % (port, model_name, model_name, model_name),
        "```",
        "",
        "Every request below is `POST http://localhost:%d/v1/models/%s:predict`"
        " with the JSON body shown, e.g. `curl -s -d @body.json "
        "http://localhost:%d/v1/models/%s:predict`. Shapes: H is the "
        "hidden size, K `--top_k` (5), and T the sequence length of the "
        "response (below)."
        % (port, model_name, port, model_name),
        "",
    ]


def _signatures(model_name):
    return [
        "Signatures of `%s` (strings in; tokenization runs in the graph):"
        % model_name,
        "",
        "| signature | inputs | outputs |",
        "|---|---|---|",
        "| `serving_default` | `text` string [B]; `text_b` string [B], "
        "optional (the signature's default: none) | `pooled_output` float "
        "[B, H], `sequence_output` float [B, T, H], `input_mask` int [B, T] |",
        "| `serving_single` | `text` string [B] | as `serving_default` |",
        "| `fill_mask` | `text` string [B] with `[MASK]` markers | "
        "`mask_positions` int [B, M], `top_k_ids` int [B, M, K], "
        "`top_k_pieces` string [B, M, K], `top_k_probabilities` float "
        "[B, M, K], `dropped_masks` int [B] (markers cut off by T, or not in "
        "upper case) |",
        "| `sop` | `text`, `text_b` string [B] | `sop_logits`, "
        "`sop_probabilities` float [B, 2] (0: in order, 1: swapped) |",
        "",
        "`text_b` may be left out of `serving_default` requests on a model "
        "server that fills inputs from signature defaults (recent TF Serving "
        "releases do, on REST and gRPC Predict); Python's "
        "`model.signatures[\"serving_default\"]"
        "` does not, and older servers may not: send single texts to "
        "`serving_single` there (or `\"text_b\": \"\"` in every instance). "
        "Pairs keep going to `serving_default`, as before.",
        "",
        "Output shapes: T is the request's longest packed text (`[CLS]` and "
        "`[SEP]`s counted) rounded up to a multiple of 8 and capped at "
        "`--max_seq_length`: a 5-token text returns `sequence_output` "
        "[1, 8, H] and `input_mask` [1, 8]. Exported with "
        "`--serving_shape=fixed`, T is always `--max_seq_length` (static "
        "shapes, for TPU serving and batching servers). At the positions "
        "where `input_mask` is 1 both exports return the same values (where "
        "it is 0, `sequence_output` holds padding with no defined value); "
        "`fill_mask`, `sop` and the fine-tuned exports return no T-sized "
        "output and the same values either way. A batch of mixed lengths "
        "runs in groups of rows of one rounded length, so it costs about the "
        "sum of its rows' lengths, not B times the longest.",
        "",
        "Empty strings, text longer "
        "than `--max_seq_length` (truncated), invalid UTF-8 (`<unk>` in its word) "
        "and an empty "
        "batch are answered; a `text_b` whose length differs from `text`'s "
        "is refused with `INVALID_ARGUMENT`.",
        "",
    ]


def _examples():
    lines = []
    for example in EXAMPLES:
        lines += [
            "#### %s (`%s`)" % (example.title, example.signature),
            "",
            "```json",
            json.dumps(example.request, ensure_ascii=False),
            "```",
            "",
            "Returns %s" % example.returns,
            "",
        ]
    return lines


def _from_python(model_name):
    return [
        "#### From Python, and fine-tuning",
        "",
        "```python",
        "import tensorflow as tf",
        "import tensorflow_text  # registers the tokenizer ops; needed to load",
        "",
        "model = tf.saved_model.load(\"$EXPORT_DIR/%s/1\")" % model_name,
        "model.serve(tf.constant([\"The cat sat on the mat.\"]))"
        "  # text_b optional here too",
        "model.signatures[\"serving_single\"](text=tf.constant([\"A text.\"]))",
        "",
        "# TF-Hub-style pair",
        "preprocessor = tf.saved_model.load(\"$EXPORT_DIR/%s_preprocessor/1\")"
        % model_name,
        "encoder = tf.saved_model.load(\"$EXPORT_DIR/%s_encoder/1\")"
        % model_name,
        "tokens = preprocessor.tokenize(tf.constant([\"first\"]))",
        "inputs = preprocessor.bert_pack_inputs([tokens, tokens], "
        "seq_length=tf.constant(64))",
        "pooled = encoder(inputs)[\"pooled_output\"]",
        "",
        "# As a trainable Keras layer (SavedModel), or the Keras encoder",
        "from export import keras_layer",
        "layer = keras_layer.load_exported_encoder("
        "\"$EXPORT_DIR/%s_encoder/1\")" % model_name,
        "keras_encoder = keras_layer.load_exported_encoder("
        "\"$EXPORT_DIR/%s_encoder/1/encoder.keras\")" % model_name,
        "```",
        "",
    ]


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
