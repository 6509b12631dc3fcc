"""Whole pretraining step throughput: this project's three ways to train vs
keras-hub at its fastest, plus the machine's matmul peak.

`python -m benchmarks.pretraining_step [--repeats=5 --steps=3]` times
ALBERT-base steps (sequence 128, batch 8, 20 masked positions) of the
`Trainer`'s compiled loop, a `GradientTape` loop and `model.fit`, each in
float32 and bfloat16, beside keras-hub with and without XLA and a
`tf.matmul` peak, all in turns, and checks the targets (float32 rows >=
1.0x keras-hub, bfloat16 rows >= 2.0x where the CPU has bfloat16 matmuls).
Rows, FLOP counting and results: docs/benchmarks.md#pretraining-step-rate.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from benchmarks.synthetic import step_flops  # noqa: E402
from benchmarks.synthetic import synthetic_batch  # noqa: E402

_REPEATS = flags.DEFINE_integer("repeats", 5, "Timing windows per row.")
_STEPS = flags.DEFINE_integer("steps", 3, "Steps per timing window.")
_BATCH = flags.DEFINE_integer("batch", 8, "Sequences per step.")
_SEQ = flags.DEFINE_integer("seq", 128, "Sequence length.")
_PREDICTIONS = flags.DEFINE_integer("predictions", 20, "Masked positions per sequence.")
_MATMUL = flags.DEFINE_integer("matmul_size", 2048, "Side of the square matmul.")
_ROWS = flags.DEFINE_list(
    "rows", ["driver_float32", "driver_bfloat16", "tape_float32",
             "tape_bfloat16", "fit_float32", "fit_bfloat16",
             "keras_hub_float32_xla", "keras_hub_float32"],
    "Which model rows to run (driver_*_xla rows also exist).")


def driver_row(config, features, dtype, steps, jit_compile=False):
    """A callable running `steps` steps of the driver's compiled loop."""
    from albert_tf.training import pretraining as pretraining_lib
    from albert_tf.training.options import PretrainingOptions
    from albert_tf.training.trainer import build_trainer

    options = PretrainingOptions(
        input_file="unused", output_dir="unused", config=config,
        train_batch_size=features["input_word_ids"].shape[0],
        max_seq_length=features["input_word_ids"].shape[1],
        max_predictions_per_seq=features["masked_lm_positions"].shape[1],
        num_train_steps=10**6, num_warmup_steps=10, dtype=dtype,
        jit_compile=jit_compile)
    trainer = build_trainer(pretraining_lib.PretrainingTask(options), options)
    train_loop = trainer.compiled_loop()
    dataset = tf.data.Dataset.from_tensors(features).repeat()
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    num = tf.constant(steps, tf.int32)
    return lambda: train_loop(iterator, num)[0].numpy()


def _model_inputs(features):
    from albert_tf.training.pretraining import MODEL_INPUTS

    return {name: features[name] for name in MODEL_INPUTS}


def tape_row(config, features, dtype, steps):
    """A callable running `steps` steps of a user's `GradientTape` loop."""
    from albert_tf import AlbertPretrainer
    from albert_tf.training import losses

    model = AlbertPretrainer(config, dtype=_policy(dtype))
    optimizer = keras.optimizers.Adam(1e-4)
    inputs = _model_inputs(features)
    model(inputs)
    optimizer.build(model.trainable_variables)

    @tf.function
    def loop():
        for _ in tf.range(steps):
            with tf.GradientTape() as tape:
                loss = losses.pretraining_loss(model(inputs, training=True),
                                               features)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply(grads, model.trainable_variables)
        return loss

    return lambda: loop().numpy()


def _policy(dtype):
    return "mixed_bfloat16" if dtype == "bfloat16" else "float32"


def fit_row(config, features, dtype, steps):
    """A callable running `steps` steps of `model.fit` (Keras defaults)."""
    from albert_tf import AlbertPretrainer
    from albert_tf.training import losses

    class Pretraining(keras.Model):
        """`AlbertPretrainer` with the official loss, for `fit`."""

        def __init__(self):
            super().__init__()
            self.pretrainer = AlbertPretrainer(config, dtype=_policy(dtype))

        def call(self, inputs, training=False):
            return self.pretrainer(inputs, training=training)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            return losses.pretraining_loss(y_pred, y)

    model = Pretraining()
    model.compile(optimizer=keras.optimizers.Adam(1e-4))
    labels = {k: features[k] for k in ("masked_lm_ids", "masked_lm_weights",
                                       "next_sentence_labels")}
    # Each timing window is one `fit` call, and each call makes (and at its
    # end deletes) an iterator of the dataset. With tf.data's autotuning on,
    # deleting it waits for the autotuner's next wake-up, whose period
    # doubles from 10 ms: a call of a few steps then ends after exactly
    # 10.23 s or 20.47 s of wall time, whatever its steps took. One batch
    # repeated has nothing to tune, so autotuning is off here.
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = tf.data.Dataset.from_tensors(
        (_model_inputs(features), labels)).repeat().with_options(options)
    return lambda: model.fit(dataset, epochs=1, steps_per_epoch=steps,
                             shuffle=False, verbose=0)


def keras_hub_row(config, features, steps, jit_compile=True):
    """A callable running `steps` keras-hub training steps."""
    import keras_hub
    from keras_hub.layers import MaskedLMHead

    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        embedding_dim=config.embedding_size, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=0.0,
        max_sequence_length=config.max_position_embeddings)
    mlm_head = MaskedLMHead(vocabulary_size=config.vocab_size,
                            token_embedding=backbone.token_embedding,
                            intermediate_activation="gelu")
    sop_head = keras.layers.Dense(2)
    optimizer = keras.optimizers.Adam(1e-4)
    inputs = {"token_ids": features["input_word_ids"],
              "segment_ids": features["input_type_ids"],
              "padding_mask": features["input_mask"]}
    outputs = backbone(inputs)
    mlm_head(outputs["sequence_output"], features["masked_lm_positions"])
    sop_head(outputs["pooled_output"])
    variables = (backbone.trainable_variables + mlm_head.trainable_variables
                 + sop_head.trainable_variables)
    optimizer.build(variables)
    mlm_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            out = backbone(inputs, training=True)
            logits = mlm_head(out["sequence_output"], features["masked_lm_positions"])
            loss = mlm_loss(features["masked_lm_ids"], logits,
                            sample_weight=features["masked_lm_weights"])
            loss += mlm_loss(features["next_sentence_labels"],
                             sop_head(out["pooled_output"]))
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    @tf.function
    def loop():
        for _ in tf.range(steps):
            loss = step()
        return loss

    return lambda: loop().numpy()


MATMUL_INNER = 8


def matmul_rows(size, dtype):
    """Callables running `MATMUL_INNER` `size`^2 matmuls, XLA and not."""
    # Distinct operands: identical matmuls would be computed once.
    a = tf.cast(tf.random.normal((MATMUL_INNER, size, size)), dtype)
    b = tf.cast(tf.random.normal((size, size)), dtype)
    runs = {}
    for jit_compile in (True, False):
        @tf.function(jit_compile=jit_compile)
        def run(a, b):
            acc = tf.zeros((size, size), dtype)
            for i in range(MATMUL_INNER):
                acc += tf.matmul(a[i], b)
            return acc

        runs[jit_compile] = lambda run=run: run(a, b).numpy()
    return runs


def _build_row(row, config, features, steps):
    """`(callable, dtype of its matmul peak)` of a row name."""
    if row.startswith("keras_hub_float32"):
        return keras_hub_row(config, features, steps,
                             jit_compile=row.endswith("_xla")), tf.float32
    kind, _, rest = row.partition("_")
    dtype, _, xla = rest.partition("_")
    if dtype not in ("float32", "bfloat16") or xla not in ("", "xla") or (
            xla and kind != "driver"):
        raise app.UsageError(f"Unknown row {row!r}")
    if kind == "driver":
        run = driver_row(config, features, dtype, steps, jit_compile=bool(xla))
    elif kind == "tape":
        run = tape_row(config, features, dtype, steps)
    elif kind == "fit":
        run = fit_row(config, features, dtype, steps)
    else:
        raise app.UsageError(f"Unknown row {row!r}")
    return run, tf.as_dtype(dtype)


def main(argv):
    del argv
    from albert_tf import AlbertConfig
    from albert_tf.training import hardware

    config = AlbertConfig.from_preset("albert_base_v2")
    batch, seq, predictions = _BATCH.value, _SEQ.value, _PREDICTIONS.value
    features = synthetic_batch(config, batch, seq, predictions)
    flops = step_flops(config, batch, seq, predictions)
    steps, size = _STEPS.value, _MATMUL.value
    runs, peak_of = {}, {}
    for dtype in (tf.float32, tf.bfloat16):
        for jit_compile, run in matmul_rows(size, dtype).items():
            runs[("matmul", dtype.name, jit_compile)] = run
    for row in _ROWS.value:
        runs[row], peak_of[row] = _build_row(row, config, features, steps)
    # Every row once first (compiles), then timing windows round-robin.
    medians = hardware.median_seconds_in_turns(runs, _REPEATS.value)
    # The reachable rate: the faster of XLA and TensorFlow's kernel.
    peak = {dtype: max(MATMUL_INNER * 2 * size ** 3
                       / medians[("matmul", dtype.name, jit)]
                       for jit in (True, False))
            for dtype in (tf.float32, tf.bfloat16)}
    seconds_of = {row: medians[row] / steps for row in _ROWS.value}
    hub = [seconds_of[r] for r in seconds_of if r.startswith("keras_hub")]
    best_hub = min(hub) if hub else None
    print(f"Hardware: {hardware.describe()}")
    print(f"ALBERT-base pretraining step: batch {batch} x seq {seq}, "
          f"{predictions} predictions/seq, {flops / 1e9:.1f} GFLOP/step; "
          f"medians of {_REPEATS.value} windows x {_STEPS.value} steps")
    print(f"{'row':24s} {'ms/step':>9s} {'tokens/s':>9s} {'GFLOP/s':>8s} "
          f"{'% matmul':>9s} {'vs best keras-hub':>18s}")
    for name, seconds in seconds_of.items():
        rate = flops / seconds
        ratio = f"{best_hub / seconds:.2f}x" if best_hub else "-"
        print(f"{name:24s} {seconds * 1e3:9.1f} {batch * seq / seconds:9.0f} "
              f"{rate / 1e9:8.1f} {100 * rate / peak[peak_of[name]]:8.0f}% "
              f"{ratio:>18s}")
    for dtype, rate in peak.items():
        print(f"{'tf.matmul ' + dtype.name:24s} {'':9s} {'':9s} {rate / 1e9:8.1f} "
              f"{'100%':>9s}")
    bf16 = "yes" if hardware.fast_bfloat16() else "no"
    print(f"Targets: float32 rows >= 1.00x; bfloat16 rows >= 2.00x where the "
          f"hardware has bfloat16 matmuls (here: {bf16}).")


if __name__ == "__main__":
    app.run(main)
