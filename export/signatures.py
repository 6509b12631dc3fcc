"""Builders of the three exported SavedModels.

- The end-to-end serving model (text in; what TF Serving serves): the
  signatures `serving_default(text, text_b)`, `serving_single(text)`,
  `fill_mask(text)` and `sop(text, text_b)`, with `albert_config.json` and
  `spm.model` as assets.
- The TF-Hub-style encoder (int32 ids in; `pooled_output`,
  `sequence_output`, `encoder_outputs` out) and preprocessor (text in, the
  encoder's inputs out).

Their inputs, outputs and shapes are documented for users in
docs/serving.md. With `serving_shape="dynamic"` (the default) T is the
batch's longest packed row rounded up to 8 and capped at `max_seq_length`,
and a mixed batch runs in groups of rows of about the same length
(`run_by_length`); with "fixed" T is always `max_seq_length`. Tokenization
and packing are those of `albert_tf.layers.preprocessing`.

Shape legend: B batch, T sequence length, H hidden, M masks, K top k.
"""

import tensorflow as tf

from albert_tf.layers import preprocessing
from albert_tf.tasks import fill_mask as fill_mask_lib

_STRINGS = tf.TensorSpec([None], tf.string)
_IDS = tf.TensorSpec([None, None], tf.int32)
_ENCODER_SPEC = {name: _IDS for name in
                 ("input_word_ids", "input_mask", "input_type_ids")}
_RAGGED_IDS = tf.RaggedTensorSpec([None, None], tf.int32)


def _float32(tensor):
    return tf.cast(tensor, tf.float32)


def _check_pair_batch(text, text_b):
    """Fails with a clear message when `text_b` does not pair up with `text`."""
    return tf.debugging.assert_equal(
        tf.shape(text_b)[0], tf.shape(text)[0],
        message="text_b must be empty (no second segment) or hold one string "
                "per text")


def _encoder_outputs(encoder, inputs, training=False):
    outputs = encoder(inputs, training=training)
    return {
        "pooled_output": _float32(outputs["pooled_output"]),
        "sequence_output": _float32(outputs["sequence_output"]),
        "encoder_outputs": [_float32(x) for x in outputs["encoder_outputs"]],
    }


_ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def checked_encoder_inputs(inputs, config):
    """The encoder inputs of a signature, checked when run.

    Each must be int32 `[B, T]` (rank checked in the graph, as in
    `preprocessing.checked_texts`), all three of one shape, T from 1 to the
    model's `max_position_embeddings`, and the ids within their tables: out
    of range, an embedding lookup fails on CPU and reads zeros on GPU.

    Args:
        inputs: a dict with the three keys of `_ENCODER_INPUTS`.
        config: the encoder's `AlbertConfig`.

    Returns:
        The dict of the checked tensors.

    Raises:
        tf.errors.InvalidArgumentError: at run time, naming the input.
    """
    checked = {}
    for name in _ENCODER_INPUTS:
        value = inputs[name]
        rank_check = tf.debugging.Assert(
            tf.equal(tf.raw_ops.Rank(input=value), 2),
            [f"{name} must be an int32 [B, T] tensor. Received shape:",
             tf.shape(value)])
        with tf.control_dependencies([rank_check]):
            checked[name] = tf.raw_ops.EnsureShape(input=value,
                                                   shape=[None, None])
    ids = checked["input_word_ids"]
    checks = [
        tf.debugging.assert_equal(
            tf.shape(checked[name]), tf.shape(ids),
            message=f"{name} must have the shape of input_word_ids [B, T]")
        for name in _ENCODER_INPUTS[1:]]
    # T=0 has no [CLS] to pool: refused here rather than as a slice error.
    checks.append(tf.debugging.assert_positive(
        tf.shape(ids)[1],
        message="input_word_ids: its length T must be at least 1 ([CLS])"))
    checks.append(tf.debugging.assert_less_equal(
        tf.shape(ids)[1], config.max_position_embeddings,
        message="input_word_ids: its length T exceeds max_position_embeddings="
                f"{config.max_position_embeddings} (the model's position "
                "table)"))
    for name, size in (("input_word_ids", config.vocab_size),
                       ("input_type_ids", config.type_vocab_size),
                       ("input_mask", 2)):
        checks.append(tf.debugging.assert_non_negative(
            checked[name], message=f"{name} holds a negative value"))
        checks.append(tf.debugging.assert_less(
            checked[name], size,
            message=f"{name} holds a value >= {size}, the size of its table"))
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in checked.items()}


def _new_root(model_variables):
    """A trackable root holding a Keras model's variables (not the model).

    The Keras objects stay out of the object graph (as `keras.export` does);
    the functions capture their variables, which are saved through the lists.
    """
    root = tf.__internal__.tracking.AutoTrackable()
    root.variables = list(model_variables)
    root.trainable_variables = [v for v in model_variables if v.trainable]
    root.non_trainable_variables = [
        v for v in model_variables if not v.trainable]
    return root


def _add_assets(root, assets):
    for name, path in (assets or {}).items():
        setattr(root, name, tf.saved_model.Asset(path))


def _pad_axis_1(value, width):
    """Zero-pads axis 1 of `value` (rank >= 2) to `width`."""
    paddings = [[0, 0], [0, width - tf.shape(value)[1]]]
    paddings += [[0, 0]] * (value.shape.rank - 2)
    return tf.pad(value, paddings)


def _zero_row(value):
    """One row of zeros shaped as a row of `value` (`[1, ...]`)."""
    return tf.zeros(tf.concat([[1], tf.shape(value)[1:]], 0), value.dtype)


# What one more call of the model costs, in padded tokens: a call reads all
# of the encoder's weights whatever its length (ALBERT-base's cost per call
# and per token: docs/benchmarks.md, "Serving"), so two length groups run as
# one when the padding that adds costs less than a call.
GROUP_COST_TOKENS = 64


def merge_groups(widths, counts, group_cost=GROUP_COST_TOKENS):
    """The cheapest runs of consecutive length groups.

    A run of groups `i..j` costs `group_cost + widths[j] * (their rows)`:
    it runs at its widest group's length. The runs with the least total cost
    are found by dynamic programming over the groups.

    Args:
        widths: int32 `[G]`, ascending: each group's length.
        counts: int32 `[G]`: its rows.
        group_cost: the cost of a run besides its tokens (see
            `GROUP_COST_TOKENS`).

    Returns:
        `(run_widths, run_counts)`, int32 `[R]` each, R <= G, ascending.
    """
    size = tf.size(widths)
    rows_to = tf.cumsum(counts)  # rows in groups 0..j
    rows_before = rows_to - counts  # rows in groups 0..i-1

    def forward(j, best, first):
        # The cheapest runs of groups 0..j whose last run starts at i.
        candidates = best[:j + 1] + group_cost + widths[j] * (
            rows_to[j] - rows_before[:j + 1])
        start = tf.argmin(candidates, output_type=tf.int32)
        best = tf.tensor_scatter_nd_update(best, [[j + 1]],
                                           [candidates[start]])
        first = tf.tensor_scatter_nd_update(first, [[j]], [start])
        return j + 1, best, first

    _, _, first = tf.while_loop(
        lambda j, *_: j < size, forward,
        (tf.constant(0), tf.zeros([size + 1], tf.int32),
         tf.zeros([size], tf.int32)),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None]),
                          tf.TensorShape([None])))

    def backward(j, ends):
        return first[j] - 1, ends.write(ends.size(), j)

    _, ends = tf.while_loop(
        lambda j, _: j >= 0, backward,
        (size - 1, tf.TensorArray(tf.int32, size=0, dynamic_size=True)))
    ends = tf.reverse(ends.stack(), [0])  # last group of each run
    starts = tf.gather(first, ends)
    return (tf.gather(widths, ends),
            tf.gather(rows_to, ends) - tf.gather(rows_before, starts))


def run_by_length(fn, inputs, multiple=preprocessing.LENGTH_MULTIPLE,
                  group_cost=GROUP_COST_TOKENS):
    """Runs `fn` on groups of rows of one padded length; joins the results.

    A dynamically padded batch is as long as its longest row; run whole, a
    mixed batch costs B times that length. Here the rows are sorted by their
    own length rounded up to `multiple`, neighbouring lengths are grouped
    where a separate call would cost more than the padding
    (`merge_groups`), each group runs at its length, and the results are
    padded back to the batch's T and put back in order: a mixed batch costs
    about the sum of its rows' lengths. Each row's values are those of
    running the batch whole (padding is masked), to float rounding.

    Args:
        fn: encoder inputs (dict of int32 `[n, w]`) -> dict of float32
            tensors, each `[n]`, `[n, ...]`; the keys named in `fn.sequence_keys`
            (a tuple attribute, may be empty) have axis 1 of length w.
        inputs: the batch's encoder inputs, int32 `[B, T]`.
        multiple: the group lengths are multiples of this (or T).
        group_cost: see `merge_groups`; 0 runs every length separately.

    Returns:
        `fn`'s outputs for the whole batch, in the input order, the sequence
        outputs padded with zeros to T.
    """
    # An empty batch runs as one row of padding, dropped at the end: one
    # code path, so `fn` is traced twice (first group, loop) and not thrice.
    rows_in = tf.shape(inputs["input_mask"])[0]
    inputs = {key: tf.concat([value, _zero_row(value)], 0)[
        :tf.maximum(rows_in, 1)] for key, value in inputs.items()}
    mask = inputs["input_mask"]
    seq_length = tf.shape(mask)[1]
    widths = tf.minimum(
        (tf.maximum(tf.reduce_sum(mask, 1), 1) + multiple - 1)
        // multiple * multiple, seq_length)
    order = tf.argsort(widths, stable=True)
    group_widths, _, counts = tf.unique_with_counts(tf.gather(widths, order))
    group_widths, counts = merge_groups(group_widths, counts, group_cost)
    starts = tf.cumsum(counts, exclusive=True)
    sequence_keys = tuple(getattr(fn, "sequence_keys", ()))

    def run_group(index):
        rows = order[starts[index]:starts[index] + counts[index]]
        width = group_widths[index]
        outputs = fn({key: tf.gather(value, rows)[:, :width]
                      for key, value in inputs.items()})
        return {key: _pad_axis_1(value, seq_length) if key in sequence_keys
                else value for key, value in outputs.items()}

    def grouped():
        # The first group fixes the structure and dtypes of the arrays.
        first = run_group(0)
        keys = sorted(first)
        arrays = [tf.TensorArray(first[key].dtype, size=tf.size(counts),
                                 infer_shape=False).write(0, first[key])
                  for key in keys]

        def body(index, *arrays):
            outputs = run_group(index)
            return (index + 1,) + tuple(
                array.write(index, outputs[key])
                for key, array in zip(keys, arrays))

        _, *arrays = tf.while_loop(
            lambda index, *_: index < tf.size(counts), body,
            (tf.constant(1),) + tuple(arrays))
        restore = tf.argsort(order)  # sorted position of each input row
        return {key: tf.gather(array.concat(), restore)
                for key, array in zip(keys, arrays)}

    return {key: value[:rows_in] for key, value in grouped().items()}


# Row counts an XLA-compiled model runs at (then multiples of the last):
# XLA compiles a program for every input shape, and a server sees every
# batch size, so the rows of a batch (or of a length group) are padded up to
# the next of these with rows of padding, which keeps the shapes compiled to
# a few per sequence length.
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


def bucketed_rows(rows):
    """The smallest of `ROW_BUCKETS` (or multiple of the last) >= `rows`."""
    buckets = tf.constant(ROW_BUCKETS)
    index = tf.searchsorted(buckets, tf.reshape(rows, [1]))[0]
    largest = ROW_BUCKETS[-1]
    return tf.where(index < len(ROW_BUCKETS),
                    tf.gather(buckets, tf.minimum(index, len(ROW_BUCKETS) - 1)),
                    (rows + largest - 1) // largest * largest)


def model_runner(fn, compile_with_xla=False):
    """`fn` (encoder inputs -> dict of tensors with the rows first) as an
    export runs it: as one `tf.function`, or compiled by XLA on rows padded
    to `bucketed_rows` (the padding rows' outputs are dropped).

    Either way every call site of the export (each signature, each length
    group) calls one trace of `fn` (per input shape), not a copy of it.
    The result keeps `fn.sequence_keys` (see `run_by_length`).
    """
    sequence_keys = tuple(getattr(fn, "sequence_keys", ()))
    if not compile_with_xla:
        shared = tf.function(fn, autograph=False)
        shared.sequence_keys = sequence_keys
        return shared
    compiled = tf.function(fn, jit_compile=True, autograph=False)

    def run(inputs):
        rows = tf.shape(inputs["input_mask"])[0]
        extra = bucketed_rows(rows) - rows
        padded = {key: tf.pad(value, [[0, extra], [0, 0]])
                  for key, value in inputs.items()}
        return {key: value[:rows] for key, value in compiled(padded).items()}

    run.sequence_keys = sequence_keys
    return run


def optional_text_b(text, text_b):
    """`text_b`, or empty strings when it is an empty tensor (no pairs).

    Fails with a clear message when a non-empty `text_b` does not hold one
    string per `text`.
    """
    text_b = preprocessing.checked_texts(text_b, "text_b")
    has_pairs = tf.size(text_b) > 0
    with tf.control_dependencies([tf.cond(
            has_pairs, lambda: _check_pair_batch(text, text_b), tf.no_op)]):
        return tf.cond(has_pairs, lambda: tf.identity(text_b),
                       lambda: tf.fill(tf.shape(text), ""))


def build_serving_model(pretrainer, preprocessor, top_k=5, assets=None,
                        serving_shape="dynamic", compile_with_xla=False):
    """The end-to-end text-in model (see the module docstring).

    Args:
        pretrainer: an `albert_tf.AlbertPretrainer` with trained weights, in
            its serving precision (`albert_tf.models.serving_copy`).
        preprocessor: an `albert_tf.layers.preprocessing.TextPreprocessor`.
        top_k: K of `fill_mask`.
        assets: optional dict of attribute name -> file path saved as assets.
        serving_shape: "dynamic" (pad each batch to its longest row, rounded
            up to a multiple of 8) or "fixed" (always `max_seq_length`).
        compile_with_xla: run the encoder compiled by XLA (`model_runner`).

    Returns:
        `(root, signatures)` for `tf.saved_model.save`.

    Raises:
        ValueError: an unknown `serving_shape`.
    """
    dynamic = preprocessing.check_serving_shape(serving_shape) == "dynamic"
    encoder = pretrainer.encoder
    root = _new_root(pretrainer.variables)
    root.preprocessor = preprocessor
    _add_assets(root, assets)
    top_k = min(int(top_k), pretrainer.config.vocab_size)

    def encoder_outputs(inputs):
        outputs = encoder(inputs, training=False)
        return {"pooled_output": _float32(outputs["pooled_output"]),
                "sequence_output": _float32(outputs["sequence_output"])}

    encoder_outputs.sequence_keys = ("sequence_output",)
    run_encoder = model_runner(encoder_outputs, compile_with_xla)

    def encode(text, text_b=None):
        text = preprocessing.checked_texts(text, "text")
        inputs = preprocessor.encode(text, text_b, pad_to_longest=dynamic)
        outputs = (run_by_length(run_encoder, inputs) if dynamic
                   else run_encoder(inputs))
        outputs["input_mask"] = inputs["input_mask"]
        return outputs

    @tf.function(autograph=False, input_signature=[_STRINGS, _STRINGS])
    def serve(text, text_b=tf.constant([], tf.string)):
        # An empty `text_b` tensor means "no second segment" for every row.
        text = preprocessing.checked_texts(text, "text")
        return encode(text, optional_text_b(text, text_b))

    @tf.function(autograph=False, input_signature=[_STRINGS])
    def serve_single(text):
        return encode(text)

    @tf.function(autograph=False, input_signature=[_STRINGS])
    def fill_mask(text):
        return fill_mask_lib.fill_mask_outputs(
            pretrainer, preprocessor,
            preprocessing.checked_texts(text, "text"),
            top_k, dynamic,
            encode=lambda inputs: run_encoder(inputs)["sequence_output"])

    @tf.function(autograph=False, input_signature=[_STRINGS, _STRINGS])
    def sop(text, text_b):
        text = preprocessing.checked_texts(text, "text")
        text_b = preprocessing.checked_texts(text_b, "text_b")
        with tf.control_dependencies([_check_pair_batch(text, text_b)]):
            inputs = preprocessor.encode(text, text_b,
                                         pad_to_longest=dynamic)
        pooled = (run_by_length(run_encoder, inputs) if dynamic
                  else run_encoder(inputs))["pooled_output"]
        logits = _float32(pretrainer.sop_head(pooled))
        return {"sop_logits": logits,
                "sop_probabilities": tf.nn.softmax(logits)}

    root.serve = serve
    root.serve_single = serve_single
    root.fill_mask = fill_mask
    root.sop = sop
    signatures = {"serving_default": serve, "serving_single": serve_single,
                  "fill_mask": fill_mask, "sop": sop}
    return root, signatures


def _with_default(outputs):
    outputs = dict(outputs)
    outputs["default"] = outputs["pooled_output"]
    return outputs


def build_encoder_model(encoder, assets=None):
    """The TF-Hub-style encoder SavedModel (see the module docstring).

    Args:
        encoder: an `albert_tf.AlbertEncoder`.
        assets: optional dict of attribute name -> file path saved as assets.

    Returns:
        `(root, signatures)` for `tf.saved_model.save`.
    """

    # The encoder is traced once per mode; `__call__` and the signature
    # call these two functions.
    def encoder_function(training):
        return tf.function(
            lambda inputs: _with_default(_encoder_outputs(
                encoder, checked_encoder_inputs(inputs, encoder.config),
                training)),
            input_signature=[_ENCODER_SPEC], autograph=False)

    serve, serve_training = encoder_function(False), encoder_function(True)

    class EncoderRoot(tf.__internal__.tracking.AutoTrackable):

        @tf.function(autograph=False)
        def __call__(self, inputs, training=False):
            return (serve_training if training else serve)(inputs)

    root = EncoderRoot()
    root.variables = list(encoder.variables)
    root.trainable_variables = list(encoder.trainable_variables)
    root.non_trainable_variables = list(encoder.non_trainable_variables)
    root.regularization_losses = []
    _add_assets(root, assets)
    root.serve = serve
    root.serve_training = serve_training
    for training in (False, True):
        root.__call__.get_concrete_function(_ENCODER_SPEC, training)

    @tf.function(autograph=False, input_signature=[_IDS, _IDS, _IDS])
    def serving_default(input_word_ids, input_mask, input_type_ids):
        outputs = serve({"input_word_ids": input_word_ids,
                         "input_mask": input_mask,
                         "input_type_ids": input_type_ids})
        return {key: outputs[key]
                for key in ("pooled_output", "sequence_output", "default")}

    return root, {"serving_default": serving_default}


class _Tokenize(tf.Module):
    """`preprocessor.tokenize`, with `get_special_tokens_dict`."""

    def __init__(self, preprocessor):
        super().__init__(name="tokenize")
        self._preprocessor = preprocessor

    @tf.function(autograph=False, input_signature=[_STRINGS])
    def __call__(self, text):
        return self._preprocessor.tokenize(
            preprocessing.checked_texts(text))

    @tf.function(autograph=False, input_signature=[])
    def get_special_tokens_dict(self):
        return {
            "vocab_size": self._preprocessor.vocab_size(),
            "start_of_sequence_id": tf.constant(preprocessing.CLS_ID),
            "end_of_segment_id": tf.constant(preprocessing.SEP_ID),
            "padding_id": tf.constant(preprocessing.PAD_ID),
            "mask_id": tf.constant(preprocessing.MASK_ID),
        }


class _PackInputs(tf.Module):
    """`preprocessor.bert_pack_inputs(segments, seq_length)`."""

    def __init__(self, preprocessor):
        super().__init__(name="bert_pack_inputs")
        self._preprocessor = preprocessor
        for count in (1, 2):
            self.__call__.get_concrete_function([_RAGGED_IDS] * count)
            self.__call__.get_concrete_function(
                [_RAGGED_IDS] * count, tf.TensorSpec([], tf.int32))

    @tf.function(autograph=False)
    def __call__(self, segments, seq_length=None):
        if len(segments) not in (1, 2):
            raise ValueError("bert_pack_inputs takes one or two segments. "
                             "Received: %d" % len(segments))
        if seq_length is None:
            seq_length = self._preprocessor.max_seq_length
        check = tf.debugging.assert_greater_equal(
            seq_length, preprocessing.MIN_SEQ_LENGTH,
            message="seq_length must be at least %d"
            % preprocessing.MIN_SEQ_LENGTH)
        with tf.control_dependencies([check]):
            seq_length = tf.identity(seq_length)
        second = segments[1] if len(segments) == 2 else None
        return self._preprocessor.pack(segments[0], second, seq_length)


def build_preprocessor_model(preprocessor, assets=None):
    """The TF-Hub-style preprocessor SavedModel (see the module docstring).

    Args:
        preprocessor: an `albert_tf.layers.preprocessing.TextPreprocessor`.
        assets: optional dict of attribute name -> file path saved as assets.

    Returns:
        `(root, signatures)` for `tf.saved_model.save`.
    """

    class PreprocessorRoot(tf.__internal__.tracking.AutoTrackable):

        @tf.function(autograph=False, input_signature=[_STRINGS])
        def __call__(self, text):
            return preprocessor.encode(
                preprocessing.checked_texts(text))

    root = PreprocessorRoot()
    root.preprocessor = preprocessor
    root.tokenize = _Tokenize(preprocessor)
    root.bert_pack_inputs = _PackInputs(preprocessor)
    _add_assets(root, assets)

    return root, {"serving_default": root.__call__}
